#include "quant/fast_quantize.h"

#include <cassert>

#include "quant/lane_kernels.h"
#include "quant/quant.h"

namespace strata::quant {

namespace {

bool cpu_has(QuantizePath p) {
#if defined(__x86_64__) && defined(__GNUC__)
    switch (p) {
        case QuantizePath::scalar:
            return true;
        case QuantizePath::avx2:
            return __builtin_cpu_supports("avx2");
        case QuantizePath::avx512:
            return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("avx512f") &&
                   __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                   __builtin_cpu_supports("avx512bw");
    }
    return false;
#else
    return p == QuantizePath::scalar;
#endif
}

lanes::BlockQuantizer kernel(QuantizePath p, TensorType t) {
    switch (p) {
        case QuantizePath::avx2:
            return lanes::avx2_quantizer(t);
        case QuantizePath::avx512:
            return lanes::avx512_quantizer(t);
        default:
            return nullptr;
    }
}

// A path exists in this build when it has an encoder for the K-quant every mix uses.
bool built(QuantizePath p) {
    return p == QuantizePath::scalar || kernel(p, TensorType::Q4_K) != nullptr;
}

}  // namespace

std::string_view quantize_path_name(QuantizePath p) {
    switch (p) {
        case QuantizePath::scalar:
            return "scalar";
        case QuantizePath::avx2:
            return "avx2";
        case QuantizePath::avx512:
            return "avx512";
    }
    return "?";
}

bool quantize_path_runs_here(QuantizePath p) {
    return built(p) && cpu_has(p);
}

QuantizePath best_quantize_path() {
    static const QuantizePath best = [] {
        if (quantize_path_runs_here(QuantizePath::avx512)) return QuantizePath::avx512;
        if (quantize_path_runs_here(QuantizePath::avx2)) return QuantizePath::avx2;
        return QuantizePath::scalar;
    }();
    return best;
}

bool has_fast_quantizer(QuantizePath p, TensorType t) {
    return kernel(p, t) != nullptr;
}

void quantize_row_on(QuantizePath p, TensorType t, const float* src, void* dst, int64_t n) {
    assert(quantize_path_runs_here(p) && "quantize path not available on this CPU");
    const lanes::BlockQuantizer k = kernel(p, t);
    if (k == nullptr) return quantize_row(t, src, dst, n);
    // quantize_row's preconditions (the types with a fast encoder are all block types).
    [[maybe_unused]] const auto bytes = quant_row_bytes(t, n);
    assert(bytes.ok() && "row length must be whole blocks");
    const uint32_t block = tensor_type_info(t)->block_size;
    k(src, dst, n / block);
}

void quantize_row_fast(TensorType t, const float* src, void* dst, int64_t n) {
    quantize_row_on(best_quantize_path(), t, src, dst, n);
}

}  // namespace strata::quant
