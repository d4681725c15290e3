#include "profile/memory_bandwidth.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <vector>

#include "io/aligned_buffer.h"
#include "util/thread_pool.h"

namespace strata {

namespace {

using Clock = std::chrono::steady_clock;

// Sums 64-bit words with eight independent accumulators, so the loop is limited by loads, not by
// a dependency chain; the compiler turns it into vector loads and adds.
uint64_t sum_words(const uint64_t* p, size_t n) {
    uint64_t acc[8] = {};
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        for (int k = 0; k < 8; ++k) acc[k] += p[i + static_cast<size_t>(k)];
    }
    for (; i < n; ++i) acc[0] += p[i];
    uint64_t total = 0;
    for (uint64_t a : acc) total += a;
    return total;
}

// Keeps the sums observable so the reads are not optimised away.
std::atomic<uint64_t> g_sink{0};

double seconds(Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
}

}  // namespace

double measure_read_ceiling(const std::byte* data, size_t bytes, ThreadPool& pool, int passes) {
    constexpr size_t kChunk = 1 << 20;
    const int64_t chunks = static_cast<int64_t>(bytes / kChunk);
    std::vector<uint64_t> sink(static_cast<size_t>(pool.size()) * 8);
    double best = 0;
    for (int pass = 0; pass < std::max(passes, 1); ++pass) {
        const auto t0 = Clock::now();
        pool.parallel_for(chunks, 1, [&](int64_t begin, int64_t end, int thread) {
            uint64_t s[8] = {};
            for (int64_t c = begin; c < end; ++c) {
                const auto* p = reinterpret_cast<const uint64_t*>(data + size_t(c) * kChunk);
                for (size_t i = 0; i < kChunk / 8; i += 8) {
                    __builtin_prefetch(p + i + 512);
                    for (size_t k = 0; k < 8; ++k) s[k] += p[i + k];
                }
            }
            for (size_t k = 0; k < 8; ++k) sink[size_t(thread) * 8 + k] += s[k];
        });
        const double sec = seconds(t0, Clock::now());
        best = std::max(best, static_cast<double>(chunks) * kChunk / sec);
    }
    for (uint64_t v : sink) g_sink.fetch_add(v, std::memory_order_relaxed);
    return best;
}

uint64_t memory_test_buffer_bytes(uint64_t last_level_cache, uint64_t available_ram) {
    constexpr uint64_t kMin = 256ull << 20, kMax = 2ull << 30;
    uint64_t bytes = std::max(kMin, 4 * last_level_cache);
    bytes = std::min({bytes, kMax, std::max<uint64_t>(available_ram / 4, 16ull << 20)});
    return align_down(bytes, 1 << 20);
}

Result<MemoryBandwidth> measure_memory_bandwidth(uint64_t buffer_bytes, int threads, int runs) {
    threads = std::max(threads, 1);
    runs = std::max(runs, 1);
    STRATA_ASSIGN(AlignedBuffer buffer, AlignedBuffer::allocate(buffer_bytes));
    // Huge pages keep TLB misses out of the figure, as they are for large weight buffers.
    ::madvise(buffer.data(), buffer.size(), MADV_HUGEPAGE);
    const size_t words = buffer.size() / sizeof(uint64_t);
    auto* data = reinterpret_cast<uint64_t*>(buffer.data());

    ThreadPool pool(threads);
    // Each thread first touches the part it will read (first-touch places it on its NUMA node).
    const auto part = [&](int t, int n) {
        const size_t begin = words * static_cast<size_t>(t) / static_cast<size_t>(n);
        const size_t end = words * static_cast<size_t>(t + 1) / static_cast<size_t>(n);
        return std::pair{begin, end};
    };
    pool.run([&](int t, int n) {
        const auto [begin, end] = part(t, n);
        for (size_t i = begin; i < end; ++i) data[i] = i * 0x9E3779B97F4A7C15ull;
    });

    MemoryBandwidth out;
    out.threads = threads;
    out.buffer = buffer.size();
    out.multi_thread = measure_read_ceiling(buffer.data(), buffer.size(), pool, runs);
    for (int r = 0; r < runs; ++r) {
        const auto start = Clock::now();
        const uint64_t v = sum_words(data, words);
        const double s = seconds(start, Clock::now());
        g_sink.fetch_add(v, std::memory_order_relaxed);
        out.single_thread = std::max(out.single_thread, static_cast<double>(buffer.size()) / s);
    }
    return out;
}

}  // namespace strata
