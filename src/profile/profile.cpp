#include "profile/profile.h"

#include <pwd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "profile/cpu_info.h"
#include "profile/cpu_kernel_timing.h"
#include "profile/disk_bandwidth.h"
#include "profile/gpu_probe.h"
#include "profile/memory_bandwidth.h"
#include "profile/progress_line.h"
#include "profile/system_memory.h"
#include "util/units.h"

namespace strata {

namespace fs = std::filesystem;

namespace {

constexpr const char* kProfileFile = "profile.json";
constexpr uint64_t kQuickMemoryBuffer = 64ull << 20;

std::string env(const char* name) {
    const char* v = std::getenv(name);
    return v ? v : "";
}

DiskTestOptions disk_options(const ProfileRequest& request, const std::string& cache_dir) {
    DiskTestOptions o;
    o.dir = request.model_dir;
    o.quick = request.quick;
    if (const std::string tmp = env("TMPDIR"); !tmp.empty()) o.scratch_dirs.push_back(tmp);
    o.scratch_dirs.emplace_back("/var/tmp");
    o.scratch_dirs.emplace_back("/tmp");
    // Often on the same filesystem as models kept under the home directory.
    if (!cache_dir.empty() && fs::is_directory(cache_dir)) o.scratch_dirs.push_back(cache_dir);
    return o;
}

// The CPU kernel table, one progress step per weight type timed.
Result<CpuKernelProfile> measure_kernels(bool quick, int threads, ProgressLine& progress) {
    const CpuKernelTimingOptions o =
        cpu_kernel_timing_options(quick, threads, last_level_cache_bytes());
    return measure_cpu_kernels(o, [&](TensorType t, int index, int count) {
        progress.step("CPU kernels " + std::string(tensor_type_name(t)) + " (" +
                      std::to_string(index + 1) + " of " + std::to_string(count) + ")");
    });
}

// A note when the kernels were timed while other work had the cores.
void note_busy_kernels(LoadedProfile& out) {
    const auto& k = out.profile.cpu_kernels;
    if (!k || k->busy_choices == 0) return;
    out.notes.push_back(std::to_string(k->busy_choices) + " of " +
                        std::to_string(k->table.choices.size()) +
                        " CPU kernel choices were timed while other work had the cores and stay "
                        "on the widest path; `strata profile --force` on an idle machine times "
                        "them again");
}

int kernel_steps() {
    return static_cast<int>(timed_kernel_types().size());
}

Result<HardwareProfile> measure_all(const ProfileRequest& request, const std::string& cache_dir) {
    HardwareProfile p;
    p.strata_version = STRATA_VERSION;
    p.measured_at = format_utc(unix_now());
    p.quick = request.quick;

    ProgressLine progress(stderr, request.progress);
    const GpuProbe listed = list_gpus();
    progress.set_steps(2 + kernel_steps() + static_cast<int>(listed.gpus.size()) +
                       disk_test_steps(request.quick));

    progress.step("CPU and RAM");
    p.cpu = detect_cpu();
    STRATA_ASSIGN(p.memory, detect_system_memory());

    const uint64_t buffer =
        request.quick ? kQuickMemoryBuffer
                      : memory_test_buffer_bytes(last_level_cache_bytes(), p.memory.available);
    progress.step("memory read bandwidth, " + std::to_string(p.cpu.physical_cores) + " threads, " +
                  format_bytes(buffer));
    STRATA_ASSIGN(MemoryBandwidth bw,
                  measure_memory_bandwidth(buffer, p.cpu.physical_cores, request.quick ? 1 : 3));
    p.memory.read_bandwidth = bw.multi_thread;
    p.memory.single_thread_read_bandwidth = bw.single_thread;
    p.memory.threads = bw.threads;
    p.memory.buffer = bw.buffer;

    STRATA_ASSIGN(p.cpu_kernels, measure_kernels(request.quick, p.cpu.physical_cores, progress));

    GpuProbe gpus = measure_gpus(request.quick, [&](int index, int count) {
        progress.step("GPU " + std::to_string(index + 1) + " of " + std::to_string(count));
    });
    p.gpus = std::move(gpus.gpus);
    p.gpu_note = std::move(gpus.note);

    STRATA_ASSIGN(DiskProfile disk, measure_disk(disk_options(request, cache_dir), progress));
    p.disks.push_back(std::move(disk));
    return p;
}

// The GPUs this build sees now differ from the cached profile's, by count, index or name: a
// build with CUDA run after one without (whose profile says "this build has no CUDA backend"),
// or a card added, removed or swapped. Their figures are then measured again.
bool gpus_changed(const HardwareProfile& cached, const GpuProbe& now) {
    if (cached.gpus.size() != now.gpus.size()) return true;
    for (size_t i = 0; i < now.gpus.size(); ++i) {
        if (cached.gpus[i].index != now.gpus[i].index || cached.gpus[i].name != now.gpus[i].name) {
            return true;
        }
    }
    return false;
}

}  // namespace

Result<std::string> profile_cache_dir() {
    if (std::string dir = env("STRATA_CACHE_DIR"); !dir.empty()) return dir;
    // The XDG spec ignores relative values.
    if (std::string xdg = env("XDG_CACHE_HOME"); !xdg.empty() && xdg[0] == '/') {
        return (fs::path(xdg) / "strata").string();
    }
    std::string home = env("HOME");
    if (home.empty()) {
        if (const passwd* pw = ::getpwuid(::getuid()); pw && pw->pw_dir) home = pw->pw_dir;
    }
    if (home.empty()) {
        return err(
            "no cache directory: HOME is not set; set STRATA_CACHE_DIR to a writable "
            "directory");
    }
    return (fs::path(home) / ".cache" / "strata").string();
}

Result<HardwareProfile> load_profile(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return err(path, ": cannot read: ", std::strerror(errno));
    std::stringstream text;
    text << in.rdbuf();
    const nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, false);
    if (j.is_discarded()) return err(path, ": not valid JSON");
    auto p = profile_from_json(j);
    if (!p) return err(path, ": ", p.error().message);
    return p;
}

Result<void> save_profile(const HardwareProfile& profile, const std::string& path) {
    std::error_code ec;
    const fs::path target(path);
    if (target.has_parent_path()) {
        fs::create_directories(target.parent_path(), ec);
        if (ec) return err(target.parent_path().string(), ": cannot create: ", ec.message());
    }
    const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        if (!out) return err(tmp, ": cannot write: ", std::strerror(errno));
        out << profile_to_json(profile).dump(2) << '\n';
        out.flush();
        if (!out) {
            fs::remove(tmp, ec);
            return err(tmp, ": write failed");
        }
    }
    fs::rename(tmp, target, ec);
    if (ec) {
        fs::remove(tmp, ec);
        return err(path, ": cannot replace: ", ec.message());
    }
    return {};
}

Result<HardwareProfile> measure_profile(const ProfileRequest& request) {
    std::string cache_dir = request.cache_dir;
    if (cache_dir.empty()) {
        if (auto d = profile_cache_dir()) cache_dir = *d;
    }
    return measure_all(request, cache_dir);
}

Result<LoadedProfile> load_or_measure_profile(const ProfileRequest& request) {
    LoadedProfile out;
    std::string cache_dir = request.cache_dir;
    if (cache_dir.empty()) {
        auto d = profile_cache_dir();
        if (d) {
            cache_dir = *d;
        } else {
            out.notes.push_back(d.error().message + " (the profile is not cached)");
        }
    }
    // Checked first so a bad --dir fails before anything is measured.
    STRATA_ASSIGN(StorageInfo storage, storage_info(request.model_dir));
    const std::string path = cache_dir.empty() ? "" : (fs::path(cache_dir) / kProfileFile).string();

    if (!path.empty() && !request.force && fs::exists(path)) {
        auto cached = load_profile(path);
        if (!cached) {
            out.notes.push_back("ignoring the cached profile: " + cached.error().message);
        } else if (profile_is_stale(*cached, unix_now())) {
            out.notes.push_back("the cached profile of " + cached->measured_at +
                                " is more than 30 days old; measuring again");
        } else if (cached->quick && !request.quick) {
            out.notes.push_back("the cached profile was a quick one; measuring in full");
        } else {
            out.profile = std::move(cached).value();
            out.cache_path = path;
            bool changed = false;
            if (const GpuProbe listed = list_gpus(); gpus_changed(out.profile, listed)) {
                out.notes.push_back("the GPUs changed since the cached profile (" +
                                    std::to_string(out.profile.gpus.size()) + " then, " +
                                    std::to_string(listed.gpus.size()) +
                                    " now); measuring them again");
                ProgressLine progress(stderr, request.progress);
                progress.set_steps(int(listed.gpus.size()));
                GpuProbe gpus = measure_gpus(request.quick, [&](int index, int count) {
                    progress.step("GPU " + std::to_string(index + 1) + " of " +
                                  std::to_string(count));
                });
                out.profile.gpus = std::move(gpus.gpus);
                out.profile.gpu_note = std::move(gpus.note);
                out.gpus_measured = changed = true;
            }
            // The kernel table is the CPU's: measured again on another CPU (or a build that
            // sees other features), and measured once for a profile from before it existed.
            const CpuProfile cpu_now = detect_cpu();
            const auto& kernels = out.profile.cpu_kernels;
            if (!kernels || cpu_kernels_measured_elsewhere(*kernels, cpu_now)) {
                std::string why = "the cached profile has no CPU kernel table; measuring it";
                if (kernels && kernels->cpu_model != cpu_now.model) {
                    why = "the CPU changed since the kernel table was measured (" +
                          kernels->cpu_model + " then, " + cpu_now.model +
                          " now); measuring it again";
                } else if (kernels) {
                    why =
                        "the CPU's features changed since the kernel table was measured; "
                        "measuring it again";
                }
                out.notes.push_back(why);
                ProgressLine progress(stderr, request.progress);
                progress.set_steps(kernel_steps());
                STRATA_ASSIGN(out.profile.cpu_kernels,
                              measure_kernels(request.quick, cpu_now.physical_cores, progress));
                out.kernels_measured = changed = true;
                note_busy_kernels(out);
            }
            if (const DiskProfile* d = out.profile.disk_for(storage)) {
                if (changed) {
                    if (auto saved = save_profile(out.profile, path); !saved) {
                        out.notes.push_back("could not save the profile: " + saved.error().message);
                    }
                }
                out.disk = static_cast<int>(d - out.profile.disks.data());
                return out;
            }
            // Same machine, new disk: measure only the disk and add it.
            ProgressLine progress(stderr, request.progress);
            progress.set_steps(disk_test_steps(request.quick));
            STRATA_ASSIGN(DiskProfile disk,
                          measure_disk(disk_options(request, cache_dir), progress));
            out.profile.disks.push_back(std::move(disk));
            out.disk = static_cast<int>(out.profile.disks.size() - 1);
            out.disk_measured = true;
            if (auto saved = save_profile(out.profile, path); !saved) {
                out.notes.push_back("could not save the profile: " + saved.error().message);
            }
            return out;
        }
    }
    STRATA_ASSIGN(out.profile, measure_all(request, cache_dir));
    out.measured = out.disk_measured = true;
    note_busy_kernels(out);
    out.disk = 0;
    if (!path.empty()) {
        if (auto saved = save_profile(out.profile, path); saved) {
            out.cache_path = path;
        } else {
            out.notes.push_back("could not save the profile: " + saved.error().message);
        }
    }
    return out;
}

}  // namespace strata
