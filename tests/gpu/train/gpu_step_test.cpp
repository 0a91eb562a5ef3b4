// The GPU backend's training step against the CPU backend: the same initial weights from the shared counter-based
// generator, a one-rank NCCL step of the tiny and small models for 20 steps on the learnable task, run twice on the
// GPU: with bf16 storage and bf16 compute (the paper's configuration, the main run: bf16 P and G, fp32 master weights
// and Adam moments, bf16 activations and tensor-core kernels end to end, fp32 weight gradients) and with fp32 storage
// and fp32 compute (the earlier path: fp32 tensors, bf16 tensor-core GEMMs and attention). Each GPU run's loss must
// track the fp32 CPU reference (fp32 storage, fp32 compute) within a tolerance sized for its roundings, and fall at
// least half as far as the reference's; the bf16 run must also track, more tightly, the CPU backend's bf16-compute
// emulation with bf16 storage (the same roundings at the same places, computed on the CPU) over the steps before the
// small model's trajectory turns chaotic. Each run checks its model-state bytes against the memory model
// (16 or 20 bytes per parameter), the communicators' byte counters against the schedule, and reports peak device
// memory next to the memory model's figure. Exit 0 pass, 1 fail, 77 skipped (no CUDA device).
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "comm/mesh_comms.h"
#include "core/model/model_spec.h"
#include "core/model/plan.h"
#include "core/projection/memory_model.h"
#include "core/schedule/workload.h"
#include "kernels/cuda/attention_cudnn.h"
#include "train/executor.h"
#include "gpu/gpu_backend.h"

namespace lins {
namespace {

bool g_ok = true;
void check(bool cond, const std::string& what) {
  std::printf("  %s %s\n", cond ? "ok  " : "FAIL", what.c_str());
  g_ok = g_ok && cond;
}

// init_normal on both backends for the same (seed, first): the GPU kernel reproduces the CPU generator. The fp64
// log/cos of the two libraries may differ in the last fp64 bit, which changes the fp32 result only next to a rounding
// boundary: at most one fp32 ulp, on a vanishing share of elements.
void init_matches(ComputeBackend& gpu) {
  auto cpu = make_cpu_backend();
  const int64_t n = int64_t(1) << 20;
  std::vector<float> host_cpu(n), host_gpu(n);
  for (int64_t first : {int64_t(0), int64_t(123457)}) {
    auto c = cpu->allocate(n * 4, MemCategory::buffer);
    auto g = gpu.allocate(n * 4, MemCategory::buffer);
    cpu->init_normal(c->f32(), n, 0x5eedull + uint64_t(first), first, 0.02f);
    gpu.init_normal(g->f32(), n, 0x5eedull + uint64_t(first), first, 0.02f);
    cpu->download(host_cpu.data(), c->data(), n * 4);
    gpu.download(host_gpu.data(), g->data(), n * 4);
    int64_t differ = 0, beyond_one_ulp = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (host_cpu[i] == host_gpu[i]) continue;
      ++differ;
      if (std::nextafter(host_cpu[i], host_gpu[i]) != host_gpu[i]) ++beyond_one_ulp;
    }
    check(beyond_one_ulp == 0 && differ <= n / 100000,
          "init_normal first=" + std::to_string(first) + ": " + std::to_string(differ) + " of " + std::to_string(n) +
              " elements differ from the CPU generator, " + std::to_string(beyond_one_ulp) + " by more than one ulp");
  }
}

struct Run {
  std::vector<double> loss;
  StepStats last;
  double model_mem_bytes = 0;    // memory model: states + activations + buffers
  double model_state_bytes = 0;  // memory model: P + G + OS
  DType schedule_dtype = DType::fp32;
  int64_t param_count = 0;
};

// A GPU configuration: storage of P and G (ExecutorOptions::state_dtype) and the backend's compute dtype.
struct GpuConfig {
  DType storage;
  DType compute;
  const char* label;
  AttentionKernel attention = AttentionKernel::flash;
};

// Tolerance of the GPU loss against the fp32 CPU loss (fp32 storage, fp32 compute) at step s.
// fp32 storage + fp32 compute: step 0 starts from identical weights and data; the only difference is the bf16 rounding
// of every GEMM and attention input (2^-9 relative per operand, fp32 accumulation), which moves logits by ~0.3% of
// their size and the mean token loss (about ln V at the start) by well under 1e-2. Later steps compound it: AdamW
// normalises each update, so a gradient changed by a fraction of a percent moves a parameter by about the same
// fraction of lr; over 20 steps the trajectories separate slowly, allowed 0.05 + 5% of the CPU loss.
// bf16 storage + bf16 compute: bf16 storage alone (fp32 compute) was allowed twice the fp32 bound at step 0 and
// 0.1 + 8% later, for two more roundings to bf16's 8 significant bits: P itself (the embedding table and RMSNorm
// weights, which the GEMMs never rounded, enter the forward rounded) and every gradient where it is stored and
// accumulated in G (the fp32 master weights keep P one rounding from an fp32 trajectory instead of drifting). bf16
// activations add a rounding to 8 bits at every kernel output of the forward and the backward: per layer the norm
// outputs, q, k, v, RoPE, attention, gate, up, SwiGLU and the two residual adds, then the logits (whose rounding is
// 2^-9 of their size, so it grows as training sharpens them) and dlogits, and the residual-stream gradient in the
// backward. Each is as large as the GEMM-input rounding the fp32 bound was sized on; most are independent across
// elements and average out over the hidden dimension and the tokens, but the residual stream and the logits carry
// them across layers and into the loss directly. Widened accordingly: step 0 3e-2 (1.5x the bf16-storage bound),
// later steps 0.15 + 10% of the CPU loss. Measured on the CPU when this was written: the bf16 emulation (below) is
// within 1.2e-3 of the fp32 loss on tiny at every step and within 0.18 on small, where the 20-step trajectory is
// chaotic (see kEmulationHorizon); with GPU-like perturbations added to it (one-ulp flips in 0.1-3% of every bf16
// kernel output and 25-100% of attention's) the worst |diff| was 0.67 of this bound.
double tolerance(int step, double cpu_loss, const GpuConfig& c) {
  if (c.compute == DType::bf16) return step == 0 ? 3e-2 : 0.15 + 0.10 * cpu_loss;
  if (c.storage == DType::bf16) return step == 0 ? 2e-2 : 0.1 + 0.08 * cpu_loss;  // bf16 storage, fp32 compute
  return step == 0 ? 1e-2 : 0.05 + 0.05 * cpu_loss;
}

// Tolerance of the GPU bf16-storage/bf16-compute loss against the CPU backend's bf16 emulation with bf16 storage at
// step s. The emulation rounds the same tensors at the same places (P and G to bf16, every kernel output to bf16,
// weight gradients kept fp32), so the systematic bf16 error of the fp32 comparison cancels. What remains: the
// summation order of the fp32 accumulations (cuBLAS vs OpenBLAS, block reductions, the atomics of dweight/dtable),
// __expf, the flash kernels' rounding of the probabilities to bf16 before P.V (the CPU's attention keeps them fp32),
// and the one-ulp bf16 flips these cause in elements next to a rounding boundary. Step 0: 1e-2, the fp32 path's step-0
// bound (that bound is sized on roundings of the same size); later steps 0.03 + 3% of the emulation's loss, a fifth to
// a third of this configuration's 0.15 + 10% against the fp32 CPU and below the fp32 path's 0.05 + 5%.
double emulation_tolerance(int step, double emu_loss) { return step == 0 ? 1e-2 : 0.03 + 0.03 * emu_loss; }

// Steps over which the bf16 run is held to the emulation's tolerance: all 20 on tiny; the first 5 on small. The small
// model's 20-step trajectory on this task is chaotic (its per-step loss swings by +-0.3 between batches): on the CPU,
// one-ulp flips in 0.1% of the emulation's bf16 outputs moved its loss by 0.1-0.5 by steps 10-19, as much as the whole
// difference between the emulation and fp32, while steps 0-4 stayed within a third of the tolerance above (tiny: within
// 1.1e-3 at every step). Past the horizon the comparison would measure the chaos, not the kernels; the looser fp32
// bound still covers all 20 steps.
int emulation_horizon(const std::string& model) { return model == "small" ? 5 : 20; }

// Mean loss over the last 5 of the 20 steps.
double tail_mean(const Run& r) {
  double m = 0;
  for (size_t s = r.loss.size() - 5; s < r.loss.size(); ++s) m += r.loss[s] / 5;
  return m;
}

// "The loss falls on the learnable task": the mean over the last 5 steps lies below step 0 by at least half as much as
// the fp32 CPU reference's does. A bar relative to the reference because the two models learn at different speeds in
// 20 steps: tiny's reference falls from 3.17 to a last-5 mean of 0.36 of that, small's from 6.30 only to 0.90 of it
// (its last step alone is 0.93 of step 0, so a fixed "last step below 0.9 x step 0" fails on the reference itself);
// a 5-step mean because single steps swing by batch. On small this asks for a last-5 mean below ~0.95 of step 0.
bool loss_falls(const Run& r, const Run& ref, std::string* detail) {
  const double bar = r.loss.front() - 0.5 * (ref.loss.front() - tail_mean(ref));
  *detail = std::to_string(r.loss.front()) + " at step 0 -> " + std::to_string(tail_mean(r)) +
            " mean of the last 5 steps, at most " + std::to_string(bar) + " (half the fp32 CPU's fall, " +
            std::to_string(ref.loss.front()) + " -> " + std::to_string(tail_mean(ref)) + ")";
  return ref.loss.front() > tail_mean(ref) && tail_mean(r) <= bar;
}

Run run(ComputeBackend& be, const ModelSpec& model, const ExecutorOptions& o, bool nccl) {
  const Topology one{1, 1};
  const Plan plan = *parse_plan("ddp", one);
  CommOptions co;
  co.compute_stream = be.native_stream();
  auto world = make_communicator(nccl ? Backend::nccl : Backend::mpi, MPI_COMM_WORLD, "world", Axis::intra, co);
  Run r;
  if (!world) {
    check(false, "communicators: " + world.error());
    return r;
  }
  auto ex = Executor::create(model, plan, one, 0, world->get(), be, o);
  if (!ex) {
    check(false, "executor: " + ex.error());
    return r;
  }
  const Schedule& sched = (*ex)->schedule();
  bool bytes_match = true;
  for (int s = 0; s < 20; ++s) {
    auto st = (*ex)->step();
    if (!st) {
      check(false, "step " + std::to_string(s) + ": " + st.error());
      return r;
    }
    r.loss.push_back(st->loss_sum / double((*ex)->global_tokens()));
    r.last = *st;
    for (int k = 0; k < kCollKindCount; ++k)
      for (int a = 0; a < 2; ++a)
        bytes_match = bytes_match && st->bytes[k][a] == sched.message_bytes(CollKind(k), Axis(a));
  }
  // On one rank every group is a single rank, so the schedule holds no collective and the counters must stay at zero:
  // this catches a collective the executor issues outside the schedule, and a payload counted in the wrong dtype.
  check(bytes_match, std::string(be.name()) + " " + dtype_name(o.state_dtype) + " storage, " +
                         dtype_name(be.compute_dtype()) +
                         " compute: communicator byte counters = the schedule's message bytes (" +
                         std::to_string(sched.message_bytes()) + " per step) at every step");
  r.schedule_dtype = sched.options.dtype;
  (void)(*ex)->finish();
  Workload w;
  w.model = model;
  w.seq = o.seq;
  w.micro_batch_size = o.micro_batch_size;
  w.micro_batches = o.micro_batches;
  w.global_batch_tokens = int64_t(o.seq) * o.micro_batch_size * o.micro_batches;
  w.recompute = o.recompute;
  const MemoryEstimate est =
      estimate_memory(sched, w, executor_state_bytes(o.state_dtype, be.compute_dtype()), MemoryOf::schedule_rank);
  r.model_mem_bytes = est.total_bytes;
  r.model_state_bytes = est.state_bytes;
  r.param_count = model.param_count();
  return r;
}

// One GPU run (configuration `c`) against the fp32 CPU run `cpu` of the same options and, with bf16 compute, against
// the CPU's bf16 emulation `emu` (bf16 storage, bf16 compute).
void check_gpu_run(const std::string& name, const Run& cpu, const Run& emu, const Run& gpu, const GpuConfig& c,
                   ComputeBackend& gpu_be) {
  const DType storage = c.storage;
  const std::string tag = name + " " + c.label;
  if (cpu.loss.size() != 20 || gpu.loss.size() != 20) {
    check(false, tag + ": 20 steps on the fp32 CPU and the GPU");
    return;
  }
  std::printf("  [%s: storage %s, compute %s]\n", tag.c_str(), dtype_name(storage), dtype_name(c.compute));
  check(gpu_be.compute_dtype() == c.compute, tag + ": the GPU backend computes in " +
                                                 dtype_name(gpu_be.compute_dtype()) + " (asked for " +
                                                 dtype_name(c.compute) + ")");
  const bool vs_emu = c.compute == DType::bf16 && emu.loss.size() == 20;
  const int horizon = emulation_horizon(name);
  double worst = 0, worst_emu = 0, mean_diff = 0, mean_diff_emu = 0;
  bool within = true, within_emu = true;
  for (int s = 0; s < 20; ++s) {
    const double d = std::fabs(gpu.loss[s] - cpu.loss[s]), tol = tolerance(s, cpu.loss[s], c);
    std::printf("    step %2d: cpu fp32 %.5f gpu %.5f |diff| %.2e (tolerance %.2e)", s, cpu.loss[s], gpu.loss[s], d,
                tol);
    within = within && d <= tol;
    worst = std::max(worst, d / tol);
    mean_diff += d / 20;
    if (vs_emu && s < horizon) {
      const double de = std::fabs(gpu.loss[s] - emu.loss[s]), tole = emulation_tolerance(s, emu.loss[s]);
      std::printf("; cpu bf16-emulation %.5f |diff| %.2e (tolerance %.2e)", emu.loss[s], de, tole);
      within_emu = within_emu && de <= tole;
      worst_emu = std::max(worst_emu, de / tole);
      mean_diff_emu += de / horizon;
    }
    std::printf("\n");
  }
  check(within, tag + ": GPU loss tracks the fp32 CPU reference (fp32 storage+compute) at every step (worst " +
                    "|diff|/tolerance " + std::to_string(worst) + ", mean |diff| " + std::to_string(mean_diff) + ")");
  if (c.compute == DType::bf16) {
    if (emu.loss.size() != 20) {
      check(false, tag + ": 20 steps of the CPU bf16 emulation to compare with");
    } else {
      double mean_diff_h = 0;  // against the fp32 CPU over the same steps, for comparison
      for (int s = 0; s < horizon; ++s) mean_diff_h += std::fabs(gpu.loss[s] - cpu.loss[s]) / horizon;
      check(within_emu, tag + ": GPU loss tracks the CPU bf16 emulation (bf16 storage+compute) at steps 0-" +
                            std::to_string(horizon - 1) + ", within 1e-2 at step 0 and 0.03 + 3% later (worst " +
                            "|diff|/tolerance " + std::to_string(worst_emu) + "; mean |diff| " +
                            std::to_string(mean_diff_emu) + " against the emulation, " + std::to_string(mean_diff_h) +
                            " against the fp32 CPU)");
    }
  }
  std::string falls;
  const bool fell = loss_falls(gpu, cpu, &falls);  // before `falls` is read
  check(fell, tag + ": GPU loss falls on the learnable task: " + falls);
  check(gpu.schedule_dtype == storage,
        tag + ": the executor's schedule moves " + dtype_name(gpu.schedule_dtype) + " (the storage dtype)");
  // One rank holds everything: P + G in the storage dtype and master weights, momentum, variance in fp32, i.e. 16
  // bytes per parameter with bf16 storage and 20 with fp32; the memory model (StateBytes {2, 2, 12} or {4, 4, 12})
  // must give the same figure from the schedule's layout.
  const int64_t per_param = storage == DType::bf16 ? 16 : 20;
  check(gpu.last.state_bytes == per_param * gpu.param_count,
        tag + ": model states " + std::to_string(gpu.last.state_bytes) + " bytes = " + std::to_string(per_param) +
            " x " + std::to_string(gpu.param_count) + " parameters");
  check(double(gpu.last.state_bytes) == gpu.model_state_bytes,
        tag + ": model states allocated = memory model's state bytes (" + std::to_string(gpu.model_state_bytes) + ")");
  const double ratio = gpu.model_mem_bytes > 0 ? double(gpu.last.peak_mem_bytes) / gpu.model_mem_bytes : 0;
  const GpuMemoryInfo gm = gpu_memory_info(gpu_be);
  std::printf(
      "  memory: peak allocated %lld bytes, memory model %.0f bytes, ratio %.3f; pool peak %lld bytes, device in "
      "use %lld of %lld bytes (context, cuBLAS and NCCL included)\n",
      (long long)gpu.last.peak_mem_bytes, gpu.model_mem_bytes, ratio, (long long)gm.peak_reserved_bytes,
      (long long)gm.device_used_bytes, (long long)gm.device_total_bytes);
  // A report, not a fit: the model's activation term is Megatron's estimate (fused attention) in the compute dtype's
  // bytes, and the buffers beyond it (fp32 rstd, lse and weight-gradient scratch) are not all modelled, so only a
  // gross mismatch (a leak, or a missing category) fails here.
  check(ratio > 0.2 && ratio < 5.0, tag + ": peak allocated / memory model = " + std::to_string(ratio));
}

void compare(const std::string& name, const ExecutorOptions& o) {
  std::printf("[%s] seq %d, micro-batch %d, M %d, lr %g, 20 steps, plan ddp on one rank\n", name.c_str(), o.seq,
              o.micro_batch_size, o.micro_batches, double(o.adamw.lr));
  const ModelSpec model = *make_model_preset(name);
  // The reference: the CPU backend in fp32 everywhere (fp32 storage, fp32 compute).
  auto cpu_be = make_cpu_backend();
  ExecutorOptions cpu_o = o;
  cpu_o.state_dtype = DType::fp32;
  const Run cpu = run(*cpu_be, model, cpu_o, /*nccl=*/false);
  // The CPU backend's emulation of the GPU's bf16 compute, with bf16 storage: the tighter reference of the bf16 run.
  auto emu_be = make_cpu_backend(DType::bf16);
  ExecutorOptions emu_o = o;
  emu_o.state_dtype = DType::bf16;
  const Run emu = run(*emu_be, model, emu_o, /*nccl=*/false);
  if (cpu.loss.size() == 20 && emu.loss.size() == 20) {
    std::string falls;
    const bool fell = loss_falls(emu, cpu, &falls);  // before `falls` is read
    check(fell, name + " cpu bf16 emulation (bf16 storage+compute): loss falls on the learnable task: " + falls);
  }
  // The paper's configuration first, then the earlier path; each on a fresh backend so peak memory is its own.
  // cuDNN's fused attention (where the plugin has it) is held to the same references as the flash kernels.
  std::vector<GpuConfig> configs = {
      {DType::bf16, DType::bf16, "bf16 storage+compute"},
      {DType::fp32, DType::fp32, "fp32 storage+compute (the earlier path)"},
  };
  if (kernels::cuda::cudnn_attention_available())
    configs.push_back({DType::bf16, DType::bf16, "bf16 storage+compute, cuDNN attention", AttentionKernel::cudnn});
  else
    std::printf("  (cuDNN attention not built: %s)\n", kernels::cuda::cudnn_attention_last_error().c_str());
  for (const GpuConfig& c : configs) {
    GpuBackendOptions bo;
    bo.compute = c.compute;
    bo.attention = c.attention;
    auto gpu_be = make_gpu_backend(bo);
    if (!gpu_be) {
      check(false, "gpu backend: " + gpu_be.error());
      return;
    }
    ExecutorOptions gpu_o = o;
    gpu_o.state_dtype = c.storage;
    const Run gpu = run(**gpu_be, model, gpu_o, /*nccl=*/true);
    check_gpu_run(name, cpu, emu, gpu, c, **gpu_be);
  }
}

}  // namespace
}  // namespace lins

int main(int argc, char** argv) {
  if (lins::gpu_device_count() == 0) {
    std::printf(
        "SKIPPED: no CUDA device (cudaGetDeviceCount reports none or no driver); the GPU step test needs one\n");
    return 77;
  }
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  {
    auto be = lins::make_gpu_backend(0);
    if (!be) {
      std::printf("FAIL: %s\n", be.error().c_str());
      MPI_Finalize();
      return 1;
    }
    std::printf("[init_normal]\n");
    lins::init_matches(**be);
  }
  lins::ExecutorOptions tiny;
  tiny.seq = 16;
  tiny.micro_batch_size = 4;
  tiny.micro_batches = 2;
  tiny.adamw.lr = 1e-2f;
  tiny.adamw.weight_decay = 0.0f;
  lins::compare("tiny", tiny);
  lins::ExecutorOptions small = tiny;
  small.seq = 64;
  small.micro_batch_size = 2;
  small.adamw.lr = 3e-3f;
  lins::compare("small", small);
  std::printf("%s\n", lins::g_ok ? "PASS" : "FAIL");
  MPI_Finalize();
  return lins::g_ok ? 0 : 1;
}
