#include "io/block_device.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

namespace strata {

namespace fs = std::filesystem;

namespace {

bool is_power_of_two(uint64_t x) {
    return x != 0 && (x & (x - 1)) == 0;
}

std::string read_first_line(const fs::path& p) {
    std::ifstream in(p);
    std::string line;
    std::getline(in, line);
    while (!line.empty() && (line.back() == ' ' || line.back() == '\n' || line.back() == '\r')) {
        line.pop_back();
    }
    return line;
}

// The sysfs directory of the whole disk behind a device number: /sys/dev/block/MAJ:MIN leads to
// the partition or disk; a partition's parent directory is its disk. Empty when there is none
// (tmpfs, overlay, network filesystems).
fs::path sysfs_disk_dir(dev_t dev) {
    const fs::path link =
        "/sys/dev/block/" + std::to_string(major(dev)) + ":" + std::to_string(minor(dev));
    std::error_code ec;
    fs::path dir = fs::canonical(link, ec);
    if (ec) return {};
    if (fs::exists(dir / "partition", ec)) dir = dir.parent_path();
    return dir;
}

// mountinfo escapes space, tab, newline and backslash as \ooo.
std::string unescape_mountinfo(const std::string& s) {
    std::string out;
    for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '\\' && i + 3 < s.size()) {
            const std::string oct = s.substr(i + 1, 3);
            if (oct.find_first_not_of("01234567") == std::string::npos) {
                out += static_cast<char>(std::stoi(oct, nullptr, 8));
                i += 3;
                continue;
            }
        }
        out += s[i];
    }
    return out;
}

struct MountEntry {
    dev_t dev;
    std::string mount_point, fs_type, source;
};

std::vector<MountEntry> read_mountinfo() {
    std::vector<MountEntry> out;
    std::ifstream in("/proc/self/mountinfo");
    std::string line;
    while (std::getline(in, line)) {
        // "36 35 98:0 /root /mnt/point rw,noatime master:1 - ext4 /dev/sda1 rw"
        std::istringstream ls(line);
        std::string id, parent, majmin, root, mount_point, field;
        if (!(ls >> id >> parent >> majmin >> root >> mount_point)) continue;
        while (ls >> field && field != "-") {
        }
        MountEntry e;
        if (!(ls >> e.fs_type >> e.source)) continue;
        unsigned maj = 0, min = 0;
        if (std::sscanf(majmin.c_str(), "%u:%u", &maj, &min) != 2) continue;
        e.dev = makedev(maj, min);
        e.mount_point = unescape_mountinfo(mount_point);
        e.source = unescape_mountinfo(e.source);
        out.push_back(std::move(e));
    }
    return out;
}

bool path_is_under(const std::string& path, const std::string& dir) {
    if (dir == "/") return true;
    return path.compare(0, dir.size(), dir) == 0 &&
           (path.size() == dir.size() || path[dir.size()] == '/');
}

}  // namespace

DirectIoAlignment direct_io_alignment(int fd) {
    DirectIoAlignment a;
#ifdef STATX_DIOALIGN
    struct statx sx {};
    if (::statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx) == 0 &&
        (sx.stx_mask & STATX_DIOALIGN)) {
        if (sx.stx_dio_offset_align == 0) {
            a.supported = false;
            a.source = "statx";
            return a;
        }
        a.offset = sx.stx_dio_offset_align;
        a.memory = sx.stx_dio_mem_align ? sx.stx_dio_mem_align : sx.stx_dio_offset_align;
        a.source = "statx";
        return a;
    }
#endif
    struct stat st {};
    if (::fstat(fd, &st) != 0) return a;
    const fs::path disk = sysfs_disk_dir(st.st_dev);
    if (!disk.empty()) {
        const std::string text = read_first_line(disk / "queue" / "logical_block_size");
        const unsigned long size = text.empty() ? 0 : std::strtoul(text.c_str(), nullptr, 10);
        if (is_power_of_two(size) && size >= 512 && size <= 65536) {
            a.offset = a.memory = static_cast<uint32_t>(size);
            a.source = "sysfs";
            return a;
        }
    }
    const auto blksize = static_cast<uint64_t>(st.st_blksize);
    if (is_power_of_two(blksize) && blksize >= 512 && blksize <= 65536) {
        a.offset = a.memory = static_cast<uint32_t>(blksize);
        a.source = "st_blksize";
    }
    return a;
}

Result<StorageInfo> storage_info(const std::string& path) {
    std::error_code ec;
    const fs::path canonical = fs::canonical(path, ec);
    if (ec) return err(path, ": ", ec.message());
    struct stat st {};
    if (::stat(canonical.c_str(), &st) != 0)
        return err(path, ": cannot stat: ", std::strerror(errno));

    StorageInfo info;
    const std::string p = canonical.string();
    const MountEntry* best = nullptr;
    const std::vector<MountEntry> mounts = read_mountinfo();
    // Prefer mounts of the same device; the longest mount point containing the path wins (the
    // last one listed when a mount point is stacked).
    for (int pass = 0; pass < 2 && !best; ++pass) {
        for (const MountEntry& m : mounts) {
            if (pass == 0 && m.dev != st.st_dev) continue;
            if (!path_is_under(p, m.mount_point)) continue;
            if (!best || m.mount_point.size() >= best->mount_point.size()) best = &m;
        }
    }
    if (best) {
        info.mount_point = best->mount_point;
        info.fs_type = best->fs_type;
        info.source = best->source;
    }

    fs::path disk = sysfs_disk_dir(st.st_dev);
    struct stat src {};
    // Filesystems such as btrfs report an anonymous device number; the mount source names the
    // real one.
    if (disk.empty() && !info.source.empty() && ::stat(info.source.c_str(), &src) == 0 &&
        S_ISBLK(src.st_mode)) {
        disk = sysfs_disk_dir(src.st_rdev);
    }
    if (!disk.empty()) {
        info.device = disk.filename().string();
        const std::string lbs = read_first_line(disk / "queue" / "logical_block_size");
        if (!lbs.empty()) {
            info.logical_block_size = static_cast<uint32_t>(std::strtoul(lbs.c_str(), nullptr, 10));
        }
        info.rotational = read_first_line(disk / "queue" / "rotational") == "1";
        info.model = read_first_line(disk / "device" / "model");
    }
    return info;
}

}  // namespace strata
