#include "gguf/reader.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "util/units.h"

namespace strata {

namespace {

constexpr uint64_t kHeaderBytes = 4 + 4 + 8 + 8;  // magic, version, tensor count, metadata count
// Nested arrays deeper than this are rejected; real files use at most one level.
constexpr int kMaxArrayDepth = 4;
// Smallest encodings, used to bound counts by the bytes left in the file before allocating.
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;              // key length, type, 1-byte value
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 4 + 8;  // name length, n_dims, type, offset
constexpr uint64_t kMaxNameBytes = 1 << 16;              // keys and tensor names
constexpr uint64_t kMaxAlignment = uint64_t{1} << 30;
// Reads start at 64 KiB (most headers are smaller) and double up to 1 MiB (vocabularies).
constexpr size_t kFirstReadBytes = 64 << 10;
constexpr size_t kReadBufferBytes = 1 << 20;
// Memory charged per key or tensor name beyond the entry itself: the duplicate-check set and the
// lookup index each hold a hash node and a copy of the name.
constexpr uint64_t kIndexBytesPerName = 2 * 64;
constexpr uint64_t kNameCopies = 3;

uint64_t min_value_bytes(ValueType t) {
    switch (t) {
        case ValueType::U8:
        case ValueType::I8:
        case ValueType::BOOL:
            return 1;
        case ValueType::U16:
        case ValueType::I16:
            return 2;
        case ValueType::U32:
        case ValueType::I32:
        case ValueType::F32:
            return 4;
        case ValueType::U64:
        case ValueType::I64:
        case ValueType::F64:
            return 8;
        case ValueType::STRING:
            return 8;  // length prefix
        case ValueType::ARRAY:
            return 4 + 8;  // element type + count
    }
    return 1;
}

std::string size_text(uint64_t bytes) {
    return std::to_string(bytes) + " bytes (" + format_bytes(bytes) + ")";
}

// Bytes from the file as they appear in a message: anything outside printable ASCII is escaped (a
// hostile name must not move the cursor or clear the terminal) and long names are shortened, so
// an error stays one readable line.
std::string printable(std::string_view s) {
    constexpr size_t kMaxShown = 80;
    std::string out;
    for (size_t i = 0; i < s.size() && i < kMaxShown; ++i) {
        const auto ch = static_cast<unsigned char>(s[i]);
        if (ch >= 0x20 && ch < 0x7f) {
            out += static_cast<char>(ch);
        } else {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\x%02x", ch);
            out += buf;
        }
    }
    if (s.size() > kMaxShown) out += "... (" + std::to_string(s.size()) + " bytes)";
    return out;
}

std::string quoted(std::string_view s) {
    return "'" + printable(s) + "'";
}

// Tensor types that were once part of the format and have since been removed.
const char* removed_tensor_type_name(uint32_t id) {
    switch (id) {
        case 4:
            return "Q4_2";
        case 5:
            return "Q4_3";
        case 31:
            return "Q4_0_4_4";
        case 32:
            return "Q4_0_4_8";
        case 33:
            return "Q4_0_8_8";
        case 36:
            return "IQ4_NL_4_4";
        case 37:
            return "IQ4_NL_4_8";
        case 38:
            return "IQ4_NL_8_8";
        default:
            return nullptr;
    }
}

// Sequential reader over a ByteSource with a buffer of up to 1 MiB: metadata holds hundreds of
// thousands of small strings (vocabularies), so each must not cost a system call. Messages about
// reads past the end name the current context ("metadata key 'x'", "tensor 3 of 291").
class Cursor {
  public:
    explicit Cursor(const ByteSource& src) : src_(src) {}

    uint64_t pos() const { return pos_; }
    uint64_t remaining() const { return src_.size() - pos_; }
    const std::string& name() const { return src_.name(); }
    const std::string& context() const { return context_; }
    void set_context(std::string context) { context_ = std::move(context); }

    Result<void> read(void* dst, size_t n, const char* what) {
        if (n > remaining()) {
            return err(name(), ": ", context_, context_.empty() ? "" : ": ", what, " at byte ",
                       std::to_string(pos_), " runs past the end of the file (",
                       size_text(src_.size()), ") — the file is truncated");
        }
        auto* out = static_cast<uint8_t*>(dst);
        while (n > 0) {
            if (pos_ < buf_start_ || pos_ >= buf_start_ + buf_len_) {
                buf_start_ = pos_;
                buf_len_ = static_cast<size_t>(std::min<uint64_t>(next_fill_, remaining()));
                next_fill_ = std::min(next_fill_ * 2, kReadBufferBytes);
                if (buf_len_ > buf_capacity_) {
                    buf_ = std::make_unique_for_overwrite<uint8_t[]>(buf_len_);
                    buf_capacity_ = buf_len_;
                }
                STRATA_TRY(src_.read_at(buf_start_, buf_.get(), buf_len_));
            }
            const size_t off = static_cast<size_t>(pos_ - buf_start_);
            const size_t take = std::min(n, buf_len_ - off);
            std::memcpy(out, buf_.get() + off, take);
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

  private:
    const ByteSource& src_;
    std::unique_ptr<uint8_t[]> buf_;
    size_t buf_capacity_ = 0;
    uint64_t buf_start_ = 0;  // file offset of buf_[0]
    size_t buf_len_ = 0;      // valid bytes in buf_
    size_t next_fill_ = kFirstReadBytes;
    uint64_t pos_ = 0;
    std::string context_;
};

// Parses header, metadata and tensor table, charging every allocation against the memory budget
// before making it.
class HeaderParser {
  public:
    HeaderParser(const ByteSource& src, const GgufReadLimits& limits)
        : src_(src), c_(src), name_(src.name()), budget_(limits.max_header_memory) {}

    Result<GgufFile> parse();

  private:
    // "<file>: <context>: <parts>"
    template <typename... Parts>
    Error fail(Parts&&... parts) const {
        const std::string& context = c_.context();
        return err(name_, ": ", context, context.empty() ? "" : ": ",
                   std::forward<Parts>(parts)...);
    }

    // Charges `count` objects of `each` bytes against the budget; false when they do not fit.
    bool charge(uint64_t count, uint64_t each) {
        uint64_t bytes = 0, total = 0;
        if (__builtin_mul_overflow(count, each, &bytes) ||
            __builtin_add_overflow(used_, bytes, &total) || total > budget_) {
            return false;
        }
        used_ = total;
        return true;
    }
    Error over_budget(const std::string& what, uint64_t count, uint64_t each) const {
        uint64_t bytes = 0;
        const std::string need = __builtin_mul_overflow(count, each, &bytes)
                                     ? std::string("more than 16 EiB")
                                     : format_bytes(bytes);
        return fail(what, " would need ", need, " of memory, past the ", format_bytes(budget_),
                    " allowed for the metadata and tensor table of a GGUF file — the file is "
                    "corrupt");
    }

    Result<void> check_start();
    Result<void> check_version(uint32_t version);
    Result<std::string> read_string(const char* what, uint64_t max_len, uint64_t copies);
    template <typename T>
    Result<Value> scalar(const char* what) {
        STRATA_ASSIGN(T x, c_.read_pod<T>(what));
        return Value(x);
    }
    Result<Value> read_value(ValueType type, int depth);
    Result<Array> read_array(int depth);
    Result<void> read_metadata(GgufFile& f, uint64_t n_kv);
    Result<void> read_alignment(GgufFile& f);
    Result<void> read_tensor_table(GgufFile& f, uint64_t n_tensors);
    Result<void> check_tensor(TensorInfo& t, uint32_t type_id, uint32_t alignment);
    Result<void> place_tensors(GgufFile& f);

    const ByteSource& src_;
    Cursor c_;
    const std::string& name_;
    uint64_t budget_;
    uint64_t used_ = 0;
};

// Recognises what the file is before reading it as GGUF, so that the common wrong files (an
// empty or cut-off download, a legacy GGML model, a Git LFS pointer, an HTML error page) get a
// message that says so.
Result<void> HeaderParser::check_start() {
    const uint64_t size = src_.size();
    if (size == 0) {
        return err(name_,
                   ": the file is empty (0 bytes), not a GGUF model — the download failed "
                   "or the file was truncated");
    }
    char head[64] = {};
    const size_t n = static_cast<size_t>(std::min<uint64_t>(size, sizeof head));
    STRATA_TRY(src_.read_at(0, head, n));
    const std::string_view start(head, n);
    if (start.substr(0, 4) == std::string_view("GGUF").substr(0, std::min<size_t>(n, 4))) {
        if (size < kHeaderBytes) {
            return err(name_, ": the file is only ", std::to_string(size),
                       " bytes, shorter than the ", std::to_string(kHeaderBytes),
                       "-byte GGUF header — the file is truncated");
        }
        return {};
    }
    // The legacy formats wrote their magic as a little-endian u32: 'ggml' is stored as "lmgg".
    for (const char* legacy : {"lmgg", "fmgg", "tjgg", "algg"}) {
        if (start.substr(0, 4) == legacy) {
            const std::string stored(legacy);
            const std::string magic(stored.rbegin(), stored.rend());
            return err(name_, ": this is a legacy GGML/GGJT file (magic '", magic,
                       "'), not GGUF — convert it to GGUF with llama.cpp's conversion tools");
        }
    }
    if (start.starts_with("version https://git-lfs")) {
        return err(name_, ": this is a Git LFS pointer file (", std::to_string(size),
                   " bytes), not the model itself — fetch the real file (e.g. 'git lfs pull')");
    }
    std::string lower;
    for (char ch : start) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    const size_t first = lower.find_first_not_of(" \t\r\n");
    if (first != std::string::npos &&
        (lower.compare(first, 9, "<!doctype") == 0 || lower.compare(first, 5, "<html") == 0)) {
        return err(name_,
                   ": this is an HTML page, not a GGUF model — the download probably "
                   "saved an error or login page instead of the file");
    }
    return err(name_, ": not a GGUF file — it starts with \"", printable(start.substr(0, 4)),
               "\" but a GGUF file starts with \"GGUF\"");
}

Result<void> HeaderParser::check_version(uint32_t version) {
    if (version == 2 || version == 3) return {};
    if (version == 1) {
        return err(name_,
                   ": GGUF version 1 is obsolete and not supported — re-convert the model "
                   "with a current converter (versions 2 and 3 are supported)");
    }
    const uint32_t swapped = __builtin_bswap32(version);
    if (swapped >= 1 && swapped <= 3) {
        return err(name_, ": this is a big-endian GGUF file (version field ",
                   std::to_string(version), ", which is ", std::to_string(swapped),
                   " byte-swapped); only little-endian files are supported — convert the model "
                   "on a little-endian machine");
    }
    return err(name_, ": unknown GGUF version ", std::to_string(version),
               " (supported: 2 and 3) — the file is corrupt or from a newer format");
}

// GGUF string: u64 length + bytes (not NUL-terminated). `copies` is how many copies of it the
// parsed file keeps (names are also indexed).
Result<std::string> HeaderParser::read_string(const char* what, uint64_t max_len, uint64_t copies) {
    const uint64_t at = c_.pos();
    STRATA_ASSIGN(uint64_t len, c_.read_pod<uint64_t>(what));
    if (len > c_.remaining()) {
        return fail(what, " at byte ", std::to_string(at), " claims a length of ",
                    std::to_string(len), " bytes but only ", std::to_string(c_.remaining()),
                    " bytes remain in the file — the file is corrupt or truncated");
    }
    if (len > max_len) {
        return fail(what, " at byte ", std::to_string(at), " is ", std::to_string(len),
                    " bytes long (limit ", std::to_string(max_len), ") — the file is corrupt");
    }
    if (!charge(len, copies)) {
        return over_budget(std::string("a ") + what + " of " + std::to_string(len) + " bytes", len,
                           copies);
    }
    std::string s(static_cast<size_t>(len), '\0');
    STRATA_TRY(c_.read(s.data(), s.size(), what));
    return s;
}

Result<Value> HeaderParser::read_value(ValueType type, int depth) {
    switch (type) {
        case ValueType::U8:
            return scalar<uint8_t>("u8 value");
        case ValueType::I8:
            return scalar<int8_t>("i8 value");
        case ValueType::U16:
            return scalar<uint16_t>("u16 value");
        case ValueType::I16:
            return scalar<int16_t>("i16 value");
        case ValueType::U32:
            return scalar<uint32_t>("u32 value");
        case ValueType::I32:
            return scalar<int32_t>("i32 value");
        case ValueType::F32:
            return scalar<float>("f32 value");
        case ValueType::U64:
            return scalar<uint64_t>("u64 value");
        case ValueType::I64:
            return scalar<int64_t>("i64 value");
        case ValueType::F64:
            return scalar<double>("f64 value");
        case ValueType::BOOL: {
            const uint64_t at = c_.pos();
            STRATA_ASSIGN(auto x, c_.read_pod<uint8_t>("bool value"));
            if (x > 1) {
                return fail("bool value ", std::to_string(x), " at byte ", std::to_string(at),
                            " is neither 0 nor 1 — the file is corrupt");
            }
            return Value(x != 0);
        }
        case ValueType::STRING: {
            STRATA_ASSIGN(auto s, read_string("string value", UINT64_MAX, 1));
            return Value(std::move(s));
        }
        case ValueType::ARRAY: {
            STRATA_ASSIGN(auto a, read_array(depth));
            return Value(std::move(a));
        }
    }
    return fail("unknown value type ", std::to_string(static_cast<uint32_t>(type)));
}

Result<Array> HeaderParser::read_array(int depth) {
    if (depth >= kMaxArrayDepth) {
        return fail("arrays nested more than ", std::to_string(kMaxArrayDepth),
                    " deep — the file is corrupt");
    }
    STRATA_ASSIGN(uint32_t elem_id, c_.read_pod<uint32_t>("array element type"));
    if (!value_type_known(elem_id)) {
        return fail("unknown array element type ", std::to_string(elem_id),
                    " — the file is corrupt or from a newer format");
    }
    const auto elem = static_cast<ValueType>(elem_id);
    const std::string elem_name(value_type_name(elem));
    STRATA_ASSIGN(uint64_t count, c_.read_pod<uint64_t>("array length"));
    if (count > c_.remaining() / min_value_bytes(elem)) {
        return fail("array of ", std::to_string(count), " ", elem_name,
                    " values cannot fit in the ", std::to_string(c_.remaining()),
                    " bytes left in the file — the file is corrupt or truncated");
    }
    if (!charge(count, sizeof(Value))) {
        return over_budget("an array of " + std::to_string(count) + " " + elem_name + " values",
                           count, sizeof(Value));
    }
    Array a;
    a.elem_type = elem;
    a.items.reserve(static_cast<size_t>(count));
    for (uint64_t i = 0; i < count; ++i) {
        STRATA_ASSIGN(Value v, read_value(elem, depth + 1));
        a.items.push_back(std::move(v));
    }
    return a;
}

Result<void> HeaderParser::read_metadata(GgufFile& f, uint64_t n_kv) {
    c_.set_context("header");
    if (!charge(n_kv, sizeof(MetadataEntry) + kIndexBytesPerName)) {
        return over_budget(std::to_string(n_kv) + " metadata entries", n_kv,
                           sizeof(MetadataEntry) + kIndexBytesPerName);
    }
    f.metadata.reserve(static_cast<size_t>(n_kv));
    std::unordered_set<std::string> keys;
    for (uint64_t i = 0; i < n_kv; ++i) {
        c_.set_context("metadata entry " + std::to_string(i + 1) + " of " + std::to_string(n_kv));
        STRATA_ASSIGN(std::string key, read_string("key", kMaxNameBytes, kNameCopies));
        c_.set_context("metadata key " + quoted(key));
        if (!keys.insert(key).second) {
            return err(name_, ": metadata key ", quoted(key),
                       " appears twice — the file is corrupt");
        }
        STRATA_ASSIGN(uint32_t type_id, c_.read_pod<uint32_t>("value type"));
        if (!value_type_known(type_id)) {
            return fail("unknown value type ", std::to_string(type_id),
                        " — the file is corrupt or from a newer format");
        }
        STRATA_ASSIGN(Value v, read_value(static_cast<ValueType>(type_id), 0));
        f.metadata.push_back({std::move(key), std::move(v)});
    }
    c_.set_context("");
    return {};
}

Result<void> HeaderParser::read_alignment(GgufFile& f) {
    const Value* a = f.find("general.alignment");
    if (!a) return {};
    const auto al = a->as_uint();
    // to_display(0) abbreviates any array ("[4 × u32]"), keeping the message one short line.
    if (!al || *al == 0 || (*al & (*al - 1)) != 0 || *al > kMaxAlignment) {
        return err(name_, ": general.alignment is ", a->to_display(0), " (",
                   std::string(value_type_name(a->type())),
                   "); it must be a power of two no larger than ", std::to_string(kMaxAlignment),
                   " — the file is corrupt");
    }
    f.alignment = static_cast<uint32_t>(*al);
    return {};
}

Result<void> HeaderParser::check_tensor(TensorInfo& t, uint32_t type_id, uint32_t alignment) {
    const auto info = tensor_type_info(type_id);
    if (!info) {
        if (const char* removed = removed_tensor_type_name(type_id)) {
            return fail("type ", std::to_string(type_id), " (", removed,
                        ") was removed from the GGUF format — re-convert the model with a "
                        "current llama.cpp");
        }
        return fail("unknown tensor type id ", std::to_string(type_id),
                    " — the file is corrupt or uses a type this version of strata does not know");
    }
    t.type = static_cast<TensorType>(type_id);
    uint64_t n = 1;
    for (uint32_t d = 0; d < t.n_dims; ++d) {
        // ggml holds dimensions as int64: larger ones are negative there.
        if (t.shape[d] > static_cast<uint64_t>(INT64_MAX)) {
            return fail("impossible dimension ", std::to_string(t.shape[d]),
                        " — the file is corrupt");
        }
        if (__builtin_mul_overflow(n, t.shape[d], &n) || n > static_cast<uint64_t>(INT64_MAX)) {
            return fail("shape ", t.shape_string(),
                        " has more than 2^63 elements — the file is corrupt");
        }
    }
    if (t.shape[0] % info->block_size != 0) {
        return fail("rows of ", std::to_string(t.shape[0]), " elements are not a multiple of the ",
                    std::string(info->name), " block size ", std::to_string(info->block_size),
                    " — the file is corrupt");
    }
    // n < 2^63, but at up to 8 bytes per element (F64, I64) the size can still pass 2^64.
    if (__builtin_mul_overflow(n / info->block_size, uint64_t{info->type_size}, &t.n_bytes)) {
        return fail(std::string(info->name), " ", t.shape_string(),
                    " takes more than 2^64 bytes — the file is corrupt");
    }
    if (t.offset % alignment != 0) {
        return fail("data offset ", std::to_string(t.offset),
                    " is not a multiple of the file's alignment (", std::to_string(alignment),
                    ") — the file is corrupt");
    }
    return {};
}

Result<void> HeaderParser::read_tensor_table(GgufFile& f, uint64_t n_tensors) {
    c_.set_context("header");
    if (n_tensors > c_.remaining() / kMinTensorInfoBytes) {
        return fail("claims ", std::to_string(n_tensors), " tensors, but the ",
                    std::to_string(c_.remaining()),
                    " bytes left after the metadata cannot describe that many — the file is "
                    "corrupt or truncated");
    }
    if (!charge(n_tensors, sizeof(TensorInfo) + kIndexBytesPerName)) {
        return over_budget(std::to_string(n_tensors) + " tensors", n_tensors,
                           sizeof(TensorInfo) + kIndexBytesPerName);
    }
    f.tensors.reserve(static_cast<size_t>(n_tensors));
    std::unordered_set<std::string> names;
    for (uint64_t i = 0; i < n_tensors; ++i) {
        TensorInfo t;
        c_.set_context("tensor " + std::to_string(i + 1) + " of " + std::to_string(n_tensors));
        STRATA_ASSIGN(t.name, read_string("name", kMaxNameBytes, kNameCopies));
        c_.set_context("tensor " + quoted(t.name));
        if (!names.insert(t.name).second) {
            return err(name_, ": tensor ", quoted(t.name),
                       " appears twice in the tensor table — the file is corrupt");
        }
        STRATA_ASSIGN(t.n_dims, c_.read_pod<uint32_t>("dimension count"));
        if (t.n_dims > kMaxTensorDims) {
            return fail(std::to_string(t.n_dims), " dimensions (at most ",
                        std::to_string(kMaxTensorDims), " are allowed) — the file is corrupt");
        }
        for (uint32_t d = 0; d < t.n_dims; ++d) {
            STRATA_ASSIGN(t.shape[d], c_.read_pod<uint64_t>("dimension"));
        }
        STRATA_ASSIGN(uint32_t type_id, c_.read_pod<uint32_t>("type"));
        // Relative to the data section until place_tensors() knows where that starts.
        STRATA_ASSIGN(t.offset, c_.read_pod<uint64_t>("data offset"));
        STRATA_TRY(check_tensor(t, type_id, f.alignment));
        f.tensors.push_back(std::move(t));
    }
    c_.set_context("");
    return {};
}

// Makes tensor offsets absolute and checks that every tensor lies inside the file and that no
// two overlap.
Result<void> HeaderParser::place_tensors(GgufFile& f) {
    // The data section starts at the next multiple of the alignment after the tensor table.
    const uint64_t table_end = c_.pos();
    f.data_offset = (table_end + f.alignment - 1) / f.alignment * f.alignment;
    if (f.tensors.empty()) return {};
    if (f.data_offset > f.file_size) {
        return err(name_, ": the file ends at byte ", std::to_string(f.file_size),
                   ", before its tensor data section (which would start at byte ",
                   std::to_string(f.data_offset),
                   ") — the data is missing; the download is "
                   "truncated or the file is corrupt");
    }
    // Of the tensors that run past the end, name the one that ends last: its end is the size the
    // file should have, which tells a truncated download from a corrupt offset.
    const TensorInfo* worst = nullptr;
    uint64_t worst_end = 0;
    for (auto& t : f.tensors) {
        uint64_t end = 0;
        if (__builtin_add_overflow(f.data_offset, t.offset, &t.offset) ||
            __builtin_add_overflow(t.offset, t.n_bytes, &end)) {
            end = UINT64_MAX;
        }
        if (end > f.file_size && end >= worst_end) {
            worst = &t;
            worst_end = end;
        }
    }
    if (worst) {
        return err(name_, ": tensor ", quoted(worst->name), " (",
                   std::string(tensor_type_name(worst->type)), " ", worst->shape_string(), ", ",
                   format_bytes(worst->n_bytes), ") ends ",
                   worst_end == UINT64_MAX ? std::string("beyond byte 2^64")
                                           : "at byte " + std::to_string(worst_end),
                   " but the file has ", size_text(f.file_size),
                   " — the download is truncated or the file is corrupt");
    }

    // Tensors may be stored in any order but must not overlap. Empty tensors occupy no bytes.
    std::vector<const TensorInfo*> by_offset;
    by_offset.reserve(f.tensors.size());
    for (const auto& t : f.tensors) {
        if (t.n_bytes > 0) by_offset.push_back(&t);
    }
    std::sort(by_offset.begin(), by_offset.end(),
              [](const TensorInfo* a, const TensorInfo* b) { return a->offset < b->offset; });
    for (size_t i = 1; i < by_offset.size(); ++i) {
        const TensorInfo* prev = by_offset[i - 1];
        const TensorInfo* cur = by_offset[i];
        if (cur->offset < prev->offset + prev->n_bytes) {
            return err(
                name_, ": tensors ", quoted(prev->name), " and ", quoted(cur->name),
                " overlap in the file (bytes ", std::to_string(cur->offset), "..",
                std::to_string(std::min(cur->offset + cur->n_bytes, prev->offset + prev->n_bytes)),
                ") — the file is corrupt");
        }
    }
    return {};
}

Result<GgufFile> HeaderParser::parse() {
    STRATA_TRY(check_start());
    GgufFile f;
    f.path = name_;
    f.file_size = src_.size();

    c_.set_context("header");
    STRATA_ASSIGN(uint32_t magic, c_.read_pod<uint32_t>("magic"));
    (void)magic;  // checked by check_start()
    STRATA_ASSIGN(uint32_t version, c_.read_pod<uint32_t>("version"));
    STRATA_TRY(check_version(version));
    f.version = version;
    STRATA_ASSIGN(uint64_t n_tensors, c_.read_pod<uint64_t>("tensor count"));
    STRATA_ASSIGN(uint64_t n_kv, c_.read_pod<uint64_t>("metadata count"));
    if (n_kv > c_.remaining() / kMinKvBytes) {
        return err(name_, ": header claims ", std::to_string(n_kv),
                   " metadata entries, more than the ", std::to_string(c_.remaining()),
                   " remaining bytes could hold — the file is corrupt or truncated");
    }
    if (n_tensors > c_.remaining() / kMinTensorInfoBytes) {
        return err(name_, ": header claims ", std::to_string(n_tensors), " tensors, more than the ",
                   std::to_string(c_.remaining()),
                   " remaining bytes could hold — the file is corrupt or truncated");
    }

    STRATA_TRY(read_metadata(f, n_kv));
    f.reindex();
    STRATA_TRY(read_alignment(f));
    STRATA_TRY(read_tensor_table(f, n_tensors));
    STRATA_TRY(place_tensors(f));
    f.reindex();
    return f;
}

}  // namespace

Result<GgufFile> read_gguf(const std::string& path, const GgufReadLimits& limits) {
    STRATA_ASSIGN(auto src, FileSource::open(path));
    return read_gguf(*src, limits);
}

Result<GgufFile> read_gguf(const ByteSource& src, const GgufReadLimits& limits) {
    return HeaderParser(src, limits).parse();
}

}  // namespace strata
