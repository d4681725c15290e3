// The resident part of a streaming store: every tensor the store does not stream, read once at
// open into one owned buffer (direct I/O, many requests in flight, a progress line), with views
// bound for all of them. Shared by the ffn-stream and expert-stream stores.
#pragma once

#include <vector>

#include "io/aligned_buffer.h"
#include "io/direct_reader.h"
#include "model/model_info.h"
#include "store/resident_store.h"
#include "store/tensor_views.h"

namespace strata {

struct ResidentPart {
    AlignedBuffer buffer;
    BoundViews views;  // streamed tensors left out
    uint64_t bytes = 0;
};

// `streamed[i]` for every tensor of `info`: true leaves tensor i out. Uses tags from `next_tag`
// on `reader` and collects them all before returning.
Result<ResidentPart> load_resident_part(const ModelInfo& info, const std::vector<bool>& streamed,
                                        DirectReader& reader, uint64_t& next_tag,
                                        const ResidentLoadOptions& options);

}  // namespace strata
