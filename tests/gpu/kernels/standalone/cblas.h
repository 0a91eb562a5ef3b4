// Minimal CBLAS declarations for building the GPU kernel tests' CPU oracles on a machine without a BLAS package
// (the standalone build of scripts/gpu_check.py). Only what kernels/cpu uses: blasint and cblas_sgemm.
#pragma once

#ifdef __cplusplus
extern "C" {
#endif

typedef int blasint;  // OpenBLAS's index type (32-bit build)
enum CBLAS_ORDER { CblasRowMajor = 101, CblasColMajor = 102 };
enum CBLAS_TRANSPOSE { CblasNoTrans = 111, CblasTrans = 112, CblasConjTrans = 113 };

void cblas_sgemm(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE trans_a, enum CBLAS_TRANSPOSE trans_b, blasint m,
                 blasint n, blasint k, float alpha, const float* a, blasint lda, const float* b, blasint ldb,
                 float beta, float* c, blasint ldc);

#ifdef __cplusplus
}
#endif
