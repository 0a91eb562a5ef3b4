// The datasheet peaks MFU is conventionally taken against (Megatron-LM, the paper, PyTorch's MFU reports): each
// GPU's dense bf16 tensor-core rate, looked up by the name CUDA gives the device. A measured GEMM rate is reported
// beside it (lins step's gemm_tflops), since cuBLAS reaches only part of the datasheet rate.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace lins {

struct DatasheetPeak {
  double tflops = 0;   // dense bf16, per GPU
  std::string source;  // "NVIDIA H100 SXM5 datasheet, dense BF16 (989.4 TFLOP/s)"
};

// The peak of a device named as cudaGetDeviceProperties names it ("NVIDIA H100 80GB HBM3", "NVIDIA H200",
// "NVIDIA A100-SXM4-80GB"); nullopt for a device not in the table.
std::optional<DatasheetPeak> datasheet_bf16_peak(std::string_view device_name);

}  // namespace lins
