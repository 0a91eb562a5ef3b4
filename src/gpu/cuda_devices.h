// Telling "this machine has no GPU" from "this machine's GPU does not work" at cudaGetDeviceCount, the first CUDA
// call of every GPU user (the kernels, the GPU backend, the NCCL communicator, their tests and benchmarks). A GPU test
// exits 77 (skipped) only on the first; on the second it must fail, or a broken driver reads as a machine without GPU.
// Header-only: needs the CUDA runtime alone (the kernels include it as well as src/comm).
#pragma once

#include <cuda_runtime.h>
#include <dirent.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace lins {

// Whether `dev_dir` (normally /dev) holds an NVIDIA device node: /dev/nvidia0, /dev/nvidiactl, /dev/nvidia-uvm...
// (any entry named nvidia*), or /dev/dxg (a GPU under WSL). Such a node exists only where a GPU's kernel driver is
// loaded or the GPU was passed into a container.
inline bool nvidia_device_node_present(const char* dev_dir = "/dev") {
  DIR* d = opendir(dev_dir);
  if (!d) return false;
  bool found = false;
  while (const dirent* e = readdir(d)) {
    if (std::strncmp(e->d_name, "nvidia", 6) == 0 || std::strcmp(e->d_name, "dxg") == 0) {
      found = true;
      break;
    }
  }
  closedir(d);
  return found;
}

// Whether a cudaGetDeviceCount error means the machine has no GPU to use, rather than a GPU that does not work:
// cudaErrorNoDevice always (no device, or CUDA_VISIBLE_DEVICES hides every one); cudaErrorInsufficientDriver (what the
// runtime reports when no driver library is installed at all) and cudaErrorStubLibrary (only the toolkit's stub
// libcuda) only where no NVIDIA device node exists: with one, they mean a driver older than this runtime or a
// container that got the device but not its driver library. Every other error is a broken GPU machine.
inline bool cuda_error_means_no_gpu(cudaError_t error, bool device_node_present) {
  if (error == cudaErrorNoDevice) return true;
  if (error == cudaErrorInsufficientDriver || error == cudaErrorStubLibrary) return !device_node_present;
  return false;
}

// cudaGetDeviceCount, classified. Its error is taken off the runtime's last-error slot (cudaGetLastError), as far as
// the runtime allows: without a driver every later call keeps returning it.
struct CudaDeviceProbe {
  int count = 0;                     // devices visible; 0 on any error
  cudaError_t error = cudaSuccess;   // what cudaGetDeviceCount returned
  bool no_gpu = false;               // error != cudaSuccess and it means "no GPU here" (cuda_error_means_no_gpu)
  bool device_node_present = false;  // read only when cudaGetDeviceCount failed

  bool failed() const { return error != cudaSuccess && !no_gpu; }
  // For a failed() probe: the error's name, code and text, and what they mean; "" otherwise.
  std::string message() const {
    if (!failed()) return "";
    int runtime = 0;
    cudaRuntimeGetVersion(&runtime);
    std::string m = std::string("cudaGetDeviceCount failed: ") + cudaGetErrorName(error) + " (" +
                    std::to_string(static_cast<int>(error)) + "): " + cudaGetErrorString(error) + ". ";
    m += device_node_present
             ? "An NVIDIA device node exists (/dev/nvidia*), so this is a GPU machine whose driver or "
               "CUDA runtime does not work, not a machine without GPU"
             : "This is not how a machine without GPU answers (cudaErrorNoDevice, or no driver library: "
               "cudaErrorInsufficientDriver, cudaErrorStubLibrary)";
    m += ": check nvidia-smi, and that the driver supports CUDA " + std::to_string(runtime / 1000) + "." +
         std::to_string(runtime % 1000 / 10) + " (this program's runtime)";
    return m;
  }
};

inline CudaDeviceProbe probe_cuda_devices(const char* dev_dir = "/dev") {
  CudaDeviceProbe p;
  p.error = cudaGetDeviceCount(&p.count);
  if (p.error != cudaSuccess) {
    (void)cudaGetLastError();
    p.count = 0;
    p.device_node_present = nvidia_device_node_present(dev_dir);
    p.no_gpu = cuda_error_means_no_gpu(p.error, p.device_node_present);
  }
  return p;
}

// Devices visible to this process; 0 when the machine has no GPU to use (cuda_error_means_no_gpu). Any other failure
// of cudaGetDeviceCount prints the probe's message to stderr and exits with status 1: a GPU test then fails instead of
// being skipped, and no run falls back to the CPU on a machine whose GPU is broken.
inline int cuda_device_count_or_exit(const char* dev_dir = "/dev") {
  const CudaDeviceProbe p = probe_cuda_devices(dev_dir);
  if (p.failed()) {
    std::fprintf(stderr, "lins: %s\n", p.message().c_str());
    std::fflush(stderr);
    std::exit(1);
  }
  return p.count;
}

}  // namespace lins
