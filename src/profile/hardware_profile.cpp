#include "profile/hardware_profile.h"

#include <chrono>
#include <cstdio>
#include <ctime>

namespace strata {

using nlohmann::json;

namespace {

json optional_number(const std::optional<uint64_t>& v) {
    return v ? json(*v) : json(nullptr);
}
json optional_number(const std::optional<double>& v) {
    return v ? json(*v) : json(nullptr);
}

json disk_json(const DiskProfile& d) {
    json reads = json::array();
    for (const DiskReadRate& r : d.reads) {
        reads.push_back({{"block", r.block},
                         {"queue_depth", r.queue_depth},
                         {"bandwidth", r.bandwidth},
                         {"iops", r.iops},
                         {"bytes", r.bytes},
                         {"seconds", r.seconds}});
    }
    return {{"dir", d.dir},
            {"mount_point", d.mount_point},
            {"fs_type", d.fs_type},
            {"source", d.source},
            {"device", d.device},
            {"model", d.model},
            {"rotational", d.rotational},
            {"measured_at", d.measured_at},
            {"method", d.method},
            {"file", d.file},
            {"file_size", d.file_size},
            {"direct", d.direct},
            {"backend", d.backend},
            {"block_size", d.block_size},
            {"write_bandwidth", optional_number(d.write_bandwidth)},
            {"reads", reads},
            {"note", d.note}};
}

// Reads that throw are turned into an error value by profile_from_json.
DiskProfile disk_from_json(const json& j) {
    DiskProfile d;
    d.dir = j.at("dir").get<std::string>();
    d.mount_point = j.at("mount_point").get<std::string>();
    d.fs_type = j.at("fs_type").get<std::string>();
    d.source = j.at("source").get<std::string>();
    d.device = j.at("device").get<std::string>();
    d.model = j.at("model").get<std::string>();
    d.rotational = j.at("rotational").get<bool>();
    d.measured_at = j.at("measured_at").get<std::string>();
    d.method = j.at("method").get<std::string>();
    d.file = j.at("file").get<std::string>();
    d.file_size = j.at("file_size").get<uint64_t>();
    d.direct = j.at("direct").get<bool>();
    d.backend = j.at("backend").get<std::string>();
    d.block_size = j.at("block_size").get<uint32_t>();
    if (!j.at("write_bandwidth").is_null())
        d.write_bandwidth = j.at("write_bandwidth").get<double>();
    for (const json& r : j.at("reads")) {
        d.reads.push_back({r.at("block").get<uint32_t>(), r.at("queue_depth").get<uint32_t>(),
                           r.at("bandwidth").get<double>(), r.at("iops").get<double>(),
                           r.at("bytes").get<uint64_t>(), r.at("seconds").get<double>()});
    }
    d.note = j.at("note").get<std::string>();
    return d;
}

json cpu_kernels_json(const CpuKernelProfile& k) {
    return {{"cpu_model", k.cpu_model},       {"simd", k.simd},
            {"threads", k.threads},           {"quick", k.quick},
            {"decode_bytes", k.decode_bytes}, {"seconds", k.seconds},
            {"busy_choices", k.busy_choices}, {"table", kernel_table_json(k.table)}};
}

// Reads that throw are turned into an error value by profile_from_json.
Result<CpuKernelProfile> cpu_kernels_from_json(const json& j) {
    CpuKernelProfile k;
    k.cpu_model = j.at("cpu_model").get<std::string>();
    k.simd = j.at("simd").get<std::vector<std::string>>();
    k.threads = j.at("threads").get<int>();
    k.quick = j.at("quick").get<bool>();
    k.decode_bytes = j.at("decode_bytes").get<uint64_t>();
    k.seconds = j.at("seconds").get<double>();
    k.busy_choices = j.at("busy_choices").get<int>();
    STRATA_ASSIGN(k.table, kernel_table_from_json(j.at("table")));
    return k;
}

}  // namespace

const DiskReadRate* DiskProfile::rate(uint32_t block, uint32_t queue_depth) const {
    const DiskReadRate* best = nullptr;
    for (const DiskReadRate& r : reads) {
        if (r.block != block || r.queue_depth > queue_depth) continue;
        if (!best || r.queue_depth > best->queue_depth) best = &r;
    }
    return best;
}

const DiskProfile* HardwareProfile::disk_for(const StorageInfo& storage) const {
    for (const DiskProfile& d : disks) {
        if (d.mount_point == storage.mount_point && d.source == storage.source) return &d;
    }
    return nullptr;
}

json profile_to_json(const HardwareProfile& p) {
    json gpus = json::array();
    for (const GpuProfile& g : p.gpus) {
        gpus.push_back({{"index", g.index},
                        {"name", g.name},
                        {"memory_total", g.memory_total},
                        {"memory_free", g.memory_free},
                        {"device_copy_bandwidth", g.device_copy_bandwidth},
                        {"read_bandwidth", g.read_bandwidth},
                        {"host_to_device_pinned_bandwidth", g.host_to_device_pinned_bandwidth},
                        {"host_to_device_pageable_bandwidth", g.host_to_device_pageable_bandwidth},
                        {"note", g.note}});
    }
    json disks = json::array();
    for (const DiskProfile& d : p.disks) disks.push_back(disk_json(d));
    const MemoryProfile& m = p.memory;
    json out = {{"schema", p.schema},
                {"strata_version", p.strata_version},
                {"measured_at", p.measured_at},
                {"quick", p.quick},
                {"cpu",
                 {{"model", p.cpu.model},
                  {"physical_cores", p.cpu.physical_cores},
                  {"logical_cpus", p.cpu.logical_cpus},
                  {"simd", p.cpu.simd}}},
                {"memory",
                 {{"total", m.total},
                  {"available", m.available},
                  {"system_total", m.system_total},
                  {"cgroup_limit", optional_number(m.cgroup_limit)},
                  {"read_bandwidth", m.read_bandwidth},
                  {"single_thread_read_bandwidth", m.single_thread_read_bandwidth},
                  {"threads", m.threads},
                  {"buffer", m.buffer}}},
                {"gpus", gpus},
                {"gpu_note", p.gpu_note},
                {"disks", disks}};
    if (p.cpu_kernels) out["cpu_kernels"] = cpu_kernels_json(*p.cpu_kernels);
    return out;
}

Result<HardwareProfile> profile_from_json(const json& j) {
    try {
        HardwareProfile p;
        p.schema = j.at("schema").get<int>();
        if (p.schema != kProfileSchema) {
            return err("profile schema ", std::to_string(p.schema), " (this strata writes ",
                       std::to_string(kProfileSchema), ")");
        }
        p.strata_version = j.at("strata_version").get<std::string>();
        p.measured_at = j.at("measured_at").get<std::string>();
        p.quick = j.at("quick").get<bool>();
        const json& c = j.at("cpu");
        p.cpu.model = c.at("model").get<std::string>();
        p.cpu.physical_cores = c.at("physical_cores").get<int>();
        p.cpu.logical_cpus = c.at("logical_cpus").get<int>();
        p.cpu.simd = c.at("simd").get<std::vector<std::string>>();
        const json& m = j.at("memory");
        p.memory.total = m.at("total").get<uint64_t>();
        p.memory.available = m.at("available").get<uint64_t>();
        p.memory.system_total = m.at("system_total").get<uint64_t>();
        if (!m.at("cgroup_limit").is_null())
            p.memory.cgroup_limit = m.at("cgroup_limit").get<uint64_t>();
        p.memory.read_bandwidth = m.at("read_bandwidth").get<double>();
        p.memory.single_thread_read_bandwidth = m.at("single_thread_read_bandwidth").get<double>();
        p.memory.threads = m.at("threads").get<int>();
        p.memory.buffer = m.at("buffer").get<uint64_t>();
        for (const json& g : j.at("gpus")) {
            GpuProfile gp;
            gp.index = g.at("index").get<int>();
            gp.name = g.at("name").get<std::string>();
            gp.memory_total = g.at("memory_total").get<uint64_t>();
            gp.memory_free = g.at("memory_free").get<uint64_t>();
            gp.device_copy_bandwidth = g.at("device_copy_bandwidth").get<double>();
            gp.read_bandwidth = g.value("read_bandwidth", 0.0);  // absent before it was measured
            gp.host_to_device_pinned_bandwidth =
                g.at("host_to_device_pinned_bandwidth").get<double>();
            gp.host_to_device_pageable_bandwidth =
                g.at("host_to_device_pageable_bandwidth").get<double>();
            gp.note = g.at("note").get<std::string>();
            p.gpus.push_back(std::move(gp));
        }
        p.gpu_note = j.at("gpu_note").get<std::string>();
        for (const json& d : j.at("disks")) p.disks.push_back(disk_from_json(d));
        if (j.contains("cpu_kernels")) {
            auto kernels = cpu_kernels_from_json(j.at("cpu_kernels"));
            if (!kernels) return err("cpu_kernels: ", kernels.error().message);
            p.cpu_kernels = std::move(*kernels);
        }
        if (!parse_utc(p.measured_at))
            return err("measured_at '", p.measured_at, "' is not a date");
        return p;
    } catch (const json::exception& e) {
        return err("malformed profile: ", e.what());
    }
}

std::string format_utc(int64_t unix_seconds) {
    const std::time_t t = static_cast<std::time_t>(unix_seconds);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

std::optional<int64_t> parse_utc(const std::string& text) {
    std::tm tm{};
    int consumed = 0;
    if (std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%2dZ%n", &tm.tm_year, &tm.tm_mon,
                    &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &consumed) != 6 ||
        consumed != static_cast<int>(text.size())) {
        return std::nullopt;
    }
    if (tm.tm_mon < 1 || tm.tm_mon > 12 || tm.tm_mday < 1 || tm.tm_mday > 31 || tm.tm_hour > 23 ||
        tm.tm_min > 59 || tm.tm_sec > 60) {
        return std::nullopt;
    }
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    return static_cast<int64_t>(timegm(&tm));
}

int64_t unix_now() {
    return std::chrono::duration_cast<std::chrono::seconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

bool profile_is_stale(const HardwareProfile& p, int64_t now) {
    const auto when = parse_utc(p.measured_at);
    if (!when) return true;
    constexpr int64_t kClockSlack = 24 * 3600;
    return now - *when > kProfileMaxAgeSeconds || *when - now > kClockSlack;
}

}  // namespace strata
