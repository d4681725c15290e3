// Shared by the engine tests: the golden model files and how closely each must match.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gguf/tensor_type.h"
#include "model/model_info.h"
#include "runtime/loaded_model.h"
#include "store/weight_store.h"

namespace strata::test {

// A Llama model's attention shape for tests of attention kernels: n_head query heads over
// n_head_kv KV heads of hd_k / hd_v, rotated whole, no weights.
ModelHparams attention_hparams(int n_head, int n_head_kv, int hd_k, int hd_v, int n_layer = 2);

// The model files of ../shared/testdata that have golden outputs, by stem ("llama-dense-Q8_0").
struct GoldenModel {
    std::string stem;
    std::string path;  // relative to the testdata directory
    // Float weights (F32/F16/BF16): greedy ids must match exactly and logits closely.
    bool float_weights = false;
    bool bf16 = false;
    bool moe = false;
    bool real = false;  // the trained aidreams260K model
};
std::vector<GoldenModel> golden_models();

// A gtest parameter name from a model stem or preset: "llama-dense-Q8_0" -> "llama_dense_Q8_0".
std::string test_name(std::string stem);

// ||got - want|| / ||want|| (L2, in double): how far one backend's rows are from another's.
double rel_l2(std::span<const float> got, std::span<const float> want);

// A synthetic model of a preset written once per process (into a temporary directory removed
// at exit) and shared by the tests that ask for the same preset, weights, seed and layer count
// (0: the preset's).
const std::string& synth_test_model(const std::string& preset, TensorType weights,
                                    uint64_t seed = 1, uint32_t layers = 0);

// The logits of a fixed 6-token prompt evaluated as one batch, then of `steps` greedy steps (2
// threads, a 64-token context), computed through `store`: what the store tests compare between
// stores. `between` runs after the prompt. Failures are test failures.
std::vector<std::vector<float>> greedy_logits(const ModelInfo& info, WeightStore& store, int steps,
                                              const std::function<void()>& between = {});

// Loads the model at `path` in `mode` ("resident", "ffn-stream", "expert-stream"). A streaming
// mode gets the smallest RAM budget its plan accepts (fixed hardware figures), so that every FFN
// layer, or all but a few experts, are read from the file while it runs. Failures are test
// failures and give nullptr.
std::unique_ptr<LoadedModel> load_in_mode(const std::string& path, const std::string& mode,
                                          const ModelLoadOptions& options);

// Loads the model at `path` with `options`, planned as strata plans it. Failures are test
// failures and give nullptr.
std::unique_ptr<LoadedModel> load_model(const std::string& path, const ModelLoadOptions& options);

// Two threads, a context of 128 and no expert statistics: the tiny models' tests' loads.
ModelLoadOptions small_load_options();

// The tiny-qwen3 preset (Q8_0) loaded for `n_seq` sequences of a 64-token context on 2 threads,
// batches of at most `max_batch` tokens (0: the default): what the batcher's tests share.
std::unique_ptr<LoadedModel> load_tiny_for_sequences(uint32_t n_seq, uint32_t max_batch = 0);

// The logits of `prompt` (of every token, or of its last), then those of `steps` decode steps of
// fixed tokens, one after the other: what tests compare between settings that must not change
// them. Failures are test failures.
std::vector<float> prompt_then_decode(engine::Engine& e, std::span<const int32_t> prompt,
                                      engine::LogitsWanted wanted, int steps = 6);

// prompt_then_decode's logits of every token on two engines that must give the same bits (the
// same weights' bytes and arithmetic, only read from elsewhere or laid out otherwise).
void expect_same_logits(engine::Engine& want, engine::Engine& got, std::span<const int32_t> prompt);

}  // namespace strata::test
