#include "store/resident_part.h"

#include <deque>

#include "util/progress.h"
#include "util/units.h"

namespace strata {

namespace {
size_t round_up(size_t n, size_t a) {
    return (n + a - 1) / a * a;
}
}  // namespace

Result<ResidentPart> load_resident_part(const ModelInfo& info, const std::vector<bool>& streamed,
                                        DirectReader& reader, uint64_t& next_tag,
                                        const ResidentLoadOptions& options) {
    // Packed at 64-byte offsets (the kernels' alignment), in file order.
    std::vector<size_t> at(info.tensors.size(), 0);
    size_t total = 0;
    for (size_t i = 0; i < info.tensors.size(); ++i) {
        if (streamed[i]) continue;
        at[i] = total;
        total += round_up(size_t(info.file.tensors[i].n_bytes), 64);
    }
    ResidentPart part;
    auto buf = AlignedBuffer::allocate(std::max<size_t>(total, 1));
    if (!buf) return err("cannot allocate " + format_bytes(total) + " for the resident weights");
    part.buffer = std::move(*buf);
    part.bytes = total;
    ByteProgress progress(options.progress_out, "loading resident weights", total, options.progress,
                          ByteProgress::is_terminal(options.progress_out));
    uint64_t done = 0;
    std::deque<std::pair<uint64_t, uint64_t>> in_flight;  // tag, bytes
    constexpr size_t kMaxInFlight = 16;
    Result<void> first;  // every submitted read is collected, even after an error
    auto collect = [&] {
        auto r = reader.wait(in_flight.front().first);
        if (!r && first) first = std::move(r);
        done += in_flight.front().second;
        progress.update(done);
        in_flight.pop_front();
    };
    for (size_t i = 0; i < info.tensors.size() && first; ++i) {
        const TensorInfo& t = info.file.tensors[i];
        if (streamed[i] || t.n_bytes == 0) continue;
        if (in_flight.size() == kMaxInFlight) collect();
        const uint64_t tag = next_tag++;
        auto r = reader.submit({t.offset, size_t(t.n_bytes), part.buffer.data() + at[i], tag});
        if (!r) {
            first = std::move(r);
            break;
        }
        in_flight.push_back({tag, t.n_bytes});
    }
    while (!in_flight.empty()) collect();
    STRATA_TRY(first);
    progress.finish();
    const std::byte* base = part.buffer.data();
    STRATA_ASSIGN(part.views, bind_tensor_views(info, [&](size_t i) -> const std::byte* {
                      return streamed[i] ? nullptr : base + at[i];
                  }));
    return part;
}

}  // namespace strata
