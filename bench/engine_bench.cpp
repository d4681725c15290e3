// strata_bench_engine: end-to-end speed of the CPU engine on whole models, at one or several
// thread counts.
//
// For each weight type it writes a synthetic model of the chosen preset (or takes --model),
// loads it resident once, and for each count of --threads (1,2,0: one, two and every physical
// core) measures prompt processing (one batch of --prompt-tokens random ids) and generation
// (--gen-tokens greedy steps), --reps times, reporting the median with min and max. Each speed
// comes with its limit: weight bytes read per generated token, the effective GB/s that makes,
// and its fraction of the memory-read ceiling measured with the same threads. Then, per model
// and thread count, every operator (attention projections, attention, FFN, experts, LM head,
// ...): its share of the prompt's time and its GFLOP/s there, and its share of generation and
// the GB/s it reads at against the ceiling.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "gguf/reader.h"
#include "io/aligned_buffer.h"
#include "model/hparams.h"
#include "profile/memory_bandwidth.h"
#include "runtime/backend_factory.h"
#include "runtime/loaded_model.h"
#include "synth/generator.h"
#include "synth/synth_config.h"
#include "synth/weight_format.h"
#include "util/table.h"
#include "util/thread_pool.h"
#include "util/units.h"

namespace {

using namespace strata;
using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

struct Sample {
    double prompt_tps = 0, gen_tps = 0, bytes_per_token = 0;
    engine::OpTable gen_ops{}, prompt_ops{};
};

struct Summary {
    std::string label;
    int threads = 0;
    double ceiling = 0;  // GB/s read with these threads
    uint64_t file_bytes = 0;
    std::vector<double> prompt_tps, gen_tps;
    double bytes_per_token = 0;
    int reps = 0;
    engine::OpTable gen_ops{}, prompt_ops{};  // summed over the reps
};

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
}

Sample run_once(engine::Engine& e, const std::vector<int32_t>& prompt, int gen_tokens) {
    Sample s;
    e.truncate(0);
    e.reset_stats();
    std::vector<float> logits;
    auto t0 = Clock::now();
    if (auto r = e.eval(prompt, engine::LogitsWanted::Last, logits); !r) {
        std::fprintf(stderr, "strata_bench_engine: %s\n", r.error().message.c_str());
        std::exit(1);
    }
    s.prompt_tps = double(prompt.size()) / since(t0);
    s.prompt_ops = e.stats().ops;
    e.reset_stats();
    t0 = Clock::now();
    for (int i = 0; i < gen_tokens; ++i) {
        const int32_t next =
            int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
        if (auto r = e.eval({&next, 1}, engine::LogitsWanted::Last, logits); !r) {
            std::fprintf(stderr, "strata_bench_engine: %s\n", r.error().message.c_str());
            std::exit(1);
        }
    }
    s.gen_tps = gen_tokens / since(t0);
    s.bytes_per_token = double(e.stats().weight_bytes) / gen_tokens;
    s.gen_ops = e.stats().ops;
    return s;
}

double total_seconds(const engine::OpTable& ops) {
    double t = 0;
    for (const engine::OpFigures& o : ops) t += o.seconds;
    return t;
}

std::string slowest(const engine::OpTable& ops) {
    size_t i = 0;
    for (size_t j = 1; j < ops.size(); ++j) {
        if (ops[j].seconds > ops[i].seconds) i = j;
    }
    const double total = total_seconds(ops);
    char buf[128];
    std::snprintf(buf, sizeof buf, "%s %.0f%%", engine::op_name(engine::Op(i)),
                  total > 0 ? 100 * ops[i].seconds / total : 0.0);
    return buf;
}

// Every operator of one model at one thread count: prompt share and GFLOP/s, generation share,
// GB/s and fraction of the ceiling.
std::string operator_table(const Summary& s) {
    TextTable t({{s.label + ", " + std::to_string(s.threads) + " threads"},
                 {"prompt share", Align::Right},
                 {"GFLOP/s", Align::Right},
                 {"gen share", Align::Right},
                 {"GB/s", Align::Right},
                 {"of ceiling", Align::Right}});
    const double prompt_total = total_seconds(s.prompt_ops), gen_total = total_seconds(s.gen_ops);
    const auto pct = [](double part, double whole) {
        return whole > 0 ? format_fixed(100 * part / whole, 1) + "%" : std::string("-");
    };
    for (size_t i = 0; i < s.gen_ops.size(); ++i) {
        const engine::OpFigures &p = s.prompt_ops[i], &g = s.gen_ops[i];
        if (p.seconds == 0 && g.seconds == 0) continue;
        const double gflops = p.seconds > 0 && p.flops > 0 ? p.flops / p.seconds / 1e9 : 0;
        const double gbps = g.seconds > 0 && g.bytes > 0 ? g.bytes / g.seconds / 1e9 : 0;
        t.add_row({engine::op_name(engine::Op(i)), pct(p.seconds, prompt_total),
                   gflops > 0 ? format_fixed(gflops, 1) : "-", pct(g.seconds, gen_total),
                   gbps > 0 ? format_fixed(gbps, 1) : "-",
                   gbps > 0 ? format_fixed(100 * gbps / s.ceiling, 0) + "%" : "-"});
    }
    return t.render();
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{
        "End-to-end CPU engine speed: prompt and generation tok/s against the "
        "memory-read ceiling, per operator, at one or several thread counts"};
    std::string model, preset = "1b", dir, json_out;
    std::vector<std::string> types{"Q4_K_M", "Q8_0"};
    std::vector<int> thread_counts{0};
    int prompt_tokens = 512, gen_tokens = 64, reps = 3;
    bool keep = false;
    int stream_lookahead = -1;
    app.add_option("--model", model, "Benchmark this GGUF instead of synthetic models");
    app.add_option("--preset", preset, "Synthetic model shape")->capture_default_str();
    app.add_option("--types", types, "Weight types of the synthetic models")->delimiter(',');
    app.add_option("--prompt-tokens", prompt_tokens)->capture_default_str();
    app.add_option("--gen-tokens", gen_tokens)->capture_default_str();
    app.add_option("--reps", reps)->capture_default_str();
    app.add_option("--threads", thread_counts,
                   "Compute threads, one count or several (1,2,0); 0: physical cores (default)")
        ->delimiter(',');
    app.add_option("--dir", dir, "Where synthetic models are written (default: a temp dir)");
    app.add_flag("--keep", keep, "Keep the synthetic models");
    app.add_option("--stream-ffn", stream_lookahead,
                   "Stream every layer's FFN from disk with this prefetch lookahead (ffn-stream)");
    app.add_option("--json", json_out, "Also write the results as JSON to this file");
    CLI11_PARSE(app, argc, argv);
    for (int& t : thread_counts) {
        if (t < 0) {
            std::fprintf(stderr, "strata_bench_engine: --threads %d: must not be negative\n", t);
            return 1;
        }
        if (t == 0) t = physical_core_count();
    }

    namespace fs = std::filesystem;
    if (dir.empty()) dir = (fs::temp_directory_path() / "strata-bench-engine").string();
    fs::create_directories(dir);

    // The memory-read ceiling with each thread count.
    std::vector<double> ceilings;
    {
        auto buf = AlignedBuffer::allocate(1ull << 30);
        if (!buf) {
            std::fprintf(stderr, "strata_bench_engine: %s\n", buf.error().message.c_str());
            return 1;
        }
        std::memset(buf->data(), 1, buf->size());
        for (int t : thread_counts) {
            ThreadPool pool(t);
            ceilings.push_back(measure_read_ceiling(buf->data(), buf->size(), pool) / 1e9);
            std::printf("threads %d: memory-read ceiling %.1f GB/s\n", t, ceilings.back());
        }
    }
    std::printf("prompt %d tokens, generation %d tokens, %d reps\n", prompt_tokens, gen_tokens,
                reps);
    std::vector<std::pair<std::string, std::string>> models;  // label, path
    if (!model.empty()) {
        models.push_back({fs::path(model).filename().string(), model});
    } else {
        for (const std::string& t : types) {
            auto fmt = weight_format_from_name(t);
            auto hp = synth_preset(preset);
            if (!fmt || !hp) {
                std::fprintf(stderr, "strata_bench_engine: unknown type %s or preset %s\n",
                             t.c_str(), preset.c_str());
                return 1;
            }
            const std::string path = dir + "/" + preset + "-" + t + ".gguf";
            if (!fs::exists(path)) {
                std::printf("writing %s ...\n", path.c_str());
                std::fflush(stdout);
                SynthConfig cfg;
                cfg.hparams = *hp;
                cfg.weights = *fmt;
                if (auto r = write_synthetic_model(cfg, path, false); !r) {
                    std::fprintf(stderr, "strata_bench_engine: %s\n", r.error().message.c_str());
                    return 1;
                }
            }
            models.push_back({preset + " " + t, path});
        }
    }

    std::vector<Summary> results;
    for (const auto& [label, path] : models) {
        ModelLoadOptions opt;
        opt.engine.threads = thread_counts.front();
        opt.engine.n_ctx = uint32_t(prompt_tokens + gen_tokens + 1);
        auto file = read_gguf(path);
        auto info = file ? load_model_info(std::move(*file)) : Result<ModelInfo>(file.error());
        if (!info) {
            std::fprintf(stderr, "strata_bench_engine: %s\n", info.error().message.c_str());
            return 1;
        }
        if (stream_lookahead >= 0) {
            const std::vector<bool> every_layer(info->hparams ? info->hparams->n_layer : 0, true);
            opt.layout = layer_stream_layout(*info, every_layer, {.lookahead = stream_lookahead});
        }
        auto m = LoadedModel::load(std::move(*info), std::nullopt, opt);
        if (!m) {
            std::fprintf(stderr, "strata_bench_engine: %s\n", m.error().message.c_str());
            return 1;
        }
        LoadedModel& lm = **m;
        std::mt19937 rng(7);
        std::vector<int32_t> prompt(static_cast<size_t>(prompt_tokens));
        for (auto& t : prompt) t = int32_t(rng() % lm.engine->n_vocab());
        for (size_t ti = 0; ti < thread_counts.size(); ++ti) {
            // One store, an engine per thread count.
            if (ti > 0) {
                engine::EngineOptions eo = opt.engine;
                eo.threads = thread_counts[ti];
                auto e = engine::Engine::create(*lm.info.hparams, *lm.store, eo, make_backend);
                if (!e) {
                    std::fprintf(stderr, "strata_bench_engine: %s\n", e.error().message.c_str());
                    return 1;
                }
                lm.engine = std::move(*e);
            }
            Summary s;
            s.label = label;
            s.threads = thread_counts[ti];
            s.ceiling = ceilings[ti];
            s.file_bytes = lm.info.file.file_size;
            s.reps = reps;
            for (int r = 0; r < reps; ++r) {
                const Sample x = run_once(*lm.engine, prompt, gen_tokens);
                s.prompt_tps.push_back(x.prompt_tps);
                s.gen_tps.push_back(x.gen_tps);
                s.bytes_per_token = x.bytes_per_token;
                for (size_t i = 0; i < x.gen_ops.size(); ++i) {
                    s.gen_ops[i] += x.gen_ops[i];
                    s.prompt_ops[i] += x.prompt_ops[i];
                }
            }
            results.push_back(s);
        }
        if (!keep && model.empty()) fs::remove(path);
    }

    TextTable table({{"model"},
                     {"threads", Align::Right},
                     {"file", Align::Right},
                     {"prompt tok/s", Align::Right},
                     {"gen tok/s", Align::Right},
                     {"min-max", Align::Right},
                     {"bytes/token", Align::Right},
                     {"GB/s", Align::Right},
                     {"of ceiling", Align::Right},
                     {"slowest op (gen)"},
                     {"slowest op (prompt)"}});
    nlohmann::ordered_json out;
    out["prompt_tokens"] = prompt_tokens;
    out["gen_tokens"] = gen_tokens;
    std::string operators;
    for (const Summary& s : results) {
        const double gen = median(s.gen_tps);
        const double gbps = gen * s.bytes_per_token / 1e9;
        char range[64];
        std::snprintf(range, sizeof range, "%.2f-%.2f",
                      *std::min_element(s.gen_tps.begin(), s.gen_tps.end()),
                      *std::max_element(s.gen_tps.begin(), s.gen_tps.end()));
        table.add_row({s.label, std::to_string(s.threads), format_bytes(s.file_bytes, true),
                       std::to_string(int(median(s.prompt_tps) + 0.5)), format_fixed(gen, 2), range,
                       format_bytes(uint64_t(s.bytes_per_token), true), format_fixed(gbps, 1),
                       format_fixed(100 * gbps / s.ceiling, 0) + "%", slowest(s.gen_ops),
                       slowest(s.prompt_ops)});
        operators += "\n" + operator_table(s);
        nlohmann::ordered_json ops;
        for (size_t i = 0; i < s.gen_ops.size(); ++i) {
            const engine::OpFigures &p = s.prompt_ops[i], &g = s.gen_ops[i];
            ops[engine::op_name(engine::Op(i))] = {{"gen_seconds", g.seconds / s.reps},
                                                   {"gen_bytes", g.bytes / s.reps},
                                                   {"prompt_seconds", p.seconds / s.reps},
                                                   {"prompt_flops", p.flops / s.reps}};
        }
        out["results"].push_back({{"model", s.label},
                                  {"threads", s.threads},
                                  {"read_ceiling_gbps", s.ceiling},
                                  {"file_bytes", s.file_bytes},
                                  {"prompt_tps", s.prompt_tps},
                                  {"gen_tps", s.gen_tps},
                                  {"bytes_per_token", s.bytes_per_token},
                                  {"gen_gbps", gbps},
                                  {"fraction_of_ceiling", gbps / s.ceiling},
                                  {"ops", ops}});
    }
    std::printf("%s%s", table.render().c_str(), operators.c_str());
    if (!json_out.empty()) std::ofstream(json_out) << out.dump(2) << "\n";
    return 0;
}
