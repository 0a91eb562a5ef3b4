// bf16 on the host: stored as uint16_t (the top half of an IEEE fp32), converted with round-to-nearest-even.
// Used by the MPI backend's bf16 sum (MPI has no bf16 type), the CPU casts of mixed precision (kernels/cpu) and
// by tests that compute expected values.
#pragma once

#include <cstdint>
#include <cstring>

namespace lins {

inline float bf16_to_float(uint16_t b) {
  const uint32_t bits = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// Round to nearest, ties to even; NaN stays a (quiet) NaN with its sign; overflow rounds to infinity.
inline uint16_t float_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return uint16_t((bits >> 16) | 0x0040u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return uint16_t(bits >> 16);
}

// The sum of two bf16 values rounded once to bf16. The fp32 sum of two bf16 values is exact whenever rounding to
// bf16 could depend on its low bits (exponents within 16 of each other), so this is the correctly rounded sum.
inline uint16_t bf16_add(uint16_t a, uint16_t b) { return float_to_bf16(bf16_to_float(a) + bf16_to_float(b)); }

// Unit roundoff of each dtype's significand: bf16 keeps 8 bits, fp32 24.
constexpr double kBf16UnitRoundoff = 1.0 / 256;
constexpr double kFp32UnitRoundoff = 1.0 / 16777216;

}  // namespace lins
