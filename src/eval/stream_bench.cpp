#include "eval/stream_bench.h"

#include <algorithm>
#include <chrono>
#include <random>

namespace strata {

namespace {
using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}
}  // namespace

Result<std::vector<StreamBenchRow>> run_stream_bench(LoadedModel& m, const StreamBenchOptions& o) {
    engine::Engine& e = *m.engine;
    const uint32_t n_vocab = e.n_vocab();
    std::vector<StreamBenchRow> rows;
    for (uint32_t n : o.streams) {
        if (n == 0 || n > e.n_seq()) {
            return err("--streams ", std::to_string(n), ": the engine holds ",
                       std::to_string(e.n_seq()), " sequences");
        }
        // A prompt per sequence, different for each.
        std::vector<std::vector<int32_t>> prompts(n);
        std::mt19937 rng(o.seed);
        std::uniform_int_distribution<int32_t> id(0, int32_t(n_vocab) - 1);
        for (auto& p : prompts) {
            for (uint32_t t = 0; t < o.prompt_tokens; ++t) p.push_back(id(rng));
        }
        std::vector<engine::SeqTokens> in;
        for (uint32_t s = 0; s < n; ++s) {
            e.truncate(0, int(s));
            in.push_back({int(s), prompts[s], true});
        }
        std::vector<float> logits;
        StreamBenchRow row;
        row.streams = n;
        auto t0 = Clock::now();
        STRATA_TRY(e.eval_sequences(in, logits));
        row.prompt_seconds = since(t0);

        std::vector<int32_t> next(n);
        auto pick = [&] {
            for (uint32_t s = 0; s < n; ++s) {
                const float* l = logits.data() + size_t(s) * n_vocab;
                next[s] = int32_t(std::max_element(l, l + n_vocab) - l);
            }
        };
        pick();
        const uint64_t weight0 = e.stats().weight_bytes;
        const uint64_t disk0 = m.store->stats().bytes_from_disk;
        t0 = Clock::now();
        for (uint32_t step = 0; step < o.gen_tokens; ++step) {
            for (uint32_t s = 0; s < n; ++s) in[s] = {int(s), {&next[s], 1}, true};
            STRATA_TRY(e.eval_sequences(in, logits));
            pick();
            if (o.progress && (step + 1) % 16 == 0) {
                o.progress(std::to_string(n) + " streams: generating " + std::to_string(step + 1) +
                           "/" + std::to_string(o.gen_tokens));
            }
        }
        row.gen_seconds = since(t0);
        const double tokens = double(n) * o.gen_tokens;
        row.aggregate_tps = row.gen_seconds > 0 ? tokens / row.gen_seconds : 0;
        row.stream_tps = row.gen_seconds > 0 ? o.gen_tokens / row.gen_seconds : 0;
        row.weight_bytes_per_token = double(e.stats().weight_bytes - weight0) / tokens;
        row.disk_bytes_per_token = double(m.store->stats().bytes_from_disk - disk0) / tokens;
        rows.push_back(row);
    }
    return rows;
}

}  // namespace strata
