// The bandwidth of each tier as the plan uses it, picked from the hardware profile, with where
// the figure came from (the plan prints it, so a surprising limit can be traced to a figure).
#pragma once

#include <cstdint>
#include <string>

#include "profile/hardware_profile.h"

namespace strata {

struct TierRate {
    double bandwidth = 0;  // bytes/s
    std::string source;    // "measured: ...", or "assumed: ..." when the profile lacks it
    bool measured = false;
};

struct DiskRatePick {
    TierRate rate;
    uint32_t block_size = 4096;  // the disk's O_DIRECT block; 4096 when unknown
};

// Host RAM: memory.read_bandwidth (all cores reading); kAssumedRamBandwidth when unmeasured.
TierRate ram_rate(const HardwareProfile& p);
// GPU 0's device memory, reads only (device_copy_bandwidth counts reads and writes); 0 without
// a GPU.
TierRate gpu_rate(const HardwareProfile& p);
// The disk entry `disk` of the profile (-1 or out of range: unknown). The pick: the best rate
// with 1-4 MiB blocks at queue depth >= 4, else the best with blocks >= 1 MiB, else the best of
// any; kAssumedDiskBandwidth when the disk is unknown or nothing was measured on it.
DiskRatePick disk_rate(const HardwareProfile& p, int disk);

}  // namespace strata
