#include "engine/debug_dump.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

namespace strata::engine {

Result<DebugDump> DebugDump::open(const std::string& dir) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return err("cannot create the dump directory " + dir + ": " + ec.message());
    DebugDump d;
    d.dir_ = dir;
    const std::string index = dir + "/index.tsv";
    // A fresh directory gets a new index; a second engine in the same process (or a later run)
    // continues it with sequence numbers after the last one, so nothing is overwritten.
    int64_t last_seq = -1;
    if (std::FILE* old = std::fopen(index.c_str(), "r")) {
        char line[1024];
        while (std::fgets(line, sizeof line, old)) {
            long long seq = 0;
            if (std::sscanf(line, "%lld\t", &seq) == 1 && seq > last_seq) last_seq = seq;
        }
        std::fclose(old);
    }
    const bool fresh = !std::filesystem::exists(index, ec);
    d.index_ = std::fopen(index.c_str(), "a");
    if (!d.index_) return err("cannot write " + index + ": " + std::strerror(errno));
    if (fresh) std::fprintf(d.index_, "seq\tname\trows\tcols\tpos0\tfile\n");
    d.seq_ = last_seq;
    return d;
}

DebugDump::~DebugDump() {
    if (index_) std::fclose(index_);
}

DebugDump& DebugDump::operator=(DebugDump&& o) noexcept {
    std::swap(dir_, o.dir_);
    std::swap(index_, o.index_);
    std::swap(seq_, o.seq_);
    std::swap(pos0_, o.pos0_);
    return *this;
}

void DebugDump::begin_call(int64_t pos0) {
    ++seq_;
    pos0_ = pos0;
}

void DebugDump::write(std::string_view name, int layer, const float* data, int64_t rows,
                      int64_t cols) {
    if (!index_) return;
    std::string full(name);
    if (layer >= 0) full += "-" + std::to_string(layer);
    const std::string file = std::to_string(seq_) + "." + full + ".f32";
    const std::string path = dir_ + "/" + file;
    if (std::FILE* f = std::fopen(path.c_str(), "wb")) {
        std::fwrite(data, sizeof(float), size_t(rows * cols), f);
        std::fclose(f);
    }
    std::fprintf(index_, "%lld\t%s\t%lld\t%lld\t%lld\t%s\n", static_cast<long long>(seq_),
                 full.c_str(), static_cast<long long>(rows), static_cast<long long>(cols),
                 static_cast<long long>(pos0_), file.c_str());
    std::fflush(index_);
}

}  // namespace strata::engine
