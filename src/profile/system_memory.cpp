#include "profile/system_memory.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace strata {

namespace fs = std::filesystem;

namespace {

std::string read_text(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// The cgroup v2 path of this process ("0::/user.slice/..."), empty under cgroup v1 only.
std::string own_cgroup() {
    std::istringstream in(read_text("/proc/self/cgroup"));
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("0::", 0) == 0) return line.substr(3);
    }
    return {};
}

}  // namespace

uint64_t memory_stat_value(const std::string& text, const std::string& key) {
    std::istringstream in(text);
    std::string k;
    uint64_t v = 0;
    while (in >> k >> v) {
        if (k == key) return v;
    }
    return 0;
}

Result<MemInfo> parse_meminfo(const std::string& text) {
    MemInfo m;
    std::istringstream in(text);
    std::string key, unit;
    uint64_t value = 0;
    bool have_available = false;
    while (in >> key >> value) {
        std::getline(in, unit);  // " kB" or nothing
        const uint64_t bytes = unit.find("kB") != std::string::npos ? value * 1024 : value;
        if (key == "MemTotal:") m.total = bytes;
        if (key == "MemAvailable:") {
            m.available = bytes;
            have_available = true;
        }
    }
    if (m.total == 0) return err("/proc/meminfo: no MemTotal line");
    if (!have_available) return err("/proc/meminfo: no MemAvailable line (Linux 3.14 or later)");
    return m;
}

std::optional<uint64_t> parse_cgroup_limit(const std::string& text) {
    std::istringstream in(text);
    std::string word;
    if (!(in >> word) || word == "max") return std::nullopt;
    if (word.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
    return std::stoull(word);
}

Result<MemoryProfile> detect_system_memory() {
    STRATA_ASSIGN(MemInfo info, parse_meminfo(read_text("/proc/meminfo")));
    MemoryProfile m;
    m.system_total = info.total;
    m.total = info.total;
    m.available = info.available;
    // The tightest limit on the path from the root down to this cgroup applies. The root itself
    // has no memory.max, except inside a container with its own cgroup namespace, where it is
    // the container's.
    const auto consider = [&m](const fs::path& dir) {
        const auto limit = parse_cgroup_limit(read_text(dir / "memory.max"));
        if (!limit || (m.cgroup_limit && *limit >= *m.cgroup_limit)) return;
        m.cgroup_limit = limit;
        // What the cgroup has left: its limit less what it uses, not counting inactive file
        // pages, which the kernel reclaims before it would refuse memory.
        const auto used = parse_cgroup_limit(read_text(dir / "memory.current"));
        const uint64_t reclaimable =
            memory_stat_value(read_text(dir / "memory.stat"), "inactive_file");
        const uint64_t in_use = used ? *used - std::min(*used, reclaimable) : 0;
        m.available = std::min(m.available, *limit - std::min(*limit, in_use));
    };
    fs::path dir = "/sys/fs/cgroup";
    consider(dir);
    for (const fs::path& part : fs::path(own_cgroup()).relative_path()) {
        dir /= part;
        consider(dir);
    }
    if (m.cgroup_limit) m.total = std::min(m.total, *m.cgroup_limit);
    return m;
}

}  // namespace strata
