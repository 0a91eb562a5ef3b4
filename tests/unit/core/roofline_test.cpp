// The roofline compute model (core/cost/roofline.h): a GEMM is compute-bound or memory-bound by its own shape, the
// generations' efficiencies say where they come from, and the model holds to the step measured on an H200
// (data/gpu/h200-2026-12-04/step-bf16-cudnn.csv: 7B layer shapes, 2 layers, seq 4096, one GPU, cuDNN attention:
// forward 7.02 ms, backward 15.70 ms over the timed steps).
#include "core/cost/roofline.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

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
  // 4096 x 4096 x 4096: 137 GFLOP over 100 MB, compute bound; its 512 tiles of 256 x 128 take 4 waves of 132 SMs.
  EXPECT_DOUBLE_EQ(r.gemm_s(4096, 4096, 4096),
                   2.0 * 4096 * 4096 * 4096 / (989.4e12 * r.kernels.gemm * (512.0 / (4 * 132))));
  // One token: a matrix-vector product, as fast as its weights can be read.
  // (Its 16 tiles are split 8 ways along k, whose fp32 partial sums add 1% to the bytes.)
  const double splits = gemm_tile_fill(1, 4096, 4096, 132).k_splits;
  EXPECT_EQ(splits, 8);
  const double bytes = 2.0 * (4096 + 4096 * 4096 + 4096) + 2 * 4 * splits * 4096;
  EXPECT_DOUBLE_EQ(r.gemm_s(1, 4096, 4096), bytes / (4800e9 * r.kernels.memory));
}

TEST(Roofline, AGemmsTilesFillTheSmsInWaves) {
  // 132 tiles of 256 x 128 on 132 SMs: one full wave. One tile more needs a second wave, which it leaves almost empty.
  EXPECT_DOUBLE_EQ(gemm_tile_fill(132 * 256, 128, 4096, 132).fill, 1.0);
  EXPECT_DOUBLE_EQ(gemm_tile_fill(133 * 256, 128, 4096, 132).fill, 133.0 / 264);
  // An edge one element past a tile pads a whole tile (tile quantization): 2 x 1 tiles where 1.004 x 1 are used.
  const GemmTileFill ragged = gemm_tile_fill(257, 128, 256, 132);
  EXPECT_NEAR(ragged.fill, (257.0 * 128 / (256 * 128)) / 132, 1e-12);
  // The better orientation is taken: 128 x 256 fits this output in one tile.
  EXPECT_DOUBLE_EQ(gemm_tile_fill(128, 256, 256, 132).fill, 1.0 / 132);
  // A small output with a deep k is split along k (split-K) to fill the SMs: 16 tiles x 8 slices of 512.
  const GemmTileFill deep = gemm_tile_fill(1024, 512, 4096, 132);
  EXPECT_EQ(deep.k_splits, 8);
  EXPECT_DOUBLE_EQ(deep.fill, 128.0 / 132);
  // ... and the roofline pays for summing the slices' fp32 partial outputs where that is what bounds it.
  const Roofline r = h200();
  const double no_split_bytes = 2.0 * (1024 * 4096 + 4096 * 512 + 1024 * 512);
  EXPECT_GT(r.gemm_s(1024, 512, 4096) * 4800e9 * r.kernels.memory, no_split_bytes);
  // Any shape fills between nothing and everything.
  for (double m : {1.0, 100.0, 4096.0, 5000.0})
    for (double n : {1.0, 128.0, 11008.0})
      for (double k : {1.0, 300.0, 22016.0}) {
        const GemmTileFill f = gemm_tile_fill(m, n, k, 108);
        EXPECT_GT(f.fill, 0) << m << " " << n << " " << k;
        EXPECT_LE(f.fill, 1.0 + 1e-12) << m << " " << n << " " << k;
      }
}

TEST(Roofline, EveryGenerationSaysWhereItsNumbersComeFrom) {
  for (int cc : {80, 90, 100}) {
    const KernelEfficiency k = kernel_efficiency(cc);
    EXPECT_GT(k.gemm, 0.5);
    EXPECT_LT(k.gemm, 1.0);
    EXPECT_LT(k.attention_backward, k.attention_forward);
    EXPECT_FALSE(k.source.empty());
    EXPECT_GE(k.sm_count, 108);
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

TEST(Roofline, AGemmRowWithoutItsShapeIsRefused) {
  const std::string path = ::testing::TempDir() + "/bench_kernels_no_shape.csv";
  {
    std::FILE* f = std::fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("kind,kernel,shape,achieved_gbps,achieved_tflops,device\n"
               "measured,gemm_qkv_fwd,\"4096x12288x4096\",0,796.65,NVIDIA H200\n",
               f);
    std::fclose(f);
  }
  auto k = kernel_efficiency_from_bench(path, 90, 989.4, 4800);
  ASSERT_FALSE(k);
  EXPECT_NE(k.error().find("expected m=M,n=N,k=K"), std::string::npos) << k.error();
  std::remove(path.c_str());
}

}  // namespace
}  // namespace lins
