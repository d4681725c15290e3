#include "synth/synth_config.h"

#include "model/tensor_layout.h"

namespace strata {

namespace {

// Limits that keep every tensor's element count far from overflow; real models are far below.
constexpr uint32_t kMaxDim = 1u << 20;
constexpr uint32_t kMaxExperts = 4096;
constexpr uint32_t kMaxLayers = 4096;

struct PresetShape {
    std::string_view name;
    std::string_view description;
    std::string_view arch;
    uint32_t n_embd, n_layer, n_head, n_head_kv, head_dim;
    uint32_t n_ff, n_expert, n_expert_used, n_ff_exp, n_ff_shexp;
    uint32_t n_ctx;
    float rope_base, rms_eps;
    bool tied;
    // Hybrid (qwen35) presets: the delta net's head size, key and value heads, and the rotated
    // dimensions of the attention heads (0: all).
    uint32_t ssm_state = 0, ssm_k_heads = 0, ssm_v_heads = 0, n_rot = 0;
    uint32_t n_swa = 0;          // sliding window of the windowed layers (0: none)
    float yarn_factor = 0.0f;    // YaRN context extension (0: none)
    uint32_t yarn_orig_ctx = 0;  // its original context
    // qwen3next: q, k, v and z in one projection (ssm_in), as the earlier converters wrote them;
    // false: attn_qkv and attn_gate, as the current one does.
    bool fused_qkvz = false;
    // Deepseek-style MoE (glm4moe): leading dense layers, the routed scaling factor (0: none),
    // renormalised weights, q/k/v biases and q/k norms, multi-token-prediction blocks after the
    // trunk.
    uint32_t leading_dense = 0;
    float expert_scale = 0.0f;
    bool norm_weights = false, qkv_bias = false, qk_norm = false;
    uint32_t nextn = 0;
    // DeepSeek-V3's router where the family's default is another: sigmoid scores with a
    // selection bias (exp_probs_b), and group-limited top-k (groups, groups used; 0: none).
    bool sigmoid_routing = false;
    uint32_t expert_groups = 0, expert_groups_used = 0;
    // Multi-head latent attention (deepseek2): the query's and the latent's ranks, the value
    // head size (head_dim above is the key head's, no-rope part and n_rot together), and YaRN's
    // mscale_all_dim.
    uint32_t n_lora_q = 0, n_lora_kv = 0, head_dim_v = 0;
    float mscale_all_dim = 0.0f;
    // attn_kv_b in place of attn_k_b and attn_v_b, as the earlier converters wrote them (with
    // the heads' sizes in key_length and value_length, and as many KV heads as query heads).
    bool mla_kv_b = false;
};

// Tiny presets mirror the golden synthetic families (n_embd 256, 2 layers, GQA 8:2, every row a
// multiple of 256 so K-quants apply without fallback).
//
// mixtral-10g: Mixtral-8x7B's layer shape with 12 of its 32 layers. Per layer 3 x 4096 x 14336 x 8
// = 1.41 G expert weights plus 42 M attention weights. At Q4_K_M (Q4_K = 4.5 bits/weight;
// llama.cpp's recipe puts ffn_down at Q6_K = 6.5625 bits in 5 of 12 layers and attn_k/attn_v at
// Q8_0 for 8-expert models) a layer is 0.82 GB (0.94 GB with Q6_K ffn_down): about 10.5 GB in all.
// At F16 the same shape is 34.9 GB.
constexpr PresetShape kPresets[] = {
    {"tiny", "llama, 2 layers, n_embd 256, untied output (~3 MB at F16)", "llama", 256, 2, 8, 2, 0,
     512, 0, 0, 0, 0, 2048, 500000.0f, 1e-5f, false},
    {"tiny-moe", "llama Mixtral layout, 2 layers, 8 experts top-2, tied (~7 MB at F16)", "llama",
     256, 2, 8, 2, 0, 256, 8, 2, 0, 0, 2048, 1000000.0f, 1e-5f, true},
    {"tiny-qwen2", "qwen2 (q/k/v biases), 2 layers, n_embd 256, tied", "qwen2", 256, 2, 8, 2, 0,
     512, 0, 0, 0, 0, 4096, 1000000.0f, 1e-6f, true},
    {"tiny-qwen3", "qwen3 (q/k norms, head_dim 64 != n_embd/n_head), 2 layers, tied", "qwen3", 256,
     2, 8, 2, 64, 512, 0, 0, 0, 0, 4096, 1000000.0f, 1e-6f, true},
    {"tiny-qwen2moe", "qwen2moe, 2 layers, 8 experts top-2 + shared expert, untied", "qwen2moe",
     256, 2, 8, 2, 0, 512, 8, 2, 256, 512, 4096, 1000000.0f, 1e-6f, false},
    {"tiny-qwen3moe", "qwen3moe, 2 layers, head_dim 64, 8 experts top-2, untied", "qwen3moe", 256,
     2, 8, 2, 64, 512, 8, 2, 256, 0, 4096, 1000000.0f, 1e-6f, false},
    {"1b", "Llama-3.2-1B shape: n_embd 2048, 16 layers, 32/8 heads, ff 8192, tied (2 GB F16)",
     "llama", 2048, 16, 32, 8, 0, 8192, 0, 0, 0, 0, 131072, 500000.0f, 1e-5f, true},
    {"8b", "Llama-3-8B shape: n_embd 4096, 32 layers, 32/8 heads, ff 14336 (14 GB F16)", "llama",
     4096, 32, 32, 8, 0, 14336, 0, 0, 0, 0, 8192, 500000.0f, 1e-5f, false},
    {"70b", "Llama-3-70B shape: n_embd 8192, 80 layers, 64/8 heads, ff 28672 (138 GB F16)", "llama",
     8192, 80, 64, 8, 0, 28672, 0, 0, 0, 0, 8192, 500000.0f, 1e-5f, false},
    {"mixtral-10g", "Mixtral-8x7B layers, 12 of them: ~10.5 GB at Q4_K_M, 35 GB at F16", "llama",
     4096, 12, 32, 8, 0, 14336, 8, 2, 0, 0, 32768, 1000000.0f, 1e-5f, false},
    {"qwen3moe-30b-a3b", "Qwen3-30B-A3B shape: 48 layers, 128 experts top-8 (60 GB F16)",
     "qwen3moe", 2048, 48, 32, 4, 128, 6144, 128, 8, 768, 0, 40960, 1000000.0f, 1e-6f, false},
    // Qwen3.5: three Gated DeltaNet layers to one gated full-attention layer; the tiny ones have
    // more value heads than key heads (as the real ones), so the heads' pairing is exercised.
    {"tiny-qwen35",
     "qwen35 (Qwen3.5 dense): 4 layers = 3 DeltaNet + 1 gated attention, n_embd 256, tied",
     "qwen35",
     256,
     4,
     4,
     2,
     64,
     512,
     0,
     0,
     0,
     0,
     4096,
     10000000.0f,
     1e-6f,
     true,
     64,
     2,
     4,
     16},
    {"tiny-qwen35moe",
     "qwen35moe (Qwen3.5 MoE): 4 layers, 16 experts top-4 + shared expert, untied",
     "qwen35moe",
     256,
     4,
     4,
     2,
     64,
     0,
     16,
     4,
     256,
     256,
     4096,
     10000000.0f,
     1e-6f,
     false,
     64,
     2,
     4,
     16},
    // Published Qwen3.5 MoE configs (text part): hidden 2048 / 3072, 40 / 48 layers, 16 / 32
    // query heads and 2 KV heads of 256 (a quarter rotated), DeltaNet 16 key heads and 32 / 64
    // value heads of 128, 256 experts top-8 of 512 / 1024 plus a shared expert as wide,
    // rope_theta 1e7, 262144 positions, untied.
    {"qwen35-35b-a3b",
     "Qwen3.5-35B-A3B shape: 40 layers (30 DeltaNet), 256 experts top-8 (~21 GB at Q4_K_M)",
     "qwen35moe",
     2048,
     40,
     16,
     2,
     256,
     0,
     256,
     8,
     512,
     512,
     262144,
     10000000.0f,
     1e-6f,
     false,
     128,
     16,
     32,
     64},
    // Value heads and expert width from the published config, not checked against a real file.
    {"qwen35-122b-a10b",
     "Qwen3.5-122B-A10B shape: 48 layers, 256 experts top-8 of 1024 (~73 GB at Q4_K_M)",
     "qwen35moe",
     3072,
     48,
     32,
     2,
     256,
     0,
     256,
     8,
     1024,
     1024,
     262144,
     10000000.0f,
     1e-6f,
     false,
     128,
     16,
     64,
     64},
    // Qwen3-Next: the qwen35moe layer with the delta net's projections fused per key head and
    // value heads grouped per key head (tiny: 2 key heads of 2 value heads each, so the pairing
    // differs from qwen35's), plain NEOX rope over a quarter of each head. The tiny one writes
    // ssm_in as the published files have it; tiny-qwen3next-qkv writes attn_qkv and attn_gate as
    // the current converter does.
    {"tiny-qwen3next",
     "qwen3next (Qwen3-Next): 4 layers, 16 experts top-4 + shared expert, fused ssm_in, untied",
     "qwen3next",
     256,
     4,
     4,
     2,
     64,
     0,
     16,
     4,
     256,
     256,
     4096,
     10000000.0f,
     1e-6f,
     false,
     64,
     2,
     4,
     16,
     0,
     0.0f,
     0,
     true},
    {"tiny-qwen3next-qkv",
     "qwen3next as the current converter writes it: attn_qkv and attn_gate in place of ssm_in",
     "qwen3next",
     256,
     4,
     4,
     2,
     64,
     0,
     16,
     4,
     256,
     256,
     4096,
     10000000.0f,
     1e-6f,
     false,
     64,
     2,
     4,
     16},
    // Qwen3-Next-80B-A3B's published config (hidden 2048, 48 layers, 16 query and 2 KV heads of
    // 256 with a quarter rotated, DeltaNet 16 key and 32 value heads of 128, 512 experts top-10 of
    // 512 plus a shared expert as wide, rope_theta 1e7, 262144 positions, untied), as recalled:
    // not checked against a published file here; its totals (79.7 B parameters, 3.2 B active)
    // fit the name (engine_qwen3next_test.cpp).
    {"qwen3next-80b-a3b",
     "Qwen3-Next-80B-A3B shape: 48 layers, 512 experts top-10, ssm_in (~48 GB at Q4_K_M)",
     "qwen3next",
     2048,
     48,
     16,
     2,
     256,
     0,
     512,
     10,
     512,
     512,
     262144,
     10000000.0f,
     1e-6f,
     false,
     128,
     16,
     32,
     64,
     0,
     0.0f,
     0,
     true},
    // gpt-oss: every other layer windowed, YaRN x32 over a 4096 original context. The tiny one
    // has a window of 16 so that prompts of a few dozen tokens cross it, and 4 layers so both
    // kinds of layer appear and streaming has layers to stream.
    {"tiny-gpt-oss",
     "gpt-oss, 4 layers, head_dim 64, 8 experts top-4, window 16, untied",
     "gpt-oss",
     256,
     4,
     8,
     2,
     64,
     256,
     8,
     4,
     256,
     0,
     131072,
     150000.0f,
     1e-5f,
     false,
     0,
     0,
     0,
     0,
     16,
     32.0f,
     4096},
    // The published shapes; --type MXFP4_MOE writes what ggml-org's GGUFs ship (experts MXFP4,
    // the other matrices Q8_0): about 12.1 GB and 63.4 GB.
    {"gpt-oss-20b",
     "gpt-oss-20b shape: 24 layers, n_embd 2880, 32 experts top-4 (MXFP4_MOE 12 GB)",
     "gpt-oss",
     2880,
     24,
     64,
     8,
     64,
     2880,
     32,
     4,
     2880,
     0,
     131072,
     150000.0f,
     1e-5f,
     false,
     0,
     0,
     0,
     0,
     128,
     32.0f,
     4096},
    {"gpt-oss-120b",
     "gpt-oss-120b shape: 36 layers, n_embd 2880, 128 experts top-4 (MXFP4_MOE 63 GB)",
     "gpt-oss",
     2880,
     36,
     64,
     8,
     64,
     2880,
     128,
     4,
     2880,
     0,
     131072,
     150000.0f,
     1e-5f,
     false,
     0,
     0,
     0,
     0,
     128,
     32.0f,
     4096},
    // GLM-4.5: the tiny one has one leading dense layer, an ungated shared expert as wide as an
    // expert, sigmoid routing with a selection bias and scale 2.5, q/k/v biases, q/k norms and
    // half of each head rotated. The full shapes are the published configs (hidden 5120 / 4096,
    // 92 / 46 layers of which 3 / 1 dense, 96 query and 8 KV heads of 128 with half rotated,
    // dense FFN 12288 / 10944, 160 / 128 experts of 1536 / 1408 top-8 plus one shared expert as
    // wide, routed scaling 2.5 / 1, q/k norms in the 355B only, rope_theta 1e6, 131072
    // positions, untied, one multi-token-prediction block): 353 B and 107 B parameters in the
    // trunk, 33 B and 12 B active per token.
    {.name = "tiny-glm4moe",
     .description = "glm4moe (GLM-4.5), 4 layers (1 dense), 16 experts top-4 + shared, untied",
     .arch = "glm4moe",
     .n_embd = 256,
     .n_layer = 4,
     .n_head = 4,
     .n_head_kv = 2,
     .head_dim = 64,
     .n_ff = 512,
     .n_expert = 16,
     .n_expert_used = 4,
     .n_ff_exp = 256,
     .n_ff_shexp = 256,
     .n_ctx = 4096,
     .rope_base = 1000000.0f,
     .rms_eps = 1e-5f,
     .tied = false,
     .n_rot = 32,
     .leading_dense = 1,
     .expert_scale = 2.5f,
     .norm_weights = true,
     .qkv_bias = true,
     .qk_norm = true},
    {.name = "glm-4.5",
     .description = "GLM-4.5 (355B-A32B) shape: 92 layers (3 dense), 160 experts top-8, "
                    "+1 MTP block (~215 GB at Q4_K_M)",
     .arch = "glm4moe",
     .n_embd = 5120,
     .n_layer = 92,
     .n_head = 96,
     .n_head_kv = 8,
     .head_dim = 128,
     .n_ff = 12288,
     .n_expert = 160,
     .n_expert_used = 8,
     .n_ff_exp = 1536,
     .n_ff_shexp = 1536,
     .n_ctx = 131072,
     .rope_base = 1000000.0f,
     .rms_eps = 1e-5f,
     .tied = false,
     .n_rot = 64,
     .leading_dense = 3,
     .expert_scale = 2.5f,
     .norm_weights = true,
     .qkv_bias = true,
     .qk_norm = true,
     .nextn = 1},
    {.name = "glm-4.5-air",
     .description = "GLM-4.5-Air (106B-A12B) shape: 46 layers (1 dense), 128 experts top-8, "
                    "+1 MTP block (~71 GB at Q4_K_M)",
     .arch = "glm4moe",
     .n_embd = 4096,
     .n_layer = 46,
     .n_head = 96,
     .n_head_kv = 8,
     .head_dim = 128,
     .n_ff = 10944,
     .n_expert = 128,
     .n_expert_used = 8,
     .n_ff_exp = 1408,
     .n_ff_shexp = 1408,
     .n_ctx = 131072,
     .rope_base = 1000000.0f,
     .rms_eps = 1e-5f,
     .tied = false,
     .n_rot = 64,
     .leading_dense = 1,
     .norm_weights = true,
     .qkv_bias = true,
     .nextn = 1},
    // DeepSeek-V3 / Kimi K2 (deepseek2): latent attention, leading dense layers, routed experts
    // beside a shared one, YaRN with DeepSeek's attention scaling. The tiny one keeps every piece
    // at a small size (one leading dense layer, a compressed query, 16 experts top-4) with sizes
    // that are multiples of 32, so Q8_0 applies everywhere.
    {.name = "tiny-deepseek2",
     .description = "deepseek2 (DeepSeek-V3 / Kimi K2): 4 layers (1 dense), MLA, 16 experts top-4",
     .arch = "deepseek2",
     .n_embd = 256,
     .n_layer = 4,
     .n_head = 8,
     .n_head_kv = 1,
     .head_dim = 96,
     .n_ff = 512,
     .n_expert = 16,
     .n_expert_used = 4,
     .n_ff_exp = 256,
     .n_ff_shexp = 0,
     .n_ctx = 4096,
     .rope_base = 10000.0f,
     .rms_eps = 1e-6f,
     .tied = false,
     .n_rot = 32,
     .yarn_factor = 4.0f,
     .yarn_orig_ctx = 1024,
     .leading_dense = 1,
     .expert_scale = 2.5f,
     .norm_weights = true,
     .sigmoid_routing = true,
     .expert_groups = 4,
     .expert_groups_used = 2,
     .n_lora_q = 128,
     .n_lora_kv = 128,
     .head_dim_v = 64,
     .mscale_all_dim = 1.0f},
    {.name = "tiny-deepseek2-kvb",
     .description = "deepseek2 with attn_kv_b (and 8 KV heads), as the earlier converters wrote it",
     .arch = "deepseek2",
     .n_embd = 256,
     .n_layer = 4,
     .n_head = 8,
     .n_head_kv = 8,
     .head_dim = 96,
     .n_ff = 512,
     .n_expert = 16,
     .n_expert_used = 4,
     .n_ff_exp = 256,
     .n_ff_shexp = 0,
     .n_ctx = 4096,
     .rope_base = 10000.0f,
     .rms_eps = 1e-6f,
     .tied = false,
     .n_rot = 32,
     .yarn_factor = 4.0f,
     .yarn_orig_ctx = 1024,
     .leading_dense = 1,
     .expert_scale = 2.5f,
     .norm_weights = true,
     .sigmoid_routing = true,
     .expert_groups = 4,
     .expert_groups_used = 2,
     .n_lora_q = 128,
     .n_lora_kv = 128,
     .head_dim_v = 64,
     .mscale_all_dim = 1.0f,
     .mla_kv_b = true},
    // The published configs: DeepSeek-V3 (and R1): hidden 7168, 61 layers of which 3 dense
    // (18432 wide), 128 heads of 128 + 64 rotated (values 128), q_lora 1536, kv_lora 512, 256
    // experts of 2048 top-8 plus one shared, YaRN x40 over 4096 positions. Kimi K2.5 (its text
    // model, K2's shape with 256K context): 1 dense layer, 64 heads, 384 experts top-8 plus one
    // shared, rope_theta 50000, YaRN x64 over 4096.
    {.name = "deepseek-v3",
     .description =
         "DeepSeek-V3 shape: 61 layers (3 dense), MLA, 256 experts top-8 (403 GB at Q4_K_M)",
     .arch = "deepseek2",
     .n_embd = 7168,
     .n_layer = 61,
     .n_head = 128,
     .n_head_kv = 1,
     .head_dim = 192,
     .n_ff = 18432,
     .n_expert = 256,
     .n_expert_used = 8,
     .n_ff_exp = 2048,
     .n_ff_shexp = 0,
     .n_ctx = 163840,
     .rope_base = 10000.0f,
     .rms_eps = 1e-6f,
     .tied = false,
     .n_rot = 64,
     .yarn_factor = 40.0f,
     .yarn_orig_ctx = 4096,
     .leading_dense = 3,
     .expert_scale = 2.5f,
     .norm_weights = true,
     .sigmoid_routing = true,
     .expert_groups = 8,
     .expert_groups_used = 4,
     .n_lora_q = 1536,
     .n_lora_kv = 512,
     .head_dim_v = 128,
     .mscale_all_dim = 1.0f},
    {.name = "kimi-k2.5",
     .description =
         "Kimi K2.5 shape: 61 layers (1 dense), MLA, 384 experts top-8 (619 GB at Q4_K_M)",
     .arch = "deepseek2",
     .n_embd = 7168,
     .n_layer = 61,
     .n_head = 64,
     .n_head_kv = 1,
     .head_dim = 192,
     .n_ff = 18432,
     .n_expert = 384,
     .n_expert_used = 8,
     .n_ff_exp = 2048,
     .n_ff_shexp = 0,
     .n_ctx = 262144,
     .rope_base = 50000.0f,
     .rms_eps = 1e-6f,
     .tied = false,
     .n_rot = 64,
     .yarn_factor = 64.0f,
     .yarn_orig_ctx = 4096,
     .leading_dense = 1,
     .expert_scale = 2.827f,
     .norm_weights = true,
     .sigmoid_routing = true,
     .n_lora_q = 1536,
     .n_lora_kv = 512,
     .head_dim_v = 128,
     .mscale_all_dim = 1.0f},
};

std::string flag_value(std::string_view flag, uint32_t v) {
    return std::string(flag) + " " + std::to_string(v);
}

Result<void> check_dim(std::string_view flag, uint32_t v, uint32_t max) {
    if (v == 0) return err(flag, " must be at least 1");
    if (v > max) {
        return err(flag_value(flag, v), " is too large (at most ", std::to_string(max), ")");
    }
    return {};
}

std::string known_arch_list() {
    std::string out;
    for (const auto& t : known_arch_traits()) {
        if (!out.empty()) out += ", ";
        out += t.name;
    }
    return out;
}

}  // namespace

std::vector<SynthPreset> synth_presets() {
    std::vector<SynthPreset> out;
    for (const auto& p : kPresets) out.push_back({p.name, p.description});
    return out;
}

std::optional<ModelHparams> synth_preset(std::string_view name) {
    for (const auto& p : kPresets) {
        if (p.name != name) continue;
        ModelHparams hp;
        hp.arch = p.arch;
        hp.name = "synthetic-" + std::string(p.name);
        hp.n_ctx_train = p.n_ctx;
        hp.n_embd = p.n_embd;
        hp.n_layer = p.n_layer;
        hp.n_head = p.n_head;
        hp.n_head_kv = p.n_head_kv;
        hp.head_dim_k = hp.head_dim_v = p.head_dim;
        hp.rms_eps = p.rms_eps;
        hp.n_ff = p.n_ff;
        hp.n_expert = p.n_expert;
        hp.n_expert_used = p.n_expert_used;
        hp.n_ff_exp = p.n_ff_exp;
        hp.n_ff_shexp = p.n_ff_shexp;
        hp.rope_freq_base = p.rope_base;
        hp.tied_output = p.tied;
        hp.n_rot = p.n_rot;
        hp.n_leading_dense = p.leading_dense;
        if (p.expert_scale > 0.0f) hp.expert_weights_scale = p.expert_scale;
        hp.norm_topk_prob = p.norm_weights;
        hp.has_qkv_bias = p.qkv_bias;
        hp.has_qk_norm = p.qk_norm;
        hp.n_layer_nextn = p.nextn;
        if (p.ssm_state > 0) {
            hp.ssm_d_conv = 4;
            hp.ssm_d_state = p.ssm_state;
            hp.ssm_n_group = p.ssm_k_heads;
            hp.ssm_dt_rank = p.ssm_v_heads;
            hp.ssm_d_inner = p.ssm_state * p.ssm_v_heads;
            hp.ssm_fused_qkvz = p.fused_qkvz;
            const ArchTraits* traits = find_arch_traits(hp.arch);
            if (traits && traits->rope_sections) {
                // Qwen's split of the rotated pairs into time, height and width sections.
                const uint32_t pairs = p.n_rot / 2, t = (pairs + 2) / 3, h = (pairs - t + 1) / 2;
                hp.rope_sections = {t, h, pairs - t - h, 0};
            }
        }
        hp.n_swa = p.n_swa;
        if (p.yarn_factor > 0.0f) {
            hp.rope_scaling.type = "yarn";
            hp.rope_scaling.factor = p.yarn_factor;
            hp.rope_scaling.original_context = p.yarn_orig_ctx;
            hp.rope_scaling.mscale_all_dim = p.mscale_all_dim;
        }
        if (p.sigmoid_routing) {
            hp.expert_gating = ExpertGating::Sigmoid;
            hp.has_selection_bias = true;
        }
        hp.n_expert_group = p.expert_groups;
        hp.n_expert_group_used = p.expert_groups_used;
        if (p.n_lora_kv > 0) {
            hp.n_lora_q = p.n_lora_q;
            hp.n_lora_kv = p.n_lora_kv;
            hp.head_dim_v = p.head_dim_v;
            hp.mla_kv_b = p.mla_kv_b;
        }
        return hp;
    }
    return std::nullopt;
}

// Latent attention: a latent, a rotated part smaller than the key head (--head-dim) and a value
// head size, as a preset gives them.
Result<void> validate_mla_shape(const ModelHparams& hp, uint32_t head_dim) {
    if (hp.n_lora_kv == 0 || hp.n_rot == 0 || hp.n_rot % 2 != 0 || hp.n_rot >= head_dim ||
        hp.head_dim_v == 0) {
        return err(hp.arch,
                   " needs the latent attention's shape (kv rank, an even rotated part smaller "
                   "than the head, a value head size): start from a preset such as "
                   "tiny-deepseek2");
    }
    STRATA_TRY(check_dim("the kv rank", hp.n_lora_kv, kMaxDim));
    if (hp.n_lora_q > kMaxDim) return check_dim("the query rank", hp.n_lora_q, kMaxDim);
    return {};
}

ModelHparams cut_to_layers(ModelHparams hp, uint32_t n_layer) {
    hp.n_layer = n_layer;
    if (n_layer > 0 && hp.n_leading_dense >= n_layer) hp.n_leading_dense = n_layer - 1;
    return hp;
}

Result<void> validate_synth_shape(const ModelHparams& hp) {
    const ArchTraits* traits = find_arch_traits(hp.arch);
    if (!traits) {
        return err("--arch ", hp.arch, ": unknown architecture (known: ", known_arch_list(), ")");
    }
    STRATA_TRY(check_dim("--layers", hp.n_layer, kMaxLayers));
    STRATA_TRY(check_dim("--embd", hp.n_embd, kMaxDim));
    STRATA_TRY(check_dim("--heads", hp.n_head, kMaxDim));
    STRATA_TRY(check_dim("--ctx", hp.n_ctx_train, 1u << 30));
    if (hp.n_head_kv > hp.n_head || (hp.n_head_kv != 0 && hp.n_head % hp.n_head_kv != 0)) {
        return err(flag_value("--kv-heads", hp.n_head_kv), " does not divide ",
                   flag_value("--heads", hp.n_head),
                   " (grouped-query attention shares each key/value head among the same number "
                   "of query heads)");
    }
    if (hp.head_dim_k == 0 && hp.n_embd % hp.n_head != 0) {
        return err(flag_value("--embd", hp.n_embd), " is not divisible by ",
                   flag_value("--heads", hp.n_head), "; give the head size with --head-dim");
    }
    const uint32_t head_dim = hp.head_dim_k != 0 ? hp.head_dim_k : hp.n_embd / hp.n_head;
    if (head_dim % 2 != 0) {
        return err("head dimension ", std::to_string(head_dim),
                   " is odd; rotary position embedding rotates pairs of dimensions");
    }
    if (uint64_t{hp.n_head} * head_dim > kMaxDim) {
        return err(flag_value("--heads", hp.n_head), " x head dimension ", std::to_string(head_dim),
                   " is too large (at most ", std::to_string(kMaxDim), ")");
    }
    if (traits->mla) {
        STRATA_TRY(validate_mla_shape(hp, head_dim));
    } else if (hp.head_dim_v != 0 && hp.head_dim_v != hp.head_dim_k) {
        return err("key and value head sizes differ (", std::to_string(hp.head_dim_k), " vs ",
                   std::to_string(hp.head_dim_v), "); synthetic models use one --head-dim");
    }

    if (!traits->hybrid_delta_net && hp.ssm_d_state != 0) {
        return err(hp.arch, " has no delta-net layers; a hybrid preset's shape does not fit it");
    }
    if (traits->hybrid_delta_net) {
        if (hp.ssm_d_conv < 2 || hp.ssm_d_state == 0 || hp.ssm_n_group == 0 ||
            hp.ssm_dt_rank % hp.ssm_n_group != 0) {
            return err(hp.arch,
                       " needs the delta net's shape (conv kernel >= 2, state size, key heads "
                       "dividing value heads): start from a preset");
        }
        if (hp.n_rot == 0 || hp.n_rot > head_dim || hp.n_rot % 2 != 0) {
            return err(hp.arch, ": rotated dimensions ", std::to_string(hp.n_rot),
                       " must be even and at most the head dimension");
        }
    }
    if (hp.n_layer_nextn > 0 && !traits->nextn_blocks) {
        return err(
            "--nextn: multi-token-prediction blocks are written for the families whose "
            "converter writes them (qwen35, qwen35moe, qwen3next, glm4moe)");
    }
    if (hp.n_leading_dense > 0 && (hp.n_expert == 0 || hp.n_leading_dense >= hp.n_layer)) {
        return err("the ", std::to_string(hp.n_leading_dense),
                   " leading dense layers leave no layer with experts: give --layers above it");
    }
    if (hp.n_leading_dense > 0) STRATA_TRY(check_dim("--ff", hp.n_ff, kMaxDim));
    if (hp.n_layer_nextn > kMaxLayers - hp.n_layer) {
        return err(flag_value("--nextn", hp.n_layer_nextn), " is too large (block_count at most ",
                   std::to_string(kMaxLayers), ")");
    }
    if (hp.n_expert == 0 && traits->always_moe) {
        return err(hp.arch, " is a mixture-of-experts architecture: --experts must be at least 1");
    }
    if (hp.n_expert_used > hp.n_expert) {
        return err(flag_value("--experts-used", hp.n_expert_used), " exceeds ",
                   flag_value("--experts", hp.n_expert));
    }
    if (traits->swa_period > 0 && hp.n_swa == 0) {
        return err(hp.arch, " has sliding-window layers: the window must be at least 1");
    }
    if (traits->untied_output && hp.tied_output) {
        return err(hp.arch, " models have their own output head (output.weight)");
    }
    if (hp.n_ff_shexp != 0 && !traits->shared_expert) {
        return err(hp.arch,
                   " has no shared expert; --ff-shexp applies to the families with one (set it "
                   "to 0)");
    }
    if (hp.n_expert == 0) return check_dim("--ff", hp.n_ff, kMaxDim);

    if (traits->never_moe) {
        return err(hp.arch, " has no experts (", flag_value("--experts", hp.n_expert), "); use ",
                   hp.arch, "moe for a mixture of experts");
    }
    STRATA_TRY(check_dim("--experts", hp.n_expert, kMaxExperts));
    STRATA_TRY(check_dim("--experts-used", hp.n_expert_used, hp.n_expert));
    if (traits->expert_width_default == ExpertWidthDefault::FfnLength) {
        if (hp.n_ff_exp != 0 && hp.n_ff_exp != hp.n_ff) {
            return err(hp.arch, " mixture-of-experts models (Mixtral layout) have one FFN width, ",
                       "feed_forward_length, used by every expert: set it with --ff, not --ff-exp");
        }
        return check_dim("--ff", hp.n_ff, kMaxDim);
    }
    const ModelHparams full = with_layout_defaults(hp);
    if (hp.n_ff_exp == 0 && full.n_ff_exp == 0) {
        return err("the expert FFN width is 0: give --ff-exp (or an --ff of at least ",
                   flag_value("--experts-used", hp.n_expert_used), ")");
    }
    STRATA_TRY(check_dim("--ff-exp", full.n_ff_exp, kMaxDim));
    if (traits->shared_expert) STRATA_TRY(check_dim("--ff-shexp", full.n_ff_shexp, kMaxDim));
    if (hp.n_ff > kMaxDim) return check_dim("--ff", hp.n_ff, kMaxDim);
    return {};
}

}  // namespace strata
