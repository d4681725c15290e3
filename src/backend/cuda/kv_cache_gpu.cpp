#include "backend/cuda/kv_cache_gpu.h"

#include <cuda_runtime_api.h>

#include <string>

#include "backend/cuda/cuda_check.h"
#include "util/units.h"

namespace strata::cuda {

namespace {

Result<void> check_head_dim(const char* what, uint32_t d, KvType type) {
    const uint32_t multiple = type == KvType::F16 ? 8 : 32;
    if (d == 0 || d % multiple != 0 || d > uint32_t(kGpuMaxHeadDim)) {
        return err("the GPU KV cache (", std::string(kv_type_name(type)), ") needs ", what,
                   " sizes that are multiples of ", std::to_string(multiple), " up to ",
                   std::to_string(kGpuMaxHeadDim), "; this model's is ", std::to_string(d),
                   " (run its attention on the CPU)");
    }
    return {};
}

}  // namespace

Result<GpuKvCache> GpuKvCache::create(const ModelHparams& hp, uint32_t n_ctx, KvType type,
                                      const std::vector<bool>& held, const GpuKvWindows& windows) {
    if (n_ctx == 0) return err("the context size must be at least 1");
    STRATA_TRY(check_kv_type(hp, type));
    if (hp.is_mla()) {
        // A latent-attention layer's row is its key and value (mla.h), fp16 only.
        if (type != KvType::F16) {
            return err("the GPU's latent attention takes the f16 KV cache (--kv-type f16)");
        }
        if (hp.mla_cache_width() % 8 != 0 || hp.mla_cache_width() > 1024) {
            return err(
                "the GPU KV cache takes latent rows of multiples of 8 values up to 1024; "
                "this model's are ",
                std::to_string(hp.mla_cache_width()), " (run it on the CPU)");
        }
    } else {
        STRATA_TRY(check_head_dim("key head", hp.head_dim_k, type));
        STRATA_TRY(check_head_dim("value head", hp.head_dim_v, type));
    }

    GpuKvCache c;
    c.type_ = type;
    c.n_ctx_ = n_ctx;
    // First pass: byte offsets of each held layer's two planes, as kv_cache_bytes counts them.
    struct Offsets {
        uint64_t k = 0, v = 0;
    };
    std::vector<Offsets> offsets(hp.n_layer);
    uint64_t total = 0;
    for (uint32_t l = 0; l < hp.n_layer; ++l) {
        GpuKvLayer L;
        L.n_head_kv = hp.is_mla() ? 1 : int(hp.n_head_kv_at(l));
        L.k.head_dim = hp.is_mla() ? int(hp.mla_cache_width()) : int(hp.head_dim_k);
        L.v.head_dim = hp.is_mla() ? 0 : int(hp.head_dim_v);
        L.held = held.empty() || (l < held.size() && held[l]);
        L.window = int(windows.window_at(l));
        L.slots = int(windows.slots_at(l, n_ctx));
        if (uint32_t(L.slots) < n_ctx && (L.window == 0 || L.slots < L.window)) {
            return err("layer ", std::to_string(l), ": a KV ring of ", std::to_string(L.slots),
                       " positions cannot hold its window of ", std::to_string(L.window),
                       " (a layer of full attention holds the whole context)");
        }
        if (hp.is_recurrent(l)) {
            if (L.held) {
                offsets[l].k = total;
                total += recurrent_conv_bytes(hp);
                offsets[l].v = total;
                total += recurrent_delta_bytes(hp);
            }
        } else if (L.held && hp.is_mla()) {
            offsets[l].k = total;
            total += round_up(kv_row_bytes(type, uint64_t(L.k.head_dim)) * uint64_t(L.slots),
                              kKvLayerAlign);
        } else if (L.held) {
            const uint64_t slots = uint64_t(L.slots);
            offsets[l].k = total;
            total += round_up(kv_row_bytes(type, uint64_t(L.n_head_kv) * hp.head_dim_k) * slots,
                              kKvLayerAlign);
            offsets[l].v = total;
            total += round_up(kv_row_bytes(type, uint64_t(L.n_head_kv) * hp.head_dim_v) * slots,
                              kKvLayerAlign);
        }
        c.layers_.push_back(L);
    }
    auto buf = gpu::DeviceBuffer::allocate(total);
    if (!buf) {
        return err("cannot allocate the GPU KV cache (", format_bytes(total), " for ",
                   std::to_string(n_ctx), " positions): ", buf.error().message,
                   "; a smaller --ctx needs less");
    }
    c.buffer_ = std::move(*buf);
    // Positions never written are never read (attention stops at the query's position), but a
    // zeroed cache keeps a stray read finite and runs reproducible.
    // Synchronised: the kernels that use it may run on a non-blocking stream.
    if (total > 0) {
        STRATA_CUDA(cudaMemset(c.buffer_.data(), 0, total));
        STRATA_CUDA(cudaDeviceSynchronize());
    }

    for (uint32_t l = 0; l < hp.n_layer; ++l) {
        GpuKvLayer& L = c.layers_[l];
        if (!L.held) continue;
        if (hp.is_recurrent(l)) {
            L.conv_state = reinterpret_cast<float*>(c.buffer_.data() + offsets[l].k);
            L.delta_state = reinterpret_cast<float*>(c.buffer_.data() + offsets[l].v);
            c.state_bytes_.push_back(
                {offsets[l].k, offsets[l].v - offsets[l].k + recurrent_delta_bytes(hp)});
            continue;
        }
        auto place = [&](GpuKvPlane& p, uint64_t offset) {
            p.data = c.buffer_.data() + offset;
            if (type == KvType::Q8_0) {
                // The scales follow the codes; the codes' size is a multiple of 32 bytes.
                const uint64_t codes =
                    uint64_t(L.n_head_kv) * uint64_t(L.slots) * uint64_t(p.head_dim);
                p.scales = reinterpret_cast<uint16_t*>(p.data + codes);
            }
        };
        place(L.k, offsets[l].k);
        if (L.v.head_dim > 0) place(L.v, offsets[l].v);
    }
    return c;
}

void GpuKvCache::clear_recurrent(cudaStream_t s) {
    for (const auto& [offset, size] : state_bytes_) {
        STRATA_CUDA(cudaMemsetAsync(buffer_.data() + offset, 0, size, s));
    }
}

}  // namespace strata::cuda
