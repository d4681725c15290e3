#include "engine_test_support.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <tuple>

#include <gtest/gtest.h>

#include "engine/engine.h"
#include "gguf/reader.h"
#include "runtime/backend_factory.h"
#include "synth/generator.h"
#include "synth/synth_config.h"
#include "test_support.h"

namespace strata::test {

ModelHparams attention_hparams(int n_head, int n_head_kv, int hd_k, int hd_v, int n_layer) {
    ModelHparams hp;
    hp.arch = "llama";
    hp.n_layer = uint32_t(n_layer);
    hp.n_head = uint32_t(n_head);
    hp.n_head_kv = uint32_t(n_head_kv);
    hp.head_dim_k = uint32_t(hd_k);
    hp.head_dim_v = uint32_t(hd_v);
    hp.n_embd = uint32_t(n_head * hd_k);
    hp.n_rot = uint32_t(hd_k);
    hp.n_ctx_train = 4096;
    hp.rms_eps = 1e-6f;
    return hp;
}

std::vector<GoldenModel> golden_models() {
    std::vector<GoldenModel> out;
    for (const char* q :
         {"F32", "F16", "BF16", "Q6_K", "Q5_K_M", "Q4_K_M", "Q3_K_M", "Q2_K", "IQ4_XS"}) {
        const std::string s = std::string("aidreams260K-") + q;
        const std::string qs = q;
        out.push_back({s, "models/real/" + s + ".gguf", qs == "F32" || qs == "F16" || qs == "BF16",
                       qs == "BF16", false, true});
    }
    auto synth = [&](const std::string& family, std::initializer_list<const char*> types) {
        for (const char* q : types) {
            const std::string qs = q;
            const std::string s = family + "-" + qs;
            out.push_back({s, "models/synthetic/" + s + ".gguf",
                           qs == "F32" || qs == "F16" || qs == "BF16", qs == "BF16",
                           family == "llama-moe", false});
        }
    };
    synth("llama-dense", {"F32", "F16", "BF16", "Q8_0", "Q6_K", "Q5_K_M", "Q5_1", "Q5_0", "Q4_K_M",
                          "Q4_1", "Q4_0", "IQ4_NL", "IQ4_XS", "Q3_K_M", "Q2_K"});
    synth("llama-moe", {"F16", "Q8_0", "Q4_K_M"});
    synth("qwen2", {"F32", "Q8_0", "Q4_K_M"});
    return out;
}

double rel_l2(std::span<const float> got, std::span<const float> want) {
    double num = 0, den = 0;
    for (size_t i = 0; i < want.size(); ++i) {
        num += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
        den += double(want[i]) * want[i];
    }
    return std::sqrt(num / std::max(den, 1e-30));
}

std::string test_name(std::string stem) {
    std::replace(stem.begin(), stem.end(), '-', '_');
    return stem;
}

const std::string& synth_test_model(const std::string& preset, TensorType weights, uint64_t seed,
                                    uint32_t layers) {
    static TempDir dir;
    static std::map<std::tuple<std::string, TensorType, uint64_t, uint32_t>, std::string> written;
    auto [it, fresh] = written.try_emplace({preset, weights, seed, layers});
    if (fresh) {
        SynthConfig config;
        config.hparams = *synth_preset(preset);
        if (layers > 0) config.hparams.n_layer = layers;
        config.weights = weights;
        config.seed = seed;
        config.threads = 2;
        it->second = dir.file(preset + "-" + std::string(tensor_type_name(weights)) + "-" +
                              std::to_string(seed) + "-" + std::to_string(layers) + ".gguf");
        auto r = write_synthetic_model(config, it->second, /*overwrite=*/true);
        EXPECT_TRUE(r) << (r ? "" : r.error().message);
    }
    return it->second;
}

std::vector<std::vector<float>> greedy_logits(const ModelInfo& info, WeightStore& store, int steps,
                                              const std::function<void()>& between) {
    engine::EngineOptions opt;
    opt.threads = 2;
    opt.n_ctx = 64;
    auto e = engine::Engine::create(*info.hparams, store, opt, make_backend);
    EXPECT_TRUE(e) << (e ? "" : e.error().message);
    std::vector<std::vector<float>> out;
    if (!e) return out;
    std::vector<float> logits;
    const std::vector<int32_t> prompt{1, 429, 491, 433, 295, 429};
    auto r = (*e)->eval(prompt, engine::LogitsWanted::Last, logits);
    EXPECT_TRUE(r) << (r ? "" : r.error().message);
    out.push_back(logits);
    if (between) between();
    for (int step = 0; step < steps; ++step) {
        const int32_t next =
            int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
        r = (*e)->eval({&next, 1}, engine::LogitsWanted::Last, logits);
        EXPECT_TRUE(r) << (r ? "" : r.error().message);
        out.push_back(logits);
    }
    return out;
}

std::unique_ptr<LoadedModel> load_in_mode(const std::string& path, const std::string& mode,
                                          const ModelLoadOptions& options) {
    auto file = read_gguf(path);
    EXPECT_TRUE(file) << (file ? "" : file.error().message);
    if (!file) return nullptr;
    auto info = load_model_info(std::move(*file));
    EXPECT_TRUE(info) << (info ? "" : info.error().message);
    if (!info) return nullptr;
    std::optional<Plan> plan;
    if (mode != "resident") {
        PlanOptions po;
        po.n_ctx = options.engine.n_ctx;
        po.n_seq = options.engine.n_seq;
        po.max_batch = options.engine.max_batch;
        po.threads = options.engine.threads;
        auto pm = parse_plan_mode(mode);
        EXPECT_TRUE(pm) << mode;
        if (!pm) return nullptr;
        po.mode = *pm;
        // The smallest budget with a plan (the one that streams the most), by bisection: a
        // larger budget always has one too.
        Budgets budgets;
        budgets.ram = 1ull << 34;
        Result<Plan> made = make_plan(*info, HardwareProfile{}, budgets, po);
        uint64_t lo = 0, hi = budgets.ram;  // no plan at lo, one at hi
        while (made && hi - lo > 1) {
            budgets.ram = lo + (hi - lo) / 2;
            (make_plan(*info, HardwareProfile{}, budgets, po) ? hi : lo) = budgets.ram;
        }
        if (made) {
            budgets.ram = hi;
            made = make_plan(*info, HardwareProfile{}, budgets, po);
        }
        EXPECT_TRUE(made) << (made ? "" : made.error().message);
        if (!made) return nullptr;
        plan = std::move(*made);
    }
    auto loaded = LoadedModel::load(std::move(*info), std::move(plan), options);
    EXPECT_TRUE(loaded) << (loaded ? "" : loaded.error().message);
    if (!loaded) return nullptr;
    EXPECT_EQ((*loaded)->store->mode_name(), mode);
    return std::move(*loaded);
}

std::unique_ptr<LoadedModel> load_model(const std::string& path, const ModelLoadOptions& options) {
    auto loaded = LoadedModel::load(path, options);
    EXPECT_TRUE(loaded) << (loaded ? "" : loaded.error().message);
    return loaded ? std::move(*loaded) : nullptr;
}

std::unique_ptr<LoadedModel> load_tiny_for_sequences(uint32_t n_seq, uint32_t max_batch) {
    ModelLoadOptions o;
    o.engine.threads = 2;
    o.engine.n_ctx = 64;
    o.engine.n_seq = n_seq;
    if (max_batch > 0) o.engine.max_batch = max_batch;
    return load_model(synth_test_model("tiny-qwen3", TensorType::Q8_0), o);
}

std::vector<float> prompt_then_decode(engine::Engine& e, std::span<const int32_t> prompt,
                                      engine::LogitsWanted wanted, int steps) {
    std::vector<float> all, logits;
    EXPECT_TRUE(e.eval(prompt, wanted, logits));
    all = logits;
    for (int i = 0; i < steps; ++i) {
        const int32_t t = int32_t(200 + 13 * i) % int32_t(e.n_vocab());
        EXPECT_TRUE(e.eval({&t, 1}, engine::LogitsWanted::Last, logits));
        all.insert(all.end(), logits.begin(), logits.end());
    }
    return all;
}

ModelLoadOptions small_load_options() {
    ModelLoadOptions o;
    o.engine.threads = 2;
    o.engine.n_ctx = 128;
    o.expert_statistics = false;
    return o;
}

void expect_same_logits(engine::Engine& want, engine::Engine& got,
                        std::span<const int32_t> prompt) {
    const std::vector<float> a = prompt_then_decode(want, prompt, engine::LogitsWanted::All);
    const std::vector<float> b = prompt_then_decode(got, prompt, engine::LogitsWanted::All);
    ASSERT_EQ(b.size(), a.size());
    EXPECT_EQ(std::memcmp(b.data(), a.data(), a.size() * sizeof(float)), 0);
}

}  // namespace strata::test
