// exp_poly: the CPU kernels' vectorisable fp32 exponential (softmax, SiLU, cross-entropy). Kept out of kernels/ops.h,
// which CUDA translation units (C++17) include.
#pragma once

#include <bit>
#include <cstdint>

// LINS_CPU_VECTOR_CLONES on a kernel compiles it twice, for the x86-64 baseline (SSE2) and for AVX2, and picks the
// AVX2 copy at load time where the CPU has it: the build targets the baseline, and the element-wise loops run twice
// as wide on AVX2. The AVX2 copy has no FMA (GCC fuses a * b + c only when FMA is enabled), and vectorised loops keep
// the scalar order of operations, so both copies give bit-identical results.
#if defined(__GNUC__) && defined(__x86_64__) && defined(__ELF__)
#define LINS_CPU_VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define LINS_CPU_VECTOR_CLONES
#endif

namespace lins::kernels::cpu {

// exp(x) in fp32 by Cephes' method (x = n ln2 + r, |r| <= ln2 / 2, degree-6 polynomial for e^r, 2^n from the
// exponent bits), within 2 ulp of expf on [-87.3, 88.7]; x is clamped to that range first (so exp of a very
// negative number is about 1e-38, not 0). Inline and branch-free so the loops that call it vectorise (softmax,
// sigmoid, cross-entropy).
inline float exp_poly(float x) {
  x = x < -87.3f ? -87.3f : x;  // compare-and-select: maxps/minps, so the loop vectorises
  x = x > 88.7f ? 88.7f : x;
  const float t = x * 1.44269504088896341f;
  const float n = (t + 12582912.0f) - 12582912.0f;  // round to nearest: 1.5 * 2^23 pushes the fraction out
  float r = x - n * 0.693359375f;                   // ln2 split in two for an exact reduction
  r -= n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;  // 2^n as a float's bit pattern
  return p * std::bit_cast<float>(bits);
}

}  // namespace lins::kernels::cpu
