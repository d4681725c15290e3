// strata_bench_expert_cache: which eviction policy the expert cache should use, measured on
// routing traces rather than guessed.
//
// Traces: the routing a MoE model's own router produces (--model: a prompt, then greedy decode
// steps, recorded by the expert cache), and a trace with temporal locality made by
// engine::make_local_trace (--stay, --skew), which is how trained MoE routers behave and a
// synthetic model's random router does not. For cache sizes from 5% to 50% of all experts, it
// prints the hit rate of LRU and LFU-with-aging on each trace (the store's exact replacement
// behaviour, no prefetch). --write-trace saves the locality trace for `strata bench
// --routing-trace`.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/routing_trace.h"
#include "gguf/reader.h"
#include "runtime/backend_factory.h"
#include "store/expert_cache_policy.h"
#include "store/model_store.h"
#include "util/table.h"
#include "util/units.h"

namespace {

using namespace strata;

[[noreturn]] void die(const std::string& m) {
    std::fprintf(stderr, "strata_bench_expert_cache: %s\n", m.c_str());
    std::exit(1);
}

// Batches of keys (layer * n_expert + expert), one per layer per token, from a trace.
std::vector<std::vector<uint32_t>> batches_of(const engine::RoutingTrace& t) {
    std::vector<std::vector<uint32_t>> out;
    for (size_t tok = 0; tok < t.tokens(); ++tok) {
        for (int l = 0; l < t.n_layer; ++l) {
            std::vector<uint32_t> b;
            for (int32_t e : t.choices(int64_t(tok), l)) b.push_back(uint32_t(l * t.n_expert + e));
            std::sort(b.begin(), b.end());
            b.erase(std::unique(b.begin(), b.end()), b.end());
            out.push_back(std::move(b));
        }
    }
    return out;
}

// The model's own routing: `tokens` greedy decode steps after a short prompt.
std::vector<std::vector<uint32_t>> model_trace(const std::string& path, int tokens, int threads,
                                               int& n_layer, int& n_expert, int& k) {
    auto file = read_gguf(path);
    if (!file) die(file.error().message);
    auto info = load_model_info(std::move(*file));
    if (!info) die(info.error().message);
    if (!info->hparams->is_moe()) die(path + " is not a mixture-of-experts model");
    n_layer = int(info->hparams->n_layer);
    n_expert = int(info->hparams->n_expert);
    k = int(info->hparams->n_expert_used);
    ExpertCacheConfig cfg;
    cfg.cache_entries = uint64_t(n_layer) * uint64_t(n_expert);
    cfg.prefetch = false;
    cfg.warm = false;
    auto store = ModelStore::open(*info, expert_stream_layout(*info, cfg));
    if (!store) die(store.error().message);
    engine::EngineOptions opt;
    opt.threads = threads;
    opt.n_ctx = uint32_t(tokens + 16);
    auto e = engine::Engine::create(*info->hparams, **store, opt, make_backend);
    if (!e) die(e.error().message);
    std::vector<float> logits;
    const std::vector<int32_t> prompt{1, 2, 3, 4};
    if (auto r = (*e)->eval(prompt, engine::LogitsWanted::Last, logits); !r) die(r.error().message);
    (*store)->expert_cache()->record_trace();
    for (int i = 0; i < tokens; ++i) {
        const int32_t next =
            int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
        if (auto r = (*e)->eval({&next, 1}, engine::LogitsWanted::Last, logits); !r) {
            die(r.error().message);
        }
    }
    return (*store)->expert_cache()->trace();
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"Expert-cache hit rate of LRU and LFU on routing traces"};
    std::string model, write_trace;
    int tokens = 256, threads = 0, layers = 32, experts = 8, k = 2;
    double stay = 0.6, skew = 1.0;
    uint64_t seed = 1;
    app.add_option("--model", model, "Record this MoE model's own routing (greedy decode)");
    app.add_option("--tokens", tokens, "Tokens per trace")->capture_default_str();
    app.add_option("--threads", threads, "Compute threads for --model");
    app.add_option("--layers", layers, "Locality trace: layers (default: the model's)");
    app.add_option("--experts", experts,
                   "Locality trace: experts per layer (default: the model's)");
    app.add_option("--k", k, "Locality trace: experts per token (default: the model's)")
        ->capture_default_str();
    app.add_option("--stay", stay, "Locality trace: chance an expert stays for the next token")
        ->capture_default_str();
    app.add_option("--skew", skew, "Locality trace: Zipf exponent of expert popularity")
        ->capture_default_str();
    app.add_option("--seed", seed, "Locality trace seed")->capture_default_str();
    app.add_option("--write-trace", write_trace,
                   "Save the locality trace (for strata bench --routing-trace)");
    CLI11_PARSE(app, argc, argv);

    std::vector<std::pair<std::string, std::vector<std::vector<uint32_t>>>> traces;
    if (!model.empty()) {
        traces.push_back(
            {"model's router", model_trace(model, tokens, threads, layers, experts, k)});
    }
    const auto local =
        engine::make_local_trace(layers, experts, k, size_t(tokens), stay, skew, seed);
    if (!write_trace.empty()) {
        if (auto r = local.save(write_trace); !r) die(r.error().message);
        std::printf("wrote %s: %d layers x %d experts, top-%d, %d tokens, stay %.2f, skew %.2f\n",
                    write_trace.c_str(), layers, experts, k, tokens, stay, skew);
    }
    traces.push_back(
        {"locality (stay " + format_fixed(stay, 2) + ", skew " + format_fixed(skew, 2) + ")",
         batches_of(local)});

    const size_t keys = size_t(layers) * size_t(experts);
    TextTable t({{"trace"},
                 {"cache", Align::Right},
                 {"of experts", Align::Right},
                 {"LRU hit rate", Align::Right},
                 {"LFU hit rate", Align::Right}});
    for (const auto& [name, batches] : traces) {
        for (double frac : {0.05, 0.10, 0.25, 0.50}) {
            const size_t cap = std::max<size_t>(size_t(k), size_t(double(keys) * frac));
            const double lru = simulate_hit_rate(batches, keys, cap, CachePolicy::Lru);
            const double lfu = simulate_hit_rate(batches, keys, cap, CachePolicy::Lfu);
            t.add_row({name, std::to_string(cap), format_fixed(100 * frac, 0) + "%",
                       format_fixed(100 * lru, 1) + "%", format_fixed(100 * lfu, 1) + "%"});
        }
    }
    std::printf("%s", t.render().c_str());
    return 0;
}
