// The hardware profile: JSON round trip, staleness, the cache (location, reuse, re-measuring),
// the parsers of /proc and cgroup files, SIMD detection against /proc/cpuinfo, the disk test's
// choice of file, and quick measurements through the command line that give sane numbers.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "profile/cpu_info.h"
#include "profile/cpu_kernel_timing.h"
#include "profile/disk_bandwidth.h"
#include "profile/gpu_probe.h"
#include "profile/memory_bandwidth.h"
#include "profile/profile.h"
#include "profile/system_memory.h"
#include "test_support.h"

namespace strata {
namespace {

namespace fs = std::filesystem;
using test::run_strata;
using test::shell_quote;
using test::TempDir;

// Sets an environment variable for one scope and restores it afterwards.
class ScopedEnv {
  public:
    ScopedEnv(const char* name, const char* value) : name_(name) {
        if (const char* old = std::getenv(name)) old_ = old;
        if (value) {
            ::setenv(name, value, 1);
        } else {
            ::unsetenv(name);
        }
    }
    ~ScopedEnv() {
        if (old_) {
            ::setenv(name_, old_->c_str(), 1);
        } else {
            ::unsetenv(name_);
        }
    }
    ScopedEnv(const ScopedEnv&) = delete;
    ScopedEnv& operator=(const ScopedEnv&) = delete;

  private:
    const char* name_;
    std::optional<std::string> old_;
};

HardwareProfile sample_profile() {
    HardwareProfile p;
    p.strata_version = "0.1.0";
    p.measured_at = format_utc(unix_now() - 3600);
    p.quick = true;
    p.cpu = {"Sentinel CPU 9000", 8, 16, {"avx2", "fma", "f16c"}};
    p.memory.total = 32ull << 30;
    p.memory.available = 20ull << 30;
    p.memory.system_total = 64ull << 30;
    p.memory.cgroup_limit = 32ull << 30;
    p.memory.read_bandwidth = 80e9;
    p.memory.single_thread_read_bandwidth = 15.5e9;
    p.memory.threads = 8;
    p.memory.buffer = 1ull << 30;
    GpuProfile g;
    g.index = 0;
    g.name = "Sentinel GPU";
    g.memory_total = 141ull << 30;
    g.memory_free = 140ull << 30;
    g.device_copy_bandwidth = 4.2e12;
    g.host_to_device_pinned_bandwidth = 55e9;
    g.host_to_device_pageable_bandwidth = 5e9;
    p.gpus.push_back(g);
    DiskProfile d;
    d.dir = "/models";
    d.mount_point = "/models";
    d.fs_type = "xfs";
    d.source = "/dev/nvme0n1p1";
    d.device = "nvme0n1";
    d.model = "Sentinel SSD";
    d.measured_at = p.measured_at;
    d.method = "scratch";
    d.file_size = 1ull << 30;
    d.direct = true;
    d.backend = "io_uring";
    d.block_size = 512;
    d.write_bandwidth = 2.5e9;
    d.reads = {{4096, 1, 0.3e9, 73000, 300000000, 1.0},
               {4096, 32, 1.1e9, 268000, 1100000000, 1.0},
               {1 << 20, 16, 6.8e9, 6500, 1073741824, 0.16}};
    d.note = "a note";
    p.disks.push_back(d);
    CpuKernelProfile k;
    k.cpu_model = p.cpu.model;
    k.simd = p.cpu.simd;
    k.threads = 8;
    k.quick = true;
    k.decode_bytes = 64ull << 20;
    k.seconds = 1.5;
    k.table.widest = CpuPathChoice::Avx2;
    k.table.choices = {{TensorType::Q4_K,
                        KernelPhase::Decode,
                        CpuPathChoice::Avx2,
                        27e9,
                        {{CpuPathChoice::Avx2, 27e9}, {CpuPathChoice::Avx512, 18e9}}},
                       {TensorType::Q4_K,
                        KernelPhase::Prompt,
                        CpuPathChoice::Avx512,
                        4e11,
                        {{CpuPathChoice::Avx2, 1.5e11}, {CpuPathChoice::Avx512, 4e11}}}};
    p.cpu_kernels = k;
    return p;
}

// A kernel table that names this machine's CPU, so that a cached copy is not measured again.
CpuKernelProfile kernels_of_this_cpu() {
    const CpuProfile cpu = detect_cpu();
    CpuKernelProfile k;
    k.cpu_model = cpu.model;
    k.simd = cpu.simd;
    k.threads = cpu.physical_cores;
    k.table.widest = CpuPathChoice::Avx2;
    k.table.choices = {{TensorType::Q8_0, KernelPhase::Batch, CpuPathChoice::Avx2, 9e9, {}}};
    return k;
}

// The disk entry strata would look up for `dir`, so a cached profile counts as covering it.
DiskProfile disk_entry_for(const std::string& dir) {
    const StorageInfo s = storage_info(dir).value();
    DiskProfile d;
    d.dir = dir;
    d.mount_point = s.mount_point;
    d.source = s.source;
    d.fs_type = s.fs_type;
    d.measured_at = format_utc(unix_now());
    return d;
}

TEST(HardwareProfile, JsonRoundTrip) {
    const HardwareProfile p = sample_profile();
    const nlohmann::json j = profile_to_json(p);
    auto back = profile_from_json(j);
    ASSERT_TRUE(back.ok()) << back.error().message;
    EXPECT_EQ(profile_to_json(*back), j);
    EXPECT_EQ(back->cpu.model, "Sentinel CPU 9000");
    EXPECT_EQ(back->memory.cgroup_limit, std::optional<uint64_t>(32ull << 30));
    ASSERT_EQ(back->disks.size(), 1u);
    EXPECT_EQ(back->disks[0].reads.size(), 3u);
    EXPECT_EQ(back->disks[0].write_bandwidth, std::optional<double>(2.5e9));
    EXPECT_EQ(j["gpus"][0]["device_copy_bandwidth"].get<double>(), 4.2e12);
    ASSERT_TRUE(back->cpu_kernels);
    EXPECT_EQ(back->cpu_kernels->table, p.cpu_kernels->table);
    EXPECT_EQ(back->cpu_kernels->simd, p.cpu.simd);
    EXPECT_EQ(j["cpu_kernels"]["table"]["choices"][0]["path"], "avx2");

    // A profile from before the kernel table reads without one (it is measured on first use).
    nlohmann::json older = j;
    older.erase("cpu_kernels");
    auto without = profile_from_json(older);
    ASSERT_TRUE(without.ok()) << without.error().message;
    EXPECT_FALSE(without->cpu_kernels);
    EXPECT_FALSE(profile_to_json(*without).contains("cpu_kernels"));

    TempDir dir;
    const std::string path = (dir.path() / "sub" / "profile.json").string();
    ASSERT_TRUE(save_profile(p, path).ok());
    auto loaded = load_profile(path);
    ASSERT_TRUE(loaded.ok()) << loaded.error().message;
    EXPECT_EQ(profile_to_json(*loaded), j);
    // Nothing but the profile is left in the directory (the temporary file was renamed).
    EXPECT_EQ(std::distance(fs::directory_iterator(dir.path() / "sub"), fs::directory_iterator{}),
              1);
}

TEST(HardwareProfile, DamagedProfilesAreErrors) {
    nlohmann::json j = profile_to_json(sample_profile());
    j["memory"].erase("available");
    auto missing = profile_from_json(j);
    ASSERT_FALSE(missing.ok());
    EXPECT_NE(missing.error().message.find("available"), std::string::npos)
        << missing.error().message;

    j = profile_to_json(sample_profile());
    j["schema"] = kProfileSchema + 1;
    EXPECT_FALSE(profile_from_json(j).ok());

    j = profile_to_json(sample_profile());
    j["measured_at"] = "yesterday";
    EXPECT_FALSE(profile_from_json(j).ok());

    j = profile_to_json(sample_profile());
    j["cpu_kernels"]["table"]["choices"][0]["phase"] = "prefill";
    auto bad_kernels = profile_from_json(j);
    ASSERT_FALSE(bad_kernels.ok());
    EXPECT_NE(bad_kernels.error().message.find("prefill"), std::string::npos)
        << bad_kernels.error().message;

    TempDir dir;
    const std::string path = dir.file("profile.json");
    std::ofstream(path) << "{ not json";
    auto bad = load_profile(path);
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.error().message.find(path), std::string::npos);
    EXPECT_FALSE(load_profile(dir.file("absent.json")).ok());
}

TEST(HardwareProfile, DatesAndStaleness) {
    EXPECT_EQ(parse_utc("1970-01-02T00:00:00Z"), std::optional<int64_t>(86400));
    EXPECT_EQ(format_utc(86400), "1970-01-02T00:00:00Z");
    EXPECT_EQ(parse_utc(format_utc(1735689600)), std::optional<int64_t>(1735689600));
    EXPECT_FALSE(parse_utc("2025-13-01T00:00:00Z"));
    EXPECT_FALSE(parse_utc("2025-01-01T00:00:00Z trailing"));
    EXPECT_FALSE(parse_utc(""));

    const int64_t now = 1750000000;
    HardwareProfile p;
    p.measured_at = format_utc(now - 29 * 24 * 3600);
    EXPECT_FALSE(profile_is_stale(p, now));
    p.measured_at = format_utc(now - 31 * 24 * 3600);
    EXPECT_TRUE(profile_is_stale(p, now));
    p.measured_at = format_utc(now + 3 * 24 * 3600);
    EXPECT_TRUE(profile_is_stale(p, now)) << "a date in the future means the clock moved";
    p.measured_at = "garbage";
    EXPECT_TRUE(profile_is_stale(p, now));
}

TEST(HardwareProfile, DiskRateLookup) {
    const HardwareProfile p = sample_profile();
    const DiskProfile& d = p.disks[0];
    ASSERT_NE(d.rate(4096, 16), nullptr);
    EXPECT_EQ(d.rate(4096, 16)->queue_depth, 1u);  // deepest not deeper than asked
    EXPECT_EQ(d.rate(4096, 64)->queue_depth, 32u);
    EXPECT_EQ(d.rate(1 << 20, 8), nullptr);
    EXPECT_EQ(d.rate(65536, 32), nullptr);
}

TEST(ProfileCache, DirectoryFromEnvironment) {
    {
        ScopedEnv a("STRATA_CACHE_DIR", "/some/cache");
        EXPECT_EQ(*profile_cache_dir(), "/some/cache");
    }
    ScopedEnv a("STRATA_CACHE_DIR", nullptr);
    {
        ScopedEnv x("XDG_CACHE_HOME", "/xdg");
        EXPECT_EQ(*profile_cache_dir(), "/xdg/strata");
    }
    ScopedEnv h("HOME", "/home/someone");
    {
        ScopedEnv x("XDG_CACHE_HOME", "relative/ignored");
        EXPECT_EQ(*profile_cache_dir(), "/home/someone/.cache/strata");
    }
    ScopedEnv x("XDG_CACHE_HOME", nullptr);
    EXPECT_EQ(*profile_cache_dir(), "/home/someone/.cache/strata");
}

class ProfileCacheUse : public testing::Test {
  protected:
    ProfileRequest request() const {
        ProfileRequest r;
        r.model_dir = models_.path().string();
        r.quick = true;
        r.progress = false;
        r.cache_dir = cache_.path().string();
        return r;
    }
    std::string cache_file() const { return cache_.file("profile.json"); }
    void write_cache(const HardwareProfile& p) const {
        ASSERT_TRUE(save_profile(p, cache_file()).ok());
    }
    // sample_profile() with the GPUs this build sees here (none without CUDA or a device), so a
    // cached copy is not measured again for them.
    static HardwareProfile with_these_gpus(HardwareProfile p) {
        p.gpus.clear();
        for (const GpuProfile& g : list_gpus().gpus) p.gpus.push_back(g);
        return p;
    }
    HardwareProfile covering_profile() const {
        HardwareProfile p = with_these_gpus(sample_profile());
        p.disks.push_back(disk_entry_for(models_.path().string()));
        p.cpu_kernels = kernels_of_this_cpu();
        return p;
    }

    TempDir cache_, models_;
};

TEST_F(ProfileCacheUse, FreshCacheIsUsedAsIs) {
    write_cache(covering_profile());
    auto lp = load_or_measure_profile(request());
    ASSERT_TRUE(lp.ok()) << lp.error().message;
    EXPECT_FALSE(lp->measured);
    EXPECT_FALSE(lp->disk_measured);
    EXPECT_FALSE(lp->kernels_measured);
    EXPECT_EQ(lp->profile.cpu.model, "Sentinel CPU 9000");
    ASSERT_TRUE(lp->profile.cpu_kernels);
    EXPECT_EQ(lp->profile.cpu_kernels->table, kernels_of_this_cpu().table);
    EXPECT_EQ(lp->cache_path, cache_file());
    ASSERT_GE(lp->disk, 0);
    EXPECT_EQ(lp->profile.disks[static_cast<size_t>(lp->disk)].dir, models_.path().string());
}

TEST_F(ProfileCacheUse, StaleCacheIsMeasuredAgainAndReplaced) {
    HardwareProfile old = covering_profile();
    old.measured_at = format_utc(unix_now() - 31 * 24 * 3600);
    write_cache(old);
    auto lp = load_or_measure_profile(request());
    ASSERT_TRUE(lp.ok()) << lp.error().message;
    EXPECT_TRUE(lp->measured);
    EXPECT_NE(lp->profile.cpu.model, "Sentinel CPU 9000");
    auto saved = load_profile(cache_file());
    ASSERT_TRUE(saved.ok());
    EXPECT_FALSE(profile_is_stale(*saved, unix_now()));
    EXPECT_EQ(saved->disks.size(), 1u) << "disks of a stale profile are dropped too";
}

TEST_F(ProfileCacheUse, ForceMeasuresEvenWhenFresh) {
    write_cache(covering_profile());
    ProfileRequest r = request();
    r.force = true;
    auto lp = load_or_measure_profile(r);
    ASSERT_TRUE(lp.ok()) << lp.error().message;
    EXPECT_TRUE(lp->measured);
    EXPECT_NE(load_profile(cache_file())->cpu.model, "Sentinel CPU 9000");
}

TEST_F(ProfileCacheUse, NewDiskIsMeasuredAndAdded) {
    write_cache(with_these_gpus(sample_profile()));  // knows only /models
    auto lp = load_or_measure_profile(request());
    ASSERT_TRUE(lp.ok()) << lp.error().message;
    EXPECT_FALSE(lp->measured);
    EXPECT_TRUE(lp->disk_measured);
    EXPECT_EQ(lp->profile.cpu.model, "Sentinel CPU 9000");
    EXPECT_EQ(lp->disk, 1);
    auto saved = load_profile(cache_file());
    ASSERT_TRUE(saved.ok());
    ASSERT_EQ(saved->disks.size(), 2u);
    EXPECT_EQ(saved->disks[1].dir, fs::canonical(models_.path()).string());
}

// A profile cached with other GPUs than this build sees (here: one more) keeps its CPU, RAM and
// disk figures and has its GPUs measured again, and is saved so.
TEST_F(ProfileCacheUse, ChangedGpusAreMeasuredAgain) {
    HardwareProfile p = covering_profile();
    GpuProfile extra;
    extra.index = int(p.gpus.size());
    extra.name = "Sentinel GPU 9000";
    p.gpus.push_back(extra);
    write_cache(p);
    auto lp = load_or_measure_profile(request());
    ASSERT_TRUE(lp.ok()) << lp.error().message;
    EXPECT_FALSE(lp->measured);
    EXPECT_TRUE(lp->gpus_measured);
    EXPECT_EQ(lp->profile.cpu.model, "Sentinel CPU 9000");
    EXPECT_EQ(lp->profile.gpus.size(), p.gpus.size() - 1);
    ASSERT_FALSE(lp->notes.empty());
    EXPECT_NE(lp->notes[0].find("GPUs changed"), std::string::npos) << lp->notes[0];
    auto saved = load_profile(cache_file());
    ASSERT_TRUE(saved.ok());
    EXPECT_EQ(saved->gpus.size(), p.gpus.size() - 1);
    EXPECT_EQ(saved->cpu.model, "Sentinel CPU 9000");
}

// A kernel table measured on another CPU (here: the sample's) is measured again for this one; the
// rest of the profile is kept, and the profile is saved so.
TEST_F(ProfileCacheUse, KernelTableOfAnotherCpuIsMeasuredAgain) {
    HardwareProfile p = covering_profile();
    p.cpu_kernels = sample_profile().cpu_kernels;
    write_cache(p);
    auto lp = load_or_measure_profile(request());
    ASSERT_TRUE(lp.ok()) << lp.error().message;
    EXPECT_FALSE(lp->measured);
    EXPECT_TRUE(lp->kernels_measured);
    EXPECT_EQ(lp->profile.cpu.model, "Sentinel CPU 9000");
    ASSERT_TRUE(lp->profile.cpu_kernels);
    EXPECT_EQ(lp->profile.cpu_kernels->cpu_model, detect_cpu().model);
    EXPECT_EQ(lp->profile.cpu_kernels->simd, detect_cpu().simd);
    EXPECT_TRUE(lp->profile.cpu_kernels->quick);
    ASSERT_FALSE(lp->notes.empty());
    EXPECT_NE(lp->notes[0].find("CPU changed"), std::string::npos) << lp->notes[0];
    auto saved = load_profile(cache_file());
    ASSERT_TRUE(saved.ok());
    ASSERT_TRUE(saved->cpu_kernels);
    EXPECT_EQ(saved->cpu_kernels->cpu_model, detect_cpu().model);
    EXPECT_EQ(saved->cpu.model, "Sentinel CPU 9000");

    // Measured for this CPU now: the next load keeps it.
    auto again = load_or_measure_profile(request());
    ASSERT_TRUE(again.ok()) << again.error().message;
    EXPECT_FALSE(again->kernels_measured);
    EXPECT_EQ(again->profile.cpu_kernels->table, saved->cpu_kernels->table);
}

// A profile from before the kernel table gets one on first use.
TEST_F(ProfileCacheUse, ProfileWithoutAKernelTableGetsOne) {
    HardwareProfile p = covering_profile();
    p.cpu_kernels.reset();
    write_cache(p);
    auto lp = load_or_measure_profile(request());
    ASSERT_TRUE(lp.ok()) << lp.error().message;
    EXPECT_FALSE(lp->measured);
    EXPECT_TRUE(lp->kernels_measured);
    ASSERT_TRUE(lp->profile.cpu_kernels);
    EXPECT_EQ(lp->profile.cpu_kernels->cpu_model, detect_cpu().model);
    auto saved = load_profile(cache_file());
    ASSERT_TRUE(saved.ok());
    EXPECT_TRUE(saved->cpu_kernels);
}

TEST_F(ProfileCacheUse, DamagedCacheIsReplaced) {
    std::ofstream(cache_file()) << "{\"schema\": 1}";
    auto lp = load_or_measure_profile(request());
    ASSERT_TRUE(lp.ok()) << lp.error().message;
    EXPECT_TRUE(lp->measured);
    ASSERT_FALSE(lp->notes.empty());
    EXPECT_NE(lp->notes[0].find("ignoring"), std::string::npos) << lp->notes[0];
    EXPECT_TRUE(load_profile(cache_file()).ok());
}

TEST_F(ProfileCacheUse, MissingModelDirectoryIsAnError) {
    ProfileRequest r = request();
    r.model_dir = models_.file("nope");
    auto lp = load_or_measure_profile(r);
    ASSERT_FALSE(lp.ok());
    EXPECT_NE(lp.error().message.find("nope"), std::string::npos);
}

TEST(SystemMemory, ParsesMeminfoAndCgroupFiles) {
    auto m = parse_meminfo(
        "MemTotal:       24683584 kB\nMemFree:  1000 kB\nMemAvailable:   "
        "23000000 kB\nHugePages_Total:       0\n");
    ASSERT_TRUE(m.ok()) << m.error().message;
    EXPECT_EQ(m->total, 24683584ull * 1024);
    EXPECT_EQ(m->available, 23000000ull * 1024);
    EXPECT_FALSE(parse_meminfo("MemTotal: 100 kB\n").ok());
    EXPECT_FALSE(parse_meminfo("").ok());
    EXPECT_EQ(parse_cgroup_limit("max\n"), std::nullopt);
    EXPECT_EQ(parse_cgroup_limit("8589934592\n"), std::optional<uint64_t>(8589934592ull));
    EXPECT_EQ(parse_cgroup_limit(""), std::nullopt);
    EXPECT_EQ(memory_stat_value("anon 10\nfile 20\ninactive_file 7\n", "inactive_file"), 7u);
    EXPECT_EQ(memory_stat_value("anon 10\n", "inactive_file"), 0u);

    auto live = detect_system_memory();
    ASSERT_TRUE(live.ok()) << live.error().message;
    EXPECT_GT(live->total, 0u);
    EXPECT_GT(live->available, 0u);
    EXPECT_LE(live->total, live->system_total);
}

TEST(CpuInfo, SimdMatchesProcCpuinfo) {
#if !defined(__x86_64__)
    GTEST_SKIP() << "SIMD detection covers x86-64 only";
#endif
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    std::set<std::string> flags;
    while (std::getline(in, line)) {
        if (line.rfind("flags", 0) != 0) continue;
        std::istringstream words(line.substr(line.find(':') + 1));
        for (std::string w; words >> w;) flags.insert(w);
        break;
    }
    if (flags.empty()) GTEST_SKIP() << "no flags line in /proc/cpuinfo";
    const std::vector<std::string> detected = detect_simd().names();
    const std::set<std::string> have(detected.begin(), detected.end());
    for (const char* name : {"avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl",
                             "avx512_vnni", "avx512_bf16", "avx_vnni"}) {
        EXPECT_EQ(have.count(name), flags.count(name)) << name;
    }
    const CpuProfile cpu = detect_cpu();
    EXPECT_GE(cpu.physical_cores, 1);
    EXPECT_GE(cpu.logical_cpus, cpu.physical_cores);
    EXPECT_FALSE(cpu.model.empty());
}

TEST(MemoryBandwidth, BufferSizeRule) {
    EXPECT_EQ(memory_test_buffer_bytes(480ull << 20, 22ull << 30), 1920ull << 20);
    EXPECT_EQ(memory_test_buffer_bytes(0, 22ull << 30), 256ull << 20);
    EXPECT_EQ(memory_test_buffer_bytes(1ull << 30, 64ull << 30), 2ull << 30);
    EXPECT_EQ(memory_test_buffer_bytes(480ull << 20, 512ull << 20), 128ull << 20);
    auto bw = measure_memory_bandwidth(32ull << 20, 2, 1);
    ASSERT_TRUE(bw.ok());
    EXPECT_GT(bw->multi_thread, 1e8);
    EXPECT_GT(bw->single_thread, 1e8);
    EXPECT_EQ(bw->buffer, 32ull << 20);
}

void write_bytes(const std::string& path, size_t n) {
    std::ofstream out(path, std::ios::binary);
    std::string chunk(1 << 20, 'x');
    for (size_t done = 0; done < n; done += chunk.size())
        out.write(chunk.data(), static_cast<std::streamsize>(std::min(chunk.size(), n - done)));
}

size_t entries(const fs::path& dir) {
    return static_cast<size_t>(
        std::distance(fs::directory_iterator(dir), fs::directory_iterator{}));
}

TEST(DiskBandwidth, ScratchFileGoesBesideNeverInsideTheModelDirectory) {
    TempDir models, scratch;
    write_bytes(models.file("model.gguf"), 3 << 20);
    ProgressLine quiet(stderr, false);
    DiskTestOptions o;
    o.dir = models.path().string();
    o.quick = true;
    o.scratch_dirs = {models.path().string(), scratch.path().string()};
    auto d = measure_disk(o, quiet);
    ASSERT_TRUE(d.ok()) << d.error().message;
    if (d->method == "none") GTEST_SKIP() << d->note;
    EXPECT_EQ(d->method, "scratch") << d->note;
    EXPECT_EQ(entries(models.path()), 1u) << "wrote into the model directory";
    EXPECT_EQ(entries(scratch.path()), 0u) << "left a scratch file behind";
    EXPECT_GT(d->file_size, 0u);
    ASSERT_FALSE(d->reads.empty());
    for (const DiskReadRate& r : d->reads) {
        EXPECT_GT(r.bandwidth, 0) << r.block << " x " << r.queue_depth;
        EXPECT_GT(r.bytes, 0u);
    }
    EXPECT_GE(d->block_size, 512u);
}

TEST(DiskBandwidth, WithNowhereToWriteTheLargestFileIsRead) {
    TempDir models;
    write_bytes(models.file("small.gguf"), 1 << 20);
    write_bytes(models.file("large.gguf"), 5 << 20);
    ProgressLine quiet(stderr, false);
    DiskTestOptions o;
    o.dir = models.path().string();
    o.quick = true;
    o.scratch_dirs = {models.file("missing")};
    auto d = measure_disk(o, quiet);
    ASSERT_TRUE(d.ok()) << d.error().message;
    EXPECT_EQ(d->method, "existing-file");
    EXPECT_EQ(d->file, models.file("large.gguf"));
    EXPECT_EQ(d->file_size, 5u << 20);
    ASSERT_FALSE(d->reads.empty());
    EXPECT_GT(d->reads[0].bandwidth, 0);
    EXPECT_EQ(entries(models.path()), 2u);

    TempDir empty;
    o.dir = empty.path().string();
    auto none = measure_disk(o, quiet);
    ASSERT_TRUE(none.ok());
    EXPECT_EQ(none->method, "none");
    EXPECT_TRUE(none->reads.empty());
    EXPECT_NE(none->note.find("nowhere to measure"), std::string::npos) << none->note;

    o.dir = models.file("large.gguf");
    EXPECT_FALSE(measure_disk(o, quiet).ok()) << "a file is not a model directory";
}

TEST(Gpu, ReportsNoGpuCleanlyOrMeasuresIt) {
    const GpuProbe listed = list_gpus();
    if (listed.gpus.empty()) {
        EXPECT_FALSE(listed.note.empty());
        GTEST_SKIP() << "no GPU: " << listed.note;
    }
    const GpuProbe measured = measure_gpus(true, nullptr);
    ASSERT_EQ(measured.gpus.size(), listed.gpus.size());
    for (const GpuProfile& g : measured.gpus) {
        EXPECT_FALSE(g.name.empty());
        EXPECT_GT(g.memory_total, 0u);
        EXPECT_LE(g.memory_free, g.memory_total);
        EXPECT_GT(g.device_copy_bandwidth, 0) << g.note;
        EXPECT_GT(g.host_to_device_pinned_bandwidth, 0) << g.note;
        EXPECT_GT(g.host_to_device_pageable_bandwidth, 0) << g.note;
    }
}

TEST(ProfileCommand, QuickRunCachesSaneFigures) {
    TempDir cache, models;
    const std::string env = "STRATA_CACHE_DIR=" + shell_quote(cache.path().string()) + " ";
    const std::string args = "profile --quick --json --dir " + shell_quote(models.path().string());
    auto r = test::run_command(env + shell_quote(test::strata_binary()) + " " + args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_TRUE(j["quick"].get<bool>());
    EXPECT_GE(j["cpu"]["physical_cores"].get<int>(), 1);
    EXPECT_GE(j["cpu"]["logical_cpus"].get<int>(), 1);
    EXPECT_GT(j["memory"]["total"].get<uint64_t>(), 0u);
    EXPECT_GT(j["memory"]["available"].get<uint64_t>(), 0u);
    EXPECT_GT(j["memory"]["read_bandwidth"].get<double>(), 0);
    EXPECT_GT(j["memory"]["single_thread_read_bandwidth"].get<double>(), 0);
    ASSERT_EQ(j["disks"].size(), 1u);
    const auto& disk = j["disks"][0];
    if (disk["method"] != "none") {
        ASSERT_FALSE(disk["reads"].empty());
        for (const auto& rate : disk["reads"]) EXPECT_GT(rate["bandwidth"].get<double>(), 0);
    }
    EXPECT_TRUE(j["gpus"].empty() != j["gpu_note"].get<std::string>().empty());
    const auto& kernels = j["cpu_kernels"];
    EXPECT_EQ(kernels["cpu_model"], j["cpu"]["model"]);
    EXPECT_TRUE(kernels["quick"].get<bool>());
    const bool any_kernels = !kernels["table"]["choices"].empty();
    EXPECT_EQ(any_kernels, !timed_kernel_types().empty());
    if (any_kernels) {
        EXPECT_NE(r.err.find("CPU kernels"), std::string::npos) << "no progress for the kernels";
    }
    EXPECT_NE(r.err.find("profile ["), std::string::npos) << "no progress on stderr";
    EXPECT_TRUE(fs::exists(cache.path() / "profile.json"));

    // Second run: from the cache, no measuring, same date; the human form has the tables.
    auto again = test::run_command(env + shell_quote(test::strata_binary()) + " " + args);
    ASSERT_EQ(again.exit_code, 0) << again.err;
    EXPECT_EQ(nlohmann::json::parse(again.out)["measured_at"], j["measured_at"]);
    EXPECT_EQ(again.err.find("profile ["), std::string::npos) << again.err;
    auto human = test::run_command(env + shell_quote(test::strata_binary()) +
                                   " profile --quick --dir " + shell_quote(models.path().string()));
    ASSERT_EQ(human.exit_code, 0) << human.err;
    EXPECT_NE(human.out.find("RAM read"), std::string::npos) << human.out;
    EXPECT_NE(human.out.find("CPU kernels"), std::string::npos) << human.out;
    if (any_kernels) {
        EXPECT_NE(human.out.find("decode (1 column)"), std::string::npos) << human.out;
    }
    EXPECT_NE(human.out.find("cached"), std::string::npos) << human.out;
    if (disk["method"] != "none") {
        EXPECT_NE(human.out.find("random reads"), std::string::npos) << human.out;
    }

    auto forced =
        test::run_command(env + shell_quote(test::strata_binary()) + " " + args + " --force");
    ASSERT_EQ(forced.exit_code, 0) << forced.err;
    EXPECT_NE(forced.err.find("profile ["), std::string::npos) << "--force did not measure";
}

TEST(ProfileCommand, BadDirectoryIsAnError) {
    TempDir cache;
    auto r = test::run_command("STRATA_CACHE_DIR=" + shell_quote(cache.path().string()) + " " +
                               shell_quote(test::strata_binary()) + " profile --quick --dir " +
                               shell_quote(cache.file("no-such-dir")));
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("strata: "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("no-such-dir"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(cache.path() / "profile.json"));
}

}  // namespace
}  // namespace strata
