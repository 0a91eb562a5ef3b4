// The datasheet table of gpu_peaks.h. Dense rates (the datasheets' "with sparsity" figures are twice these).
#include "core/cost/gpu_peaks.h"

#include <array>
#include <cstdio>

namespace lins {
namespace {

struct Entry {
  const char* match;  // a part of the CUDA device name; the first entry that matches wins (specific ones first)
  double tflops;
  const char* product;
};

// NVIDIA's product datasheets (H100: "NVIDIA H100 Tensor Core GPU" datasheet, SXM 989.4 / NVL 835.5 / PCIe 756;
// H200: "NVIDIA H200 Tensor Core GPU", SXM 989.4 / NVL 835.5; A100 / A800: 312; L40S: 362.05; GH200: 989.4).
constexpr std::array<Entry, 12> kTable{{
    {"H100 PCIe", 756.0, "NVIDIA H100 PCIe"},
    {"H100 NVL", 835.5, "NVIDIA H100 NVL"},
    {"H200 NVL", 835.5, "NVIDIA H200 NVL"},
    {"GH200", 989.4, "NVIDIA GH200"},
    {"H100", 989.4, "NVIDIA H100 SXM5"},
    {"H200", 989.4, "NVIDIA H200 SXM"},
    {"H800 PCIe", 756.0, "NVIDIA H800 PCIe"},
    {"H800", 989.4, "NVIDIA H800 SXM5"},
    {"H20", 148.0, "NVIDIA H20"},
    {"A100", 312.0, "NVIDIA A100"},
    {"A800", 312.0, "NVIDIA A800"},
    {"L40S", 362.05, "NVIDIA L40S"},
}};

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

}  // namespace lins
