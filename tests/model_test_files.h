// Small model files for the model/ tests: a description of metadata and tensors that a test edits
// (drop a key, change a shape, add a tensor) and then writes with GgufWriter into a temp dir.
// Tensor data is zeros; only the metadata and the tensor table matter here.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "gguf/writer.h"
#include "test_support.h"

namespace strata::test {

struct TinySpec {
    std::string arch = "llama";
    uint32_t n_embd = 64;
    uint32_t n_layer = 2;
    uint32_t n_head = 4;
    uint32_t n_head_kv = 2;
    uint32_t n_ff = 96;
    uint32_t n_vocab = 40;
    uint32_t n_expert = 0;  // > 0: MoE layers
    uint32_t n_expert_used = 0;
    uint32_t n_ff_exp = 0;       // written as expert_feed_forward_length when > 0
    uint32_t n_ff_shexp = 0;     // > 0: a shared expert (qwen2moe)
    bool split_experts = false;  // old per-expert layout: blk.N.ffn_gate.E.weight
    bool tied = true;            // no output.weight
    bool qkv_bias = false;
    bool qk_norm = false;
    TensorType matrix_type = TensorType::F32;  // type of the 2-D/3-D weights; norms stay F32
};

struct TinyTensor {
    std::string name;
    TensorType type;
    std::vector<uint64_t> shape;
};

class TinyModel {
  public:
    std::vector<MetadataEntry> metadata;
    std::vector<TinyTensor> tensors;

    void set(const std::string& key, Value v) {
        for (auto& e : metadata) {
            if (e.key == key) {
                e.value = std::move(v);
                return;
            }
        }
        metadata.push_back({key, std::move(v)});
    }
    void erase(const std::string& key) {
        std::erase_if(metadata, [&](const MetadataEntry& e) { return e.key == key; });
    }
    void add_tensor(const std::string& name, TensorType type, std::vector<uint64_t> shape) {
        tensors.push_back({name, type, std::move(shape)});
    }
    void remove_tensor(const std::string& name) {
        std::erase_if(tensors, [&](const TinyTensor& t) { return t.name == name; });
    }
    TinyTensor* tensor(const std::string& name) {
        for (auto& t : tensors) {
            if (t.name == name) return &t;
        }
        return nullptr;
    }

    // Writes the file and reads it back; fails the test on any error.
    GgufFile write(const std::string& path) const {
        GgufWriter w;
        for (const auto& e : metadata) w.set(e.key, e.value);
        for (const auto& t : tensors) {
            auto r = w.add_tensor(t.name, t.type, t.shape);
            EXPECT_TRUE(r.ok()) << r.error().message;
        }
        auto opened = w.open(path, /*overwrite=*/true);
        EXPECT_TRUE(opened.ok()) << opened.error().message;
        std::vector<uint8_t> zeros(1 << 16, 0);
        for (const auto& t : w.tensors()) {
            for (uint64_t left = t.n_bytes; left > 0;) {
                const size_t n = static_cast<size_t>(std::min<uint64_t>(left, zeros.size()));
                EXPECT_TRUE(w.write(zeros.data(), n).ok());
                left -= n;
            }
        }
        auto fin = w.finish();
        EXPECT_TRUE(fin.ok()) << fin.error().message;
        auto f = read_gguf(path);
        EXPECT_TRUE(f.ok()) << f.error().message;
        return f.ok() ? std::move(*f) : GgufFile{};
    }
};

inline std::string blk(int layer, const std::string& base, const std::string& suffix = "weight") {
    return "blk." + std::to_string(layer) + "." + base + "." + suffix;
}

// A consistent model of the given spec: metadata as llama.cpp's converters write it (only the
// keys they always write, so that defaults are exercised) and every tensor the forward pass needs.
inline TinyModel tiny_model(const TinySpec& s) {
    TinyModel m;
    const std::string a = s.arch;
    m.set("general.architecture", a);
    m.set("general.name", "tiny-" + a);
    m.set(a + ".context_length", uint32_t{256});
    m.set(a + ".embedding_length", s.n_embd);
    m.set(a + ".block_count", s.n_layer);
    if (s.n_ff) m.set(a + ".feed_forward_length", s.n_ff);
    m.set(a + ".attention.head_count", s.n_head);
    m.set(a + ".attention.head_count_kv", s.n_head_kv);
    m.set(a + ".attention.layer_norm_rms_epsilon", 1e-6f);
    if (s.n_expert) {
        m.set(a + ".expert_count", s.n_expert);
        m.set(a + ".expert_used_count", s.n_expert_used);
    }
    if (s.n_ff_exp) m.set(a + ".expert_feed_forward_length", s.n_ff_exp);
    if (s.n_ff_shexp) m.set(a + ".expert_shared_feed_forward_length", s.n_ff_shexp);
    m.set("general.file_type", uint32_t{0});
    m.set("tokenizer.ggml.model", "llama");
    std::vector<std::string> tokens;
    for (uint32_t i = 0; i < s.n_vocab; ++i) tokens.push_back("t" + std::to_string(i));
    m.set("tokenizer.ggml.tokens", make_string_array(tokens));

    const uint64_t e = s.n_embd, hd = s.n_embd / s.n_head;
    const uint64_t q = s.n_head * hd, kv = s.n_head_kv * hd;
    const uint64_t ff_exp = s.n_ff_exp ? s.n_ff_exp : s.n_ff;
    const TensorType mt = s.matrix_type, f32 = TensorType::F32;
    m.add_tensor("token_embd.weight", mt, {e, s.n_vocab});
    m.add_tensor("output_norm.weight", f32, {e});
    if (!s.tied) m.add_tensor("output.weight", mt, {e, s.n_vocab});
    for (int il = 0; il < static_cast<int>(s.n_layer); ++il) {
        m.add_tensor(blk(il, "attn_norm"), f32, {e});
        m.add_tensor(blk(il, "attn_q"), mt, {e, q});
        m.add_tensor(blk(il, "attn_k"), mt, {e, kv});
        m.add_tensor(blk(il, "attn_v"), mt, {e, kv});
        if (s.qkv_bias) {
            m.add_tensor(blk(il, "attn_q", "bias"), f32, {q});
            m.add_tensor(blk(il, "attn_k", "bias"), f32, {kv});
            m.add_tensor(blk(il, "attn_v", "bias"), f32, {kv});
        }
        if (s.qk_norm) {
            m.add_tensor(blk(il, "attn_q_norm"), f32, {hd});
            m.add_tensor(blk(il, "attn_k_norm"), f32, {hd});
        }
        m.add_tensor(blk(il, "attn_output"), mt, {q, e});
        m.add_tensor(blk(il, "ffn_norm"), f32, {e});
        if (s.n_expert == 0) {
            m.add_tensor(blk(il, "ffn_gate"), mt, {e, s.n_ff});
            m.add_tensor(blk(il, "ffn_up"), mt, {e, s.n_ff});
            m.add_tensor(blk(il, "ffn_down"), mt, {s.n_ff, e});
            continue;
        }
        m.add_tensor(blk(il, "ffn_gate_inp"), f32, {e, s.n_expert});
        if (s.split_experts) {
            for (uint32_t x = 0; x < s.n_expert; ++x) {
                const std::string ex = "." + std::to_string(x);
                m.add_tensor(blk(il, "ffn_gate" + ex), mt, {e, ff_exp});
                m.add_tensor(blk(il, "ffn_down" + ex), mt, {ff_exp, e});
                m.add_tensor(blk(il, "ffn_up" + ex), mt, {e, ff_exp});
            }
        } else {
            m.add_tensor(blk(il, "ffn_gate_exps"), mt, {e, ff_exp, s.n_expert});
            m.add_tensor(blk(il, "ffn_down_exps"), mt, {ff_exp, e, s.n_expert});
            m.add_tensor(blk(il, "ffn_up_exps"), mt, {e, ff_exp, s.n_expert});
        }
        if (s.n_ff_shexp) {
            m.add_tensor(blk(il, "ffn_gate_inp_shexp"), f32, {e});
            m.add_tensor(blk(il, "ffn_gate_shexp"), mt, {e, s.n_ff_shexp});
            m.add_tensor(blk(il, "ffn_up_shexp"), mt, {e, s.n_ff_shexp});
            m.add_tensor(blk(il, "ffn_down_shexp"), mt, {s.n_ff_shexp, e});
        }
    }
    return m;
}

inline TinySpec llama_spec() {
    return {};
}
inline TinySpec mixtral_spec() {
    TinySpec s;
    s.n_expert = 4;
    s.n_expert_used = 2;
    return s;
}
inline TinySpec qwen2_spec() {
    TinySpec s;
    s.arch = "qwen2";
    s.qkv_bias = true;
    return s;
}
inline TinySpec qwen3_spec() {
    TinySpec s;
    s.arch = "qwen3";
    s.qk_norm = true;
    return s;
}
inline TinySpec qwen2moe_spec() {
    TinySpec s;
    s.arch = "qwen2moe";
    s.qkv_bias = true;
    s.n_ff = 0;
    s.n_expert = 4;
    s.n_expert_used = 2;
    s.n_ff_exp = 32;
    s.n_ff_shexp = 48;
    return s;
}
inline TinySpec qwen3moe_spec() {
    TinySpec s;
    s.arch = "qwen3moe";
    s.qk_norm = true;
    s.n_ff = 0;
    s.n_expert = 8;
    s.n_expert_used = 2;
    s.n_ff_exp = 32;
    return s;
}

}  // namespace strata::test
