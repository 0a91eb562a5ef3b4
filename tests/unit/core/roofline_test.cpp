// The roofline compute model (core/cost/roofline.h): a GEMM is compute-bound or memory-bound by its own shape, the
// generations' efficiencies say where they come from, and the model holds to the step measured on an H200
// (data/gpu/h200-2026-12-04/step-bf16-cudnn.csv: 7B layer shapes, 2 layers, seq 4096, one GPU, cuDNN attention:
// forward 7.02 ms, backward 15.70 ms over the timed steps).
#include "core/cost/roofline.h"

#include <gtest/gtest.h>

#include "core/model/model_spec.h"

namespace lins {
namespace {

Roofline h200() {
  Roofline r;
  r.peak_flops_per_s = 989.4e12;
  r.hbm_bytes_per_s = 4800e9;
  r.kernels = kernel_efficiency(90);
  return r;
}

TEST(Roofline, AGemmIsComputeBoundWhenLargeAndMemoryBoundWhenSkinny) {
  const Roofline r = h200();
  // 4096 x 4096 x 4096: 137 GFLOP over 100 MB, compute bound.
  EXPECT_DOUBLE_EQ(r.gemm_s(4096, 4096, 4096), 2.0 * 4096 * 4096 * 4096 / (989.4e12 * r.kernels.gemm));
  // One token: a matrix-vector product, as fast as its weights can be read.
  const double bytes = 2.0 * (4096 + 4096 * 4096 + 4096);
  EXPECT_DOUBLE_EQ(r.gemm_s(1, 4096, 4096), bytes / (4800e9 * r.kernels.memory));
}

TEST(Roofline, EveryGenerationSaysWhereItsNumbersComeFrom) {
  for (int cc : {80, 90, 100}) {
    const KernelEfficiency k = kernel_efficiency(cc);
    EXPECT_GT(k.gemm, 0.5);
    EXPECT_LT(k.gemm, 1.0);
    EXPECT_LT(k.attention_backward, k.attention_forward);
    EXPECT_FALSE(k.source.empty());
    EXPECT_EQ(k.measured, cc == 90) << k.source;  // only Hopper ran here
  }
  EXPECT_NE(kernel_efficiency(100).source.find("not measured"), std::string::npos);
}

TEST(Roofline, HoldsToTheStepMeasuredOnAnH200) {
  ModelDims d = make_model_preset("llama-7b")->dims;
  d.layers = 2;
  const ModelSpec m = *make_model(d);
  const Roofline r = h200();
  double fwd = 0, bwd = 0;
  for (int i = 0; i < int(m.modules.size()); ++i) {
    fwd += r.forward_s(m, i, 4096, 4096);
    bwd += r.backward_s(m, i, 4096, 4096);
  }
  // Measured 7.02 ms and 15.70 ms: the roofline leaves out launch gaps and the kernels' tails, so it is a little fast.
  EXPECT_NEAR(fwd, 7.02e-3, 0.10 * 7.02e-3);
  EXPECT_NEAR(bwd, 15.70e-3, 0.15 * 15.70e-3);
  EXPECT_LT(fwd, 7.02e-3 * 1.02);
}

}  // namespace
}  // namespace lins

namespace lins {
namespace {

TEST(Roofline, AGpuChecksMeasurementsAreItsKernelRates) {
  const std::string csv =
      std::string(LINS_TEST_DATA_DIR) + "/../../../../data/gpu/h200-2026-12-04/bench_kernels_gpu.csv";
  auto k = kernel_efficiency_from_bench(csv, 90, 989.4, 4800);
  ASSERT_TRUE(k) << k.error();
  // The same numbers the sm90 priors were read from.
  const KernelEfficiency prior = kernel_efficiency(90);
  EXPECT_NEAR(k->gemm, prior.gemm, 0.01);
  EXPECT_NEAR(k->attention_forward, prior.attention_forward, 0.001);
  EXPECT_NEAR(k->attention_backward, prior.attention_backward, 0.001);
  EXPECT_NEAR(k->memory, prior.memory, 0.01);
  EXPECT_NEAR(k->optimizer, prior.optimizer, 0.01);
  EXPECT_TRUE(k->measured);
  // Against an A800's peaks the same file cannot be: refused.
  EXPECT_FALSE(kernel_efficiency_from_bench(csv, 80, 312, 2039));
}

}  // namespace
}  // namespace lins
