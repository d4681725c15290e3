#include "model/hparams.h"

#include <algorithm>
#include <array>
#include <functional>
#include <limits>
#include <optional>

#include "gguf/gguf_file.h"
#include "model/architecture.h"
#include "model/tensor_role.h"

namespace strata {

std::string_view rope_style_name(RopeStyle s) {
    return s == RopeStyle::Neox ? "neox" : "normal";
}

std::string_view expert_gating_name(ExpertGating g) {
    switch (g) {
        case ExpertGating::Softmax:
            return "softmax";
        case ExpertGating::SoftmaxTopK:
            return "softmax of the chosen";
        case ExpertGating::Sigmoid:
            return "sigmoid";
    }
    return "?";
}

namespace {

// Plausibility limits, far above any published model (Llama 3 405B has 126 layers, the largest MoE
// models 512 experts), so that a corrupt count cannot make the tensor checks run for hours.
constexpr uint32_t kMaxBlockCount = 1024;
constexpr uint32_t kMaxExpertCount = 1024;

constexpr std::array<std::string_view, 5> kRopeScalingTypes = {"none", "linear", "yarn", "longrope",
                                                               "llama3"};

// "u32 7", "string \"abc\"": a value as an error message shows it.
std::string describe(const Value& v) {
    return std::string(value_type_name(v.type())) + " " + v.to_display(4);
}

// One value per layer, from a scalar key or a per-layer array.
struct PerLayer {
    std::vector<uint32_t> values;  // n_layer entries

    uint32_t max() const { return *std::max_element(values.begin(), values.end()); }
    bool uniform() const {
        return std::adjacent_find(values.begin(), values.end(), std::not_equal_to<>()) ==
               values.end();
    }
    // The per-layer vector hparams keep: empty when every layer has the same value.
    std::vector<uint32_t> varying() const { return uniform() ? std::vector<uint32_t>{} : values; }
};

// Reads "<arch>.<key>" metadata. Every error names the file and the full key.
class ArchKeys {
  public:
    ArchKeys(const GgufFile& f, const std::string& arch) : f_(f), arch_(arch) {}

    std::string key(std::string_view k) const { return arch_ + "." + std::string(k); }

    Error missing(std::string_view k) const {
        return err(f_.path, ": metadata key '", key(k), "' is missing; a ", arch_,
                   " model needs it");
    }

    Error invalid(std::string_view k, const std::string& why) const {
        return err(f_.path, ": metadata key '", key(k), "' ", why);
    }

    Result<std::optional<uint32_t>> u32(std::string_view k) const {
        const Value* v = f_.find(key(k));
        if (!v) return std::optional<uint32_t>{};
        STRATA_ASSIGN(uint32_t x, to_u32(k, *v));
        return std::optional<uint32_t>{x};
    }

    // A required count that must be at least 1.
    Result<uint32_t> positive_u32(std::string_view k) const {
        STRATA_ASSIGN(auto x, u32(k));
        if (!x) return missing(k);
        if (*x == 0) return invalid(k, "is 0");
        return *x;
    }

    Result<std::optional<float>> f32(std::string_view k) const {
        const Value* v = f_.find(key(k));
        if (!v) return std::optional<float>{};
        auto d = v->as_float();
        if (!d || v->type() == ValueType::BOOL) {
            return invalid(k, "should be a number but is " + describe(*v));
        }
        return std::optional<float>{static_cast<float>(*d)};
    }

    Result<std::optional<std::string>> str(std::string_view k) const {
        const Value* v = f_.find(key(k));
        if (!v) return std::optional<std::string>{};
        if (!v->as_string()) return invalid(k, "should be a string but is " + describe(*v));
        return std::optional<std::string>{*v->as_string()};
    }

    Result<std::optional<bool>> boolean(std::string_view k) const {
        const Value* v = f_.find(key(k));
        if (!v) return std::optional<bool>{};
        if (v->type() != ValueType::BOOL) {
            return invalid(k, "should be a bool but is " + describe(*v));
        }
        return v->as_bool();
    }

    // A scalar (the same for every layer) or an array with one entry per layer.
    Result<std::optional<PerLayer>> per_layer(std::string_view k, uint32_t n_layer) const {
        const Value* v = f_.find(key(k));
        if (!v) return std::optional<PerLayer>{};
        PerLayer out;
        if (const Array* a = v->as_array()) {
            if (a->items.size() != n_layer) {
                return invalid(k, "has " + std::to_string(a->items.size()) +
                                      " per-layer entries but the model has " +
                                      std::to_string(n_layer) + " layers (" + key("block_count") +
                                      ")");
            }
            out.values.reserve(n_layer);
            for (const Value& item : a->items) {
                STRATA_ASSIGN(uint32_t x, to_u32(k, item));
                out.values.push_back(x);
            }
        } else {
            STRATA_ASSIGN(uint32_t x, to_u32(k, *v));
            out.values.assign(n_layer, x);
        }
        return std::optional<PerLayer>{std::move(out)};
    }

  private:
    // Counts come as u8..u64 or i8..i64 depending on the writer; all are fine if they fit.
    Result<uint32_t> to_u32(std::string_view k, const Value& v) const {
        if (v.type() == ValueType::BOOL || (!v.as_int() && !v.as_uint())) {
            return invalid(k, "should be an integer but is " + describe(v));
        }
        if (auto i = v.as_int(); i && *i < 0) {
            return invalid(k, "is negative (" + std::to_string(*i) + ")");
        }
        const uint64_t u = *v.as_uint();
        if (u > std::numeric_limits<uint32_t>::max()) {
            return invalid(k, "is " + std::to_string(u) + ", which is out of range");
        }
        return static_cast<uint32_t>(u);
    }

    const GgufFile& f_;
    std::string arch_;
};

// Vocabulary size: <arch>.vocab_size, else the tokenizer's token list, else token_embd's rows.
Result<uint32_t> load_n_vocab(const GgufFile& f, const ArchKeys& keys) {
    STRATA_ASSIGN(auto n, keys.u32("vocab_size"));
    if (n) return *n;
    if (const Value* tokens = f.find("tokenizer.ggml.tokens")) {
        if (const Array* a = tokens->as_array()) {
            if (a->items.size() > std::numeric_limits<uint32_t>::max()) {
                return err(f.path, ": tokenizer.ggml.tokens has ", std::to_string(a->items.size()),
                           " entries, more than any vocabulary can have");
            }
            return static_cast<uint32_t>(a->items.size());
        }
        return err(f.path, ": metadata key 'tokenizer.ggml.tokens' should be an array but is ",
                   describe(*tokens));
    }
    if (const TensorInfo* embd = f.find_tensor("token_embd.weight")) {
        if (embd->n_dims == 2 && embd->shape[1] <= std::numeric_limits<uint32_t>::max()) {
            return static_cast<uint32_t>(embd->shape[1]);
        }
    }
    return err(f.path, ": cannot tell the vocabulary size: there is no '", keys.key("vocab_size"),
               "' key, no 'tokenizer.ggml.tokens' list and no 2-D token_embd.weight tensor");
}

Result<void> load_attention(const ArchKeys& keys, ModelHparams& hp) {
    STRATA_ASSIGN(auto heads, keys.per_layer("attention.head_count", hp.n_layer));
    if (!heads) return keys.missing("attention.head_count");
    for (uint32_t il = 0; il < hp.n_layer; ++il) {
        if (heads->values[il] == 0) {
            return keys.invalid("attention.head_count", "is 0 for layer " + std::to_string(il));
        }
    }
    hp.n_head = heads->max();
    hp.n_head_per_layer = heads->varying();

    // Without head_count_kv every layer has as many key/value heads as query heads (no GQA).
    STRATA_ASSIGN(auto kv_heads, keys.per_layer("attention.head_count_kv", hp.n_layer));
    if (!kv_heads) kv_heads = heads;
    for (uint32_t il = 0; il < hp.n_layer; ++il) {
        const uint32_t h = heads->values[il], kv = kv_heads->values[il];
        if (kv == 0 || kv > h || h % kv != 0) {
            return keys.invalid("attention.head_count_kv",
                                "is " + std::to_string(kv) + " for layer " + std::to_string(il) +
                                    ", which does not divide its " + std::to_string(h) +
                                    " query heads (" + keys.key("attention.head_count") + ")");
        }
    }
    hp.n_head_kv = kv_heads->max();
    hp.n_head_kv_per_layer = kv_heads->varying();

    STRATA_ASSIGN(auto key_length, keys.u32("attention.key_length"));
    if (key_length) {
        if (*key_length == 0) return keys.invalid("attention.key_length", "is 0");
        hp.head_dim_k = *key_length;
    } else {
        // llama.cpp derives the head size from the embedding width; it must divide evenly.
        if (hp.n_embd % hp.n_head != 0) {
            return keys.invalid("embedding_length",
                                "(" + std::to_string(hp.n_embd) + ") is not a multiple of " +
                                    keys.key("attention.head_count") + " (" +
                                    std::to_string(hp.n_head) + ") and " +
                                    keys.key("attention.key_length") +
                                    " is not given, so the head size is unknown");
        }
        hp.head_dim_k = hp.n_embd / hp.n_head;
    }
    STRATA_ASSIGN(auto value_length, keys.u32("attention.value_length"));
    if (value_length && *value_length == 0) return keys.invalid("attention.value_length", "is 0");
    hp.head_dim_v = value_length ? *value_length : hp.head_dim_k;

    STRATA_ASSIGN(auto eps, keys.f32("attention.layer_norm_rms_epsilon"));
    if (!eps) return keys.missing("attention.layer_norm_rms_epsilon");
    if (!(*eps > 0.0f) || *eps >= 1.0f) {
        return keys.invalid("attention.layer_norm_rms_epsilon",
                            "is " + std::to_string(*eps) + "; it must lie in (0, 1)");
    }
    hp.rms_eps = *eps;
    return {};
}

// Multi-head latent attention (deepseek2): the ranks of the query and key/value compressions and
// the heads' sizes. Files of the current converters describe the cache's view in key_length
// (n_lora_kv + n_rot) and value_length (n_lora_kv) and the heads' in key_length_mla and
// value_length_mla, with attn_k_b and attn_v_b; earlier files give the heads' sizes in
// key_length and value_length, with attn_kv_b.
Result<void> load_mla(const ArchKeys& keys, ModelHparams& hp) {
    STRATA_ASSIGN(auto q_rank, keys.u32("attention.q_lora_rank"));
    hp.n_lora_q = q_rank.value_or(0);
    STRATA_ASSIGN(hp.n_lora_kv, keys.positive_u32("attention.kv_lora_rank"));
    STRATA_ASSIGN(auto n_rot, keys.u32("rope.dimension_count"));
    if (!n_rot) return keys.missing("rope.dimension_count");
    STRATA_ASSIGN(auto k_mla, keys.u32("attention.key_length_mla"));
    STRATA_ASSIGN(auto v_mla, keys.u32("attention.value_length_mla"));
    if (k_mla.has_value() != v_mla.has_value()) {
        return k_mla ? keys.missing("attention.value_length_mla")
                     : keys.missing("attention.key_length_mla");
    }
    hp.mla_kv_b = !k_mla;
    if (k_mla) {
        if (hp.head_dim_k != hp.n_lora_kv + *n_rot || hp.head_dim_v != hp.n_lora_kv) {
            return keys.invalid("attention.key_length",
                                "and value_length are " + std::to_string(hp.head_dim_k) + " and " +
                                    std::to_string(hp.head_dim_v) + " but with " +
                                    keys.key("attention.key_length_mla") +
                                    " they must be the latent cache's: kv_lora_rank + " +
                                    "rope.dimension_count (" +
                                    std::to_string(hp.n_lora_kv + *n_rot) + ") and kv_lora_rank (" +
                                    std::to_string(hp.n_lora_kv) + ")");
        }
        hp.head_dim_k = *k_mla;
        hp.head_dim_v = *v_mla;
    }
    if (hp.head_dim_k <= *n_rot || hp.head_dim_v == 0) {
        return keys.invalid(k_mla ? "attention.key_length_mla" : "attention.key_length",
                            "is " + std::to_string(hp.head_dim_k) +
                                "; a latent-attention head must be wider than its " +
                                std::to_string(*n_rot) + " rotated dimensions (" +
                                keys.key("rope.dimension_count") + ")");
    }
    // DeepSeek's YaRN scales the attention logits by its mscale_all_dim, which the converter
    // writes as 0.1 x mscale_all_dim.
    STRATA_ASSIGN(auto log_mul, keys.f32("rope.scaling.yarn_log_multiplier"));
    hp.rope_scaling.mscale_all_dim = log_mul.value_or(0.0f) / 0.1f;
    return {};
}

// How the router's logits become the chosen experts and their weights: the gating function
// (<arch>.expert_gating_func, numbered as the reference numbers it: 1 softmax, 2 sigmoid, 3 the
// chosen logits softmaxed; absent or 0: the family's), group-limited top-k and the routed
// scaling factor.
Result<void> load_routing(const ArchKeys& keys, const ArchTraits& traits, ModelHparams& hp) {
    STRATA_ASSIGN(auto gating, keys.u32("expert_gating_func"));
    switch (gating.value_or(0)) {
        case 0:
            hp.expert_gating = traits.expert_gating;
            break;
        case 1:
            hp.expert_gating = ExpertGating::Softmax;
            break;
        case 2:
            hp.expert_gating = ExpertGating::Sigmoid;
            break;
        case 3:
            hp.expert_gating = ExpertGating::SoftmaxTopK;
            break;
        default:
            return keys.invalid("expert_gating_func",
                                "is " + std::to_string(*gating) +
                                    ", a gating strata does not know (1 softmax, 2 sigmoid, 3 "
                                    "softmax of the chosen)");
    }
    STRATA_ASSIGN(auto groups, keys.u32("expert_group_count"));
    STRATA_ASSIGN(auto groups_used, keys.u32("expert_group_used_count"));
    hp.n_expert_group = groups.value_or(0);
    hp.n_expert_group_used = groups_used.value_or(0);
    if (hp.grouped_routing()) {
        const uint32_t g = hp.n_expert_group;
        // Each group's score is its two best experts' sum, so a group needs two.
        if (hp.n_expert % g != 0 || hp.n_expert / g < 2) {
            return keys.invalid("expert_group_count",
                                "is " + std::to_string(g) + ", which does not split the " +
                                    std::to_string(hp.n_expert) +
                                    " experts into equal groups of two or more");
        }
        if (hp.n_expert_group_used == 0 || hp.n_expert_group_used >= g) {
            return keys.invalid("expert_group_used_count",
                                "is " + std::to_string(hp.n_expert_group_used) +
                                    "; it must be between 1 and the " + std::to_string(g - 1) +
                                    " (" + keys.key("expert_group_count") + " less one)");
        }
        if (uint64_t(hp.n_expert_group_used) * (hp.n_expert / g) < hp.n_expert_used) {
            return keys.invalid("expert_group_used_count",
                                "is " + std::to_string(hp.n_expert_group_used) +
                                    ": its groups hold fewer experts than the " +
                                    std::to_string(hp.n_expert_used) + " each token chooses");
        }
    } else {
        hp.n_expert_group = hp.n_expert_group_used = 0;
    }
    STRATA_ASSIGN(auto scale, keys.f32("expert_weights_scale"));
    if (scale && !(*scale >= 0.0f && *scale < 1e6f)) {
        return keys.invalid("expert_weights_scale", "is " + std::to_string(*scale));
    }
    // 0 means "not given" in the reference, as 1 does.
    hp.expert_weights_scale = scale && *scale != 0.0f ? *scale : 1.0f;
    return {};
}

Result<void> load_ffn(const ArchKeys& keys, const ArchTraits& traits, ModelHparams& hp) {
    STRATA_ASSIGN(auto ff, keys.per_layer("feed_forward_length", hp.n_layer));
    if (ff) {
        hp.n_ff = ff->max();
        hp.n_ff_per_layer = ff->varying();
    }

    STRATA_ASSIGN(auto n_expert, keys.u32("expert_count"));
    STRATA_ASSIGN(auto n_expert_used, keys.u32("expert_used_count"));
    hp.n_expert = n_expert.value_or(0);
    hp.n_expert_used = n_expert_used.value_or(0);
    if (traits.always_moe && hp.n_expert == 0) {
        return n_expert ? keys.invalid("expert_count",
                                       "is 0; a " + hp.arch + " model is a mixture of experts")
                        : keys.missing("expert_count");
    }
    if (!hp.is_moe()) {
        if (hp.n_expert_used > 0) {
            return keys.invalid("expert_used_count", "is " + std::to_string(hp.n_expert_used) +
                                                         " but the model has no experts (" +
                                                         keys.key("expert_count") + ")");
        }
        if (hp.n_ff == 0) {
            return ff ? keys.invalid("feed_forward_length", "is 0")
                      : keys.missing("feed_forward_length");
        }
        return {};
    }

    if (hp.n_expert > kMaxExpertCount) {
        return keys.invalid("expert_count", "is " + std::to_string(hp.n_expert) +
                                                ", more experts than any model has (at most " +
                                                std::to_string(kMaxExpertCount) + ")");
    }
    if (!n_expert_used) return keys.missing("expert_used_count");
    if (hp.n_expert_used == 0 || hp.n_expert_used > hp.n_expert) {
        return keys.invalid("expert_used_count", "is " + std::to_string(hp.n_expert_used) +
                                                     "; it must be between 1 and the " +
                                                     std::to_string(hp.n_expert) + " experts (" +
                                                     keys.key("expert_count") + ")");
    }
    STRATA_ASSIGN(auto ff_exp, keys.u32("expert_feed_forward_length"));
    if (ff_exp) {
        hp.n_ff_exp = *ff_exp;
    } else if (traits.expert_width_default == ExpertWidthDefault::Required) {
        return keys.missing("expert_feed_forward_length");
    } else if (traits.expert_width_default == ExpertWidthDefault::FfnLength) {
        hp.n_ff_exp = hp.n_ff;
    } else {
        hp.n_ff_exp = hp.n_ff / hp.n_expert_used;
    }
    if (hp.n_ff_exp == 0) {
        return ff_exp ? keys.invalid("expert_feed_forward_length", "is 0")
                      : keys.missing("expert_feed_forward_length");
    }

    STRATA_ASSIGN(auto n_shared, keys.u32("expert_shared_count"));
    hp.n_expert_shared = n_shared.value_or(traits.shared_expert ? 1 : 0);
    STRATA_ASSIGN(auto ff_shexp, keys.u32("expert_shared_feed_forward_length"));
    const uint32_t shared_default = traits.shared_width_from_experts
                                        ? hp.n_ff_exp * std::max<uint32_t>(hp.n_expert_shared, 1)
                                        : hp.n_ff;
    hp.n_ff_shexp = hp.n_expert_shared > 0 ? ff_shexp.value_or(shared_default) : 0;
    if (hp.n_expert_shared > 0 && hp.n_ff_shexp == 0) {
        return keys.missing("expert_shared_feed_forward_length");
    }

    STRATA_ASSIGN(auto norm_w, keys.boolean("expert_weights_norm"));
    hp.norm_topk_prob = norm_w.value_or(traits.norm_topk_prob);
    STRATA_TRY(load_routing(keys, traits, hp));
    hp.expert_activation = traits.expert_activation;
    STRATA_ASSIGN(auto leading_dense, keys.u32("leading_dense_block_count"));
    hp.n_leading_dense = leading_dense.value_or(0);
    if (hp.n_leading_dense > hp.n_layer) {
        return keys.invalid("leading_dense_block_count",
                            "is " + std::to_string(hp.n_leading_dense) + " but the model has " +
                                std::to_string(hp.n_layer) + " layers");
    }
    return {};
}

Result<void> load_rope(const ArchKeys& keys, const ArchTraits& traits, ModelHparams& hp) {
    hp.rope_style = traits.rope_style;
    STRATA_ASSIGN(auto n_rot, keys.u32("rope.dimension_count"));
    hp.n_rot = n_rot.value_or(hp.head_dim_k);
    if (hp.n_rot == 0 || hp.n_rot % 2 != 0 || hp.n_rot > hp.head_dim_k) {
        return keys.invalid("rope.dimension_count",
                            "is " + std::to_string(hp.n_rot) +
                                "; it must be even and at most the head size " +
                                std::to_string(hp.head_dim_k));
    }
    STRATA_ASSIGN(auto base, keys.f32("rope.freq_base"));
    if (base && !(*base > 0.0f)) return keys.invalid("rope.freq_base", "is not positive");
    hp.rope_freq_base = base.value_or(10000.0f);

    RopeScaling& sc = hp.rope_scaling;
    STRATA_ASSIGN(auto type, keys.str("rope.scaling.type"));
    // Older files give only a linear factor under rope.scale_linear.
    STRATA_ASSIGN(auto factor, keys.f32("rope.scaling.factor"));
    if (!factor) {
        STRATA_ASSIGN(factor, keys.f32("rope.scale_linear"));
    }
    if (type) {
        if (std::find(kRopeScalingTypes.begin(), kRopeScalingTypes.end(), *type) ==
            kRopeScalingTypes.end()) {
            return keys.invalid("rope.scaling.type",
                                "is '" + *type +
                                    "', which strata does not know (known: none, linear, yarn, "
                                    "longrope, llama3)");
        }
        sc.type = *type;
    } else if (factor && *factor != 0.0f && *factor != 1.0f) {
        sc.type = "linear";  // a factor without a type is linear scaling, as in llama.cpp
    }
    // A factor of 0 means "not set" in files written by llama.cpp's tools.
    if (factor && *factor != 0.0f) {
        if (*factor < 0.0f) return keys.invalid("rope.scaling.factor", "is negative");
        sc.factor = *factor;
    }
    STRATA_ASSIGN(auto orig_ctx, keys.u32("rope.scaling.original_context_length"));
    sc.original_context = orig_ctx.value_or(0);
    STRATA_ASSIGN(auto attn_factor, keys.f32("rope.scaling.attn_factor"));
    sc.attn_factor = attn_factor.value_or(1.0f);
    STRATA_ASSIGN(auto low, keys.f32("rope.scaling.low_freq_factor"));
    sc.low_freq_factor = low.value_or(1.0f);
    STRATA_ASSIGN(auto high, keys.f32("rope.scaling.high_freq_factor"));
    sc.high_freq_factor = high.value_or(4.0f);
    return {};
}

// Which trunk layers are delta nets: <arch>.attention.recurrent_layers, one bool per layer of
// the file (multi-token-prediction blocks included), or else every full_attention_interval-th
// layer is full attention (4 by default).
Result<void> load_recurrent_layers(const GgufFile& f, const ArchKeys& keys, uint32_t n_layer_all,
                                   ModelHparams& hp) {
    hp.recurrent_layers.assign(hp.n_layer, false);
    if (const Value* listed = f.find(keys.key("attention.recurrent_layers"))) {
        const Array* a = listed->as_array();
        if (!a || a->items.size() != n_layer_all) {
            return keys.invalid("attention.recurrent_layers", "should hold one bool per layer (" +
                                                                  std::to_string(n_layer_all) +
                                                                  ") but is " + describe(*listed));
        }
        for (uint32_t il = 0; il < hp.n_layer; ++il) {
            const auto b = a->items[il].as_bool();
            const auto u = a->items[il].as_uint();
            if (!b && !u) {
                return keys.invalid("attention.recurrent_layers",
                                    "should hold one bool per layer but entry " +
                                        std::to_string(il) + " is " + describe(a->items[il]));
            }
            hp.recurrent_layers[il] = b ? *b : *u != 0;
        }
        return {};
    }
    STRATA_ASSIGN(auto interval, keys.u32("full_attention_interval"));
    const uint32_t every = interval.value_or(4);
    if (every == 0) return keys.invalid("full_attention_interval", "is 0");
    for (uint32_t il = 0; il < hp.n_layer; ++il) hp.recurrent_layers[il] = (il + 1) % every != 0;
    return {};
}

// Hybrid families: the Gated DeltaNet's sizes, which layers are recurrent, the gated query and
// how value heads pair with key heads. The state's head size is ssm.state_size for keys and values
// alike (the reference engine's kernels assume it), so ssm.inner_size must be value heads x state
// size.
Result<void> load_delta_net(const GgufFile& f, const ArchKeys& keys, const ArchTraits& traits,
                            ModelHparams& hp) {
    STRATA_ASSIGN(hp.ssm_d_conv, keys.positive_u32("ssm.conv_kernel"));
    STRATA_ASSIGN(hp.ssm_d_inner, keys.positive_u32("ssm.inner_size"));
    STRATA_ASSIGN(hp.ssm_d_state, keys.positive_u32("ssm.state_size"));
    STRATA_ASSIGN(hp.ssm_n_group, keys.positive_u32("ssm.group_count"));
    STRATA_ASSIGN(hp.ssm_dt_rank, keys.positive_u32("ssm.time_step_rank"));
    if (hp.ssm_dt_rank % hp.ssm_n_group != 0) {
        return keys.invalid("ssm.time_step_rank", "is " + std::to_string(hp.ssm_dt_rank) +
                                                      ", which is not a multiple of " +
                                                      keys.key("ssm.group_count") + " (" +
                                                      std::to_string(hp.ssm_n_group) + ")");
    }
    if (uint64_t(hp.ssm_d_inner) != hp.ssm_value_dim()) {
        return keys.invalid("ssm.inner_size", "is " + std::to_string(hp.ssm_d_inner) + " but " +
                                                  keys.key("ssm.time_step_rank") + " x " +
                                                  keys.key("ssm.state_size") + " is " +
                                                  std::to_string(hp.ssm_value_dim()));
    }
    STRATA_TRY(load_recurrent_layers(f, keys, hp.n_layer + hp.n_layer_nextn, hp));
    hp.attn_output_gate = true;
    hp.ssm_grouped_heads = traits.delta_net_grouped;
    return {};
}

// The reference converter appends the multi-token-prediction block(s) after the trunk and
// counts them in block_count; strata runs only the trunk and sets those blocks aside.
Result<void> load_nextn(const ArchKeys& keys, ModelHparams& hp) {
    STRATA_ASSIGN(auto nextn, keys.u32("nextn_predict_layers"));
    hp.n_layer_nextn = nextn.value_or(0);
    if (hp.n_layer_nextn == 0) return {};
    if (hp.n_layer_nextn >= hp.n_layer) {
        return keys.invalid("nextn_predict_layers", "is " + std::to_string(hp.n_layer_nextn) +
                                                        " but " + keys.key("block_count") + " is " +
                                                        std::to_string(hp.n_layer) +
                                                        ": no trunk layer would be left");
    }
    hp.n_layer -= hp.n_layer_nextn;
    for (auto* v : {&hp.n_head_per_layer, &hp.n_head_kv_per_layer, &hp.n_ff_per_layer}) {
        if (v->size() > hp.n_layer) v->resize(hp.n_layer);
    }
    if (hp.n_leading_dense > hp.n_layer) {
        return keys.invalid("leading_dense_block_count",
                            "is " + std::to_string(hp.n_leading_dense) + " but the trunk has " +
                                std::to_string(hp.n_layer) + " layers");
    }
    return {};
}

// A family whose vision variant the reference runs with multi-section rope refuses a file that
// asks for several sections (GLM-4.5V's files): its text would come out wrong.
Result<void> refuse_rope_sections(const GgufFile& f, const ArchKeys& keys) {
    const Value* v = f.find(keys.key("rope.dimension_sections"));
    if (!v) return {};
    const Array* a = v->as_array();
    if (a && std::all_of(a->items.begin(), a->items.end(),
                         [](const Value& x) { return x.as_int().value_or(1) == 0; })) {
        return {};
    }
    return keys.invalid("rope.dimension_sections",
                        "asks for multi-section rope (a vision model's), which strata does not "
                        "run for this architecture");
}

// <arch>.rope.dimension_sections: up to four section sizes, in pairs of dimensions.
Result<void> load_rope_sections(const GgufFile& f, const ArchKeys& keys, ModelHparams& hp) {
    const Value* v = f.find(keys.key("rope.dimension_sections"));
    if (!v) return {};
    const Array* a = v->as_array();
    if (!a || a->items.size() > 4) {
        return keys.invalid("rope.dimension_sections",
                            "should be an array of at most 4 integers but is " + describe(*v));
    }
    uint32_t pairs = 0;
    for (size_t i = 0; i < a->items.size(); ++i) {
        const auto x = a->items[i].as_int();
        if (!x || *x < 0 || *x > int64_t(hp.n_rot)) {
            return keys.invalid("rope.dimension_sections", "has an entry out of range");
        }
        hp.rope_sections[i] = uint32_t(*x);
        pairs += uint32_t(*x);
    }
    if (pairs == 0 || pairs > hp.n_rot / 2) {
        return keys.invalid("rope.dimension_sections",
                            "covers " + std::to_string(pairs) + " pairs; it must cover 1 to " +
                                std::to_string(hp.n_rot / 2) + " (half of " +
                                keys.key("rope.dimension_count") + ")");
    }
    return {};
}

// Sliding-window attention: the window and which layers use it. The pattern key is either a
// period (layer il windowed when il % period < period - 1; 0: every layer) or one bool per layer.
Result<void> load_sliding_window(const GgufFile& f, const ArchKeys& keys, const ArchTraits& traits,
                                 ModelHparams& hp) {
    if (traits.swa_period == 0) return {};
    STRATA_ASSIGN(auto window, keys.u32("attention.sliding_window"));
    if (!window) return keys.missing("attention.sliding_window");
    if (*window == 0) return keys.invalid("attention.sliding_window", "is 0");
    hp.n_swa = *window;
    hp.swa_layers.assign(hp.n_layer, 0);
    const Value* pattern = f.find(keys.key("attention.sliding_window_pattern"));
    if (pattern && pattern->as_array()) {
        const Array& a = *pattern->as_array();
        if (a.items.size() != hp.n_layer) {
            return keys.invalid("attention.sliding_window_pattern",
                                "has " + std::to_string(a.items.size()) +
                                    " per-layer entries but the model has " +
                                    std::to_string(hp.n_layer) + " layers");
        }
        for (uint32_t il = 0; il < hp.n_layer; ++il) {
            const Value& v = a.items[il];
            const auto b = v.as_bool();
            const auto u = v.as_uint();
            if (!b && !u) {
                return keys.invalid("attention.sliding_window_pattern",
                                    "should hold one bool per layer but entry " +
                                        std::to_string(il) + " is " + describe(v));
            }
            hp.swa_layers[il] = (b ? *b : *u != 0) ? 1 : 0;
        }
        return {};
    }
    uint32_t period = traits.swa_period;
    STRATA_ASSIGN(auto given, keys.u32("attention.sliding_window_pattern"));
    if (given) period = *given;
    for (uint32_t il = 0; il < hp.n_layer; ++il) {
        hp.swa_layers[il] = period == 0 || il % period < period - 1 ? 1 : 0;
    }
    return {};
}

// Flags that only the tensor table tells.
void detect_structure(const GgufFile& f, const ArchTraits& traits, ModelHparams& hp) {
    hp.tied_output = f.find_tensor("output.weight") == nullptr;
    hp.ffn_norm_is_post_attention = traits.ffn_norm_is_post_attention;
    hp.has_rope_freqs = f.find_tensor("rope_freqs.weight") != nullptr;
    for (const TensorInfo& t : f.tensors) {
        const TensorName n = classify_tensor_name(t.name);
        if (n.is_bias && (n.role == TensorRole::AttnQ || n.role == TensorRole::AttnK ||
                          n.role == TensorRole::AttnV || n.role == TensorRole::AttnQkv)) {
            hp.has_qkv_bias = true;
        }
        if (!n.is_bias && (n.role == TensorRole::AttnQNorm || n.role == TensorRole::AttnKNorm)) {
            hp.has_qk_norm = true;
        }
        if (n.role == TensorRole::AttnSinks) hp.has_attn_sinks = true;
        // qwen3next's earlier files: q, k, v and z in one projection (checked per layer by
        // check_tensors).
        if (n.role == TensorRole::SsmIn && traits.delta_net_grouped) hp.ssm_fused_qkvz = true;
        if (n.is_bias && is_expert_role(n.role)) hp.has_expert_bias = true;
        if (n.role == TensorRole::MoeRouterBias) hp.has_selection_bias = true;
    }
}

}  // namespace

Result<ModelHparams> load_hparams(const GgufFile& f) {
    ModelHparams hp;
    const Value* arch = f.find("general.architecture");
    if (!arch) {
        return err(f.path,
                   ": metadata key 'general.architecture' is missing, so the model type "
                   "is unknown");
    }
    if (!arch->as_string()) {
        return err(f.path, ": metadata key 'general.architecture' should be a string but is ",
                   describe(*arch));
    }
    hp.arch = *arch->as_string();
    const ArchTraits* traits = find_arch_traits(hp.arch);
    if (!traits) {
        return err(f.path, ": architecture '", hp.arch,
                   "' is not supported (supported: ", supported_architectures(), ")");
    }
    if (auto name = f.get_string("general.name")) hp.name = *name;

    const ArchKeys keys(f, hp.arch);
    STRATA_ASSIGN(hp.n_ctx_train, keys.positive_u32("context_length"));
    STRATA_ASSIGN(hp.n_embd, keys.positive_u32("embedding_length"));
    STRATA_ASSIGN(hp.n_layer, keys.positive_u32("block_count"));
    if (hp.n_layer > kMaxBlockCount) {
        return keys.invalid("block_count", "is " + std::to_string(hp.n_layer) +
                                               ", more layers than any model has (at most " +
                                               std::to_string(kMaxBlockCount) + ")");
    }
    STRATA_TRY(load_attention(keys, hp));
    if (traits->mla) STRATA_TRY(load_mla(keys, hp));
    STRATA_TRY(load_ffn(keys, *traits, hp));
    STRATA_TRY(load_nextn(keys, hp));
    STRATA_TRY(load_rope(keys, *traits, hp));
    if (traits->hybrid_delta_net) STRATA_TRY(load_delta_net(f, keys, *traits, hp));
    if (traits->rope_sections) STRATA_TRY(load_rope_sections(f, keys, hp));
    if (traits->refuses_rope_sections) STRATA_TRY(refuse_rope_sections(f, keys));
    STRATA_TRY(load_sliding_window(f, keys, *traits, hp));
    STRATA_ASSIGN(hp.n_vocab, load_n_vocab(f, keys));
    if (hp.n_vocab == 0) return err(f.path, ": the vocabulary is empty");
    detect_structure(f, *traits, hp);
    return hp;
}

}  // namespace strata
