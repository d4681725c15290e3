// Included first by the scalar reference quantizers: bit-exactness with the reference engine needs
// every product rounded on its own, so no fused multiply-add contraction, whatever -march or
// -ffp-contract the build uses. (SIMD kernels use explicit FMA intrinsics where they want them.)
// The pragmas apply to the rest of the including translation unit.
#pragma once

#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif
