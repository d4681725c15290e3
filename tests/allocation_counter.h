// Counts the heap allocations the test binary makes (its global operator new, plain and aligned,
// is replaced in allocation_counter.cpp) while counting is on, on every thread, and the most
// bytes of them that were live at once.
#pragma once

#include <cstdint>

namespace strata::test {

void start_counting_allocations();
// Stops counting; the allocations made since start_counting_allocations.
uint64_t stop_counting_allocations();
// The most bytes live at once, counting only blocks allocated while counting was on (freeing
// one lowers the figure; freeing an older block does not), over the last counting period.
// Memory taken without operator new (malloc, aligned_alloc: AlignedBuffer) is not seen.
uint64_t counted_peak_bytes();

}  // namespace strata::test
