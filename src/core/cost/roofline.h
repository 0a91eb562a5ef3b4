// Compute predicted rather than assumed: each compute task of the step timed by a roofline of its own kernels — every
// GEMM of a module at the larger of its FLOPs over the GPU's GEMM rate and its bytes over the memory rate, the
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
  double gemm = 0;                // a large bf16 GEMM (cuBLAS) of the peak
  double attention_forward = 0;   // the fused attention forward, of the peak, FLOPs counted causal (half the scores)
  double attention_backward = 0;  // its backward (2.5x the forward's FLOPs: the recomputed scores and 4 products)
  double memory = 0;              // an element-wise kernel's bytes of the HBM bandwidth
  double optimizer = 0;           // the fused AdamW update's bytes of the HBM bandwidth
  bool measured = false;          // measured on a device of this generation (else published or assumed)
  std::string source;
};

// The priors of a generation (80 Ampere, 90 Hopper, 100 Blackwell; other values take Hopper's, said in `source`).
KernelEfficiency kernel_efficiency(int compute_capability);
// The efficiencies a GPU check measured (bench_kernels_gpu.csv, written by `bench_kernels_gpu` in scripts/gpu-check.sh):
// the median of its GEMMs' TFLOP/s, its fused (cuDNN, else lins's) attention forward and backward, the median of its
// element-wise kernels' GB/s and its AdamW's, as fractions of `peak_tflops` and `hbm_gbps` (the GPU the projection
// assumes, which should be the one measured). Errors name the file and what it lacks.
Result<KernelEfficiency> kernel_efficiency_from_bench(const std::string& path, int compute_capability,
                                                      double peak_tflops, double hbm_gbps);

// The GPU a roofline runs on: its peaks and its kernels' efficiencies.
struct Roofline {
  double peak_flops_per_s = 0;  // dense bf16
  double hbm_bytes_per_s = 0;
  KernelEfficiency kernels;
  // Seconds of module `module`'s forward and backward over `tokens` tokens of sequence length `seq` (bf16
  // activations; backward: the two GEMMs of each weight, the attention backward, twice the element-wise bytes).
  double forward_s(const ModelSpec& model, int module, double tokens, int seq) const;
  double backward_s(const ModelSpec& model, int module, double tokens, int seq) const;
  // Of the forward: the GEMMs alone, the attention core alone (for tests and --explain).
  double gemm_s(double m, double n, double k) const;
  double attention_forward_s(const ModelSpec& model, double tokens, int seq) const;
};

}  // namespace lins
