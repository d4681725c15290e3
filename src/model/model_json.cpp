#include "model/model_json.h"

#include "gguf/tensor_type.h"

namespace strata {

namespace {

using nlohmann::json;

json totals_json(const ByteTotals& t) {
    return {{"tensors", t.tensors},
            {"params", t.params},
            {"bytes", t.bytes},
            {"expert_bytes", t.expert_bytes},
            {"bytes_per_token", t.bytes_per_token}};
}

json metadata_value_json(const Value& v, bool full) {
    json out = {{"type", value_type_name(v.type())}};
    if (const Array* a = v.as_array()) {
        out["element_type"] = value_type_name(a->elem_type);
        out["length"] = a->items.size();
        if (!full && a->items.size() > kJsonArrayLimit) return out;
    }
    json value;
    to_json(value, v);
    out["value"] = std::move(value);
    return out;
}

json optional_string(const std::optional<std::string>& s) {
    return s ? json(*s) : json(nullptr);
}

json tokenizer_json(const GgufFile& f) {
    json tokens = nullptr;
    if (const Array* a = f.get_array("tokenizer.ggml.tokens")) tokens = a->items.size();
    return {{"model", optional_string(f.get_string("tokenizer.ggml.model"))},
            {"pre", optional_string(f.get_string("tokenizer.ggml.pre"))},
            {"tokens", tokens}};
}

json tensor_json(const ModelInfo& info, const ModelTensor& mt) {
    const TensorInfo& t = info.info(mt);
    json shape = json::array();
    for (uint32_t d = 0; d < t.n_dims; ++d) shape.push_back(t.shape[d]);
    json out = {{"name", t.name},
                {"role", tensor_role_name(mt.role)},
                {"layer", mt.layer >= 0 ? json(mt.layer) : json(nullptr)},
                {"expert", mt.expert >= 0 ? json(mt.expert) : json(nullptr)},
                {"bias", mt.is_bias},
                {"type", tensor_type_name(t.type)},
                {"shape", std::move(shape)},
                {"params", t.n_elements()},
                {"bytes", t.n_bytes},
                {"offset", t.offset},
                {"reads_per_token", mt.reads_per_token}};
    if (mt.n_expert_slices > 0) {
        json slices = json::array();
        for (const ExpertSlice& s : expert_slices(info, mt)) {
            slices.push_back({{"expert", s.expert}, {"offset", s.offset}, {"bytes", s.n_bytes}});
        }
        out["expert_slices"] = std::move(slices);
    }
    return out;
}

}  // namespace

json hparams_json(const ModelHparams& hp) {
    const RopeScaling& sc = hp.rope_scaling;
    return {
        {"arch", hp.arch},
        {"name", hp.name},
        {"n_vocab", hp.n_vocab},
        {"n_ctx_train", hp.n_ctx_train},
        {"n_embd", hp.n_embd},
        {"n_layer", hp.n_layer},
        {"n_layer_nextn", hp.n_layer_nextn},
        {"n_head", hp.n_head},
        {"n_head_kv", hp.n_head_kv},
        {"head_dim_k", hp.head_dim_k},
        {"head_dim_v", hp.head_dim_v},
        {"rms_eps", hp.rms_eps},
        {"n_ff", hp.n_ff},
        {"n_head_per_layer", hp.n_head_per_layer},
        {"n_head_kv_per_layer", hp.n_head_kv_per_layer},
        {"n_ff_per_layer", hp.n_ff_per_layer},
        {"n_expert", hp.n_expert},
        {"n_expert_used", hp.n_expert_used},
        {"n_ff_exp", hp.n_ff_exp},
        {"n_ff_shexp", hp.n_ff_shexp},
        {"n_expert_shared", hp.n_expert_shared},
        {"norm_topk_prob", hp.norm_topk_prob},
        {"n_leading_dense", hp.n_leading_dense},
        {"expert_gating", expert_gating_name(hp.expert_gating)},
        {"n_expert_group", hp.n_expert_group},
        {"n_expert_group_used", hp.n_expert_group_used},
        {"expert_weights_scale", hp.expert_weights_scale},
        {"has_selection_bias", hp.has_selection_bias},
        {"n_rot", hp.n_rot},
        {"rope_freq_base", hp.rope_freq_base},
        {"rope_style", rope_style_name(hp.rope_style)},
        {"rope_scaling",
         {{"type", sc.type},
          {"factor", sc.factor},
          {"original_context", sc.original_context},
          {"attn_factor", sc.attn_factor},
          {"low_freq_factor", sc.low_freq_factor},
          {"high_freq_factor", sc.high_freq_factor},
          {"mscale_all_dim", sc.mscale_all_dim}}},
        {"tied_output", hp.tied_output},
        {"has_qkv_bias", hp.has_qkv_bias},
        {"has_qk_norm", hp.has_qk_norm},
        {"has_rope_freqs", hp.has_rope_freqs},
        {"rope_sections", hp.rope_sections},
        {"ssm",
         {{"conv_kernel", hp.ssm_d_conv},
          {"state_size", hp.ssm_d_state},
          {"key_heads", hp.ssm_n_group},
          {"value_heads", hp.ssm_dt_rank},
          {"recurrent_layers", hp.recurrent_layers},
          {"grouped_heads", hp.ssm_grouped_heads},
          {"fused_qkvz", hp.ssm_fused_qkvz}}},
        {"mla",
         {{"q_lora_rank", hp.n_lora_q},
          {"kv_lora_rank", hp.n_lora_kv},
          {"cache_width", hp.is_mla() ? hp.mla_cache_width() : 0u},
          {"kv_b", hp.mla_kv_b}}},
    };
}

json model_info_json(const ModelInfo& info, const ModelJsonOptions& options) {
    const GgufFile& f = info.file;
    json out;
    out["file"] = {{"path", f.path},
                   {"version", f.version},
                   {"size", f.file_size},
                   {"alignment", f.alignment},
                   {"data_offset", f.data_offset},
                   {"tensor_count", f.tensors.size()},
                   {"metadata_count", f.metadata.size()}};
    out["architecture"] = info.arch.empty() ? json(nullptr) : json(info.arch);
    out["name"] = optional_string(f.get_string("general.name"));
    out["runnable"] = info.runnable();
    out["problems"] = info.problems;
    out["warnings"] = info.warnings;
    if (auto ft = info.file_type()) {
        out["file_type"] = {{"id", *ft}, {"name", file_type_name(*ft)}};
    } else {
        out["file_type"] = nullptr;
    }
    out["tokenizer"] = tokenizer_json(f);
    out["hparams"] = info.hparams ? hparams_json(*info.hparams) : json(nullptr);

    out["totals"] = totals_json(info.totals);
    json types = json::object();
    for (const auto& [type, totals] : info.by_type) {
        types[std::string(tensor_type_name(type))] = totals_json(totals);
    }
    out["tensor_types"] = std::move(types);
    json roles = json::object();
    for (const auto& [role, totals] : info.by_role) {
        roles[std::string(tensor_role_name(role))] = totals_json(totals);
    }
    out["by_role"] = std::move(roles);
    json layers = json::array();
    for (const auto& [il, totals] : info.by_layer) {
        json l = totals_json(totals);
        l["layer"] = il;
        layers.push_back(std::move(l));
    }
    out["by_layer"] = std::move(layers);
    out["non_layer"] = totals_json(info.non_layer);
    // The multi-token-prediction blocks' tensors: in the file, not in "tensors", never read.
    out["set_aside"] = totals_json(info.set_aside_totals);

    json metadata = json::object();
    for (const MetadataEntry& e : f.metadata) {
        metadata[e.key] = metadata_value_json(e.value, options.full_metadata);
    }
    out["metadata"] = std::move(metadata);

    if (options.tensors) {
        json tensors = json::array();
        for (const ModelTensor& mt : info.tensors) tensors.push_back(tensor_json(info, mt));
        out["tensors"] = std::move(tensors);
    }
    return out;
}

}  // namespace strata
