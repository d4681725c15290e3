// Routed experts: the host's routing of a batch, the store's protocol for the chosen experts,
// the GPU level of the expert cache beside the unit that computes the rest, and the guesses of
// the next layer's experts.
#include <algorithm>

#include "engine/engine.h"
#include "engine/op_figures.h"

namespace strata::engine {

Result<void> Engine::set_up_experts(const EngineOptions& options) {
    const size_t n_expert = hp_.n_expert, k = hp_.n_expert_used, rows = max_batch_;
    router_logits_.resize(rows * n_expert);
    choice_.resize(rows * k);
    weight_.resize(rows * k);
    users_.reserve(rows * k);
    user_weights_.reserve(rows * k);
    jobs_.reserve(n_expert);
    cpu_jobs_.reserve(n_expert);
    gpu_jobs_.reserve(n_expert);
    gpu_views_.reserve(n_expert);
    expert_ids_.reserve(n_expert);
    guess_.resize(k);
    next_logits_.resize(n_expert);
    guess_weight_.resize(k);
    routing_.probs.reserve(n_expert);
    routing_.selection.reserve(n_expert);
    routing_.groups.reserve(std::max<size_t>(hp_.n_expert_group, 1));
    routing_.order.reserve(n_expert);
    stats_.moe.assign(hp_.n_layer, {});
    if (table_.expert_level_unit < 0) return {};
    const ComputeUnit& u = table_.units[size_t(table_.expert_level_unit)];
    if (u.expert_entries == 0) return {};
    // The level serves the layers the table marks; their experts are computed beside it.
    Backend* gpu = unit(table_.expert_level_unit);
    ExpertEntryMemory* memory = gpu->expert_entry_memory();
    if (!memory) return err(std::string(gpu->name()) + " keeps no expert entries");
    std::vector<char> serves(hp_.n_layer, 0);
    for (size_t l = 0; l < serves.size(); ++l) serves[l] = table_.layers[l].expert_level;
    const uint32_t prefetch = std::min(hp_.n_expert_used, options.tuning.gpu_expert_prefetch);
    return store_.add_gpu_level(*memory, u.expert_entries, u.expert_entry_bytes, prefetch, serves);
}

bool Engine::staged_experts(const LayerArgs& a, const TensorView& router, bool norm_weights) {
    const int layer = a.layer;
    const auto stack = store_.resident_experts(layer);
    if (!stack) return false;
    Backend* on = unit(table_.layers[size_t(layer)].staged_on);
    const int64_t n = a.n;
    const int k = int(hp_.n_expert_used);
    // Each stack from its first expert to the end of its last.
    const auto span = [&](const TensorView& v, size_t stride) {
        return stride * size_t(stack->n_expert - 1) + size_t(view_bytes(v));
    };
    const ExpertView& e = stack->first;
    const TensorView& router_bias = a.w.bias(TensorRole::MoeRouter);
    const TensorView& selection_bias = a.w.bias(TensorRole::MoeRouterBias);
    // The router, the stacked matrices and (where the family has them) the biases, all experts'
    // rows of each from expert 0's.
    StagePiece pieces[9];
    TensorView copies[9];
    size_t count = 0;
    const auto piece = [&](const TensorView& v, size_t bytes) -> TensorView* {
        if (!v.present()) return nullptr;
        pieces[count] = {&v, bytes};
        return &copies[count++];
    };
    const auto bias_span = [&](const TensorView& b) {
        return b.row_bytes * size_t(stack->n_expert);
    };
    TensorView* const router_copy = piece(router, size_t(view_bytes(router)));
    TensorView* const router_bias_copy = piece(router_bias, size_t(view_bytes(router_bias)));
    TensorView* const selection_bias_copy =
        piece(selection_bias, size_t(view_bytes(selection_bias)));
    TensorView* const gate = piece(e.gate, span(e.gate, stack->gate_stride));
    TensorView* const up = piece(e.up, span(e.up, stack->up_stride));
    TensorView* const down = piece(e.down, span(e.down, stack->down_stride));
    TensorView* const gate_bias = piece(e.gate_bias, bias_span(e.gate_bias));
    TensorView* const up_bias = piece(e.up_bias, bias_span(e.up_bias));
    TensorView* const down_bias = piece(e.down_bias, bias_span(e.down_bias));
    if (!on->stage({pieces, count}, {copies, count})) return false;
    ExpertStack staged_stack = *stack;
    ExpertView& se = staged_stack.first;
    se.gate = *gate;
    se.up = *up;
    se.down = *down;
    if (gate_bias) se.gate_bias = *gate_bias;
    if (up_bias) se.up_bias = *up_bias;
    if (down_bias) se.down_bias = *down_bias;
    if (on != be_) cross(Act::Normed, be_, on, n);
    if (!on->routed_experts(*router_copy, router_bias_copy ? *router_bias_copy : TensorView{},
                            selection_bias_copy ? *selection_bias_copy : TensorView{}, staged_stack,
                            k, norm_weights, Act::Normed, Act::Out, n)) {
        return false;
    }
    if (on != be_) cross(Act::Out, on, be_, n);
    for (size_t i = 0; i < count; ++i) stats_.staged_bytes += pieces[i].bytes;
    MoeLayerStats& stats = stats_.moe[size_t(layer)];
    stats.token_choices += uint64_t(n * k);
    OpFigures& figures = stats_.ops[size_t(Op::Experts)];
    figures.bytes +=
        view_bytes(router) + expert_bytes(e) * double(std::min<int64_t>(n * k, stack->n_expert));
    figures.flops += view_flops(router, n) + expert_flops(e, 1) * double(n * k);
    return true;
}

// Routes the batch (Normed) to its top experts, fetches each chosen expert from the store once
// for all the tokens that chose it, and leaves the weighted sum of their outputs in Out.
Result<void> Engine::routed_experts(const LayerArgs& a, const TensorView& router,
                                    bool norm_weights) {
    const int layer = a.layer;
    const int64_t n = a.n;
    MoeConfig cfg = moe_config(hp_, norm_weights, store_.selection_bias(layer));
    cfg.forced = forced_routing_.get();
    cfg.pos0 = a.runs.front().pos0;
    const int k = cfg.n_used;
    MoeLayerStats& stats = stats_.moe[size_t(layer)];
    OpFigures& figures = stats_.ops[size_t(Op::Experts)];
    figures.bytes += view_bytes(router);
    figures.flops += view_flops(router, n);
    // A batch routed and computed on a device: which experts were chosen stays there, counted as
    // n * k distinct ones (at most all of them), each token through its k.
    const auto count_on_device = [&](const ExpertStack& stack) {
        stats.token_choices += uint64_t(n * k);
        const ExpertView& e = stack.first;
        const double one = view_bytes(e.gate) + view_bytes(e.up) + view_bytes(e.down);
        figures.bytes += one * double(std::min<int64_t>(n * k, cfg.n_expert));
        figures.flops +=
            (view_flops(e.gate, 1) + view_flops(e.up, 1) + view_flops(e.down, 1)) * double(n * k);
    };
    // The unit the table names computes the experts; when it is not the layer's (a plan that
    // keeps them and their router in RAM for the CPU beside a GPU) the normalized input crosses
    // to it, once, and the weighted sum comes back. A prompt batch that uses most of them may
    // instead stage them onto a faster unit (the table's PromptStaging::Experts).
    const LayerExecution& plan = table_.layers[size_t(layer)];
    Backend* xb = unit(plan.experts_unit);
    if (plan.prompt == PromptStaging::Experts && !cfg.forced && table_.stages(layer, n) &&
        staged_experts(a, router, norm_weights)) {
        return {};
    }
    if (xb != be_) cross(Act::Normed, be_, xb, n);
    if (!cfg.forced && xb == be_) {
        // A backend that holds every expert routes and runs them without the host.
        if (const auto stack = store_.resident_experts(layer)) {
            if (be_->routed_experts(router, a.w.bias(TensorRole::MoeRouter),
                                    a.w.bias(TensorRole::MoeRouterBias), *stack, k, norm_weights,
                                    Act::Normed, Act::Out, n)) {
                count_on_device(*stack);
                return {};
            }
        }
    }
    // The router lies with the experts (the plan keeps them together).
    Backend* rb = xb;
    if (!rb->can_read(router.where)) {
        return err(std::string(rb->name()) + " cannot read the router of layer " +
                   std::to_string(layer) + " where it is");
    }
    // The next layer's router applied to this input (its last token's) guesses which experts it
    // will choose; for one token, in one pass with this layer's router.
    const TensorView& router_bias = a.w.bias(TensorRole::MoeRouter);
    const HostProjection own{&router, router_logits_.data(), &router_bias};
    if (const TensorView* next = next_router(layer, n, rb); next && n == 1) {
        const HostProjection both[] = {
            own, {next, next_logits_.data(), store_.resident_router_bias(layer + 1)}};
        rb->project_to_host(both, Act::Normed, 0, 1);
    } else {
        rb->project_to_host({&own, 1}, Act::Normed, 0, n);
        if (next) {
            const HostProjection guess{next, next_logits_.data(),
                                       store_.resident_router_bias(layer + 1)};
            rb->project_to_host({&guess, 1}, Act::Normed, n - 1, 1);
        }
    }
    for (int64_t t = 0; t < n; ++t) {
        const float* logits = &router_logits_[size_t(t * cfg.n_expert)];
        if (cfg.forced) {
            force_route(logits, cfg, cfg.forced->choices(cfg.pos0 + t, layer),
                        &choice_[size_t(t * k)], &weight_[size_t(t * k)], routing_);
        } else {
            route_token(logits, cfg, &choice_[size_t(t * k)], &weight_[size_t(t * k)], routing_);
        }
    }
    const std::span<const int32_t> choices(choice_.data(), size_t(n * k));
    // Each expert once, for every (token, slot) that chose it: the slots of all chosen experts,
    // expert by expert.
    users_.clear();
    user_weights_.clear();
    jobs_.clear();
    expert_ids_.clear();
    for (int e = 0; e < cfg.n_expert; ++e) {
        const size_t first = users_.size();
        for (int64_t i = 0; i < n * k; ++i) {
            if (choice_[size_t(i)] != e) continue;
            users_.push_back(i);
            user_weights_.push_back(weight_[size_t(i)]);
        }
        if (users_.size() == first) continue;
        const size_t m = users_.size() - first;
        jobs_.push_back({ExpertView{}, std::span<const int64_t>(users_).subspan(first, m),
                         std::span<const float>(user_weights_).subspan(first, m)});
        expert_ids_.push_back(e);
    }
    std::span<const int32_t> guess;
    if (guessing_) {
        const MoeConfig next = moe_config(hp_, false, store_.selection_bias(layer + 1));
        route_token(next_logits_.data(), next, guess_.data(), guess_weight_.data(), routing_);
        guess = guess_;
    }
    const WeightStore::ExpertBatch batch{layer, choices, k, expert_ids_, guess};
    const bool split = store_.route_experts(batch, gpu_views_) > 0;
    STRATA_TRY(compute_experts(layer, n, k, xb, store_.resident_experts(layer).has_value(), split));
    stats.expert_loads += jobs_.size();
    stats.token_choices += uint64_t(n * k);
    return {};
}

const TensorView* Engine::next_router(int layer, int64_t n, Backend* rb) {
    guessing_ = false;
    const int next = layer + 1;
    if (n <= 0 || next >= int(hp_.n_layer) || !store_.wants_guesses(next)) return nullptr;
    const TensorView* router = store_.resident_router(next);
    if (!router || !rb->can_read(router->where)) return nullptr;
    if (const TensorView* bias = store_.resident_router_bias(next);
        bias && !rb->can_read(bias->where)) {
        return nullptr;
    }
    guessing_ = true;
    return router;
}

// A resident store's experts stay where they are: all of them are handed to the backend at once,
// to run as one job. A streaming store's are computed one by one as their reads complete, each
// released before the next is waited for. With the GPU level serving some, the GPU's share is
// queued first and runs beside the CPU's; the CPU's partial sum then joins it on the GPU (Side,
// free until the shared expert's turn).
Result<void> Engine::compute_experts(int layer, int64_t n, int k, Backend* xb, bool together,
                                     bool split) {
    OpFigures& figures = stats_.ops[size_t(Op::Experts)];
    const auto count = [&](const ExpertView& ev, int64_t m) {
        figures.bytes += view_bytes(ev.gate) + view_bytes(ev.up) + view_bytes(ev.down);
        figures.flops += view_flops(ev.gate, m) + view_flops(ev.up, m) + view_flops(ev.down, m);
    };
    const auto on_gpu = [&](size_t j) { return split && gpu_views_[j] != nullptr; };
    if (split) {
        gpu_jobs_.clear();
        for (size_t j = 0; j < jobs_.size(); ++j) {
            if (!on_gpu(j)) continue;
            jobs_[j].expert = *gpu_views_[j];
            count(jobs_[j].expert, int64_t(jobs_[j].slots.size()));
            gpu_jobs_.push_back(jobs_[j]);
        }
        be_->begin_experts(n, k, true);
        be_->experts(gpu_jobs_, Act::Normed, [] {});
        be_->end_experts(Act::Out, n);
    }
    // With the GPU's part of this layer queued, the GPU level may copy into any entry: the next
    // layer's guesses go first, while the CPU's workers start on its part. Releasing an expert
    // offers it to the level.
    Result<void> prefetched;
    const auto prefetch = [&] { prefetched = store_.gpu_share_queued(layer); };
    xb->begin_experts(n, k, split);
    if (!together) {
        prefetch();
        STRATA_TRY(prefetched);
    }
    cpu_jobs_.clear();
    for (size_t j = 0; j < jobs_.size(); ++j) {
        if (on_gpu(j)) continue;
        const int e = expert_ids_[j];
        STRATA_ASSIGN(jobs_[j].expert, store_.acquire_expert(layer, e));
        count(jobs_[j].expert, int64_t(jobs_[j].slots.size()));
        if (together) {
            cpu_jobs_.push_back(jobs_[j]);
            continue;
        }
        xb->expert(jobs_[j].expert, jobs_[j].slots, jobs_[j].weights, Act::Normed);
        STRATA_TRY(store_.release_expert(layer, e));
    }
    if (together) {
        xb->experts(cpu_jobs_, Act::Normed, prefetch);
        STRATA_TRY(prefetched);
        for (size_t j = 0; j < jobs_.size(); ++j) {
            if (on_gpu(j)) continue;
            STRATA_TRY(store_.release_expert(layer, expert_ids_[j]));
        }
    }
    xb->end_experts(Act::Out, n);
    if (xb == be_) return {};
    if (!split) {
        cross(Act::Out, xb, be_, n);
        return {};
    }
    xb->read_act(Act::Out, crossing_.data(), n, hp_.n_embd);
    be_->write_act(Act::Side, crossing_.data(), n, hp_.n_embd);
    be_->add(Act::Out, Act::Side, n);
    return {};
}

}  // namespace strata::engine
