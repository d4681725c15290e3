// `strata synth`: writes a synthetic GGUF model (seeded random weights, a real or built-in
// tokenizer) of a named shape, for tests, demos and streaming benchmarks.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "gguf/tensor_type.h"
#include "model/tensor_layout.h"
#include "synth/generator.h"
#include "synth/weight_format.h"
#include "util/progress.h"
#include "util/units.h"

namespace strata::cli {

namespace {

// Models at least this big show progress even when stderr is not a terminal.
constexpr uint64_t kBigOutputBytes = 1ull << 30;

struct SynthOptions {
    std::string output, arch, preset, type = "F16", vocab_from, chat_template;
    uint64_t seed = 1;
    unsigned threads = 0;
    bool force = false, pure = false;
    uint32_t layers = 0, embd = 0, ff = 0, heads = 0, kv_heads = 0, head_dim = 0;
    uint32_t experts = 0, experts_used = 0, ff_exp = 0, ff_shexp = 0, ctx = 0, nextn = 0;
    // Which shape flags were given (a given 0 is an override too, e.g. --experts 0).
    CLI::Option *o_layers = nullptr, *o_embd = nullptr, *o_ff = nullptr, *o_heads = nullptr,
                *o_kv_heads = nullptr, *o_head_dim = nullptr, *o_experts = nullptr,
                *o_experts_used = nullptr, *o_ff_exp = nullptr, *o_ff_shexp = nullptr,
                *o_ctx = nullptr, *o_nextn = nullptr;
};

[[noreturn]] void fail(const std::string& message) {
    std::fprintf(stderr, "strata synth: %s\n", message.c_str());
    throw CLI::RuntimeError(1);
}

std::string preset_help() {
    std::string s = "Presets:\n";
    for (const auto& p : synth_presets()) {
        // Names padded to one column; descriptions whole, however long.
        std::string name(p.name);
        name.resize(std::max<size_t>(name.size(), 18), ' ');
        s += "  " + name + " " + std::string(p.description) + "\n";
    }
    return s;
}

// The shape: the preset (or the tiny preset of --arch), then --arch, then each given override.
ModelHparams resolve_shape(const SynthOptions& o) {
    std::string preset = o.preset;
    if (preset.empty()) {
        preset = "tiny";
        if (!o.arch.empty() && o.arch != "llama") preset = "tiny-" + o.arch;
    }
    std::optional<ModelHparams> hp = synth_preset(preset);
    if (!hp && !o.preset.empty()) fail("--preset " + preset + ": unknown preset\n" + preset_help());
    if (!hp) {
        std::string known;
        for (const auto& t : known_arch_traits()) {
            known += (known.empty() ? "" : ", ") + std::string(t.name);
        }
        fail("--arch " + o.arch + ": unknown architecture (known: " + known + ")");
    }
    if (!o.arch.empty()) hp->arch = o.arch;
    auto apply = [](CLI::Option* opt, uint32_t value, uint32_t& field) {
        if (opt->count() > 0) field = value;
    };
    if (o.o_layers->count() > 0) hp = cut_to_layers(*hp, o.layers);
    apply(o.o_embd, o.embd, hp->n_embd);
    apply(o.o_ff, o.ff, hp->n_ff);
    apply(o.o_heads, o.heads, hp->n_head);
    apply(o.o_kv_heads, o.kv_heads, hp->n_head_kv);
    apply(o.o_head_dim, o.head_dim, hp->head_dim_k);
    apply(o.o_head_dim, o.head_dim, hp->head_dim_v);
    apply(o.o_experts, o.experts, hp->n_expert);
    apply(o.o_experts_used, o.experts_used, hp->n_expert_used);
    apply(o.o_ff_exp, o.ff_exp, hp->n_ff_exp);
    apply(o.o_ff_shexp, o.ff_shexp, hp->n_ff_shexp);
    apply(o.o_ctx, o.ctx, hp->n_ctx_train);
    apply(o.o_nextn, o.nextn, hp->n_layer_nextn);
    if (o.o_heads->count() > 0 && o.o_kv_heads->count() == 0 && hp->n_head_kv > hp->n_head) {
        hp->n_head_kv = hp->n_head;  // fewer heads than the preset's kv heads: no GQA
    }
    return *hp;
}

void run_synth(const SynthOptions& o) {
    SynthConfig config;
    config.hparams = resolve_shape(o);
    const std::optional<WeightFormat> weights = weight_format_from_name(o.type, o.pure);
    if (!weights) {
        std::string known;
        for (const std::string& name : weight_format_names()) {
            known += (known.empty() ? "" : ", ") + name;
        }
        fail("--type " + o.type + ": " +
             (tensor_type_from_name(o.type) ? "synth cannot write this type"
                                            : "unknown tensor type or mix") +
             " (synth writes " + known + ")");
    }
    config.weights = *weights;
    config.seed = o.seed;
    config.vocab_from = o.vocab_from;
    if (!o.chat_template.empty()) {
        std::ifstream in(o.chat_template, std::ios::binary);
        if (!in) fail("--chat-template: cannot read " + o.chat_template);
        config.chat_template.assign(std::istreambuf_iterator<char>(in), {});
    }
    config.threads = o.threads;

    // Validate and size the file before drawing any progress.
    auto plan = plan_synthetic_model(config);
    if (!plan) fail(plan.error().message);

    const bool interactive = ByteProgress::is_terminal(stderr);
    std::unique_ptr<ByteProgress> bar;
    auto on_progress = [&](uint64_t done, uint64_t total) {
        if (!bar) {
            bar = std::make_unique<ByteProgress>(stderr, "writing " + o.output, total,
                                                 interactive || total >= kBigOutputBytes,
                                                 interactive);
        }
        bar->update(done);
    };
    auto result = write_synthetic_model(config, *plan, o.output, o.force, on_progress);
    if (bar) bar->finish();
    if (!result) fail(result.error().message);

    const double gbps =
        result->seconds > 0 ? static_cast<double>(result->file_bytes) / result->seconds / 1e9 : 0.0;
    std::printf("wrote %s: %s, %zu tensors, %s parameters, %s %s, vocab %s, %.2f s, %.2f GB/s\n",
                result->path.c_str(), format_bytes(result->file_bytes, true).c_str(),
                result->n_tensors, format_count(result->n_parameters).c_str(),
                config.hparams.arch.c_str(), weight_format_name(config.weights).c_str(),
                plan->vocab_source.c_str(), result->seconds, gbps);
}

}  // namespace

void add_synth(CLI::App& app) {
    auto* cmd =
        app.add_subcommand("synth", "Write a synthetic GGUF model with seeded random weights");
    auto o = std::make_shared<SynthOptions>();
    cmd->footer(preset_help());
    cmd->add_option("-o,--output", o->output, "GGUF file to write")->required();
    cmd->add_option("--arch", o->arch, "Architecture: " + supported_architectures());
    cmd->add_option("--preset", o->preset, "Named shape (default: tiny, or tiny-<arch>)");
    o->o_layers = cmd->add_option("--layers", o->layers, "Number of blocks");
    o->o_embd = cmd->add_option("--embd", o->embd, "Embedding width (n_embd)");
    o->o_ff = cmd->add_option("--ff", o->ff, "Dense FFN width (feed_forward_length)");
    o->o_heads = cmd->add_option("--heads", o->heads, "Query heads");
    o->o_kv_heads = cmd->add_option("--kv-heads", o->kv_heads, "Key/value heads (GQA)");
    o->o_head_dim = cmd->add_option("--head-dim", o->head_dim, "Head size (default embd/heads)");
    o->o_experts = cmd->add_option("--experts", o->experts, "Experts per layer (0: dense)");
    o->o_experts_used = cmd->add_option("--experts-used", o->experts_used, "Experts per token");
    o->o_ff_exp = cmd->add_option("--ff-exp", o->ff_exp, "Expert FFN width (qwen MoE)");
    o->o_ff_shexp = cmd->add_option("--ff-shexp", o->ff_shexp, "Shared expert width (qwen2moe)");
    o->o_ctx = cmd->add_option("--ctx", o->ctx, "Training context length");
    o->o_nextn = cmd->add_option(
        "--nextn", o->nextn,
        "Multi-token-prediction blocks after the trunk, as the reference converter writes them "
        "(qwen35, qwen35moe, qwen3next, glm4moe; --layers counts the trunk only)");
    cmd->add_option("--type", o->type,
                    "Weight type (F16 default, BF16, F32, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q3_K, "
                    "Q4_K, Q5_K, IQ4_NL, MXFP4) or llama-quantize mix (Q2_K, Q3_K_S, Q3_K_M, "
                    "Q3_K_L, Q4_K_S, Q4_K_M, Q5_K_S, Q5_K_M, Q6_K, IQ4_XS, MXFP4_MOE)");
    cmd->add_flag("--pure", o->pure,
                  "With a mix: every weight matrix gets its base type (llama-quantize --pure)");
    cmd->add_option("--seed", o->seed, "Random seed (same seed, same bytes)");
    cmd->add_option("--chat-template", o->chat_template,
                    "Jinja chat template file to store instead of the vocabulary's");
    cmd->add_option("--vocab-from", o->vocab_from,
                    "Copy every tokenizer.* key from this GGUF (default: built-in vocabulary)");
    cmd->add_option("--threads", o->threads, "Worker threads (default: all hardware threads)")
        ->check(CLI::Range(0u, 1024u));
    cmd->add_flag("--force", o->force, "Replace the output file if it exists");
    cmd->callback([o] { run_synth(*o); });
}

}  // namespace strata::cli
