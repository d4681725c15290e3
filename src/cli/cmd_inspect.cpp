// strata inspect MODEL [--json] [--tensors] [--metadata] [--full-metadata] [--profile FILE]
//     [--ram SIZE] [--gpu-mem SIZE] [--ctx N] [--kv-type T] [--mode M] [--slots N] [--lookahead N]
//
// Describes a GGUF file: format, architecture and hyper-parameters, parameter count, the
// quantization mix, and sizes by tensor type, role and layer with the bytes one generated token
// reads; --tensors adds the tensor table, --metadata every metadata key. Then the placement plan
// strata would run it with on this machine (plan/plan.h), from the cached hardware profile
// (measured on first use for the disk holding the model) and the budgets. --json prints the same
// as one JSON object (schema in model/model_json.h, the plan under "plan" as in
// plan/plan_json.h); --full-metadata gives metadata arrays in full there instead of their length
// and element type.
//
// A file that can be read is always described, exit status 0, even when strata cannot run it (an
// unsupported architecture, incomplete metadata, tensors that do not match the hyper-parameters,
// a vocabulary-only file): the human output then says why on stderr and shows the raw metadata;
// the JSON output says so in "runnable" and "problems". Only an unreadable file is an error:
// "strata: <message>" on stderr, exit status 1; so are bad plan flags and, when a plan flag was
// given, a budget too small for any plan (the message names the minimum). Without plan flags a
// model that fits no plan on this machine is still described: "plan" is null and "plan_note" (in
// the human output "plan: none: ...") says why, as for a file strata cannot run.
//
// --profile FILE plans for another machine: the one whose `strata profile --json` FILE holds
// (its RAM, GPU and disk; budgets default to what was available there), so that a laptop shows
// what a model would do on a GPU server.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/plan_flags.h"
#include "gguf/reader.h"
#include "model/model_info.h"
#include "model/model_json.h"
#include "plan/plan_json.h"
#include "plan/plan_text.h"
#include "util/table.h"
#include "util/units.h"

namespace strata::cli {

namespace {

struct InspectOptions {
    std::string path;
    bool json = false;
    bool tensors = false;
    bool metadata = false;
    bool full_metadata = false;
    PlanFlags plan;
};

constexpr const char* kNoPlan = "strata cannot run this file (see the problems), so it has no plan";

constexpr size_t kMaxProblemsShown = 10;

std::string printf_string(const char* fmt, double x) {
    char buf[64];
    std::snprintf(buf, sizeof buf, fmt, x);
    return buf;
}

std::string percent(uint64_t part, uint64_t whole) {
    return whole ? printf_string("%.1f%%", 100.0 * static_cast<double>(part) / whole) : "-";
}

// 1000000 -> "1000000", 9.99999975e-06 (a float's 1e-5) -> "1e-05", 0.5 -> "0.5".
std::string number(double x) {
    if (x == std::floor(x) && std::fabs(x) < 1e15) return printf_string("%.0f", x);
    return printf_string("%.6g", x);
}

std::string bytes_per_token(double b) {
    return format_bytes(static_cast<uint64_t>(std::llround(b)));
}

// 2280096 -> "2,280,096".
std::string grouped(uint64_t n) {
    std::string s = std::to_string(n);
    for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3) s.insert(i, ",");
    return s;
}

// "Q4_K ×13, Q6_K ×3, F32 ×5", largest share of bytes first.
std::string type_mix(const ModelInfo& info) {
    std::vector<std::pair<TensorType, ByteTotals>> types(info.by_type.begin(), info.by_type.end());
    std::stable_sort(types.begin(), types.end(),
                     [](const auto& a, const auto& b) { return a.second.bytes > b.second.bytes; });
    std::string out;
    for (const auto& [type, t] : types) {
        if (!out.empty()) out += ", ";
        out += std::string(tensor_type_name(type)) + " ×" + std::to_string(t.tensors);
    }
    return out;
}

std::string attention_line(const ModelHparams& hp) {
    std::string s = std::to_string(hp.n_head) + " heads";
    if (hp.is_mla()) {
        // Latent attention: the cache holds the latent and the rotary key, whatever the heads.
        s += ", latent attention (";
        if (hp.n_lora_q > 0) s += "query rank " + std::to_string(hp.n_lora_q) + ", ";
        s += "cache " + std::to_string(hp.n_lora_kv) + " latent + " + std::to_string(hp.n_rot) +
             " rotary per token" + (hp.mla_kv_b ? ", attn_kv_b" : "") + ")";
    } else if (hp.n_head_kv != hp.n_head) {
        s += ", " + std::to_string(hp.n_head_kv) + " KV heads (GQA " +
             std::to_string(hp.n_head / hp.n_head_kv) + ":1)";
    }
    s += ", head size " + std::to_string(hp.head_dim_k);
    if (hp.head_dim_v != hp.head_dim_k) s += " (values " + std::to_string(hp.head_dim_v) + ")";
    if (!hp.n_head_per_layer.empty() || !hp.n_head_kv_per_layer.empty()) {
        s += "; varies by layer, maximum shown";
    }
    if (hp.n_swa > 0) {
        const auto windowed = std::count(hp.swa_layers.begin(), hp.swa_layers.end(), uint8_t{1});
        s += "; window " + std::to_string(hp.n_swa) + " in " + std::to_string(windowed) + " of " +
             std::to_string(hp.n_layer) + " layers";
    }
    return s;
}

// Hybrid models: which layers are Gated DeltaNets, their heads and how their projections are
// stored.
std::string delta_net_line(const ModelHparams& hp) {
    const auto recurrent = std::count(hp.recurrent_layers.begin(), hp.recurrent_layers.end(), true);
    std::string s = "Gated DeltaNet in " + std::to_string(recurrent) + " of " +
                    std::to_string(hp.n_layer) + " layers: " + std::to_string(hp.ssm_n_group) +
                    " key / " + std::to_string(hp.ssm_dt_rank) + " value heads of " +
                    std::to_string(hp.ssm_d_state) + ", conv " + std::to_string(hp.ssm_d_conv);
    if (hp.ssm_grouped_heads) {
        s += "; value heads grouped per key head, fused ";
        s += hp.ssm_fused_qkvz ? "ssm_in and ssm_ba" : "ssm_ba";
    }
    return s;
}

std::string rope_line(const ModelHparams& hp) {
    std::string s = std::string(rope_style_name(hp.rope_style)) + ", " + std::to_string(hp.n_rot) +
                    " dims, base " + number(hp.rope_freq_base);
    const RopeScaling& sc = hp.rope_scaling;
    if (sc.type != "none") {
        s += ", " + sc.type + " scaling ×" + number(sc.factor);
        if (sc.original_context) s += " from " + std::to_string(sc.original_context);
    }
    if (hp.has_rope_freqs) s += ", frequency factors (rope_freqs)";
    const auto& sec = hp.rope_sections;
    if (sec[0] + sec[1] + sec[2] + sec[3] > 0) {
        s += ", sections " + std::to_string(sec[0]) + "/" + std::to_string(sec[1]) + "/" +
             std::to_string(sec[2]) + "/" + std::to_string(sec[3]) + " (interleaved)";
    }
    return s;
}

std::string tokenizer_line(const ModelInfo& info) {
    const GgufFile& f = info.file;
    std::string s;
    if (info.hparams) {
        s = grouped(info.hparams->n_vocab) + " tokens";
    } else if (const Array* tokens = f.get_array("tokenizer.ggml.tokens")) {
        s = grouped(tokens->items.size()) + " tokens";
    }
    auto model = f.get_string("tokenizer.ggml.model");
    auto pre = f.get_string("tokenizer.ggml.pre");
    if (model || pre) {
        if (!s.empty()) s += ", ";
        s += "tokenizer " + model.value_or("?");
        if (pre) s += " (pre-tokenizer " + *pre + ")";
    }
    return s.empty() ? "-" : s;
}

std::string weights_line(const ModelInfo& info) {
    if (info.vocab_only()) return "none (vocabulary-only file)";
    const ByteTotals& t = info.totals;
    std::string s = format_bytes(t.bytes) + " in " + std::to_string(t.tensors) + " tensors; " +
                    bytes_per_token(t.bytes_per_token) + " read per token";
    if (t.expert_bytes > 0) {
        double expert_per_token = 0;
        for (const auto& [role, r] : info.by_role) {
            if (is_expert_role(role)) expert_per_token += r.bytes_per_token;
        }
        s += " (experts " + bytes_per_token(expert_per_token) + " of " +
             format_bytes(t.expert_bytes) + ")";
    }
    return s;
}

void print_summary(const ModelInfo& info) {
    const GgufFile& f = info.file;
    std::printf("%s\n", f.path.c_str());
    TextTable kv({{""}, {""}});
    kv.add_row({"format", "GGUF v" + std::to_string(f.version) + ", " + format_bytes(f.file_size) +
                              " (" + grouped(f.file_size) + " bytes), " +
                              std::to_string(f.metadata.size()) + " metadata keys, " +
                              std::to_string(f.tensors.size() + info.set_aside.size()) +
                              " tensors"});
    if (auto name = f.get_string("general.name")) kv.add_row({"name", *name});
    std::string arch = info.arch.empty() ? "unknown (no general.architecture)" : info.arch;
    if (!info.arch.empty() && !info.hparams) arch += " (not runnable, see the warnings)";
    if (info.hparams && info.hparams->is_moe()) arch += ", mixture of experts";
    kv.add_row({"architecture", arch});
    if (!info.vocab_only()) kv.add_row({"parameters", format_count(info.totals.params)});
    std::string ftype = "not recorded";
    if (auto ft = info.file_type()) ftype = std::string(file_type_name(*ft));
    if (!info.vocab_only()) ftype += "; tensors " + type_mix(info);
    kv.add_row({"file type", ftype});

    if (const auto& hp = info.hparams) {
        kv.add_row({"context", grouped(hp->n_ctx_train) + " tokens"});
        std::string layers = std::to_string(hp->n_layer);
        if (hp->n_layer_nextn > 0) {
            layers += " (+" + std::to_string(hp->n_layer_nextn) + " multi-token-prediction, " +
                      format_bytes(info.set_aside_totals.bytes) + ", not used)";
        }
        kv.add_row({"layers", layers});
        kv.add_row({"embedding", std::to_string(hp->n_embd)});
        kv.add_row({"attention", attention_line(*hp)});
        if (hp->has_recurrent()) kv.add_row({"linear attention", delta_net_line(*hp)});
        if (hp->is_moe()) {
            std::string e = std::to_string(hp->n_expert) + ", " +
                            std::to_string(hp->n_expert_used) + " used per token, " +
                            std::to_string(hp->n_ff_exp) + " wide";
            if (hp->n_expert_shared > 0) {
                e += "; " + std::to_string(hp->n_expert_shared) + " shared, " +
                     std::to_string(hp->n_ff_shexp) + " wide";
            }
            if (hp->n_leading_dense > 0) {
                e += "; first " + std::to_string(hp->n_leading_dense) + " layers dense";
            }
            kv.add_row({"experts", e});
            std::string r = std::string(expert_gating_name(hp->expert_gating)) + " scores";
            if (hp->has_selection_bias) r += ", biased to choose";
            if (hp->grouped_routing()) {
                r += ", best " + std::to_string(hp->n_expert_group_used) + " of " +
                     std::to_string(hp->n_expert_group) + " groups";
            }
            if (hp->norm_topk_prob) r += ", renormalised";
            if (hp->expert_weights_scale != 1.0f)
                r += ", scaled " + number(hp->expert_weights_scale);
            kv.add_row({"routing", r});
        }
        if (!hp->is_moe() || hp->n_leading_dense > 0) {
            std::string ff = std::to_string(hp->n_ff);
            if (!hp->n_ff_per_layer.empty()) ff += " (varies by layer, maximum shown)";
            kv.add_row({"feed-forward", ff});
        }
        kv.add_row({"rope", rope_line(*hp)});
        kv.add_row({"rms norm eps", number(hp->rms_eps)});
        std::vector<std::string> extras;
        if (hp->has_qkv_bias) extras.push_back("q/k/v bias");
        if (hp->has_qk_norm) extras.push_back("q/k norm");
        if (hp->has_attn_sinks) extras.push_back("attention sinks");
        if (hp->has_expert_bias) extras.push_back("router and expert biases");
        if (hp->expert_activation == FfnActivation::SwigluOai) extras.push_back("clamped SwiGLU");
        if (!info.vocab_only()) {
            extras.push_back(hp->tied_output ? "tied output (token_embd is the LM head)"
                                             : "separate output");
        }
        std::string s;
        for (const auto& x : extras) s += (s.empty() ? "" : ", ") + x;
        if (!s.empty()) kv.add_row({"structure", s});
    }
    kv.add_row({"vocabulary", tokenizer_line(info)});
    kv.add_row({"weights", weights_line(info)});
    std::fputs(kv.render("  ").c_str(), stdout);
}

void print_types(const ModelInfo& info) {
    TextTable t({{"type"},
                 {"tensors", Align::Right},
                 {"params", Align::Right},
                 {"bytes", Align::Right},
                 {"share", Align::Right},
                 {"bits/weight", Align::Right}});
    for (const auto& [type, x] : info.by_type) {
        t.add_row({std::string(tensor_type_name(type)), std::to_string(x.tensors),
                   format_count(x.params), format_bytes(x.bytes),
                   percent(x.bytes, info.totals.bytes),
                   x.params ? printf_string("%.2f", 8.0 * x.bytes / x.params) : "-"});
    }
    std::printf("\ntensor types\n%s", t.render("  ").c_str());
}

void print_roles(const ModelInfo& info) {
    TextTable t({{"role"},
                 {"tensors", Align::Right},
                 {"params", Align::Right},
                 {"bytes", Align::Right},
                 {"share", Align::Right},
                 {"read per token", Align::Right}});
    for (const auto& [role, x] : info.by_role) {
        t.add_row({std::string(tensor_role_name(role)), std::to_string(x.tensors),
                   format_count(x.params), format_bytes(x.bytes),
                   percent(x.bytes, info.totals.bytes), bytes_per_token(x.bytes_per_token)});
    }
    t.add_rule();
    const ByteTotals& x = info.totals;
    t.add_row({"total", std::to_string(x.tensors), format_count(x.params), format_bytes(x.bytes),
               "", bytes_per_token(x.bytes_per_token)});
    std::printf("\nby role\n%s", t.render("  ").c_str());
}

bool same_totals(const ByteTotals& a, const ByteTotals& b) {
    return a.tensors == b.tensors && a.params == b.params && a.bytes == b.bytes &&
           a.expert_bytes == b.expert_bytes;
}

// One row per run of identical layers ("0-31" for a uniform model), figures per layer.
void print_layers(const ModelInfo& info) {
    const bool moe = info.totals.expert_bytes > 0;
    std::vector<TableColumn> cols = {
        {"layer"}, {"tensors", Align::Right}, {"params", Align::Right}, {"bytes", Align::Right}};
    if (moe) cols.push_back({"experts", Align::Right});
    cols.push_back({"read per token", Align::Right});
    TextTable t(std::move(cols));
    auto row = [&](const std::string& label, const ByteTotals& x) {
        std::vector<std::string> cells = {label, std::to_string(x.tensors), format_count(x.params),
                                          format_bytes(x.bytes)};
        if (moe) cells.push_back(format_bytes(x.expert_bytes));
        cells.push_back(bytes_per_token(x.bytes_per_token));
        t.add_row(std::move(cells));
    };
    bool merged = false;
    for (auto it = info.by_layer.begin(); it != info.by_layer.end();) {
        // Extend the run while the next layer is the neighbour and has the same figures.
        auto last = it, next = std::next(it);
        while (next != info.by_layer.end() && next->first == last->first + 1 &&
               same_totals(it->second, next->second)) {
            last = next++;
        }
        const std::string label =
            last == it ? std::to_string(it->first)
                       : std::to_string(it->first) + "-" + std::to_string(last->first);
        merged = merged || last != it;
        row(label, it->second);
        it = next;
    }
    row("non-layer", info.non_layer);
    std::printf("\nby layer%s\n%s",
                merged ? " (identical neighbours merged, figures per layer)" : "",
                t.render("  ").c_str());
}

void print_tensors(const ModelInfo& info) {
    TextTable t({{"name"},
                 {"role"},
                 {"type"},
                 {"shape"},
                 {"bytes", Align::Right},
                 {"offset", Align::Right},
                 {"read/token", Align::Right},
                 {"experts"}});
    for (const ModelTensor& mt : info.tensors) {
        const TensorInfo& ti = info.info(mt);
        std::string experts;
        if (mt.n_expert_slices > 0) {
            experts =
                std::to_string(mt.n_expert_slices) + " × " + format_bytes(mt.expert_slice_bytes);
        }
        t.add_row({ti.name, std::string(tensor_role_name(mt.role)),
                   std::string(tensor_type_name(ti.type)), ti.shape_string(),
                   format_bytes(ti.n_bytes), std::to_string(ti.offset),
                   printf_string("%.4g", mt.reads_per_token), experts});
    }
    std::printf("\ntensors\n%s", t.render("  ").c_str());
}

// A metadata value in a table cell: long arrays show their first items ("["<unk>", "<s>", …]");
// the type column gives their length.
std::string metadata_preview(const Value& v) {
    constexpr size_t kItems = 4;
    const Array* a = v.as_array();
    if (!a || a->items.size() <= 2 * kItems) return v.to_display(2 * kItems);
    std::string s = "[";
    for (size_t i = 0; i < kItems; ++i) s += a->items[i].to_display(kItems) + ", ";
    return s + "…]";
}

void print_metadata(const ModelInfo& info) {
    TextTable t({{"key"}, {"type"}, {"value"}});
    for (const MetadataEntry& e : info.file.metadata) {
        std::string type(value_type_name(e.value.type()));
        if (const Array* a = e.value.as_array()) {
            type = std::string(value_type_name(a->elem_type)) + "[" +
                   std::to_string(a->items.size()) + "]";
        }
        t.add_row({e.key, type, metadata_preview(e.value)});
    }
    std::printf("\nmetadata\n%s", t.render("  ").c_str());
}

void print_problems(const ModelInfo& info) {
    auto print = [](const std::vector<std::string>& list, const char* what) {
        for (size_t i = 0; i < list.size() && i < kMaxProblemsShown; ++i) {
            std::fprintf(stderr, "strata: %s: %s\n", what, list[i].c_str());
        }
        if (list.size() > kMaxProblemsShown) {
            std::fprintf(stderr,
                         "strata: %s: ... and %zu more (all of them: strata inspect --json)\n",
                         what, list.size() - kMaxProblemsShown);
        }
    };
    print(info.problems, "warning");
    print(info.warnings, "note");
}

void print_human(const ModelInfo& info, const InspectOptions& opt, const Plan* plan,
                 const std::string& no_plan) {
    print_summary(info);
    if (!info.vocab_only()) {
        print_types(info);
        print_roles(info);
        print_layers(info);
    }
    if (opt.tensors && !info.vocab_only()) print_tensors(info);
    // Without hyper-parameters the summary says little; the raw metadata says what the file is.
    if (opt.metadata || !info.hparams) print_metadata(info);
    if (plan) {
        std::fputs(plan_text(*plan).c_str(), stdout);
    } else {
        std::printf("\nplan: none: %s\n", no_plan.c_str());
    }
    std::fflush(stdout);
    print_problems(info);
}

[[noreturn]] void fail(const std::string& message) {
    std::fprintf(stderr, "strata: %s\n", message.c_str());
    throw CLI::RuntimeError(1);
}

void run_inspect(const InspectOptions& opt) {
    auto file = read_gguf(opt.path);
    if (!file) fail(file.error().message);
    const ModelInfo info = describe_model(std::move(*file));
    // Made before anything is printed, so a bad flag or too small a budget prints only the error.
    // Without plan flags the file is still described when no plan fits the default budget.
    std::optional<Plan> plan;
    std::string no_plan = kNoPlan;
    if (info.runnable()) {
        auto made = plan_for_model(info, opt.path, opt.plan);
        if (made) {
            plan = std::move(*made);
        } else if (opt.plan.given()) {
            fail(made.error().message);
        } else {
            no_plan = made.error().message;
        }
    }
    if (opt.json) {
        ModelJsonOptions jo;
        jo.tensors = opt.tensors;
        jo.full_metadata = opt.full_metadata;
        nlohmann::json j = model_info_json(info, jo);
        if (plan) {
            j["plan"] = plan_json(*plan, info);
        } else {
            j["plan"] = nullptr;
            j["plan_note"] = no_plan;
        }
        const std::string text = j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
        std::printf("%s\n", text.c_str());
        return;
    }
    print_human(info, opt, plan ? &*plan : nullptr, no_plan);
}

}  // namespace

void add_inspect(CLI::App& app) {
    auto* cmd = app.add_subcommand("inspect", "Describe a GGUF model: metadata, tensors, sizes");
    auto opt = std::make_shared<InspectOptions>();
    cmd->add_option("model", opt->path, "GGUF model file")->required();
    cmd->add_flag("--json", opt->json, "Print one JSON object (for scripts)");
    cmd->add_flag("--tensors", opt->tensors, "Add the table of every tensor");
    cmd->add_flag("--metadata", opt->metadata, "Add every metadata key (human output)");
    cmd->add_flag("--full-metadata", opt->full_metadata,
                  "With --json: metadata arrays in full, not just their length and type");
    add_plan_flags(*cmd, opt->plan);
    cmd->add_option("--profile", opt->plan.profile,
                    "Plan for the machine this saved profile describes (strata profile --json > "
                    "FILE there) instead of this one");
    cmd->footer(
        "Exit status 0 whenever the file can be read, also when strata cannot run it (the\n"
        "reasons are printed as warnings, or listed in \"problems\" with --json); 1 when the file\n"
        "cannot be read, a flag is wrong, or the RAM budget is too small for any plan.");
    cmd->callback([opt] { run_inspect(*opt); });
}

}  // namespace strata::cli
