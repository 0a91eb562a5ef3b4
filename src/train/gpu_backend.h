// The GPU compute backend (CUDA, cuBLAS, kernels/cuda), built only with CUDA (LINS_TRAIN_GPU=1 tells callers it
// exists). First step of the GPU path: fp32 storage, bf16 tensor-core GEMMs; bf16 P/G storage not yet.
// Every tensor the model and executor see is fp32 on the device; GEMMs multiply on bf16 tensor cores with fp32
// accumulation (CUBLAS_COMPUTE_32F_FAST_16BF) and attention runs the bf16 flash kernels on rounded copies.
//
// Still to do for the paper's mixed precision (PAPER.md section 3), none of it needing a device to write:
// - the executor takes its element size from the storage dtype instead of 4 bytes: P, gathered buffers, full-module
//   and micro-batch gradients, G, the hpZ copy and broadcast payloads in bf16; master weights and Adam moments fp32;
// - the schedule is built with DType::bf16 for the gpu backend, so communicators move 2 bytes per element;
// - the optimizer uses the fused kernels::cuda adamw (fp32 master, bf16 gradient in, bf16 parameter out) instead of
//   copying master to P; init_normal writes the fp32 master and a cast fills P;
// - `lins step --backend gpu` plans and sizes memory with StateBytes{2, 2, 12} and PlannerOptions::dtype bf16;
// - the gpu step test then expects 16 bytes of states per parameter and a wider loss tolerance.
// The CPU backend stays fp32 (its equivalence tests need exact sums).
#pragma once

#include <cstdint>
#include <memory>

#include "core/result.h"
#include "train/backend.h"

namespace lins {

// Visible CUDA devices; 0 without a device or a driver (no other CUDA state is touched).
int gpu_device_count();

// Device-side figures beyond the tracked allocations of ComputeBackend::memory().
struct GpuMemoryInfo {
  int64_t reserved_bytes = 0;       // held by the caching pool now (live + cached free blocks)
  int64_t peak_reserved_bytes = 0;  // high-water mark of reserved_bytes
  int64_t device_used_bytes = 0;    // cudaMemGetInfo total - free: every process's use, context, cuBLAS, NCCL
  int64_t device_total_bytes = 0;
};

// The backend on `device` (cudaSetDevice is called on it): one non-blocking compute stream, a cuBLAS handle on it,
// a caching pool of cudaMalloc'd blocks (freed blocks are reused by size, so gathered-parameter buffers and
// activations are not allocated per call), events as cudaEvent_t (Event::native). Kernel launch failures abort with
// host, file:line and the CUDA error (the ComputeBackend interface has no error path for kernels). An error when no
// device exists, the index is out of range or cuBLAS cannot start.
Result<std::unique_ptr<ComputeBackend>> make_gpu_backend(int device);

// The pool and device figures of a backend made by make_gpu_backend (zeros for any other backend).
GpuMemoryInfo gpu_memory_info(ComputeBackend& backend);

}  // namespace lins
