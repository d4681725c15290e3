// GGUF reader (versions 2 and 3). Reads the header, metadata and tensor table with ordinary
// buffered reads; tensor data is never touched. Every count, length, dimension, offset and size is
// checked against the file size and for overflow before use, so a corrupt or hostile file yields
// an Error naming the file and the problem, never a crash, a hang or a huge allocation.
//
// Memory: every allocation the parsed header needs is charged against a budget before it is made
// (GgufReadLimits), and every count is first checked against the bytes left in the file. Memory
// use is therefore at most min(~40 x file size, the budget) plus a read buffer of at most 1 MiB,
// also for a multi-terabyte file whose header was corrupted.
#pragma once

#include <cstdint>
#include <string>

#include "gguf/gguf_file.h"
#include "util/file.h"
#include "util/result.h"

namespace strata {

struct GgufReadLimits {
    // Memory the parsed metadata and tensor table may take (approximate: bytes of the values,
    // names and table entries, not allocator overhead). Real models need a few MB (a 256k-token
    // vocabulary with merges is ~60 MB); the default leaves ample room.
    uint64_t max_header_memory = uint64_t{1} << 30;
};

Result<GgufFile> read_gguf(const std::string& path, const GgufReadLimits& limits = {});
Result<GgufFile> read_gguf(const ByteSource& source, const GgufReadLimits& limits = {});

}  // namespace strata
