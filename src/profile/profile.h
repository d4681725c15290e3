// Measuring the machine and caching the result: the entry point other commands use.
//
//   STRATA_ASSIGN(LoadedProfile lp, load_or_measure_profile({.model_dir = dir}));
//   lp.profile.memory.read_bandwidth ...
//
// The cache is one JSON file, profile.json, in $STRATA_CACHE_DIR, else $XDG_CACHE_HOME/strata,
// else ~/.cache/strata. A profile is measured when there is none, when it is older than 30 days,
// when it was a --quick one and a full one is wanted, or when asked (force); a disk not yet in it
// is measured and added on its own, and so are the GPUs when this build sees others and the CPU
// kernel table when the CPU is another (or the profile has none).
#pragma once

#include <string>
#include <vector>

#include "profile/hardware_profile.h"
#include "util/result.h"

namespace strata {

struct ProfileRequest {
    std::string model_dir = ".";  // the disk measured is the one holding this directory
    bool force = false;           // measure even when a fresh profile is cached
    bool quick = false;           // small buffers and files: seconds instead of most of a minute
    bool progress = true;         // progress on stderr while measuring
    std::string cache_dir;        // empty: profile_cache_dir()
};

struct LoadedProfile {
    HardwareProfile profile;
    std::string cache_path;          // where it was read from or written to; empty if not cached
    bool measured = false;           // false: everything came from the cache
    bool disk_measured = false;      // the disk entry was measured in this call
    bool gpus_measured = false;      // the cached GPUs were not this build's: measured again
    bool kernels_measured = false;   // the CPU kernel table was missing or another CPU's
    int disk = -1;                   // index in profile.disks of the disk holding model_dir
    std::vector<std::string> notes;  // non-fatal problems (cache unreadable, not writable, ...)
};

Result<std::string> profile_cache_dir();
Result<HardwareProfile> load_profile(const std::string& path);
// Writes atomically (a temporary file renamed over the old one), creating the directory.
Result<void> save_profile(const HardwareProfile& profile, const std::string& path);

// Measures everything; `disk_dir` is the directory whose disk is measured. Scratch files go to
// $TMPDIR, /var/tmp, /tmp or `cache_dir`, whichever shares the disk.
Result<HardwareProfile> measure_profile(const ProfileRequest& request);

Result<LoadedProfile> load_or_measure_profile(const ProfileRequest& request);

}  // namespace strata
