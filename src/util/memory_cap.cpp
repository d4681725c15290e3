#include "util/memory_cap.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "util/units.h"

namespace strata {

namespace {

std::string slurp(const std::string& path) {
    std::ifstream in(path);
    std::ostringstream s;
    if (in) s << in.rdbuf();
    return s.str();
}

Result<void> write_file(const std::string& path, const std::string& value) {
    std::ofstream out(path);
    if (out) {
        out << value;
        out.flush();
    }
    if (!out) return err("cannot write " + value + " to " + path + ": " + std::strerror(errno));
    return {};
}

std::vector<std::string> split(const std::string& s, char sep) {
    std::vector<std::string> out;
    std::string cur;
    for (char c : s) {
        if (c == sep) {
            out.push_back(cur);
            cur.clear();
        } else {
            cur += c;
        }
    }
    out.push_back(cur);
    return out;
}

struct Hierarchy {
    int version = 0;       // 1 or 2
    std::string mount;     // where it is mounted
    std::string own_path;  // this process's cgroup within it
};

// The cgroup hierarchy with a memory controller: v2 when its root offers "memory", else the v1
// memory hierarchy. Mount points from /proc/self/mountinfo, own paths from /proc/self/cgroup.
Result<Hierarchy> find_memory_hierarchy() {
    std::string v1_mount, v2_mount;
    std::istringstream mounts(slurp("/proc/self/mountinfo"));
    for (std::string line; std::getline(mounts, line);) {
        // "id parent maj:min root mountpoint opts ... - fstype source superopts"
        const size_t dash = line.find(" - ");
        if (dash == std::string::npos) continue;
        const auto left = split(line.substr(0, dash), ' ');
        const auto right = split(line.substr(dash + 3), ' ');
        if (left.size() < 5 || right.size() < 3) continue;
        if (right[0] == "cgroup2" && v2_mount.empty()) v2_mount = left[4];
        if (right[0] == "cgroup" && v1_mount.empty()) {
            for (const auto& o : split(right[2], ',')) {
                if (o == "memory") v1_mount = left[4];
            }
        }
    }
    std::string v1_path, v2_path;
    std::istringstream groups(slurp("/proc/self/cgroup"));
    for (std::string line; std::getline(groups, line);) {
        const size_t a = line.find(':'), b = line.find(':', a + 1);
        if (a == std::string::npos || b == std::string::npos) continue;
        const std::string ctrl = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
        if (ctrl.empty()) v2_path = path;
        for (const auto& c : split(ctrl, ',')) {
            if (c == "memory") v1_path = path;
        }
    }
    if (!v2_mount.empty()) {
        const std::string controllers = slurp(v2_mount + "/cgroup.controllers");
        for (const auto& c : split(controllers.substr(0, controllers.find('\n')), ' ')) {
            if (c == "memory") return Hierarchy{2, v2_mount, v2_path};
        }
    }
    if (!v1_mount.empty()) return Hierarchy{1, v1_mount, v1_path};
    return err("no cgroup hierarchy with a memory controller is mounted");
}

}  // namespace

Result<std::unique_ptr<MemoryCap>> MemoryCap::confine(uint64_t bytes) {
    STRATA_ASSIGN(std::unique_ptr<MemoryCap> cap, create(bytes));
    STRATA_TRY(write_file(cap->procs_file(), std::to_string(::getpid())));
    cap->joined_ = true;
    return cap;
}

Result<std::unique_ptr<MemoryCap>> MemoryCap::create(uint64_t bytes) {
    static std::atomic<unsigned> serial{0};
    STRATA_ASSIGN(Hierarchy h, find_memory_hierarchy());
    std::unique_ptr<MemoryCap> cap(new MemoryCap());
    cap->bytes_ = bytes;
    cap->origin_ = h.mount + (h.own_path == "/" ? "" : h.own_path);
    // v2 keeps processes out of inner groups with controllers, so the group goes at the root of
    // the hierarchy; v1 nests it under the process's own group, inside any limit already set.
    const std::string parent = h.version == 2 ? h.mount : cap->origin_;
    cap->group_ = parent + "/strata-cap-" + std::to_string(::getpid()) + "-" +
                  std::to_string(serial.fetch_add(1));
    if (::mkdir(cap->group_.c_str(), 0755) != 0 && errno != EEXIST) {
        return err("cannot create the memory cgroup " + cap->group_ + ": " + std::strerror(errno));
    }
    const std::string limit = std::to_string(bytes);
    Result<void> set;
    if (h.version == 2) {
        set = write_file(cap->group_ + "/memory.max", limit);
        if (set) (void)write_file(cap->group_ + "/memory.swap.max", "0");
        cap->peak_file_ = cap->group_ + "/memory.peak";
        cap->events_file_ = cap->group_ + "/memory.events";
        cap->how_ = "cgroup v2 memory.max " + format_bytes(bytes);
    } else {
        set = write_file(cap->group_ + "/memory.limit_in_bytes", limit);
        // With swap accounting, the same limit on memory + swap keeps pages from going to swap.
        if (set) (void)write_file(cap->group_ + "/memory.memsw.limit_in_bytes", limit);
        cap->peak_file_ = cap->group_ + "/memory.max_usage_in_bytes";
        cap->events_file_ = cap->group_ + "/memory.oom_control";
        cap->how_ = "cgroup v1 memory.limit_in_bytes " + format_bytes(bytes);
    }
    if (!set) {
        ::rmdir(cap->group_.c_str());
        cap->group_.clear();
        return err(set.error().message);
    }
    return cap;
}

MemoryCap::~MemoryCap() {
    if (group_.empty()) return;
    if (joined_) (void)write_file(origin_ + "/cgroup.procs", std::to_string(::getpid()));
    ::rmdir(group_.c_str());
}

uint64_t MemoryCap::peak_usage() const {
    const std::string text = slurp(peak_file_);
    return text.empty() ? 0 : std::strtoull(text.c_str(), nullptr, 10);
}

uint64_t MemoryCap::oom_kills() const {
    // "oom_kill N" on a line of its own, in both versions' files.
    std::istringstream lines(slurp(events_file_));
    for (std::string line; std::getline(lines, line);) {
        if (line.rfind("oom_kill ", 0) == 0) return std::strtoull(line.c_str() + 9, nullptr, 10);
    }
    return 0;
}

}  // namespace strata
