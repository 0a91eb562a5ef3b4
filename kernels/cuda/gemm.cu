// Row-major GEMM through cuBLAS: bf16 inputs with fp32 accumulation (cublasGemmEx, CUBLAS_COMPUTE_32F, which selects
// tensor-core kernels), and fp32 tensors with bf16 tensor-core multiplies (CUBLAS_COMPUTE_32F_FAST_16BF: cuBLAS rounds
// the fp32 inputs to bf16 inside the kernel and accumulates in fp32). cuBLAS is column-major: a row-major C[m,n] is a
// column-major C^T[n,m], so we ask for C^T = op(B)^T op(A)^T, i.e. swap the operands and keep each one's transpose.
#include "kernels/cuda/ops_cuda.h"

namespace lins::kernels::cuda {
namespace {

template <class TAB, class TC>
cublasStatus_t gemm_impl(BlasHandle& blas, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                         const TAB* a, const TAB* b, float beta, TC* c, cudaDataType_t ab_type, cudaDataType_t c_type,
                         cublasComputeType_t compute, cudaStream_t stream) {
  if (blas.handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (m <= 0 || n <= 0 || k <= 0) return CUBLAS_STATUS_SUCCESS;
  constexpr int64_t kMax = 0x7fffffff;
  if (m > kMax || n > kMax || k > kMax) return CUBLAS_STATUS_INVALID_VALUE;
  cublasStatus_t st = cublasSetStream(blas.handle, stream);
  if (st != CUBLAS_STATUS_SUCCESS) return st;
  // cublasSetStream resets the handle to cuBLAS's default workspace pool: hand our workspace back after every call.
  if (blas.workspace != nullptr) {
    st = cublasSetWorkspace(blas.handle, blas.workspace, blas.workspace_bytes);
    if (st != CUBLAS_STATUS_SUCCESS) return st;
  }
  // Row-major A[m,k] seen column-major is A^T[k,m] (ld k); row-major A[k,m] (trans_a) is A^T's transpose (ld m).
  const cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int lda = static_cast<int>(trans_a ? m : k);
  const int ldb = static_cast<int>(trans_b ? k : n);
  return cublasGemmEx(blas.handle, op_b, op_a, static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), &alpha, b,
                      ab_type, ldb, a, ab_type, lda, &beta, c, c_type, static_cast<int>(n), compute,
                      CUBLAS_GEMM_DEFAULT);
}

}  // namespace

cublasStatus_t blas_create(BlasHandle* blas, size_t workspace_bytes) {
  *blas = BlasHandle{};
  cublasStatus_t st = cublasCreate(&blas->handle);
  if (st != CUBLAS_STATUS_SUCCESS) {
    blas->handle = nullptr;
    return st;
  }
  if (workspace_bytes > 0) {
    if (cudaMalloc(&blas->workspace, workspace_bytes) != cudaSuccess) {
      blas_destroy(blas);
      return CUBLAS_STATUS_ALLOC_FAILED;
    }
    blas->workspace_bytes = workspace_bytes;
    st = cublasSetWorkspace(blas->handle, blas->workspace, workspace_bytes);
    if (st != CUBLAS_STATUS_SUCCESS) {
      blas_destroy(blas);
      return st;
    }
  }
  return CUBLAS_STATUS_SUCCESS;
}

void blas_destroy(BlasHandle* blas) {
  if (blas->handle != nullptr) cublasDestroy(blas->handle);
  if (blas->workspace != nullptr) cudaFree(blas->workspace);
  *blas = BlasHandle{};
}

cublasStatus_t gemm(BlasHandle& blas, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                    const bf16* a, const bf16* b, float beta, bf16* c, cudaStream_t stream) {
  return gemm_impl(blas, trans_a, trans_b, m, n, k, alpha, a, b, beta, c, CUDA_R_16BF, CUDA_R_16BF, CUBLAS_COMPUTE_32F,
                   stream);
}

cublasStatus_t gemm(BlasHandle& blas, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                    const bf16* a, const bf16* b, float beta, float* c, cudaStream_t stream) {
  return gemm_impl(blas, trans_a, trans_b, m, n, k, alpha, a, b, beta, c, CUDA_R_16BF, CUDA_R_32F, CUBLAS_COMPUTE_32F,
                   stream);
}

cublasStatus_t gemm(BlasHandle& blas, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                    const float* a, const float* b, float beta, float* c, cudaStream_t stream) {
  return gemm_impl(blas, trans_a, trans_b, m, n, k, alpha, a, b, beta, c, CUDA_R_32F, CUDA_R_32F,
                   CUBLAS_COMPUTE_32F_FAST_16BF, stream);
}

}  // namespace lins::kernels::cuda
