// The forward pass on the CPU: token ids in, logits out, with the KV cache carrying the context
// from one call to the next.
//
// Every layer's weights come from the WeightStore (store/weight_store.h) just before the layer
// runs and are released after it, and experts are asked for one by one after routing, so the
// same forward pass serves every residency mode. Prompts are evaluated in batches of up to
// max_batch tokens (matrix products over the batch), generation one token at a time.
//
// The layer structure of each architecture family is one short function (engine/families.cpp)
// composed of the blocks below.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "util/thread_pool.h"
#include "engine/attention.h"
#include "engine/debug_dump.h"
#include "engine/ffn.h"
#include "engine/kv_cache.h"
#include "engine/rope.h"
#include "model/hparams.h"
#include "store/weight_store.h"
#include "util/result.h"

namespace strata::engine {

struct EngineOptions {
    uint32_t n_ctx = 0;  // 0: the model's training context, capped at kDefaultContextCap
    KvType kv_type = KvType::F16;
    int threads = 0;           // 0: physical cores
    uint32_t max_batch = 512;  // prompt tokens evaluated together
    std::string dump_dir;      // non-empty: write named activations there (debug_dump.h)
    // Benchmarks of expert streaming: replay this routing instead of the router's (the output is
    // then not the model's; routing_trace.h).
    std::shared_ptr<const RoutingTrace> forced_routing;
};

// Where the time of a forward pass goes, by kind of operator.
enum class Op { Projection, Attention, Ffn, Experts, Router, LmHead, Elementwise, Count };
const char* op_name(Op op);

struct EngineStats {
    uint64_t tokens = 0;          // tokens evaluated
    uint64_t eval_calls = 0;
    uint64_t weight_bytes = 0;    // weight bytes the forward passes read (store + LM head + rows)
    std::array<double, size_t(Op::Count)> op_seconds{};
    std::vector<MoeLayerStats> moe;  // per layer, empty for dense models
};

// Last: the logits of the last token; All: every token's, row after row; Hidden: no logits but
// every token's final hidden state after the output norm (n_embd floats a token), what an
// embedding is pooled from.
enum class LogitsWanted { Last, All, Hidden };

class Engine;
// One layer's evaluation as the family functions see it.
struct LayerArgs {
    int layer;
    const LayerView& w;
    int64_t n;     // tokens in the batch
    int64_t pos0;  // position of the first
};
using LayerFn = Result<void> (*)(Engine&, const LayerArgs&);

class Engine {
public:
    static Result<std::unique_ptr<Engine>> create(const ModelHparams& hp, WeightStore& store,
                                                  const EngineOptions& options);

    // Evaluates `tokens` at positions n_past() ... and appends them to the context. `logits`
    // receives n_vocab floats: for the last token (Last), or for every token, row after row
    // (All); or n_embd floats a token (Hidden). An error when the context has no room for them
    // (nothing is evaluated then).
    Result<void> eval(std::span<const int32_t> tokens, LogitsWanted wanted,
                      std::vector<float>& logits);

    uint32_t n_past() const { return n_past_; }
    // Forgets every position from n_keep on (a new chat turn reusing a common prefix, a new
    // perplexity chunk with 0).
    void truncate(uint32_t n_keep);

    uint32_t n_ctx() const { return kv_.n_ctx(); }
    uint32_t n_vocab() const { return n_vocab_; }
    const ModelHparams& hparams() const { return hp_; }
    ThreadPool& pool() { return pool_; }
    WeightStore& store() { return store_; }
    const KvCache& kv_cache() const { return kv_; }
    const EngineStats& stats() const { return stats_; }
    void reset_stats();

    // The blocks family functions are made of. Each adds its result to the residual stream.
    // Pre-norm self-attention: norm, q/k/v (+biases), per-head q/k norms when the layer has
    // them, rope, cache, attention, output projection.
    Result<void> attention_block(const LayerArgs& a);
    // Pre-norm SwiGLU FFN.
    Result<void> dense_ffn_block(const LayerArgs& a);
    // Pre-norm mixture of experts, plus the sigmoid-gated shared expert when the layer has one.
    Result<void> moe_ffn_block(const LayerArgs& a, bool norm_weights);

private:
    Engine(const ModelHparams& hp, WeightStore& store, KvCache kv, const EngineOptions& options);
    Result<void> eval_batch(std::span<const int32_t> tokens, LogitsWanted wanted, float* out);
    void output_norm(int64_t first_row, int64_t rows, float* out);
    void output_head(int64_t first_row, int64_t rows, float* logits);
    void ffn_norm(const LayerArgs& a);  // xn_ = RMSNorm(x_) with the layer's ffn_norm
    template <typename F>
    void timed(Op op, F&& f);

    ModelHparams hp_;
    WeightStore& store_;
    KvCache kv_;
    ThreadPool pool_;
    LayerFn layer_fn_ = nullptr;
    RopeConfig rope_;
    DebugDump dump_;
    uint32_t n_vocab_ = 0;
    uint32_t max_batch_ = 512;
    uint32_t n_past_ = 0;
    std::shared_ptr<const RoutingTrace> forced_routing_;
    EngineStats stats_;

    // Activations of the batch being evaluated.
    std::vector<float> x_, xn_, q_, k_, v_, attn_, proj_, tmp_;
    std::vector<float> cos_, sin_;
    FfnBuffers ffn_buf_;
    MoeBuffers moe_buf_;
};

// The layer function of an architecture family, nullptr when strata cannot run it.
LayerFn layer_function(std::string_view arch);

}  // namespace strata::engine
