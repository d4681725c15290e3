// The C allocator's share of a RAM budget.
//
// glibc's malloc keeps memory the program has given back: freed blocks stay in its heaps (and in
// the process's resident memory) until the top of a heap is free; its mmap threshold grows to
// the largest block freed (up to 32 MiB), so once a few large buffers have come and gone, later
// ones are carved from a heap and never returned; and threads that allocate may each get an
// arena of their own. None of that is in any line of the plan, so the front ends call
// bound_allocator_slack() first: blocks of kMappedBlockBytes and more are always mapped and
// unmapped on their own, a heap is trimmed once kTrimBytes at its top are free, and there are at
// most kMaxArenas arenas. Before the process measures itself for the plan (process_stats.h), it
// returns what its heaps hold free with release_free_memory().
#pragma once

#include <cstddef>

namespace strata {

inline constexpr size_t kMappedBlockBytes = 128u << 10;
inline constexpr size_t kTrimBytes = 1u << 20;
inline constexpr int kMaxArenas = 2;

// Settings as above; no effect with an allocator other than glibc's.
void bound_allocator_slack();
// Gives the free pages of the allocator's heaps back to the system.
void release_free_memory();

}  // namespace strata
