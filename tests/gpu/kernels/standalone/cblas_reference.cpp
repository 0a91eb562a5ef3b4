// A plain triple-loop cblas_sgemm (fp64 accumulation) for the standalone build of the GPU kernel tests, where no BLAS
// package is installed. Slow but exact enough to be an oracle at the tests' small shapes.
#include "cblas.h"

extern "C" void cblas_sgemm(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE trans_a, enum CBLAS_TRANSPOSE trans_b,
                            blasint m, blasint n, blasint k, float alpha, const float* a, blasint lda, const float* b,
                            blasint ldb, float beta, float* c, blasint ldc) {
  const bool ta = trans_a != CblasNoTrans, tb = trans_b != CblasNoTrans;
  // Column-major C = op(A) op(B) is row-major C^T = op(B)^T op(A)^T: handle it as row-major with swapped operands.
  if (order == CblasColMajor) {
    cblas_sgemm(CblasRowMajor, trans_b, trans_a, n, m, k, alpha, b, ldb, a, lda, beta, c, ldc);
    return;
  }
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double acc = 0.0;
      for (int p = 0; p < k; ++p) {
        const float av = ta ? a[static_cast<long>(p) * lda + i] : a[static_cast<long>(i) * lda + p];
        const float bv = tb ? b[static_cast<long>(j) * ldb + p] : b[static_cast<long>(p) * ldb + j];
        acc += static_cast<double>(av) * bv;
      }
      float& cij = c[static_cast<long>(i) * ldc + j];
      cij = static_cast<float>(alpha * acc + (beta == 0.f ? 0.0 : static_cast<double>(beta) * cij));
    }
  }
}
