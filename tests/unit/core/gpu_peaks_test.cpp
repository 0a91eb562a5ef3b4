// core/gpu_peaks.h: the names CUDA gives devices find their datasheet peak, the specific variant before the family;
// the GPU presets a network file names hold the same peaks, each with its datasheet, and a peak finds its GPUs.
#include "core/cost/gpu_peaks.h"

#include <gtest/gtest.h>

#include <set>

namespace lins {
namespace {

TEST(DatasheetPeak, CudaDeviceNamesFindTheirVariant) {
  struct Case {
    const char* name;
    double tflops;
  };
  for (const Case& c :
       {Case{"NVIDIA H100 80GB HBM3", 989.4}, Case{"NVIDIA H200", 989.4}, Case{"NVIDIA H100 PCIe", 756},
        Case{"NVIDIA H100 NVL", 835.5}, Case{"NVIDIA H200 NVL", 835.5}, Case{"NVIDIA A100-SXM4-80GB", 312},
        Case{"NVIDIA A800 80GB PCIe", 312}, Case{"NVIDIA GH200 480GB", 989.4}, Case{"NVIDIA H20", 148},
        Case{"NVIDIA B200", 2250}, Case{"NVIDIA GB200", 2500}}) {
    auto p = datasheet_bf16_peak(c.name);
    ASSERT_TRUE(p) << c.name;
    EXPECT_DOUBLE_EQ(p->tflops, c.tflops) << c.name << ": " << p->source;
    EXPECT_NE(p->source.find("dense BF16"), std::string::npos) << p->source;
  }
  EXPECT_FALSE(datasheet_bf16_peak("NVIDIA GeForce RTX 4090"));
  EXPECT_FALSE(datasheet_bf16_peak(""));
}

TEST(GpuPresets, EachHasItsDatasheetAndTheDevicesPeak) {
  // The CUDA name of each preset's device: a preset and lins step's MFU peak on that device agree.
  const struct {
    const char* preset;
    const char* cuda_name;
  } devices[] = {{"a800-sxm", "NVIDIA A800-SXM4-80GB"},
                 {"a100-sxm", "NVIDIA A100-SXM4-80GB"},
                 {"h100-sxm", "NVIDIA H100 80GB HBM3"},
                 {"h200", "NVIDIA H200"},
                 {"b200", "NVIDIA B200"}};
  ASSERT_EQ(gpu_presets().size(), std::size(devices));
  std::set<std::string> names;
  for (const auto& d : devices) {
    const GpuPreset* p = find_gpu_preset(d.preset);
    ASSERT_NE(p, nullptr) << d.preset;
    names.insert(p->name);
    auto device = datasheet_bf16_peak(d.cuda_name);
    ASSERT_TRUE(device) << d.cuda_name;
    EXPECT_DOUBLE_EQ(p->peak_tflops, device->tflops) << d.preset;
    EXPECT_GT(p->hbm_gbps, 1000) << d.preset;
    EXPECT_GE(p->mem_gib, 80) << d.preset;
    EXPECT_TRUE(p->compute_capability == 80 || p->compute_capability == 90 || p->compute_capability == 100);
    // Each number's source: the datasheet, and the sparsity convention said where the sheet prints twice the rate.
    const std::string source = p->source;
    EXPECT_TRUE(source.find("datasheet") != std::string::npos || source.find("specifications") != std::string::npos)
        << source;
    EXPECT_NE(source.find("TFLOP/s"), std::string::npos) << source;
    EXPECT_NE(source.find("sparsity"), std::string::npos) << source;
  }
  EXPECT_EQ(names.size(), std::size(devices));
  EXPECT_EQ(find_gpu_preset("h100"), nullptr);
  EXPECT_EQ(gpu_preset_list(), "a800-sxm, a100-sxm, h100-sxm, h200, b200");
  // The datasheets' capacities, in GiB: 80, 141 and 180.
  EXPECT_DOUBLE_EQ(find_gpu_preset("h200")->mem_gib, 141.0);
  EXPECT_DOUBLE_EQ(find_gpu_preset("h100-sxm")->hbm_gbps, 3350.0);
}

TEST(GpuPresets, APeakFindsItsGpusToWithinOnePercent) {
  auto names = [](double tflops) {
    std::string out;
    for (const GpuPreset* p : gpu_presets_with_peak(tflops)) {
      if (!out.empty()) out += ",";
      out += p->name;
    }
    return out;
  };
  EXPECT_EQ(names(312), "a800-sxm,a100-sxm");
  EXPECT_EQ(names(989), "h100-sxm,h200");
  EXPECT_EQ(names(989.4), "h100-sxm,h200");
  EXPECT_EQ(names(2.25e3), "b200");
  EXPECT_EQ(names(500), "");
  EXPECT_EQ(names(1), "");
}

}  // namespace
}  // namespace lins
