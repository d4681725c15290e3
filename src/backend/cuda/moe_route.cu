#include "backend/cuda/moe_route.h"

#include <cfloat>

#include "backend/cuda/cuda_check.h"

namespace strata::cuda {

namespace {

// The smallest sum the renormalisation divides by (engine::kMinChosenWeightSum).
constexpr float kMinChosenWeightSum = 6.103515625e-5f;

// One warp per token; its scores (the weighing ones, and the choosing ones: biased, masked to
// the kept groups) and its groups' scores in shared memory (2 n_expert + n_group floats).
__global__ void route_top_k_kernel(const float* __restrict__ logits, int n_expert, int k,
                                   RouteSpec spec, int32_t* __restrict__ choice,
                                   float* __restrict__ weight) {
    extern __shared__ float shared[];
    float* probs = shared;
    float* sel = shared + n_expert;
    float* group_score = sel + n_expert;
    const int lane = int(threadIdx.x);
    const float* l = logits + int64_t(blockIdx.x) * n_expert;
    if (spec.gating == RouteGating::SoftmaxOfAll) {
        float max = -FLT_MAX;
        for (int i = lane; i < n_expert; i += 32) max = fmaxf(max, l[i]);
        for (int o = 16; o > 0; o >>= 1) max = fmaxf(max, __shfl_xor_sync(0xffffffffu, max, o));
        double sum = 0.0;
        for (int i = lane; i < n_expert; i += 32) {
            const float p = expf(l[i] - max);
            probs[i] = p;
            sum += p;
        }
        for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
        const float inv = float(1.0 / sum);
        for (int i = lane; i < n_expert; i += 32) probs[i] *= inv;
    } else if (spec.gating == RouteGating::Sigmoid) {
        for (int i = lane; i < n_expert; i += 32) probs[i] = 1.0f / (1.0f + expf(-l[i]));
    } else {
        for (int i = lane; i < n_expert; i += 32) probs[i] = l[i];
    }
    for (int i = lane; i < n_expert; i += 32) {
        sel[i] = spec.selection_bias ? probs[i] + spec.selection_bias[i] : probs[i];
    }
    __syncwarp();
    if (spec.n_group > 1) {
        // Each group's two best choosing scores summed; the n_group_used best groups kept
        // (marked +infinity), every expert of the others masked to -infinity.
        const int per = n_expert / spec.n_group;
        for (int g = lane; g < spec.n_group; g += 32) {
            float best = -INFINITY, second = -INFINITY;
            for (int i = g * per; i < (g + 1) * per; ++i) {
                const float v = sel[i];
                if (v > best) {
                    second = best;
                    best = v;
                } else if (v > second) {
                    second = v;
                }
            }
            group_score[g] = best + second;
        }
        __syncwarp();
        if (lane == 0) {
            for (int kept = 0; kept < spec.n_group_used; ++kept) {
                int top = -1;
                for (int g = 0; g < spec.n_group; ++g) {
                    const float v = group_score[g];
                    if (v == INFINITY) continue;
                    if (top < 0 || v > group_score[top]) top = g;
                }
                group_score[top] = INFINITY;
            }
        }
        __syncwarp();
        for (int i = lane; i < n_expert; i += 32) {
            if (group_score[i / per] != INFINITY) sel[i] = -INFINITY;
        }
        __syncwarp();
    }

    int32_t* c = choice + int64_t(blockIdx.x) * k;
    float* w = weight + int64_t(blockIdx.x) * k;
    for (int j = 0; j < k; ++j) {
        // The largest choosing score not yet chosen (chosen ones are marked NaN), lower id on
        // ties.
        float best = -INFINITY;
        int id = n_expert;
        for (int i = lane; i < n_expert; i += 32) {
            const float v = sel[i];
            if (v == v && (id == n_expert || v > best)) {
                best = v;
                id = i;
            }
        }
        for (int o = 16; o > 0; o >>= 1) {
            const float ob = __shfl_xor_sync(0xffffffffu, best, o);
            const int oid = __shfl_xor_sync(0xffffffffu, id, o);
            if (ob > best || (ob == best && oid < id)) {
                best = ob;
                id = oid;
            }
        }
        if (lane == 0) {
            c[j] = id;
            w[j] = probs[id];
            sel[id] = NAN;
        }
        __syncwarp();
    }
    __syncwarp();
    if (lane != 0) return;
    if (spec.gating == RouteGating::SoftmaxOfChosen) {
        // A softmax over the k chosen logits, summed in double as the host's softmax sums.
        float max = -INFINITY;
        for (int j = 0; j < k; ++j) max = fmaxf(max, w[j]);
        double sum = 0.0;
        for (int j = 0; j < k; ++j) {
            w[j] = expf(w[j] - max);
            sum += w[j];
        }
        const float inv = float(1.0 / sum);
        for (int j = 0; j < k; ++j) w[j] *= inv;
    } else if (spec.norm_weights) {
        float chosen_sum = 0.0f;
        for (int j = 0; j < k; ++j) chosen_sum += w[j];  // in choice order, as the host sums
        chosen_sum = fmaxf(chosen_sum, kMinChosenWeightSum);
        for (int j = 0; j < k; ++j) w[j] = w[j] / chosen_sum;
    }
    if (spec.scale != 1.0f) {
        for (int j = 0; j < k; ++j) w[j] = __fmul_rn(w[j], spec.scale);
    }
}

// One block per token row; products rounded before the add (no fused multiply-add), as the
// host's scatter (y * w) and sum (in choice order) round them.
__global__ void sum_weighted_slots_kernel(const float* __restrict__ y,
                                          const float* __restrict__ weight, int k, int64_t d,
                                          float* __restrict__ out) {
    const int64_t t = blockIdx.x;
    const float* w = weight + t * k;
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
        float v = __fmul_rn(y[(t * k) * d + i], w[0]);
        for (int j = 1; j < k; ++j) v = __fadd_rn(v, __fmul_rn(y[(t * k + j) * d + i], w[j]));
        out[t * d + i] = v;
    }
}

// One block: counts per expert, their running offsets, then every slot to its place.
constexpr int kGroupThreads = 1024;
__global__ void __launch_bounds__(kGroupThreads)
    group_slots_kernel(const int32_t* __restrict__ choice, const float* __restrict__ weight,
                       int64_t slots, int n_expert, int64_t* __restrict__ order,
                       int32_t* __restrict__ ids, float* __restrict__ sorted_weight) {
    __shared__ int next[kMaxRoutedExperts];
    for (int e = int(threadIdx.x); e < n_expert; e += kGroupThreads) next[e] = 0;
    __syncthreads();
    for (int64_t s = threadIdx.x; s < slots; s += kGroupThreads) atomicAdd(&next[choice[s]], 1);
    __syncthreads();
    if (threadIdx.x == 0) {
        int sum = 0;
        for (int e = 0; e < n_expert; ++e) {
            const int c = next[e];
            next[e] = sum;
            sum += c;
        }
    }
    __syncthreads();
    for (int64_t s = threadIdx.x; s < slots; s += kGroupThreads) {
        const int e = choice[s];
        const int u = atomicAdd(&next[e], 1);
        order[u] = s;
        ids[u] = e;
        sorted_weight[u] = weight[s];
    }
}

}  // namespace

void group_slots_by_expert(const int32_t* choice, const float* weight, int64_t slots, int n_expert,
                           int64_t* order, int32_t* ids, float* sorted_weight,
                           cudaStream_t stream) {
    if (slots <= 0) return;
    group_slots_kernel<<<1, kGroupThreads, 0, stream>>>(choice, weight, slots, n_expert, order, ids,
                                                        sorted_weight);
    STRATA_CUDA_LAUNCHED();
}

void route_top_k(const float* logits, int64_t n, int n_expert, int k, const RouteSpec& spec,
                 int32_t* choice, float* weight, cudaStream_t stream) {
    if (n <= 0) return;
    const int groups = spec.n_group > 1 ? spec.n_group : 0;
    const size_t shared = sizeof(float) * size_t(2 * n_expert + groups);
    route_top_k_kernel<<<unsigned(n), 32, shared, stream>>>(logits, n_expert, k, spec, choice,
                                                            weight);
    STRATA_CUDA_LAUNCHED();
}

void sum_weighted_slots(const float* y, const float* weight, int k, int64_t n, int64_t d,
                        float* out, cudaStream_t stream) {
    if (n <= 0) return;
    sum_weighted_slots_kernel<<<unsigned(n), 256, 0, stream>>>(y, weight, k, d, out);
    STRATA_CUDA_LAUNCHED();
}

}  // namespace strata::cuda
