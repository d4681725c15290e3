#include "util/allocator.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace strata {

void bound_allocator_slack() {
#if defined(__GLIBC__)
    // Setting the thresholds explicitly also stops glibc from raising them as blocks are freed.
    mallopt(M_MMAP_THRESHOLD, int(kMappedBlockBytes));
    mallopt(M_TRIM_THRESHOLD, int(kTrimBytes));
    mallopt(M_ARENA_MAX, kMaxArenas);
#endif
}

void release_free_memory() {
#if defined(__GLIBC__)
    malloc_trim(0);
#endif
}

}  // namespace strata
