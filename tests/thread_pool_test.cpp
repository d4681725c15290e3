#include <gtest/gtest.h>

#include <atomic>
#include <numeric>
#include <thread>
#include <vector>

#include "util/thread_pool.h"

namespace strata {
namespace {

TEST(ThreadPool, RunCallsEveryThreadOnce) {
    for (int n : {1, 2, 3, 8}) {
        ThreadPool pool(n);
        ASSERT_EQ(pool.size(), n);
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
        for (int rep = 0; rep < 200; ++rep) {
            pool.run([&](int t, int total) {
                EXPECT_EQ(total, n);
                hits[static_cast<size_t>(t)].fetch_add(1);
            });
        }
        for (auto& h : hits) EXPECT_EQ(h.load(), 200);
    }
}

TEST(ThreadPool, ParallelForCoversEveryIndexExactlyOnce) {
    ThreadPool pool(4);
    for (int64_t n : {0, 1, 7, 64, 1000, 4097}) {
        for (int64_t grain : {1, 3, 64, 5000}) {
            std::vector<std::atomic<int>> seen(static_cast<size_t>(n));
            pool.parallel_for(n, grain, [&](int64_t b, int64_t e, int t) {
                EXPECT_GE(t, 0);
                EXPECT_LT(t, 4);
                EXPECT_LE(e - b, grain);
                for (int64_t i = b; i < e; ++i) seen[static_cast<size_t>(i)].fetch_add(1);
            });
            for (auto& s : seen) ASSERT_EQ(s.load(), 1) << "n=" << n << " grain=" << grain;
        }
    }
}

TEST(ThreadPool, ManySmallJobsInARow) {
    // A decode step dispatches hundreds of jobs back to back; results must stay exact.
    ThreadPool pool(3);
    std::vector<int64_t> data(10000);
    std::iota(data.begin(), data.end(), 0);
    for (int rep = 0; rep < 2000; ++rep) {
        std::atomic<int64_t> sum{0};
        pool.parallel_for(static_cast<int64_t>(data.size()), 512, [&](int64_t b, int64_t e, int) {
            int64_t s = 0;
            for (int64_t i = b; i < e; ++i) s += data[static_cast<size_t>(i)];
            sum.fetch_add(s);
        });
        ASSERT_EQ(sum.load(), 10000 * 9999 / 2);
    }
}

// A caller's task runs once, on the calling thread, at the start of the next job the workers
// share, while they take its chunks (here: all of them, as the task waits until they have); a
// job the caller does alone (one thread, or one chunk) leaves it to finish_caller_task; no task
// runs twice.
TEST(ThreadPool, ACallersTaskRunsOnceOnTheCallerBesideTheNextJob) {
    for (int n : {1, 3}) {
        ThreadPool pool(n);
        const std::thread::id caller = std::this_thread::get_id();
        std::atomic<int64_t> done{0};
        int runs = 0;
        int64_t seen_done = -1;
        const auto task = [&] {
            ++runs;
            EXPECT_EQ(std::this_thread::get_id(), caller);
            while (done.load() < 100) std::this_thread::yield();  // the workers finish meanwhile
            seen_done = done.load();
        };
        pool.caller_first(task);
        pool.parallel_for(100, 1, [&](int64_t b, int64_t e, int) { done.fetch_add(e - b); });
        EXPECT_EQ(runs, n > 1 ? 1 : 0);
        EXPECT_EQ(done.load(), 100);
        pool.finish_caller_task();
        EXPECT_EQ(runs, 1);
        EXPECT_EQ(seen_done, 100);
        pool.run([](int, int) {});
        EXPECT_EQ(runs, 1);
        pool.caller_first(task);
        pool.parallel_for(1, 8, [](int64_t, int64_t, int) {});  // the caller's alone: no run()
        EXPECT_EQ(runs, 1);
        done.store(100);
        pool.finish_caller_task();
        EXPECT_EQ(runs, 2);
    }
}

TEST(ThreadPool, PhysicalCoreCountIsSane) {
    const int n = physical_core_count();
    EXPECT_GE(n, 1);
    EXPECT_LE(n, static_cast<int>(std::thread::hardware_concurrency()));
}

}  // namespace
}  // namespace strata
