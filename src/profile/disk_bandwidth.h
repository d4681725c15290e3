// Read bandwidth of the disk holding the models, through DirectReader (O_DIRECT, the same path
// streaming uses), at the block sizes and queue depths the store issues: small reads for expert
// slices, megabyte reads for dense layers.
//
// The page cache cannot inflate the figures: reads are direct, of a scratch file written with
// O_DIRECT on the same filesystem (an unnamed temporary file, gone when closed, never inside the
// model directory); where there is nowhere to write, the largest existing file in the directory
// is read instead, read-only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "profile/hardware_profile.h"
#include "profile/progress_line.h"
#include "util/result.h"

namespace strata {

struct DiskTestOptions {
    std::string dir;  // the model directory whose disk is measured
    bool quick = false;
    // Where a scratch file may go, in order of preference; only those on the same filesystem as
    // `dir`, writable, with room, and not inside `dir` are used. Empty: $TMPDIR, /var/tmp, /tmp.
    std::vector<std::string> scratch_dirs;
};

// Block sizes and queue depths measured (a full grid, or a small one with `quick`).
std::vector<uint32_t> disk_test_blocks(bool quick);
std::vector<uint32_t> disk_test_queue_depths(bool quick);
// "4 KiB", "1 MiB" (the grid's block sizes are whole binary units).
std::string disk_block_label(uint32_t block);
// Progress steps measure_disk takes: preparing the file, then one per grid cell.
int disk_test_steps(bool quick);

// Errors only when `dir` is not a directory; a disk that cannot be measured gives a profile with
// method "none" and a note saying why.
Result<DiskProfile> measure_disk(const DiskTestOptions& options, ProgressLine& progress);

}  // namespace strata
