// Plan <-> JSON; the schema is in plan_json.h.
#include "plan/plan_json.h"

#include <string>

#include "plan/execution_table.h"

namespace strata {

using nlohmann::json;

namespace {

Result<Tier> parse_tier(const std::string& s) {
    for (Tier t : {Tier::Gpu, Tier::Ram, Tier::Disk}) {
        if (s == tier_name(t)) return t;
    }
    return err("unknown tier '", s, "'");
}

Result<TensorUse> parse_use(const std::string& s) {
    for (TensorUse u : {TensorUse::Resident, TensorUse::Cached, TensorUse::Streamed}) {
        if (s == tensor_use_name(u)) return u;
    }
    return err("unknown tensor use '", s, "'");
}

Result<Plan> from_json(const json& j) {
    Plan p;
    STRATA_ASSIGN(p.mode, parse_plan_mode(j.at("mode").get<std::string>()));
    p.mode_forced = j.at("mode_forced");
    p.reason = j.at("reason");
    const json& b = j.at("budgets");
    p.budgets.ram = b.at("ram");
    p.budgets.gpu_mem = b.at("gpu_mem");
    p.budgets.ram_from_flag = b.at("ram_from_flag");
    p.budgets.gpu_from_flag = b.at("gpu_from_flag");
    p.budgets.warnings = b.at("warnings").get<std::vector<std::string>>();
    p.n_ctx = j.at("n_ctx");
    p.n_seq = j.value("n_seq", 1u);
    STRATA_ASSIGN(p.kv_type, parse_kv_type(j.at("kv_type").get<std::string>()));

    p.batch = j.at("batch");
    p.threads = j.at("threads");
    const json& m = j.at("memory");
    p.memory = {m.at("resident_weights"),
                m.at("cached_weights"),
                m.at("expert_cache"),
                m.at("slots"),
                m.value("row_buffers", 0ull),
                m.at("kv_cache"),
                m.at("activations"),
                m.at("io_buffers"),
                m.at("baseline"),
                m.at("baseline_measured"),
                m.at("slack"),
                m.at("total"),
                m.at("budget"),
                m.value("recurrent_state", 0ull)};
    p.gpu_device = j.value("gpu_device", -1);
    if (j.contains("cpu_kernels")) {
        STRATA_ASSIGN(p.cpu_kernels, kernel_table_from_json(j.at("cpu_kernels")));
    }
    p.gpu_note = j.value("gpu_note", std::string());
    if (j.contains("gpu_memory")) {
        const json& g = j.at("gpu_memory");
        p.gpu_memory.weights = g.at("weights");
        p.gpu_memory.kv_cache = g.at("kv_cache");
        p.gpu_memory.activations = g.at("activations");
        p.gpu_memory.prompt_staging = g.value("prompt_staging", uint64_t(0));
        p.gpu_memory.expert_cache = g.value("expert_cache", uint64_t(0));
        p.gpu_memory.expert_entries = g.value("expert_entries", 0u);
        p.gpu_memory.expert_entry_bytes = g.value("expert_entry_bytes", uint64_t(0));
        p.gpu_memory.recurrent_state = g.value("recurrent_state", uint64_t(0));
        p.gpu_memory.expert_hit_rate = g.value("expert_hit_rate", 0.0);
        p.gpu_memory.total = g.at("total");
        p.gpu_memory.budget = g.at("budget");
    }
    if (j.contains("deep")) {
        const json& d = j.at("deep");
        p.deep = {d.at("embedding_rows"), d.at("head_rows"), d.at("whole_layers")};
    }
    const json& s = j.at("stream");
    p.stream = {s.at("slots"),
                s.at("slot_bytes"),
                s.at("lookahead"),
                s.at("block_size"),
                s.at("slots_forced"),
                s.at("lookahead_forced"),
                s.at("streamed_layers"),
                s.at("cached_layers"),
                s.at("layer_read_seconds"),
                s.at("longest_gap_seconds")};
    const json& c = j.at("expert_cache");
    p.expert_cache = {c.at("expert_bytes"), c.at("experts"), c.at("capacity"),
                      c.at("experts_per_slot"), c.at("hit_rate")};
    for (const json& t : j.at("tiers")) {
        TierTraffic x;
        STRATA_ASSIGN(x.tier, parse_tier(t.at("tier")));
        x.stored_bytes = t.at("stored_bytes");
        x.bytes_per_token = t.at("bytes_per_token");
        x.bandwidth = t.at("bandwidth");
        x.bandwidth_source = t.at("bandwidth_source");
        x.seconds_per_token = t.at("seconds_per_token");
        if (static_cast<size_t>(x.tier) != p.tiers.size()) return err("tiers out of order");
        p.tiers.push_back(std::move(x));
    }
    p.tokens_per_second = j.at("tokens_per_second");
    p.prompt_tokens_per_second = j.value("prompt_tokens_per_second", 0.0);
    STRATA_ASSIGN(p.bound, parse_tier(j.at("bound")));
    if (j.contains("prompt_bound")) {
        STRATA_ASSIGN(p.prompt_bound, parse_tier(j.at("prompt_bound")));
    }
    for (const json& l : j.at("layers")) {
        LayerPlan x;
        x.layer = l.at("layer");
        x.resident_bytes = l.at("resident_bytes");
        x.ffn_bytes = l.at("ffn_bytes");
        STRATA_ASSIGN(x.ffn_use, parse_use(l.at("ffn_use")));
        x.bytes_per_token = l.at("bytes_per_token");
        // Plans written before the layer split put every layer on their GPU.
        x.on_gpu = l.value("on_gpu", p.gpu_device >= 0);
        x.experts_on_cpu = l.value("experts_on_cpu", false);
        p.layers.push_back(x);
    }
    p.gpu_layers = j.value("gpu_layers", p.gpu_device >= 0 ? uint32_t(p.layers.size()) : 0u);
    p.cpu_expert_layers = j.value("cpu_expert_layers", 0u);
    for (const json& t : j.at("tensors")) {
        TensorPlacement x;
        STRATA_ASSIGN(x.tier, parse_tier(t.at("tier")));
        STRATA_ASSIGN(x.use, parse_use(t.at("use")));
        const std::string unit = t.value("unit", "none");
        for (StreamUnit u :
             {StreamUnit::None, StreamUnit::Layer, StreamUnit::Expert, StreamUnit::Rows}) {
            if (unit == stream_unit_name(u)) x.unit = u;
        }
        p.tensors.push_back(x);
    }
    p.notes = j.at("notes").get<std::vector<std::string>>();
    return p;
}

}  // namespace

json plan_json(const Plan& p, const ModelInfo& model) {
    json tiers = json::array();
    for (const TierTraffic& t : p.tiers) {
        tiers.push_back({{"tier", std::string(tier_name(t.tier))},
                         {"stored_bytes", t.stored_bytes},
                         {"bytes_per_token", t.bytes_per_token},
                         {"bandwidth", t.bandwidth},
                         {"bandwidth_source", t.bandwidth_source},
                         {"seconds_per_token", t.seconds_per_token}});
    }
    json layers = json::array();
    for (const LayerPlan& l : p.layers) {
        layers.push_back({{"layer", l.layer},
                          {"resident_bytes", l.resident_bytes},
                          {"ffn_bytes", l.ffn_bytes},
                          {"ffn_use", std::string(tensor_use_name(l.ffn_use))},
                          {"bytes_per_token", l.bytes_per_token},
                          {"on_gpu", l.on_gpu},
                          {"experts_on_cpu", l.experts_on_cpu}});
    }
    json tensors = json::array();
    for (size_t i = 0; i < p.tensors.size(); ++i) {
        const std::string name = i < model.tensors.size() ? model.info(model.tensors[i]).name : "";
        tensors.push_back({{"name", name},
                           {"tier", std::string(tier_name(p.tensors[i].tier))},
                           {"use", std::string(tensor_use_name(p.tensors[i].use))},
                           {"unit", std::string(stream_unit_name(p.tensors[i].unit))}});
    }
    const MemoryPlan& m = p.memory;
    const StreamPlan& s = p.stream;
    const ExpertCachePlan& c = p.expert_cache;
    return {{"mode", std::string(plan_mode_name(p.mode))},
            {"mode_forced", p.mode_forced},
            {"reason", p.reason},
            {"budgets",
             {{"ram", p.budgets.ram},
              {"gpu_mem", p.budgets.gpu_mem},
              {"ram_from_flag", p.budgets.ram_from_flag},
              {"gpu_from_flag", p.budgets.gpu_from_flag},
              {"warnings", p.budgets.warnings}}},
            {"n_ctx", p.n_ctx},
            {"n_seq", p.n_seq},
            {"kv_type", std::string(kv_type_name(p.kv_type))},
            {"batch", p.batch},
            {"threads", p.threads},
            {"memory",
             {{"resident_weights", m.resident_weights},
              {"cached_weights", m.cached_weights},
              {"expert_cache", m.expert_cache},
              {"slots", m.slots},
              {"row_buffers", m.row_buffers},
              {"kv_cache", m.kv_cache},
              {"activations", m.activations},
              {"io_buffers", m.io_buffers},
              {"baseline", m.baseline},
              {"baseline_measured", m.baseline_measured},
              {"slack", m.slack},
              {"total", m.total},
              {"budget", m.budget},
              {"recurrent_state", m.recurrent_state}}},
            {"gpu_device", p.gpu_device},
            {"gpu_layers", p.gpu_layers},
            {"cpu_expert_layers", p.cpu_expert_layers},
            {"gpu_note", p.gpu_note},
            {"gpu_memory",
             {{"weights", p.gpu_memory.weights},
              {"kv_cache", p.gpu_memory.kv_cache},
              {"activations", p.gpu_memory.activations},
              {"prompt_staging", p.gpu_memory.prompt_staging},
              {"expert_cache", p.gpu_memory.expert_cache},
              {"expert_entries", p.gpu_memory.expert_entries},
              {"expert_entry_bytes", p.gpu_memory.expert_entry_bytes},
              {"expert_hit_rate", p.gpu_memory.expert_hit_rate},
              {"total", p.gpu_memory.total},
              {"budget", p.gpu_memory.budget},
              {"recurrent_state", p.gpu_memory.recurrent_state}}},
            {"stream",
             {{"slots", s.slots},
              {"slot_bytes", s.slot_bytes},
              {"lookahead", s.lookahead},
              {"block_size", s.block_size},
              {"slots_forced", s.slots_forced},
              {"lookahead_forced", s.lookahead_forced},
              {"streamed_layers", s.streamed_layers},
              {"cached_layers", s.cached_layers},
              {"layer_read_seconds", s.layer_read_seconds},
              {"longest_gap_seconds", s.longest_gap_seconds}}},
            {"deep",
             {{"embedding_rows", p.deep.embedding_rows},
              {"head_rows", p.deep.head_rows},
              {"whole_layers", p.deep.whole_layers}}},
            {"expert_cache",
             {{"expert_bytes", c.expert_bytes},
              {"experts", c.experts},
              {"capacity", c.capacity},
              {"experts_per_slot", c.experts_per_slot},
              {"hit_rate", c.hit_rate}}},
            {"tiers", tiers},
            {"tokens_per_second", p.tokens_per_second},
            {"prompt_tokens_per_second", p.prompt_tokens_per_second},
            {"bound", std::string(tier_name(p.bound))},
            {"prompt_bound", std::string(tier_name(p.prompt_bound))},
            {"layers", layers},
            {"tensors", tensors},
            {"notes", p.notes},
            {"execution", execution_table_json(execution_table(p, model))},
            {"cpu_kernels", kernel_table_json(p.cpu_kernels)}};
}

Result<Plan> plan_from_json(const json& j) {
    try {
        return from_json(j);
    } catch (const json::exception& e) {
        return err("malformed plan JSON: ", e.what());
    }
}

}  // namespace strata
