// Error checks for CUDA runtime and cuBLAS calls: on failure they print host, file:line, the call and the error text,
// then abort. For tests, benchmarks and main(); library code returns the error instead.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace lins::kernels::cuda::detail {

inline const char* host_name() {
  static char name[256] = {0};
  if (name[0] == 0 && gethostname(name, sizeof(name) - 1) != 0) snprintf(name, sizeof(name), "unknown-host");
  return name;
}

[[noreturn]] inline void fail(const char* what, const char* text, int code, const char* call, const char* file,
                              int line) {
  fprintf(stderr, "[%s] %s:%d: %s failed: %s error %d (%s)\n", host_name(), file, line, call, what, code, text);
  fflush(stderr);
  std::abort();
}

}  // namespace lins::kernels::cuda::detail

#define CUDA_CHECK(call)                                                                                             \
  do {                                                                                                               \
    cudaError_t lins_err_ = (call);                                                                                  \
    if (lins_err_ != cudaSuccess)                                                                                    \
      ::lins::kernels::cuda::detail::fail("CUDA", cudaGetErrorString(lins_err_), static_cast<int>(lins_err_), #call, \
                                          __FILE__, __LINE__);                                                       \
  } while (0)

#define CUBLAS_CHECK(call)                                                                                       \
  do {                                                                                                           \
    cublasStatus_t lins_st_ = (call);                                                                            \
    if (lins_st_ != CUBLAS_STATUS_SUCCESS)                                                                       \
      ::lins::kernels::cuda::detail::fail("cuBLAS", cublasGetStatusString(lins_st_), static_cast<int>(lins_st_), \
                                          #call, __FILE__, __LINE__);                                            \
  } while (0)
