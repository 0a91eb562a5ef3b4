// The GPU plugin's one entry point: the table of comm/gpu_plugin.h over the NCCL communicator, the GPU backend and
// the CUDA device helpers. Built into liblins_gpu.so (and linked directly into the GPU tests).
#include "comm/gpu_plugin.h"

#include "gpu/cuda_devices.h"
#include "gpu/nccl_communicator.h"
#include "kernels/cuda/attention_cudnn.h"
#include "gpu/gpu_backend.h"

#include "lins_git_commit.h"  // generated at build time

namespace lins {
namespace {

GpuDeviceProbe probe_devices() {
  const CudaDeviceProbe p = probe_cuda_devices();
  return GpuDeviceProbe{p.count, p.message()};
}

Result<std::unique_ptr<Communicator>> make_nccl(MPI_Comm comm, std::string name, Axis axis, void* compute_stream) {
  auto c = NcclCommunicator::create(comm, std::move(name), axis, static_cast<CUstream_st*>(compute_stream));
  if (!c) return make_error(c.error());
  return std::unique_ptr<Communicator>(std::move(*c));
}

GpuPlugin make_table() {
  GpuPlugin t;
  t.abi_version = kGpuPluginAbiVersion;
  t.table_bytes = sizeof(GpuPlugin);
  // This module's own build, spelled here: gpu_plugin_build_id() would resolve to the loading program's copy.
  t.build = LINS_VERSION " " LINS_GIT_COMMIT;
  t.probe_devices = probe_devices;
  t.nccl_version = nccl_version_string;
  t.cuda_version = cuda_version_string;
  t.device_name = cuda_device_name;
  t.device_memory = device_memory;
  t.cudnn_attention_built = kernels::cuda::cudnn_attention_available;
  t.device_alloc_or_null = device_alloc_or_null;
  t.device_free = device_free;
  t.copy_to_device = copy_to_device;
  t.copy_to_host = copy_to_host;
  t.make_nccl_communicator = make_nccl;
  t.make_backend = [](const GpuBackendOptions& o) { return make_gpu_backend(o); };
  t.memory_info = gpu_memory_info;
  return t;
}

}  // namespace
}  // namespace lins

extern "C" const lins::GpuPlugin* lins_gpu_plugin_v1() {
  static const lins::GpuPlugin table = lins::make_table();
  return &table;
}
