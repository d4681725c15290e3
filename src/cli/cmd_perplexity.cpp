// strata perplexity MODEL --file TEXT [--ctx N] [--chunks K] [--kl-base FILE | --kl FILE] [--json]
//
// Perplexity over a text, computed in chunks exactly as llama.cpp's perplexity tool does, so the
// two tools' figures can be compared: the text is tokenized once, cut into chunks of --ctx tokens
// (default 512), each evaluated from an empty cache with its first token replaced by BOS, and the
// second half of each chunk scored. Prints the running estimate per chunk and the final value
// with its error. --kl-base FILE saves the full log-probabilities (llama.cpp's
// --kl-divergence-base format); --kl FILE evaluates that file's tokens and compares: mean and
// 99th-percentile KL divergence and top-1 agreement, the way to judge a quantization against its
// original. --json prints {ppl, ppl_err, kl_mean, kl_p99, top1, ...} instead.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/commands.h"
#include "cli/run_options.h"
#include "eval/perplexity.h"

namespace strata::cli {

namespace {

struct PerplexityCommand {
    std::string model, file, kl_base, kl;
    int32_t chunks = -1;
    bool json = false;
    EngineFlags engine;
};

std::string read_text(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) fail("cannot open " + path);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

void print_report(const PerplexityReport& r) {
    std::printf("perplexity: %d chunks of %d tokens, %lld tokens scored, %.1f tokens/s\n",
                r.n_chunk, r.n_ctx, static_cast<long long>(r.scored),
                r.seconds > 0 ? double(r.evaluated) / r.seconds : 0.0);
    for (size_t i = 0; i < r.chunk_ppl.size(); ++i) {
        std::printf("[%zu]%.4f%s", i + 1, r.chunk_ppl[i], i + 1 < r.chunk_ppl.size() ? "," : "\n");
    }
    std::printf("Final estimate: PPL = %.4f +/- %.5f (ln PPL = %.6f)\n", r.ppl, r.ppl_err,
                r.mean_nll);
    if (r.kl) {
        const KlStats& k = *r.kl;
        std::printf(
            "KL divergence over %zu positions: mean %.6f +/- %.6f, median %.6f, "
            "p99 %.6f, max %.6f\n",
            k.count, k.mean, k.mean_uncertainty, k.median, k.p99, k.max);
        std::printf("Same top token: %.3f%% +/- %.3f%%\n", 100 * k.top1, 100 * k.top1_uncertainty);
    }
}

nlohmann::ordered_json report_json(const PerplexityReport& r) {
    nlohmann::ordered_json j;
    j["ppl"] = r.ppl;
    j["ppl_err"] = r.ppl_err;
    j["ln_ppl"] = r.mean_nll;
    if (r.kl) {
        j["kl_mean"] = r.kl->mean;
        j["kl_p99"] = r.kl->p99;
        j["top1"] = r.kl->top1;
        j["kl_median"] = r.kl->median;
        j["kl_max"] = r.kl->max;
    } else {
        j["kl_mean"] = nullptr;
        j["kl_p99"] = nullptr;
        j["top1"] = nullptr;
    }
    j["n_ctx"] = r.n_ctx;
    j["chunks"] = r.n_chunk;
    j["tokens_scored"] = r.scored;
    j["chunk_ppl"] = r.chunk_ppl;
    j["seconds"] = r.seconds;
    return j;
}

void run_perplexity(PerplexityCommand& c, int32_t ctx_flag) {
    if (c.file.empty() && c.kl.empty())
        fail("give the text with --file (or a base file with --kl)");
    if (!c.kl.empty() && !c.kl_base.empty()) fail("--kl and --kl-base do not go together");
    const std::string text = c.file.empty() ? std::string() : read_text(c.file);

    PerplexityOptions po;
    po.n_ctx = ctx_flag;
    po.max_chunks = c.chunks;
    po.save_base = c.kl_base;
    po.compare_base = c.kl;
    // The engine's context is the chunk size; the base file decides it when comparing.
    EngineFlags ef = c.engine;
    if (!c.kl.empty() && ctx_flag == 0) {
        std::ifstream in(c.kl, std::ios::binary);
        char magic[8];
        int32_t n_ctx = 0;
        if (in.read(magic, 8) && in.read(reinterpret_cast<char*>(&n_ctx), 4) && n_ctx > 0) {
            ef.plan.ctx = uint32_t(n_ctx);
        }
    } else {
        ef.plan.ctx = ctx_flag ? uint32_t(ctx_flag) : 512;
    }
    ef.plan.logit_rows = ef.plan.ctx;  // every token of a chunk is scored
    auto opts = model_load_options(ef, !c.json && isatty(STDERR_FILENO));
    if (!opts) fail(opts.error().message);
    auto planned = plan_model(c.model, ef.plan);
    if (!planned) fail(planned.error().message);
    if (!c.json) describe_plan(planned->plan);
    auto m = LoadedModel::load(std::move(planned->model), std::move(planned->plan), *opts);
    if (!m) fail(m.error().message);
    print_load_warnings(**m);
    const bool tty = isatty(STDERR_FILENO) && !c.json;
    auto r = compute_perplexity(
        *(*m)->engine, (*m)->tokenizer, text, po, [&](int32_t done, int32_t total, double ppl) {
            if (tty) {
                std::fprintf(stderr, "\rchunk %d of %d, PPL %.4f", done, total, ppl);
                if (done == total) std::fprintf(stderr, "\n");
            }
        });
    if (!r) fail(r.error().message);
    if (c.json) {
        std::printf("%s\n", report_json(*r).dump().c_str());
    } else {
        print_report(*r);
        if (!c.kl_base.empty()) std::printf("log-probabilities saved to %s\n", c.kl_base.c_str());
    }
}

}  // namespace

void add_perplexity(CLI::App& app) {
    auto c = std::make_shared<PerplexityCommand>();
    CLI::App* cmd = app.add_subcommand("perplexity",
                                       "Perplexity over a text, and KL divergence "
                                       "against a saved base run");
    cmd->add_option("model", c->model, "GGUF model file")->required();
    cmd->add_option("--file,-f", c->file, "Text file to score");
    cmd->add_option("--chunks", c->chunks, "Score at most this many chunks (default: all)");
    cmd->add_option("--kl-base", c->kl_base,
                    "Save the full log-probabilities to FILE (llama.cpp's .kld format)");
    cmd->add_option("--kl", c->kl, "Compare with a saved base FILE: KL divergence and top-1");
    cmd->add_flag("--json", c->json, "Print the figures as one JSON object");
    add_engine_flags(*cmd, c->engine);
    // --ctx is the chunk size here, parsed by add_engine_flags into engine.plan.ctx.
    cmd->callback([c] { run_perplexity(*c, int32_t(c->engine.plan.ctx)); });
}

}  // namespace strata::cli
