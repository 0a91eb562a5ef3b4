// Compute predicted rather than assumed: each compute task of the step timed by a roofline of its own kernels — every
// GEMM of a module at the larger of its FLOPs over the GPU's GEMM rate for its shape (the rate at full tiles times the
// share of the SMs' tile slots its output fills: gemm_tile_fill) and its bytes over the memory rate, the
// attention core at the attention kernels' rate, the element-wise kernels (norms, RoPE, SwiGLU, residuals, the loss)
// at the memory rate — instead of one assumed efficiency times the peak. The rates are fractions of the datasheet's
// peak and HBM bandwidth per GPU generation (KernelEfficiency), each with its source: measured here where a device
// ran (data/gpu/), published otherwise, and labelled assumed where neither exists. MFU is then an output.
// docs/cost-model.md ("Compute") says what each number is and where it comes from.
#pragma once

#include <string>

#include "core/model/model_spec.h"
#include "core/util/result.h"

namespace lins {

// How fast a GPU generation's kernels run, as fractions of its dense bf16 peak and its HBM bandwidth.
struct KernelEfficiency {
  int compute_capability = 0;
  int sm_count = 0;               // streaming multiprocessors: one GEMM tile each per wave (gemm_tile_fill)
  double gemm = 0;                // a bf16 GEMM (cuBLAS) of the peak when its tiles fill every SM's slots
  double attention_forward = 0;   // the fused attention forward, of the peak, FLOPs counted causal (half the scores)
  double attention_backward = 0;  // its backward (2.5x the forward's FLOPs: the recomputed scores and 4 products)
  double memory = 0;              // an element-wise kernel's bytes of the HBM bandwidth
  double optimizer = 0;           // the fused AdamW update's bytes of the HBM bandwidth
  bool measured = false;          // measured on a device of this generation (else published or assumed)
  std::string source;
};

// The priors of a generation (80 Ampere, 90 Hopper, 100 Blackwell; other values take Hopper's, said in `source`).
KernelEfficiency kernel_efficiency(int compute_capability);
// The efficiencies a GPU check measured (bench_kernels_gpu.csv, written by `bench_kernels_gpu` in
// scripts/gpu-check.sh): the median of its GEMMs' TFLOP/s each divided by its shape's tile fill (so the rate at full
// tiles), its fused (cuDNN, else lins's) attention forward and backward, the median of its element-wise kernels' GB/s
// and its AdamW's, as fractions of `peak_tflops` and `hbm_gbps` (the GPU the projection assumes, which should be the
// one measured). Errors name the file and what it lacks.
Result<KernelEfficiency> kernel_efficiency_from_bench(const std::string& path, int compute_capability,
                                                      double peak_tflops, double hbm_gbps);

// How a GEMM's m x n output fills the GPU (NVIDIA's "Matrix Multiplication Background" user's guide, DU-09799-001,
// "Dimension Quantization Effects"): cuBLAS cuts the output into tiles, here 256 x 128 (the guide's largest and most
// efficient cuBLAS tile) in whichever orientation fills better, and runs one tile per SM per wave. Tile quantization
// pads each edge to a whole tile and wave quantization leaves the last wave part empty; where the output has fewer
// tiles than the GPU has SMs, k is split into slices (split-K, as cuBLAS and CUTLASS do for small outputs), as many as
// fill the SMs and at least 256 deep each, whose fp32 partial outputs are then summed.
struct GemmTileFill {
  double fill = 1;      // useful tile work over the slots the waves occupy, in (0, 1]
  double k_splits = 1;  // slices of k (1: no split-K)
};
GemmTileFill gemm_tile_fill(double m, double n, double k, int sm_count);

// The GPU a roofline runs on: its peaks and its kernels' efficiencies.
struct Roofline {
  double peak_flops_per_s = 0;  // dense bf16
  double hbm_bytes_per_s = 0;
  KernelEfficiency kernels;
  // Seconds of module `module`'s forward and backward over `tokens` tokens of sequence length `seq` (bf16
  // activations; backward: the two GEMMs of each weight, the attention backward, twice the element-wise bytes).
  double forward_s(const ModelSpec& model, int module, double tokens, int seq) const;
  double backward_s(const ModelSpec& model, int module, double tokens, int seq) const;
  // One GEMM (m x k times k x n): its FLOPs at the GEMM rate times its tile fill, or its bytes (with split-K's partial
  // sums) at the memory rate, whichever is longer. The attention core alone (for tests and --explain).
  double gemm_s(double m, double n, double k) const;
  double attention_forward_s(const ModelSpec& model, double tokens, int seq) const;
};

}  // namespace lins
