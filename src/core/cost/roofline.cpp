// The roofline of a module's kernels; see roofline.h.
#include "core/cost/roofline.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <vector>

#include "core/util/csv.h"
#include "core/util/stats.h"

namespace lins {

namespace {
constexpr double kActivationBytes = 2;  // bf16 activations and weights, as the GPU step runs them

// The attention core's forward FLOPs: the score and value products over the causal half, 2 s h a token (4 s h counted
// full). Its backward does 2.5 times as many.
double attention_forward_flops(const ModelSpec& model, double tokens, int seq) {
  return 2.0 * double(seq) * model.dims.hidden * tokens;
}

// Streaming multiprocessors per GPU generation, from NVIDIA's architecture whitepapers: A100 (and the A800, the same
// die) 108; H100 SXM5 and H200 SXM 132; B200 148. Others take Hopper's.
int sm_count_of(int compute_capability) {
  if (compute_capability == 80) return 108;
  if (compute_capability == 100) return 148;
  return 132;
}

// m, n and k of a bench_kernels_gpu GEMM's shape ("m=4096,n=12288,k=4096,ta=0,tb=1"); nullopt when one is missing.
std::optional<std::array<double, 3>> gemm_shape(const std::string& shape) {
  std::array<double, 3> mnk{0, 0, 0};
  const char* keys[3] = {"m=", "n=", "k="};
  for (int i = 0; i < 3; ++i) {
    const std::size_t at = shape.find(keys[i]);
    if (at == std::string::npos || (at > 0 && shape[at - 1] != ',')) return std::nullopt;
    mnk[std::size_t(i)] = std::atof(shape.c_str() + at + 2);
    if (!(mnk[std::size_t(i)] >= 1)) return std::nullopt;
  }
  return mnk;
}
}  // namespace

GemmTileFill gemm_tile_fill(double m, double n, double k, int sm_count) {
  constexpr double kTileLong = 256, kTileShort = 128, kMinSliceK = 256;
  const double sms = std::max(1, sm_count);
  GemmTileFill best{0, 1};
  for (const auto& [tm, tn] : {std::pair{kTileLong, kTileShort}, std::pair{kTileShort, kTileLong}}) {
    const double tiles = std::ceil(m / tm) * std::ceil(n / tn);
    const double splits = std::max(1.0, std::min(std::floor(sms / tiles), std::floor(k / kMinSliceK)));
    const double waves = std::ceil(tiles * splits / sms);
    const double fill = (m * n / (tm * tn)) * splits / (waves * sms);
    if (fill > best.fill) best = {fill, splits};
  }
  return best;
}

KernelEfficiency kernel_efficiency(int compute_capability) {
  KernelEfficiency k;
  k.compute_capability = compute_capability;
  k.sm_count = sm_count_of(compute_capability);
  if (compute_capability == 80) {
    // Ampere (A100, A800): no device of this generation ran here.
    k.gemm = 0.80;
    k.attention_forward = 0.60;
    k.attention_backward = 0.50;
    k.memory = 0.84;
    k.optimizer = 0.74;
    k.source =
        "sm80 (not measured here): GEMM 0.80 of peak at full tiles assumed; attention 0.60 forward and 0.50 backward, "
        "the lower half of the 50-73% of A100's peak FlashAttention-2 reports (Dao 2023, arXiv 2307.08691); memory "
        "0.84 and AdamW 0.74 of HBM assumed as Hopper's measured";
    return k;
  }
  // Hopper (H100, H200), measured on an H200 with cuBLAS and cuDNN (data/gpu/h200-2026-12-04/bench_kernels_gpu.csv):
  // the 7B layer's GEMMs at 4096 tokens and an 8192 square ran at 652-797 TFLOP/s of 989, 0.776 of the peak at full
  // tiles (the median of each divided by its tile fill, 0.948-0.993); cuDNN attention at seq 4096, head 128 at 542
  // (forward) and 449 (backward) TFLOP/s counted causal; the element-wise kernels at 3,730-4,330 GB/s of 4,800 (median
  // 0.84; a copy 0.88); the fused AdamW at 3,547 GB/s (0.74).
  k.gemm = 0.776;
  k.attention_forward = 0.548;
  k.attention_backward = 0.454;
  k.memory = 0.84;
  k.optimizer = 0.74;
  k.measured = compute_capability == 90;
  k.source =
      "sm90, measured on an H200 (data/gpu/h200-2026-12-04): GEMM 0.776 at full tiles, attention 0.548 / 0.454, memory "
      "0.84, AdamW 0.74";
  if (compute_capability != 90)
    k.source = "sm" + std::to_string(compute_capability) +
               " (not measured here): Hopper's measured fractions assumed (" + k.source + ")";
  return k;
}

Result<KernelEfficiency> kernel_efficiency_from_bench(const std::string& path, int compute_capability,
                                                      double peak_tflops, double hbm_gbps) {
  LINS_ASSIGN_OR_RETURN(const std::string file, read_text_file(path));
  LINS_ASSIGN_OR_RETURN(const CsvTable t,
                        CsvTable::parse(file, path, "bench_kernels_gpu.csv from scripts/gpu-check.sh"));
  LINS_TRY(t.require({"kind", "kernel", "shape", "achieved_gbps", "achieved_tflops", "device"}));
  const int sm_count = sm_count_of(compute_capability);
  std::vector<double> gemm, memory;
  double attn_fwd = 0, attn_bwd = 0, cudnn_fwd = 0, cudnn_bwd = 0, adamw = 0;
  std::string device;
  for (std::size_t r = 0; r < t.rows(); ++r) {
    if (!t.check_width(r) || t.text(r, "kind") != "measured") continue;
    const std::string& k = t.text(r, "kernel");
    LINS_ASSIGN_OR_RETURN(const double tflops, t.number(r, "achieved_tflops"));
    LINS_ASSIGN_OR_RETURN(const double gbps, t.number(r, "achieved_gbps"));
    device = t.text(r, "device");
    if (k.rfind("gemm_", 0) == 0) {
      const auto mnk = gemm_shape(t.text(r, "shape"));
      if (!mnk)
        return make_error(path + ": GEMM row " + k + " has shape '" + t.text(r, "shape") +
                          "', expected m=M,n=N,k=K (its tile fill needs them)");
      gemm.push_back(tflops / gemm_tile_fill((*mnk)[0], (*mnk)[1], (*mnk)[2], sm_count).fill);
    } else if (k == "attention_forward")
      attn_fwd = tflops;
    else if (k == "attention_backward")
      attn_bwd = tflops;
    else if (k == "attention_cudnn_forward")
      cudnn_fwd = tflops;
    else if (k == "attention_cudnn_backward")
      cudnn_bwd = tflops;
    else if (k == "adamw")
      adamw = gbps;
    else if (gbps > 0)
      memory.push_back(gbps);
  }
  const double fwd = cudnn_fwd > 0 ? cudnn_fwd : attn_fwd, bwd = cudnn_bwd > 0 ? cudnn_bwd : attn_bwd;
  if (gemm.empty() || fwd <= 0 || bwd <= 0 || memory.empty() || adamw <= 0)
    return make_error(path +
                      ": lacks a measured GEMM, attention forward and backward, element-wise kernel or AdamW "
                      "row (a complete run of bench_kernels_gpu has them all)");
  KernelEfficiency k;
  k.compute_capability = compute_capability;
  k.sm_count = sm_count;
  k.gemm = median(gemm) / peak_tflops;
  k.attention_forward = fwd / peak_tflops;
  k.attention_backward = bwd / peak_tflops;
  k.memory = median(memory) / hbm_gbps;
  k.optimizer = adamw / hbm_gbps;
  k.measured = true;
  char text[256];
  std::snprintf(text, sizeof text,
                "measured on %s (%s): GEMM %.3g at full tiles, attention %.3g / %.3g, memory %.3g, AdamW %.3g",
                device.c_str(), path.c_str(), k.gemm, k.attention_forward, k.attention_backward, k.memory, k.optimizer);
  k.source = text;
  for (double x : {k.gemm, k.attention_forward, k.attention_backward, k.memory, k.optimizer})
    if (!(x > 0 && x <= 1.05))
      return make_error(path + ": " + k.source + ": a fraction outside (0, 1] of the assumed GPU's peak (" +
                        std::to_string(peak_tflops) + " TFLOP/s, " + std::to_string(hbm_gbps) +
                        " GB/s): the file is of another GPU than --network's (give its --peak-tflops and --hbm-gbps)");
  return k;
}

double Roofline::gemm_s(double m, double n, double k) const {
  const GemmTileFill tiles = gemm_tile_fill(m, n, k, kernels.sm_count);
  const double flops = 2 * m * n * k;
  // Split-K writes each slice's fp32 partial output and reads them back to sum them.
  const double bytes =
      kActivationBytes * (m * k + k * n + m * n) + (tiles.k_splits > 1 ? 2 * 4 * tiles.k_splits * m * n : 0);
  return std::max(flops / (peak_flops_per_s * kernels.gemm * tiles.fill), bytes / (hbm_bytes_per_s * kernels.memory));
}

double Roofline::attention_forward_s(const ModelSpec& model, double tokens, int seq) const {
  return attention_forward_flops(model, tokens, seq) / (peak_flops_per_s * kernels.attention_forward);
}

namespace {

// Bytes the element-wise kernels of a module's forward read and write, per token (bf16): the pre-norm (read, write),
// RoPE on q and k (read, write both), the residual add (two reads, a write); SwiGLU (two reads, a write of ffn
// elements); the head's loss reads the logits twice and writes their gradient; the embedding gathers a row and writes
// it.
double elementwise_bytes_per_token(const ModelSpec& model, int module) {
  const auto& m = model.modules[static_cast<std::size_t>(module)];
  const double h = model.dims.hidden, f = model.dims.ffn, v = model.dims.vocab;
  double elems = 0;
  if (m.kind == "attn")
    elems = 2 * h + 4 * h + 3 * h;
  else if (m.kind == "mlp")
    elems = 2 * h + 3 * f + 3 * h;
  else if (m.kind == "embed")
    elems = 2 * h;
  else
    elems = 2 * h + 3 * v;  // the head: final norm and the loss over the vocabulary
  return elems * kActivationBytes;
}

}  // namespace

double Roofline::forward_s(const ModelSpec& model, int module, double tokens, int seq) const {
  const auto& m = model.modules[static_cast<std::size_t>(module)];
  double t = tokens * elementwise_bytes_per_token(model, module) / (hbm_bytes_per_s * kernels.memory);
  if (m.kind != "embed")  // the embedding is a gather, no matmul
    for (int i : m.tensors) {
      const auto& ts = model.tensors[static_cast<std::size_t>(i)];
      if (ts.shape.size() == 2) t += gemm_s(tokens, double(ts.shape[0]), double(ts.shape[1]));
    }
  if (m.kind == "attn") t += attention_forward_s(model, tokens, seq);
  return t;
}

double Roofline::backward_s(const ModelSpec& model, int module, double tokens, int seq) const {
  const auto& m = model.modules[static_cast<std::size_t>(module)];
  double t = 2 * tokens * elementwise_bytes_per_token(model, module) / (hbm_bytes_per_s * kernels.memory);
  if (m.kind != "embed")
    for (int i : m.tensors) {
      const auto& ts = model.tensors[static_cast<std::size_t>(i)];
      if (ts.shape.size() == 2) {
        t += gemm_s(tokens, double(ts.shape[1]), double(ts.shape[0]));  // dX = dY W
        t += gemm_s(double(ts.shape[0]), double(ts.shape[1]), tokens);  // dW = dY^T X
      }
    }
  if (m.kind == "attn")
    t += 2.5 * attention_forward_flops(model, tokens, seq) / (peak_flops_per_s * kernels.attention_backward);
  return t;
}

}  // namespace lins
