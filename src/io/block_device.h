// What the kernel says about where a file lives: the alignment direct I/O needs, and the
// filesystem and disk under a path (for the hardware profile and its cache key).
#pragma once

#include <cstdint>
#include <string>

#include "util/result.h"

namespace strata {

struct DirectIoAlignment {
    uint32_t offset = 4096;  // O_DIRECT file offsets and lengths are multiples of this
    uint32_t memory = 4096;  // O_DIRECT buffer addresses are multiples of this
    // False when the filesystem reported (through statx) that it cannot do direct I/O on this
    // file.
    bool supported = true;
    // Where the figures came from: "statx", "sysfs", "st_blksize" or "default".
    std::string source = "default";
};

// Asks, in order: statx(STATX_DIOALIGN) (Linux 6.1+), the logical block size of the block device
// holding the file (/sys/dev/block, the unprivileged view of BLKSSZGET), st_blksize; 4096 if all
// fail. Never fails: a wrong guess only makes the first O_DIRECT read fail, which DirectReader
// checks.
DirectIoAlignment direct_io_alignment(int fd);

struct StorageInfo {
    std::string mount_point;          // "/", "/mnt/nvme"
    std::string fs_type;              // "ext4", "xfs", "tmpfs"
    std::string source;               // "/dev/nvme0n1p2"
    std::string device;               // whole-disk name in /sys/block ("nvme0n1"); empty when none
    std::string model;                // the disk's model string; empty when unknown
    uint32_t logical_block_size = 0;  // 0 when unknown
    bool rotational = false;
};

// The mount and disk holding `path` (which must exist). Fields the system does not expose stay
// empty; only a path that cannot be resolved is an error.
Result<StorageInfo> storage_info(const std::string& path);

}  // namespace strata
