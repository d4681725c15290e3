// Matmul: which kernel a product takes, and the scratch they share (quant_matmul.h).
//
//   n <= 4 tokens, Q4_0..Q8_0 and Q2_K..Q6_K weights: the int8 matvec (matvec_q8.h), after x is
//                         quantized as the CPU quantizes it (dp4a on the CPU's codes);
//   n <= 8 tokens         the fused dequantize-matvec (matvec_kernels.cuh), after x is rounded as
//                         the CPU rounds it for the weight type (one small launch; none for F32);
//   n > 8, cuBLAS loaded  cublasGemmEx with fp32 accumulation and output, then the bias:
//                           F32    the weight in place and x as it is, fp32 inputs (no TF32);
//                           BF16   the weight in place, x rounded to bf16 (as the CPU does);
//                           F16    the weight in place, x rounded to fp16 (as the CPU does);
//                           others the weight dequantized to fp16 in tiles of rows (at most the
//                                  staging buffer), x as the CPU's Q8_0 / Q8_1 / Q8_K codes times
//                                  their steps, rounded to fp16;
//   n > 8, no cuBLAS      Q4_0..Q8_0 and Q2_K..Q6_K weights with a multiple of 256 columns: the
//                         int8 tensor-core GEMM (mmq.h) on the CPU's codes; others the matvec
//                         over chunks of 8 tokens (also with Tuning::prompt_cublas false: for
//                         tests and comparisons).
// Routed experts of a prompt always take the int8 tensor-core GEMM, grouped by expert, where it
// takes their types. Tuning::prompt_mmq overrides: All sends every prompt product it takes there,
// cuBLAS loaded or not; Off none, the experts' neither.
// Why cuBLAS first: on an H200 its fp16 GEMM (weights dequantized once per product) runs a
// 14336 x 4096 Q4_K product of 512 tokens at 350 TFLOP/s, the int8 GEMM at 130 (each 256-column
// step waits on its loads with 8 warps per SM to hide them).
// Float weights are read in place with lda = the row stride in elements, padded rows included.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>

#include "backend/cuda/cublas_loader.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/elementwise.h"
#include "backend/cuda/format_traits.h"
#include "backend/cuda/matmul_kernels.h"
#include "backend/cuda/matvec_q8.h"
#include "backend/cuda/mmq.h"
#include "backend/cuda/moe_route.h"
#include "backend/cuda/quant_matmul.h"
#include "gpu/gpu.h"

namespace strata::cuda {

namespace {

// The fp16 staging of a weight is at most this many elements (128 MiB): every matrix of an 8B
// model but its output head fits whole; larger ones are multiplied in tiles of rows.
constexpr int64_t kMaxStagingElements = int64_t(64) << 20;
// cuBLAS's workspace, given to it so that it never allocates during a product (its guide asks
// for 32 MiB on Hopper).
constexpr size_t kCublasWorkspaceBytes = size_t(32) << 20;

// A broken precondition of linear() / embed_rows(): a bug in the caller, so it stops the process
// with what was wrong.
[[noreturn]] void precondition_failed(const std::string& what) {
    std::fprintf(stderr, "strata: CUDA matmul precondition failed: %s\n", what.c_str());
    std::abort();
}

// The weight as the kernels take it, after checking the view against their preconditions.
WeightRows weight_rows(const TensorView& w, const char* op) {
    if (!linear_supports(w.type)) {
        precondition_failed(std::string(op) + " of a " + std::string(tensor_type_name(w.type)) +
                            " tensor");
    }
    const auto info = tensor_type_info(w.type);
    const int64_t cols = w.ne[0];
    const auto align = size_t(format_info(w.type).row_align);
    const uint64_t data_bytes = uint64_t(cols / info->block_size) * info->type_size;
    if (cols <= 0 || cols % info->block_size != 0 || cols >= (int64_t(1) << 28) ||
        w.row_bytes < data_bytes || reinterpret_cast<uintptr_t>(w.data) % align != 0 ||
        w.row_bytes % align != 0) {
        precondition_failed(std::string(op) + ": bad view of a " + std::string(info->name) +
                            " tensor (" + std::to_string(cols) + " columns, rows " +
                            std::to_string(w.row_bytes) + " bytes apart)");
    }
    return {w.type, reinterpret_cast<const uint8_t*>(w.data), w.row_bytes, w.rows(), cols};
}

class CudaMatmul final : public Matmul {
  public:
    CudaMatmul(int64_t max_batch, int64_t max_cols, cudaStream_t stream, const Tuning& tuning)
        : max_batch_(max_batch),
          max_cols_(max_cols),
          stream_(stream),
          tuning_(tuning),
          mmq_(tuning.prompt_mmq != PromptMmq::Off),
          mmq_dense_(tuning.prompt_mmq == PromptMmq::All) {}

    ~CudaMatmul() override {
        if (handle_) cublas_->destroy(handle_);
    }

    Result<void> init(int64_t max_weight_elements) {
        int device = 0;
        if (const cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) {
            return err("CUDA matmul: no current GPU: ", cudaGetErrorString(e));
        }
        STRATA_ASSIGN(activations_,
                      gpu::DeviceBuffer::allocate(MatvecScratch::bytes(max_cols_), device));
        scratch_ = {activations_.data(), max_cols_};
        STRATA_ASSIGN(q8_activations_,
                      gpu::DeviceBuffer::allocate(
                          matvec_q8_scratch_bytes(
                              max_cols_, int(std::max<int64_t>(max_batch_, kMaxExpertsUsed))),
                          device));

        const CublasApi* api = cublas_api();
        if (!api || !tuning_.prompt_cublas) return {};  // prompts use the matvec
        cublasHandle_t h = nullptr;
        if (api->create(&h) != CUBLAS_STATUS_SUCCESS) return {};
        cublas_ = api;
        handle_ = h;
        STRATA_ASSIGN(workspace_, gpu::DeviceBuffer::allocate(kCublasWorkspaceBytes, device));
        check(cublas_->set_stream(handle_, stream_), "cublasSetStream");
        check(cublas_->set_workspace(handle_, workspace_.data(), workspace_.size()),
              "cublasSetWorkspace");
        staging_elements_ = std::max(std::min(max_weight_elements, kMaxStagingElements), max_cols_);
        STRATA_ASSIGN(w16_, gpu::DeviceBuffer::allocate(size_t(staging_elements_) * 2, device));
        STRATA_ASSIGN(x16_,
                      gpu::DeviceBuffer::allocate(size_t(max_batch_ * max_cols_) * 2, device));
        return {};
    }

    void linear(const TensorView& w, const float* bias, const float* x, float* y,
                int64_t n) override {
        const WeightRows rows = checked_rows(w, n);
        if (n == 0 || rows.rows == 0) return;
        if (q8_path(rows, x, n)) {
            launch_matvec_q8(rows, x, int(n), bias, y, q8_activations_.data(), stream_, tuning_);
            return;
        }
        if (mmq_path(rows, x, n)) {
            launch_quantize_for(rows.type, x, int(n), rows.cols, q8_activations_.data(), stream_,
                                tuning_.pdl);
            launch_mmq(rows, int(n), bias, y, q8_activations_.data(), stream_);
            return;
        }
        if (n <= kMaxMatvecTokens || !handle_) {
            for (int64_t t0 = 0; t0 < n; t0 += kMaxMatvecTokens) {
                const int m = int(std::min<int64_t>(kMaxMatvecTokens, n - t0));
                launch_matvec(rows, x + t0 * rows.cols, m, bias, y + t0 * rows.rows, scratch_,
                              stream_);
            }
            return;
        }
        gemm(rows, bias, x, y, n);
    }

    void linear_many(std::span<const Product> products, const float* x, int64_t n,
                     TensorType given = TensorType::F32) override {
        TensorType quantized = given;  // the activation type in the q8 scratch
        int64_t quantized_cols =
            given == TensorType::F32 || products.empty() ? 0 : products[0].weight->ne[0];
        for (size_t i = 0; i < products.size(); ++i) {
            const Product& p = products[i];
            const WeightRows rows = checked_rows(*p.weight, n);
            if (n == 0 || rows.rows == 0) continue;
            const bool matvec = q8_path(rows, x, n);
            if (!matvec && !mmq_path(rows, x, n)) {
                linear(*p.weight, p.bias, x, p.y, n);
                continue;
            }
            const TensorType at = matvec_q8_act_type(rows.type);
            if (at != quantized || rows.cols != quantized_cols) {
                launch_quantize_for(rows.type, x, int(n), rows.cols, q8_activations_.data(),
                                    stream_, tuning_.pdl);
                quantized = at;
                quantized_cols = rows.cols;
            }
            if (!matvec) {
                launch_mmq(rows, int(n), p.bias, p.y, q8_activations_.data(), stream_);
                continue;
            }
            i += matvec_run(products.subspan(i), rows, n) - 1;
        }
    }

    // The matvecs of products[0] (whose rows are `first`) and of the products after it of the
    // same type and width (q, k and v) in one launch, or products[0]'s alone where
    // Tuning::qkv_parts is false: the count launched. The scratch holds their quantized input.
    size_t matvec_run(std::span<const Product> products, const WeightRows& first, int64_t n) {
        std::array<WeightRows, kMaxQ8Parts> w{first};
        std::array<const float*, kMaxQ8Parts> biases{products[0].bias};
        std::array<float*, kMaxQ8Parts> ys{products[0].y};
        size_t count = 1;
        for (; count < products.size() && count < size_t(kMaxQ8Parts); ++count) {
            const Product& p = products[count];
            const WeightRows rows = checked_rows(*p.weight, n);
            if (rows.type != first.type || rows.cols != first.cols || rows.rows == 0) break;
            w[count] = rows;
            biases[count] = p.bias;
            ys[count] = p.y;
        }
        if (count > 1 && tuning_.qkv_parts) {
            launch_matvec_q8_parts({w.data(), count}, int(n), {biases.data(), count},
                                   {ys.data(), count}, q8_activations_.data(), stream_, tuning_);
            return count;
        }
        launch_matvec_q8_quantized(first, int(n), products[0].bias, products[0].y,
                                   q8_activations_.data(), stream_, tuning_);
        return 1;
    }

    void swiglu(const TensorView& gate, const TensorView& up, const float* x, float* g, float* u,
                int64_t n, TensorType quantized = TensorType::F32, const float* gate_bias = nullptr,
                const float* up_bias = nullptr, Glu glu = {}) override {
        const WeightRows gr = checked_rows(gate, n), ur = checked_rows(up, n);
        if (n == 1 && gr.type == ur.type && gr.rows == ur.rows && gr.cols == ur.cols &&
            q8_path(gr, x, n)) {
            if (quantized != matvec_q8_act_type(gr.type)) {
                launch_quantize_for(gr.type, x, 1, gr.cols, q8_activations_.data(), stream_,
                                    tuning_.pdl);
            }
            launch_swiglu_q8(gr, ur, g, q8_activations_.data(), stream_, tuning_, gate_bias,
                             up_bias, glu);
            return;
        }
        const Product both[] = {{&gate, gate_bias, g}, {&up, up_bias, u}};
        linear_many(both, x, n, quantized);
        if (glu.oai) {
            cuda::expert_glu(g, u, gr.rows, n, nullptr, {}, glu, stream_);
        } else {
            cuda::swiglu(g, u, g, n * gr.rows, stream_);
        }
    }

    TensorType q8_input_type(const TensorView& w, int64_t n) const override {
        if (!matvec_q8_supports(w.type) || n < 1 || n > kMaxQ8Tokens) return TensorType::F32;
        return matvec_q8_act_type(w.type);
    }
    void* q8_scratch() override { return q8_activations_.data(); }

    std::string_view gemm_engine() const override { return handle_ ? "cublas" : "matvec"; }

    uint64_t scratch_bytes() const override {
        return activations_.size() + q8_activations_.size() + workspace_.size() + w16_.size() +
               x16_.size();
    }

    bool expert_ffn(const ExpertStack& s, const int32_t* ids, int slots, const float* x,
                    bool x_per_slot, float* h, float* y, void* scratch, const ExpertBiases& biases,
                    Glu glu) override {
        const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
        if (!scratch && slots > kMaxExpertsUsed) return false;
        if (!expert_ffn_supports(s) || slots < 1 || !aligned(x) || !aligned(h)) return false;
        const WeightRows g = checked_rows(s.first.gate, 1), u = checked_rows(s.first.up, 1),
                         d = checked_rows(s.first.down, 1);
        launch_expert_ffn_q8(g, s.gate_stride, u, s.up_stride, d, s.down_stride, ids, slots, x,
                             x_per_slot, h, y, scratch ? scratch : q8_activations_.data(), stream_,
                             tuning_, biases, glu);
        return true;
    }

    bool expert_ffn_grouped(const ExpertStack& s, const int32_t* ids, int slots, const float* x,
                            float* h, float* u, float* y, void* q8, int32_t* tiles,
                            const ExpertBiases& biases, Glu glu) override {
        if (!mmq_ || !expert_ffn_supports(s) || slots < 1) return false;
        const WeightRows g = checked_rows(s.first.gate, 1), up = checked_rows(s.first.up, 1),
                         d = checked_rows(s.first.down, 1);
        if (!mmq_supports(g.type, g.cols) || !mmq_supports(d.type, d.cols) ||
            reinterpret_cast<uintptr_t>(x) % 16 != 0 || reinterpret_cast<uintptr_t>(h) % 16 != 0) {
            return false;
        }
        launch_mmq_tiles(ids, slots, s.n_expert, tiles, stream_);
        launch_quantize_for(g.type, x, slots, g.cols, q8, stream_, tuning_.pdl);
        launch_mmq_grouped(g, s.gate_stride, tiles, slots, s.n_expert, h, q8, stream_);
        launch_mmq_grouped(up, s.up_stride, tiles, slots, s.n_expert, u, q8, stream_);
        if (glu.oai || biases.gate || biases.up) {
            cuda::expert_glu(h, u, g.rows, slots, ids, biases, glu, stream_);
        } else {
            cuda::swiglu(h, u, h, int64_t(slots) * g.rows, stream_);
        }
        launch_quantize_for(d.type, h, slots, d.cols, q8, stream_, tuning_.pdl);
        launch_mmq_grouped(d, s.down_stride, tiles, slots, s.n_expert, y, q8, stream_);
        add_expert_bias(y, d.rows, slots, biases.ids ? biases.ids : ids, biases.down,
                        biases.down_stride, stream_);
        return true;
    }

  private:
    // The weight's rows, after the checks linear()'s preconditions ask for.
    WeightRows checked_rows(const TensorView& w, int64_t n) const {
        const WeightRows rows = weight_rows(w, "linear");
        if (rows.cols > max_cols_ || n < 0 || n > max_batch_) {
            precondition_failed("linear: " + std::to_string(n) + " tokens of " +
                                std::to_string(rows.cols) + " columns (sized for " +
                                std::to_string(max_batch_) + " of " + std::to_string(max_cols_) +
                                ")");
        }
        return rows;
    }

    // True when the int8 matvec takes this product.
    static bool q8_path(const WeightRows& w, const float* x, int64_t n) {
        return n <= kMaxQ8Tokens && matvec_q8_supports(w.type) &&
               reinterpret_cast<uintptr_t>(x) % 16 == 0;
    }

    // True when the int8 tensor-core GEMM takes this product.
    bool mmq_path(const WeightRows& w, const float* x, int64_t n) const {
        const bool wanted = mmq_dense_ ? n > kMaxQ8Tokens : (!handle_ && n > kMaxMatvecTokens);
        return mmq_ && wanted && mmq_supports(w.type, w.cols) &&
               reinterpret_cast<uintptr_t>(x) % 16 == 0;
    }

    // Y (n x rows, fp32) = X (n x cols) W^T: in cuBLAS's column-major terms C (rows x n, ldc =
    // rows) = op(A) B with A the weight as cols x rows (lda = its row stride in elements) taken
    // transposed, and B the activations as cols x n (ldb = cols).
    void gemm(const WeightRows& w, const float* bias, const float* x, float* y, int64_t n) {
        switch (w.type) {
            case TensorType::F32:
                gemm_call(w.data, CUDA_R_32F, lda(w, 4), 0, w.rows, x, CUDA_R_32F, y, w, n);
                break;
            case TensorType::F16:
            case TensorType::BF16: {
                const cudaDataType type = w.type == TensorType::F16 ? CUDA_R_16F : CUDA_R_16BF;
                launch_gemm_activations(w.type, x, n, w.cols, x16_.data(), stream_);
                gemm_call(w.data, type, lda(w, 2), 0, w.rows, x16_.data(), type, y, w, n);
                break;
            }
            default: {
                launch_gemm_activations(w.type, x, n, w.cols, x16_.data(), stream_);
                const int64_t tile_rows = std::max<int64_t>(1, staging_elements_ / w.cols);
                for (int64_t r0 = 0; r0 < w.rows; r0 += tile_rows) {
                    const int64_t m = std::min(tile_rows, w.rows - r0);
                    launch_dequant_f16(w, r0, m, w16_.data(), stream_);
                    gemm_call(w16_.data(), CUDA_R_16F, int(w.cols), r0, m, x16_.data(), CUDA_R_16F,
                              y, w, n);
                }
                break;
            }
        }
        if (bias) launch_add_bias(y, bias, w.rows, n, stream_);
    }

    // The leading dimension of a float weight read in place: its row stride in elements.
    static int lda(const WeightRows& w, size_t element_bytes) {
        const size_t ld = w.row_stride / element_bytes;
        if (ld > size_t(INT32_MAX)) {
            precondition_failed("linear: rows " + std::to_string(w.row_stride) +
                                " bytes apart, too far for cuBLAS");
        }
        return int(ld);
    }

    // Rows r0 .. r0 + m - 1 of y (all n tokens) from A (those rows of the weight, ld apart) and
    // B (n x w.cols activations), fp32 accumulation and output.
    void gemm_call(const void* a, cudaDataType a_type, int ld, int64_t r0, int64_t m, const void* b,
                   cudaDataType b_type, float* y, const WeightRows& w, int64_t n) {
        const float alpha = 1.0f, beta = 0.0f;
        check(cublas_->gemm_ex(handle_, CUBLAS_OP_T, CUBLAS_OP_N, int(m), int(n), int(w.cols),
                               &alpha, a, a_type, ld, b, b_type, int(w.cols), &beta, y + r0,
                               CUDA_R_32F, int(w.rows), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
              "cublasGemmEx");
    }

    // A failed cuBLAS call on checked arguments is a lost device or a bug, like a failed launch.
    void check(cublasStatus_t s, const char* what) const {
        if (s == CUBLAS_STATUS_SUCCESS) return;
        const char* text = cublas_->status_string ? cublas_->status_string(s) : nullptr;
        std::fprintf(stderr, "strata: %s failed: %s (%d)\n", what, text ? text : "cuBLAS error",
                     int(s));
        std::abort();
    }

    int64_t max_batch_, max_cols_;
    cudaStream_t stream_;
    Tuning tuning_;   // how the kernels launch, which prompt products take which GEMM
    bool mmq_;        // the int8 tensor-core GEMM takes prompts' routed experts
    bool mmq_dense_;  // ... and every other prompt product (else only without cuBLAS)
    gpu::DeviceBuffer activations_;  // MatvecScratch
    MatvecScratch scratch_;
    gpu::DeviceBuffer q8_activations_;  // matvec_q8's quantized activations
    const CublasApi* cublas_ = nullptr;
    cublasHandle_t handle_ = nullptr;
    gpu::DeviceBuffer workspace_;  // cuBLAS's
    int64_t staging_elements_ = 0;
    gpu::DeviceBuffer w16_;  // staging_elements_ halves: a tile of a block-format weight
    gpu::DeviceBuffer x16_;  // max_batch x max_cols halves (or bf16): the GEMM's activations
};

}  // namespace

bool expert_ffn_supports(const ExpertStack& s) {
    const TensorView &g = s.first.gate, &u = s.first.up, &d = s.first.down;
    return g.type == u.type && g.ne == u.ne && d.ne[0] == g.rows() && matvec_q8_supports(g.type) &&
           matvec_q8_supports(d.type);
}

bool linear_supports(TensorType t) {
    return format_info(t).dequant;
}

Result<std::unique_ptr<Matmul>> Matmul::create(int64_t max_weight_elements, int64_t max_batch,
                                               int64_t max_cols, cudaStream_t stream,
                                               const Tuning& tuning) {
    if (max_weight_elements < 1 || max_batch < 1 || max_cols < 1) {
        return err("CUDA matmul: bad sizes (", std::to_string(max_weight_elements),
                   " weight elements, ", std::to_string(max_batch), " tokens, ",
                   std::to_string(max_cols), " columns)");
    }
    auto m = std::make_unique<CudaMatmul>(max_batch, max_cols, stream, tuning);
    STRATA_TRY(m->init(max_weight_elements));
    return std::unique_ptr<Matmul>(std::move(m));
}

void embed_rows(const TensorView& table, const int32_t* ids, int64_t n, float* out,
                cudaStream_t stream) {
    const WeightRows rows = weight_rows(table, "embed_rows");
    if (n > 0) launch_gather_rows(rows, ids, n, out, stream);
}

}  // namespace strata::cuda
