// strata_bench_engine: end-to-end speed of the CPU engine on whole models.
//
// For each weight type it writes a synthetic model of the chosen preset (or takes --model),
// loads it resident, and measures prompt processing (one batch of --prompt-tokens random ids)
// and generation (--gen-tokens greedy steps), --reps times, reporting the median with min and
// max. Each speed comes with its limit: weight bytes read per generated token, the effective
// GB/s that makes, and its fraction of the memory-read ceiling measured in the same run. The
// time per operator (attention projections, attention, FFN, experts, LM head, ...) names the
// slowest one.
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

#include "gguf/reader.h"
#include "io/aligned_buffer.h"
#include "model/hparams.h"
#include "profile/memory_bandwidth.h"
#include "session/loaded_model.h"
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
    std::array<double, size_t(engine::Op::Count)> gen_ops{}, prompt_ops{};
};

struct Summary {
    std::string label;
    uint64_t file_bytes = 0;
    std::vector<double> prompt_tps, gen_tps;
    double bytes_per_token = 0;
    std::array<double, size_t(engine::Op::Count)> gen_ops{}, prompt_ops{};
};

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
}

std::array<double, size_t(engine::Op::Count)> seconds_of(const engine::OpTable& ops) {
    std::array<double, size_t(engine::Op::Count)> s{};
    for (size_t i = 0; i < ops.size(); ++i) s[i] = ops[i].seconds;
    return s;
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
    s.prompt_ops = seconds_of(e.stats().ops);
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
    s.gen_ops = seconds_of(e.stats().ops);
    return s;
}

std::string slowest(const std::array<double, size_t(engine::Op::Count)>& ops) {
    double total = 0;
    for (double v : ops) total += v;
    const size_t i = size_t(std::max_element(ops.begin(), ops.end()) - ops.begin());
    char buf[128];
    std::snprintf(buf, sizeof buf, "%s %.0f%%", engine::op_name(engine::Op(i)),
                  total > 0 ? 100 * ops[i] / total : 0.0);
    return buf;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{
        "End-to-end CPU engine speed: prompt and generation tok/s against the "
        "memory-read ceiling"};
    std::string model, preset = "1b", dir, json_out;
    std::vector<std::string> types{"Q4_K_M", "Q8_0"};
    int prompt_tokens = 512, gen_tokens = 64, reps = 3, threads = 0;
    bool keep = false;
    int stream_lookahead = -1;
    app.add_option("--model", model, "Benchmark this GGUF instead of synthetic models");
    app.add_option("--preset", preset, "Synthetic model shape")->capture_default_str();
    app.add_option("--types", types, "Weight types of the synthetic models")->delimiter(',');
    app.add_option("--prompt-tokens", prompt_tokens)->capture_default_str();
    app.add_option("--gen-tokens", gen_tokens)->capture_default_str();
    app.add_option("--reps", reps)->capture_default_str();
    app.add_option("--threads", threads, "Compute threads (default: physical cores)");
    app.add_option("--dir", dir, "Where synthetic models are written (default: a temp dir)");
    app.add_flag("--keep", keep, "Keep the synthetic models");
    app.add_option("--stream-ffn", stream_lookahead,
                   "Stream every layer's FFN from disk with this prefetch lookahead (ffn-stream)");
    app.add_option("--json", json_out, "Also write the results as JSON to this file");
    CLI11_PARSE(app, argc, argv);

    namespace fs = std::filesystem;
    if (dir.empty()) dir = (fs::temp_directory_path() / "strata-bench-engine").string();
    fs::create_directories(dir);

    ThreadPool ceiling_pool(threads);
    auto ceiling_buf = AlignedBuffer::allocate(1ull << 30);
    if (!ceiling_buf) {
        std::fprintf(stderr, "strata_bench_engine: %s\n", ceiling_buf.error().message.c_str());
        return 1;
    }
    std::memset(ceiling_buf->data(), 1, ceiling_buf->size());
    const double ceiling =
        measure_read_ceiling(ceiling_buf->data(), ceiling_buf->size(), ceiling_pool) / 1e9;
    *ceiling_buf = AlignedBuffer();
    std::printf(
        "threads %d, memory-read ceiling %.1f GB/s, prompt %d tokens, generation %d "
        "tokens, %d reps\n",
        ceiling_pool.size(), ceiling, prompt_tokens, gen_tokens, reps);

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
        opt.engine.threads = threads;
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
        std::mt19937 rng(7);
        std::vector<int32_t> prompt(static_cast<size_t>(prompt_tokens));
        for (auto& t : prompt) t = int32_t(rng() % (*m)->engine->n_vocab());
        Summary s;
        s.label = label;
        s.file_bytes = (*m)->info.file.file_size;
        for (int r = 0; r < reps; ++r) {
            const Sample x = run_once(*(*m)->engine, prompt, gen_tokens);
            s.prompt_tps.push_back(x.prompt_tps);
            s.gen_tps.push_back(x.gen_tps);
            s.bytes_per_token = x.bytes_per_token;
            for (size_t i = 0; i < x.gen_ops.size(); ++i) {
                s.gen_ops[i] += x.gen_ops[i];
                s.prompt_ops[i] += x.prompt_ops[i];
            }
        }
        results.push_back(s);
        if (!keep && model.empty()) fs::remove(path);
    }

    TextTable table({{"model"},
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
    out["threads"] = ceiling_pool.size();
    out["read_ceiling_gbps"] = ceiling;
    for (const Summary& s : results) {
        const double gen = median(s.gen_tps);
        const double gbps = gen * s.bytes_per_token / 1e9;
        char range[64];
        std::snprintf(range, sizeof range, "%.2f-%.2f",
                      *std::min_element(s.gen_tps.begin(), s.gen_tps.end()),
                      *std::max_element(s.gen_tps.begin(), s.gen_tps.end()));
        table.add_row({s.label, format_bytes(s.file_bytes, true),
                       std::to_string(int(median(s.prompt_tps) + 0.5)), format_fixed(gen, 2), range,
                       format_bytes(uint64_t(s.bytes_per_token), true), format_fixed(gbps, 1),
                       format_fixed(100 * gbps / ceiling, 0) + "%", slowest(s.gen_ops),
                       slowest(s.prompt_ops)});
        nlohmann::ordered_json ops;
        for (size_t i = 0; i < s.gen_ops.size(); ++i) {
            ops[engine::op_name(engine::Op(i))] = {{"gen_seconds", s.gen_ops[i]},
                                                   {"prompt_seconds", s.prompt_ops[i]}};
        }
        out["results"].push_back({{"model", s.label},
                                  {"file_bytes", s.file_bytes},
                                  {"prompt_tps", s.prompt_tps},
                                  {"gen_tps", s.gen_tps},
                                  {"bytes_per_token", s.bytes_per_token},
                                  {"gen_gbps", gbps},
                                  {"fraction_of_ceiling", gbps / ceiling},
                                  {"ops", ops}});
    }
    std::printf("%s", table.render().c_str());
    if (!json_out.empty()) std::ofstream(json_out) << out.dump(2) << "\n";
    return 0;
}
