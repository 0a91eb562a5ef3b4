// Causal multi-head attention on the CPU over the lower triangle of each head's scores only: kAttentionBlockRows
// queries at a time meet the keys up to their block's last row (sgemm on strided views of the [T, H] buffers), and
// the backward recomputes the probabilities from each row's log-sum-exp (FlashAttention's recipe, in row tiles).
// Loops that clamp before exp_poly vectorise only when compares may not trap; nothing here reads FP exceptions.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/exp_poly.h"
#include "kernels/cpu/row_reductions.h"
#include "kernels/ops.h"

namespace lins::kernels::cpu {
namespace {

// Per-thread scratch that only grows: the step calls attention with the same shapes every layer, and a fresh
// allocation of this size would be mapped and faulted in again on every call.
float* scratch(std::vector<float>& buf, size_t n) {
  if (buf.size() < n) buf.resize(n);
  return buf.data();
}

}  // namespace

LINS_CPU_VECTOR_CLONES void attention_forward(const float* q, const float* k, const float* v, float* out, float* lse,
                                              int batch, int seq, int heads, int head_dim) {
  const int64_t H = int64_t(heads) * head_dim;
  const float scale = 1.0f / std::sqrt(float(head_dim));
  thread_local std::vector<float> s_buf;
  float* s = scratch(s_buf, size_t(kAttentionBlockRows) * seq);  // [rows, r1] scores, then probabilities
  float inv_sum[kAttentionBlockRows];
  for (int b = 0; b < batch; ++b)
    for (int h = 0; h < heads; ++h) {
      const int64_t base = int64_t(b) * seq * H + int64_t(h) * head_dim;
      float* l = lse + (int64_t(b) * heads + h) * seq;
      for (int r0 = 0; r0 < seq; r0 += kAttentionBlockRows) {
        const int rows = std::min(kAttentionBlockRows, seq - r0), r1 = r0 + rows;  // keys [0, r1)
        const int64_t at = base + int64_t(r0) * H;
        gemm_strided(false, true, rows, r1, head_dim, scale, q + at, H, k + base, H, 0.0f, s, r1);
        for (int i = 0; i < rows; ++i) {
          float* row = s + int64_t(i) * r1;
          const int n = r0 + i + 1;  // query r0 + i sees keys [0, n)
          const float mx = row_max(row, n);
          const float sum = exp_shift_sum(row, n, mx);
          std::fill(row + n, row + r1, 0.0f);  // the masked part of the diagonal block
          inv_sum[i] = 1.0f / sum;
          l[r0 + i] = mx + std::log(sum);
        }
        // O = softmax(S) V: the unnormalised exponentials meet V, each output row is then divided by its sum
        // (head_dim products per row instead of one per score).
        gemm_strided(false, false, rows, head_dim, r1, 1.0f, s, r1, v + base, H, 0.0f, out + at, H);
        for (int i = 0; i < rows; ++i) {
          float* o = out + at + int64_t(i) * H;
          for (int e = 0; e < head_dim; ++e) o[e] *= inv_sum[i];
        }
      }
    }
}

LINS_CPU_VECTOR_CLONES void attention_backward(const float* dout, const float* q, const float* k, const float* v,
                                               const float* out, const float* lse, float* dq, float* dk, float* dv,
                                               int batch, int seq, int heads, int head_dim) {
  const int64_t H = int64_t(heads) * head_dim;
  const float scale = 1.0f / std::sqrt(float(head_dim));
  thread_local std::vector<float> p_buf, dp_buf, d_buf;
  float* p = scratch(p_buf, size_t(kAttentionBlockRows) * seq);    // [rows, r1] probabilities
  float* dp = scratch(dp_buf, size_t(kAttentionBlockRows) * seq);  // [rows, r1] dP, then dS
  // D = rowsum(dO * O) of every (sequence, head, query), [batch, heads, seq] as lse: one pass over O and dO in
  // memory order, rather than a strided row of each per query inside the head loop.
  float* dsum = scratch(d_buf, size_t(batch) * heads * seq);
  for (int b = 0; b < batch; ++b)
    for (int i = 0; i < seq; ++i)
      for (int h = 0; h < heads; ++h) {
        const int64_t at = (int64_t(b) * seq + i) * H + int64_t(h) * head_dim;
        dsum[(int64_t(b) * heads + h) * seq + i] = row_dot(out + at, dout + at, head_dim);
      }
  for (int b = 0; b < batch; ++b)
    for (int h = 0; h < heads; ++h) {
      const int64_t base = int64_t(b) * seq * H + int64_t(h) * head_dim;
      const float* l = lse + (int64_t(b) * heads + h) * seq;
      const float* d = dsum + (int64_t(b) * heads + h) * seq;
      // Row blocks from the last: its keys span the whole sequence, so it writes dK and dV (beta 0) and the blocks
      // above add into their leading rows.
      const int last = (seq - 1) / kAttentionBlockRows * kAttentionBlockRows;
      for (int r0 = last; r0 >= 0; r0 -= kAttentionBlockRows) {
        const int rows = std::min(kAttentionBlockRows, seq - r0), r1 = r0 + rows;
        const int64_t at = base + int64_t(r0) * H;
        const float beta = r1 == seq ? 0.0f : 1.0f;
        gemm_strided(false, true, rows, r1, head_dim, scale, q + at, H, k + base, H, 0.0f, p, r1);
        gemm_strided(false, true, rows, r1, head_dim, 1.0f, dout + at, H, v + base, H, 0.0f, dp, r1);
        // P = exp(S - lse); dS = P * (dP - rowsum(dO * O)); both zero where masked.
        for (int i = 0; i < rows; ++i) {
          float* prow = p + int64_t(i) * r1;
          float* dsrow = dp + int64_t(i) * r1;
          const int n = r0 + i + 1;
          const float li = l[r0 + i], di = d[r0 + i];
          for (int j = 0; j < n; ++j) {
            const float pj = exp_poly(prow[j] - li);
            prow[j] = pj;
            dsrow[j] = pj * (dsrow[j] - di);
          }
          std::fill(prow + n, prow + r1, 0.0f);
          std::fill(dsrow + n, dsrow + r1, 0.0f);
        }
        // dV[0, r1) += P^T dO; dQ = scale dS K; dK[0, r1) += scale dS^T Q.
        gemm_strided(true, false, r1, head_dim, rows, 1.0f, p, r1, dout + at, H, beta, dv + base, H);
        gemm_strided(false, false, rows, head_dim, r1, scale, dp, r1, k + base, H, 0.0f, dq + at, H);
        gemm_strided(true, false, r1, head_dim, rows, scale, dp, r1, q + at, H, beta, dk + base, H);
      }
    }
}

}  // namespace lins::kernels::cpu
