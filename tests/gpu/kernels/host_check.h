// Host-side helpers the GPU kernel tests share: bf16 rounding independent of the device library, bf16-representable
// random inputs, and the tolerance check that prints the worst element. No CUDA here.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace lins::kernel_test {

// Round to nearest even; any NaN becomes the quiet NaN 0x7fc0.
inline uint16_t bf16_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
inline float bf16_value(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline float round_bf16(float f) { return bf16_value(bf16_bits(f)); }

// n values uniform in [lo, hi), each representable in bf16, so both sides of a comparison see the same inputs.
inline std::vector<float> random_vec(size_t n, float lo, float hi, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = round_bf16(dist(gen));
  return v;
}

inline double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, static_cast<double>(std::fabs(x)));
  return m;
}

// Prints the worst element and returns whether every element is within atol + rtol * |ref|.
inline bool close(const std::string& what, const std::vector<float>& got, const std::vector<float>& ref, double atol,
                  double rtol) {
  if (got.size() != ref.size()) {
    std::printf("  FAIL %-40s size %zu != %zu\n", what.c_str(), got.size(), ref.size());
    return false;
  }
  size_t bad = 0, worst = 0;
  double worst_excess = -1e300, max_err = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(static_cast<double>(got[i]) - ref[i]);
    const double allowed = atol + rtol * std::fabs(ref[i]);
    if (!(err <= allowed)) ++bad;  // NaN counts as bad
    if (err - allowed > worst_excess || std::isnan(err)) {
      worst_excess = std::isnan(err) ? 1e300 : err - allowed;
      worst = i;
    }
    if (err > max_err || std::isnan(err)) max_err = err;
  }
  std::printf(
      "  %s %-40s n=%zu max_err=%.3g (atol %.3g, rtol %.3g) worst[%zu]: got %.6g ref %.6g, %zu out of tolerance\n",
      bad ? "FAIL" : "ok  ", what.c_str(), got.size(), max_err, atol, rtol, worst, got.empty() ? 0.0 : got[worst],
      ref.empty() ? 0.0 : ref[worst], bad);
  return bad == 0;
}

}  // namespace lins::kernel_test
