// A model split between the GPU and the CPU (plan/plan.h, "GPU and CPU together"),
// loaded from its plan and evaluated end to end, must give the CPU's logits within the CUDA
// backend's rounding (cuda_engine_test.cpp says where that comes from). The plans are real ones:
// make_plan with a GPU budget just too small for the whole model, so the last layer and the head
// go to the GPU and the first layer stays on the CPU, or (mixtures of experts) every layer on
// the GPU with the first layers' routed experts on the CPU. The cases cover the ways the hidden
// state crosses: an untied head (embedding on the CPU, head on the GPU), a tied one (the table on
// the GPU: the embedding runs there and crosses to the CPU's first layer and back), and a layer
// whose normalized input crosses to the CPU for its routed experts and whose experts' sum comes
// back (with a shared expert on the GPU beside them: qwen2moe), and that layer's experts read
// from disk through the expert cache when the RAM budget is too small for them.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "engine/routing_trace.h"
#include "engine_test_support.h"
#include "gguf/reader.h"
#include "model/model_info.h"
#include "plan/plan.h"
#include "plan/plan_layers.h"
#include "plan_test_support.h"
#include "runtime/loaded_model.h"
#include "test_support.h"
#include "util/units.h"

namespace strata {
namespace {

constexpr uint32_t kCtx = 96, kBatch = 8;

ModelInfo info_of(const std::string& path) {
    auto file = read_gguf(path);
    EXPECT_TRUE(file) << (file ? "" : file.error().message);
    if (!file) return {};
    auto info = load_model_info(std::move(*file));
    EXPECT_TRUE(info) << (info ? "" : info.error().message);
    return info ? std::move(*info) : ModelInfo{};
}

HardwareProfile profile_with_gpu() {
    HardwareProfile p = test::plan_profile();
    GpuProfile g;
    g.index = 0;
    g.name = gpu::devices().list.front().name;
    g.memory_total = gpu::devices().list.front().memory_total;
    g.memory_free = gpu::devices().list.front().memory_free;
    g.read_bandwidth = 3e12;
    p.gpus.push_back(g);
    return p;
}

PlanOptions plan_options() {
    PlanOptions o;
    o.n_ctx = kCtx;
    o.max_batch = kBatch;  // the 12-token prompt crosses a batch boundary
    o.threads = 2;
    return o;
}

// Budgets that hold any test model whole: 8 GiB of RAM and of GPU memory.
Budgets roomy_budgets() {
    Budgets b;
    b.ram = 8ull << 30;
    b.gpu_mem = 8ull << 30;
    return b;
}

// The plan of the whole model on the GPU, for batches of `batch`.
Result<Plan> whole_gpu_plan(const ModelInfo& info, uint32_t batch) {
    PlanOptions o = plan_options();
    o.max_batch = batch;
    return make_plan(info, profile_with_gpu(), roomy_budgets(), o);
}

// The RAM budget under which `plan` would need `short_by` bytes more than it has. The plan's
// slack grows with its budget (kSlackBytes + budget / kSlackPerBudget), so the budget b solves
// b = rest + kSlackBytes + b / kSlackPerBudget - short_by, rest being the plan's memory but
// its slack.
uint64_t streamed_ram_budget(const Plan& plan, uint64_t short_by) {
    const uint64_t rest = plan.memory.total - plan.memory.slack;
    return (rest + kSlackBytes - short_by) * kSlackPerBudget / (kSlackPerBudget - 1);
}

// A real plan of the split asked for: for the layer split, a GPU budget half the last layer
// short of the whole model (the last layer on the GPU, the first on the CPU); for the expert
// split, the first layer's experts and half the second's (with their routers) short of every
// tensor the split can put on the GPU, plus its prompt staging (the largest layer's experts and
// router). Staging a layer costs what keeping one in RAM frees, so a split that ships keeps two
// layers' experts on the CPU (or every layer's, with two layers): the first two.
// With `streamed`, the RAM budget is then cut so that the CPU's part no longer fits and streams
// from disk: by a quarter of the first layer's experts (the expert cache), or, for the layer
// split, with only the last layer on the GPU, by one and a half of the CPU's FFN layers (slots).
Plan split_plan(const ModelInfo& info, GpuSplit split, bool streamed) {
    const HardwareProfile profile = profile_with_gpu();
    Budgets b = roomy_budgets();
    auto whole = make_plan(info, profile, b, plan_options());
    EXPECT_TRUE(whole) << (whole ? "" : whole.error().message);
    if (!whole) return {};
    EXPECT_TRUE(whole->gpu_resident());
    const int last = int(info.hparams->n_layer) - 1;
    // The first layer with experts (after any leading dense layers).
    const int first = int(info.hparams->n_leading_dense);
    uint64_t last_layer = 0, first_experts = 0, untied_table = 0;
    std::vector<uint64_t> shipped(info.hparams->n_layer, 0);  // per layer: experts and router
    for (const ModelTensor& t : info.tensors) {
        const uint64_t bytes = info.info(t).n_bytes;
        if (t.layer == last) last_layer += bytes;
        if (t.layer == first && t.is_routed_expert()) first_experts += bytes;
        if (t.layer >= 0 && (t.is_routed_expert() || t.role == TensorRole::MoeRouter ||
                             t.role == TensorRole::MoeRouterBias)) {
            shipped[size_t(t.layer)] += bytes;
        }
        if (t.layer < 0 && t.role == TensorRole::TokenEmbedding && !info.hparams->tied_output) {
            untied_table += bytes;
        }
    }
    const uint32_t n_layer = info.hparams->n_layer;
    const uint64_t layer_kv = whole->gpu_memory.kv_cache / n_layer;
    const size_t f = size_t(first);
    b.gpu_mem = split == GpuSplit::Experts ? whole->gpu_memory.total - untied_table - shipped[f] -
                                                 (n_layer > f + 1 ? shipped[f + 1] / 2 : 0) +
                                                 *std::max_element(shipped.begin(), shipped.end())
                : streamed ? whole->gpu_memory.total - untied_table -
                                 (n_layer - 1) * (last_layer + layer_kv) + last_layer / 2
                           : whole->gpu_memory.total - last_layer / 2;
    PlanOptions o = plan_options();
    o.gpu_split = split;
    auto plan = make_plan(info, profile, b, o);
    EXPECT_TRUE(plan) << (plan ? "" : plan.error().message);
    if (plan && streamed) {
        b.ram = streamed_ram_budget(*plan, split == GpuSplit::Experts
                                               ? first_experts / 4
                                               : plan->layers.front().ffn_bytes * 3 / 2);
        plan = make_plan(info, profile, b, o);
        EXPECT_TRUE(plan) << (plan ? "" : plan.error().message);
    }
    return plan ? std::move(*plan) : Plan{};
}

// The logits of a prompt of `prompt_tokens` tokens (in batches of `batch`) and, with `decode`, of
// 16 decode steps after it. MoE models route by a fixed trace unless `route` (the backends' own
// routing). `shipped`, when given, receives the weights' bytes the prompt shipped to the GPU;
// `device_bytes` the GPU memory the loaded model holds after the last step, as the driver counts
// it (its free memory before the load less its free memory then).
std::vector<std::vector<float>> evaluate(
    const std::string& path, std::optional<Plan> plan, bool route = false, uint32_t batch = kBatch,
    bool decode = true, size_t prompt_tokens = 12, uint64_t* shipped = nullptr,
    int64_t* device_bytes = nullptr, VramExpertStats* level = nullptr, uint32_t gpu_prefetch = 0) {
    ModelLoadOptions options;
    options.engine.tuning.gpu_expert_prefetch = gpu_prefetch;
    options.engine.threads = 2;
    options.engine.n_ctx = kCtx;
    options.engine.max_batch = batch;
    std::vector<std::vector<float>> rows;
    ModelInfo info = info_of(path);
    if (info.hparams && info.hparams->is_moe() && !route) {
        // One fixed routing for both runs (cuda_engine_test.cpp says why).
        const ModelHparams& hp = *info.hparams;
        options.engine.forced_routing =
            std::make_shared<engine::RoutingTrace>(engine::make_local_trace(
                int(hp.n_layer), int(hp.n_expert), int(hp.n_expert_used), 64, 0.5, 1.0, 3));
    }
    const auto free_now = [] {
        const auto m = gpu::memory_info(0);
        EXPECT_TRUE(m) << (m ? "" : m.error().message);
        return m ? int64_t(m->free) : 0;
    };
    const int64_t free_before = device_bytes ? free_now() : 0;
    auto loaded = LoadedModel::load(std::move(info), std::move(plan), options);
    EXPECT_TRUE(loaded) << (loaded ? "" : loaded.error().message);
    if (!loaded) return rows;
    engine::Engine& e = *(*loaded)->engine;
    std::vector<float> logits;
    std::vector<int32_t> prompt(prompt_tokens);
    for (size_t i = 0; i < prompt.size(); ++i)
        prompt[i] = int32_t(1 + 16 * i) % int32_t(e.n_vocab());
    EXPECT_TRUE(e.eval(prompt, engine::LogitsWanted::All, logits));
    if (shipped) *shipped = e.stats().staged_bytes;
    const size_t v = e.n_vocab();
    for (size_t r = 0; r < prompt.size(); ++r) {
        rows.emplace_back(logits.begin() + long(r * v), logits.begin() + long((r + 1) * v));
    }
    for (int i = 0; decode && i < 16; ++i) {
        const int32_t t = int32_t(200 + 13 * i) % int32_t(v);
        EXPECT_TRUE(e.eval({&t, 1}, engine::LogitsWanted::Last, logits));
        rows.push_back(logits);
    }
    if (device_bytes) *device_bytes = free_before - free_now();
    if (level) *level = (*loaded)->store->report().gpu_experts;
    return rows;
}

struct Case {
    std::string preset;
    GpuSplit split;
    bool streamed = false;  // the CPU's experts read from disk (split_plan)
};

class CudaSplit : public ::testing::TestWithParam<Case> {};

TEST_P(CudaSplit, GivesTheLogitsOfTheCpu) {
    STRATA_REQUIRE_GPU();
    const Case& c = GetParam();
    // Six layers where the CPU's part streams by layers: two are too few to stream (two slots
    // would hold more than the layers themselves).
    const uint32_t layers = c.streamed && c.split == GpuSplit::Layers ? 6 : 0;
    const std::string& path = test::synth_test_model(c.preset, TensorType::Q8_0, 1, layers);
    const ModelInfo info = info_of(path);
    ASSERT_TRUE(info.hparams);
    const uint32_t n_layer = info.hparams->n_layer;
    const Plan plan = split_plan(info, c.split, c.streamed);
    ASSERT_TRUE(plan.gpu_split()) << plan.gpu_note;
    const PlanMode mode = !c.streamed                   ? PlanMode::Resident
                          : c.split == GpuSplit::Layers ? PlanMode::FfnStream
                                                        : PlanMode::ExpertStream;
    ASSERT_EQ(plan.mode, mode) << plan.reason;
    if (c.split == GpuSplit::Layers) {
        // All but the first layer where the layers are alike; a hybrid's differ (its first, a
        // delta-net layer, may weigh more than the last, an attention layer), and so do a model's
        // with leading dense layers (the first, left to the CPU, weighs less than an MoE layer),
        // so fewer may fit.
        if (c.streamed) {
            ASSERT_EQ(plan.gpu_layers, 1u);
        } else {
            ASSERT_GE(plan.gpu_layers, 1u);
            ASSERT_LT(plan.gpu_layers, n_layer);
            if (!info.hparams->has_recurrent() && info.hparams->n_leading_dense == 0) {
                ASSERT_EQ(plan.gpu_layers, n_layer - 1);
            }
        }
        if (c.streamed) {
            ASSERT_GT(plan.stream.streamed_layers, 0u);
        }
        ASSERT_EQ(plan.cpu_expert_layers, 0u);
    } else {
        const uint32_t first = info.hparams->n_leading_dense;
        ASSERT_EQ(plan.gpu_layers, n_layer);
        ASSERT_EQ(plan.cpu_expert_layers, std::min(2u, n_layer - first));
        ASSERT_TRUE(plan.layers[first].experts_on_cpu);
    }
    const auto cpu = evaluate(path, std::nullopt);
    const auto split = evaluate(path, plan);
    ASSERT_EQ(cpu.size(), split.size());
    // Q8_0 activations on both sides; the GPU's part rounds as cuda_engine_test's bound allows.
    constexpr double tol = 6e-2;
    double worst = 0;
    for (size_t r = 0; r < cpu.size(); ++r) {
        ASSERT_EQ(split[r].size(), cpu[r].size());
        const double e = test::rel_l2(split[r], cpu[r]);
        worst = std::max(worst, e);
        EXPECT_LE(e, tol) << "row " << r << (r < 12 ? " (prompt)" : " (decode)");
    }
    std::printf(
        "%-14s split by %s (%u layers on the GPU, experts of %u on the CPU%s): worst "
        "relative error %.2e (bound %.0e)\n",
        c.preset.c_str(), std::string(gpu_split_name(c.split)).c_str(), plan.gpu_layers,
        plan.cpu_expert_layers, c.streamed ? ", from disk" : "", worst, tol);
}

// A prompt batch that uses every expert twice on average ships the CPU's layer of experts (and its
// router) to the GPU, which then routes and computes it with the kernels it runs its own layers'
// experts with: so the split's prompt logits are those of the whole model on the GPU, to the bit
// where the kernels are deterministic (here within 1e-6 relative). The CPU computing that layer
// instead would differ by its rounding (~1e-2): the bound tells the two apart.
class CudaSplitShipping : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaSplitShipping, GivesThePromptLogitsOfTheWholeModelOnTheGpu) {
    STRATA_REQUIRE_GPU();
    const std::string& path = test::synth_test_model(GetParam(), TensorType::Q8_0, 1, 0);
    const ModelInfo info = info_of(path);
    ASSERT_TRUE(info.hparams);
    const ModelHparams& hp = *info.hparams;
    constexpr uint32_t kOneBatch = 16;  // the 12-token prompt in one batch
    ASSERT_GE(12 * hp.n_expert_used, 2 * hp.n_expert) << "the batch would not ship";
    const Plan plan = split_plan(info, GpuSplit::Experts, false);
    ASSERT_TRUE(plan.gpu_split()) << plan.gpu_note;
    ASSERT_EQ(plan.cpu_expert_layers, std::min(2u, hp.n_layer - hp.n_leading_dense));
    ASSERT_GT(plan.gpu_memory.prompt_staging, 0u) << plan.reason;
    auto whole = whole_gpu_plan(info, kOneBatch);
    ASSERT_TRUE(whole) << whole.error().message;
    ASSERT_TRUE(whole->gpu_resident());
    const auto gpu = evaluate(path, std::move(*whole), true, kOneBatch, false);
    Plan split = plan;
    split.batch = kOneBatch;
    const auto shipped = evaluate(path, split, true, kOneBatch, false);
    ASSERT_EQ(gpu.size(), 12u);
    ASSERT_EQ(shipped.size(), gpu.size());
    double worst = 0;
    for (size_t r = 0; r < gpu.size(); ++r) {
        const double e = test::rel_l2(shipped[r], gpu[r]);
        worst = std::max(worst, e);
        EXPECT_LE(e, 1e-6) << "row " << r;
    }
    std::printf(
        "%-14s prompt with the CPU's experts shipped (%s of staging): worst relative "
        "difference from the whole model on the GPU %.2e\n",
        GetParam().c_str(), format_bytes(plan.gpu_memory.prompt_staging).c_str(), worst);
}

// A dense model's layer split ships the CPU's layer's projections and FFN to the GPU for a prompt
// batch of ModelHparams::batch_ships_layers tokens: the GPU multiplies them while the CPU runs the
// norms, RoPE and attention, the activations crossing between (Q wider than n_embd in qwen3,
// biases in qwen2). The prompt's logits and the decode steps after it (not shipped) are the
// CPU's within the split's bound (CudaSplit); each batch ships the CPU layer's matrices once.
class CudaDenseSplitShipping : public ::testing::TestWithParam<std::string> {};

// The projections and FFN matrices of a CPU layer, which a shipped batch counts (not biases).
bool is_matrix_a_batch_ships(const ModelTensor& t) {
    const bool ffn_or_projection =
        t.role == TensorRole::AttnQ || t.role == TensorRole::AttnK || t.role == TensorRole::AttnV ||
        t.role == TensorRole::AttnOutput || t.role == TensorRole::FfnGate ||
        t.role == TensorRole::FfnUp || t.role == TensorRole::FfnDown;
    return ffn_or_projection && !t.is_bias;
}

constexpr uint32_t kShipBatch = 32;
constexpr size_t kPrompt = 20;

// The largest relative error of a split's rows (kPrompt prompt rows, then decode steps) against
// the CPU's, each expected within tol.
double worst_error(const std::vector<std::vector<float>>& split,
                   const std::vector<std::vector<float>>& cpu, double tol) {
    double worst = 0;
    for (size_t r = 0; r < cpu.size() && r < split.size(); ++r) {
        const double e = test::rel_l2(split[r], cpu[r]);
        worst = std::max(worst, e);
        EXPECT_LE(e, tol) << "row " << r << (r < kPrompt ? " (prompt)" : " (decode)");
    }
    return worst;
}

// The plan of a two-layer dense model split by layers with prompt staging: a GPU budget that
// holds the last layer, the head and the staging of one layer (the whole model's, less the first
// layer and its KV cache, plus the staging and half that KV cache). `matrices`: the bytes of the
// first layer's projections and FFN, which a batch ships.
Plan dense_shipping_plan(const ModelInfo& info, uint64_t& matrices) {
    const HardwareProfile profile = profile_with_gpu();
    auto whole = whole_gpu_plan(info, kShipBatch);
    EXPECT_TRUE(whole) << (whole ? "" : whole.error().message);
    if (!whole) return {};
    Budgets b = roomy_budgets();
    PlanOptions o = plan_options();
    o.max_batch = kShipBatch;
    uint64_t layer[2] = {0, 0};
    matrices = 0;
    for (const ModelTensor& t : info.tensors) {
        if (t.layer < 0) continue;
        layer[t.layer] += info.info(t).n_bytes;
        if (t.layer == 0 && is_matrix_a_batch_ships(t)) matrices += info.info(t).n_bytes;
    }
    const uint64_t kv = whole->gpu_memory.kv_cache / 2;
    b.gpu_mem = whole->gpu_memory.total - layer[0] - kv + std::max(layer[0], layer[1]) + kv / 2;
    o.gpu_split = GpuSplit::Layers;
    auto plan = make_plan(info, profile, b, o);
    EXPECT_TRUE(plan) << (plan ? "" : plan.error().message);
    return plan ? std::move(*plan) : Plan{};
}

TEST_P(CudaDenseSplitShipping, GivesTheLogitsOfTheCpu) {
    STRATA_REQUIRE_GPU();
    const std::string& path = test::synth_test_model(GetParam(), TensorType::Q8_0, 1, 0);
    const ModelInfo info = info_of(path);
    ASSERT_TRUE(info.hparams);
    const ModelHparams& hp = *info.hparams;
    ASSERT_EQ(hp.n_layer, 2u);
    ASSERT_TRUE(hp.batch_ships_layers(int64_t(kPrompt)));
    uint64_t matrices = 0;
    const std::optional<Plan> plan = dense_shipping_plan(info, matrices);
    ASSERT_TRUE(plan->gpu_split()) << plan->gpu_note;
    ASSERT_EQ(plan->gpu_layers, 1u) << plan->reason;
    ASSERT_GT(plan->gpu_memory.prompt_staging, 0u) << plan->reason;
    const auto cpu = evaluate(path, std::nullopt, false, kShipBatch, true, kPrompt);
    uint64_t shipped = 0;
    const auto split = evaluate(path, *plan, false, kShipBatch, true, kPrompt, &shipped);
    EXPECT_EQ(shipped, matrices);  // the first layer's, once: one batch
    ASSERT_EQ(split.size(), cpu.size());
    constexpr double tol = 6e-2;
    const double worst = worst_error(split, cpu, tol);
    std::printf(
        "%-14s prompt with the CPU layer's matrices shipped (%s per batch, %s of staging): "
        "worst relative error %.2e (bound %.0e)\n",
        GetParam().c_str(), format_bytes(shipped).c_str(),
        format_bytes(plan->gpu_memory.prompt_staging).c_str(), worst, tol);
}

// The same with the CPU's FFN layers streamed from disk (a RAM budget too small for them): a batch
// ships each streamed FFN from the slot it was read into, beside the resident projections.
TEST(CudaDenseSplitShippingStreamed, GivesTheLogitsOfTheCpu) {
    STRATA_REQUIRE_GPU();
    const std::string& path = test::synth_test_model("tiny", TensorType::Q8_0, 1, 6);
    const ModelInfo info = info_of(path);
    ASSERT_TRUE(info.hparams);
    const ModelHparams& hp = *info.hparams;
    const HardwareProfile profile = profile_with_gpu();
    auto whole = whole_gpu_plan(info, kShipBatch);
    ASSERT_TRUE(whole) << whole.error().message;
    Budgets b = roomy_budgets();
    PlanOptions o = plan_options();
    o.max_batch = kShipBatch;
    uint64_t layer = 0, untied = 0, matrices = 0;  // the layers are alike
    for (const ModelTensor& t : info.tensors) {
        const uint64_t bytes = info.info(t).n_bytes;
        if (t.layer == 0) layer += bytes;
        if (t.layer >= 0 && uint32_t(t.layer) + 1 < hp.n_layer && is_matrix_a_batch_ships(t)) {
            matrices += bytes;
        }
        if (t.layer < 0 && t.role == TensorRole::TokenEmbedding && !hp.tied_output) untied += bytes;
    }
    // The last layer, the head and one layer of staging on the GPU; then RAM too small for the
    // CPU's FFNs.
    const uint64_t layer_kv = whole->gpu_memory.kv_cache / hp.n_layer;
    b.gpu_mem = whole->gpu_memory.total - untied - (hp.n_layer - 1) * (layer + layer_kv) + layer +
                layer / 2;
    o.gpu_split = GpuSplit::Layers;
    auto plan = make_plan(info, profile, b, o);
    ASSERT_TRUE(plan) << plan.error().message;
    b.ram = streamed_ram_budget(*plan, plan->layers.front().ffn_bytes * 3 / 2);
    plan = make_plan(info, profile, b, o);
    ASSERT_TRUE(plan) << plan.error().message;
    ASSERT_EQ(plan->mode, PlanMode::FfnStream) << plan->reason;
    ASSERT_EQ(plan->gpu_layers, 1u) << plan->reason;
    ASSERT_GT(plan->stream.streamed_layers, 0u) << plan->reason;
    ASSERT_GT(plan->gpu_memory.prompt_staging, 0u) << plan->reason;
    const auto cpu = evaluate(path, std::nullopt, false, kShipBatch, true, kPrompt);
    uint64_t shipped = 0;
    const auto split = evaluate(path, *plan, false, kShipBatch, true, kPrompt, &shipped);
    EXPECT_EQ(shipped, matrices);  // the CPU layers', once: one batch
    ASSERT_EQ(split.size(), cpu.size());
    constexpr double tol = 6e-2;
    const double worst = worst_error(split, cpu, tol);
    std::printf(
        "tiny, 6 layers: prompt with %u of 5 CPU layers' FFNs streamed and shipped from their "
        "slots (%s per batch): worst relative error %.2e (bound %.0e)\n",
        plan->stream.streamed_layers, format_bytes(shipped).c_str(), worst, tol);
}

// The GPU level of the expert cache (engine/vram_expert_cache.h) in an expert split: the room
// the split leaves (split_plan's budget leaves about half a layer's experts) holds entries for
// the CPU's experts, which the GPU computes once they have earned one. The logits stay the
// CPU's within the same bound, through the prompt and the decode steps, and the level serves
// some of the CPU's experts: its loads land while the steps go on.
class CudaSplitGpuExpertCache : public ::testing::TestWithParam<Case> {};

TEST_P(CudaSplitGpuExpertCache, GivesTheLogitsOfTheCpu) {
    STRATA_REQUIRE_GPU();
    const Case& c = GetParam();
    const std::string& path = test::synth_test_model(c.preset, TensorType::Q8_0, 1, 0);
    const ModelInfo info = info_of(path);
    ASSERT_TRUE(info.hparams);
    const std::optional<Plan> plan = split_plan(info, GpuSplit::Experts, c.streamed);
    ASSERT_TRUE(plan->gpu_split()) << plan->gpu_note;
    ASSERT_EQ(plan->mode, c.streamed ? PlanMode::ExpertStream : PlanMode::Resident);
    ASSERT_GE(plan->gpu_memory.expert_entries, info.hparams->n_expert_used) << plan->reason;
    EXPECT_EQ(plan->gpu_memory.expert_entry_bytes, plan_detail::expert_entry_bytes(info));
    const auto cpu = evaluate(path, std::nullopt);
    VramExpertStats level;
    const auto split = evaluate(path, *plan, false, kBatch, true, 12, nullptr, nullptr, &level);
    ASSERT_EQ(cpu.size(), split.size());
    constexpr double tol = 6e-2;
    const double worst = worst_error(split, cpu, tol);
    EXPECT_GT(level.loads, 0u);
    EXPECT_GT(level.hits, 0u);
    EXPECT_LE(level.hits, level.requests);
    std::printf(
        "%-14s expert split%s, GPU expert cache of %u: %llu of %llu chosen experts served by "
        "it, %llu loads; worst relative error %.2e (bound %.0e)\n",
        c.preset.c_str(), c.streamed ? " (from disk)" : "", plan->gpu_memory.expert_entries,
        static_cast<unsigned long long>(level.hits),
        static_cast<unsigned long long>(level.requests),
        static_cast<unsigned long long>(level.loads), worst, tol);
}

// Its prefetch, asked for (2 guesses a layer): with room for a ring of guesses beside the
// policy's entries (12 entries: 8 for the policy, 4 for two layers' guesses of 2), the first
// layer's input guesses the experts the second will choose and the level copies them ahead; the
// logits stay the CPU's. Both runs follow one fixed routing (evaluate), which the guesses, made
// by the router, do not know: they serve less often than they would, but every path runs.
TEST(CudaSplitGpuExpertCache, CopiesTheNextLayersGuessesAhead) {
    STRATA_REQUIRE_GPU();
    for (const char* preset : {"tiny-moe", "tiny-qwen3moe"}) {
        const std::string& path = test::synth_test_model(preset, TensorType::Q8_0, 1, 0);
        const ModelInfo info = info_of(path);
        ASSERT_TRUE(info.hparams);
        Plan plan = split_plan(info, GpuSplit::Experts, false);
        ASSERT_TRUE(plan.gpu_split()) << plan.gpu_note;
        ASSERT_EQ(plan.cpu_expert_layers, 2u) << plan.reason;
        plan.gpu_memory.expert_entries = 12;
        const auto cpu = evaluate(path, std::nullopt);
        VramExpertStats level;
        const auto split =
            evaluate(path, plan, false, kBatch, true, 12, nullptr, nullptr, &level, 2);
        ASSERT_EQ(cpu.size(), split.size());
        constexpr double tol = 6e-2;
        const double worst = worst_error(split, cpu, tol);
        EXPECT_GT(level.prefetches, 0u);
        EXPECT_LE(level.prefetch_hits, level.hits);
        EXPECT_EQ(level.prefetch_bytes, level.prefetches * plan_detail::expert_entry_bytes(info));
        std::printf(
            "%-14s expert split, GPU expert cache of 12 with prefetch: %llu of %llu chosen "
            "experts served by it, %llu loads, %llu guesses copied, %llu of them served; worst "
            "relative error %.2e (bound %.0e)\n",
            preset, static_cast<unsigned long long>(level.hits),
            static_cast<unsigned long long>(level.requests),
            static_cast<unsigned long long>(level.loads),
            static_cast<unsigned long long>(level.prefetches),
            static_cast<unsigned long long>(level.prefetch_hits), worst, tol);
    }
}

// --gpu-mem is a ceiling: what a split's engine holds on the device after a prompt (shipped) and
// decode steps, as the driver counts it, stays within the plan's GPU total but for the
// allocator's rounding. A run of the whole model on the GPU beforehand loads the kernels' code
// and cuBLAS's, which belong to the process, not to a model, and which the plan does not count.
TEST(CudaBudget, DeviceMemoryOfASplitStaysWithinItsPlan) {
    STRATA_REQUIRE_GPU();
    constexpr int64_t kRounding = 64ll << 20;
    for (const char* preset : {"tiny", "tiny-moe"}) {
        const std::string& path = test::synth_test_model(preset, TensorType::Q8_0, 1, 0);
        const ModelInfo info = info_of(path);
        ASSERT_TRUE(info.hparams);
        const bool moe = info.hparams->is_moe();
        uint64_t matrices = 0;
        const Plan plan =
            moe ? split_plan(info, GpuSplit::Experts, false) : dense_shipping_plan(info, matrices);
        ASSERT_TRUE(plan.gpu_split()) << plan.gpu_note;
        ASSERT_GT(plan.gpu_memory.prompt_staging, 0u) << plan.reason;
        auto whole = whole_gpu_plan(info, kShipBatch);
        ASSERT_TRUE(whole) << whole.error().message;
        ASSERT_TRUE(whole->gpu_resident());
        evaluate(path, std::move(*whole), moe, kShipBatch, false, kPrompt);
        int64_t held = 0;
        evaluate(path, plan, moe, kShipBatch, true, kPrompt, nullptr, &held);
        EXPECT_LE(held, int64_t(plan.gpu_memory.total) + kRounding);
        std::printf(
            "%-14s split: the GPU holds %s, the plan %s (weights %s, KV %s, "
            "activations %s, staging %s)\n",
            preset, format_bytes(uint64_t(std::max<int64_t>(held, 0))).c_str(),
            format_bytes(plan.gpu_memory.total).c_str(),
            format_bytes(plan.gpu_memory.weights).c_str(),
            format_bytes(plan.gpu_memory.kv_cache).c_str(),
            format_bytes(plan.gpu_memory.activations).c_str(),
            format_bytes(plan.gpu_memory.prompt_staging).c_str());
    }
}

INSTANTIATE_TEST_SUITE_P(Models, CudaDenseSplitShipping,
                         ::testing::Values("tiny", "tiny-qwen2", "tiny-qwen3"),
                         [](const auto& p) { return test::test_name(p.param); });

INSTANTIATE_TEST_SUITE_P(Models, CudaSplitGpuExpertCache,
                         ::testing::Values(Case{"tiny-moe", GpuSplit::Experts},
                                           Case{"tiny-qwen3moe", GpuSplit::Experts},
                                           Case{"tiny-qwen3moe", GpuSplit::Experts, true},
                                           Case{"tiny-deepseek2", GpuSplit::Experts}),
                         [](const auto& p) {
                             return test::test_name(p.param.preset +
                                                    (p.param.streamed ? "_streamed" : ""));
                         });

INSTANTIATE_TEST_SUITE_P(Models, CudaSplitShipping,
                         ::testing::Values("tiny-moe", "tiny-qwen2moe", "tiny-qwen3moe",
                                           "tiny-gpt-oss", "tiny-glm4moe", "tiny-deepseek2"),
                         [](const auto& p) { return test::test_name(p.param); });

INSTANTIATE_TEST_SUITE_P(
    Models, CudaSplit,
    ::testing::Values(
        Case{"tiny", GpuSplit::Layers}, Case{"tiny-qwen2", GpuSplit::Layers},
        Case{"tiny-moe", GpuSplit::Layers}, Case{"tiny-moe", GpuSplit::Experts},
        Case{"tiny-qwen2moe", GpuSplit::Experts}, Case{"tiny-qwen3moe", GpuSplit::Experts},
        Case{"tiny-qwen35", GpuSplit::Layers}, Case{"tiny-qwen35moe", GpuSplit::Layers},
        Case{"tiny-qwen35moe", GpuSplit::Experts}, Case{"tiny", GpuSplit::Layers, true},
        Case{"tiny-moe", GpuSplit::Experts, true}, Case{"tiny-qwen3moe", GpuSplit::Experts, true},
        Case{"tiny-gpt-oss", GpuSplit::Layers}, Case{"tiny-gpt-oss", GpuSplit::Experts},
        Case{"tiny-gpt-oss", GpuSplit::Experts, true}, Case{"tiny-glm4moe", GpuSplit::Layers},
        Case{"tiny-glm4moe", GpuSplit::Experts}, Case{"tiny-glm4moe", GpuSplit::Experts, true},
        Case{"tiny-deepseek2", GpuSplit::Layers}, Case{"tiny-deepseek2", GpuSplit::Experts},
        Case{"tiny-deepseek2", GpuSplit::Experts, true}),
    [](const auto& p) {
        return test::test_name(p.param.preset + "_" + std::string(gpu_split_name(p.param.split)) +
                               (p.param.streamed ? "_streamed" : ""));
    });

}  // namespace
}  // namespace strata
