// The kernels of the synthetic LLaMA step on the GPU: host-callable launchers mirroring kernels/ops.h (same names,
// shapes and layouts) in namespace lins::kernels::cuda. Tensors are bf16 where the step keeps them in bf16
// (activations, parameters, gradients) and fp32 where precision needs it (master weights, Adam moments, rstd, lse).
// The GPU backend runs the bf16 overloads when its compute dtype is bf16 (the default: bf16 activations, fp32 weight
// gradients) and the fp32 overloads when it is fp32 (fp32 tensors, bf16 tensor-core GEMMs and attention); P and G are
// in the executor's storage dtype, fp32 or bf16, moved between dtypes with the casts, accumulate() and adamw().
// Every launcher enqueues on `stream` and returns the launch's cudaError_t (nothing is synchronised).
#pragma once

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/ops.h"  // AdamWConfig

namespace lins::kernels::cuda {

using bf16 = __nv_bfloat16;
using AdamWConfig = cpu::AdamWConfig;

// Number of usable CUDA devices; 0 when the machine has no GPU (cudaErrorNoDevice, or no driver and no NVIDIA device
// node; nothing else is touched). Any other cudaGetDeviceCount error (a broken or too old driver) prints its name and
// text and exits with status 1 (gpu/cuda_devices.h). Call this before any other CUDA call: without a driver the
// runtime returns errors (and some libraries abort).
int device_count();

// ---------------------------------------------------------------------------------------------------------------
// Casts, fills and element-wise helpers (memory-bound: 16-byte accesses, grid-stride loops). Pointers need only
// their element's alignment (sub-ranges at any element offset): up to 7 leading elements go one at a time until every
// pointer is 16-byte aligned, and when no such head exists (misalignments that disagree) the whole range does.
cudaError_t cast_fp32_to_bf16(const float* in, bf16* out, int64_t n, cudaStream_t stream);  // round to nearest even
cudaError_t cast_bf16_to_fp32(const bf16* in, float* out, int64_t n, cudaStream_t stream);
// Mixed-precision accumulation (as cpu::accumulate_*): y[i] = round(y[i] + x[i]), both widened to fp32, summed once
// and rounded once to y's dtype (nearest even for bf16). x and y must not overlap unless x == y.
cudaError_t accumulate(const float* x, bf16* y, int64_t n, cudaStream_t stream);
cudaError_t accumulate(const bf16* x, bf16* y, int64_t n, cudaStream_t stream);
cudaError_t accumulate(const bf16* x, float* y, int64_t n, cudaStream_t stream);
cudaError_t accumulate(const float* x, float* y, int64_t n, cudaStream_t stream);  // = add(y, x, y)
cudaError_t fill(float* x, float value, int64_t n, cudaStream_t stream);
cudaError_t fill(bf16* x, float value, int64_t n, cudaStream_t stream);
// x[i] = lo + (hi - lo) * u(seed, i), u a counter-based hash in [0, 1): the same values for any launch shape.
cudaError_t fill_uniform(float* x, int64_t n, uint64_t seed, float lo, float hi, cudaStream_t stream);
cudaError_t fill_uniform(bf16* x, int64_t n, uint64_t seed, float lo, float hi, cudaStream_t stream);
// x[i] = std_dev * N(0, 1) with the CPU backend's counter-based generator (train/cpu_backend.cpp): element i is a
// function of (seed, first + i) only. fp64 Box-Muller as on the CPU; see elementwise.cu for when a value may differ
// from the CPU's in the last fp32 bit.
cudaError_t init_normal(float* x, int64_t n, uint64_t seed, int64_t first, float std_dev, cudaStream_t stream);
// out[n] = a + b (residual connections, summing gradients); out may alias a or b.
cudaError_t add(const bf16* a, const bf16* b, bf16* out, int64_t n, cudaStream_t stream);
cudaError_t add(const float* a, const float* b, float* out, int64_t n, cudaStream_t stream);
// *out = sum of x[n] in fp64 (one block; for losses and checks, not for large reductions on the hot path).
cudaError_t sum(const float* x, int64_t n, double* out, cudaStream_t stream);
// *out += sum of x[n] in fp64 (one block), as sum().
cudaError_t sum_accumulate(const float* x, int64_t n, double* out, cudaStream_t stream);

// ---------------------------------------------------------------------------------------------------------------
// GEMM through cuBLAS: bf16 inputs, fp32 accumulation (CUBLAS_COMPUTE_32F), tensor cores.
struct BlasHandle {
  cublasHandle_t handle = nullptr;
  // [workspace_bytes] device memory handed to cuBLAS before every gemm: one handle serves one stream at a time
  // (GEMMs queued on two streams at once through one handle would share this scratch).
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
};
cublasStatus_t blas_create(BlasHandle* blas, size_t workspace_bytes = size_t{32} << 20);
void blas_destroy(BlasHandle* blas);
// Row-major C[m,n] = alpha * op(A) op(B) + beta * C, op(X) = X or X^T, as cpu::gemm. A is [m,k] ([k,m] when
// trans_a), B is [k,n] ([n,k] when trans_b). C in bf16 (accumulated in fp32, rounded once) or fp32.
cublasStatus_t gemm(BlasHandle& blas, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                    const bf16* a, const bf16* b, float beta, bf16* c, cudaStream_t stream);
cublasStatus_t gemm(BlasHandle& blas, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                    const bf16* a, const bf16* b, float beta, float* c, cudaStream_t stream);
// fp32 A, B, C; multiplies on bf16 tensor cores with fp32 accumulation (CUBLAS_COMPUTE_32F_FAST_16BF): the inputs are
// rounded to bf16 inside cuBLAS, so the result matches a bf16 GEMM of the rounded inputs, not an fp32 sgemm.
cublasStatus_t gemm(BlasHandle& blas, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                    const float* a, const float* b, float beta, float* c, cudaStream_t stream);

// ---------------------------------------------------------------------------------------------------------------
// RMSNorm: y[rows, dim] = x * rstd * weight, rstd[rows] = 1 / sqrt(mean(x^2) + eps) (rstd may be null).
cudaError_t rmsnorm_forward(const bf16* x, const bf16* weight, bf16* y, float* rstd, int64_t rows, int64_t dim,
                            float eps, cudaStream_t stream);
// dx[rows, dim] = d/dx (overwritten); dweight[dim] += sum over rows (fp32, accumulated with atomics).
cudaError_t rmsnorm_backward(const bf16* dy, const bf16* x, const bf16* weight, const float* rstd, bf16* dx,
                             float* dweight, int64_t rows, int64_t dim, cudaStream_t stream);
cudaError_t rmsnorm_forward(const float* x, const float* weight, float* y, float* rstd, int64_t rows, int64_t dim,
                            float eps, cudaStream_t stream);
cudaError_t rmsnorm_backward(const float* dy, const float* x, const float* weight, const float* rstd, float* dx,
                             float* dweight, int64_t rows, int64_t dim, cudaStream_t stream);

// SwiGLU: out[n] = silu(gate) * up, and its backward.
cudaError_t swiglu_forward(const bf16* gate, const bf16* up, bf16* out, int64_t n, cudaStream_t stream);
cudaError_t swiglu_backward(const bf16* dout, const bf16* gate, const bf16* up, bf16* dgate, bf16* dup, int64_t n,
                            cudaStream_t stream);
cudaError_t swiglu_forward(const float* gate, const float* up, float* out, int64_t n, cudaStream_t stream);
cudaError_t swiglu_backward(const float* dout, const float* gate, const float* up, float* dgate, float* dup, int64_t n,
                            cudaStream_t stream);

// Rotary position embedding in place on x[batch, seq, heads, head_dim] (the same pairing as cpu::rope); inverse =
// true rotates back (the backward). head_dim must be even.
cudaError_t rope(bf16* x, int batch, int seq, int heads, int head_dim, float theta, bool inverse, cudaStream_t stream);
cudaError_t rope(float* x, int batch, int seq, int heads, int head_dim, float theta, bool inverse, cudaStream_t stream);

// Causal multi-head attention on q, k, v, out [batch, seq, heads, head_dim] = [T, H]; lse[batch, heads, seq] is the
// natural-log log-sum-exp of each row of scaled scores (scale 1/sqrt(head_dim)), kept for the backward.
// Algorithm: flash-attention-2 style tiling (64 queries x 64 keys per tile, online softmax, no seq x seq matrix in
// memory), bf16 tensor-core MMAs (WMMA, fp32 accumulation) for head_dim 32, 64 and 128; other head dims take a
// per-row CUDA-core version with the same online softmax (also no seq x seq matrix).
cudaError_t attention_forward(const bf16* q, const bf16* k, const bf16* v, bf16* out, float* lse, int batch, int seq,
                              int heads, int head_dim, cudaStream_t stream);
// Device scratch the backward needs: fp32 dq accumulator [T, H] and row terms D = rowsum(dout * out) [batch,
// heads, seq].
size_t attention_backward_workspace_bytes(int batch, int seq, int heads, int head_dim);
// dq, dk, dv [T, H] are overwritten. Recomputes the probabilities from q, k and lse (no seq x seq matrix).
cudaError_t attention_backward(const bf16* dout, const bf16* q, const bf16* k, const bf16* v, const bf16* out,
                               const float* lse, bf16* dq, bf16* dk, bf16* dv, int batch, int seq, int heads,
                               int head_dim, void* workspace, size_t workspace_bytes, cudaStream_t stream);
// fp32 tensors (fp32 compute): q, k, v (and dout, out) are rounded to bf16 in `workspace`, the kernels above run on the copies, and
// the results are widened to fp32 (bf16 tensor-core attention on fp32 tensors). lse stays fp32.
size_t attention_forward_fp32_workspace_bytes(int batch, int seq, int heads, int head_dim);
cudaError_t attention_forward(const float* q, const float* k, const float* v, float* out, float* lse, int batch,
                              int seq, int heads, int head_dim, void* workspace, size_t workspace_bytes,
                              cudaStream_t stream);
size_t attention_backward_fp32_workspace_bytes(int batch, int seq, int heads, int head_dim);
cudaError_t attention_backward(const float* dout, const float* q, const float* k, const float* v, const float* out,
                               const float* lse, float* dq, float* dk, float* dv, int batch, int seq, int heads,
                               int head_dim, void* workspace, size_t workspace_bytes, cudaStream_t stream);

// Cross-entropy over logits[rows, vocab] (bf16): loss_rows[rows] = logsumexp(row) - row[target] (fp32) and
// dlogits = grad_scale * (softmax - onehot(target)) in bf16. dlogits may alias logits (each element is read before
// it is overwritten). Sum loss_rows with sum() for the cpu::cross_entropy total.
cudaError_t cross_entropy(const bf16* logits, const int32_t* targets, bf16* dlogits, float* loss_rows, int64_t rows,
                          int64_t vocab, float grad_scale, cudaStream_t stream);
cudaError_t cross_entropy(const float* logits, const int32_t* targets, float* dlogits, float* loss_rows, int64_t rows,
                          int64_t vocab, float grad_scale, cudaStream_t stream);

// Embedding: out[n, dim] = table[ids[i], :]; backward accumulates into dtable[vocab, dim] (fp32, atomics).
cudaError_t embedding_forward(const bf16* table, const int32_t* ids, bf16* out, int64_t n, int64_t dim,
                              cudaStream_t stream);
cudaError_t embedding_backward(const bf16* dout, const int32_t* ids, float* dtable, int64_t n, int64_t dim,
                               cudaStream_t stream);
cudaError_t embedding_forward(const float* table, const int32_t* ids, float* out, int64_t n, int64_t dim,
                              cudaStream_t stream);
cudaError_t embedding_backward(const float* dout, const int32_t* ids, float* dtable, int64_t n, int64_t dim,
                               cudaStream_t stream);

// AdamW on n elements of the owned shard with bias correction (step counts from 1): master, m, v (fp32) updated in
// place from grad * grad_scale (fp32 or bf16 gradient); param_out (may be null) receives the updated master weights,
// rounded to nearest even in the bf16 overloads, exact copies of master in the fp32 ones. With grad_scale 1 this is
// the update of cpu::adamw (cpu::adamw_mixed for a bf16 gradient) to fp32 rounding, not bit for bit (bias corrections
// in fp64, multiplied; the compiler may contract into FMAs). A null param_out must be typed
// (static_cast<bf16*>(nullptr)): a bare nullptr is ambiguous between the overloads.
cudaError_t adamw(float* master, const bf16* grad, float* m, float* v, bf16* param_out, int64_t n,
                  const AdamWConfig& cfg, int step, float grad_scale, cudaStream_t stream);
cudaError_t adamw(float* master, const float* grad, float* m, float* v, bf16* param_out, int64_t n,
                  const AdamWConfig& cfg, int step, float grad_scale, cudaStream_t stream);
cudaError_t adamw(float* master, const bf16* grad, float* m, float* v, float* param_out, int64_t n,
                  const AdamWConfig& cfg, int step, float grad_scale, cudaStream_t stream);
cudaError_t adamw(float* master, const float* grad, float* m, float* v, float* param_out, int64_t n,
                  const AdamWConfig& cfg, int step, float grad_scale, cudaStream_t stream);

}  // namespace lins::kernels::cuda
