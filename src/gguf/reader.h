// GGUF reader (versions 2 and 3). Reads the header, metadata and tensor table with ordinary
// buffered reads; tensor data is never touched. Every count, length, dimension, offset and size is
// checked against the file size and for overflow before use, so a corrupt or hostile file yields
// an Error naming the file and the problem, never a crash, a hang or a huge allocation.
#pragma once

#include <string>

#include "gguf/gguf_file.h"
#include "util/file.h"
#include "util/result.h"

namespace strata {

Result<GgufFile> read_gguf(const std::string& path);
Result<GgufFile> read_gguf(const ByteSource& source);

}  // namespace strata
