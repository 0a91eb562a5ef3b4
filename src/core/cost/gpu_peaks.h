// The datasheet numbers of GPUs: the dense bf16 peak MFU is conventionally taken against (Megatron-LM, the paper,
// PyTorch's MFU reports), looked up by the name CUDA gives the device, and the GPU presets a network file names
// (gpu = "h100-sxm"): peak, HBM bandwidth and capacity, each from its vendor datasheet. A measured GEMM rate is
// reported beside the peak (lins step's gemm_tflops), since cuBLAS reaches only part of the datasheet rate.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lins {

struct DatasheetPeak {
  double tflops = 0;   // dense bf16, per GPU
  std::string source;  // "NVIDIA H100 SXM5 datasheet, dense BF16 (989.4 TFLOP/s)"
};

// The peak of a device named as cudaGetDeviceProperties names it ("NVIDIA H100 80GB HBM3", "NVIDIA H200",
// "NVIDIA A100-SXM4-80GB"); nullopt for a device not in the table.
std::optional<DatasheetPeak> datasheet_bf16_peak(std::string_view device_name);

// A GPU a network file can name: what a projection needs of it, from its datasheet.
struct GpuPreset {
  const char* name;        // "h100-sxm": what a network file's gpu key takes
  const char* product;     // "NVIDIA H100 SXM5 80GB"
  int compute_capability;  // 80 (Ampere), 90 (Hopper), 100 (Blackwell); a network's gpu_arch is checked against it
  double peak_tflops;      // dense bf16 tensor-core rate (the datasheets print twice this "with sparsity")
  double hbm_gbps;         // HBM bandwidth, GB/s (10^9 bytes per second)
  double mem_gib;          // HBM capacity in GiB (2^30 bytes): the datasheets' "80GB" (see gpu_peaks.cpp)
  const char* source;      // the datasheet each number is from
};

// The presets, in generation order.
const std::vector<GpuPreset>& gpu_presets();
// The preset of that name; nullptr for none.
const GpuPreset* find_gpu_preset(std::string_view name);
// "a800-sxm, a100-sxm, h100-sxm, h200, b200": for errors and help.
std::string gpu_preset_list();
// The presets whose peak is `tflops` to within 1% (what a --peak-tflops of 312 or 989 means).
std::vector<const GpuPreset*> gpu_presets_with_peak(double tflops);

}  // namespace lins
