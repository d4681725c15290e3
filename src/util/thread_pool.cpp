#include "util/thread_pool.h"

#include <sched.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <string>
#include <utility>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define STRATA_CPU_RELAX() _mm_pause()
#else
#define STRATA_CPU_RELAX() ((void)0)
#endif

namespace strata {

namespace {

// Spin this many rounds before sleeping: long enough to catch back-to-back jobs of a decode
// step, short enough not to burn a core while idle between requests.
constexpr int kSpinRounds = 1 << 14;

}  // namespace

ThreadPool::ThreadPool(int n_threads)
    : n_threads_(n_threads > 0 ? n_threads : physical_core_count()) {
    workers_.reserve(static_cast<size_t>(n_threads_ - 1));
    for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
    stop_.store(true, std::memory_order_release);
    generation_.fetch_add(1, std::memory_order_acq_rel);
    generation_.notify_all();
    for (auto& t : workers_) t.join();
}

void ThreadPool::worker_loop(int index) {
    uint64_t seen = 0;
    for (;;) {
        uint64_t gen = generation_.load(std::memory_order_acquire);
        for (int spin = 0; gen == seen && spin < kSpinRounds; ++spin) {
            STRATA_CPU_RELAX();
            gen = generation_.load(std::memory_order_acquire);
        }
        if (gen == seen) {
            generation_.wait(seen, std::memory_order_acquire);
            continue;
        }
        seen = gen;
        if (stop_.load(std::memory_order_acquire)) return;
        (*job_)(index, n_threads_);
        if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) pending_.notify_one();
    }
}

void ThreadPool::finish_caller_task() {
    if (!caller_task_) return;
    const FunctionRef<void()> task = *caller_task_;
    caller_task_.reset();
    task();
}

void ThreadPool::run(FunctionRef<void(int, int)> fn) {
    if (n_threads_ == 1) {
        finish_caller_task();
        fn(0, 1);
        return;
    }
    job_ = &fn;
    pending_.store(n_threads_ - 1, std::memory_order_release);
    generation_.fetch_add(1, std::memory_order_acq_rel);
    generation_.notify_all();
    finish_caller_task();
    fn(0, n_threads_);
    int left = pending_.load(std::memory_order_acquire);
    for (int spin = 0; left != 0 && spin < kSpinRounds; ++spin) {
        STRATA_CPU_RELAX();
        left = pending_.load(std::memory_order_acquire);
    }
    while (left != 0) {
        pending_.wait(left, std::memory_order_acquire);
        left = pending_.load(std::memory_order_acquire);
    }
    job_ = nullptr;
}

void ThreadPool::parallel_for(int64_t n, int64_t grain,
                              FunctionRef<void(int64_t, int64_t, int)> fn) {
    if (n <= 0) return;
    grain = std::max<int64_t>(grain, 1);
    if (n_threads_ == 1 || n <= grain) {
        fn(0, n, 0);
        return;
    }
    std::atomic<int64_t> next{0};
    run([&](int thread, int) {
        for (;;) {
            const int64_t begin = next.fetch_add(grain, std::memory_order_relaxed);
            if (begin >= n) break;
            fn(begin, std::min(n, begin + grain), thread);
        }
    });
}

int physical_core_count() {
    cpu_set_t set;
    CPU_ZERO(&set);
    int allowed = 0;
    if (sched_getaffinity(0, sizeof set, &set) == 0) allowed = CPU_COUNT(&set);
    // Count distinct (package, core) pairs among the CPUs we may run on.
    std::set<std::pair<int, int>> cores;
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
        if (allowed > 0 && !CPU_ISSET(cpu, &set)) continue;
        const std::string base = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
        std::ifstream core_f(base + "core_id"), pkg_f(base + "physical_package_id");
        int core = -1, pkg = -1;
        if (!(core_f >> core) || !(pkg_f >> pkg)) continue;
        cores.emplace(pkg, core);
    }
    int n = static_cast<int>(cores.size());
    if (n == 0) n = allowed > 0 ? allowed : static_cast<int>(std::thread::hardware_concurrency());
    if (allowed > 0) n = std::min(n, allowed);
    return std::max(n, 1);
}

}  // namespace strata
