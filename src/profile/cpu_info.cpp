#include "profile/cpu_info.h"

#include <sched.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "util/thread_pool.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define STRATA_X86 1
#endif

namespace strata {

namespace {

std::string trim(std::string s) {
    const auto not_space = [](unsigned char c) { return !std::isspace(c); };
    s.erase(s.begin(), std::find_if(s.begin(), s.end(), not_space));
    s.erase(std::find_if(s.rbegin(), s.rend(), not_space).base(), s.end());
    return s;
}

#ifdef STRATA_X86
// XCR0: which register states the OS saves on a context switch.
uint64_t read_xcr0() {
    uint32_t lo = 0, hi = 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (static_cast<uint64_t>(hi) << 32) | lo;
}

std::string cpuid_brand() {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid(0x80000000u, &a, &b, &c, &d) || a < 0x80000004u) return {};
    char brand[49] = {};
    for (unsigned leaf = 0; leaf < 3; ++leaf) {
        __get_cpuid(0x80000002u + leaf, &a, &b, &c, &d);
        const unsigned regs[4] = {a, b, c, d};
        std::memcpy(brand + leaf * 16, regs, 16);
    }
    return trim(brand);
}
#endif

}  // namespace

std::vector<std::string> SimdFeatures::names() const {
    std::vector<std::string> out;
    const std::pair<bool, const char*> all[] = {{avx2, "avx2"},
                                                {fma, "fma"},
                                                {f16c, "f16c"},
                                                {avx512f, "avx512f"},
                                                {avx512bw, "avx512bw"},
                                                {avx512vl, "avx512vl"},
                                                {avx512vnni, "avx512_vnni"},
                                                {avx512bf16, "avx512_bf16"},
                                                {avx_vnni, "avx_vnni"}};
    for (const auto& [present, name] : all) {
        if (present) out.emplace_back(name);
    }
    return out;
}

SimdFeatures detect_simd() {
    SimdFeatures f;
#ifdef STRATA_X86
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
    const bool osxsave = c & (1u << 27);
    const bool avx_cpu = c & (1u << 28);
    if (!osxsave || !avx_cpu) return f;
    const uint64_t xcr0 = read_xcr0();
    const bool avx_os = (xcr0 & 0x6) == 0x6;       // SSE and AVX (YMM) state
    const bool avx512_os = (xcr0 & 0xE6) == 0xE6;  // plus opmask, ZMM_Hi256, Hi16_ZMM
    if (!avx_os) return f;
    f.fma = c & (1u << 12);
    f.f16c = c & (1u << 29);
    unsigned max_leaf = 0;
    __get_cpuid(0, &max_leaf, &b, &c, &d);
    if (max_leaf < 7) return f;
    unsigned eax7 = 0, ebx7 = 0, ecx7 = 0, edx7 = 0;
    __cpuid_count(7, 0, eax7, ebx7, ecx7, edx7);
    f.avx2 = ebx7 & (1u << 5);
    if (avx512_os) {
        f.avx512f = ebx7 & (1u << 16);
        f.avx512bw = f.avx512f && (ebx7 & (1u << 30));
        f.avx512vl = f.avx512f && (ebx7 & (1u << 31));
        f.avx512vnni = f.avx512f && (ecx7 & (1u << 11));
    }
    if (eax7 >= 1) {  // leaf 7 reports its highest subleaf in EAX
        unsigned eax71 = 0, ebx71 = 0, ecx71 = 0, edx71 = 0;
        __cpuid_count(7, 1, eax71, ebx71, ecx71, edx71);
        f.avx_vnni = eax71 & (1u << 4);
        f.avx512bf16 = avx512_os && f.avx512f && (eax71 & (1u << 5));
    }
#endif
    return f;
}

std::string cpu_model_name() {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line)) {
        const auto colon = line.find(':');
        if (colon == std::string::npos) continue;
        const std::string key = trim(line.substr(0, colon));
        if (key == "model name" || key == "Model" || key == "cpu model") {
            const std::string value = trim(line.substr(colon + 1));
            if (!value.empty()) return value;
        }
    }
#ifdef STRATA_X86
    if (std::string brand = cpuid_brand(); !brand.empty()) return brand;
#endif
    return "unknown";
}

int logical_cpu_count() {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
    return std::max(1u, std::thread::hardware_concurrency());
}

uint64_t last_level_cache_bytes() {
    namespace fs = std::filesystem;
    uint64_t largest = 0;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator("/sys/devices/system/cpu/cpu0/cache", ec)) {
        std::ifstream in(entry.path() / "size");
        std::string text;
        if (!(in >> text) || text.empty()) continue;
        uint64_t value = std::strtoull(text.c_str(), nullptr, 10);
        switch (text.back()) {
            case 'K':
                value <<= 10;
                break;
            case 'M':
                value <<= 20;
                break;
            case 'G':
                value <<= 30;
                break;
            default:
                break;
        }
        largest = std::max(largest, value);
    }
    return largest;
}

CpuProfile detect_cpu() {
    CpuProfile p;
    p.model = cpu_model_name();
    p.physical_cores = physical_core_count();
    p.logical_cpus = logical_cpu_count();
    p.simd = detect_simd().names();
    return p;
}

}  // namespace strata
