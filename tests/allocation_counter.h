// Counts the heap allocations the test binary makes (its global operator new is replaced in
// allocation_counter.cpp) while counting is on, on every thread.
#pragma once

#include <cstdint>

namespace strata::test {

void start_counting_allocations();
// Stops counting; the allocations made since start_counting_allocations.
uint64_t stop_counting_allocations();

}  // namespace strata::test
