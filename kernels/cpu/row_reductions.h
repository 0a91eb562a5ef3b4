// Row reductions of the CPU kernels (ops.cpp, attention.cpp) with eight partial results, so the compiler vectorises
// them (a single accumulator is a serial dependency it may not reorder). Deterministic: the order depends only on n.
// Always inlined, so that each copy of a kernel (LINS_CPU_VECTOR_CLONES) compiles them for its own instruction set.
#pragma once

#include <cstdint>

#include "kernels/cpu/exp_poly.h"

namespace lins::kernels::cpu {

// The eight lanes summed in a fixed tree.
[[gnu::always_inline]] inline float sum_lanes(const float (&s)[8]) {
  return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

[[gnu::always_inline]] inline float row_max(const float* x, int64_t n) {
  float m[8];
  for (int k = 0; k < 8; ++k) m[k] = x[0];
  int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    for (int k = 0; k < 8; ++k) m[k] = x[j + k] > m[k] ? x[j + k] : m[k];
  float r = m[0];
  for (int k = 1; k < 8; ++k) r = m[k] > r ? m[k] : r;
  for (; j < n; ++j) r = x[j] > r ? x[j] : r;
  return r;
}

// sum of x[j] * x[j].
[[gnu::always_inline]] inline float sum_squares(const float* x, int64_t n) {
  float s[8] = {};
  int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    for (int k = 0; k < 8; ++k) s[k] += x[j + k] * x[j + k];
  float r = sum_lanes(s);
  for (; j < n; ++j) r += x[j] * x[j];
  return r;
}

// sum of a[j] * b[j].
[[gnu::always_inline]] inline float row_dot(const float* a, const float* b, int64_t n) {
  float s[8] = {};
  int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    for (int k = 0; k < 8; ++k) s[k] += a[j + k] * b[j + k];
  float r = sum_lanes(s);
  for (; j < n; ++j) r += a[j] * b[j];
  return r;
}

// sum of a[j] * b[j] * c[j], multiplied left to right.
[[gnu::always_inline]] inline float dot3(const float* a, const float* b, const float* c, int64_t n) {
  float s[8] = {};
  int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    for (int k = 0; k < 8; ++k) s[k] += a[j + k] * b[j + k] * c[j + k];
  float r = sum_lanes(s);
  for (; j < n; ++j) r += a[j] * b[j] * c[j];
  return r;
}

// x[j] = exp(x[j] - shift) for j < n; returns their sum.
[[gnu::always_inline]] inline float exp_shift_sum(float* x, int64_t n, float shift) {
  float s[8] = {};
  int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    for (int k = 0; k < 8; ++k) {
      const float e = exp_poly(x[j + k] - shift);
      x[j + k] = e;
      s[k] += e;
    }
  float r = sum_lanes(s);
  for (; j < n; ++j) {
    x[j] = exp_poly(x[j] - shift);
    r += x[j];
  }
  return r;
}

}  // namespace lins::kernels::cpu
