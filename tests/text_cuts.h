// Ways of cutting a text into pieces, for tests of streaming code (stop strings, reply parsing)
// whose output must not depend on how the text arrives.
#pragma once

#include <string>
#include <vector>

namespace strata::test {

// Every way of cutting `text` into up to three pieces, plus byte by byte.
inline std::vector<std::vector<std::string>> all_cuts(const std::string& text) {
    std::vector<std::vector<std::string>> out;
    for (size_t i = 0; i <= text.size(); ++i) {
        for (size_t j = i; j <= text.size(); ++j) {
            out.push_back({text.substr(0, i), text.substr(i, j - i), text.substr(j)});
        }
    }
    std::vector<std::string> bytes;
    for (char c : text) bytes.emplace_back(1, c);
    out.push_back(bytes);
    return out;
}

}  // namespace strata::test
