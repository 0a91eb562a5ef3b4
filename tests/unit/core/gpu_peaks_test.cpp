// core/gpu_peaks.h: the names CUDA gives devices find their datasheet peak, the specific variant before the family.
#include "core/cost/gpu_peaks.h"

#include <gtest/gtest.h>

namespace lins {
namespace {

TEST(DatasheetPeak, CudaDeviceNamesFindTheirVariant) {
  struct Case {
    const char* name;
    double tflops;
  };
  for (const Case& c : {Case{"NVIDIA H100 80GB HBM3", 989.4}, Case{"NVIDIA H200", 989.4}, Case{"NVIDIA H100 PCIe", 756},
                        Case{"NVIDIA H100 NVL", 835.5}, Case{"NVIDIA H200 NVL", 835.5},
                        Case{"NVIDIA A100-SXM4-80GB", 312}, Case{"NVIDIA A800 80GB PCIe", 312},
                        Case{"NVIDIA GH200 480GB", 989.4}, Case{"NVIDIA H20", 148}}) {
    auto p = datasheet_bf16_peak(c.name);
    ASSERT_TRUE(p) << c.name;
    EXPECT_DOUBLE_EQ(p->tflops, c.tflops) << c.name << ": " << p->source;
    EXPECT_NE(p->source.find("dense BF16"), std::string::npos) << p->source;
  }
  EXPECT_FALSE(datasheet_bf16_peak("NVIDIA GeForce RTX 4090"));
  EXPECT_FALSE(datasheet_bf16_peak(""));
}

}  // namespace
}  // namespace lins
