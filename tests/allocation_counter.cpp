// The replacement global allocation functions behind allocation_counter.h. They live in a
// translation unit of their own so that no caller sees them inline.
//
// Blocks allocated while counting go into a fixed open-addressing table (the counter must not
// allocate), so that freeing one can be told from freeing a block from before counting began.
#include "allocation_counter.h"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>

namespace {

std::atomic<bool> g_counting{false};
std::atomic<uint64_t> g_allocations{0};

constexpr size_t kSlots = size_t{1} << 16;  // blocks tracked at once; more are counted, not freed
void* const kTombstone = reinterpret_cast<void*>(uintptr_t{1});
struct Slot {
    void* p;
    size_t n;
};
Slot g_slots[kSlots];
std::atomic_flag g_lock = ATOMIC_FLAG_INIT;
uint64_t g_live = 0, g_peak = 0;
std::atomic<size_t> g_tracked{0};  // entries in g_slots: frees skip the lock while there are none

struct Guard {
    Guard() {
        while (g_lock.test_and_set(std::memory_order_acquire)) {
        }
    }
    ~Guard() { g_lock.clear(std::memory_order_release); }
};

size_t slot_of(void* p) {
    return (reinterpret_cast<uintptr_t>(p) >> 4) * 0x9E3779B97F4A7C15ull >> 48;
}

void on_allocate(void* p, size_t n) {
    if (!g_counting.load(std::memory_order_relaxed)) return;
    g_allocations.fetch_add(1, std::memory_order_relaxed);
    Guard g;
    g_live += n;
    if (g_live > g_peak) g_peak = g_live;
    for (size_t i = slot_of(p), probes = 0; probes < kSlots; i = (i + 1) % kSlots, ++probes) {
        if (g_slots[i].p == nullptr || g_slots[i].p == kTombstone) {
            g_slots[i] = {p, n};
            g_tracked.fetch_add(1, std::memory_order_relaxed);
            return;
        }
    }
}

void on_free(void* p) {
    if (p == nullptr || g_tracked.load(std::memory_order_relaxed) == 0) return;
    Guard g;
    for (size_t i = slot_of(p), probes = 0; probes < kSlots; i = (i + 1) % kSlots, ++probes) {
        if (g_slots[i].p == nullptr) return;
        if (g_slots[i].p == p) {
            g_live -= g_slots[i].n;
            g_slots[i].p = kTombstone;
            g_tracked.fetch_sub(1, std::memory_order_relaxed);
            return;
        }
    }
}

void* allocate(std::size_t n, std::size_t align) {
    n = n ? n : 1;
    void* p = align <= alignof(std::max_align_t)
                  ? std::malloc(n)
                  : std::aligned_alloc(align, (n + align - 1) / align * align);
    if (!p) throw std::bad_alloc();
    on_allocate(p, n);
    return p;
}

void release(void* p) noexcept {
    on_free(p);
    std::free(p);
}

}  // namespace

namespace strata::test {

void start_counting_allocations() {
    {
        Guard g;
        for (Slot& s : g_slots) s = {nullptr, 0};
        g_live = g_peak = 0;
        g_tracked = 0;
    }
    g_allocations = 0;
    g_counting = true;
}

uint64_t stop_counting_allocations() {
    g_counting = false;
    return g_allocations.load();
}

uint64_t counted_peak_bytes() {
    Guard g;
    return g_peak;
}

}  // namespace strata::test

void* operator new(std::size_t n) {
    return allocate(n, 0);
}
void* operator new[](std::size_t n) {
    return allocate(n, 0);
}
void* operator new(std::size_t n, std::align_val_t a) {
    return allocate(n, static_cast<std::size_t>(a));
}
void* operator new[](std::size_t n, std::align_val_t a) {
    return allocate(n, static_cast<std::size_t>(a));
}
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
    try {
        return allocate(n, 0);
    } catch (...) {
        return nullptr;
    }
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
    return ::operator new(n, std::nothrow);
}
void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
    try {
        return allocate(n, static_cast<std::size_t>(a));
    } catch (...) {
        return nullptr;
    }
}
void* operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
    return ::operator new(n, a, std::nothrow);
}
void operator delete(void* p) noexcept {
    release(p);
}
void operator delete[](void* p) noexcept {
    release(p);
}
void operator delete(void* p, std::size_t) noexcept {
    release(p);
}
void operator delete[](void* p, std::size_t) noexcept {
    release(p);
}
void operator delete(void* p, const std::nothrow_t&) noexcept {
    release(p);
}
void operator delete[](void* p, const std::nothrow_t&) noexcept {
    release(p);
}
void operator delete(void* p, std::align_val_t) noexcept {
    release(p);
}
void operator delete[](void* p, std::align_val_t) noexcept {
    release(p);
}
void operator delete(void* p, std::size_t, std::align_val_t) noexcept {
    release(p);
}
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept {
    release(p);
}
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept {
    release(p);
}
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept {
    release(p);
}
