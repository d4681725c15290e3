// The CUDA backend's routed experts: experts the host chose, one by one or (from the expert
// entries, the GPU level of the expert cache) as one job, and experts routed on the device
// (router, top-k and the chosen experts recorded as one op of a decode step).
#include <cassert>
#include <climits>
#include <cstddef>
#include <cstring>

#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/moe_route.h"

namespace strata::cuda_impl {

namespace {

// An expert's bias row in device memory, or null when it has none.
const float* bias_of(const TensorView& b) {
    return b.present() ? b.f32() : nullptr;
}

}  // namespace

void CudaBackend::begin_experts(int64_t n, int k, bool some_slots) {
    flush();
    experts_k_ = k;
    experts_n_ = n;
    staged_ = 0;
    // The slot staging is refilled from the start: the copies out of it must be done.
    STRATA_CUDA(cudaEventSynchronize(staging_free_));
    // Zeroed before the first expert scatters into it (none may: entries_job's direct sum).
    zero_slots_ = some_slots;
    direct_ = 0;
}

void CudaBackend::zero_slots() {
    if (!zero_slots_) return;
    zero_slots_ = false;
    const int64_t values = experts_n_ * experts_k_ * shapes_.d;
    STRATA_CUDA(cudaMemsetAsync(slot_out_.data(), 0, bytes(values), stream_));
}

void CudaBackend::expert(const ExpertView& e, std::span<const int64_t> slots,
                         std::span<const float> weights, Act in) {
    const int64_t m = int64_t(slots.size());
    const int64_t total = experts_n_ * experts_k_;
    assert(staged_ + m <= total && direct_ == 0);
    zero_slots();
    auto* ids_host = reinterpret_cast<int64_t*>(slot_staging_.data());
    auto* w_host = reinterpret_cast<float*>(ids_host + total);
    std::memcpy(ids_host + staged_, slots.data(), sizeof(int64_t) * size_t(m));
    std::memcpy(w_host + staged_, weights.data(), sizeof(float) * size_t(m));
    auto* ids_dev = reinterpret_cast<int64_t*>(slot_ids_.data()) + staged_;
    float* w_dev = reinterpret_cast<float*>(slot_weights_.data()) + staged_;
    STRATA_CUDA(cudaMemcpyAsync(ids_dev, ids_host + staged_, sizeof(int64_t) * size_t(m),
                                cudaMemcpyHostToDevice, stream_));
    STRATA_CUDA(cudaMemcpyAsync(w_dev, w_host + staged_, sizeof(float) * size_t(m),
                                cudaMemcpyHostToDevice, stream_));
    staged_ += m;
    const int64_t d = shapes_.d;
    float* x = dev(x_rows_);
    float* y = dev(y_rows_);
    gather_rows(act(in), ids_dev, experts_k_, m, d, x, stream_);
    profiled("expert", e.gate, m, [&] {
        ffn(e.gate, e.up, e.down, x, y, m, TensorType::F32, bias_of(e.gate_bias),
            bias_of(e.up_bias), bias_of(e.down_bias), glu_);
    });
    scatter_weighted(y, ids_dev, w_dev, m, d, dev(slot_out_), stream_);
}

void CudaBackend::experts(std::span<const ExpertJob> jobs, Act in, FunctionRef<void()> beside) {
    beside();  // the host's work first: the GPU's queue needs no thread of its own
    if (!entries_job(jobs, in)) {
        for (const ExpertJob& j : jobs) expert(j.expert, j.slots, j.weights, in);
    }
}

bool CudaBackend::entries_job(std::span<const ExpertJob> jobs, Act in) {
    if (jobs.empty() || !entries_.allocated()) return false;
    const ExpertView& first = jobs.front().expert;
    const auto same = [&](const TensorView& a, const TensorView& b) {
        return a.type == b.type && a.ne == b.ne && a.row_bytes == b.row_bytes;
    };
    int64_t m = 0;
    for (const ExpertJob& j : jobs) {
        const ExpertView& e = j.expert;
        const int64_t at = entries_.entry_of(e.gate);
        if (at < 0 || entries_.entry_of(e.up) != at || entries_.entry_of(e.down) != at ||
            !same(e.gate, first.gate) || !same(e.up, first.up) || !same(e.down, first.down) ||
            e.up.data - e.gate.data != first.up.data - first.gate.data ||
            e.down.data - e.gate.data != first.down.data - first.gate.data) {
            return false;
        }
        m += int64_t(j.slots.size());
    }
    const ExpertStack stack = entries_.stack(first);
    const int64_t total = experts_n_ * experts_k_;
    if (!expert_ffn_supports(stack) || staged_ + m > total || first.gate.rows() > shapes_.ff) {
        return false;
    }
    // The experts' biases: copied into the entries with their matrices (each slot's at its
    // entry, every entry_bytes apart), or rows of the layer's bias tensors, each slot's found
    // from its job's first row relative to the first job's (the entries number the matrices,
    // not the experts).
    ExpertBiases biases;
    auto* bias_ids_host = reinterpret_cast<int32_t*>(bias_staging_.data()) + staged_;
    auto* bias_ids_dev = reinterpret_cast<int32_t*>(bias_ids_.data()) + staged_;
    const bool any_bias =
        first.gate_bias.present() || first.up_bias.present() || first.down_bias.present();
    if (any_bias && entries_.entry_of(first.gate_bias) >= 0) {
        // In the entries: the same offset from its gate in every job's entry.
        const auto offset = [](const ExpertView& e, const TensorView ExpertView::*b) {
            return (e.*b).present() ? (e.*b).data - e.gate.data : std::ptrdiff_t(-1);
        };
        for (const ExpertJob& j : jobs) {
            for (const auto b :
                 {&ExpertView::gate_bias, &ExpertView::up_bias, &ExpertView::down_bias}) {
                if (offset(j.expert, b) != offset(first, b)) return false;
            }
        }
        const ExpertStack& entry0 = stack;  // its first expert is entry 0's
        const int64_t stride = int64_t(entries_.entry_bytes() / sizeof(float));
        biases.gate = bias_of(entry0.first.gate_bias);
        biases.up = bias_of(entry0.first.up_bias);
        biases.down = bias_of(entry0.first.down_bias);
        biases.gate_stride = biases.up_stride = biases.down_stride = stride;
        biases.ids = nullptr;  // the slots' entries number the biases too
    } else if (any_bias) {
        const auto row_of = [](const TensorView& b, const TensorView& b0, int64_t* row) {
            if (b.present() != b0.present()) return false;
            if (!b.present()) return true;
            const std::ptrdiff_t bytes = b.data - b0.data;
            if (b.row_bytes != b0.row_bytes || bytes % std::ptrdiff_t(b0.row_bytes) != 0) {
                return false;
            }
            const int64_t r = int64_t(bytes / std::ptrdiff_t(b0.row_bytes));
            if (*row != INT64_MIN && *row != r) return false;
            *row = r;
            return true;
        };
        int64_t u = 0;
        for (const ExpertJob& j : jobs) {
            int64_t row = INT64_MIN;
            if (!row_of(j.expert.gate_bias, first.gate_bias, &row) ||
                !row_of(j.expert.up_bias, first.up_bias, &row) ||
                !row_of(j.expert.down_bias, first.down_bias, &row)) {
                return false;  // biases not laid out as one tensor's rows: one by one
            }
            for (size_t i = 0; i < j.slots.size(); ++i) bias_ids_host[u++] = int32_t(row);
        }
        biases.gate = bias_of(first.gate_bias);
        biases.up = bias_of(first.up_bias);
        biases.down = bias_of(first.down_bias);
        biases.gate_stride = int64_t(first.gate_bias.row_bytes / sizeof(float));
        biases.up_stride = int64_t(first.up_bias.row_bytes / sizeof(float));
        biases.down_stride = int64_t(first.down_bias.row_bytes / sizeof(float));
        biases.ids = bias_ids_dev;
        STRATA_CUDA(cudaMemcpyAsync(bias_ids_dev, bias_ids_host, sizeof(int32_t) * size_t(m),
                                    cudaMemcpyHostToDevice, stream_));
    }
    const int64_t d = shapes_.d;
    if (experts_n_ == 1 && zero_slots_ && staged_ == 0) {
        // Some of one token's slots: their weights and entries in one copy (into slot_ids_,
        // which this path does not otherwise use), the matvecs, and end_experts sums the m
        // outputs weighted straight into its output: no slots to zero, scatter or sum.
        auto* w_host = reinterpret_cast<float*>(slot_staging_.data());
        auto* entry_host = reinterpret_cast<int32_t*>(w_host + m);
        int64_t u = 0;
        for (const ExpertJob& j : jobs) {
            const auto entry = int32_t(entries_.entry_of(j.expert.gate));
            for (size_t i = 0; i < j.slots.size(); ++i, ++u) {
                w_host[u] = j.weights[i];
                entry_host[u] = entry;
            }
        }
        STRATA_CUDA(cudaMemcpyAsync(slot_ids_.data(), w_host, 2 * sizeof(float) * size_t(m),
                                    cudaMemcpyHostToDevice, stream_));
        const auto* entry_dev =
            reinterpret_cast<const int32_t*>(reinterpret_cast<const float*>(slot_ids_.data()) + m);
        const bool taken =
            matmul_->expert_ffn(stack, entry_dev, int(m), act(in), false, dev(moe_h_), dev(moe_y_),
                                moe_scratch_.data(), biases, glu_);
        assert(taken);  // expert_ffn_supports said so
        (void)taken;
        zero_slots_ = false;
        direct_ = m;
        staged_ = m;
        return true;
    }
    zero_slots();
    auto* ids_host = reinterpret_cast<int64_t*>(slot_staging_.data());
    auto* w_host = reinterpret_cast<float*>(ids_host + total);
    auto* entry_host = reinterpret_cast<int32_t*>(w_host + total);
    int64_t u = 0;
    for (const ExpertJob& j : jobs) {
        const auto entry = int32_t(entries_.entry_of(j.expert.gate));
        for (size_t i = 0; i < j.slots.size(); ++i, ++u) {
            ids_host[staged_ + u] = j.slots[i];
            w_host[staged_ + u] = j.weights[i];
            entry_host[u] = entry;
        }
    }
    auto* ids_dev = reinterpret_cast<int64_t*>(slot_ids_.data()) + staged_;
    float* w_dev = reinterpret_cast<float*>(slot_weights_.data()) + staged_;
    auto* entry_dev = reinterpret_cast<int32_t*>(grouped_ids_.data());
    STRATA_CUDA(cudaMemcpyAsync(ids_dev, ids_host + staged_, sizeof(int64_t) * size_t(m),
                                cudaMemcpyHostToDevice, stream_));
    STRATA_CUDA(cudaMemcpyAsync(w_dev, w_host + staged_, sizeof(float) * size_t(m),
                                cudaMemcpyHostToDevice, stream_));
    STRATA_CUDA(cudaMemcpyAsync(entry_dev, entry_host, sizeof(int32_t) * size_t(m),
                                cudaMemcpyHostToDevice, stream_));
    staged_ += m;
    // A batch: each slot's row gathered first.
    gather_rows(act(in), ids_dev, experts_k_, m, d, dev(grouped_x_), stream_);
    const bool taken =
        matmul_->expert_ffn(stack, entry_dev, int(m), dev(grouped_x_), true, dev(moe_h_),
                            dev(moe_y_), moe_scratch_.data(), biases, glu_);
    assert(taken);  // expert_ffn_supports said so
    (void)taken;
    scatter_weighted(dev(moe_y_), ids_dev, w_dev, m, d, dev(slot_out_), stream_);
    return true;
}

void CudaBackend::end_experts(Act out, int64_t n) {
    if (direct_ > 0) {
        const auto* w = reinterpret_cast<const float*>(slot_ids_.data());
        sum_weighted_slots(dev(moe_y_), w, int(direct_), 1, shapes_.d, act(out), stream_);
    } else {
        zero_slots();  // no expert at all: a sum of zeros
        sum_slots(dev(slot_out_), experts_k_, n, shapes_.d, act(out), stream_);
    }
    STRATA_CUDA(cudaEventRecord(staging_free_, stream_));
}

bool CudaBackend::takes_routing(const TensorView& router, const TensorView& router_bias,
                                const TensorView& selection_bias, const ExpertStack& experts, int k,
                                int64_t n) const {
    // Biases (the router's, the selection's and the experts') must be F32 rows this device
    // reads; the experts' one row per expert, all of them, or none.
    const ExpertView& e = experts.first;
    const auto readable = [&](const TensorView& b, int64_t width) {
        return !b.present() || (b.type == TensorType::F32 && b.ne[0] == width && can_read(b.where));
    };
    const bool all_or_none = e.gate_bias.present() == e.up_bias.present() &&
                             e.up_bias.present() == e.down_bias.present();
    const bool biases_ok = all_or_none && readable(router_bias, experts.n_expert) &&
                           readable(selection_bias, experts.n_expert) &&
                           readable(e.gate_bias, e.gate.rows()) &&
                           readable(e.up_bias, e.up.rows()) && readable(e.down_bias, e.down.rows());
    // The activations the device's expert kernels compute (it routes with every gating).
    const bool activation_ok = hp_.expert_activation == FfnActivation::Silu ||
                               hp_.expert_activation == FfnActivation::SwigluOai;
    return biases_ok && activation_ok && n >= 1 && hp_.is_moe() &&
           experts.n_expert <= kMaxRoutedExperts && k >= 1 && k <= kMaxExpertsUsed &&
           k <= experts.n_expert && k <= shapes_.n_expert_used && n * k <= 65535 &&
           router.rows() == experts.n_expert && experts.n_expert == int(hp_.n_expert) &&
           linear_supports(router.type) && expert_ffn_supports(experts) &&
           experts.first.gate.rows() <= shapes_.ff;
}

namespace {

RouteGating route_gating(ExpertGating g) {
    switch (g) {
        case ExpertGating::Softmax:
            return RouteGating::SoftmaxOfAll;
        case ExpertGating::SoftmaxTopK:
            return RouteGating::SoftmaxOfChosen;
        case ExpertGating::Sigmoid:
            return RouteGating::Sigmoid;
    }
    return RouteGating::SoftmaxOfAll;
}

}  // namespace

bool CudaBackend::routed_experts(const TensorView& router, const TensorView& router_bias,
                                 const TensorView& selection_bias, const ExpertStack& experts,
                                 int k, bool norm_weights, Act in, Act out, int64_t n) {
    if (!takes_routing(router, router_bias, selection_bias, experts, k, n) ||
        !can_read(router.where) || !can_read(experts.first.gate.where) ||
        !can_read(experts.first.up.where) || !can_read(experts.first.down.where)) {
        return false;
    }
    const ExpertView& e = experts.first;
    for (const TensorView* v : {&router, &router_bias, &selection_bias, &e.gate, &e.up, &e.down,
                                &e.gate_bias, &e.up_bias, &e.down_bias}) {
        if (v->present()) await_staged(*v);
    }
    Record r{OpKind::Experts, in, out, 0, n, router, e.gate, e.up};
    r.w3 = e.down;
    r.strides = {experts.gate_stride, experts.up_stride, experts.down_stride};
    r.n_expert = experts.n_expert;
    r.k = k;
    r.biases[0] = bias_of(router_bias);
    r.route.gating = route_gating(hp_.expert_gating);
    r.route.norm_weights = norm_weights;
    r.route.selection_bias = bias_of(selection_bias);
    r.route.n_group = int(hp_.n_expert_group);
    r.route.n_group_used = int(hp_.n_expert_group_used);
    r.route.scale = hp_.expert_weights_scale;
    if (e.gate_bias.present()) {
        // Expert x's bias rows are x rows after expert 0's (the layer's bias tensors).
        r.expert_biases.gate = e.gate_bias.f32();
        r.expert_biases.up = e.up_bias.f32();
        r.expert_biases.down = e.down_bias.f32();
        r.expert_biases.gate_stride = int64_t(e.gate_bias.row_bytes / sizeof(float));
        r.expert_biases.up_stride = int64_t(e.up_bias.row_bytes / sizeof(float));
        r.expert_biases.down_stride = int64_t(e.down_bias.row_bytes / sizeof(float));
    }
    r.glu = glu_;
    run(r);
    return true;
}

void CudaBackend::routed(const Record& r) {
    const int64_t n = r.n, slots = r.n * r.k, d = shapes_.d;
    float* logits = dev(router_logits_);
    auto* choice = reinterpret_cast<int32_t*>(choice_.data());
    float* weight = dev(choice_weights_);
    matmul_->linear(r.w0, r.biases[0], act(r.a), logits, n);
    route_top_k(logits, n, r.n_expert, r.k, r.route, choice, weight, stream_);
    ExpertStack stack;
    stack.first.gate = r.w1;
    stack.first.up = r.w2;
    stack.first.down = r.w3;
    stack.gate_stride = r.strides[0];
    stack.up_stride = r.strides[1];
    stack.down_stride = r.strides[2];
    stack.n_expert = r.n_expert;
    bool taken = false;
    if (n == 1) {
        taken = matmul_->expert_ffn(stack, choice, r.k, act(r.a), false, dev(moe_h_), dev(moe_y_),
                                    moe_scratch_.data(), r.expert_biases, r.glu);
        sum_weighted_slots(dev(moe_y_), weight, r.k, 1, d, act(r.b), stream_);
    } else {
        auto* order = reinterpret_cast<int64_t*>(slot_ids_.data());
        auto* ids = reinterpret_cast<int32_t*>(grouped_ids_.data());
        float* grouped_weight = dev(slot_weights_);
        group_slots_by_expert(choice, weight, slots, r.n_expert, order, ids, grouped_weight,
                              stream_);
        gather_rows(act(r.a), order, r.k, slots, d, dev(grouped_x_), stream_);
        taken = matmul_->expert_ffn_grouped(stack, ids, int(slots), dev(grouped_x_), dev(moe_h_),
                                            dev(moe_u_), dev(moe_y_), moe_scratch_.data(),
                                            reinterpret_cast<int32_t*>(moe_tiles_.data()),
                                            r.expert_biases, r.glu);
        if (!taken) {
            taken = matmul_->expert_ffn(stack, ids, int(slots), dev(grouped_x_), true, dev(moe_h_),
                                        dev(moe_y_), moe_scratch_.data(), r.expert_biases, r.glu);
        }
        scatter_weighted(dev(moe_y_), order, grouped_weight, slots, d, dev(slot_out_), stream_);
        sum_slots(dev(slot_out_), r.k, n, d, act(r.b), stream_);
    }
    assert(taken);  // routed_experts checked the same conditions
    (void)taken;
}

}  // namespace strata::cuda_impl
