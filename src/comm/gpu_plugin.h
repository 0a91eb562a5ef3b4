// The GPU plugin: the NCCL communicator, the GPU compute backend and the CUDA kernels live in one module,
// liblins_gpu.so, that `lins` loads only when a run asks for the GPU (--backend nccl or gpu, the device probe of
// --backend auto). `lins` itself links no CUDA library: it starts in milliseconds, carries neither libcudart nor
// libnccl into every CPU rank, and runs on a machine without them. The module exports one versioned entry point,
// lins_gpu_plugin_v1(), returning the table below (as NCCL's own network and tuner plugins do).
//
// The module is built from the same sources as `lins` (it calls back into lins's core and comm code, which `lins`
// exports), so the table holds C++ types; the loader refuses a module whose ABI version, table size or build (lins
// version and commit) differ from its own, naming both, because a stale module would disagree on those types.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "comm/communicator.h"
#include "core/util/names.h"
#include "core/util/result.h"

namespace lins {

class ComputeBackend;  // train/backend.h

// Bumped whenever the table or a type it passes changes.
inline constexpr int kGpuPluginAbiVersion = 1;
inline constexpr const char* kGpuPluginFileName = "liblins_gpu.so";
inline constexpr const char* kGpuPluginEntryPoint = "lins_gpu_plugin_v1";

// The attention kernels of the GPU backend: cuDNN's fused scaled-dot-product attention (where the module was built
// with cuDNN 9 and its frontend), or the project's own flash-attention kernels (kernels/cuda/attention.cu).
enum class AttentionKernel { cudnn, flash };
inline constexpr NameTable<AttentionKernel, 2> kAttentionKernelNames{
    "attention kernel",
    {{
        {AttentionKernel::cudnn, "cudnn", "", "cuDNN 9 fused scaled-dot-product attention (graph API)"},
        {AttentionKernel::flash, "flash", "", "the project's flash-attention-2 style WMMA kernels"},
    }}};
static_assert(kAttentionKernelNames.complete(AttentionKernel::flash));

// cudaGetDeviceCount, classified (gpu/cuda_devices.h): count 0 and an empty error on a machine without GPU; count 0
// and the error's explanation on a GPU machine whose driver or runtime does not work.
struct GpuDeviceProbe {
  int count = 0;
  std::string error;
  bool failed() const { return !error.empty(); }
};

// Free and total bytes of one device (cudaMemGetInfo).
struct DeviceMemory {
  double free_bytes = 0, total_bytes = 0;
};

// Device-side figures of a GPU backend beyond its tracked allocations (ComputeBackend::memory()).
struct GpuMemoryInfo {
  int64_t reserved_bytes = 0;       // held by the caching pool now (live + cached free blocks)
  int64_t peak_reserved_bytes = 0;  // high-water mark of reserved_bytes
  int64_t device_used_bytes = 0;    // cudaMemGetInfo total - free: every process's use, context, cuBLAS, NCCL
  int64_t device_total_bytes = 0;
};

struct GpuBackendOptions {
  int device = 0;
  DType compute = DType::bf16;  // the activations' dtype (gpu/gpu_backend.h)
  AttentionKernel attention = AttentionKernel::flash;
};

struct GpuPlugin {
  int abi_version = 0;         // kGpuPluginAbiVersion
  size_t table_bytes = 0;      // sizeof(GpuPlugin)
  const char* build = nullptr;  // "LINS_VERSION commit": must equal the loader's

  GpuDeviceProbe (*probe_devices)() = nullptr;
  std::string (*nccl_version)() = nullptr;        // "NCCL 2.28.9"
  std::string (*cuda_version)() = nullptr;        // "CUDA runtime 13.0, driver 13.0"
  std::string (*device_name)(int device) = nullptr;  // "" when there is no such device
  Result<DeviceMemory> (*device_memory)(int device) = nullptr;
  bool (*cudnn_attention_built)() = nullptr;  // the module has cuDNN's fused attention (AttentionKernel::cudnn)

  // Device buffers for `lins comm`: nullptr when cudaMalloc fails; copies are synchronous and abort on error.
  void* (*device_alloc_or_null)(size_t bytes) = nullptr;
  void (*device_free)(void* p) = nullptr;
  void (*copy_to_device)(void* dst, const void* src, size_t bytes) = nullptr;
  void (*copy_to_host)(void* dst, const void* src, size_t bytes) = nullptr;

  // NcclCommunicator::create (gpu/nccl_communicator.h); collective over `comm`.
  Result<std::unique_ptr<Communicator>> (*make_nccl_communicator)(MPI_Comm comm, std::string name, Axis axis,
                                                                  void* compute_stream) = nullptr;
  // make_gpu_backend (gpu/gpu_backend.h), and the pool figures of a backend it made (zeros for any other).
  Result<std::unique_ptr<ComputeBackend>> (*make_backend)(const GpuBackendOptions& options) = nullptr;
  GpuMemoryInfo (*memory_info)(ComputeBackend& backend) = nullptr;
};

// "LINS_VERSION commit" of this binary, the build the module must have.
std::string gpu_plugin_build_id();

// The module, loaded on first call (thread-safe, once per process): a module linked into the program itself (the GPU
// tests), else the file named by LINS_GPU_PLUGIN, else liblins_gpu.so beside the executable, else in ../lib beside
// it. The error names each path tried and why it failed (not found; dlopen's message, which names a missing
// libcudart or libnccl; or a mismatched build), and what to do.
Result<const GpuPlugin*> gpu_plugin();
// The module when an earlier gpu_plugin() loaded it, else nullptr; never loads (provenance of a CPU run).
const GpuPlugin* loaded_gpu_plugin();
// Where the module that gpu_plugin() would load first is, without a machine's paths (for provenance): "linked in",
// "LINS_GPU_PLUGIN", "beside lins" or "../lib beside lins"; "" when none exists (no load attempted).
std::string gpu_plugin_location();

}  // namespace lins

// Defined by the module (src/gpu/plugin.cpp).
extern "C" const lins::GpuPlugin* lins_gpu_plugin_v1();
