// CUDA_CHECK and NCCL_CHECK: on failure print host, rank, file:line, the call and the error text, then MPI_Abort
// (comm_fatal), because the other ranks would otherwise wait forever. Only for code built with CUDA and NCCL.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include "comm/check.h"

#define CUDA_CHECK(call)                                                                                           \
  do {                                                                                                             \
    const cudaError_t lins_cuda_rc_ = (call);                                                                      \
    if (lins_cuda_rc_ != cudaSuccess)                                                                              \
      ::lins::comm_fatal(__FILE__, __LINE__, #call,                                                                \
                         std::string(cudaGetErrorName(lins_cuda_rc_)) + ": " + cudaGetErrorString(lins_cuda_rc_)); \
  } while (0)

#define NCCL_CHECK(call)                                                                                           \
  do {                                                                                                             \
    const ncclResult_t lins_nccl_rc_ = (call);                                                                     \
    if (lins_nccl_rc_ != ncclSuccess)                                                                              \
      ::lins::comm_fatal(__FILE__, __LINE__, #call,                                                                \
                         std::string(ncclGetErrorString(lins_nccl_rc_)) + " (" + ncclGetLastError(nullptr) + ")"); \
  } while (0)
