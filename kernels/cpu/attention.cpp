// Causal multi-head attention on the CPU: per (sequence, head) the score matrix is formed with sgemm on strided
// views of the [T, H] buffers, softmax rows keep their log-sum-exp, and the backward recomputes the probabilities
// from it (the FlashAttention recipe without tiling: scores for one head at a time, never for all heads at once).
// Loops that clamp before exp_poly vectorise only when compares may not trap; nothing here reads FP exceptions.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/exp_poly.h"
#include "kernels/ops.h"

namespace lins::kernels::cpu {
namespace {

// Row reductions with eight partial results, so the compiler vectorises them (a single accumulator is a serial
// dependency it may not reorder). Deterministic: the order depends only on n.
float row_max(const float* x, int n) {
  float m[8];
  for (int k = 0; k < 8; ++k) m[k] = x[0];
  int j = 0;
  for (; j + 8 <= n; j += 8)
    for (int k = 0; k < 8; ++k) m[k] = x[j + k] > m[k] ? x[j + k] : m[k];
  float r = m[0];
  for (int k = 1; k < 8; ++k) r = m[k] > r ? m[k] : r;
  for (; j < n; ++j) r = x[j] > r ? x[j] : r;
  return r;
}

float row_sum(const float* x, int n) {
  float s[8] = {};
  int j = 0;
  for (; j + 8 <= n; j += 8)
    for (int k = 0; k < 8; ++k) s[k] += x[j + k];
  float r = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
  for (; j < n; ++j) r += x[j];
  return r;
}

float row_dot(const float* a, const float* b, int n) {
  float s[8] = {};
  int j = 0;
  for (; j + 8 <= n; j += 8)
    for (int k = 0; k < 8; ++k) s[k] += a[j + k] * b[j + k];
  float r = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
  for (; j < n; ++j) r += a[j] * b[j];
  return r;
}

// Probabilities of one head: p[seq, seq] = softmax(scale * q k^T) under the causal mask, from lse when given
// (backward) or writing it (forward).
void causal_probs(const float* q, const float* k, int64_t ld, int seq, int head_dim, float* p, float* lse,
                  bool have_lse) {
  const float scale = 1.0f / std::sqrt(float(head_dim));
  gemm_strided(false, true, seq, seq, head_dim, scale, q, ld, k, ld, 0.0f, p, seq);
  for (int i = 0; i < seq; ++i) {
    float* row = p + int64_t(i) * seq;
    if (have_lse) {
      const float l = lse[i];
      for (int j = 0; j <= i; ++j) row[j] = exp_poly(row[j] - l);
    } else {
      const float mx = row_max(row, i + 1);
      for (int j = 0; j <= i; ++j) row[j] = exp_poly(row[j] - mx);
      const float sum = row_sum(row, i + 1);
      const float inv = 1.0f / sum;
      for (int j = 0; j <= i; ++j) row[j] *= inv;
      lse[i] = mx + std::log(sum);
    }
    for (int j = i + 1; j < seq; ++j) row[j] = 0.0f;
  }
}

}  // namespace

void attention_forward(const float* q, const float* k, const float* v, float* out, float* lse, int batch, int seq,
                       int heads, int head_dim) {
  const int64_t H = int64_t(heads) * head_dim;
  std::vector<float> p(size_t(seq) * seq);  // [seq, seq] probabilities of one head
  for (int b = 0; b < batch; ++b)
    for (int h = 0; h < heads; ++h) {
      const int64_t base = int64_t(b) * seq * H + int64_t(h) * head_dim;
      float* l = lse + (int64_t(b) * heads + h) * seq;
      causal_probs(q + base, k + base, H, seq, head_dim, p.data(), l, false);
      gemm_strided(false, false, seq, head_dim, seq, 1.0f, p.data(), seq, v + base, H, 0.0f, out + base, H);
    }
}

void attention_backward(const float* dout, const float* q, const float* k, const float* v, const float* out,
                        const float* lse, float* dq, float* dk, float* dv, int batch, int seq, int heads,
                        int head_dim) {
  const int64_t H = int64_t(heads) * head_dim;
  const float scale = 1.0f / std::sqrt(float(head_dim));
  std::vector<float> p(size_t(seq) * seq), dp(size_t(seq) * seq);  // [seq, seq] each
  std::vector<float> l(seq);
  for (int b = 0; b < batch; ++b)
    for (int h = 0; h < heads; ++h) {
      const int64_t base = int64_t(b) * seq * H + int64_t(h) * head_dim;
      const float* lrow = lse + (int64_t(b) * heads + h) * seq;
      for (int i = 0; i < seq; ++i) l[i] = lrow[i];
      causal_probs(q + base, k + base, H, seq, head_dim, p.data(), l.data(), true);
      // dV = P^T dO; dP = dO V^T; dS = P * (dP - rowsum(dO * O)); dQ = scale dS K; dK = scale dS^T Q.
      gemm_strided(true, false, seq, head_dim, seq, 1.0f, p.data(), seq, dout + base, H, 0.0f, dv + base, H);
      gemm_strided(false, true, seq, seq, head_dim, 1.0f, dout + base, H, v + base, H, 0.0f, dp.data(), seq);
      for (int i = 0; i < seq; ++i) {
        const float* o = out + base + int64_t(i) * H;
        const float* d = dout + base + int64_t(i) * H;
        const float di = row_dot(o, d, head_dim);
        float* prow = p.data() + int64_t(i) * seq;
        float* dprow = dp.data() + int64_t(i) * seq;
        for (int j = 0; j <= i; ++j) dprow[j] = prow[j] * (dprow[j] - di);
        for (int j = i + 1; j < seq; ++j) dprow[j] = 0.0f;
      }
      gemm_strided(false, false, seq, head_dim, seq, scale, dp.data(), seq, k + base, H, 0.0f, dq + base, H);
      gemm_strided(true, false, seq, head_dim, seq, scale, dp.data(), seq, q + base, H, 0.0f, dk + base, H);
    }
}

}  // namespace lins::kernels::cpu
