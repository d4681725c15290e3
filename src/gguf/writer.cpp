#include "gguf/writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace strata {

namespace {

constexpr size_t kBufferBytes = 8 << 20;
// O_DIRECT transfers must start and end on device blocks; 4096 covers 512-byte devices too.
constexpr size_t kDirectAlignment = 4096;

uint64_t align_up(uint64_t x, uint64_t a) {
    return (x + a - 1) / a * a;
}

void append_raw(std::vector<uint8_t>& out, const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    out.insert(out.end(), b, b + n);
}
template <typename T>
void append_pod(std::vector<uint8_t>& out, T x) {
    append_raw(out, &x, sizeof x);
}
void append_string(std::vector<uint8_t>& out, const std::string& s) {
    append_pod<uint64_t>(out, s.size());
    append_raw(out, s.data(), s.size());
}

void append_value(std::vector<uint8_t>& out, const Value& v) {
    std::visit(
        [&](const auto& x) {
            using T = std::decay_t<decltype(x)>;
            if constexpr (std::is_same_v<T, std::string>) {
                append_string(out, x);
            } else if constexpr (std::is_same_v<T, Array>) {
                append_pod<uint32_t>(out, static_cast<uint32_t>(x.elem_type));
                append_pod<uint64_t>(out, x.items.size());
                for (const auto& item : x.items) append_value(out, item);
            } else if constexpr (std::is_same_v<T, bool>) {
                append_pod<uint8_t>(out, x ? 1 : 0);
            } else {
                append_pod<T>(out, x);
            }
        },
        v.v);
}

}  // namespace

uint64_t encoded_value_size(const Value& v) {
    std::vector<uint8_t> tmp;
    append_value(tmp, v);
    return tmp.size();
}

GgufWriter::~GgufWriter() {
    if (fd_ >= 0) {
        ::close(fd_);
        ::unlink(tmp_path_.c_str());  // an unfinished file is never left behind
    }
}

void GgufWriter::set(const std::string& key, Value value) {
    if (key == "general.alignment") {
        if (auto a = value.as_uint(); a && *a > 0 && (*a & (*a - 1)) == 0) {
            alignment_ = static_cast<uint32_t>(*a);
        }
    }
    for (auto& e : metadata_) {
        if (e.key == key) {
            e.value = std::move(value);
            return;
        }
    }
    metadata_.push_back({key, std::move(value)});
}

Result<void> GgufWriter::add_tensor(const std::string& name, TensorType type,
                                    const std::vector<uint64_t>& shape) {
    if (fd_ >= 0) return err("gguf writer: add_tensor after open (", name, ")");
    if (shape.empty() || shape.size() > kMaxTensorDims) {
        return err("tensor '", name, "': ", std::to_string(shape.size()),
                   " dimensions (1 to 4 are allowed)");
    }
    auto info = tensor_type_info(type);
    if (!info) return err("tensor '", name, "': unknown type");
    TensorInfo t;
    t.name = name;
    t.type = type;
    t.n_dims = static_cast<uint32_t>(shape.size());
    for (size_t i = 0; i < shape.size(); ++i) t.shape[i] = shape[i];
    if (t.shape[0] % info->block_size != 0) {
        return err("tensor '", name, "': row length ", std::to_string(t.shape[0]),
                   " is not a multiple of the ", std::string(info->name), " block size ",
                   std::to_string(info->block_size));
    }
    for (const auto& other : tensors_) {
        if (other.name == name) return err("tensor '", name, "' declared twice");
    }
    t.n_bytes = t.n_elements() / info->block_size * info->type_size;
    t.offset = tensors_.empty()
                   ? 0
                   : align_up(tensors_.back().offset + tensors_.back().n_bytes, alignment_);
    tensors_.push_back(std::move(t));
    return {};
}

uint64_t GgufWriter::header_bytes() const {
    uint64_t n = 4 + 4 + 8 + 8;
    for (const auto& e : metadata_) n += 8 + e.key.size() + 4 + encoded_value_size(e.value);
    for (const auto& t : tensors_) n += 8 + t.name.size() + 4 + 8ull * t.n_dims + 4 + 8;
    return n;
}

uint64_t GgufWriter::file_size() const {
    const uint64_t data = align_up(header_bytes(), alignment_);
    if (tensors_.empty()) return data;
    return data + align_up(tensors_.back().offset + tensors_.back().n_bytes, alignment_);
}

Result<void> GgufWriter::open(const std::string& path, bool overwrite) {
    if (fd_ >= 0) return err("gguf writer: opened twice");
    struct stat st {};
    if (!overwrite && ::stat(path.c_str(), &st) == 0) {
        return err(path,
                   ": already exists; refusing to overwrite it (choose another output "
                   "path or pass --force)");
    }
    // Offsets were computed with the alignment known at add_tensor time; recompute in case
    // general.alignment was set afterwards.
    for (size_t i = 0; i < tensors_.size(); ++i) {
        tensors_[i].offset =
            i == 0 ? 0 : align_up(tensors_[i - 1].offset + tensors_[i - 1].n_bytes, alignment_);
    }
    path_ = path;
    tmp_path_ = path + ".partial";
    const int flags = O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC;
    direct_io_ = false;
    if (want_direct_io_) {
        fd_ = ::open(tmp_path_.c_str(), flags | O_DIRECT, 0644);
        direct_io_ = fd_ >= 0;
    }
    if (fd_ < 0) fd_ = ::open(tmp_path_.c_str(), flags, 0644);
    if (fd_ < 0) return err(tmp_path_, ": cannot create: ", std::strerror(errno));
    if (!buf_) {
        buf_.reset(static_cast<uint8_t*>(std::aligned_alloc(kDirectAlignment, kBufferBytes)));
        if (!buf_) return err(tmp_path_, ": cannot allocate the write buffer");
    }
    buf_len_ = 0;

    std::vector<uint8_t> head;
    append_pod<uint32_t>(head, kGgufMagic);
    append_pod<uint32_t>(head, 3);
    append_pod<uint64_t>(head, tensors_.size());
    append_pod<uint64_t>(head, metadata_.size());
    for (const auto& e : metadata_) {
        append_string(head, e.key);
        append_pod<uint32_t>(head, static_cast<uint32_t>(e.value.type()));
        append_value(head, e.value);
    }
    for (const auto& t : tensors_) {
        append_string(head, t.name);
        append_pod<uint32_t>(head, t.n_dims);
        for (uint32_t d = 0; d < t.n_dims; ++d) append_pod<uint64_t>(head, t.shape[d]);
        append_pod<uint32_t>(head, static_cast<uint32_t>(t.type));
        append_pod<uint64_t>(head, t.offset);
    }
    STRATA_TRY(put(head.data(), head.size()));
    // Like gguf-py, pad to the alignment even when there are no tensors (vocabulary-only files).
    data_start_ = align_up(pos_, alignment_);
    STRATA_TRY(pad_to(data_start_));
    cur_tensor_ = 0;
    cur_written_ = 0;
    // Zero-byte tensors need no data.
    while (cur_tensor_ < tensors_.size() && tensors_[cur_tensor_].n_bytes == 0) ++cur_tensor_;
    return {};
}

Result<void> GgufWriter::write(const void* data, size_t n) {
    if (fd_ < 0) return err("gguf writer: write before open");
    const auto* p = static_cast<const uint8_t*>(data);
    while (n > 0) {
        if (cur_tensor_ >= tensors_.size()) {
            return err(tmp_path_, ": more tensor data written than the tensors declare");
        }
        const TensorInfo& t = tensors_[cur_tensor_];
        if (cur_written_ == 0) STRATA_TRY(pad_to(data_start_ + t.offset));
        const uint64_t take = std::min<uint64_t>(n, t.n_bytes - cur_written_);
        STRATA_TRY(put(p, static_cast<size_t>(take)));
        p += take;
        n -= static_cast<size_t>(take);
        cur_written_ += take;
        if (cur_written_ == t.n_bytes) {
            ++cur_tensor_;
            cur_written_ = 0;
            while (cur_tensor_ < tensors_.size() && tensors_[cur_tensor_].n_bytes == 0) {
                ++cur_tensor_;
            }
        }
    }
    return {};
}

Result<void> GgufWriter::finish() {
    if (fd_ < 0) return err("gguf writer: finish before open");
    if (cur_tensor_ < tensors_.size()) {
        return err(tmp_path_, ": tensor '", tensors_[cur_tensor_].name, "' was not written ",
                   "completely (", std::to_string(cur_written_), " of ",
                   std::to_string(tensors_[cur_tensor_].n_bytes), " bytes)");
    }
    // Like other GGUF writers, pad the last tensor to the alignment too.
    if (!tensors_.empty()) {
        STRATA_TRY(pad_to(align_up(pos_, alignment_)));
    }
    STRATA_TRY(flush());
    // Direct writes went out in whole blocks; cut the zero padding of the last one.
    if (direct_io_ && ::ftruncate(fd_, static_cast<off_t>(pos_)) != 0) {
        return err(tmp_path_, ": cannot set the file size: ", std::strerror(errno));
    }
    if (::close(fd_) != 0) {
        fd_ = -1;
        return err(tmp_path_, ": close failed: ", std::strerror(errno));
    }
    fd_ = -1;
    if (::rename(tmp_path_.c_str(), path_.c_str()) != 0) {
        const int e = errno;
        ::unlink(tmp_path_.c_str());
        return err(path_, ": cannot move the finished file into place: ", std::strerror(e));
    }
    return {};
}

Result<void> GgufWriter::put(const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    while (n > 0) {
        const size_t take = std::min(n, kBufferBytes - buf_len_);
        std::memcpy(buf_.get() + buf_len_, p, take);
        buf_len_ += take;
        p += take;
        n -= take;
        pos_ += take;
        if (buf_len_ == kBufferBytes) STRATA_TRY(flush());
    }
    return {};
}

Result<void> GgufWriter::pad_to(uint64_t target) {
    static const uint8_t zeros[64] = {};
    while (pos_ < target) {
        const size_t take = static_cast<size_t>(std::min<uint64_t>(sizeof zeros, target - pos_));
        STRATA_TRY(put(zeros, take));
    }
    return {};
}

Result<void> GgufWriter::flush() {
    // Only the last flush can be partial; direct I/O pads it to a whole block (finish() truncates).
    size_t len = buf_len_;
    if (direct_io_ && len % kDirectAlignment != 0) {
        const size_t padded = align_up(len, kDirectAlignment);
        std::memset(buf_.get() + len, 0, padded - len);
        len = padded;
    }
    size_t done = 0;
    while (done < len) {
        const ssize_t w = ::write(fd_, buf_.get() + done, len - done);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && errno == EINVAL && direct_io_ && done == 0) {
            // The file system accepted O_DIRECT at open but not for writing: go buffered.
            const int fl = ::fcntl(fd_, F_GETFL);
            if (fl < 0 || ::fcntl(fd_, F_SETFL, fl & ~O_DIRECT) != 0) {
                return err(tmp_path_, ": write failed: ", std::strerror(EINVAL));
            }
            direct_io_ = false;
            len = buf_len_;
            continue;
        }
        if (w < 0) return err(tmp_path_, ": write failed: ", std::strerror(errno));
        done += static_cast<size_t>(w);
    }
    buf_len_ = 0;
    return {};
}

}  // namespace strata
