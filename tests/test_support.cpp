#include "test_support.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>

namespace strata::test {

namespace fs = std::filesystem;

fs::path testdata_dir() {
    if (const char* env = std::getenv("STRATA_TESTDATA")) return env;
    return fs::path(STRATA_SOURCE_DIR) / ".." / "shared" / "testdata";
}

bool have_testdata() { return fs::exists(testdata_dir() / "manifest.json"); }

std::string strata_binary() { return STRATA_BINARY; }

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
        if (c == '\'') out += "'\\''";
        else out += c;
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
    const std::string full = command_line + " >" + shell_quote(out_path) + " 2>" +
                             shell_quote(err_path) + " </dev/null";
    CommandResult r;
    const int status = std::system(full.c_str());
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.out = read_text_file(out_path);
    r.err = read_text_file(err_path);
    return r;
}

CommandResult run_strata(const std::string& args) {
    return run_command(shell_quote(strata_binary()) + " " + args);
}

}  // namespace strata::test
