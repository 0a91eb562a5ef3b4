// `lins step`: the synthetic LLaMA training step under each strategy on the CPU backend (MPI) or, with --backend gpu,
// on one CUDA device per rank with NCCL. P and G are stored in the paper's mixed precision (bf16, fp32 master weights
// and Adam moments) or, with --precision fp32, in fp32; activations are --compute bf16 (the GPU's default) or fp32
// (the CPU's). Warm-up plus timed steps per strategy, one CSV row per (strategy, timed step) with the columns of
// core/results_schema.h, a JSON provenance file beside it, a table on stdout, and optionally a Chrome trace of the last
// step per rank.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <iostream>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "apps/commands.h"
#include "apps/device_rate.h"
#include "apps/memory_check.h"
#include "apps/mpi_app.h"
#include "apps/step_run.h"
#include "comm/gpu_plugin.h"
#include "comm/mesh_comms.h"
#include "comm/provenance.h"
#include "core/cost/compute_model.h"
#include "core/cost/cost_options.h"
#include "core/cost/gpu_peaks.h"
#include "core/output/results_schema.h"
#include "core/output/text_table.h"
#include "core/projection/memory_model.h"
#include "core/projection/planner.h"
#include "core/projection/simulator.h"  // module_forward_flops: what a paced task's device time counts
#include "core/schedule/workload.h"
#include "core/util/cli.h"
#include "core/util/csv.h"
#include "core/util/units.h"
#include "kernels/ops.h"
#include "train/backend.h"

namespace lins {
namespace {

constexpr const char* kDefaultStrategies = "ddp,zero1,zero2,zero3,mics,zeropp,lins";

CommandSpec step_spec() {
  CommandSpec spec;
  spec.name = "step";
  spec.summary = "Run the synthetic LLaMA training step under each strategy and write one CSV row per timed step.";
  spec.usage = "mpirun -np N lins step [options]";
  std::string presets;
  for (const auto& [n, d] : plan_presets()) presets += (presets.empty() ? "" : ", ") + n;
  spec.options = concat_options(model_options("small"), topology_options("", ""));
  spec.options = concat_options(spec.options, workload_options("128", "1", ""));
  for (auto& o : spec.options) {
    if (o.name == "micro-batches") o.default_value = "2";
    if (o.name == "gpus-per-node") o.help = "ranks per (emulated) node; without it every rank is on one node";
  }
  spec.options = concat_options(
      spec.options,
      {
          {"strategies", 0, "LIST", kDefaultStrategies, "comma-separated strategies: " + presets},
          {"warmup", 0, "N", "1", "untimed steps per strategy before the timed ones"},
          {"steps", 0, "N", "3", "timed steps per strategy (one CSV row each)"},
          {"seed", 0, "N", "1", "seed of the initial weights and of the synthetic data"},
          {"lr", 0, "RATE", "0.001", "AdamW learning rate"},
          {"out", 0, "DIR", "results/step", "output folder: step.csv, step.provenance.json, traces"},
          {"overlap", 0, "MODE", "all", kOverlapNames.list() + " (the paper's Table V)"},
          {"backend", 0, "NAME", "cpu", "compute backend: " + kStepBackendNames.described()},
          {"precision", 0, "DTYPE", "bf16",
           "storage of parameters and gradients, and so of every collective: " + kDTypeNames.list() +
               "; bf16 = the paper's mixed precision (fp32 master weights and Adam moments, 16 bytes of states per "
               "parameter)"},
          {"compute", 0, "DTYPE", "",
           "dtype of activations and of the kernels' inputs: " + kDTypeNames.list() +
               "; bf16: tensor-core kernels end to end on the GPU, emulated on the CPU (fp32 arithmetic, every "
               "output rounded to bf16); weight gradients are fp32 either way (default: fp32 with --backend cpu, "
               "bf16 with --backend gpu)"},
          {"attention", 0, "KERNEL", "",
           "attention kernels of --backend gpu: " + kAttentionKernelNames.described() +
               " (default: cudnn where the GPU plugin was built with cuDNN 9 and its frontend and --compute is bf16, "
               "else flash)"},
          bucket_option(", in bytes of --precision elements"),
          {"trace", 0, "", "",
           "write, per strategy and rank, a Chrome trace and the action log (timeline.*.csv, which `lins replay` "
           "re-times) of the last timed step"},
          {"collective-log", 0, "FILE", "",
           "write every collective each rank issued in each timed step, in issue order (CSV: system, strategy, rank, "
           "step, index, kind, group_size, elems, dtype, message_bytes)"},
          {"gpu-mem", 0, "SIZE", "1TiB", "memory per rank the planner may use for 'lins'"},
          {"objective", 0, "NAME", "step",
           "how the planner chooses 'lins': " + kObjectiveNames.described() +
               " (step: the baselines' presets too; compute at --compute-efficiency x the MFU peak unless "
               "--sustained-tflops or --calibrate)"},
          {"peak-tflops", 0, "RATE", "",
           "peak TFLOP/s per rank for MFU (default: with --backend gpu the device's dense bf16 datasheet rate where "
           "lins knows the device, else the backend's GEMM rate measured on every rank at start-up, all ranks at "
           "once; that measured rate is reported beside it as gemm_tflops either way)"},
          {"device-rate", 0, "TFLOPS", "",
           "emulate a device of this many TFLOP/s per rank: each compute task runs, then sleeps until its FLOPs (the "
           "simulator's count: backward 2x forward, recomputation one forward more) at this rate have passed since it "
           "started, so strategies that share cores alike compute alike; tasks whose real compute took longer are "
           "counted as overruns (console, CSV overrun_tasks); MFU is then taken against this rate; 'off' turns it "
           "off; CPU backend only (default: the environment's LINS_DEVICE_TFLOPS, which scripts/cluster.sh run sets "
           "from the rate it measured at `up`, else off; the provenance says which)"},
          {"device-gbps", 0, "GBPS", "",
           "with an emulated device, pace the optimizer too: its bytes (as the simulator counts them) at this many "
           "GB/s per rank; 'off' leaves it unpaced (default: the environment's LINS_DEVICE_GBPS, else off)"},
          {"mpi-progress", 0, "MODE", "thread", "how MPI collectives progress: " + kMpiProgressNames.described()},
          {"timeout", 0, "SECONDS", "600",
           "watchdog: a rank waiting on one collective this long names itself and the operation and ends the job "
           "(0 = off)"},
          {"resume", 0, "", "",
           "keep the rows of an interrupted (or finished) step.csv in --out and run only what is missing"},
          {"memory-limit", 0, "SIZE", "",
           "memory each host (each GPU with --backend gpu) may give the ranks on it, instead of what it has now "
           "(MemAvailable and the cgroup limit; the device's free memory)"},
          {"no-memory-check", 0, "", "",
           "run even when the memory model's need, summed over the ranks of a host (GPU), exceeds what it can give "
           "(checked before anything is allocated)"},
      });
  spec.options = concat_options(spec.options, cost_options("cpu-local", "paper"));
  spec.options = concat_options(spec.options, engine_options());
  spec.options = concat_options(spec.options, memory_reserve_options());
  spec.options = concat_options(spec.options, compute_options());
  for (auto& o : spec.options)
    if (o.name.rfind("reserve-", 0) == 0) o.help += " (--backend gpu only: the CPU backend has no such losses)";
  spec.epilog =
      "examples:\n"
      "  mpirun -np 4 lins step --gpus-per-node 2\n"
      "      every strategy on the small model, 4 ranks as 2 nodes of 2\n"
      "  mpirun -np 4 lins step --model small --gpus-per-node 2 --strategies ddp,zero1,zero2,zero3,mics,zeropp,lins\n"
      "  mpirun -np 8 lins step --gpus-per-node 4 --strategies lins,p=4x1,g=4x1,os=4x2 --overlap no_bcast --trace\n"
      "(a 6-tuple contains commas: give it last, or alone, in --strategies; 'lins' asks the planner)";
  return spec;
}

// sgemm rate of this rank on the step's largest GEMM shape (T x F x H) with its host to itself: the ranks of one host
// measure one after another (the hosts at once), so each gets the rate of one device alone. A step whose ranks share
// the host's cores cannot beat it, so MFU against it stays at most 1; measured all at once, the ranks' shared rate
// was lower than what a rank reaches while the others wait in a collective, and MFU read 107-176%. GFLOP/s.
double measure_sgemm_gflops(int64_t m, int64_t n, int64_t k) {
  std::vector<float> a(size_t(m * k), 0.5f), b(size_t(k * n), 0.25f), c(size_t(m * n), 0.0f);
  MPI_Comm host = MPI_COMM_NULL;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &host);
  int local = 0, locals = 1;
  MPI_Comm_rank(host, &local);
  MPI_Comm_size(host, &locals);
  double gflops = 0;
  for (int turn = 0; turn < locals; ++turn) {
    MPI_Barrier(host);
    if (turn != local) continue;
    kernels::cpu::gemm(false, true, m, n, k, 1.0f, a.data(), b.data(), 0.0f, c.data());  // warm-up
    const auto t0 = std::chrono::steady_clock::now();
    int iters = 0;
    double elapsed = 0;
    do {
      kernels::cpu::gemm(false, true, m, n, k, 1.0f, a.data(), b.data(), 0.0f, c.data());
      ++iters;
      elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    } while (elapsed < 0.3);
    gflops = 2.0 * double(m) * double(n) * double(k) * iters / elapsed / 1e9;
  }
  MPI_Barrier(host);
  MPI_Comm_free(&host);
  return gflops;
}

// The backend's GEMM rate on the step's largest GEMM shape (T x F x H, as the MLP's w1), timed with its events;
// the GPU backend's MFU peak when --peak-tflops is not given. TFLOP/s.
// Operands and result in the backend's compute dtype, as the step's forward GEMMs.
Result<double> measure_backend_gemm_tflops(ComputeBackend& be, int64_t m, int64_t n, int64_t k) {
  const DType cd = be.compute_dtype();
  const int64_t eb = dtype_bytes(cd);
  auto a = be.allocate(m * k * eb, MemCategory::buffer), b = be.allocate(n * k * eb, MemCategory::buffer);
  auto c = be.allocate(m * n * eb, MemCategory::buffer);
  auto fill = be.allocate(std::max(m, n) * k * 4, MemCategory::buffer);
  if (!a || !b || !c || !fill)
    return make_error("cannot allocate the GEMM rate probe of " + std::to_string(m) + "x" + std::to_string(n) + "x" +
                      std::to_string(k));
  be.fill(fill->f32(), m * k, 0.5f);
  be.convert(fill->f32(), DType::fp32, a->data(), cd, m * k, false);
  be.fill(fill->f32(), n * k, 0.25f);
  be.convert(fill->f32(), DType::fp32, b->data(), cd, n * k, false);
  for (int i = 0; i < 3; ++i) be.gemm(false, true, m, n, k, 1.0f, a->data(), b->data(), 0.0f, c->data(), cd);
  const int iters = 20;
  Event e0 = be.record_event();
  for (int i = 0; i < iters; ++i) be.gemm(false, true, m, n, k, 1.0f, a->data(), b->data(), 0.0f, c->data(), cd);
  Event e1 = be.record_event();
  const double s = be.elapsed_s(e0, e1);
  if (s <= 0) return make_error("the GEMM rate probe took no measurable time");
  return 2.0 * double(m) * double(n) * double(k) * iters / s / 1e12;
}

// --device-rate and --device-gbps (or their defaults from the environment).
Status read_device(const ParsedArgs& a, StepOptions& o) {
  LINS_ASSIGN_OR_RETURN(auto rates, read_device_rates(a));
  o.device_tflops = rates.tflops, o.device_gbps = rates.gbps;
  if (!o.paced()) return Status::ok_status();
  if (o.backend != StepBackend::cpu)
    return make_error(rates.source.substr(0, rates.source.find(", ")) +
                      " paces the CPU backend's tasks to an emulated device; a GPU keeps its own time (give "
                      "--device-rate off)");
  o.device_source = rates.source;
  return Status::ok_status();
}

// The paper's mixed precision computes in bf16 on the GPU; the CPU computes in fp32 (its bf16 is an emulation).
DType default_compute(StepBackend b) {
  switch (b) {
    case StepBackend::cpu:
      return DType::fp32;
    case StepBackend::gpu:
      return DType::bf16;
  }
  return DType::fp32;
}

// --model and the shape flags, the topology (the world size, grouped by --gpus-per-node when given), the workload.
Status read_workload(const ParsedArgs& a, int world, StepOptions& o) {
  LINS_ASSIGN_OR_RETURN(o.model, parse_model(a));
  LINS_ASSIGN_OR_RETURN(o.topo,
                        a.get("gpus-per-node").empty() ? topology_for_world(world, world) : parse_topology(a, world));
  LINS_ASSIGN_OR_RETURN(o.workload, parse_workload(a, o.model, o.topo));
  return Status::ok_status();
}

// --warmup, --steps, --seed, --lr, --overlap, --bucket, --pricing, --gpu-mem, --mpi-progress.
Status read_run(const ParsedArgs& a, StepOptions& o) {
  LINS_ASSIGN_OR_RETURN(auto warmup, parse_size(a.get("warmup"), "--warmup"));
  LINS_ASSIGN_OR_RETURN(auto steps, a.get_positive_int("steps"));
  // Warm-up and timed steps are counted together in an int.
  if (warmup > uint64_t(std::numeric_limits<int>::max() - steps))
    return make_error("--warmup " + a.get("warmup") +
                      " is too large: warm-up and timed steps together may be at most " +
                      std::to_string(std::numeric_limits<int>::max()));
  LINS_ASSIGN_OR_RETURN(auto seed, parse_size(a.get("seed"), "--seed"));
  LINS_ASSIGN_OR_RETURN(auto lr, a.get_double("lr"));
  LINS_ASSIGN_OR_RETURN(auto overlap, a.get_enum("overlap", kOverlapNames));
  LINS_ASSIGN_OR_RETURN(auto bucket, parse_bucket(a));
  LINS_ASSIGN_OR_RETURN(auto pricing, a.get_enum("pricing", kPricingNames));
  LINS_ASSIGN_OR_RETURN(o.objective, a.get_enum("objective", kObjectiveNames));
  LINS_ASSIGN_OR_RETURN(auto gpu_mem, a.get_memory_size("gpu-mem"));
  LINS_ASSIGN_OR_RETURN(auto progress, a.get_enum("mpi-progress", kMpiProgressNames));
  o.warmup = warmup, o.steps = steps, o.seed = seed, o.lr = lr, o.overlap = overlap, o.bucket = bucket;
  o.pricing = pricing, o.gpu_mem = gpu_mem, o.progress = progress;
  return Status::ok_status();
}

// --backend, --precision, --compute (its default follows the backend).
Status read_numerics(const ParsedArgs& a, StepOptions& o) {
  LINS_ASSIGN_OR_RETURN(o.backend, a.get_enum("backend", kStepBackendNames));
  LINS_ASSIGN_OR_RETURN(o.precision, a.get_enum("precision", kDTypeNames));
  o.compute = default_compute(o.backend);
  if (!a.get("compute").empty()) {
    LINS_ASSIGN_OR_RETURN(o.compute, a.get_enum("compute", kDTypeNames));
  }
  if (!a.get("attention").empty()) {
    LINS_ASSIGN_OR_RETURN(auto attention, a.get_enum("attention", kAttentionKernelNames));
    if (o.backend != StepBackend::gpu)
      return make_error(
          "--attention chooses the GPU's attention kernels; it needs --backend gpu (the CPU backend "
          "has one attention, the reference of docs/model-conventions.md)");
    o.attention = attention;
  }
  return Status::ok_status();
}

Result<StepOptions> read_step_options(const ParsedArgs& a, const Args& args, int world) {
  StepOptions o;
  LINS_TRY(read_workload(a, world, o));
  LINS_TRY(read_run(a, o));
  LINS_TRY(read_numerics(a, o));
  LINS_TRY(read_device(a, o));
  LINS_ASSIGN_OR_RETURN(const NetworkSpec net, parse_network(a));
  LINS_ASSIGN_OR_RETURN(o.cost, parse_cost_model(a, net, o.topo.gpus_per_node));
  // Of the network's GPU the step takes the HBM rate alone (its planner's optimizer): the peak for MFU is this
  // machine's (peak_rate), the memory --gpu-mem's.
  LINS_ASSIGN_OR_RETURN(auto gpu, parse_gpu_assumption(a, net));
  o.hbm_gbps = gpu.hbm_gbps;
  LINS_ASSIGN_OR_RETURN(o.engine, parse_engine_options(a));
  LINS_ASSIGN_OR_RETURN(auto reserve, parse_memory_reserve(a));
  // Host memory has no CUDA context, workspaces or NCCL buffers.
  o.reserve = o.backend == StepBackend::gpu ? reserve : MemoryReserve{0, 0, 0, 0};
  LINS_ASSIGN_OR_RETURN(o.timeout_s, a.get_double("timeout"));
  o.strategies = split_plan_list(a.get("strategies"));
  if (o.strategies.empty())
    return make_error("--strategies is empty; give for example " + std::string(kDefaultStrategies));
  o.out_dir = a.get("out");
  o.csv_path = (std::filesystem::path(o.out_dir) / "step.csv").string();
  o.collective_log = a.get("collective-log");
  o.peak_tflops = a.get("peak-tflops");
  o.network = a.get("network");
  o.profile = a.get("profile");
  o.trace = a.flag("trace");
  o.resume = a.flag("resume");
  o.memory_check = !a.flag("no-memory-check");
  if (a.has("memory-limit")) {
    LINS_ASSIGN_OR_RETURN(auto limit, a.get_memory_size("memory-limit"));
    if (limit == 0) return make_error("--memory-limit must be at least 1 byte (for example 16GiB)");
    o.memory_limit_bytes = double(limit);
  }
  o.argv = {"lins", "step"};
  o.argv.insert(o.argv.end(), args.begin(), args.end());
  return o;
}

// --out (step.csv and its provenance from rank 0, traces from every rank with --trace) and --collective-log (rank 0),
// checked on the ranks that write them before any strategy is resolved or run.
Status check_step_outputs(const StepOptions& o, int rank) {
  Status mine;
  if (rank == 0 || o.trace) mine = check_output_folder("--out", o.out_dir);
  if (mine && rank == 0 && !o.collective_log.empty()) mine = check_output_file("--collective-log", o.collective_log);
  return agree_any(mine);
}

// Each rank's backend for one strategy; the GPU one runs on device (local rank % devices), as NCCL's bootstrap.
// Every rank learns whether every rank sees a device.
Result<BackendFactory> backend_factory(const StepOptions& o) {
  const DType compute = o.compute;
  switch (o.backend) {
    case StepBackend::cpu:
      return BackendFactory([compute] { return Result<std::unique_ptr<ComputeBackend>>(make_cpu_backend(compute)); });
    case StepBackend::gpu: {
      auto rank = rank_gpu("(or use --backend cpu)", "(the cpu backend runs any number)");
      if (!rank) return make_error("--backend gpu: " + rank.error());
      const GpuPlugin* gpu = rank->plugin;
      GpuBackendOptions go;
      go.device = rank->device;
      go.compute = compute;
      // cuDNN's fused attention runs on bf16 activations; fp32 compute keeps the flash kernels' fp32 path.
      const bool cudnn_default = gpu->cudnn_attention_built() && compute == DType::bf16;
      go.attention = o.attention.value_or(cudnn_default ? AttentionKernel::cudnn : AttentionKernel::flash);
      if (go.attention == AttentionKernel::cudnn && !gpu->cudnn_attention_built())
        return make_error(
            "--attention cudnn: the GPU plugin was built without cuDNN's fused attention (cuDNN 9 "
            "and its frontend headers were not found when it was built); use --attention flash");
      return BackendFactory([gpu, go] { return gpu->make_backend(go); });
    }
  }
  return make_error("--backend: no factory");
}

// 'lins': the planner's choice for this cluster, said by rank 0. The step objective projects compute with the
// compute options, their efficiency scaling `peak` (the MFU peak: given, or this machine's GEMM rate).
Result<Plan> planner_choice(const StepOptions& o, const ParsedArgs& a, const Peak& peak, int rank) {
  LINS_ASSIGN_OR_RETURN(auto compute, parse_compute_model(a, peak.tflops, o.hbm_gbps));
  PlannerOptions po;
  po.objective = o.objective;
  po.compute = std::move(compute);
  po.engine = o.engine;
  po.overlap = o.overlap;
  po.gpu_mem_bytes = double(o.gpu_mem);
  po.bucket_bytes = int64_t(o.bucket);
  po.dtype = o.precision;
  po.state_bytes = executor_state_bytes(o.precision, o.compute);
  po.rank_by = o.pricing;
  po.include_baselines = o.objective == Objective::step;
  po.reserve = o.reserve;
  // Every strategy of one run steps the same workload, so the planner plans for it as given (micro-batch size and
  // recomputation fixed) rather than choosing its own.
  Workload w = o.workload;
  w.micro_batch_fixed = w.recompute_fixed = true;
  auto search = search_plans(w, o.topo, *o.cost, po);
  if (!search) return make_error("lins: " + search.error());
  if (!search->chosen())
    return make_error("lins: no legal plan of " + o.model.name + " fits " + format_bytes(double(o.gpu_mem)) +
                      " per rank (raise --gpu-mem)");
  Plan p = search->chosen()->plan;
  p.name = "lins";
  if (rank == 0) {
    const PlanEvaluation& c = *search->chosen();
    std::printf("lins: the planner chose %s %s [%s engine] of %zu plans by %s (", p.to_string().c_str(),
                p.tuple_string().c_str(), engine_name(p.engine), search->plans.size(),
                o.objective == Objective::step ? "projected step time" : "predicted communication");
    if (c.projected) std::printf("projected step %s, ", format_seconds(c.step.step_s).c_str());
    std::printf("predicted communication %s per step, %s per rank)\n",
                format_seconds(c.comm(o.pricing).total_s()).c_str(), format_bytes(c.memory.total_bytes).c_str());
  }
  return p;
}

// Every strategy but 'lins' parsed before anything runs, so a typo fails at once; the compute options checked too.
Status check_strategies(const StepOptions& o, const ParsedArgs& a) {
  for (const auto& s : o.strategies)
    if (s != "lins")
      if (auto p = parse_run_plan(s, o.topo, o.engine); !p) return make_error("strategy '" + s + "': " + p.error());
  LINS_TRY(parse_compute_model(a, 1.0, o.hbm_gbps));
  return Status::ok_status();
}

// Some of the strategies with their plans and names, for the memory check.
struct NamedPlans {
  std::vector<Plan> plans;
  std::vector<std::string> names;
};
// Those that need no planner: every one but 'lins' (check_strategies parsed each already).
NamedPlans fixed_strategies(const StepOptions& o) {
  NamedPlans f;
  for (const auto& s : o.strategies)
    if (s != "lins")
      if (auto p = parse_run_plan(s, o.topo, o.engine)) f.plans.push_back(*p), f.names.push_back(s);
  return f;
}
// Those the planner chose: each 'lins' of the resolved strategies.
NamedPlans planned_strategies(const StepOptions& o, const std::vector<Plan>& resolved) {
  NamedPlans f;
  for (std::size_t i = 0; i < resolved.size(); ++i)
    if (o.strategies[i] == "lins") f.plans.push_back(resolved[i]), f.names.push_back(o.strategies[i]);
  return f;
}

// Every strategy resolved before any runs ('lins' by the planner, once the MFU peak is known).
Result<std::vector<Plan>> resolve_strategies(const StepOptions& o, const ParsedArgs& a, const Peak& peak, int rank) {
  std::vector<Plan> plans;
  for (const auto& s : o.strategies) {
    auto p = s == "lins" ? planner_choice(o, a, peak, rank) : parse_run_plan(s, o.topo, o.engine);
    if (!p) return make_error(s == "lins" ? p.error() : "strategy '" + s + "': " + p.error());
    plans.push_back(*p);
  }
  return plans;
}

// What one rank of `plan` takes: the memory model's walk of this rank's schedule, as the executor will allocate it,
// plus the reserve on the GPU. nullopt when the schedule cannot be built (the executor reports that itself).
std::optional<MemoryEstimate> rank_memory(const StepOptions& o, const Workload& w, const Plan& plan,
                                          const Topology& topo, int rank, MemoryOf which) {
  auto sched = build_schedule(o.model, plan, topo,
                              schedule_options(w.micro_batches, int64_t(o.bucket), o.precision, o.engine, o.overlap,
                                               /*expand=*/true, rank));
  if (!sched) return std::nullopt;
  MemoryEstimate m = estimate_memory(*sched, w, executor_state_bytes(o.precision, o.compute), which);
  if (o.backend == StepBackend::gpu) add_memory_reserve(m, *sched, o.reserve);
  return m;
}

std::string memory_parts(const MemoryEstimate& m) {
  std::string s = "states " + format_bytes(m.state_bytes) + ", activations " + format_bytes(m.activation_bytes) +
                  ", buffers " + format_bytes(m.buffer_bytes);
  if (m.reserve_bytes > 0) s += ", reserve " + format_bytes(m.reserve_bytes);
  return s;
}

// What would fit `available` bytes shared by `ranks` ranks: the strategies (of the run and the presets) whose largest
// rank fits, a micro-batch of 1, and, when no strategy fits, ZeRO-3 on more ranks of the same shape.
std::vector<std::string> step_alternatives(const StepOptions& o, const std::vector<Plan>& plans,
                                           const std::vector<std::string>& names, double available, int ranks) {
  std::vector<std::string> out;
  auto node_need = [&](const Plan& p, const Workload& w, const Topology& topo) {
    auto m = rank_memory(o, w, p, topo, 0, MemoryOf::worst_rank);
    return m ? m->required_bytes() * ranks : -1.0;
  };
  std::string fits;
  auto consider = [&](const std::string& name, const Plan& p) {
    if (fits.find(" " + name + " (") != std::string::npos) return;
    const double need = node_need(p, o.workload, o.topo);
    if (need >= 0 && need <= available) fits += " " + name + " (" + format_bytes(need) + "),";
  };
  for (std::size_t i = 0; i < plans.size(); ++i) consider(names[i], plans[i]);
  for (const char* name : {"zero3", "zeropp", "mics", "zero2", "zero1", "ddp"})
    if (auto p = parse_plan(name, o.topo)) consider(name, *p);
  if (!fits.empty()) fits.pop_back(), out.push_back("--strategies" + fits + " per host");
  const Plan* largest = nullptr;
  double largest_need = -1;
  for (const auto& p : plans)
    if (const double n = node_need(p, o.workload, o.topo); n > largest_need) largest_need = n, largest = &p;
  if (largest && o.workload.micro_batch_size > 1) {
    Workload w = o.workload;
    w.micro_batch_size = 1;
    const double need = node_need(*largest, w, o.topo);
    if (need >= 0 && need <= available)
      out.push_back("--micro-batch 1 with " + largest->to_string() + " (" + format_bytes(need) + ")");
  }
  for (int k = 2; fits.empty() && k <= 1024; k *= 2) {
    const Topology more{o.topo.gpus_per_node, o.topo.nodes * k};
    auto p = parse_plan("zero3", more);
    if (!p) break;
    const double need = node_need(*p, o.workload, more);
    if (need >= 0 && need <= available) {
      out.push_back("zero3 on " + std::to_string(k) + " times the ranks, " + std::to_string(ranks) +
                    " per host as now (" + format_bytes(need) + " per host)");
      break;
    }
  }
  out.push_back("a smaller --model");
  return out;
}

// Every strategy's need, summed over the ranks of each host (each GPU), against what it can give, before any strategy
// allocates; every rank gets the verdict.
Status check_step_memory(const StepOptions& o, const std::vector<Plan>& plans, const std::vector<std::string>& names,
                         int rank) {
  std::vector<RankDemand> mine;
  for (std::size_t i = 0; i < plans.size(); ++i) {
    auto m = rank_memory(o, o.workload, plans[i], o.topo, rank, MemoryOf::schedule_rank);
    mine.push_back(
        RankDemand{"strategy " + names[i], m ? m->required_bytes() : 0.0, m ? memory_parts(*m) : std::string()});
  }
  MemoryCheckOptions mo;
  mo.device = o.backend == StepBackend::gpu;
  mo.limit_bytes = o.memory_limit_bytes;
  mo.limit_option = "--memory-limit";
  mo.override_hint = "To run anyway, give --no-memory-check (or the memory a host may use with --memory-limit).";
  mo.would_fit = [&](double available, int ranks) { return step_alternatives(o, plans, names, available, ranks); };
  return check_memory_on_every_node(mine, mo);
}

// The peak rate for MFU: given; else on the GPU the datasheet's dense bf16 peak of rank 0's device where the table
// knows it (the paper's and Megatron's convention); else the backend's GEMM rate on the step's largest GEMM. That
// GEMM rate is measured on every rank in every case and reported beside (gemm_tflops).
Result<Peak> peak_rate(const StepOptions& o, const BackendFactory& make_backend, int world) {
  Peak peak;
  const int64_t T = int64_t(o.workload.seq) * o.workload.micro_batch_size;
  const std::string shape =
      std::to_string(T) + "x" + std::to_string(o.model.dims.ffn) + "x" + std::to_string(o.model.dims.hidden);
  std::optional<double> given;
  if (!o.peak_tflops.empty()) {
    LINS_ASSIGN_OR_RETURN(auto v, parse_nonnegative_double(o.peak_tflops, "--peak-tflops"));
    if (v <= 0) return make_error("--peak-tflops must be positive");
    given = v;
  }
  std::optional<DatasheetPeak> datasheet;
  switch (o.backend) {
    case StepBackend::gpu: {
      auto be = make_backend();
      Result<double> rate = be ? measure_backend_gemm_tflops(**be, T, o.model.dims.ffn, o.model.dims.hidden)
                               : Result<double>(make_error(be.error()));
      LINS_TRY(agree_any(rate ? Status() : Status(make_error(rate.error()))));
      peak.gemm_tflops = all_sum(*rate) / world;
      peak.gemm_source = std::string("GPU backend GEMM (") + dtype_name(o.compute) + " tensors, bf16 tensor cores) " +
                         shape + " measured on every rank, mean";
      const GpuPlugin* gpu = loaded_gpu_plugin();  // loaded: the backend came from it
      const std::string name = broadcast_text(gpu ? gpu->device_name(0) : "", 0, MPI_COMM_WORLD);
      datasheet = datasheet_bf16_peak(name);
      break;
    }
    case StepBackend::cpu: {
      const double gflops = measure_sgemm_gflops(T, o.model.dims.ffn, o.model.dims.hidden);
      peak.gemm_tflops = all_sum(gflops) / world / 1e3;
      peak.gemm_source = "sgemm " + shape + " measured on each rank with its host to itself, mean";
      break;
    }
  }
  if (o.paced()) {
    // A paced task takes at least its FLOPs at the device rate, so MFU against it is at most 1.
    char rate[64];
    std::snprintf(rate, sizeof rate, "%.6g", o.device_tflops);
    peak.tflops = o.device_tflops, peak.kind = "device";
    peak.source = std::string("the emulated device's rate, ") + rate + " TFLOP/s (" + o.device_source + ")";
    if (given) peak.source += "; --peak-tflops yields to it";
  } else if (given) {
    peak.tflops = *given, peak.kind = "given", peak.source = "given (--peak-tflops)";
  } else if (datasheet) {
    peak.tflops = datasheet->tflops, peak.kind = "datasheet", peak.source = datasheet->source;
  } else {
    peak.tflops = peak.gemm_tflops, peak.kind = "gemm", peak.source = peak.gemm_source;
  }
  return peak;
}

void print_run_header(const StepOptions& o, const Peak& peak, int world, const std::string& fabric) {
  const Workload& w = o.workload;
  std::printf(
      "lins step: %d ranks as %d node(s) x %d per node, model %s (%s parameters), seq %d, micro-batch %d, "
      "M %d, %lld tokens per step, overlap %s%s, %llu warm-up + %d timed steps per strategy\n",
      world, o.topo.nodes, o.topo.gpus_per_node, o.model.name.c_str(), std::to_string(o.model.param_count()).c_str(),
      w.seq, w.micro_batch_size, w.micro_batches, (long long)w.global_batch_tokens, overlap_name(o.overlap),
      w.recompute == Recompute::none ? "" : (std::string(", recompute ") + recompute_name(w.recompute)).c_str(),
      (unsigned long long)o.warmup, o.steps);
  std::printf("lins step: peak for MFU %.3f TFLOP/s per rank (%s); GEMM rate of this run %.3f TFLOP/s (%s)\n",
              peak.tflops, peak.source.c_str(), peak.gemm_tflops, peak.gemm_source.c_str());
  if (o.paced()) {
    char gbps[64] = "";
    if (o.device_gbps > 0) std::snprintf(gbps, sizeof gbps, ", optimizer at %.6g GB/s", o.device_gbps);
    std::printf(
        "lins step: each compute task paced to an emulated device of %.6g TFLOP/s%s per rank (%s); MFU counts the "
        "FLOPs it was paced for (3 x the simulator's forward FLOPs per token), mfu_causal scales them by Megatron-LM's "
        "causal to full ratio\n",
        o.device_tflops, gbps, o.device_source.c_str());
  } else {
    std::printf(
        "lins step: MFU counts Megatron-LM's FLOPs per token, 72 L h^2 (1 + s/(6h) + V/(12 L h)), full "
        "attention; mfu_causal counts causal attention's half of the score and value products\n");
  }
  std::printf("lins step: fabric %s\n", fabric.c_str());
  std::fflush(stdout);
}

// Rank 0's step.csv (kept rows and all, with --resume); null on the other ranks.
Result<std::unique_ptr<CsvWriter>> open_step_csv(const StepOptions& o, int rank) {
  std::unique_ptr<CsvWriter> writer;
  Status open_ok;
  if (rank == 0) {
    auto w = CsvWriter::open(o.csv_path, StepRow::header(), o.resume);
    if (!w)
      open_ok = make_error(w.error());
    else
      writer = std::make_unique<CsvWriter>(std::move(*w));
  }
  LINS_TRY(agree(open_ok, rank));
  if (rank == 0 && writer->resumed_row_count() > 0)
    std::printf("lins step: resuming %s with its %zu rows\n", writer->partial_path().c_str(),
                writer->resumed_row_count());
  return writer;
}

// The summary of every strategy's timed steps; with a device rate, how the pacing went.
void print_table(const StepOptions& o, const std::vector<TableRow>& table) {
  using Align = TextTable::Align;
  TextTable summary({{.header = "strategy", .width = 12},
                     {.header = "plan", .width = 20},
                     {.header = "step_s", .align = Align::right, .width = 8, .format = "%.3f"},
                     {.header = "fwd_s", .align = Align::right, .width = 8, .format = "%.3f"},
                     {.header = "bwd_s", .align = Align::right, .width = 8, .format = "%.3f"},
                     {.header = "exposed", .align = Align::right, .width = 8, .format = "%.3f"},
                     {.header = "pred_comm", .align = Align::right, .width = 9, .format = "%.4f"},
                     {.header = "intra", .align = Align::right, .width = 10},
                     {.header = "inter", .align = Align::right, .width = 10},
                     {.header = "peak_mem", .align = Align::right, .width = 10},
                     {.header = "/model", .align = Align::right, .width = 7, .format = "%.3f"},
                     {.header = "states", .align = Align::right, .width = 10},
                     {.header = "model_st", .align = Align::right, .width = 10},
                     {.header = "loss", .align = Align::right, .width = 8, .format = "%.4f"},
                     {.header = "TGS", .align = Align::right, .width = 8, .format = "%.0f"},
                     {.header = "MFU", .align = Align::right, .width = 6, .format = "%.1f%%"}});
  for (const auto& r : table) {
    summary.row().add(r.strategy.substr(0, 12)).add(r.plan).add(r.step_s).add(r.fwd_s).add(r.bwd_s).add(r.exposed_s);
    summary.add(r.pred_comm_s).add(format_bytes(r.intra_bytes)).add(format_bytes(r.inter_bytes));
    summary.add(format_bytes(r.peak_bytes)).add(r.model_mem_bytes > 0 ? r.peak_bytes / r.model_mem_bytes : 0.0);
    summary.add(format_bytes(r.state_bytes)).add(format_bytes(r.model_state_bytes)).add(r.loss).add(r.tgs);
    summary.add(100 * r.mfu);
    if (!r.bytes_match) summary.note("  (measured bytes differ from the schedule)");
  }
  std::printf("\n");
  summary.print(std::cout);
  if (o.paced()) {
    TextTable paced({{.header = "strategy", .width = 12},
                     {.header = "compute_s", .align = Align::right, .width = 10, .format = "%.4f"},
                     {.header = "overruns", .align = Align::right, .width = 10},
                     {.header = "of_tasks", .align = Align::right, .width = 10}});
    paced.header_note("  (paced to the emulated device; compute = fwd + bwd + optimizer)");
    for (const auto& r : table) {
      paced.row().add(r.strategy.substr(0, 12)).add(r.fwd_s + r.bwd_s + r.opt_s);
      paced.add(std::to_string(r.overrun_tasks)).add(std::to_string(r.paced_tasks));
    }
    std::printf("\n");
    paced.print(std::cout);
  }
  std::printf(
      "(means over the timed steps; times are the slowest rank's; bytes are message bytes per rank per step; "
      "/model is peak_mem over the memory model's total; pred_comm is the cost model's %s pricing on %s)\n",
      pricing_name(o.pricing), o.profile.empty() ? o.network.c_str() : ("profile " + o.profile).c_str());
  std::printf("wrote %s\n", o.csv_path.c_str());
}

// What the kernels of a backend do with a compute dtype, for the provenance.
const char* kernel_description(StepBackend backend, DType compute) {
  switch (backend) {
    case StepBackend::gpu:
      switch (compute) {
        case DType::bf16:
          return "; bf16 tensor-core kernels";
        case DType::fp32:
          return "; GEMMs and attention on bf16 tensor cores";
      }
      break;
    case StepBackend::cpu:
      switch (compute) {
        case DType::bf16:
          return "; bf16 emulated on the CPU (fp32 arithmetic, rounded outputs)";
        case DType::fp32:
          return "";
      }
      break;
  }
  return "";
}

// The provenance's words for the dtypes: storage, activations, and the kernels that use them.
std::string dtype_description(const StepOptions& o) {
  std::string s;
  switch (o.precision) {
    case DType::bf16:
      s = "bf16 P and G, fp32 master weights and Adam moments";
      break;
    case DType::fp32:
      s = "fp32 P, G and optimizer states";
      break;
  }
  switch (o.compute) {
    case DType::bf16:
      s += "; bf16 activations, fp32 weight gradients";
      break;
    case DType::fp32:
      s += "; fp32 activations";
      break;
  }
  return s + kernel_description(o.backend, o.compute);
}

// step.provenance.json beside step.csv: the run's settings and the strategies' plans.
Status write_step_provenance(const StepOptions& o, const std::vector<Plan>& plans, const Peak& peak) {
  const Workload& w = o.workload;
  Json run = Json::object();
  run["command"] = "step";
  run["backend"] = kStepBackendNames.name(o.backend);
  run["precision"] = dtype_name(o.precision);
  run["compute"] = dtype_name(o.compute);
  run["dtype"] = dtype_description(o);
  run["model"] = o.model.name;
  run["params"] = (long long)o.model.param_count();
  run["topology"] = o.topo.to_string();
  run["gpus_per_node"] = o.topo.gpus_per_node;
  run["nodes"] = o.topo.nodes;
  run["seq"] = w.seq;
  run["micro_batch_size"] = w.micro_batch_size;
  run["micro_batches"] = w.micro_batches;
  run["global_batch_tokens"] = (long long)w.global_batch_tokens;
  run["recompute"] = recompute_name(w.recompute);
  run["overlap"] = overlap_name(o.overlap);
  run["warmup_steps"] = (long long)o.warmup;
  run["timed_steps"] = o.steps;
  run["seed"] = (long long)o.seed;
  run["lr"] = o.lr;
  run["bucket_bytes"] = (long long)o.bucket;
  run["mpi_progress"] = mpi_progress_name(o.progress);
  run["device_tflops"] = o.device_tflops;  // 0: not paced
  run["device_gbps"] = o.device_gbps;
  run["device_rate_source"] = o.device_source;
  run["peak_tflops"] = peak.tflops;
  run["peak_tflops_source"] = peak.source;
  run["peak_source"] = peak.kind;
  run["gemm_tflops"] = peak.gemm_tflops;
  run["gemm_tflops_source"] = peak.gemm_source;
  run["network"] = o.network;
  run["profile"] = o.profile;
  run["pricing"] = pricing_name(o.pricing);
  run["planner_objective"] = objective_name(o.objective);
  run["watchdog_timeout_s"] = o.timeout_s;
  run["resumed"] = o.resume;
  Json chosen = Json::array();
  for (size_t i = 0; i < plans.size(); ++i) {
    Json p = Json::object();
    p["strategy"] = o.strategies[i];
    p["plan"] = plans[i].to_string();
    p["engine"] = engine_name(plans[i].engine);
    chosen.push_back(p);
  }
  run["strategies"] = chosen;
  return write_provenance(MPI_COMM_WORLD, provenance_path_for(o.csv_path), o.argv, run);
}

}  // namespace

int run_step(const Args& args) {
  const MpiRun mpi = init_mpi();
  const int rank = mpi.rank, world = mpi.world;
  // Every rank parses the same argv and reaches the same verdict; only rank 0 speaks.
  auto fail = [&](const std::string& msg) { return fail_mpi(rank, "lins step", msg); };

  ParsedArgs a;
  if (auto code = parse_mpi_args(step_spec(), args, rank, &a)) return *code;
  auto opt = read_step_options(a, args, world);
  if (!opt) return fail(opt.error());
  const StepOptions& o = *opt;
  auto make_backend = backend_factory(o);
  if (!make_backend) return fail(make_backend.error());
  start_rank_watchdog(o.timeout_s, rank);
  if (auto s = check_step_outputs(o, rank); !s) return fail(s.error());
  if (auto s = check_strategies(o, a); !s) return fail(s.error());
  // Memory first for every strategy but 'lins' (the peak's sgemm already allocates the step's largest GEMM), then
  // for 'lins' once the planner has chosen it.
  if (o.memory_check) {
    const NamedPlans fixed = fixed_strategies(o);
    if (auto s = check_step_memory(o, fixed.plans, fixed.names, rank); !s) return fail(s.error());
  }
  auto peak = peak_rate(o, *make_backend, world);
  if (!peak) return fail(peak.error());
  auto plans = resolve_strategies(o, a, *peak, rank);
  if (!plans) return fail(plans.error());
  if (const NamedPlans planned = planned_strategies(o, *plans); o.memory_check && !planned.plans.empty())
    if (auto s = check_step_memory(o, planned.plans, planned.names, rank); !s) return fail(s.error());
  std::string fabric = fabric_label(MPI_COMM_WORLD);
  if (o.paced()) {
    char device[96];
    std::snprintf(device, sizeof device, " device=%.6gTFLOPS", o.device_tflops);
    fabric += device;
    if (o.device_gbps > 0) std::snprintf(device, sizeof device, ",%.6gGB/s", o.device_gbps), fabric += device;
  }
  if (rank == 0) print_run_header(o, *peak, world, fabric);
  if (rank == 0)
    for (const auto& w : o.cost->warnings()) std::fprintf(stderr, "lins step: warning: %s\n", w.c_str());
  auto writer = open_step_csv(o, rank);
  if (!writer) return fail(writer.error());

  StepRun run{o, *make_backend, *peak, writer->get(), rank, world, fabric, 0, 0, {}};
  run.mfu_flops_per_token = o.model.flops_per_token(o.workload.seq);
  run.mfu_causal_flops_per_token = o.model.causal_flops_per_token(o.workload.seq);
  if (o.paced()) {
    double forward = 0;
    for (int m = 0; m < int(o.model.modules.size()); ++m)
      forward += module_forward_flops(o.model, m, 1.0, o.workload.seq);
    run.mfu_causal_flops_per_token = 3 * forward * run.mfu_causal_flops_per_token / run.mfu_flops_per_token;
    run.mfu_flops_per_token = 3 * forward;
  }
  std::vector<TableRow> table;
  for (std::size_t i = 0; i < plans->size(); ++i) {
    auto row = run_strategy(run, o.strategies[i], (*plans)[i], i, plans->size());
    if (!row) return fail(row.error());
    if (*row) table.push_back(**row);
  }
  if (!o.collective_log.empty())
    if (auto s = write_collective_log(run); !s) return fail(s.error());
  if (rank == 0) {
    if (auto s = (*writer)->finish(); !s) return fail(s.error());
    print_table(o, table);
  }
  if (auto p = write_step_provenance(o, *plans, *peak); !p) return fail(p.error());
  return finish_mpi(0);
}

}  // namespace lins
