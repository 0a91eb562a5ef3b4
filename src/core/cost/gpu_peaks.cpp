// The datasheet tables of gpu_peaks.h. Dense rates (the datasheets' "with sparsity" figures are twice these).
#include "core/cost/gpu_peaks.h"

#include <array>
#include <cmath>
#include <cstdio>

namespace lins {
namespace {

struct Entry {
  const char* match;  // a part of the CUDA device name; the first entry that matches wins (specific ones first)
  double tflops;
  const char* product;
};

// NVIDIA's product datasheets (H100: "NVIDIA H100 Tensor Core GPU" datasheet, SXM 989.4 / NVL 835.5 / PCIe 756;
// H200: "NVIDIA H200 Tensor Core GPU", SXM 989.4 / NVL 835.5; A100 / A800: 312; L40S: 362.05; GH200: 989.4;
// B200: the HGX B200 specifications, 36 PFLOP/s with sparsity over 8 GPUs = 2250 dense each; GB200: the GB200 NVL72
// specifications, 360 PFLOP/s with sparsity over 72 GPUs = 2500 dense each).
constexpr std::array<Entry, 14> kTable{{
    {"H100 PCIe", 756.0, "NVIDIA H100 PCIe"},
    {"H100 NVL", 835.5, "NVIDIA H100 NVL"},
    {"H200 NVL", 835.5, "NVIDIA H200 NVL"},
    {"GH200", 989.4, "NVIDIA GH200"},
    {"H100", 989.4, "NVIDIA H100 SXM5"},
    {"H200", 989.4, "NVIDIA H200 SXM"},
    {"H800 PCIe", 756.0, "NVIDIA H800 PCIe"},
    {"H800", 989.4, "NVIDIA H800 SXM5"},
    {"H20", 148.0, "NVIDIA H20"},
    {"GB200", 2500.0, "NVIDIA GB200"},
    {"B200", 2250.0, "NVIDIA B200 (HGX)"},
    {"A100", 312.0, "NVIDIA A100"},
    {"A800", 312.0, "NVIDIA A800"},
    {"L40S", 362.05, "NVIDIA L40S"},
}};

// Capacity: the datasheets write HBM capacity as "80GB" or "141GB" but mean binary units: an A100 80GB holds 81920
// MiB (80 GiB), and the H200 of data/gpu/ reports 139.80 GiB in all, where 141 x 10^9 bytes would be 131.3 GiB.
// So each capacity below is the datasheet's number in GiB, as --gpu-mem 80GiB has always read the A800's 80GB.
const std::vector<GpuPreset> kPresets = {
    {"a800-sxm", "NVIDIA A800 SXM4 80GB", 80, 312.0, 2039.0, 80.0,
     "NVIDIA A800 40GB/80GB PCIe/SXM datasheet (2022): BF16 tensor core 312 TFLOP/s (624 with sparsity), 80GB "
     "HBM2e at 2,039 GB/s (SXM4 80GB)"},
    {"a100-sxm", "NVIDIA A100 SXM4 80GB", 80, 312.0, 2039.0, 80.0,
     "NVIDIA A100 Tensor Core GPU datasheet: BF16 tensor core 312 TFLOP/s (624 with sparsity), 80GB HBM2e at 2,039 "
     "GB/s (SXM4 80GB)"},
    {"h100-sxm", "NVIDIA H100 SXM5 80GB", 90, 989.4, 3350.0, 80.0,
     "NVIDIA H100 Tensor Core GPU datasheet: BF16 tensor core 1,979 TFLOP/s with sparsity (989.4 dense), 80GB HBM3 "
     "at 3.35 TB/s (H100 SXM)"},
    {"h200", "NVIDIA H200 SXM 141GB", 90, 989.4, 4800.0, 141.0,
     "NVIDIA H200 Tensor Core GPU datasheet: BF16 tensor core 1,979 TFLOP/s with sparsity (989.4 dense), 141GB "
     "HBM3e at 4.8 TB/s (H200 SXM)"},
    {"b200", "NVIDIA B200 (HGX B200, 1000 W)", 100, 2250.0, 8000.0, 180.0,
     "NVIDIA HGX B200 specifications: FP16/BF16 tensor core 36 PFLOP/s with sparsity over 8 GPUs (2,250 TFLOP/s "
     "dense each); DGX B200 datasheet: 1,440GB of HBM3e at 64 TB/s over 8 GPUs (180GB and 8 TB/s each)"},
};

}  // namespace

std::optional<DatasheetPeak> datasheet_bf16_peak(std::string_view device_name) {
  for (const Entry& e : kTable) {
    const std::string_view m = e.match;
    const size_t at = device_name.find(m);
    if (at == std::string_view::npos) continue;
    // "H20" must not match "H200": the match ends the name or is followed by a non-digit.
    const size_t end = at + m.size();
    if (end < device_name.size() && device_name[end] >= '0' && device_name[end] <= '9') continue;
    char rate[32];
    std::snprintf(rate, sizeof rate, "%g", e.tflops);
    return DatasheetPeak{e.tflops, std::string(e.product) + " datasheet, dense BF16 (" + rate + " TFLOP/s)"};
  }
  return std::nullopt;
}

const std::vector<GpuPreset>& gpu_presets() { return kPresets; }

const GpuPreset* find_gpu_preset(std::string_view name) {
  for (const GpuPreset& p : kPresets)
    if (name == p.name) return &p;
  return nullptr;
}

std::string gpu_preset_list() {
  std::string out;
  for (const GpuPreset& p : kPresets) out += (out.empty() ? "" : ", ") + std::string(p.name);
  return out;
}

std::vector<const GpuPreset*> gpu_presets_with_peak(double tflops) {
  // 1%: a peak given rounded (989 for 989.4, 2.25e3) still names its GPU; no two generations are that close.
  constexpr double kPeakMatch = 0.01;
  std::vector<const GpuPreset*> out;
  for (const GpuPreset& p : kPresets)
    if (std::fabs(tflops - p.peak_tflops) <= kPeakMatch * p.peak_tflops) out.push_back(&p);
  return out;
}

}  // namespace lins
