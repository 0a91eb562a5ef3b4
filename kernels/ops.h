// The kernels of the synthetic LLaMA step, CPU versions (fp32; the CPU backend's math and every GPU kernel's test
// oracle). The CUDA versions in kernels/cuda/ mirror these names and shapes in namespace lins::kernels::cuda.
// Shapes: T = tokens (batch * seq), H = hidden, F = ffn, V = vocab, layout [batch, seq, heads, head_dim] = [T, H].
#pragma once

#include <cstdint>

namespace lins::kernels::cpu {

struct AdamWConfig {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.1f;
};

// Row-major C[m,n] = alpha * op(A) op(B) + beta * C, op(X) = X or X^T (OpenBLAS sgemm).
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, const float* b,
          float beta, float* c);

// y[rows, dim] = x * rstd * weight, rstd[rows] = 1 / sqrt(mean(x^2) + eps).
void rmsnorm_forward(const float* x, const float* weight, float* y, float* rstd, int64_t rows, int64_t dim, float eps);
// dx = d/dx, dweight += sum over rows (accumulates).
void rmsnorm_backward(const float* dy, const float* x, const float* weight, const float* rstd, float* dx,
                      float* dweight, int64_t rows, int64_t dim);

// out[n] = silu(gate) * up.
void swiglu_forward(const float* gate, const float* up, float* out, int64_t n);
void swiglu_backward(const float* dout, const float* gate, const float* up, float* dgate, float* dup, int64_t n);

// Rotary position embedding applied in place to x[batch, seq, heads, head_dim]; inverse = true undoes it (the
// backward of a rotation is the inverse rotation).
void rope(float* x, int batch, int seq, int heads, int head_dim, float theta, bool inverse);

// Causal multi-head attention, out[T, H]; lse[batch, heads, seq] (log-sum-exp of each softmax row) kept for backward.
// The scores are formed kAttentionBlockRows query rows at a time against the keys up to the block's last row, so
// only the lower triangle of the [seq, seq] score matrix (and the diagonal blocks) is computed.
constexpr int kAttentionBlockRows = 64;
void attention_forward(const float* q, const float* k, const float* v, float* out, float* lse, int batch, int seq,
                       int heads, int head_dim);
void attention_backward(const float* dout, const float* q, const float* k, const float* v, const float* out,
                        const float* lse, float* dq, float* dk, float* dv, int batch, int seq, int heads, int head_dim);

// Cross-entropy over logits[rows, vocab]; returns the summed loss (fp64) and writes
// dlogits = grad_scale * (softmax - onehot(target)).
double cross_entropy(const float* logits, const int32_t* targets, float* dlogits, int64_t rows, int64_t vocab,
                     float grad_scale);

// out[n, dim] = table[ids[i], :]; backward accumulates into dtable.
void embedding_forward(const float* table, const int32_t* ids, float* out, int64_t n, int64_t dim);
void embedding_backward(const float* dout, const int32_t* ids, float* dtable, int64_t n, int64_t dim);

// AdamW on n elements with bias correction (step counts from 1); master, m, v updated in place.
void adamw(float* master, const float* grad, float* m, float* v, int64_t n, const AdamWConfig& cfg, int step);

// --- Additions used by the training step (same conventions) ---

// gemm with explicit leading dimensions (row-major), for views such as one head of a [T, H] buffer.
void gemm_strided(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                  const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
// y[n] += x[n].
void add(float* y, const float* x, int64_t n);

// y[n] *= alpha.
void scale(float* y, float alpha, int64_t n);

// --- Mixed precision: bf16 storage as uint16_t (the top half of an fp32), rounded to nearest even ---
// Element conversion between the storage dtypes: y[i] = round(x[i]) or, accumulating, y[i] = round(y[i] + x[i]) with
// the sum taken in fp32 and rounded once to y's dtype.
void cast_fp32_to_bf16(const float* x, uint16_t* y, int64_t n);
void cast_bf16_to_fp32(const uint16_t* x, float* y, int64_t n);
void accumulate_fp32_into_bf16(uint16_t* y, const float* x, int64_t n);
void accumulate_bf16_into_bf16(uint16_t* y, const uint16_t* x, int64_t n);
void accumulate_bf16_into_fp32(float* y, const uint16_t* x, int64_t n);
// AdamW as adamw() reading a bf16 gradient; param_out (bf16, may be null) receives the rounded updated master weights.
void adamw_mixed(float* master, const uint16_t* grad, float* m, float* v, uint16_t* param_out, int64_t n,
                 const AdamWConfig& cfg, int step);

// GEMM accounting for the step benchmark: when timing is on, every gemm/gemm_strided call adds its FLOPs (2mnk)
// and wall seconds, and reports its shape to the observer (if any). The shape carries alpha and beta too, so a
// replay issues the same calls (OpenBLAS scales or zeroes C first unless beta is 1).
struct GemmShape {
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0, lda = 0, ldb = 0, ldc = 0;
  float alpha = 1.0f, beta = 0.0f;
};
using GemmObserver = void (*)(const GemmShape& shape, double seconds);
struct GemmStats {
  int64_t calls = 0;
  double flops = 0.0;
  double seconds = 0.0;
  GemmObserver observer = nullptr;
};
void set_gemm_timing(bool on);
void set_gemm_observer(GemmObserver observer);
GemmStats gemm_stats();
void reset_gemm_stats();  // also clears the observer

}  // namespace lins::kernels::cpu
