// The blocks family functions are made of (attention, dense FFN, mixture of experts), and the
// staging of a prompt batch's matrices onto the unit the execution table names.
#include <algorithm>
#include <array>
#include <iterator>

#include "engine/engine.h"
#include "engine/op_figures.h"

namespace strata::engine {

namespace {
// A layer's matrices and biases that a staged prompt batch computes elsewhere, in the order its
// operations use them.
constexpr TensorRole kStagedRoles[] = {
    TensorRole::AttnQ,   TensorRole::AttnK, TensorRole::AttnV,  TensorRole::AttnOutput,
    TensorRole::FfnGate, TensorRole::FfnUp, TensorRole::FfnDown};
constexpr size_t kMaxStagedPieces = 2 * std::size(kStagedRoles);
}  // namespace

bool Engine::stage_matrices(Backend* on, const LayerView& w) {
    std::array<StagePiece, kMaxStagedPieces> pieces{};
    std::array<TensorView, kMaxStagedPieces> copies{};
    size_t count = 0;
    for (TensorRole r : kStagedRoles) {
        for (const TensorView* v : {&w.weight(r), &w.bias(r)}) {
            if (v->present()) pieces[count++] = {v, size_t(view_bytes(*v))};
        }
    }
    if (!on->stage({pieces.data(), count}, {copies.data(), count})) return false;
    staged_layer_ = w;
    size_t at = 0;
    for (TensorRole r : kStagedRoles) {
        const size_t i = size_t(r);
        if (w.weights[i].present()) staged_layer_.weights[i] = copies[at++];
        if (w.biases[i].present()) staged_layer_.biases[i] = copies[at++];
    }
    // The matrices' bytes, as the plan counts a batch's crossing (biases are a rounding error).
    for (TensorRole r : kStagedRoles) stats_.staged_bytes += uint64_t(view_bytes(w.weight(r)));
    return true;
}

const TensorView& Engine::staged(const LayerView& w, const TensorView& v) const {
    if (!staged_on_) return v;
    // v is one of w's views: the same slot of the staged copy.
    const auto in = [&](const auto& arr) {
        return &v >= arr.data() && &v < arr.data() + arr.size();
    };
    if (in(w.weights)) return staged_layer_.weights[size_t(&v - w.weights.data())];
    if (in(w.biases)) return staged_layer_.biases[size_t(&v - w.biases.data())];
    return v;
}

void Engine::project(std::span<const LinearJob> jobs, Act in, int64_t in_cols,
                     std::span<const int64_t> out_cols, int64_t n) {
    if (!staged_on_) return be_->linear(jobs, in, n);
    cross(in, be_, staged_on_, n, in_cols);
    staged_on_->linear(jobs, in, n);
    for (size_t j = 0; j < jobs.size(); ++j) cross(jobs[j].out, staged_on_, be_, n, out_cols[j]);
}

Result<void> Engine::attention_block(const LayerArgs& a) {
    const int il = a.layer;
    const int64_t n = a.n, d = hp_.n_embd;
    const int64_t n_head = hp_.n_head_at(uint32_t(il)), n_head_kv = hp_.n_head_kv_at(uint32_t(il));
    const int64_t dq = n_head * hp_.head_dim_k, dk = n_head_kv * hp_.head_dim_k,
                  dv = n_head_kv * hp_.head_dim_v, da = n_head * hp_.head_dim_v;
    const LayerView& w = a.w;

    // A prompt batch of a layer whose matrices wait in RAM beside a faster unit: all of them
    // start crossing now, beside this unit's work (norms, attention).
    staged_on_ = nullptr;
    const LayerExecution& plan = table_.layers[size_t(il)];
    if (plan.prompt == PromptStaging::Matrices && table_.stages(il, n)) {
        Backend* on = unit(plan.staged_on);
        if (on != be_ && stage_matrices(on, w)) staged_on_ = on;
    }
    timed(Op::Elementwise,
          [&] { be_->rms_norm(Act::Hidden, w.weight(TensorRole::AttnNorm), Act::Normed, n); });
    dump("attn_norm", il, Act::Normed, n, d);
    const TensorView &wq = w.weight(TensorRole::AttnQ), &wk = w.weight(TensorRole::AttnK),
                     &wv = w.weight(TensorRole::AttnV), &wo = w.weight(TensorRole::AttnOutput);
    timed(
        Op::Projection,
        [&] {
            const LinearJob qkv[] = {
                {&staged(w, wq), &staged(w, w.bias(TensorRole::AttnQ)), Act::Q},
                {&staged(w, wk), &staged(w, w.bias(TensorRole::AttnK)), Act::K},
                {&staged(w, wv), &staged(w, w.bias(TensorRole::AttnV)), Act::V}};
            const int64_t widths[] = {dq, dk, dv};
            project(qkv, Act::Normed, d, widths, n);
        },
        view_bytes(wq) + view_bytes(wk) + view_bytes(wv),
        view_flops(wq, n) + view_flops(wk, n) + view_flops(wv, n));
    timed(Op::Elementwise, [&] {
        be_->rope_store_kv(il, w.weight(TensorRole::AttnQNorm), w.weight(TensorRole::AttnKNorm),
                           a.runs);
    });
    dump("Qcur", il, Act::Q, n, dq);
    dump("Kcur", il, Act::K, n, dk);
    dump("Vcur", il, Act::V, n, dv);

    // Each run reads its sequence's cached keys and values once; token t of a run scores and
    // weighs pos0 + t + 1 positions.
    double kv_bytes = 0, kv_flops = 0;
    const double kv_element = kv_type_ == KvType::F16 ? 2.0 : 34.0 / 32.0;
    for (const SeqRun& run : a.runs) {
        // A windowed layer reads its window and the batch (its ring) at most.
        const double seen =
            hp_.is_swa(uint32_t(il))
                ? double(std::min<int64_t>(run.pos0 + run.n, int64_t(hp_.n_swa) + run.n))
                : double(run.pos0 + run.n);
        kv_bytes += seen * double(dk + dv) * kv_element;
        kv_flops += 2.0 * double(n_head) * double(hp_.head_dim_k + hp_.head_dim_v) *
                    (double(run.n) * double(run.pos0) + double(run.n) * double(run.n + 1) / 2);
    }
    timed(
        Op::Attention, [&] { be_->attention(il, w.weight(TensorRole::AttnSinks), a.runs); },
        kv_bytes, kv_flops);
    dump("kqv_out", il, Act::AttnOut, n, da);
    timed(
        Op::Projection,
        [&] {
            const LinearJob out[] = {
                {&staged(w, wo), &staged(w, w.bias(TensorRole::AttnOutput)), Act::Out}};
            const int64_t widths[] = {d};
            project(out, Act::AttnOut, da, widths, n);
        },
        view_bytes(wo), view_flops(wo, n));
    be_->add(Act::Hidden, Act::Out, n);
    dump("ffn_inp", il, Act::Hidden, n, d);
    return {};
}

void Engine::ffn_norm(const LayerArgs& a) {
    const TensorRole norm =
        hp_.ffn_norm_is_post_attention ? TensorRole::AttnPostNorm : TensorRole::FfnNorm;
    timed(Op::Elementwise, [&] { be_->rms_norm(Act::Hidden, a.w.weight(norm), Act::Normed, a.n); });
    dump("ffn_norm", a.layer, Act::Normed, a.n, hp_.n_embd);
}

Result<void> Engine::dense_ffn_block(const LayerArgs& a) {
    const LayerView& w = a.w;
    ffn_norm(a);
    const TensorView &gate = w.weight(TensorRole::FfnGate), &up = w.weight(TensorRole::FfnUp),
                     &down = w.weight(TensorRole::FfnDown);
    timed(
        Op::Ffn,
        [&] {
            if (!staged_on_) return be_->swiglu_ffn(gate, up, down, Act::Normed, Act::Out, a.n);
            cross(Act::Normed, be_, staged_on_, a.n);
            staged_on_->swiglu_ffn(staged(w, gate), staged(w, up), staged(w, down), Act::Normed,
                                   Act::Out, a.n);
            cross(Act::Out, staged_on_, be_, a.n);
        },
        view_bytes(gate) + view_bytes(up) + view_bytes(down),
        view_flops(gate, a.n) + view_flops(up, a.n) + view_flops(down, a.n));
    staged_on_ = nullptr;
    dump("ffn_out", a.layer, Act::Out, a.n, hp_.n_embd);
    be_->add(Act::Hidden, Act::Out, a.n);
    return {};
}

Result<void> Engine::moe_ffn_block(const LayerArgs& a, bool norm_weights) {
    const int64_t n = a.n;
    const LayerView& w = a.w;
    ffn_norm(a);
    Result<void> r;
    timed(Op::Experts,
          [&] { r = routed_experts(a, w.weight(TensorRole::MoeRouter), norm_weights); });
    STRATA_TRY(r);
    if (w.weight(TensorRole::SharedGate).present()) {
        const TensorView &sg = w.weight(TensorRole::SharedGate),
                         &su = w.weight(TensorRole::SharedUp),
                         &sd = w.weight(TensorRole::SharedDown);
        timed(
            Op::Ffn,
            [&] {
                be_->swiglu_ffn(sg, su, sd, Act::Normed, Act::Side, n);
                const TensorView& gate = w.weight(TensorRole::SharedExpertGate);
                if (gate.present()) be_->sigmoid_gate(gate, Act::Normed, Act::Side, n);
                be_->add(Act::Out, Act::Side, n);
            },
            view_bytes(sg) + view_bytes(su) + view_bytes(sd),
            view_flops(sg, n) + view_flops(su, n) + view_flops(sd, n));
    }
    dump("ffn_out", a.layer, Act::Out, n, hp_.n_embd);
    be_->add(Act::Hidden, Act::Out, n);
    return {};
}

}  // namespace strata::engine
