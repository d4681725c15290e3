#include "util/process_stats.h"

#include <fstream>
#include <sstream>

namespace strata {

namespace {

std::optional<std::string> slurp(const char* path) {
    std::ifstream in(path);
    if (!in) return std::nullopt;
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

// The number after "key:" on its line.
std::optional<uint64_t> field(const std::string& text, const std::string& key) {
    size_t at = 0;
    while ((at = text.find(key + ":", at)) != std::string::npos) {
        if (at == 0 || text[at - 1] == '\n') {
            size_t p = at + key.size() + 1;
            while (p < text.size() && (text[p] == ' ' || text[p] == '\t')) ++p;
            if (p >= text.size() || text[p] < '0' || text[p] > '9') return std::nullopt;
            uint64_t v = 0;
            while (p < text.size() && text[p] >= '0' && text[p] <= '9') {
                v = v * 10 + uint64_t(text[p++] - '0');
            }
            return v;
        }
        at += key.size();
    }
    return std::nullopt;
}

std::optional<uint64_t> status_kib(const std::string& key) {
    auto text = slurp("/proc/self/status");
    if (!text) return std::nullopt;
    return parse_status_kib(*text, key);
}

}  // namespace

std::optional<ProcessIo> parse_process_io(const std::string& text) {
    auto rb = field(text, "read_bytes");
    auto rc = field(text, "rchar");
    if (!rb || !rc) return std::nullopt;
    return ProcessIo{*rb, *rc};
}

std::optional<uint64_t> parse_status_kib(const std::string& text, const std::string& key) {
    auto v = field(text, key);
    if (!v) return std::nullopt;
    return *v * 1024;
}

std::optional<ProcessIo> process_io() {
    auto text = slurp("/proc/self/io");
    if (!text) return std::nullopt;
    return parse_process_io(*text);
}

std::optional<uint64_t> peak_rss_bytes() {
    return status_kib("VmHWM");
}
std::optional<uint64_t> current_rss_bytes() {
    return status_kib("VmRSS");
}

bool reset_peak_rss() {
    std::ofstream out("/proc/self/clear_refs");
    if (!out) return false;
    out << "5";
    out.flush();
    return bool(out);
}

}  // namespace strata
