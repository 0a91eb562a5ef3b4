// The GPU compute backend (CUDA, cuBLAS, kernels/cuda), built only with CUDA (LINS_TRAIN_GPU=1 tells callers it
// exists). Every compute tensor the model sees is fp32 on the device; GEMMs multiply on bf16 tensor cores with fp32
// accumulation (CUBLAS_COMPUTE_32F_FAST_16BF) and attention runs the bf16 flash kernels on rounded copies.
//
// Storage of P and G is the executor's choice (ExecutorOptions::state_dtype), not the backend's. With bf16 (the
// paper's mixed precision, PAPER.md section 3) P, G and every collective's payload are bf16 and master weights and
// Adam moments fp32, 16 bytes of states per parameter: convert() widens a module's bf16 parameters into an fp32
// working copy and rounds (or accumulates) its fp32 gradients into bf16, and adamw() runs the fused kernel (fp32
// master, bf16 gradient in, bf16 parameters out). With fp32 storage (20 bytes per parameter) the same calls take
// fp32 on both sides. The CPU backend implements the same calls with the kernels/cpu references.
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
