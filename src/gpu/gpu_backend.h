// The GPU compute backend (CUDA, cuBLAS, kernels/cuda), built only with CUDA, into the GPU plugin (comm/gpu_plugin.h:
// `lins` reaches it through the plugin's table). Its compute dtype (ComputeBackend::compute_dtype(), chosen at make_gpu_backend) is what the model's
// activations and the parameters the kernels read are held in:
//   bf16 (the default, the paper's configuration): bf16 activations and the native bf16 kernels of kernels/cuda end
//     to end: bf16 tensor-core GEMMs (cuBLAS, fp32 accumulation, C rounded once to bf16), bf16 flash attention,
//     RMSNorm, SwiGLU, RoPE, cross-entropy, embedding and residual adds on bf16 tensors (arithmetic in fp32 inside
//     each kernel, every output rounded to bf16). rstd, lse and the weight gradients stay fp32: a weight gradient's
//     GEMM writes (accumulates into) an fp32 C, RMSNorm's dweight and the embedding's dtable accumulate in fp32.
//   fp32 (the earlier path): fp32 tensors throughout; GEMMs still multiply on bf16 tensor cores (cuBLAS rounds the fp32
//     inputs inside the kernel, CUBLAS_COMPUTE_32F_FAST_16BF) and attention runs the bf16 flash kernels on rounded
//     copies in a workspace, results widened back to fp32.
//
// Storage of P and G is the executor's choice (ExecutorOptions::state_dtype), not the backend's. With bf16 (the
// paper's mixed precision, docs/method.md "The problem") P, G and every collective's payload are bf16 and master
// weights and Adam moments fp32, 16 bytes of states per parameter; with fp32 storage 20 bytes. The executor moves
// between the storage and the compute dtype with convert() (widening or narrowing P when they differ, rounding or
// accumulating the fp32 weight gradients into G) and adamw() runs the fused kernel for any (gradient, parameter) dtype
// pair. The CPU backend implements the same calls with the kernels/cpu references (and emulates bf16 compute).
#pragma once

#include <cstdint>
#include <memory>

#include "comm/gpu_plugin.h"  // GpuBackendOptions, GpuMemoryInfo
#include "core/util/result.h"
#include "train/backend.h"

namespace lins {

// Visible CUDA devices; 0 without a device or a driver (no other CUDA state is touched).
int gpu_device_count();

// The backend on `device` (cudaSetDevice is called on it): one non-blocking compute stream, a cuBLAS handle on it,
// a caching pool of cudaMalloc'd blocks (freed blocks are reused by size, so gathered-parameter buffers and
// activations are not allocated per call), events as cudaEvent_t (Event::native). Kernel launch failures abort with
// host, file:line and the CUDA error (the ComputeBackend interface has no error path for kernels), as does a call the
// compute dtype cannot serve (a bf16 GEMM output from an fp32-compute backend). `compute` is the activations' dtype
// (fp32 or bf16, see above). An error when no device exists, the index is out of range or cuBLAS cannot start.
Result<std::unique_ptr<ComputeBackend>> make_gpu_backend(const GpuBackendOptions& options);
// The same with the flash attention kernels.
Result<std::unique_ptr<ComputeBackend>> make_gpu_backend(int device, DType compute = DType::bf16);

// The pool and device figures of a backend made by make_gpu_backend (zeros for any other backend).
GpuMemoryInfo gpu_memory_info(ComputeBackend& backend);

}  // namespace lins
