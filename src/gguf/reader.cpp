#include "gguf/reader.h"

#include <algorithm>
#include <cstring>
#include <unordered_set>
#include <vector>

#include "util/units.h"

namespace strata {

namespace {

// Nested arrays deeper than this are rejected; real files use at most one level.
constexpr int kMaxArrayDepth = 4;
// Smallest encodings, used to bound counts by the bytes left in the file before allocating.
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;                 // key length, type, 1-byte value
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 4 + 8;     // name length, n_dims, type, offset
constexpr uint64_t kMaxNameBytes = 1 << 16;                 // keys and tensor names

uint64_t min_value_bytes(ValueType t) {
    switch (t) {
        case ValueType::U8:
        case ValueType::I8:
        case ValueType::BOOL: return 1;
        case ValueType::U16:
        case ValueType::I16: return 2;
        case ValueType::U32:
        case ValueType::I32:
        case ValueType::F32: return 4;
        case ValueType::U64:
        case ValueType::I64:
        case ValueType::F64: return 8;
        case ValueType::STRING: return 8;       // length prefix
        case ValueType::ARRAY: return 4 + 8;    // element type + count
    }
    return 1;
}

std::string size_text(uint64_t bytes) {
    return std::to_string(bytes) + " bytes (" + format_bytes(bytes) + ")";
}

// Sequential reader over a ByteSource with a 1 MiB buffer: metadata holds hundreds of thousands
// of small strings (vocabularies), so each must not cost a system call.
class Cursor {
public:
    explicit Cursor(const ByteSource& src) : src_(src), buf_(1 << 20) {}

    uint64_t pos() const { return pos_; }
    uint64_t remaining() const { return src_.size() - pos_; }
    const std::string& name() const { return src_.name(); }

    Result<void> read(void* dst, size_t n, const char* what) {
        if (n > remaining()) {
            return err(name(), ": ", what, " at byte ", std::to_string(pos_),
                       " runs past the end of the file (", size_text(src_.size()),
                       ") — the file is truncated");
        }
        auto* out = static_cast<uint8_t*>(dst);
        while (n > 0) {
            if (pos_ < buf_start_ || pos_ >= buf_start_ + buf_len_) {
                buf_start_ = pos_;
                buf_len_ = static_cast<size_t>(std::min<uint64_t>(buf_.size(), remaining()));
                STRATA_TRY(src_.read_at(buf_start_, buf_.data(), buf_len_));
            }
            const size_t off = static_cast<size_t>(pos_ - buf_start_);
            const size_t take = std::min(n, buf_len_ - off);
            std::memcpy(out, buf_.data() + off, take);
            out += take;
            n -= take;
            pos_ += take;
        }
        return {};
    }

    template <typename T>
    Result<T> read_pod(const char* what) {
        T x{};
        STRATA_TRY(read(&x, sizeof x, what));
        return x;
    }

    // GGUF string: u64 length + bytes (not NUL-terminated).
    Result<std::string> read_string(const char* what, uint64_t max_len = UINT64_MAX) {
        STRATA_ASSIGN(uint64_t len, read_pod<uint64_t>(what));
        if (len > remaining()) {
            return err(name(), ": ", what, " at byte ", std::to_string(pos_ - 8),
                       " claims a length of ", std::to_string(len), " bytes but only ",
                       std::to_string(remaining()), " bytes remain in the file — the file is "
                       "corrupt or truncated");
        }
        if (len > max_len) {
            return err(name(), ": ", what, " at byte ", std::to_string(pos_ - 8), " is ",
                       std::to_string(len), " bytes long (limit ", std::to_string(max_len),
                       ") — the file is corrupt");
        }
        std::string s(static_cast<size_t>(len), '\0');
        STRATA_TRY(read(s.data(), s.size(), what));
        return s;
    }

private:
    const ByteSource& src_;
    std::vector<uint8_t> buf_;
    uint64_t buf_start_ = 0;
    size_t buf_len_ = 0;
    uint64_t pos_ = 0;
};

Result<Value> read_value(Cursor& c, ValueType type, const std::string& key, int depth);

Result<Array> read_array(Cursor& c, const std::string& key, int depth) {
    if (depth >= kMaxArrayDepth) {
        return err(c.name(), ": metadata key '", key, "': arrays nested more than ",
                   std::to_string(kMaxArrayDepth), " deep — the file is corrupt");
    }
    STRATA_ASSIGN(uint32_t elem_id, c.read_pod<uint32_t>("array element type"));
    if (!value_type_known(elem_id)) {
        return err(c.name(), ": metadata key '", key, "': unknown array element type ",
                   std::to_string(elem_id), " — the file is corrupt or from a newer format");
    }
    const auto elem = static_cast<ValueType>(elem_id);
    STRATA_ASSIGN(uint64_t count, c.read_pod<uint64_t>("array length"));
    const uint64_t min_bytes = min_value_bytes(elem);
    if (count > c.remaining() / min_bytes) {
        return err(c.name(), ": metadata key '", key, "': array of ", std::to_string(count), " ",
                   std::string(value_type_name(elem)), " values cannot fit in the ",
                   std::to_string(c.remaining()), " bytes left in the file — the file is corrupt "
                   "or truncated");
    }
    Array a;
    a.elem_type = elem;
    a.items.reserve(static_cast<size_t>(count));
    for (uint64_t i = 0; i < count; ++i) {
        STRATA_ASSIGN(Value v, read_value(c, elem, key, depth + 1));
        a.items.push_back(std::move(v));
    }
    return a;
}

Result<Value> read_value(Cursor& c, ValueType type, const std::string& key, int depth) {
    switch (type) {
        case ValueType::U8: { STRATA_ASSIGN(auto x, c.read_pod<uint8_t>("u8 value")); return Value(x); }
        case ValueType::I8: { STRATA_ASSIGN(auto x, c.read_pod<int8_t>("i8 value")); return Value(x); }
        case ValueType::U16: { STRATA_ASSIGN(auto x, c.read_pod<uint16_t>("u16 value")); return Value(x); }
        case ValueType::I16: { STRATA_ASSIGN(auto x, c.read_pod<int16_t>("i16 value")); return Value(x); }
        case ValueType::U32: { STRATA_ASSIGN(auto x, c.read_pod<uint32_t>("u32 value")); return Value(x); }
        case ValueType::I32: { STRATA_ASSIGN(auto x, c.read_pod<int32_t>("i32 value")); return Value(x); }
        case ValueType::F32: { STRATA_ASSIGN(auto x, c.read_pod<float>("f32 value")); return Value(x); }
        case ValueType::U64: { STRATA_ASSIGN(auto x, c.read_pod<uint64_t>("u64 value")); return Value(x); }
        case ValueType::I64: { STRATA_ASSIGN(auto x, c.read_pod<int64_t>("i64 value")); return Value(x); }
        case ValueType::F64: { STRATA_ASSIGN(auto x, c.read_pod<double>("f64 value")); return Value(x); }
        case ValueType::BOOL: {
            STRATA_ASSIGN(auto x, c.read_pod<uint8_t>("bool value"));
            if (x > 1) {
                return err(c.name(), ": metadata key '", key, "': bool value ",
                           std::to_string(x), " is neither 0 nor 1 — the file is corrupt");
            }
            return Value(x != 0);
        }
        case ValueType::STRING: {
            STRATA_ASSIGN(auto s, c.read_string("string value"));
            return Value(std::move(s));
        }
        case ValueType::ARRAY: {
            STRATA_ASSIGN(auto a, read_array(c, key, depth));
            return Value(std::move(a));
        }
    }
    return err(c.name(), ": metadata key '", key, "': unknown value type");
}

Result<void> check_header(const ByteSource& src, uint32_t magic, uint32_t version) {
    const std::string& name = src.name();
    if (magic != kGgufMagic) {
        char m[5] = {};
        std::memcpy(m, &magic, 4);
        for (char& ch : m) {
            if (ch && (ch < 0x20 || ch > 0x7e)) ch = '?';
        }
        if (!std::strcmp(m, "lmgg") || !std::strcmp(m, "fmgg") || !std::strcmp(m, "tjgg")) {
            return err(name, ": this is a legacy GGML/GGJT file, not GGUF — convert it to GGUF "
                             "with llama.cpp's conversion tools");
        }
        return err(name, ": not a GGUF file (the file starts with '", m,
                   "', expected 'GGUF')");
    }
    if (version == 1) {
        return err(name, ": GGUF version 1 is obsolete and not supported — re-convert the model "
                         "with a current converter (versions 2 and 3 are supported)");
    }
    if (version != 2 && version != 3) {
        if ((version & 0xffff) == 0 && (version >> 16) != 0) {
            return err(name, ": this looks like a big-endian GGUF file (version field ",
                       std::to_string(version), "); only little-endian files are supported");
        }
        return err(name, ": unknown GGUF version ", std::to_string(version),
                   " (supported: 2 and 3)");
    }
    return {};
}

Result<void> check_tensor(const ByteSource& src, TensorInfo& t, uint32_t type_id,
                          uint64_t rel_offset, uint32_t alignment) {
    const std::string& name = src.name();
    auto info = tensor_type_info(type_id);
    if (!info) {
        return err(name, ": tensor '", t.name, "' has unknown tensor type id ",
                   std::to_string(type_id),
                   " — the file is corrupt or uses a type this version of strata does not know");
    }
    t.type = static_cast<TensorType>(type_id);
    uint64_t n = 1;
    for (uint32_t d = 0; d < t.n_dims; ++d) {
        if (t.shape[d] > static_cast<uint64_t>(INT64_MAX)) {
            return err(name, ": tensor '", t.name, "' has an absurd dimension ",
                       std::to_string(t.shape[d]), " — the file is corrupt");
        }
        if (__builtin_mul_overflow(n, t.shape[d], &n) || n > static_cast<uint64_t>(INT64_MAX)) {
            return err(name, ": tensor '", t.name, "' shape ", t.shape_string(),
                       " overflows the element count — the file is corrupt");
        }
    }
    if (t.shape[0] % info->block_size != 0) {
        return err(name, ": tensor '", t.name, "' has rows of ", std::to_string(t.shape[0]),
                   " elements, not a multiple of the ", std::string(info->name), " block size ",
                   std::to_string(info->block_size), " — the file is corrupt");
    }
    uint64_t bytes = 0;
    if (__builtin_mul_overflow(n / info->block_size, uint64_t{info->type_size}, &bytes)) {
        return err(name, ": tensor '", t.name, "' byte size overflows — the file is corrupt");
    }
    t.n_bytes = bytes;
    if (rel_offset % alignment != 0) {
        return err(name, ": tensor '", t.name, "' data offset ", std::to_string(rel_offset),
                   " is not a multiple of the file's alignment (", std::to_string(alignment),
                   ") — the file is corrupt");
    }
    t.offset = rel_offset;  // made absolute once the data section's start is known
    return {};
}

}  // namespace

Result<GgufFile> read_gguf(const std::string& path) {
    STRATA_ASSIGN(auto src, FileSource::open(path));
    return read_gguf(*src);
}

Result<GgufFile> read_gguf(const ByteSource& src) {
    const std::string& name = src.name();
    if (src.size() < 4 + 4 + 8 + 8) {
        return err(name, ": file is only ", std::to_string(src.size()),
                   " bytes, too small to be a GGUF file (the header alone is 24 bytes)");
    }
    Cursor c(src);
    GgufFile f;
    f.path = name;
    f.file_size = src.size();

    STRATA_ASSIGN(uint32_t magic, c.read_pod<uint32_t>("magic"));
    STRATA_ASSIGN(uint32_t version, c.read_pod<uint32_t>("version"));
    STRATA_TRY(check_header(src, magic, version));
    f.version = version;
    STRATA_ASSIGN(uint64_t n_tensors, c.read_pod<uint64_t>("tensor count"));
    STRATA_ASSIGN(uint64_t n_kv, c.read_pod<uint64_t>("metadata count"));
    if (n_kv > c.remaining() / kMinKvBytes) {
        return err(name, ": header claims ", std::to_string(n_kv),
                   " metadata entries, more than the ", std::to_string(c.remaining()),
                   " remaining bytes could hold — the file is corrupt or truncated");
    }
    if (n_tensors > c.remaining() / kMinTensorInfoBytes) {
        return err(name, ": header claims ", std::to_string(n_tensors),
                   " tensors, more than the ", std::to_string(c.remaining()),
                   " remaining bytes could hold — the file is corrupt or truncated");
    }

    // Metadata.
    f.metadata.reserve(static_cast<size_t>(n_kv));
    std::unordered_set<std::string> keys;
    for (uint64_t i = 0; i < n_kv; ++i) {
        STRATA_ASSIGN(std::string key, c.read_string("metadata key", kMaxNameBytes));
        if (!keys.insert(key).second) {
            return err(name, ": metadata key '", key, "' appears twice — the file is corrupt");
        }
        STRATA_ASSIGN(uint32_t type_id, c.read_pod<uint32_t>("metadata value type"));
        if (!value_type_known(type_id)) {
            return err(name, ": metadata key '", key, "' has unknown value type ",
                       std::to_string(type_id), " — the file is corrupt");
        }
        STRATA_ASSIGN(Value v, read_value(c, static_cast<ValueType>(type_id), key, 0));
        f.metadata.push_back({std::move(key), std::move(v)});
    }
    f.reindex();

    if (const Value* a = f.find("general.alignment")) {
        auto al = a->as_uint();
        if (!al || *al == 0 || (*al & (*al - 1)) != 0 || *al > (1u << 30)) {
            return err(name, ": general.alignment is ", a->to_display(),
                       "; it must be a power of two");
        }
        f.alignment = static_cast<uint32_t>(*al);
    }

    // Tensor table.
    f.tensors.reserve(static_cast<size_t>(n_tensors));
    for (uint64_t i = 0; i < n_tensors; ++i) {
        TensorInfo t;
        STRATA_ASSIGN(t.name, c.read_string("tensor name", kMaxNameBytes));
        STRATA_ASSIGN(t.n_dims, c.read_pod<uint32_t>("tensor dimension count"));
        if (t.n_dims > kMaxTensorDims) {
            return err(name, ": tensor '", t.name, "' has ", std::to_string(t.n_dims),
                       " dimensions (at most ", std::to_string(kMaxTensorDims),
                       " are allowed) — the file is corrupt");
        }
        for (uint32_t d = 0; d < t.n_dims; ++d) {
            STRATA_ASSIGN(t.shape[d], c.read_pod<uint64_t>("tensor dimension"));
        }
        STRATA_ASSIGN(uint32_t type_id, c.read_pod<uint32_t>("tensor type"));
        STRATA_ASSIGN(uint64_t rel, c.read_pod<uint64_t>("tensor offset"));
        STRATA_TRY(check_tensor(src, t, type_id, rel, f.alignment));
        f.tensors.push_back(std::move(t));
    }

    // Data section: starts at the next multiple of the alignment after the tensor table.
    const uint64_t table_end = c.pos();
    f.data_offset = (table_end + f.alignment - 1) / f.alignment * f.alignment;
    if (!f.tensors.empty() && f.data_offset > f.file_size) {
        return err(name, ": the tensor data section would start at byte ",
                   std::to_string(f.data_offset), " but the file has only ",
                   size_text(f.file_size), " — the file is truncated");
    }

    std::unordered_set<std::string> names;
    for (auto& t : f.tensors) {
        if (!names.insert(t.name).second) {
            return err(name, ": tensor '", t.name, "' appears twice — the file is corrupt");
        }
        uint64_t start = 0, end = 0;
        if (__builtin_add_overflow(f.data_offset, t.offset, &start) ||
            __builtin_add_overflow(start, t.n_bytes, &end) || end > f.file_size) {
            return err(name, ": tensor '", t.name, "' (", std::string(tensor_type_name(t.type)),
                       " ", t.shape_string(), ", ", format_bytes(t.n_bytes), ") ends at byte ",
                       std::to_string(end > start ? end : UINT64_MAX), " but the file has ",
                       size_text(f.file_size), " — the download is truncated or the file is "
                       "corrupt");
        }
        t.offset = start;
    }

    // Tensors may be stored in any order but must not overlap.
    std::vector<const TensorInfo*> by_offset;
    by_offset.reserve(f.tensors.size());
    for (const auto& t : f.tensors) by_offset.push_back(&t);
    std::sort(by_offset.begin(), by_offset.end(),
              [](const TensorInfo* a, const TensorInfo* b) { return a->offset < b->offset; });
    for (size_t i = 1; i < by_offset.size(); ++i) {
        const TensorInfo* prev = by_offset[i - 1];
        const TensorInfo* cur = by_offset[i];
        if (prev->n_bytes > 0 && cur->offset < prev->offset + prev->n_bytes) {
            return err(name, ": tensors '", prev->name, "' and '", cur->name,
                       "' overlap in the file (bytes ", std::to_string(cur->offset), "..",
                       std::to_string(prev->offset + prev->n_bytes), ") — the file is corrupt");
        }
    }
    f.reindex();
    return f;
}

}  // namespace strata
