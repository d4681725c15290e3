#include "test_support.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <vector>

#include "profile/cpu_info.h"
#include "profile/profile.h"

namespace strata::test {

namespace fs = std::filesystem;

fs::path testdata_dir() {
    if (const char* env = std::getenv("STRATA_TESTDATA")) return env;
    return fs::path(STRATA_SOURCE_DIR) / ".." / "shared" / "testdata";
}

bool have_testdata() {
    return fs::exists(testdata_dir() / "manifest.json");
}

bool testdata_required() {
    const char* ci = std::getenv("CI");
    return ci && std::string_view(ci) == "true";
}

std::string missing_testdata_message() {
    std::string m = "the test data is missing: no manifest.json in " + testdata_dir().string() +
                    " (put it at ../shared/testdata beside the repository or set STRATA_TESTDATA)";
    if (testdata_required()) m += "; CI=true requires it";
    return m;
}

std::string strata_binary() {
    return STRATA_BINARY;
}

TempDir::TempDir() {
    std::random_device rd;
    for (int attempt = 0; attempt < 100; ++attempt) {
        fs::path p = fs::temp_directory_path() /
                     ("strata-test-" + std::to_string(::getpid()) + "-" + std::to_string(rd()));
        std::error_code ec;
        if (fs::create_directory(p, ec)) {
            path_ = p;
            return;
        }
    }
    throw std::runtime_error("cannot create a temporary directory");
}

TempDir::~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
}

std::string shell_quote(const std::string& s) {
    std::string out = "'";
    for (char c : s) {
        if (c == '\'')
            out += "'\\''";
        else
            out += c;
    }
    return out + "'";
}

std::string read_text_file(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

CommandResult run_command(const std::string& command_line) {
    TempDir tmp;
    const std::string out_path = tmp.file("stdout"), err_path = tmp.file("stderr");
    const std::string full =
        command_line + " >" + shell_quote(out_path) + " 2>" + shell_quote(err_path) + " </dev/null";
    CommandResult r;
    const int status = std::system(full.c_str());
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.out = read_text_file(out_path);
    r.err = read_text_file(err_path);
    return r;
}

namespace {

// The figures the CLI tests plan with: 2 cores, 64 GiB of RAM read at 10 GB/s, no GPU, and a
// disk reading 1.5 GB/s with 1 MiB blocks at queue depth 8.
HardwareProfile fixed_profile() {
    HardwareProfile p;
    p.strata_version = STRATA_VERSION;
    p.measured_at = format_utc(unix_now());
    p.cpu = {"strata test CPU", 2, 2, {"avx2", "fma"}};
    p.memory.total = p.memory.system_total = 64ull << 30;
    p.memory.available = 48ull << 30;
    p.memory.read_bandwidth = 10e9;
    p.memory.single_thread_read_bandwidth = 6e9;
    p.memory.threads = 2;
    p.memory.buffer = 1ull << 30;
    p.gpu_note = "none in the test profile";
    // A kernel table of this machine's CPU (so that it is not measured) with no choices: every
    // product takes the best path the CPU runs, as it does with no profile.
    CpuKernelProfile kernels;
    const CpuProfile cpu = detect_cpu();
    kernels.cpu_model = cpu.model;
    kernels.simd = cpu.simd;
    kernels.threads = 2;
    p.cpu_kernels = kernels;
    std::vector<std::string> seen;
    std::error_code ec;
    for (const fs::path& dir : {fs::temp_directory_path(), testdata_dir(), fs::current_path(ec)}) {
        auto s = storage_info(dir.string());
        if (!s) continue;
        const std::string key = s->mount_point + "\n" + s->source;
        if (std::find(seen.begin(), seen.end(), key) != seen.end()) continue;
        seen.push_back(key);
        DiskProfile d;
        d.dir = dir.string();
        d.mount_point = s->mount_point;
        d.source = s->source;
        d.fs_type = s->fs_type;
        d.measured_at = p.measured_at;
        d.method = "scratch";
        d.direct = true;
        d.backend = "test";
        d.block_size = 4096;
        d.reads = {{4096, 32, 0.3e9, 73000, 0, 0}, {1u << 20, 8, 1.5e9, 1430, 0, 0}};
        p.disks.push_back(std::move(d));
    }
    return p;
}

}  // namespace

uint64_t named_minimum(const std::string& error) {
    std::smatch m;
    if (!std::regex_search(error, m, std::regex("need at least ([0-9.]+) (B|KiB|MiB|GiB)"))) {
        return 0;
    }
    const std::string unit = m[2].str();
    const double scale = unit == "GiB"   ? double(1ull << 30)
                         : unit == "MiB" ? double(1u << 20)
                         : unit == "KiB" ? 1024.0
                                         : 1.0;
    // Two decimals are printed: the figure is at most half a hundredth of the unit low.
    return uint64_t(std::ceil((std::stod(m[1].str()) + 0.005) * scale));
}

uint64_t smallest_ram(const std::string& args) {
    const CommandResult r = run_strata(args + " --ram 1K");
    const uint64_t minimum = r.exit_code == 1 ? named_minimum(r.err) : 0;
    if (minimum == 0)
        ADD_FAILURE() << "strata named no minimum budget for " << args << ":\n" << r.err;
    return minimum;
}

BudgetedRun run_near_smallest_ram(const std::string& args, uint64_t margin) {
    BudgetedRun run;
    uint64_t smallest = smallest_ram(args);
    for (int attempt = 0; attempt < 4; ++attempt) {
        run.ram = (smallest + margin + 1023) >> 10 << 10;
        run.result = run_strata(args + " --ram " + std::to_string(run.ram >> 10) + "K");
        const uint64_t named = named_minimum(run.result.err);
        if (run.result.exit_code == 0 || named == 0) break;
        smallest = named;
    }
    return run;
}

const std::string& test_cache_dir() {
    static const TempDir dir;
    static const std::string path = [] {
        const std::string file = dir.file("profile.json");
        if (auto saved = save_profile(fixed_profile(), file); !saved) {
            throw std::runtime_error(saved.error().message);
        }
        return dir.path().string();
    }();
    return path;
}

CommandResult run_strata(const std::string& args) {
    return run_command("STRATA_CACHE_DIR=" + shell_quote(test_cache_dir()) + " " +
                       shell_quote(strata_binary()) + " " + args);
}

}  // namespace strata::test
