// The plan's GPU tier (plan/plan.h): a model whose weights, KV cache and GPU buffers fit the GPU
// budget is resident on the GPU, every tensor placed there and the speed limit taken from the
// GPU's measured read bandwidth, RAM holding only the process; one that does not fit is split
// between the GPU and the CPU, the CPU's part streaming from disk when it does not fit RAM;
// otherwise, or for a plan asked for the CPU, it is planned as before, with a note saying why.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "model/activation_memory.h"
#include "model/kv_layout.h"
#include "model/streamable.h"
#include "model/tensor_view.h"
#include "plan/budget.h"
#include "plan/plan.h"
#include "plan/plan_layers.h"
#include "plan/plan_text.h"
#include "plan_test_support.h"
#include "profile/profile.h"

namespace strata {
namespace {

constexpr uint64_t GiB = 1ull << 30;

HardwareProfile with_gpu(uint64_t free_bytes) {
    return test::plan_profile_with_gpu(free_bytes);
}

Budgets budgets(uint64_t ram, uint64_t gpu) {
    return test::plan_budgets(ram, gpu);
}

// The largest layer's bytes (a dense split's prompt staging) and the CPU's layers' (what a
// prompt batch ships).
std::pair<uint64_t, uint64_t> layer_bytes_shipped(const ModelInfo& m, const Plan& plan) {
    std::vector<uint64_t> layer(m.hparams->n_layer, 0);
    for (const ModelTensor& t : m.tensors) {
        if (t.layer >= 0) layer[size_t(t.layer)] += m.info(t).n_bytes;
    }
    uint64_t largest = 0, shipped = 0;
    for (uint32_t l = 0; l < m.hparams->n_layer; ++l) {
        largest = std::max(largest, layer[l]);
        if (!plan.layers[l].on_gpu) shipped += layer[l];
    }
    return {largest, shipped};
}

// A hybrid (Gated DeltaNet) model is placed on the GPU like any other; its delta-net layers'
// recurrent state, held in GPU memory where their keys and values would be, is counted in the
// GPU's KV cache figure (model/kv_layout.h: kv_layer_bytes).
TEST(PlanGpu, HybridModelIsResidentWithItsRecurrentStateCounted) {
    const ModelInfo m = test::synthetic_model_info("qwen35-35b-a3b", "Q4_K_M");
    const ModelHparams& hp = *m.hparams;
    ASSERT_TRUE(hp.has_recurrent());
    auto plan = make_plan(m, with_gpu(70 * GiB), budgets(8 * GiB, 60 * GiB));
    ASSERT_TRUE(plan) << plan.error().message;
    EXPECT_TRUE(plan->gpu_resident()) << plan->gpu_note;
    const GpuMemoryPlan& g = plan->gpu_memory;
    EXPECT_EQ(g.kv_cache, kv_cache_bytes(hp, plan->n_ctx, plan->kv_type));
    uint64_t state = 0;
    for (uint32_t l = 0; l < hp.n_layer; ++l) {
        if (hp.is_recurrent(l)) state += recurrent_conv_bytes(hp) + recurrent_delta_bytes(hp);
    }
    EXPECT_GT(state, 0u);
    EXPECT_GE(g.kv_cache, state);
    // All of it on the GPU, none in RAM.
    EXPECT_EQ(g.recurrent_state, uint64_t(plan->n_seq) * state);
    EXPECT_EQ(plan->memory.recurrent_state, 0u);
    EXPECT_EQ(g.activations, gpu_activation_bytes(hp, {plan->batch, plan->n_ctx}));
    EXPECT_LE(g.total, g.budget);
}

TEST(PlanGpu, ModelThatFitsTheGpuIsResidentThere) {
    const ModelInfo m = test::synthetic_model_info("1b", "Q4_K_M");
    auto plan = make_plan(m, with_gpu(70 * GiB), budgets(8 * GiB, 60 * GiB));
    ASSERT_TRUE(plan) << plan.error().message;
    EXPECT_TRUE(plan->gpu_resident());
    EXPECT_EQ(plan->mode, PlanMode::Resident);
    for (const TensorPlacement& t : plan->tensors) EXPECT_EQ(t.tier, Tier::Gpu);
    const GpuMemoryPlan& g = plan->gpu_memory;
    EXPECT_EQ(g.weights, m.totals.bytes);
    EXPECT_EQ(g.kv_cache, kv_cache_bytes(*m.hparams, plan->n_ctx, plan->kv_type));
    EXPECT_EQ(g.activations, gpu_activation_bytes(*m.hparams, {plan->batch, plan->n_ctx}));
    EXPECT_EQ(g.total, g.weights + g.kv_cache + g.activations);
    EXPECT_LE(g.total, g.budget);
    // RAM holds no weights and no KV cache.
    EXPECT_EQ(plan->memory.resident_weights, 0u);
    EXPECT_EQ(plan->memory.kv_cache, 0u);
    EXPECT_LE(plan->memory.total, plan->memory.budget);
    // The limit: every weight read once per token at the GPU's read bandwidth.
    EXPECT_EQ(plan->bound, Tier::Gpu);
    const TierTraffic& gpu = plan->traffic(Tier::Gpu);
    EXPECT_DOUBLE_EQ(gpu.bandwidth, 3e12);
    EXPECT_NEAR(plan->tokens_per_second, 3e12 / gpu.bytes_per_token, 1e-6);
}

// The layer split: the last layers and the head (norm and matrix) on the GPU, as many as its
// budget holds; the first layers and the embedding table resident in RAM for the CPU.
TEST(PlanGpu, ModelLargerThanTheGpuBudgetIsSplitByLayers) {
    const ModelInfo m = test::synthetic_model_info("8b", "Q4_K_M");  // untied head
    const ModelHparams& hp = *m.hparams;
    const uint64_t gpu_budget = m.totals.bytes / 2;
    auto plan = make_plan(m, with_gpu(70 * GiB), budgets(16 * GiB, gpu_budget));
    ASSERT_TRUE(plan) << plan.error().message;
    EXPECT_FALSE(plan->gpu_resident());
    ASSERT_TRUE(plan->gpu_split()) << plan->gpu_note;
    EXPECT_EQ(plan->mode, PlanMode::Resident);
    const uint32_t k = plan->gpu_layers;
    ASSERT_GT(k, 0u);
    ASSERT_LT(k, hp.n_layer);
    uint64_t gpu_weights = 0, ram_weights = 0;
    std::vector<uint64_t> layer_bytes(hp.n_layer, 0);
    for (size_t i = 0; i < m.tensors.size(); ++i) {
        const ModelTensor& t = m.tensors[i];
        const uint64_t bytes = m.info(t).n_bytes;
        const TensorPlacement& p = plan->tensors[i];
        EXPECT_EQ(p.use, TensorUse::Resident);
        if (t.layer >= 0) {
            layer_bytes[size_t(t.layer)] += bytes;
            EXPECT_EQ(p.tier, uint32_t(t.layer) + k >= hp.n_layer ? Tier::Gpu : Tier::Ram)
                << m.info(t).name;
        } else if (t.role == TensorRole::Output || t.role == TensorRole::OutputNorm) {
            EXPECT_EQ(p.tier, Tier::Gpu) << m.info(t).name;
        } else {
            EXPECT_EQ(p.tier, Tier::Ram) << m.info(t).name;
        }
        (p.tier == Tier::Gpu ? gpu_weights : ram_weights) += bytes;
    }
    for (uint32_t l = 0; l < hp.n_layer; ++l)
        EXPECT_EQ(plan->layers[l].on_gpu, l + k >= hp.n_layer);
    // The GPU's memory: its weights, its layers' KV cache, its buffers; one more layer would not
    // have fitted.
    const GpuMemoryPlan& g = plan->gpu_memory;
    const uint64_t layer_kv = kv_layer_bytes(hp, 0, plan->n_ctx, plan->kv_type);
    EXPECT_EQ(g.weights, gpu_weights);
    EXPECT_EQ(g.kv_cache, uint64_t(k) * layer_kv);
    EXPECT_EQ(g.activations, gpu_activation_bytes(hp, {plan->batch, plan->n_ctx}));
    // Room to ship the largest layer for prompt batches (DenseSplitShipsPromptBatchesAtTheBusRate).
    EXPECT_EQ(g.prompt_staging, *std::max_element(layer_bytes.begin(), layer_bytes.end()));
    EXPECT_EQ(g.total, g.weights + g.kv_cache + g.activations + g.prompt_staging);
    EXPECT_LE(g.total, gpu_budget);
    EXPECT_GT(g.total + layer_bytes[hp.n_layer - 1 - k] + layer_kv, gpu_budget);
    // RAM: the CPU's layers, the embedding table, their KV cache, the process.
    const MemoryPlan& r = plan->memory;
    EXPECT_EQ(r.resident_weights, ram_weights);
    EXPECT_EQ(r.kv_cache, uint64_t(hp.n_layer - k) * layer_kv);
    EXPECT_LE(r.total, r.budget);
    // The limit adds the two tiers' times per token.
    const TierTraffic &gt = plan->traffic(Tier::Gpu), &rt = plan->traffic(Tier::Ram);
    EXPECT_GT(gt.bytes_per_token, 0);
    EXPECT_GT(rt.bytes_per_token, 0);
    EXPECT_NEAR(plan->tokens_per_second,
                1.0 / (gt.bytes_per_token / gt.bandwidth + rt.bytes_per_token / rt.bandwidth),
                1e-6);
    EXPECT_EQ(plan->bound, Tier::Ram);
}

// A tied head is the embedding table: it goes to the GPU with the head, and the first layers
// still run on the CPU.
TEST(PlanGpu, ATiedHeadGoesToTheGpuWithItsTable) {
    const ModelInfo m = test::synthetic_model_info("1b", "Q4_K_M");
    ASSERT_TRUE(m.hparams->tied_output);
    auto plan = make_plan(m, with_gpu(70 * GiB), budgets(8 * GiB, m.totals.bytes * 3 / 4));
    ASSERT_TRUE(plan) << plan.error().message;
    ASSERT_TRUE(plan->gpu_split()) << plan->gpu_note;
    for (size_t i = 0; i < m.tensors.size(); ++i) {
        if (m.tensors[i].role == TensorRole::TokenEmbedding) {
            EXPECT_EQ(plan->tensors[i].tier, Tier::Gpu);
        }
    }
    EXPECT_FALSE(plan->layers.front().on_gpu);
    EXPECT_TRUE(plan->layers.back().on_gpu);
}

TEST(PlanGpu, ModelWhoseHeadAloneFillsTheGpuBudgetIsPlannedForTheCpu) {
    const ModelInfo m = test::synthetic_model_info("8b", "Q4_K_M");
    auto plan = make_plan(m, with_gpu(70 * GiB), budgets(16 * GiB, 300ull << 20));
    ASSERT_TRUE(plan) << plan.error().message;
    EXPECT_FALSE(plan->gpu_resident());
    EXPECT_FALSE(plan->gpu_split());
    EXPECT_LT(plan->gpu_device, 0);
    for (const TensorPlacement& t : plan->tensors) EXPECT_NE(t.tier, Tier::Gpu);
    EXPECT_NE(plan->gpu_note.find("not one layer"), std::string::npos) << plan->gpu_note;
}

// What the CPU would hold beside the GPU does not fit the RAM budget: the CPU's layers stream
// their FFN weights from disk through slots, as many of them cached as fit, the GPU's layers as
// in the split above; faster than the CPU's own ffn-stream plan under the same RAM budget.
TEST(PlanGpu, SplitWhoseHostSideExceedsTheRamBudgetStreamsTheCpusFfnLayers) {
    const ModelInfo m = test::synthetic_model_info("8b", "Q4_K_M");
    const ModelHparams& hp = *m.hparams;
    HardwareProfile profile = with_gpu(70 * GiB);
    profile.gpus.front().host_to_device_pinned_bandwidth = 50e9;
    auto plan = make_plan(m, profile, budgets(3 * GiB, 2 * GiB));
    ASSERT_TRUE(plan) << plan.error().message;
    ASSERT_TRUE(plan->gpu_split()) << plan->gpu_note;
    EXPECT_EQ(plan->mode, PlanMode::FfnStream);
    const uint32_t gpu = plan->gpu_layers, cpu = hp.n_layer - gpu;
    EXPECT_GT(gpu, 0u);
    uint32_t streamed = 0, cached = 0;
    for (uint32_t l = 0; l < hp.n_layer; ++l) {
        const LayerPlan& lp = plan->layers[l];
        EXPECT_EQ(lp.on_gpu, l >= cpu) << "layer " << l;
        if (lp.on_gpu) {
            EXPECT_EQ(lp.ffn_use, TensorUse::Resident) << "layer " << l;
        }
        streamed += lp.ffn_use == TensorUse::Streamed;
        cached += lp.ffn_use == TensorUse::Cached;
    }
    EXPECT_GT(streamed, 0u);
    EXPECT_EQ(streamed, plan->stream.streamed_layers);
    EXPECT_EQ(cached, plan->stream.cached_layers);
    EXPECT_GE(plan->stream.slots, kMinSlots);
    for (size_t i = 0; i < m.tensors.size(); ++i) {
        const ModelTensor& t = m.tensors[i];
        const TensorPlacement& p = plan->tensors[i];
        const bool ffn = t.layer >= 0 && is_streamable(t, StreamSet::LayerFfn);
        if (t.layer >= 0 && uint32_t(t.layer) >= cpu) {
            EXPECT_EQ(p.tier, Tier::Gpu) << m.info(t).name;
        } else if (ffn && plan->layers[size_t(t.layer)].ffn_use == TensorUse::Streamed) {
            EXPECT_EQ(p.tier, Tier::Disk) << m.info(t).name;
            EXPECT_EQ(p.unit, StreamUnit::Layer) << m.info(t).name;
        } else if (t.layer >= 0 || t.role == TensorRole::TokenEmbedding) {
            EXPECT_EQ(p.tier, Tier::Ram) << m.info(t).name;
        }
    }
    EXPECT_LE(plan->memory.total, plan->memory.budget);
    EXPECT_LE(plan->gpu_memory.total, plan->gpu_memory.budget);
    EXPECT_EQ(plan->bound, Tier::Disk);
    // Prompt batches ship the CPU's layers to the GPU, the streamed FFNs from their slots: the
    // disk reads them once per batch, which bounds the prompt when it is slower than the bus.
    const auto [largest, shipped] = layer_bytes_shipped(m, *plan);
    EXPECT_EQ(plan->gpu_memory.prompt_staging, largest);
    const TierTraffic& disk = plan->tiers[size_t(Tier::Disk)];
    const double bus = double(shipped) / 50e9;
    ASSERT_GT(disk.seconds_per_token, bus);
    EXPECT_EQ(plan->prompt_bound, Tier::Disk);
    EXPECT_DOUBLE_EQ(plan->prompt_tokens_per_second, double(plan->batch) / disk.seconds_per_token);
    const std::string text = plan_text(*plan);
    EXPECT_NE(text.find("bound by reading the streamed weights from disk"), std::string::npos)
        << text;
    EXPECT_NE(text.find("disk (streamed; cpu; prompts: shipped to the gpu)"), std::string::npos)
        << text;

    PlanOptions cpu_only;
    cpu_only.gpu = false;
    auto alone = make_plan(m, profile, budgets(3 * GiB, 2 * GiB), cpu_only);
    ASSERT_TRUE(alone) << alone.error().message;
    EXPECT_EQ(alone->mode, PlanMode::FfnStream);
    EXPECT_LT(alone->tokens_per_second, plan->tokens_per_second);
}

// A dense model's layer split ships each CPU layer's matrices to the GPU for a prompt batch of
// ModelHparams::batch_ships_layers tokens: its prompt limit is the bus's, a batch per crossing of
// every CPU layer's weights at the measured pinned rate; a batch too small to ship has none.
TEST(PlanGpu, DenseSplitShipsPromptBatchesAtTheBusRate) {
    const ModelInfo m = test::synthetic_model_info("8b", "Q4_K_M");
    const ModelHparams& hp = *m.hparams;
    HardwareProfile profile = with_gpu(70 * GiB);
    profile.gpus.front().host_to_device_pinned_bandwidth = 50e9;
    auto plan = make_plan(m, profile, budgets(16 * GiB, m.totals.bytes / 2));
    ASSERT_TRUE(plan) << plan.error().message;
    ASSERT_TRUE(plan->gpu_split()) << plan->gpu_note;
    ASSERT_TRUE(hp.batch_ships_layers(plan->batch));
    const auto [largest, shipped] = layer_bytes_shipped(m, *plan);
    EXPECT_EQ(plan->gpu_memory.prompt_staging, largest);
    ASSERT_GT(shipped, 0u);
    EXPECT_DOUBLE_EQ(plan->prompt_tokens_per_second, double(plan->batch) * 50e9 / double(shipped));
    const std::string text = plan_text(*plan);
    EXPECT_NE(text.find("prompt limit"), std::string::npos) << text;
    EXPECT_NE(text.find("ship each of the CPU's layers' matrices"), std::string::npos) << text;
    EXPECT_NE(text.find("ram (cpu; prompts: matrices shipped to the gpu)"), std::string::npos)
        << text;

    PlanOptions small;
    small.max_batch = uint32_t(ModelHparams::kShippedLayerBatch - 1);
    auto unshipped = make_plan(m, profile, budgets(16 * GiB, m.totals.bytes / 2), small);
    ASSERT_TRUE(unshipped) << unshipped.error().message;
    EXPECT_EQ(unshipped->prompt_tokens_per_second, 0.0);
}

// Not even the CPU part's slots fit beside what it must hold: the CPU's own plan, which can
// stream deeper (whole layers, rows of the embedding and head), saying why.
TEST(PlanGpu, SplitWhoseStreamingCannotFitIsPlannedForTheCpu) {
    const ModelInfo m = test::synthetic_model_info("8b", "Q4_K_M");
    auto plan = make_plan(m, with_gpu(70 * GiB), budgets(1 * GiB, 1 * GiB));
    ASSERT_TRUE(plan) << plan.error().message;
    EXPECT_LT(plan->gpu_device, 0);
    EXPECT_EQ(plan->mode, PlanMode::FfnStream);
    EXPECT_NE(plan->gpu_note.find("read from disk"), std::string::npos) << plan->gpu_note;
    EXPECT_NE(plan->gpu_note.find("RAM budget"), std::string::npos) << plan->gpu_note;
}

// A GPU budget a quarter of the routed experts short of the whole model: an expert split.
uint64_t experts_split_budget(const ModelInfo& m) {
    uint64_t experts = 0;
    for (const ModelTensor& t : m.tensors) experts += t.is_routed_expert() ? m.info(t).n_bytes : 0;
    return m.totals.bytes - experts * 3 / 4;
}

// The plan of the 30B-A3B shape with a GPU budget its experts do not fit (experts_split_budget)
// and `extra` bytes more, and 48 GiB of RAM.
Result<Plan> moe_split_plan(const ModelInfo& m, uint64_t extra = 0, const PlanOptions& o = {}) {
    return make_plan(m, with_gpu(70 * GiB), budgets(48 * GiB, experts_split_budget(m) + extra), o);
}

// A mixture of experts whose routed experts do not fit: every other tensor and the whole KV
// cache on the GPU, the experts of the last layers too while they fit, the rest (with their
// routers) in RAM for the CPU; chosen over the layer split because it reads less from RAM per
// token.
TEST(PlanGpu, MoeKeepsItsRoutedExpertsInRamForTheCpu) {
    const ModelInfo m = test::synthetic_model_info("qwen3moe-30b-a3b", "Q4_K_M");
    const ModelHparams& hp = *m.hparams;
    const uint64_t gpu_budget = experts_split_budget(m);
    auto plan = moe_split_plan(m);
    ASSERT_TRUE(plan) << plan.error().message;
    ASSERT_TRUE(plan->gpu_split()) << plan->gpu_note;
    EXPECT_EQ(plan->gpu_layers, hp.n_layer);
    const uint32_t cpu = plan->cpu_expert_layers;
    EXPECT_GT(cpu, 0u);
    EXPECT_LT(cpu, hp.n_layer);
    for (uint32_t l = 0; l < hp.n_layer; ++l) {
        EXPECT_TRUE(plan->layers[l].on_gpu);
        EXPECT_EQ(plan->layers[l].experts_on_cpu, l < cpu) << "layer " << l;
    }
    for (size_t i = 0; i < m.tensors.size(); ++i) {
        const ModelTensor& t = m.tensors[i];
        const bool with_experts = t.is_routed_expert() || t.role == TensorRole::MoeRouter;
        const bool ram = (with_experts && uint32_t(t.layer) < cpu) ||
                         (t.layer < 0 && t.role == TensorRole::TokenEmbedding);
        EXPECT_EQ(plan->tensors[i].tier, ram ? Tier::Ram : Tier::Gpu) << m.info(t).name;
    }
    const GpuMemoryPlan& g = plan->gpu_memory;
    EXPECT_EQ(g.kv_cache, kv_cache_bytes(hp, plan->n_ctx, plan->kv_type));
    EXPECT_LE(g.total, gpu_budget);
    EXPECT_EQ(plan->memory.kv_cache, 0u);
    EXPECT_LE(plan->memory.total, plan->memory.budget);

    // Forced, the layer split is slower by the plan's own measure.
    PlanOptions o;
    o.gpu_split = GpuSplit::Layers;
    auto layers = moe_split_plan(m, 0, o);
    ASSERT_TRUE(layers) << layers.error().message;
    ASSERT_TRUE(layers->gpu_split());
    EXPECT_EQ(layers->cpu_expert_layers, 0u);
    EXPECT_LT(layers->gpu_layers, hp.n_layer);
    EXPECT_LT(layers->tokens_per_second, plan->tokens_per_second);
}

// What the split's whole layers of experts leave of the GPU budget holds the GPU level of the
// expert cache: entries of the largest expert (its matrices aligned as a GPU entry lays them
// out), at most the CPU's experts, its predicted hit rate their share of them. Asked for, the
// level's room is taken before whole layers: with that much more budget, the same layers stay
// on the CPU and the limit rises, the GPU reading the level's hits; asked for none, there is none.
TEST(PlanGpu, MoeSplitGivesTheRoomLeftToAGpuExpertCache) {
    const ModelInfo m = test::synthetic_model_info("qwen3moe-30b-a3b", "Q4_K_M");
    const ModelHparams& hp = *m.hparams;
    auto plan = moe_split_plan(m);
    ASSERT_TRUE(plan) << plan.error().message;
    ASSERT_TRUE(plan->gpu_split()) << plan->gpu_note;
    const GpuMemoryPlan& g = plan->gpu_memory;
    const uint64_t entry = plan_detail::expert_entry_bytes(m);
    std::vector<uint64_t> expert(hp.n_layer, 0);  // one expert's bytes, per layer
    for (const ModelTensor& t : m.tensors) {
        if (t.layer >= 0 && t.is_routed_expert()) {
            expert[size_t(t.layer)] += m.info(t).n_bytes / hp.n_expert;
        }
    }
    const uint64_t largest = *std::max_element(expert.begin(), expert.end());
    EXPECT_GE(entry, largest);
    EXPECT_LT(entry, largest + 3 * kExpertEntryAlign);
    const uint64_t cpu_experts = uint64_t(plan->cpu_expert_layers) * hp.n_expert;
    const uint64_t left = g.budget - (g.total - g.expert_cache);
    const uint64_t want = std::min(left / entry, cpu_experts);
    EXPECT_EQ(g.expert_entries, want >= hp.n_expert_used ? want : 0);
    EXPECT_EQ(g.expert_cache, g.expert_entries * g.expert_entry_bytes);
    EXPECT_LE(g.total, g.budget);
    EXPECT_DOUBLE_EQ(g.expert_hit_rate, double(g.expert_entries) / double(cpu_experts));

    PlanOptions o;
    o.gpu_expert_cache = 2 * GiB;
    auto asked = moe_split_plan(m, 2 * GiB, o);
    ASSERT_TRUE(asked) << asked.error().message;
    ASSERT_TRUE(asked->gpu_split()) << asked->gpu_note;
    EXPECT_EQ(asked->cpu_expert_layers, plan->cpu_expert_layers);
    EXPECT_EQ(asked->gpu_memory.expert_entries, 2 * GiB / entry);
    EXPECT_LE(asked->gpu_memory.total, asked->gpu_memory.budget);
    EXPECT_GT(asked->tokens_per_second, plan->tokens_per_second);
    EXPECT_GT(asked->traffic(Tier::Gpu).bytes_per_token, plan->traffic(Tier::Gpu).bytes_per_token);
    const std::string text = plan_text(*asked);
    EXPECT_NE(text.find("expert cache"), std::string::npos) << text;

    o.gpu_expert_cache = 0;
    auto none = moe_split_plan(m, 0, o);
    ASSERT_TRUE(none) << none.error().message;
    EXPECT_EQ(none->gpu_memory.expert_entries, 0u);
    EXPECT_EQ(none->gpu_memory.expert_cache, 0u);
    EXPECT_EQ(none->cpu_expert_layers, plan->cpu_expert_layers);
}

// The share of all choices among `layers` (a flag per layer) that the experts ranked first ..
// first + count - 1 by `counts` take, each count with the plan's prior added.
double top_share(const std::vector<uint32_t>& counts, const std::vector<bool>& layers,
                 uint32_t n_expert, size_t first, size_t count) {
    std::vector<uint32_t> c;
    for (size_t l = 0; l < layers.size(); ++l) {
        if (!layers[l]) continue;
        for (size_t e = 0; e < n_expert; ++e) {
            c.push_back(counts[l * n_expert + e] + kExpertCountPrior);
        }
    }
    std::sort(c.begin(), c.end(), std::greater<>());
    double total = 0, taken = 0;
    for (size_t i = 0; i < c.size(); ++i) {
        total += c[i];
        if (i >= first && i < first + count) taken += c[i];
    }
    return taken / total;
}

// Earlier runs' counts of the router's choices (the expert cache's statistics) make the plan
// predict the caches' hit rates from the most chosen experts' share of the choices instead of
// their share of the experts: under a skewed routing the GPU level of a split, and the RAM
// expert cache of the CPU's expert-stream plan, serve more than their size, and the limit rises.
TEST(PlanGpu, ExpertCacheHitRatesFollowEarlierRunsCounts) {
    const ModelInfo m = test::synthetic_model_info("qwen3moe-30b-a3b", "Q4_K_M");
    const ModelHparams& hp = *m.hparams;
    std::vector<uint32_t> counts(size_t(hp.n_layer) * hp.n_expert);
    for (size_t i = 0; i < counts.size(); ++i) counts[i] = 1000 / uint32_t(1 + i % hp.n_expert);
    PlanOptions uniform;
    uniform.gpu_expert_cache = 2 * GiB;
    PlanOptions skewed = uniform;
    skewed.expert_counts = counts;
    auto flat = moe_split_plan(m, 2 * GiB, uniform);
    auto plan = moe_split_plan(m, 2 * GiB, skewed);
    ASSERT_TRUE(flat && plan) << (flat ? plan.error().message : flat.error().message);
    ASSERT_TRUE(plan->gpu_split()) << plan->gpu_note;
    std::vector<bool> cpu(hp.n_layer);
    for (uint32_t l = 0; l < hp.n_layer; ++l) cpu[l] = plan->layers[l].experts_on_cpu;
    const GpuMemoryPlan& g = plan->gpu_memory;
    EXPECT_NEAR(g.expert_hit_rate, top_share(counts, cpu, hp.n_expert, 0, g.expert_entries), 1e-12);
    EXPECT_GT(g.expert_hit_rate, 2 * flat->gpu_memory.expert_hit_rate);
    EXPECT_GT(plan->tokens_per_second, flat->tokens_per_second);
    const bool noted = std::any_of(plan->notes.begin(), plan->notes.end(), [](const auto& n) {
        return n.find("predicted from") != std::string::npos;
    });
    EXPECT_TRUE(noted);

    // The CPU's own expert-stream plan: its cache holds the most chosen experts of every layer.
    PlanOptions cpu_only;
    cpu_only.gpu = false;
    cpu_only.mode = PlanMode::ExpertStream;
    auto flat_cpu = make_plan(m, with_gpu(70 * GiB), budgets(8 * GiB, 0), cpu_only);
    cpu_only.expert_counts = counts;
    auto streamed = make_plan(m, with_gpu(70 * GiB), budgets(8 * GiB, 0), cpu_only);
    ASSERT_TRUE(flat_cpu && streamed)
        << (flat_cpu ? streamed.error().message : flat_cpu.error().message);
    ASSERT_EQ(streamed->mode, PlanMode::ExpertStream);
    const ExpertCachePlan& c = streamed->expert_cache;
    EXPECT_NEAR(c.hit_rate,
                top_share(counts, std::vector<bool>(hp.n_layer, true), hp.n_expert, 0, c.capacity),
                1e-12);
    EXPECT_GT(c.hit_rate, flat_cpu->expert_cache.hit_rate);
    EXPECT_GT(streamed->tokens_per_second, flat_cpu->tokens_per_second);
}

// The same split reserves GPU room to ship one RAM layer's experts (and router) per prompt
// batch, and its prompt limit is the bus's: a batch of tokens per crossing of every CPU layer's
// experts at the measured pinned host-to-device rate; without a measured rate, none.
TEST(PlanGpu, MoeSplitShipsPromptBatchesAtTheBusRate) {
    const ModelInfo m = test::synthetic_model_info("qwen3moe-30b-a3b", "Q4_K_M");
    const ModelHparams& hp = *m.hparams;
    const uint64_t gpu_budget = experts_split_budget(m);
    HardwareProfile profile = with_gpu(70 * GiB);
    profile.gpus.front().host_to_device_pinned_bandwidth = 50e9;
    auto plan = make_plan(m, profile, budgets(48 * GiB, gpu_budget));
    ASSERT_TRUE(plan) << plan.error().message;
    ASSERT_TRUE(plan->gpu_split()) << plan->gpu_note;
    std::vector<uint64_t> layer(hp.n_layer, 0);  // experts and router
    for (const ModelTensor& t : m.tensors) {
        if (t.layer >= 0 && (t.is_routed_expert() || t.role == TensorRole::MoeRouter)) {
            layer[size_t(t.layer)] += m.info(t).n_bytes;
        }
    }
    uint64_t shipped = 0, largest = 0;
    for (uint32_t l = 0; l < hp.n_layer; ++l) {
        largest = std::max(largest, layer[l]);
        if (plan->layers[l].experts_on_cpu) shipped += layer[l];
    }
    EXPECT_EQ(plan->gpu_memory.prompt_staging, largest);
    ASSERT_GT(shipped, 0u);
    EXPECT_DOUBLE_EQ(plan->prompt_tokens_per_second, double(plan->batch) * 50e9 / double(shipped));
    const std::string text = plan_text(*plan);
    EXPECT_NE(text.find("prompt limit"), std::string::npos) << text;
    EXPECT_NE(text.find("experts ram (cpu; prompts: shipped to the gpu)"), std::string::npos)
        << text;

    auto unmeasured = moe_split_plan(m);
    ASSERT_TRUE(unmeasured) << unmeasured.error().message;
    EXPECT_EQ(unmeasured->prompt_tokens_per_second, 0.0);
}

// Without prompt shipping (PlanOptions::prompt_shipping, --no-prompt-shipping) a split reserves
// no prompt staging and has no prompt limit, and the GPU memory the staging took goes where the
// plan puts free GPU memory: a dense layer split's GPU takes its layers while they fit, an expert
// split's the routed experts of whole layers (then the GPU level of the expert cache); the
// staging held the largest layer's experts, so that is one layer of them more at least.
TEST(PlanGpu, SplitWithoutPromptShippingGivesTheStagingsRoomToTheGpu) {
    PlanOptions off;
    off.prompt_shipping = false;

    const ModelInfo m = test::synthetic_model_info("8b", "Q4_K_M");
    const ModelHparams& hp = *m.hparams;
    HardwareProfile profile = with_gpu(70 * GiB);
    profile.gpus.front().host_to_device_pinned_bandwidth = 50e9;
    auto shipping = make_plan(m, profile, budgets(16 * GiB, m.totals.bytes / 2));
    auto plan = make_plan(m, profile, budgets(16 * GiB, m.totals.bytes / 2), off);
    ASSERT_TRUE(shipping && plan) << (shipping ? plan.error().message : shipping.error().message);
    ASSERT_TRUE(shipping->gpu_split() && plan->gpu_split()) << plan->gpu_note;
    const uint64_t staging = shipping->gpu_memory.prompt_staging;
    ASSERT_GT(staging, 0u);
    const GpuMemoryPlan& g = plan->gpu_memory;
    EXPECT_EQ(g.prompt_staging, 0u);
    EXPECT_EQ(plan->prompt_tokens_per_second, 0.0);
    EXPECT_EQ(g.total, g.weights + g.kv_cache + g.activations);
    EXPECT_LE(g.total, g.budget);
    EXPECT_GE(plan->gpu_layers, shipping->gpu_layers);
    if (plan->gpu_layers == shipping->gpu_layers) {
        EXPECT_EQ(g.total, shipping->gpu_memory.total - staging);
    }
    // One more layer would not have fitted.
    const uint32_t k = plan->gpu_layers;
    ASSERT_LT(k, hp.n_layer);
    uint64_t next_layer = 0;
    for (const ModelTensor& t : m.tensors) {
        if (t.layer >= 0 && uint32_t(t.layer) + k + 1 == hp.n_layer) {
            next_layer += m.info(t).n_bytes;
        }
    }
    EXPECT_GT(g.total + next_layer + kv_layer_bytes(hp, 0, plan->n_ctx, plan->kv_type), g.budget);
    const std::string text = plan_text(*plan);
    EXPECT_EQ(text.find("prompts: matrices shipped"), std::string::npos) << text;
    const bool noted = std::any_of(plan->notes.begin(), plan->notes.end(), [](const auto& n) {
        return n.find("--no-prompt-shipping") != std::string::npos;
    });
    EXPECT_TRUE(noted);

    const ModelInfo moe = test::synthetic_model_info("qwen3moe-30b-a3b", "Q4_K_M");
    auto moe_shipping = moe_split_plan(moe);
    auto moe_plan = moe_split_plan(moe, 0, off);
    ASSERT_TRUE(moe_shipping && moe_plan)
        << (moe_shipping ? moe_plan.error().message : moe_shipping.error().message);
    ASSERT_TRUE(moe_shipping->gpu_split() && moe_plan->gpu_split()) << moe_plan->gpu_note;
    ASSERT_GT(moe_shipping->gpu_memory.prompt_staging, 0u);
    ASSERT_GT(moe_shipping->cpu_expert_layers, 0u);
    EXPECT_EQ(moe_plan->gpu_memory.prompt_staging, 0u);
    EXPECT_LT(moe_plan->cpu_expert_layers, moe_shipping->cpu_expert_layers);
    EXPECT_GT(moe_plan->gpu_memory.weights, moe_shipping->gpu_memory.weights);
    EXPECT_LE(moe_plan->gpu_memory.total, moe_plan->gpu_memory.budget);
    EXPECT_GT(moe_plan->tokens_per_second, moe_shipping->tokens_per_second);
}

// The expert split whose CPU part does not fit RAM either: the CPU's routed experts stay on
// disk and stream through an expert cache in the RAM left, everything else as in the split above;
// faster than the CPU's own expert-stream plan under the same RAM budget, which must also hold
// attention and the KV cache. Forced resident, it is planned for the CPU.
TEST(PlanGpu, MoeWhoseExpertsFitNeitherStreamsThemFromDiskForTheCpu) {
    const ModelInfo m = test::synthetic_model_info("qwen3moe-30b-a3b", "Q4_K_M");
    const ModelHparams& hp = *m.hparams;
    const uint64_t ram = 4 * GiB, gpu_budget = 4 * GiB;
    auto plan = make_plan(m, with_gpu(70 * GiB), budgets(ram, gpu_budget));
    ASSERT_TRUE(plan) << plan.error().message;
    ASSERT_TRUE(plan->gpu_split()) << plan->gpu_note;
    EXPECT_EQ(plan->mode, PlanMode::ExpertStream);
    EXPECT_EQ(plan->gpu_layers, hp.n_layer);
    const uint32_t cpu = plan->cpu_expert_layers;
    EXPECT_GT(cpu, 0u);
    uint64_t on_disk = 0;
    for (size_t i = 0; i < m.tensors.size(); ++i) {
        const ModelTensor& t = m.tensors[i];
        const TensorPlacement& p = plan->tensors[i];
        if (t.is_routed_expert() && uint32_t(t.layer) < cpu) {
            EXPECT_EQ(p.tier, Tier::Disk) << m.info(t).name;
            EXPECT_EQ(p.use, TensorUse::Streamed) << m.info(t).name;
            EXPECT_EQ(p.unit, StreamUnit::Expert) << m.info(t).name;
            on_disk += m.info(t).n_bytes;
        } else {
            const bool ram_side = (t.role == TensorRole::MoeRouter && uint32_t(t.layer) < cpu) ||
                                  (t.layer < 0 && t.role == TensorRole::TokenEmbedding);
            EXPECT_EQ(p.tier, ram_side ? Tier::Ram : Tier::Gpu) << m.info(t).name;
        }
    }
    for (uint32_t l = 0; l < hp.n_layer; ++l) {
        EXPECT_EQ(plan->layers[l].ffn_use, l < cpu ? TensorUse::Streamed : TensorUse::Resident);
    }
    const ExpertCachePlan& c = plan->expert_cache;
    EXPECT_EQ(c.experts, uint64_t(cpu) * hp.n_expert);
    EXPECT_GT(c.capacity, 0u);
    EXPECT_LT(c.capacity, c.experts);
    EXPECT_EQ(plan->stream.slots, kMinSlots);
    EXPECT_EQ(plan->traffic(Tier::Disk).stored_bytes, on_disk);
    EXPECT_GT(plan->traffic(Tier::Disk).bytes_per_token, 0);
    EXPECT_EQ(plan->bound, Tier::Disk);
    EXPECT_LE(plan->memory.total, plan->memory.budget);
    EXPECT_EQ(plan->memory.expert_cache, c.capacity * c.expert_bytes);
    EXPECT_LE(plan->gpu_memory.total, gpu_budget);

    PlanOptions cpu_only;
    cpu_only.gpu = false;
    auto alone = make_plan(m, with_gpu(70 * GiB), budgets(ram, gpu_budget), cpu_only);
    ASSERT_TRUE(alone) << alone.error().message;
    EXPECT_EQ(alone->mode, PlanMode::ExpertStream);
    EXPECT_LT(alone->expert_cache.capacity, c.capacity);
    EXPECT_LT(alone->tokens_per_second, plan->tokens_per_second);

    PlanOptions resident;
    resident.mode = PlanMode::Resident;
    auto forced = make_plan(m, with_gpu(70 * GiB), budgets(ram, gpu_budget), resident);
    EXPECT_FALSE(forced && forced->gpu_device >= 0);
}

TEST(PlanGpu, ExpertSplitOfADenseModelIsRefused) {
    const ModelInfo m = test::synthetic_model_info("8b", "Q4_K_M");
    PlanOptions o;
    o.gpu_split = GpuSplit::Experts;
    auto plan = make_plan(m, with_gpu(70 * GiB), budgets(16 * GiB, 2 * GiB), o);
    ASSERT_FALSE(plan);
    EXPECT_NE(plan.error().message.find("mixture-of-experts"), std::string::npos);
}

TEST(PlanGpu, CpuOnlyPlansIgnoreTheGpu) {
    const ModelInfo m = test::synthetic_model_info("1b", "Q4_K_M");
    PlanOptions o;
    o.gpu = false;
    auto plan = make_plan(m, with_gpu(70 * GiB), budgets(8 * GiB, 60 * GiB), o);
    ASSERT_TRUE(plan) << plan.error().message;
    EXPECT_FALSE(plan->gpu_resident());
    auto no_gpu = make_plan(m, test::plan_profile(), budgets(8 * GiB, 0));
    ASSERT_TRUE(no_gpu) << no_gpu.error().message;
    EXPECT_FALSE(no_gpu->gpu_resident());
}

// The profile measured on the H200 machine (docs/profiles/h200.json, `strata profile --json`
// there) plans an 8B Q4_K_M onto its GPU with its default budgets, at its measured HBM read
// bandwidth: what `strata inspect --profile docs/profiles/h200.json` shows anywhere.
TEST(PlanGpu, TheH200ProfilePlansAnEightBOnItsGpu) {
    auto profile = load_profile(std::string(STRATA_SOURCE_DIR) + "/docs/profiles/h200.json");
    ASSERT_TRUE(profile) << profile.error().message;
    ASSERT_EQ(profile->gpus.size(), 1u);
    EXPECT_GT(profile->gpus[0].read_bandwidth, 3e12);
    auto b = resolve_budgets(*profile, std::nullopt, std::nullopt);
    ASSERT_TRUE(b) << b.error().message;
    const ModelInfo m = test::synthetic_model_info("8b", "Q4_K_M");
    auto plan = make_plan(m, *profile, *b);
    ASSERT_TRUE(plan) << plan.error().message;
    EXPECT_TRUE(plan->gpu_resident()) << plan->gpu_note;
    EXPECT_EQ(plan->bound, Tier::Gpu);
    EXPECT_NEAR(plan->tokens_per_second,
                profile->gpus[0].read_bandwidth / plan->traffic(Tier::Gpu).bytes_per_token, 1e-6);
}

}  // namespace
}  // namespace strata
