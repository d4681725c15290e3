// What the engine's blocks count against their kind of operator (EngineStats::ops): the bytes a
// weight read costs and the multiply-adds of projecting rows through it. Shared by the files of
// the engine, not part of its interface.
#pragma once

#include <chrono>
#include <cstdint>

#include "engine/engine.h"

namespace strata::engine {

inline double view_bytes(const TensorView& w) {
    return w.present() ? double(w.row_bytes) * double(w.rows()) : 0.0;
}
inline double view_flops(const TensorView& w, int64_t n) {
    return w.present() ? 2.0 * double(w.ne[0]) * double(w.rows()) * double(n) : 0.0;
}
inline double expert_bytes(const ExpertView& e) {
    return view_bytes(e.gate) + view_bytes(e.up) + view_bytes(e.down);
}
inline double expert_flops(const ExpertView& e, int64_t n) {
    return view_flops(e.gate, n) + view_flops(e.up, n) + view_flops(e.down, n);
}

template <typename F>
void Engine::timed(Op op, F&& f, double bytes, double flops) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    OpFigures& o = stats_.ops[size_t(op)];
    o.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    o.bytes += bytes;
    o.flops += flops;
}

}  // namespace strata::engine
