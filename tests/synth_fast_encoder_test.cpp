// Synth's row encoders write the block types through the SIMD quantizers (quant/fast_quantize.h)
// where the CPU has them: on synth's own weights (a projection, and an embedding whose rows have
// different scales), every block type must come out as quantize_row's bytes, so a model synth
// writes is the same file on every machine.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "quant/fast_quantize.h"
#include "quant/quant.h"
#include "synth/row_encoder.h"
#include "synth/weight_init.h"

namespace strata {
namespace {

TEST(SynthFastEncoder, EveryBlockTypeGivesQuantizeRowBytesOnSynthWeights) {
    std::printf("  quantize path: %s\n",
                std::string(quant::quantize_path_name(quant::best_quantize_path())).c_str());
    constexpr uint64_t kRow = 2048, kRows = 48;
    const WeightInit inits[] = {
        {InitKind::Normal, 0.96f / 45.25f, 0, 0, 0},    // a 2048-wide projection
        {InitKind::RowScaledNormal, 0.1f, 0, 0, 0.5f},  // token_embd / output
    };
    for (const WeightInit& init : inits) {
        std::vector<float> x(kRow * kRows);
        generate_values(init, tensor_stream_key(7, "blk.3.ffn_down.weight"), 0, x.size(), kRow,
                        x.data());
        for (TensorType t : encodable_tensor_types()) {
            const auto info = tensor_type_info(t);
            if (info->block_size == 1) continue;  // F32, F16, BF16: tests in synth_row_encoder
            SCOPED_TRACE(std::string(tensor_type_name(t)));
            const uint64_t row_bytes = quant::quant_row_bytes(t, kRow).value();
            std::vector<uint64_t> want(kRows * row_bytes / 8 + 1), got(want.size());
            for (uint64_t r = 0; r < kRows; ++r) {
                quant::quantize_row(t, x.data() + r * kRow,
                                    reinterpret_cast<uint8_t*>(want.data()) + r * row_bytes, kRow);
            }
            row_encoder_for(t)->encode(x.data(), got.data(), kRows, kRow);
            EXPECT_EQ(std::memcmp(want.data(), got.data(), kRows * row_bytes), 0);
        }
    }
}

}  // namespace
}  // namespace strata
