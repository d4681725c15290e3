// strata profile [--force] [--json] [--dir DIR] [--quick]
//
// Shows the hardware profile the placement plan works from — CPU and SIMD, RAM and its read
// bandwidth, the CPU kernels' table (the instruction-set path fastest per weight type for decode,
// small batches and prompts, with the figures measured: profile/cpu_kernel_timing.h), GPUs and
// their bandwidths, and the O_DIRECT read bandwidth of the disk holding DIR (default: the
// current directory) over a grid of block sizes and queue depths. The profile is
// measured on first use (under a minute) and cached; later runs print the cached one until it is
// 30 days old or --force asks for a new measurement. --json prints the profile as one JSON object
// (schema in profile/hardware_profile.h). Progress goes to stderr, as do notes (a cache that
// cannot be written, for instance). Errors: "strata: <message>" on stderr, exit status 1.
#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "profile/disk_bandwidth.h"
#include "profile/profile.h"
#include "util/table.h"
#include "util/units.h"

namespace strata::cli {

namespace {

struct ProfileOptions {
    bool force = false;
    bool json = false;
    bool quick = false;
    std::string dir = ".";
};

std::string printf_string(const char* fmt, double x) {
    char buf[64];
    std::snprintf(buf, sizeof buf, fmt, x);
    return buf;
}

// Decimal units, as bandwidths are quoted by vendors: "41.2 GB/s", "4.21 TB/s", "310 MB/s".
std::string rate(double bytes_per_second) {
    if (bytes_per_second <= 0) return "-";
    if (bytes_per_second >= 1e12) return printf_string("%.2f TB/s", bytes_per_second / 1e12);
    if (bytes_per_second >= 1e9) return printf_string("%.2f GB/s", bytes_per_second / 1e9);
    return printf_string("%.0f MB/s", bytes_per_second / 1e6);
}

std::string thousands(double x) {
    if (x >= 1e6) return printf_string("%.2fM", x / 1e6);
    if (x >= 1e3) return printf_string("%.1fk", x / 1e3);
    return printf_string("%.0f", x);
}

std::string join(const std::vector<std::string>& items, const char* sep) {
    std::string out;
    for (const auto& s : items) out += (out.empty() ? "" : sep) + s;
    return out;
}

std::string memory_line(const MemoryProfile& m) {
    std::string s = format_bytes(m.total) + ", " + format_bytes(m.available) + " available";
    if (m.cgroup_limit && *m.cgroup_limit < m.system_total) {
        s += " (cgroup limit; the machine has " + format_bytes(m.system_total) + ")";
    }
    return s;
}

std::string gpu_line(const GpuProfile& g) {
    std::string s = g.name + ", " + format_bytes(g.memory_total) + " (" +
                    format_bytes(g.memory_free) + " free); read " + rate(g.read_bandwidth) +
                    ", device copy " + rate(g.device_copy_bandwidth) + ", host to device " +
                    rate(g.host_to_device_pinned_bandwidth) + " pinned, " +
                    rate(g.host_to_device_pageable_bandwidth) + " pageable";
    if (!g.note.empty()) s += "; " + g.note;
    return s;
}

std::string disk_line(const DiskProfile& d) {
    std::string where = d.mount_point.empty() ? d.dir : d.mount_point;
    std::vector<std::string> what;
    if (!d.fs_type.empty()) what.push_back(d.fs_type);
    if (!d.source.empty()) what.push_back(d.source);
    if (!d.model.empty()) what.push_back(d.model);
    if (d.rotational) what.push_back("rotational");
    if (!what.empty()) where += " (" + join(what, ", ") + ")";
    if (d.method == "none") return where;
    return where + ": " + (d.direct ? "O_DIRECT" : "buffered") + ", " + d.backend + ", " +
           std::to_string(d.block_size) + "-byte blocks";
}

std::string disk_test_line(const DiskProfile& d) {
    if (d.method == "scratch") {
        std::string s = format_bytes(d.file_size) + " temporary file";
        if (d.write_bandwidth) s += ", written at " + rate(*d.write_bandwidth);
        return s;
    }
    if (d.method == "existing-file")
        return d.file + " (" + format_bytes(d.file_size) + "), read only";
    return "not measured";
}

void print_disk_grid(const DiskProfile& d) {
    std::vector<uint32_t> depths;
    std::map<uint32_t, std::map<uint32_t, const DiskReadRate*>> grid;
    for (const DiskReadRate& r : d.reads) {
        if (std::find(depths.begin(), depths.end(), r.queue_depth) == depths.end()) {
            depths.push_back(r.queue_depth);
        }
        grid[r.block][r.queue_depth] = &r;
    }
    std::sort(depths.begin(), depths.end());
    std::vector<TableColumn> columns = {{"random reads"}};
    for (uint32_t qd : depths) columns.push_back({"QD " + std::to_string(qd), Align::Right});
    TextTable t(columns);
    for (const auto& [block, row] : grid) {
        std::vector<std::string> cells = {disk_block_label(block)};
        std::vector<std::string> iops = {""};
        for (uint32_t qd : depths) {
            const auto it = row.find(qd);
            cells.push_back(it == row.end() ? "-" : rate(it->second->bandwidth));
            iops.push_back(it == row.end() ? "" : thousands(it->second->iops) + " IOPS");
        }
        t.add_row(cells);
        if (block < (64u << 10)) t.add_row(iops);  // small reads are counted in operations
    }
    std::printf("\n%s", t.render("  ").c_str());
}

std::string kernels_line(const CpuKernelProfile& k) {
    std::string s = "timed in " + printf_string("%.1f s", k.seconds) + " on " +
                    std::to_string(k.threads) + " threads (" + format_bytes(k.decode_bytes) +
                    " of weights for decode and batches)";
    if (k.quick) s += ", quick: rough figures";
    if (k.busy_choices > 0) {
        s += "; " + std::to_string(k.busy_choices) + " of " +
             std::to_string(k.table.choices.size()) +
             " timed while other work had the cores, left to " +
             std::string(tuning_name(k.table.widest)) + " (--force on an idle machine times again)";
    }
    if (k.table.empty()) {
        s +=
            "; one fast path (" + std::string(tuning_name(k.table.widest)) + "): nothing to choose";
    }
    return s;
}

void print_profile(const LoadedProfile& lp) {
    const HardwareProfile& p = lp.profile;
    std::string origin = lp.measured ? "measured" : "cached";
    if (!lp.cache_path.empty()) origin += (lp.measured ? ", saved to " : " in ") + lp.cache_path;
    if (!lp.measured) origin += "; --force measures again";
    std::printf("Hardware profile of %s (%s)%s\n", p.measured_at.c_str(), origin.c_str(),
                p.quick ? ", quick: rough figures" : "");

    TextTable kv({{""}, {""}});
    kv.add_row({"CPU", p.cpu.model + ": " + std::to_string(p.cpu.physical_cores) +
                           " physical cores, " + std::to_string(p.cpu.logical_cpus) +
                           " logical CPUs"});
    kv.add_row({"SIMD", p.cpu.simd.empty() ? "none of AVX2, AVX-512" : join(p.cpu.simd, " ")});
    kv.add_row({"RAM", memory_line(p.memory)});
    kv.add_row({"RAM read", rate(p.memory.read_bandwidth) + " with " +
                                std::to_string(p.memory.threads) + " threads, " +
                                rate(p.memory.single_thread_read_bandwidth) + " with one (" +
                                format_bytes(p.memory.buffer) + " buffer)"});
    if (p.gpus.empty()) kv.add_row({"GPU", "none: " + p.gpu_note});
    for (const GpuProfile& g : p.gpus) kv.add_row({"GPU " + std::to_string(g.index), gpu_line(g)});

    const DiskProfile* disk = lp.disk >= 0 ? &p.disks[static_cast<size_t>(lp.disk)] : nullptr;
    if (disk) {
        kv.add_row({"disk", disk_line(*disk)});
        kv.add_row({"disk test", disk_test_line(*disk)});
        if (!disk->note.empty()) kv.add_row({"disk note", disk->note});
    }
    if (p.cpu_kernels) kv.add_row({"CPU kernels", kernels_line(*p.cpu_kernels)});
    std::printf("%s", kv.render("  ").c_str());
    if (p.cpu_kernels && !p.cpu_kernels->table.empty()) {
        std::printf("\n%s", kernel_table_text(p.cpu_kernels->table, "  ").c_str());
    }
    if (disk && !disk->reads.empty()) print_disk_grid(*disk);
}

void run_profile(const ProfileOptions& opt) {
    ProfileRequest request;
    request.model_dir = opt.dir;
    request.force = opt.force;
    request.quick = opt.quick;
    auto loaded = load_or_measure_profile(request);
    if (!loaded) {
        std::fprintf(stderr, "strata: %s\n", loaded.error().message.c_str());
        throw CLI::RuntimeError(1);
    }
    for (const std::string& note : loaded->notes)
        std::fprintf(stderr, "strata: note: %s\n", note.c_str());
    if (opt.json) {
        std::printf("%s\n", profile_to_json(loaded->profile).dump(2).c_str());
    } else {
        print_profile(*loaded);
    }
}

}  // namespace

void add_profile(CLI::App& app) {
    auto* cmd =
        app.add_subcommand("profile", "Measure the machine (CPU, RAM, GPU, disk) and cache it");
    auto opt = std::make_shared<ProfileOptions>();
    cmd->add_flag("--force", opt->force, "Measure again even when a fresh profile is cached");
    cmd->add_flag("--json", opt->json, "Print the profile as one JSON object");
    cmd->add_option("--dir", opt->dir, "Directory holding the models: its disk is measured")
        ->capture_default_str();
    cmd->add_flag("--quick", opt->quick,
                  "Small buffers and test files: a few seconds, rough figures");
    cmd->footer(
        "The profile is cached in $STRATA_CACHE_DIR, $XDG_CACHE_HOME/strata or ~/.cache/strata\n"
        "(profile.json) and measured again after 30 days. The disk test writes a temporary file\n"
        "(1 GiB, deleted on exit) on the same filesystem as --dir, never inside it; with nowhere\n"
        "to write it reads the largest file in --dir instead.");
    cmd->callback([opt] { run_profile(*opt); });
}

}  // namespace strata::cli
