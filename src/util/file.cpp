#include "util/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace strata {

Result<std::unique_ptr<FileSource>> FileSource::open(const std::string& path) {
    // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever. It has no
    // effect on regular files, the only kind accepted below.
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return err(path, ": cannot open: ", std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        const int e = errno;
        ::close(fd);
        return err(path, ": cannot stat: ", std::strerror(e));
    }
    if (S_ISDIR(st.st_mode)) {
        ::close(fd);
        return err(path, ": is a directory, not a model file");
    }
    if (!S_ISREG(st.st_mode)) {
        ::close(fd);
        return err(path,
                   ": is not a regular file (a pipe, device or socket) — give the path of "
                   "a model file, which must be readable at any offset");
    }
    return std::unique_ptr<FileSource>(new FileSource(path, fd, static_cast<uint64_t>(st.st_size)));
}

FileSource::~FileSource() {
    if (fd_ >= 0) {
        // What was read here (a model's metadata, a few samples) is read once: its pages would
        // otherwise stay in the page cache, charged to this process's memory cgroup beside the
        // RAM budget it plans with. Dirty pages are not dropped, and nothing is written.
        ::posix_fadvise(fd_, 0, 0, POSIX_FADV_DONTNEED);
        ::close(fd_);
    }
}

Result<void> FileSource::read_at(uint64_t offset, void* dst, size_t n) const {
    if (offset > size_ || n > size_ - offset) {
        return err(path_, ": read of ", std::to_string(n), " bytes at offset ",
                   std::to_string(offset), " runs past the end of the file (",
                   std::to_string(size_), " bytes) — the file is truncated");
    }
    auto* out = static_cast<uint8_t*>(dst);
    size_t done = 0;
    while (done < n) {
        const ssize_t got = ::pread(fd_, out + done, n - done, static_cast<off_t>(offset + done));
        if (got < 0) {
            if (errno == EINTR) continue;
            return err(path_, ": read error at offset ", std::to_string(offset + done), ": ",
                       std::strerror(errno));
        }
        if (got == 0) {
            return err(path_, ": unexpected end of file at offset ", std::to_string(offset + done),
                       " (the file shrank while reading?)");
        }
        done += static_cast<size_t>(got);
    }
    return {};
}

Result<void> MemorySource::read_at(uint64_t offset, void* dst, size_t n) const {
    if (offset > size_ || n > size_ - offset) {
        return err(name_, ": read of ", std::to_string(n), " bytes at offset ",
                   std::to_string(offset), " runs past the end (", std::to_string(size_),
                   " bytes) — the data is truncated");
    }
    if (n) std::memcpy(dst, data_ + offset, n);
    return {};
}

}  // namespace strata
