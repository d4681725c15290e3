// The CUDA backend has no kernels for multi-head latent attention (deepseek2) yet: it refuses
// such a model with an error that says what to do, before it looks for a GPU, so that nothing
// crashes, and the plan keeps such models on the CPU (engine_deepseek2_test.cpp).
#include <gtest/gtest.h>

#include <string>

#include "backend/cuda/cuda_backend.h"
#include "model/rope.h"
#include "model/tensor_layout.h"
#include "synth/synth_config.h"

namespace strata {
namespace {

TEST(CudaLatentAttention, TheBackendRefusesLatentAttentionModels) {
    BackendConfig config;
    config.hp = with_layout_defaults(*synth_preset("tiny-deepseek2"));
    ASSERT_TRUE(config.hp.is_mla());
    auto rope = make_rope_config(config.hp, nullptr);
    ASSERT_TRUE(rope);
    config.rope = *rope;
    config.n_ctx = 64;
    auto backend = make_cuda_backend(config, 0);
    ASSERT_FALSE(backend);
    EXPECT_NE(backend.error().message.find("latent attention"), std::string::npos)
        << backend.error().message;
    EXPECT_NE(backend.error().message.find("--gpu-mem 0"), std::string::npos)
        << backend.error().message;
}

}  // namespace
}  // namespace strata
