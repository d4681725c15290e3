// The attention half of the CUDA backend (kv_cache_gpu, rope_kv, attention) against the CPU
// backend's own functions (cpu::KvCache, cpu::attention, rope_angles / rope_apply,
// cpu::rms_norm_row) on fresh random data.
//
// KV store. With the identity rotation (n_rot = 0, no norms) the GPU cache must hold, bit for
// bit, what cpu::KvCache holds: F16 rounds to nearest even on both sides, and Q8_0 follows
// quantize_row's arithmetic (d = amax / 127, codes round(x * (1/d)) half away from zero). Its
// size must be the plan's kv_cache_bytes.
//
// Rope. Both sides compute every angle by the same float operations (the same repeated
// multiplication for theta, the same YaRN mix), so they differ only by cosf / sinf (CUDA: 2 ulp,
// glibc: 1 ulp) and the roundings after them. With ulp = 2^-23 (of a value below 1) and the
// magnitude scale mscale: cos and sin differ by 3 ulp, and by 1 more after the mscale product
// rounds on each side; the products and the difference of the rotation round on each side
// (1.5 ulp of the result); the norm's scale (squares summed in double on both sides) is at most
// 1 ulp apart, 2 ulp on the normed value. A rotated pair (a, b) is then within
//     7.5 * ulp * mscale * (|x_a| + |x_b|)          (checked with 10)
// and an unrotated dimension within 3 ulp |x| (checked with 4). The cache stores those values
// rounded: F16 adds one fp16 rounding on each side (2^-11 |x| each, or 2^-25 below the normal
// range); a Q8_0 value is within 0.5 d + 127 * 2^-11 d (half a step, plus the fp16 rounding
// of d) of the float it came from, so the two sides are within 1.13 max(d) plus the difference
// of the floats. Values pass no rotation: they must be stored bit for bit alike.
//
// Attention. Both caches are filled with the same keys and values and both get the same queries
// (the identity rotation), so the query the dot products use is also the same on both sides
// (rounded to fp16 for F16 caches; quantized to Q8_0 blocks, identically, for Q8_0 caches).
// With u = 2^-24 and, per query row, s_p = scale q.k_p and S_p = scale Σ_i |q_i k_p,i|:
//   - the CPU's score is within (hd_k + 2) u S_p of exact (fp32 accumulation and the scale
//     product), the GPU's within twice that (tensor cores may truncate their fp32 additions),
//     and s_p - max rounds once more on each side, so the scores differ by
//     δ <= 3 (hd_k + 2) u max_p S_p + 4 u max_p |s_p|;
//   - a softmax weight then moves by a factor within e^{±2δ}, by the exponentials (1 ulp on the
//     CPU, 2 on the GPU: 6u) and by the rescales of the online softmax and the split combine
//     (one rounding each per tile and per split: at most ceil(L / 16) + 256, plus 4);
//   - fp32 sums over the L positions (γ_L = L u / (1 - L u)): the GPU's normaliser (γ_L), the
//     value sums (CPU γ_L, GPU 2 γ_L with truncating tensor-core additions): 4 γ_L;
//   - F16 caches: the CPU rounds the normalised weights to fp16 before the value product, the
//     tensor-core kernel the unnormalised ones: 2^-11 relative each, or 2^-25 absolute each
//     below fp16's normal range (the GPU divides by a sum >= 1 afterwards).
// So an output element o_d is within
//     (e^{2δ} - 1 + 6u + 4 γ_L + 2 (ceil(L/16) + 260) u + [F16] 2^-10) A_d + [F16] 2^-24 B_d
// where A_d = Σ_p w_p |v_p,d| and B_d = Σ_p |v_p,d|, computed here in double from the cache
// contents: under 3e-3 A_d at L = 5001, far below what a wrong position, head or scale costs.
// Attention spread evenly over thousands of positions would hide one lost position inside that
// bound, so the cases also run with queries 8 times larger, whose softmax peaks on a few
// positions: a kernel that skips or misplaces one of those is off by the size of a value.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/attention.h"
#include "backend/cpu/kv_cache.h"
#include "backend/cpu/ops.h"
#include "backend/cuda/attention.h"
#include "backend/cuda/kv_cache_gpu.h"
#include "backend/cuda/rope_kv.h"
#include "engine_test_support.h"
#include "gpu/gpu.h"
#include "model/kv_layout.h"
#include "model/rope.h"
#include "quant/blocks.h"
#include "quant/float_formats.h"
#include "quant/quant.h"
#include "test_support.h"
#include "util/thread_pool.h"

namespace strata {
namespace {

using cuda::GpuAttention;
using cuda::GpuKvCache;
using cuda::GpuRope;

// The kernels launch as a backend with the default settings launches them.
constexpr Pdl kPdl = Tuning{}.pdl;

constexpr double kU = 0x1p-24;  // fp32 unit roundoff
constexpr double kUlp = 0x1p-23;

const char* type_name(KvType t) {
    return t == KvType::F16 ? "f16" : "q8_0";
}

// Device memory holding a vector of T.
template <class T>
class DeviceArray {
  public:
    explicit DeviceArray(size_t n) : n_(n) {
        auto b = gpu::DeviceBuffer::allocate(std::max<size_t>(n, 1) * sizeof(T));
        EXPECT_TRUE(b) << (b ? "" : b.error().message);
        if (b) buf_ = std::move(*b);
    }
    explicit DeviceArray(const std::vector<T>& host) : DeviceArray(host.size()) { upload(host); }
    void upload(const std::vector<T>& host) {
        EXPECT_TRUE(gpu::copy(buf_.data(), host.data(), host.size() * sizeof(T),
                              gpu::CopyKind::HostToDevice));
    }
    std::vector<T> download() const {
        std::vector<T> h(n_);
        EXPECT_TRUE(gpu::copy(h.data(), buf_.data(), n_ * sizeof(T), gpu::CopyKind::DeviceToHost));
        return h;
    }
    T* get() const { return reinterpret_cast<T*>(buf_.data()); }

  private:
    size_t n_;
    gpu::DeviceBuffer buf_;
};

template <class T>
std::vector<T> download(const void* device, size_t n) {
    std::vector<T> h(n);
    EXPECT_TRUE(gpu::copy(h.data(), device, n * sizeof(T), gpu::CopyKind::DeviceToHost));
    return h;
}

using test::attention_hparams;

std::vector<float> randn(size_t n, float sigma, std::mt19937& rng) {
    std::normal_distribution<float> nd(0.0f, sigma);
    std::vector<float> x(n);
    for (float& v : x) v = nd(rng);
    return x;
}

// One element of a cache: its value and the bits it is stored as.
struct Element {
    float value = 0;
    uint16_t f16 = 0;    // F16: the half
    int code = 0;        // Q8_0: the int8 code
    uint16_t scale = 0;  // Q8_0: the block's fp16 scale
};

Element row_element(KvType t, const std::byte* row, int i) {
    Element e;
    if (t == KvType::F16) {
        std::memcpy(&e.f16, row + 2 * size_t(i), 2);
        e.value = quant::fp16_to_fp32(e.f16);
    } else {
        quant::BlockQ8_0 b;
        std::memcpy(&b, row + size_t(i / 32) * sizeof(b), sizeof(b));
        e.code = b.qs[i % 32];
        e.scale = b.d;
        e.value = float(b.qs[i % 32]) * quant::fp16_to_fp32(b.d);
    }
    return e;
}

// Key or value element (KV head h, position p, dimension d) of cpu::KvCache.
Element cpu_key(const cpu::KvCache& kv, int layer, int hd_k, int h, int p, int d) {
    return row_element(kv.type(), kv.key_row(layer, p), h * hd_k + d);
}
Element cpu_value(const cpu::KvCache& kv, int layer, int hd_v, int h, int p, int d) {
    if (kv.values_transposed())
        return row_element(KvType::F16, kv.value_row(layer, h * hd_v + d), p);
    return row_element(kv.type(), kv.value_row(layer, p), h * hd_v + d);
}

// A plane of the GPU cache copied to the host, read as kv_cache_gpu.h lays it out.
struct HostPlane {
    bool q8 = false;
    int n_ctx = 0, hd = 0;
    std::vector<uint8_t> data;
    std::vector<uint16_t> scales;

    Element at(int h, int p, int d) const {
        const size_t i = (size_t(h) * size_t(n_ctx) + size_t(p)) * size_t(hd) + size_t(d);
        Element e;
        if (!q8) {
            std::memcpy(&e.f16, &data[2 * i], 2);
            e.value = quant::fp16_to_fp32(e.f16);
        } else {
            e.code = int8_t(data[i]);
            e.scale = scales[i / 32];  // hd is a multiple of 32: blocks never straddle rows
            e.value = float(int8_t(data[i])) * quant::fp16_to_fp32(e.scale);
        }
        return e;
    }
};

HostPlane copy_plane(const GpuKvCache& kv, const cuda::GpuKvPlane& plane, int n_head_kv) {
    HostPlane h;
    h.q8 = kv.type() == KvType::Q8_0;
    h.n_ctx = int(kv.n_ctx());
    h.hd = plane.head_dim;
    const size_t elems = size_t(n_head_kv) * size_t(h.n_ctx) * size_t(h.hd);
    h.data = download<uint8_t>(plane.data, elems * (h.q8 ? 1 : 2));
    if (h.q8) h.scales = download<uint16_t>(plane.scales, elems / 32);
    return h;
}

// The CPU backend's rope_store_kv (cpu_backend.cpp), on host arrays.
void cpu_rope_store(const RopeConfig& rc, cpu::KvCache& kv, int layer, int n_head, int n_head_kv,
                    int hd_k, int hd_v, float* q, float* k, const float* v, const float* qn,
                    const float* kn, float eps, int64_t n, int64_t pos0) {
    std::vector<float> c(size_t(rc.n_rot / 2 + 1)), s(size_t(rc.n_rot / 2 + 1));
    for (int64_t t = 0; t < n; ++t) {
        float* qt = q + t * n_head * hd_k;
        float* kt = k + t * n_head_kv * hd_k;
        for (int h = 0; h < n_head && qn; ++h) {
            cpu::rms_norm_row(qt + h * hd_k, qn, qt + h * hd_k, hd_k, eps);
        }
        for (int h = 0; h < n_head_kv && kn; ++h) {
            cpu::rms_norm_row(kt + h * hd_k, kn, kt + h * hd_k, hd_k, eps);
        }
        rope_angles(rc, pos0 + t, c.data(), s.data());
        rope_apply(rc, qt, n_head, hd_k, c.data(), s.data());
        rope_apply(rc, kt, n_head_kv, hd_k, c.data(), s.data());
        kv.store(layer, pos0 + t, kt, v + t * n_head_kv * hd_v);
    }
}

// ---- the cache ------------------------------------------------------------------------------

TEST(GpuKvCache, RejectsHeadSizesItCannotStore) {
    // Checked before anything touches a GPU, so this runs everywhere.
    EXPECT_FALSE(GpuKvCache::create(attention_hparams(8, 2, 80, 80), 64, KvType::Q8_0));  // not 32k
    EXPECT_FALSE(GpuKvCache::create(attention_hparams(8, 2, 36, 36), 64, KvType::F16));   // not 8k
    EXPECT_FALSE(GpuKvCache::create(attention_hparams(8, 2, 288, 288), 64, KvType::F16));  // > 256
    EXPECT_FALSE(GpuKvCache::create(attention_hparams(8, 2, 64, 64), 0, KvType::F16));
}

TEST(GpuKvCache, TakesThePlansBytes) {
    STRATA_REQUIRE_GPU();
    for (KvType type : {KvType::F16, KvType::Q8_0}) {
        SCOPED_TRACE(type_name(type));
        const ModelHparams hp = attention_hparams(14, 2, 64, 96, 3);
        for (uint32_t n_ctx : {1u, 100u, 4096u}) {
            auto all = GpuKvCache::create(hp, n_ctx, type);
            ASSERT_TRUE(all) << all.error().message;
            EXPECT_EQ(all->bytes(), kv_cache_bytes(hp, n_ctx, type));
            // Only layer 1 held: one layer's share, and nothing for the others.
            auto one = GpuKvCache::create(hp, n_ctx, type, {false, true, false});
            ASSERT_TRUE(one) << one.error().message;
            EXPECT_EQ(one->bytes(),
                      kv_cache_bytes(attention_hparams(14, 2, 64, 96, 1), n_ctx, type));
            EXPECT_FALSE(one->layer(0).held);
            EXPECT_TRUE(one->layer(1).held);
            EXPECT_EQ(one->layer(2).k.data, nullptr);
        }
    }
}

// ---- rope and the store -----------------------------------------------------------------------

TEST(CudaRopeStoreKv, IdentityStoreIsBitExact) {
    STRATA_REQUIRE_GPU();
    struct Shape {
        int n_head, n_head_kv, hd_k, hd_v;
    };
    for (const Shape sh : {Shape{32, 8, 128, 128}, Shape{14, 2, 64, 64}, Shape{8, 4, 192, 128},
                           Shape{6, 2, 96, 256}}) {
        for (KvType type : {KvType::F16, KvType::Q8_0}) {
            SCOPED_TRACE(std::to_string(sh.hd_k) + "/" + std::to_string(sh.hd_v) + " " +
                         type_name(type));
            const ModelHparams hp = attention_hparams(sh.n_head, sh.n_head_kv, sh.hd_k, sh.hd_v);
            const int n_ctx = 64, pos0 = 5, n = 37, layer = 1;
            auto gkv = GpuKvCache::create(hp, n_ctx, type);
            auto ckv = cpu::KvCache::create(hp, n_ctx, type);
            ASSERT_TRUE(gkv && ckv);
            auto rope = GpuRope::create(RopeConfig{});  // n_rot = 0: no rotation
            ASSERT_TRUE(rope) << rope.error().message;

            std::mt19937 rng(11);
            const size_t dq = size_t(sh.n_head * sh.hd_k), dk = size_t(sh.n_head_kv * sh.hd_k),
                         dv = size_t(sh.n_head_kv * sh.hd_v);
            std::vector<float> q = randn(n * dq, 1.0f, rng), k = randn(n * dk, 1.0f, rng),
                               v = randn(n * dv, 1.0f, rng);
            // Blocks of zeros (scale 0), and blocks a thousand times larger and smaller.
            std::fill(k.begin() + 32, k.begin() + 64, 0.0f);
            for (size_t i = 64; i < 96; ++i) k[i] *= 1000.0f;
            for (size_t i = 0; i < 32; ++i) v[i] *= 0.001f;

            DeviceArray<float> dq_(q), dk_(k), dv_(v);
            DeviceArray<int32_t> dpos(std::vector<int32_t>{pos0});
            cuda::rope_store_kv(*rope, *gkv, layer, sh.n_head, sh.n_head_kv, sh.hd_k, sh.hd_v,
                                dq_.get(), dk_.get(), dv_.get(), nullptr, nullptr, 1e-6f, n,
                                dpos.get(), nullptr, kPdl);
            ASSERT_TRUE(gpu::synchronize());
            for (int64_t t = 0; t < n; ++t) {
                ckv->store(layer, pos0 + t, &k[size_t(t) * dk], &v[size_t(t) * dv]);
            }
            EXPECT_EQ(dq_.download(), q);  // the identity leaves q and k as they were
            EXPECT_EQ(dk_.download(), k);

            const cuda::GpuKvLayer& L = gkv->layer(layer);
            const HostPlane gk = copy_plane(*gkv, L.k, sh.n_head_kv);
            const HostPlane gv = copy_plane(*gkv, L.v, sh.n_head_kv);
            int bad = 0;
            for (int h = 0; h < sh.n_head_kv; ++h) {
                for (int p = 0; p < n_ctx; ++p) {
                    const bool stored = p >= pos0 && p < pos0 + n;
                    for (int d = 0; d < std::max(sh.hd_k, sh.hd_v); ++d) {
                        for (int plane = 0; plane < 2; ++plane) {
                            if (d >= (plane == 0 ? sh.hd_k : sh.hd_v)) continue;
                            const Element g = plane == 0 ? gk.at(h, p, d) : gv.at(h, p, d);
                            Element c;  // zeros: positions never written stay as created
                            if (stored) {
                                c = plane == 0 ? cpu_key(*ckv, layer, sh.hd_k, h, p, d)
                                               : cpu_value(*ckv, layer, sh.hd_v, h, p, d);
                            }
                            if (g.f16 != c.f16 || g.code != c.code || g.scale != c.scale) {
                                if (++bad <= 5) {
                                    ADD_FAILURE() << (plane == 0 ? "key" : "value") << " head " << h
                                                  << " pos " << p << " dim " << d << ": gpu "
                                                  << g.value << " cpu " << c.value;
                                }
                            }
                        }
                    }
                }
            }
            EXPECT_EQ(bad, 0);
        }
    }
}

struct RopeCase {
    const char* name;
    RopeStyle style;
    int n_rot;
    float freq_base;
    const char* scaling;  // rope_scaling.type
    float factor;
    bool random_freq_factors;
    bool norms;
};

class CudaRope : public ::testing::TestWithParam<RopeCase> {};

TEST_P(CudaRope, MatchesCpuRopeNormsAndStore) {
    STRATA_REQUIRE_GPU();
    const RopeCase rcase = GetParam();
    const int n_head = 6, n_head_kv = 2, hd_k = 128, hd_v = 64, layer = 0, n = 3;
    const uint32_t n_ctx = 131072;
    ModelHparams hp = attention_hparams(n_head, n_head_kv, hd_k, hd_v, 1);
    hp.n_rot = uint32_t(rcase.n_rot);
    hp.rope_style = rcase.style;
    hp.rope_freq_base = rcase.freq_base;
    hp.rope_scaling.type = rcase.scaling;
    hp.rope_scaling.factor = rcase.factor;
    hp.rope_scaling.original_context = 4096;
    hp.rope_scaling.attn_factor = std::string(rcase.scaling) == "yarn" ? 0.9f : 1.0f;
    auto rc = make_rope_config(hp, nullptr);
    ASSERT_TRUE(rc) << rc.error().message;
    std::mt19937 rng(3);
    if (rcase.random_freq_factors) {
        std::uniform_real_distribution<float> f(1.0f, 8.0f);
        rc->freq_factors.resize(size_t(rcase.n_rot / 2));
        for (float& x : rc->freq_factors) x = f(rng);
    }
    float mscale = rc->attn_factor;
    if (rc->ext_factor != 0.0f) mscale *= 1.0f + 0.1f * std::log(1.0f / rc->freq_scale);
    auto rope = GpuRope::create(*rc);
    ASSERT_TRUE(rope) << rope.error().message;

    for (KvType type : {KvType::F16, KvType::Q8_0}) {
        SCOPED_TRACE(type_name(type));
        auto gkv = GpuKvCache::create(hp, n_ctx, type);
        auto ckv = cpu::KvCache::create(hp, n_ctx, type);
        ASSERT_TRUE(gkv && ckv);
        const std::vector<float> qn = randn(size_t(hd_k), 0.5f, rng),
                                 kn = randn(size_t(hd_k), 0.5f, rng);
        DeviceArray<float> dqn(qn), dkn(kn);
        for (int64_t pos0 :
             {int64_t(0), int64_t(1), int64_t(100), int64_t(5000), int64_t(n_ctx) - n}) {
            SCOPED_TRACE("pos0 " + std::to_string(pos0));
            const size_t dq = size_t(n_head * hd_k), dk = size_t(n_head_kv * hd_k),
                         dv = size_t(n_head_kv * hd_v);
            const std::vector<float> q0 = randn(n * dq, 2.0f, rng), k0 = randn(n * dk, 2.0f, rng),
                                     v = randn(n * dv, 1.0f, rng);
            std::vector<float> q = q0, k = k0;
            DeviceArray<float> dq_(q), dk_(k), dv_(v);
            DeviceArray<int32_t> dpos(std::vector<int32_t>{int32_t(pos0)});
            const float* gqn = rcase.norms ? dqn.get() : nullptr;
            const float* gkn = rcase.norms ? dkn.get() : nullptr;
            cuda::rope_store_kv(*rope, *gkv, layer, n_head, n_head_kv, hd_k, hd_v, dq_.get(),
                                dk_.get(), dv_.get(), gqn, gkn, hp.rms_eps, n, dpos.get(), nullptr,
                                kPdl);
            ASSERT_TRUE(gpu::synchronize());
            cpu_rope_store(*rc, *ckv, layer, n_head, n_head_kv, hd_k, hd_v, q.data(), k.data(),
                           v.data(), rcase.norms ? qn.data() : nullptr,
                           rcase.norms ? kn.data() : nullptr, hp.rms_eps, n, pos0);
            const std::vector<float> gq = dq_.download(), gk = dk_.download();

            // The normed inputs of the rotation, for the bound.
            auto normed = [&](std::vector<float> x, const std::vector<float>& w, int heads) {
                for (int64_t r = 0; r < n * heads && rcase.norms; ++r) {
                    cpu::rms_norm_row(&x[size_t(r) * hd_k], w.data(), &x[size_t(r) * hd_k], hd_k,
                                      hp.rms_eps);
                }
                return x;
            };
            const std::vector<float> xq = normed(q0, qn, n_head), xk = normed(k0, kn, n_head_kv);
            // Bound of element i of a head row x (see the top of the file).
            auto tol = [&](const float* x, int i) {
                const int half = rc->n_rot / 2;
                if (i >= rc->n_rot) return (rcase.norms ? 4 : 0) * kUlp * std::fabs(x[i]);
                const int pair = rc->style == RopeStyle::Neox ? i % half : i / 2;
                const int a = rc->style == RopeStyle::Neox ? pair : 2 * pair;
                const int b = rc->style == RopeStyle::Neox ? pair + half : 2 * pair + 1;
                return 10 * kUlp * double(mscale) * (std::fabs(x[a]) + std::fabs(x[b]));
            };
            int bad = 0;
            auto check = [&](const std::vector<float>& got, const std::vector<float>& want,
                             const std::vector<float>& x, const char* what) {
                for (size_t i = 0; i < got.size(); ++i) {
                    const double bound = tol(&x[i / hd_k * hd_k], int(i % hd_k));
                    if (std::fabs(double(got[i]) - want[i]) > bound && ++bad <= 5) {
                        ADD_FAILURE() << what << "[" << i << "]: gpu " << got[i] << " cpu "
                                      << want[i] << " bound " << bound;
                    }
                }
            };
            check(gq, q, xq, "q");
            check(gk, k, xk, "k");

            const cuda::GpuKvLayer& L = gkv->layer(layer);
            const HostPlane pk = copy_plane(*gkv, L.k, n_head_kv);
            const HostPlane pv = copy_plane(*gkv, L.v, n_head_kv);
            for (int t = 0; t < n; ++t) {
                const int p = int(pos0) + t;
                for (int h = 0; h < n_head_kv; ++h) {
                    const float* xrow = &xk[(size_t(t) * n_head_kv + size_t(h)) * hd_k];
                    for (int d = 0; d < hd_k; ++d) {
                        const Element g = pk.at(h, p, d);
                        const Element c = cpu_key(*ckv, layer, hd_k, h, p, d);
                        const double floats = tol(xrow, d);
                        const double mag = std::max(std::fabs(g.value), std::fabs(c.value));
                        const double bound =
                            type == KvType::F16
                                ? floats + 0x1p-10 * mag + 0x1p-24
                                : floats + 1.13 * std::max(quant::fp16_to_fp32(g.scale),
                                                           quant::fp16_to_fp32(c.scale));
                        if (std::fabs(double(g.value) - c.value) > bound && ++bad <= 5) {
                            ADD_FAILURE()
                                << "cached key head " << h << " pos " << p << " dim " << d
                                << ": gpu " << g.value << " cpu " << c.value << " bound " << bound;
                        }
                    }
                    for (int d = 0; d < hd_v; ++d) {
                        const Element g = pv.at(h, p, d);
                        const Element c = cpu_value(*ckv, layer, hd_v, h, p, d);
                        if ((g.f16 != c.f16 || g.code != c.code || g.scale != c.scale) &&
                            ++bad <= 5) {
                            ADD_FAILURE() << "cached value head " << h << " pos " << p << " dim "
                                          << d << ": gpu " << g.value << " cpu " << c.value;
                        }
                    }
                }
            }
            EXPECT_EQ(bad, 0);
        }
    }
}

INSTANTIATE_TEST_SUITE_P(
    Variants, CudaRope,
    ::testing::Values(
        RopeCase{"normal", RopeStyle::Normal, 128, 10000.0f, "none", 1, false, false},
        RopeCase{"neox_norms", RopeStyle::Neox, 128, 1e6f, "none", 1, false, true},
        RopeCase{"normal_half", RopeStyle::Normal, 64, 10000.0f, "none", 1, false, true},
        RopeCase{"neox_half_factors", RopeStyle::Neox, 64, 5e5f, "none", 1, true, false},
        RopeCase{"llama3", RopeStyle::Normal, 128, 5e5f, "llama3", 8, false, false},
        RopeCase{"linear", RopeStyle::Neox, 128, 10000.0f, "linear", 2, false, false},
        RopeCase{"yarn_normal", RopeStyle::Normal, 128, 10000.0f, "yarn", 4, false, true},
        RopeCase{"yarn_neox_factors", RopeStyle::Neox, 128, 1e6f, "yarn", 32, true, false}),
    [](const ::testing::TestParamInfo<RopeCase>& i) { return std::string(i.param.name); });

// ---- attention --------------------------------------------------------------------------------

struct AttnShape {
    int n_head, n_head_kv, hd_k, hd_v;
    bool q8;            // the head sizes suit a Q8_0 cache too
    bool long_prompts;  // also 512-token batches (the CPU reference is slow for every shape)
};

std::string shape_name(const AttnShape& s) {
    return std::to_string(s.n_head) + "x" + std::to_string(s.n_head_kv) + "_" +
           std::to_string(s.hd_k) + "_" + std::to_string(s.hd_v);
}

// Per output element of every row, the bound derived at the top of the file, from the cache
// contents as the CPU holds them (keys K[h][p][i], values V[h][p][d], positions 0..P-1).
std::vector<double> attention_bounds(const AttnShape& s, KvType type, const std::vector<float>& K,
                                     const std::vector<float>& V, int P,
                                     const std::vector<float>& q, int64_t n, int64_t pos0,
                                     float scale, ThreadPool& pool) {
    const int group = s.n_head / s.n_head_kv;
    std::vector<double> bound(size_t(n) * s.n_head * s.hd_v);
    pool.parallel_for(n * s.n_head, 1, [&](int64_t begin, int64_t end, int) {
        std::vector<float> qt(size_t(s.hd_k));
        std::vector<quant::BlockQ8_0> blocks(size_t(s.hd_k / 32 + 1));
        std::vector<double> w;
        for (int64_t row = begin; row < end; ++row) {
            const int64_t t = row / s.n_head;
            const int head = int(row % s.n_head), h = head / group;
            const float* qrow = &q[size_t(row) * s.hd_k];
            // The query as both sides' dot products take it.
            if (type == KvType::F16) {
                for (int i = 0; i < s.hd_k; ++i) {
                    qt[size_t(i)] = quant::fp16_to_fp32(quant::fp32_to_fp16(qrow[i]));
                }
            } else {
                quant::quantize_row_activations(TensorType::Q8_0, qrow, blocks.data(), s.hd_k);
                quant::dequantize_row(TensorType::Q8_0, blocks.data(), qt.data(), s.hd_k);
            }
            const int64_t L = std::min<int64_t>(pos0 + t + 1, P);  // the cases stay within P
            w.assign(size_t(L), 0.0);
            double max_s = -1e300, max_abs_s = 0, max_S = 0;
            for (int64_t p = 0; p < L; ++p) {
                const float* kp = &K[(size_t(h) * P + size_t(p)) * s.hd_k];
                double dot = 0, abs = 0;
                for (int i = 0; i < s.hd_k; ++i) {
                    dot += double(qt[size_t(i)]) * kp[i];
                    abs += std::fabs(double(qt[size_t(i)]) * kp[i]);
                }
                w[size_t(p)] = scale * dot;
                max_s = std::max(max_s, w[size_t(p)]);
                max_abs_s = std::max(max_abs_s, std::fabs(w[size_t(p)]));
                max_S = std::max(max_S, scale * abs);
            }
            double z = 0;
            for (double& x : w) z += (x = std::exp(x - max_s));
            for (double& x : w) x /= z;
            const double delta = 3 * (s.hd_k + 2) * kU * max_S + 4 * kU * max_abs_s;
            const double gamma = double(L) * kU / (1 - double(L) * kU);
            const bool f16 = type == KvType::F16;
            const double rel = std::expm1(2 * delta) + 6 * kU + 4 * gamma +
                               2 * double((L + 15) / 16 + 260) * kU + (f16 ? 0x1p-10 : 0.0);
            double* b = &bound[size_t(row) * s.hd_v];
            for (int d = 0; d < s.hd_v; ++d) {
                double a = 0, sum_abs = 0;
                for (int64_t p = 0; p < L; ++p) {
                    const double vd = std::fabs(V[(size_t(h) * P + size_t(p)) * s.hd_v + d]);
                    a += w[size_t(p)] * vd;
                    sum_abs += vd;
                }
                b[d] = rel * a + (f16 ? 0x1p-24 * sum_abs : 0.0);
            }
        }
    });
    return bound;
}

class CudaAttention : public ::testing::TestWithParam<AttnShape> {};

TEST_P(CudaAttention, MatchesCpuAttention) {
    STRATA_REQUIRE_GPU();
    const AttnShape s = GetParam();
    const int layer = 1;
    const int P = 5001;  // positions filled: decode up to position 5000
    const uint32_t n_ctx = 5120;
    const float scale = 1.0f / std::sqrt(float(s.hd_k));
    const ModelHparams hp = attention_hparams(s.n_head, s.n_head_kv, s.hd_k, s.hd_v);
    ThreadPool pool(0);
    auto attention = GpuAttention::create(hp, n_ctx, 512, kPdl);
    ASSERT_TRUE(attention) << attention.error().message;
    auto identity = GpuRope::create(RopeConfig{});
    ASSERT_TRUE(identity);

    std::vector<KvType> types = {KvType::F16};
    if (s.q8) types.push_back(KvType::Q8_0);
    for (KvType type : types) {
        SCOPED_TRACE(type_name(type));
        auto gkv = GpuKvCache::create(hp, n_ctx, type);
        auto ckv = cpu::KvCache::create(hp, n_ctx, type);
        ASSERT_TRUE(gkv && ckv);
        // The same keys and values into both caches: positions 0..P-1 of the layer.
        std::mt19937 rng(uint32_t(7 + s.hd_k + s.n_head));
        const size_t dk = size_t(s.n_head_kv * s.hd_k), dv = size_t(s.n_head_kv * s.hd_v);
        {
            const std::vector<float> k = randn(size_t(P) * dk, 1.0f, rng),
                                     v = randn(size_t(P) * dv, 1.0f, rng);
            for (int p = 0; p < P; ++p)
                ckv->store(layer, p, &k[size_t(p) * dk], &v[size_t(p) * dv]);
            DeviceArray<float> gk(k), gv(v);
            DeviceArray<int32_t> zero(std::vector<int32_t>{0});
            cuda::rope_store_kv(*identity, *gkv, layer, 0, s.n_head_kv, s.hd_k, s.hd_v, nullptr,
                                gk.get(), gv.get(), nullptr, nullptr, 1e-6f, P, zero.get(), nullptr,
                                kPdl);
            ASSERT_TRUE(gpu::synchronize());
        }
        // The cache contents as floats, [h][p][d], for the bounds.
        std::vector<float> K(size_t(s.n_head_kv) * P * s.hd_k), V(size_t(s.n_head_kv) * P * s.hd_v);
        for (int h = 0; h < s.n_head_kv; ++h) {
            for (int p = 0; p < P; ++p) {
                for (int d = 0; d < s.hd_k; ++d) {
                    K[(size_t(h) * P + p) * s.hd_k + d] =
                        cpu_key(*ckv, layer, s.hd_k, h, p, d).value;
                }
                for (int d = 0; d < s.hd_v; ++d) {
                    V[(size_t(h) * P + p) * s.hd_v + d] =
                        cpu_value(*ckv, layer, s.hd_v, h, p, d).value;
                }
            }
        }

        struct Case {
            int64_t n, pos0;
            float sigma;  // query scale: 8 peaks the softmax on a few positions
        };
        std::vector<Case> cases = {{1, 0, 1},    {1, 1, 1},    {1, 100, 1},  {1, 5000, 1},
                                   {1, 100, 8},  {1, 5000, 8}, {2, 300, 1},  {3, 300, 1},
                                   {7, 0, 1},    {7, 300, 1},  {64, 0, 1},   {64, 300, 1},
                                   {64, 300, 8}, {1, 300, 1},  {33, 4000, 8}};
        if (s.long_prompts) {
            cases.push_back({512, 0, 1});
            cases.push_back({512, 300, 1});
            cases.push_back({512, 300, 8});
        }
        for (const Case& c : cases) {
            SCOPED_TRACE("n " + std::to_string(c.n) + " pos0 " + std::to_string(c.pos0) +
                         " sigma " + std::to_string(int(c.sigma)));
            const std::vector<float> q = randn(size_t(c.n * s.n_head * s.hd_k), c.sigma, rng);
            const size_t out_n = size_t(c.n * s.n_head * s.hd_v);
            std::vector<float> want(out_n);
            cpu::attention(*ckv, layer,
                           cpu::AttentionShape{s.n_head, s.n_head_kv, s.hd_k, s.hd_v, scale},
                           q.data(), c.n, c.pos0, want.data(), pool);
            const std::vector<double> bound =
                attention_bounds(s, type, K, V, P, q, c.n, c.pos0, scale, pool);

            DeviceArray<float> gq(q), gout(out_n);
            DeviceArray<int32_t> gpos(std::vector<int32_t>{int32_t(c.pos0)});
            // As a prompt batch launches it (bound: its own end), and as a captured decode
            // graph does (bound: the whole context).
            for (int64_t kv_bound : {c.pos0 + c.n, int64_t(n_ctx)}) {
                const auto shape = attention->launch_shape(type, s.n_head, s.n_head_kv, s.hd_k,
                                                           s.hd_v, c.n, kv_bound);
                SCOPED_TRACE("kv_bound " + std::to_string(kv_bound) + ": rows " +
                             std::to_string(shape.rows) + " tile " + std::to_string(shape.tile) +
                             " splits " + std::to_string(shape.max_splits) +
                             (shape.tensor_cores ? " (tensor cores)" : ""));
                EXPECT_TRUE(gpu::copy(gout.get(), std::vector<float>(out_n, NAN).data(),
                                      out_n * sizeof(float), gpu::CopyKind::HostToDevice));
                attention->run(*gkv, layer, s.n_head, s.n_head_kv, s.hd_k, s.hd_v, scale, gq.get(),
                               c.n, gpos.get(), kv_bound, gout.get(), nullptr);
                ASSERT_TRUE(gpu::synchronize());
                const std::vector<float> got = gout.download();
                int bad = 0;
                double worst = 0;  // largest error / bound
                for (size_t i = 0; i < out_n; ++i) {
                    const double e = std::fabs(double(got[i]) - want[i]);
                    worst = std::max(worst, e / std::max(bound[i], 1e-300));
                    if (!(e <= bound[i]) && ++bad <= 5) {
                        const size_t row = i / size_t(s.hd_v);
                        ADD_FAILURE()
                            << "token " << row / size_t(s.n_head) << " head "
                            << row % size_t(s.n_head) << " dim " << i % size_t(s.hd_v) << ": gpu "
                            << got[i] << " cpu " << want[i] << " bound " << bound[i];
                    }
                }
                EXPECT_EQ(bad, 0);
                std::printf(
                    "  %s %s n %lld pos0 %lld sigma %g bound %lld: rows %d splits %d%s, "
                    "worst error %.3f of its bound\n",
                    shape_name(s).c_str(), type_name(type), (long long)c.n, (long long)c.pos0,
                    double(c.sigma), (long long)kv_bound, shape.rows, shape.max_splits,
                    shape.tensor_cores ? " (tensor cores)" : "", worst);
            }
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaAttention,
                         ::testing::Values(AttnShape{32, 8, 128, 128, true, true},
                                           AttnShape{16, 16, 64, 64, true, false},
                                           AttnShape{16, 4, 192, 128, true, false},
                                           AttnShape{14, 2, 64, 64, true, true},
                                           AttnShape{8, 1, 256, 256, true, false},
                                           AttnShape{20, 4, 80, 80, false, false},
                                           AttnShape{32, 2, 64, 64, true, false}),
                         [](const ::testing::TestParamInfo<AttnShape>& i) {
                             return shape_name(i.param);
                         });

// The launch a long decode context gets on this GPU: split over enough blocks to fill it, with
// the group's query heads sharing a block; a long prompt: no split.
TEST(CudaAttentionLaunch, DecodeSplitsPromptsDoNot) {
    STRATA_REQUIRE_GPU();
    const ModelHparams hp = attention_hparams(32, 8, 128, 128);
    auto a = GpuAttention::create(hp, 32768, 512, kPdl);
    ASSERT_TRUE(a) << a.error().message;
    EXPECT_GT(a->scratch_bytes(), 0u);
    for (KvType type : {KvType::F16, KvType::Q8_0}) {
        const auto decode = a->launch_shape(type, 32, 8, 128, 128, 1, 32768);
        EXPECT_EQ(decode.rows, 4);  // the 4 query heads of a KV head in one block
        EXPECT_EQ(decode.heads_per_block, 4);
        const int sms = gpu::devices().list[0].multiprocessors;
        // (the split count is rounded down: the grid may fall short by less than a split)
        EXPECT_GT(decode.max_splits * 8 + 8, sms) << "the decode grid leaves SMs idle";
        const auto prompt = a->launch_shape(type, 32, 8, 128, 128, 512, 512);
        const bool f16 = type == KvType::F16;
        EXPECT_EQ(prompt.tensor_cores, f16);  // F16 prompts of head size 128: tensor cores
        EXPECT_EQ(prompt.rows, f16 ? 64 : 32);
        EXPECT_EQ(prompt.tokens_per_block, f16 ? 16 : 8);
        EXPECT_EQ(prompt.max_splits, 1);
        std::printf("  %s: decode %d splits of tile %d (%zu B shared), prompt tile %d\n",
                    type_name(type), decode.max_splits, decode.tile, decode.smem, prompt.tile);
    }
}

}  // namespace
}  // namespace strata
