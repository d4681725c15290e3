#include "store/read_set.h"

#include <algorithm>

namespace strata {

Result<StreamReader> StreamReader::open(const std::string& path, unsigned queue_depth) {
    DirectReader::Options o;
    o.queue_depth = queue_depth;
    StreamReader r;
    STRATA_ASSIGN(r.io, DirectReader::open(path, o));
    return r;
}

Result<size_t> ReadSet::submit(StreamReader& reader, uint64_t offset, size_t length,
                               std::byte* dst) {
    const uint64_t tag = reader.tag();
    STRATA_TRY(reader.io->submit({offset, length, dst, tag, ReadPlacement::Widened}));
    tags_.push_back(tag);
    return reader.io->widen(offset, length).slice;
}

Result<void> ReadSet::wait(StreamReader& reader) {
    Result<void> first;
    for (uint64_t tag : tags_) {
        auto r = reader.io->wait(tag);
        if (!r && first) first = std::move(r);
    }
    tags_.clear();
    return first;
}

bool ReadSet::landed(StreamReader& reader) const {
    return std::all_of(tags_.begin(), tags_.end(), [&](uint64_t t) { return reader.io->ready(t); });
}

}  // namespace strata
