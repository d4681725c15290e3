// Shared by the engine tests: the golden model files and how closely each must match.
#pragma once

#include <string>
#include <vector>

namespace strata::test {

// The model files of ../shared/testdata that have golden outputs, by stem ("llama-dense-Q8_0").
struct GoldenModel {
    std::string stem;
    std::string path;  // relative to the testdata directory
    // Float weights (F32/F16/BF16): greedy ids must match exactly and logits closely.
    bool float_weights = false;
    bool bf16 = false;
    bool moe = false;
    bool real = false;  // the trained aidreams260K model
};
std::vector<GoldenModel> golden_models();

}  // namespace strata::test
