// fp32 CPU implementations of kernels/ops.h: GEMM on OpenBLAS sgemm, the element-wise and row-wise kernels of the
// LLaMA step (RMSNorm, SwiGLU, RoPE, cross-entropy, embedding) and AdamW. Attention lives in attention.cpp.
// Each element-wise kernel is one vectorisable pass (LINS_CPU_VECTOR_CLONES: baseline and AVX2 copies). Loops that
// clamp before exp_poly vectorise only when compares may not trap; nothing here reads FP exceptions.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif

#include "kernels/ops.h"

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/util/bf16.h"
#include "kernels/cpu/exp_poly.h"
#include "kernels/cpu/row_reductions.h"

#if defined(__SSE2__)
#include <immintrin.h>
#endif

namespace lins::kernels::cpu {
namespace {

GemmStats g_gemm_stats;
bool g_gemm_timing = false;

// Cached RoPE angles: cos/sin[pos, i] for one (seq, head_dim, theta); the step calls rope with the same shape
// many times.
struct RopeTable {
  int seq = -1, head_dim = -1;
  float theta = 0.0f;
  std::vector<float> cos_t, sin_t;  // [seq, head_dim / 2]
};

const RopeTable& rope_table(int seq, int head_dim, float theta) {
  thread_local RopeTable t;
  if (t.seq == seq && t.head_dim == head_dim && t.theta == theta) return t;
  const int half = head_dim / 2;
  t.seq = seq, t.head_dim = head_dim, t.theta = theta;
  t.cos_t.resize(size_t(seq) * half);
  t.sin_t.resize(size_t(seq) * half);
  for (int p = 0; p < seq; ++p)
    for (int i = 0; i < half; ++i) {
      const double ang = double(p) * std::pow(double(theta), -2.0 * i / double(head_dim));
      t.cos_t[size_t(p) * half + i] = float(std::cos(ang));
      t.sin_t[size_t(p) * half + i] = float(std::sin(ang));
    }
  return t;
}

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

}  // namespace

void set_gemm_timing(bool on) { g_gemm_timing = on; }
GemmStats gemm_stats() { return g_gemm_stats; }
void reset_gemm_stats() { g_gemm_stats = GemmStats{}; }
void set_gemm_observer(GemmObserver observer) { g_gemm_stats.observer = observer; }

void gemm_strided(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                  const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {  // BLAS leaves C * beta; keep that contract explicit for empty inner dimensions
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
    return;
  }
  const double t0 = g_gemm_timing ? now_s() : 0.0;
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
              static_cast<blasint>(m), static_cast<blasint>(n), static_cast<blasint>(k), alpha, a,
              static_cast<blasint>(lda), b, static_cast<blasint>(ldb), beta, c, static_cast<blasint>(ldc));
  if (g_gemm_timing) {
    const double dt = now_s() - t0;
    g_gemm_stats.calls += 1;
    g_gemm_stats.flops += 2.0 * double(m) * double(n) * double(k);
    g_gemm_stats.seconds += dt;
    if (g_gemm_stats.observer)
      g_gemm_stats.observer(GemmShape{trans_a, trans_b, m, n, k, lda, ldb, ldc, alpha, beta}, dt);
  }
}

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, const float* b,
          float beta, float* c) {
  // Row-major: op(A) is [m, k]; A itself is [m, k] (lda = k) or [k, m] (lda = m). Likewise for B.
  gemm_strided(trans_a, trans_b, m, n, k, alpha, a, trans_a ? m : k, b, trans_b ? k : n, beta, c, n);
}

LINS_CPU_VECTOR_CLONES void rmsnorm_forward(const float* x, const float* weight, float* y, float* rstd, int64_t rows,
                                            int64_t dim, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    float* yr = y + r * dim;
    const float s = 1.0f / std::sqrt(sum_squares(xr, dim) / float(dim) + eps);
    rstd[r] = s;
    for (int64_t i = 0; i < dim; ++i) yr[i] = xr[i] * s * weight[i];
  }
}

LINS_CPU_VECTOR_CLONES void rmsnorm_backward(const float* dy, const float* x, const float* weight, const float* rstd,
                                             float* dx, float* dweight, int64_t rows, int64_t dim) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    const float* dyr = dy + r * dim;
    float* dxr = dx + r * dim;
    const float s = rstd[r];
    // y = x * s * w with s = (mean(x^2) + eps)^-1/2: dx = s * g - x * s^3 * mean(g * x), g = dy * w.
    const float gx = dot3(dyr, weight, xr, dim);
    for (int64_t i = 0; i < dim; ++i) dweight[i] += dyr[i] * xr[i] * s;
    const float c = s * s * s * gx / float(dim);
    for (int64_t i = 0; i < dim; ++i) dxr[i] = s * dyr[i] * weight[i] - xr[i] * c;
  }
}

LINS_CPU_VECTOR_CLONES void swiglu_forward(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + exp_poly(-g)) * up[i];
  }
}

LINS_CPU_VECTOR_CLONES void swiglu_backward(const float* dout, const float* gate, const float* up, float* dgate,
                                            float* dup, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    const float sig = 1.0f / (1.0f + exp_poly(-g));
    const float silu = g * sig;
    const float d = dout[i];
    dgate[i] = d * up[i] * sig * (1.0f + g * (1.0f - sig));  // in place with dout is safe: d read first
    dup[i] = d * silu;
  }
}

LINS_CPU_VECTOR_CLONES void rope(float* x, int batch, int seq, int heads, int head_dim, float theta, bool inverse) {
  // Meta LLaMA convention: consecutive pairs (2i, 2i+1) rotate by pos * theta^(-2i / head_dim).
  const int half = head_dim / 2;
  const RopeTable& t = rope_table(seq, head_dim, theta);
  const float sign = inverse ? -1.0f : 1.0f;
  for (int b = 0; b < batch; ++b)
    for (int p = 0; p < seq; ++p) {
      const float* c = &t.cos_t[size_t(p) * half];
      const float* s = &t.sin_t[size_t(p) * half];
      for (int h = 0; h < heads; ++h) {
        float* v = x + ((int64_t(b) * seq + p) * heads + h) * head_dim;
        for (int i = 0; i < half; ++i) {
          const float a = v[2 * i], bb = v[2 * i + 1], sn = sign * s[i];
          v[2 * i] = a * c[i] - bb * sn;
          v[2 * i + 1] = a * sn + bb * c[i];
        }
      }
    }
}

LINS_CPU_VECTOR_CLONES double cross_entropy(const float* logits, const int32_t* targets, float* dlogits, int64_t rows,
                                            int64_t vocab, float grad_scale) {
  double total = 0.0;
  for (int64_t r = 0; r < rows; ++r) {
    const float* lr = logits + r * vocab;
    float* dr = dlogits + r * vocab;
    const float mx = row_max(lr, vocab);
    const int32_t t = targets[r];
    const float target_logit = lr[t];  // read before dlogits (which may alias logits) is written
    // dr = exp(logit - max), summed in fp64 (eight partial sums, as the row reductions); then scaled to
    // grad_scale * softmax.
    double s[8] = {};
    int64_t i = 0;
    for (; i + 8 <= vocab; i += 8)
      for (int k = 0; k < 8; ++k) {
        const float e = exp_poly(lr[i + k] - mx);
        dr[i + k] = e;
        s[k] += double(e);
      }
    double sum = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
    for (; i < vocab; ++i) {
      dr[i] = exp_poly(lr[i] - mx);
      sum += double(dr[i]);
    }
    total += double(mx) + std::log(sum) - double(target_logit);
    const float scale_r = float(double(grad_scale) / sum);
    for (int64_t i = 0; i < vocab; ++i) dr[i] *= scale_r;
    dr[t] -= grad_scale;
  }
  return total;
}

void embedding_forward(const float* table, const int32_t* ids, float* out, int64_t n, int64_t dim) {
  for (int64_t i = 0; i < n; ++i) std::memcpy(out + i * dim, table + int64_t(ids[i]) * dim, sizeof(float) * dim);
}

LINS_CPU_VECTOR_CLONES void embedding_backward(const float* dout, const int32_t* ids, float* dtable, int64_t n,
                                               int64_t dim) {
  for (int64_t i = 0; i < n; ++i) {
    float* row = dtable + int64_t(ids[i]) * dim;
    const float* d = dout + i * dim;
    for (int64_t j = 0; j < dim; ++j) row[j] += d[j];
  }
}

void adamw(float* master, const float* grad, float* m, float* v, int64_t n, const AdamWConfig& cfg, int step) {
  const float bc1 = 1.0f - std::pow(cfg.beta1, float(step));
  const float bc2 = 1.0f - std::pow(cfg.beta2, float(step));
  const float b1 = cfg.beta1, b2 = cfg.beta2, lr = cfg.lr, eps = cfg.eps, wd = cfg.weight_decay;  // not aliased
  int64_t i = 0;
#if defined(__SSE2__)
  // Four at a time: std::sqrt keeps the loop scalar (errno), _mm_sqrt_ps gives the same correctly rounded roots.
  const __m128 vb1 = _mm_set1_ps(b1), vb2 = _mm_set1_ps(b2), vc1 = _mm_set1_ps(1.0f - b1), vc2 = _mm_set1_ps(1.0f - b2),
               vbc1 = _mm_set1_ps(bc1), vbc2 = _mm_set1_ps(bc2), vlr = _mm_set1_ps(lr), veps = _mm_set1_ps(eps),
               vwd = _mm_set1_ps(wd);
  for (; i + 4 <= n; i += 4) {
    const __m128 g = _mm_loadu_ps(grad + i);
    const __m128 mi = _mm_add_ps(_mm_mul_ps(vb1, _mm_loadu_ps(m + i)), _mm_mul_ps(vc1, g));
    const __m128 vi = _mm_add_ps(_mm_mul_ps(vb2, _mm_loadu_ps(v + i)), _mm_mul_ps(_mm_mul_ps(vc2, g), g));
    _mm_storeu_ps(m + i, mi);
    _mm_storeu_ps(v + i, vi);
    const __m128 mhat = _mm_div_ps(mi, vbc1), vhat = _mm_div_ps(vi, vbc2);
    const __m128 p = _mm_loadu_ps(master + i);
    const __m128 upd = _mm_add_ps(_mm_div_ps(mhat, _mm_add_ps(_mm_sqrt_ps(vhat), veps)), _mm_mul_ps(vwd, p));
    _mm_storeu_ps(master + i, _mm_sub_ps(p, _mm_mul_ps(vlr, upd)));
  }
#endif
  for (; i < n; ++i) {
    const float g = grad[i];
    const float mi = b1 * m[i] + (1.0f - b1) * g;
    const float vi = b2 * v[i] + (1.0f - b2) * g * g;
    m[i] = mi;
    v[i] = vi;
    const float mhat = mi / bc1, vhat = vi / bc2;
    master[i] -= lr * (mhat / (std::sqrt(vhat) + eps) + wd * master[i]);
  }
}

LINS_CPU_VECTOR_CLONES void add(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

LINS_CPU_VECTOR_CLONES void scale(float* y, float alpha, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] *= alpha;
}

LINS_CPU_VECTOR_CLONES void cast_fp32_to_bf16(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = float_to_bf16(x[i]);
}

LINS_CPU_VECTOR_CLONES void cast_bf16_to_fp32(const uint16_t* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = bf16_to_float(x[i]);
}

LINS_CPU_VECTOR_CLONES void accumulate_fp32_into_bf16(uint16_t* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = float_to_bf16(bf16_to_float(y[i]) + x[i]);
}

LINS_CPU_VECTOR_CLONES void accumulate_bf16_into_bf16(uint16_t* y, const uint16_t* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = bf16_add(y[i], x[i]);
}

LINS_CPU_VECTOR_CLONES void accumulate_bf16_into_fp32(float* y, const uint16_t* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += bf16_to_float(x[i]);
}

void adamw_mixed(float* master, const uint16_t* grad, float* m, float* v, uint16_t* param_out, int64_t n,
                 const AdamWConfig& cfg, int step) {
  // In chunks through an fp32 copy of the gradient, so the arithmetic is exactly adamw()'s.
  constexpr int64_t kChunk = 4096;
  float g[kChunk];
  for (int64_t i = 0; i < n; i += kChunk) {
    const int64_t c = std::min(kChunk, n - i);
    cast_bf16_to_fp32(grad + i, g, c);
    adamw(master + i, g, m + i, v + i, c, cfg, step);
    if (param_out) cast_fp32_to_bf16(master + i, param_out + i, c);
  }
}

}  // namespace lins::kernels::cpu
