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
    d.index_ = std::fopen(index.c_str(), "w");
    if (!d.index_) return err("cannot write " + index + ": " + std::strerror(errno));
    std::fprintf(d.index_, "seq\tname\trows\tcols\tpos0\tfile\n");
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
