// `lins step`: the synthetic LLaMA training step under each strategy on the CPU backend (MPI) or, with --backend gpu,
// on one CUDA device per rank with NCCL. P and G are stored in the paper's mixed precision (bf16, fp32 master weights
// and Adam moments) or, with --precision fp32, in fp32; activations are --compute bf16 (the GPU's default) or fp32
// (the CPU's). Warm-up plus timed steps per strategy, one CSV row per (strategy, timed step) with the columns of
// core/results_schema.h, a JSON provenance file beside it, a table on stdout, and optionally a Chrome trace of the last
// step per rank.
#include <mpi.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "apps/commands.h"
#include "apps/mpi_app.h"
#include "comm/mesh_comms.h"
#include "comm/provenance.h"
#include "comm/watchdog.h"
#include "core/cli.h"
#include "core/cost_model.h"
#include "core/cost_options.h"
#include "core/csv.h"
#include "core/memory_model.h"
#include "core/overlap.h"
#include "core/planner.h"
#include "core/replay.h"
#include "core/results_schema.h"
#include "core/step_columns.h"
#include "core/units.h"
#include "core/workload.h"
#include "kernels/ops.h"
#include "train/executor.h"
#if LINS_TRAIN_GPU
#include "comm/nccl_communicator.h"
#include "train/gpu_backend.h"
#endif

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
          {"overlap", 0, "MODE", "all", "all, no_bcast, no_allreduce or none (the paper's Table V)"},
          {"backend", 0, "NAME", "cpu",
           "compute backend: cpu (host memory, MPI collectives) or gpu (CUDA device of the local rank, NCCL; "
           "bf16 tensor-core GEMMs and attention)"},
          {"precision", 0, "DTYPE", "bf16",
           "storage of parameters and gradients, and so of every collective: fp32, or bf16 = the paper's mixed "
           "precision (fp32 master weights and Adam moments, 16 bytes of states per parameter)"},
          {"compute", 0, "DTYPE", "",
           "dtype of activations and of the kernels' inputs: fp32, or bf16 (tensor-core kernels end to end on the "
           "GPU; emulated on the CPU: fp32 arithmetic, every output rounded to bf16); weight gradients are fp32 "
           "either way (default: fp32 with --backend cpu, bf16 with --backend gpu)"},
          {"bucket", 0, "SIZE", "1M", "gradient all-reduce bucket U in bytes (of --precision elements)"},
          {"trace", 0, "", "",
           "write, per strategy and rank, a Chrome trace and the action log (timeline.*.csv, which `lins replay` "
           "re-times) of the last timed step"},
          {"collective-log", 0, "FILE", "",
           "write every collective each rank issued in each timed step, in issue order (CSV: system, strategy, rank, "
           "step, index, kind, group_size, elems, dtype, message_bytes)"},
          {"gpu-mem", 0, "SIZE", "1TiB", "memory per rank the planner may use for 'lins'"},
          {"peak-tflops", 0, "RATE", "",
           "peak TFLOP/s per rank for MFU (default: sgemm measured on every rank at "
           "start-up, all ranks at once)"},
          {"mpi-progress", 0, "MODE", "thread",
           "how MPI collectives progress: thread (a thread per communicator) "
           "or nonblocking (MPI_I* collectives)"},
          {"timeout", 0, "SECONDS", "600",
           "watchdog: a rank waiting on one collective this long names itself and the operation and ends the job "
           "(0 = off)"},
          {"resume", 0, "", "",
           "keep the rows of an interrupted (or finished) step.csv in --out and run only what is missing"},
      });
  spec.options = concat_options(spec.options, cost_options("cpu-local", "paper"));
  spec.options = concat_options(spec.options, engine_options());
  spec.options = concat_options(spec.options, memory_reserve_options());
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

// One value reduced over every rank (the step's results); guarded, since a rank that never arrives would hang it.
double all_reduce_value(double v, MPI_Op op) {
  WatchdogScope watched("MPI_Allreduce of the step's results");
  double r = v;
  MPI_Allreduce(&v, &r, 1, MPI_DOUBLE, op, MPI_COMM_WORLD);
  return r;
}
double all_max(double v) { return all_reduce_value(v, MPI_MAX); }
double all_min(double v) { return all_reduce_value(v, MPI_MIN); }
double all_sum(double v) { return all_reduce_value(v, MPI_SUM); }

// sgemm rate of this rank on the step's largest GEMM shape (T x F x H), while every rank measures at once: what
// a rank can reach on a shared machine. GFLOP/s.
double measure_sgemm_gflops(int64_t m, int64_t n, int64_t k) {
  std::vector<float> a(size_t(m * k), 0.5f), b(size_t(k * n), 0.25f), c(size_t(m * n), 0.0f);
  kernels::cpu::gemm(false, true, m, n, k, 1.0f, a.data(), b.data(), 0.0f, c.data());  // warm-up
  MPI_Barrier(MPI_COMM_WORLD);
  const auto t0 = std::chrono::steady_clock::now();
  int iters = 0;
  double elapsed = 0;
  do {
    kernels::cpu::gemm(false, true, m, n, k, 1.0f, a.data(), b.data(), 0.0f, c.data());
    ++iters;
    elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  } while (elapsed < 0.3);
  return 2.0 * double(m) * double(n) * double(k) * iters / elapsed / 1e9;
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

std::string group_summary(const Plan& plan, const Topology& topo) {
  std::string s;
  for (int r = 0; r < kGroupRoleCount; ++r) {
    const auto role = static_cast<GroupRole>(r);
    const GroupSpec g = group_spec(role, plan, topo);
    const Mesh m = group_mesh(g, topo, 0);
    s += std::string(s.empty() ? "" : ", ") + group_role_name(role) + " " + std::to_string(g.size()) + " (" +
         m.to_string() + ")";
  }
  return s;
}

// A strategy as one CSV field ("p=4x1,g=4x1,os=8x1" is quoted).
std::string strategy_csv_field(const std::string& s) { return s.find(',') == std::string::npos ? s : "\"" + s + "\""; }

// Every rank's `text` concatenated on rank 0 in rank order (empty elsewhere).
std::string gather_text(const std::string& text, int rank, int world) {
  WatchdogScope watched("MPI_Gather of the collective log");
  int len = static_cast<int>(text.size());
  std::vector<int> lens(static_cast<std::size_t>(world)), offsets(static_cast<std::size_t>(world));
  MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  int total = 0;
  for (int r = 0; r < world; ++r)
    offsets[static_cast<std::size_t>(r)] = total, total += lens[static_cast<std::size_t>(r)];
  std::string all(rank == 0 ? static_cast<std::size_t>(total) : 0, '\0');
  MPI_Gatherv(text.data(), len, MPI_CHAR, all.data(), lens.data(), offsets.data(), MPI_CHAR, 0, MPI_COMM_WORLD);
  return all;
}

struct TableRow {
  std::string strategy, plan;
  double step_s = 0, fwd_s = 0, bwd_s = 0, opt_s = 0, exposed_s = 0, pred_comm_s = 0;
  double intra_bytes = 0, inter_bytes = 0, peak_bytes = 0, state_bytes = 0, model_state_bytes = 0, model_mem_bytes = 0;
  double loss = 0, tgs = 0, mfu = 0;
  bool bytes_match = true;
  int steps = 0;
};

// The columns that identify a row when a sweep resumes: the same strategy, backend, precision, workload, overlap and
// step index.
const std::vector<std::string> kResumeKey = {
    "strategy",         "model",         "backend",   "precision", "compute", "world_size", "gpus_per_node", "seq",
    "micro_batch_size", "micro_batches", "recompute", "overlap",   "step"};

}  // namespace

int run_step(const Args& args) {
  const MpiRun mpi = init_mpi();
  const int rank = mpi.rank, world = mpi.world;
  // Every rank parses the same argv and reaches the same verdict; only rank 0 speaks.
  auto fail = [&](const std::string& msg) { return fail_mpi(rank, "lins step", msg); };

  ParsedArgs a;
  if (auto code = parse_mpi_args(step_spec(), args, rank, &a)) return *code;

  auto model = parse_model(a);
  if (!model) return fail(model.error());
  Result<Topology> topo = a.get("gpus-per-node").empty() ? topology_for_world(world, world) : parse_topology(a, world);
  if (!topo) return fail(topo.error());
  auto workload = parse_workload(a, *model, *topo);
  if (!workload) return fail(workload.error());
  auto warmup = parse_size(a.get("warmup"), "--warmup");
  if (!warmup) return fail(warmup.error());
  auto steps = a.get_positive_int("steps");
  if (!steps) return fail(steps.error());
  auto seed = parse_size(a.get("seed"), "--seed");
  if (!seed) return fail(seed.error());
  auto lr = a.get_double("lr");
  if (!lr) return fail(lr.error());
  auto overlap = parse_overlap(a.get("overlap"));
  if (!overlap) return fail(overlap.error());
  auto bucket = a.get_size("bucket");
  if (!bucket) return fail(bucket.error());
  if (*bucket == 0) return fail("--bucket must be at least 1 byte");
  auto pricing = parse_pricing(a.get("pricing"));
  if (!pricing) return fail(pricing.error());
  auto gpu_mem = a.get_size("gpu-mem");
  if (!gpu_mem) return fail(gpu_mem.error());
  MpiProgress progress = MpiProgress::thread;
  if (a.get("mpi-progress") == "nonblocking")
    progress = MpiProgress::nonblocking;
  else if (a.get("mpi-progress") != "thread")
    return fail("--mpi-progress: unknown mode '" + a.get("mpi-progress") + "'; valid modes: thread, nonblocking");

  const std::string backend_name = a.get("backend");
  if (backend_name != "cpu" && backend_name != "gpu")
    return fail("--backend: unknown backend '" + backend_name + "'; valid backends: cpu, gpu");
  const bool gpu = backend_name == "gpu";
  // The paper's mixed precision by default; fp32 activations on the CPU (its bf16 compute is an emulation).
  DType precision = DType::bf16, compute = gpu ? DType::bf16 : DType::fp32;
  for (const auto& [option, dtype] : {std::pair<std::string, DType*>{"precision", &precision}, {"compute", &compute}}) {
    const std::string v = a.get(option);
    if (v == "bf16") {
      *dtype = DType::bf16;
    } else if (v == "fp32") {
      *dtype = DType::fp32;
    } else if (!v.empty()) {
      return fail("--" + option + ": unknown dtype '" + v + "'; valid: fp32, bf16");
    }
  }
  const StateBytes state_bytes = executor_state_bytes(precision, compute);
  // Each rank's backend for one strategy; the GPU one runs on device (local rank % devices), as NCCL's bootstrap.
  std::function<Result<std::unique_ptr<ComputeBackend>>()> make_backend = [compute] {
    return Result<std::unique_ptr<ComputeBackend>>(make_cpu_backend(compute));
  };
  if (gpu) {
#if LINS_TRAIN_GPU
    const int devices = gpu_device_count();
    const Status seen = devices > 0 ? Status() : Status(make_error("no CUDA device is visible to this rank"));
    if (auto s = agree_any(seen); !s) return fail("--backend gpu: " + s.error() + " (use --backend cpu)");
    const int device = node_local_rank(MPI_COMM_WORLD) % devices;
    make_backend = [device, compute] { return make_gpu_backend(device, compute); };
#else
    return fail(
        "--backend gpu: this lins was built without CUDA support (configure with a CUDA toolkit and NCCL, "
        "LINS_CUDA=ON); use --backend cpu");
#endif
  }

  auto cost = parse_cost_model(a, topo->gpus_per_node);
  if (!cost) return fail(cost.error());
  auto engine = parse_engine_options(a);
  if (!engine) return fail(engine.error());
  auto reserve = parse_memory_reserve(a);
  if (!reserve) return fail(reserve.error());
  if (!gpu) *reserve = MemoryReserve{0, 0, 0, 0};  // host memory: no CUDA context, workspaces or NCCL buffers
  auto timeout = a.get_double("timeout");
  if (!timeout) return fail(timeout.error());
  start_rank_watchdog(*timeout, rank);

  const std::vector<std::string> strategies = split_plan_list(a.get("strategies"));
  if (strategies.empty()) return fail("--strategies is empty; give for example " + std::string(kDefaultStrategies));
  // Resolve every strategy before running any, so a typo fails at once.
  std::vector<Plan> plans;
  for (const auto& s : strategies) {
    if (s == "lins") {
      PlannerOptions po;
      po.gpu_mem_bytes = double(*gpu_mem);
      po.bucket_bytes = int64_t(*bucket);
      po.dtype = precision;
      po.state_bytes = state_bytes;
      po.rank_by = *pricing;
      po.include_baselines = false;
      po.reserve = *reserve;
      auto search = search_plans(*workload, *topo, *cost, po);
      if (!search) return fail("lins: " + search.error());
      if (!search->chosen())
        return fail("lins: no legal plan of " + model->name + " fits " + format_bytes(double(*gpu_mem)) +
                    " per rank (raise --gpu-mem)");
      Plan p = search->chosen()->plan;
      p.name = "lins";
      if (rank == 0)
        std::printf(
            "lins: the planner chose %s %s of %d legal plans (predicted communication %s per step, %s per "
            "rank)\n",
            p.to_string().c_str(), p.tuple_string().c_str(), search->legal_count,
            format_seconds(search->chosen()->comm(*pricing).total_s()).c_str(),
            format_bytes(search->chosen()->memory.total_bytes).c_str());
      plans.push_back(p);
    } else {
      auto p = parse_plan(s, *topo);
      if (!p) return fail("strategy '" + s + "': " + p.error());
      plans.push_back(*p);
    }
  }

  const std::string out_dir = a.get("out");
  const std::string csv_path = (std::filesystem::path(out_dir) / "step.csv").string();
  Status dir_ok;
  if (rank == 0) {
    std::error_code ec;
    std::filesystem::create_directories(out_dir, ec);
    if (ec) dir_ok = make_error("cannot create the output folder '" + out_dir + "': " + ec.message());
  }
  if (auto s = agree(dir_ok, rank); !s) return fail(s.error());

  // Peak rate for MFU.
  double peak_tflops = 0;
  std::string peak_source;
  if (!a.get("peak-tflops").empty()) {
    auto v = a.get_double("peak-tflops");
    if (!v) return fail(v.error());
    if (*v <= 0) return fail("--peak-tflops must be positive");
    peak_tflops = *v;
    peak_source = "given (--peak-tflops)";
  } else if (gpu) {
    const int64_t T = int64_t(workload->seq) * workload->micro_batch_size;
    auto be = make_backend();
    Result<double> rate = be ? measure_backend_gemm_tflops(**be, T, model->dims.ffn, model->dims.hidden)
                             : Result<double>(make_error(be.error()));
    if (auto s = agree_any(rate ? Status() : Status(make_error(rate.error()))); !s) return fail(s.error());
    peak_tflops = all_sum(*rate) / world;
    peak_source = std::string("GPU backend GEMM (") + dtype_name(compute) + " tensors, bf16 tensor cores) " +
                  std::to_string(T) + "x" + std::to_string(model->dims.ffn) + "x" + std::to_string(model->dims.hidden) +
                  " measured on every rank, mean (give --peak-tflops for the device's datasheet peak)";
  } else {
    const int64_t T = int64_t(workload->seq) * workload->micro_batch_size;
    const double gflops = measure_sgemm_gflops(T, model->dims.ffn, model->dims.hidden);
    peak_tflops = all_sum(gflops) / world / 1e3;
    peak_source = "sgemm " + std::to_string(T) + "x" + std::to_string(model->dims.ffn) + "x" +
                  std::to_string(model->dims.hidden) + " measured on every rank at once, mean";
  }

  if (rank == 0) {
    std::printf(
        "lins step: %d ranks as %d node(s) x %d per node, model %s (%s parameters), seq %d, micro-batch %d, "
        "M %d, %lld tokens per step, overlap %s%s, %llu warm-up + %d timed steps per strategy\n",
        world, topo->nodes, topo->gpus_per_node, model->name.c_str(), std::to_string(model->param_count()).c_str(),
        workload->seq, workload->micro_batch_size, workload->micro_batches, (long long)workload->global_batch_tokens,
        overlap_name(*overlap), workload->recompute ? ", recompute" : "", (unsigned long long)*warmup, *steps);
    std::printf("lins step: peak for MFU %.3f TFLOP/s per rank (%s)\n", peak_tflops, peak_source.c_str());
    std::fflush(stdout);
  }

  std::unique_ptr<CsvWriter> writer;
  Status open_ok;
  if (rank == 0) {
    auto w = CsvWriter::open(csv_path, StepRow::header(), a.flag("resume"));
    if (!w)
      open_ok = make_error(w.error());
    else
      writer = std::make_unique<CsvWriter>(std::move(*w));
  }
  if (auto s = agree(open_ok, rank); !s) return fail(s.error());
  if (rank == 0 && writer->resumed_row_count() > 0)
    std::printf("lins step: resuming %s with its %zu rows\n", writer->partial_path().c_str(),
                writer->resumed_row_count());
  // The key of a timed step's row, formatted exactly as the row writes it.
  auto resume_key = [&](const std::string& strategy, const Plan& plan, int step) {
    StepRow r;
    set_run_columns(r, "measured", strategy, plan, *workload, *topo, backend_name, precision, compute, *overlap);
    r.set("step", step);
    std::vector<std::string> key;
    for (const auto& c : kResumeKey) key.push_back(r.get(c));
    return key;
  };

  const std::string collective_log = a.get("collective-log");
  std::string collective_rows;  // this rank's rows of the collective log
  std::vector<TableRow> table;
  const double flops_per_token = model->flops_per_token(workload->seq);
  for (size_t si = 0; si < plans.size(); ++si) {
    const Plan& plan = plans[si];
    const std::string& strategy = strategies[si];
    int done = 1;  // every timed step of this strategy is already in the file (rank 0 decides for all)
    if (rank == 0)
      for (int t = 0; t < *steps; ++t) done = done && writer->has_row(kResumeKey, resume_key(strategy, plan, t));
    MPI_Bcast(&done, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (done) {
      if (rank == 0)
        std::printf("[%zu/%zu] %s: its %d rows are kept from the earlier run\n", si + 1, plans.size(), strategy.c_str(),
                    *steps);
      continue;
    }
    if (rank == 0) {
      std::printf("[%zu/%zu] %s %s on the %s engine; groups: %s\n", si + 1, plans.size(), strategy.c_str(),
                  plan.tuple_string().c_str(), engine_name(plan.engine), group_summary(plan, *topo).c_str());
      std::fflush(stdout);
    }
    // The backend first: it outlives the communicators, whose NCCL streams are ordered after its compute stream.
    auto made = make_backend();
    if (auto s = agree_any(made ? Status() : Status(make_error(made.error()))); !s) return fail(s.error());
    std::unique_ptr<ComputeBackend> backend = std::move(*made);
    CommOptions co;
    co.mpi.progress = progress;
    co.compute_stream = backend->native_stream();
    auto world_comm = make_communicator(gpu ? Backend::nccl : Backend::mpi, MPI_COMM_WORLD, "world",
                                        topo->nodes > 1 ? Axis::inter : Axis::intra, co);
    if (auto s = agree_any(world_comm ? Status() : Status(make_error(world_comm.error()))); !s) return fail(s.error());
    ExecutorOptions eo;
    eo.engine = *engine;
    eo.seq = workload->seq;
    eo.micro_batch_size = workload->micro_batch_size;
    eo.micro_batches = workload->micro_batches;
    eo.recompute = workload->recompute;
    eo.overlap = *overlap;
    eo.bucket_bytes = int64_t(*bucket);
    eo.seed = *seed;
    eo.adamw.lr = float(*lr);
    eo.trace = a.flag("trace");
    eo.state_dtype = precision;
    auto ex = Executor::create(*model, plan, *topo, rank, world_comm->get(), *backend, eo);
    if (auto s = agree_any(ex ? Status() : Status(make_error(ex.error()))); !s) return fail(s.error());
    Executor& e = **ex;
    const Schedule& sched = e.schedule();
    const MemoryEstimate mem = estimate_memory(sched, *workload, state_bytes, MemoryOf::schedule_rank);
    // Per-rank predictions of the schedule and the cost model; the CSV keeps the largest rank's of each.
    PredictedComm pred = predict_comm(sched, *cost, *pricing);
    for (auto& b : pred.kind_bytes) b = all_max(b);
    for (auto& b : pred.axis_bytes) b = all_max(b);
    for (Term t : {Term::param, Term::grad, Term::os_sync, Term::os_bcast})
      pred.time.term_s(t) = all_max(pred.time.term_s(t));
    const double pred_comm_s = pred.time.total_s();
    const double model_mem = all_max(mem.total_bytes), model_states = all_max(mem.state_bytes);

    TableRow tr;
    tr.strategy = strategy;
    tr.plan = plan.tuple_string();
    tr.pred_comm_s = pred_comm_s;
    tr.model_state_bytes = model_states;
    tr.model_mem_bytes = model_mem;
    const int total_steps = int(*warmup) + *steps;
    for (int s = 0; s < total_steps; ++s) {
      auto st = e.step();
      if (auto ok = agree_any(st ? Status() : Status(make_error(st.error()))); !ok) return fail(ok.error());
      if (s < int(*warmup)) continue;
      const int timed = s - int(*warmup);
      if (!collective_log.empty()) {
        int index = 0;
        for (int i : e.issued()) {
          const CommOp& op = sched.ops[static_cast<std::size_t>(i)];
          collective_rows += "lins," + strategy_csv_field(strategy) + "," + std::to_string(rank) + "," +
                             std::to_string(timed) + "," + std::to_string(index++) + "," + coll_kind_name(op.kind) +
                             "," + std::to_string(op.group.size()) + "," + std::to_string(op.elems) + "," +
                             dtype_name(op.dtype) + "," + std::to_string(op.bytes()) + "\n";
        }
      }
      const double step_max = all_max(st->step_s), step_min = all_min(st->step_s);
      const double step_mean = all_sum(st->step_s) / world;
      const double fwd = all_max(st->forward_s), bwd = all_max(st->backward_s), opt = all_max(st->optimizer_s);
      const double exposed = all_max(st->exposed_comm_s);
      const double loss = all_sum(st->loss_sum) / double(e.global_tokens());
      double kind[kCollKindCount], axis[2];
      bool match = true;
      for (int k = 0; k < kCollKindCount; ++k) {
        kind[k] = all_max(st->bytes_of_kind(CollKind(k)));
        for (int x = 0; x < 2; ++x) match = match && st->bytes[k][x] == sched.message_bytes(CollKind(k), Axis(x));
      }
      axis[0] = all_max(st->bytes_of_axis(Axis::intra));
      axis[1] = all_max(st->bytes_of_axis(Axis::inter));
      const double all_match = all_min(match ? 1.0 : 0.0);
      const double peak = all_max(double(st->peak_mem_bytes)), states = all_max(double(st->state_bytes));
      const double tgs = double(e.global_tokens()) / world / step_max;
      const double mfu = flops_per_token * tgs / (peak_tflops * 1e12);
      if (rank == 0) {
        StepRow row;
        set_run_columns(row, "measured", strategy, plan, *workload, *topo, backend_name, precision, compute, *overlap);
        row.set("step", timed);
        row.set("step_time_s", step_max).set("step_time_min_s", step_min).set("step_time_mean_s", step_mean);
        row.set("forward_s", fwd).set("backward_s", bwd).set("optimizer_s", opt).set("exposed_comm_s", exposed);
        row.set("all_gather_bytes", kind[0]).set("reduce_scatter_bytes", kind[1]);
        row.set("all_reduce_bytes", kind[2]).set("broadcast_bytes", kind[3]);
        row.set("intra_bytes", axis[0]).set("inter_bytes", axis[1]);
        set_predicted_columns(row, pred);
        row.set("peak_mem_bytes", peak).set("state_bytes", states);
        row.set("model_mem_bytes", model_mem).set("model_state_bytes", model_states);
        row.set("loss", loss).set("tgs", tgs).set("mfu", mfu).set("peak_tflops", peak_tflops).set("feasible", 1);
        if (writer->has_row(kResumeKey, resume_key(strategy, plan, timed))) {
          // kept from the interrupted run
        } else if (auto w = writer->write_row(row.ordered()); !w) {
          std::fprintf(stderr, "lins step: %s\n", w.error().c_str());
          MPI_Abort(MPI_COMM_WORLD, 2);
        }
      }
      tr.step_s += step_max, tr.fwd_s += fwd, tr.bwd_s += bwd, tr.opt_s += opt, tr.exposed_s += exposed;
      tr.tgs += tgs, tr.mfu += mfu;
      tr.intra_bytes = axis[0], tr.inter_bytes = axis[1];
      tr.peak_bytes = std::max(tr.peak_bytes, peak);
      tr.state_bytes = states;
      tr.loss = loss;
      tr.bytes_match = tr.bytes_match && all_match > 0.5;
      ++tr.steps;
    }
    if (auto ok = agree_any(e.finish()); !ok) return fail(ok.error());
#if LINS_TRAIN_GPU
    if (gpu) {  // the pool and the device beyond the tracked allocations (cuBLAS workspace, NCCL, CUDA context)
      const GpuMemoryInfo gm = gpu_memory_info(*backend);
      const double reserved = all_max(double(gm.peak_reserved_bytes)), used = all_max(double(gm.device_used_bytes));
      if (rank == 0)
        std::printf(
            "      %s: device memory: peak allocated %s (memory model %s, ratio %.3f), pool peak %s, device in "
            "use %s of %s\n",
            strategy.c_str(), format_bytes(tr.peak_bytes).c_str(), format_bytes(model_mem).c_str(),
            model_mem > 0 ? tr.peak_bytes / model_mem : 0.0, format_bytes(reserved).c_str(), format_bytes(used).c_str(),
            format_bytes(double(gm.device_total_bytes)).c_str());
    }
#endif
    if (a.flag("trace")) {
      std::string stem;  // the strategy as a file name: "p=4x1,g=4x1,os=4x2" -> "p4x1_g4x1_os4x2"
      for (char c : strategy)
        if (std::isalnum(static_cast<unsigned char>(c)) || c == '-')
          stem += c;
        else if (c == ',' || c == ':')
          stem += '_';
      const std::string path =
          (std::filesystem::path(out_dir) / ("trace." + stem + ".rank" + std::to_string(rank) + ".json")).string();
      std::ofstream f(path);
      f << chrome_trace_json(e.trace(), rank, e.schedule().streams);
      if (!f) std::fprintf(stderr, "lins step: rank %d could not write %s\n", rank, path.c_str());
      const std::string timeline =
          (std::filesystem::path(out_dir) / ("timeline." + stem + ".rank" + std::to_string(rank) + ".csv")).string();
      if (auto w = write_file_atomic(timeline, action_log_csv(e.schedule(), e.model().spec(), e.actions())); !w)
        std::fprintf(stderr, "lins step: rank %d: %s\n", rank, w.error().c_str());
    }
    for (double* v : {&tr.step_s, &tr.fwd_s, &tr.bwd_s, &tr.opt_s, &tr.exposed_s, &tr.tgs, &tr.mfu})
      *v /= std::max(1, tr.steps);
    if (rank == 0) {
      std::printf(
          "      %s: %.3f s/step (forward %.3f, backward %.3f, optimizer %.3f, exposed comm %.3f), loss %.4f, "
          "%.0f tokens/s/rank, bytes %s the schedule\n",
          strategy.c_str(), tr.step_s, tr.fwd_s, tr.bwd_s, tr.opt_s, tr.exposed_s, tr.loss, tr.tgs,
          tr.bytes_match ? "equal" : "DIFFER FROM");
      std::fflush(stdout);
    }
    table.push_back(tr);
  }

  if (!collective_log.empty()) {
    const std::string all = gather_text(collective_rows, rank, world);
    Status written;
    if (rank == 0)
      written = write_file_atomic(collective_log,
                                  "system,strategy,rank,step,index,kind,group_size,elems,dtype,message_bytes\n" + all);
    if (auto s = agree(written, rank); !s) return fail(s.error());
  }
  if (rank == 0) {
    if (auto s = writer->finish(); !s) return fail(s.error());
    std::printf("\n%-12s %-20s %8s %8s %8s %8s %9s %10s %10s %10s %7s %10s %10s %8s %8s %6s\n", "strategy", "plan",
                "step_s", "fwd_s", "bwd_s", "exposed", "pred_comm", "intra", "inter", "peak_mem", "/model", "states",
                "model_st", "loss", "TGS", "MFU");
    for (const auto& r : table)
      std::printf("%-12s %-20s %8.3f %8.3f %8.3f %8.3f %9.4f %10s %10s %10s %7.3f %10s %10s %8.4f %8.0f %5.1f%%%s\n",
                  r.strategy.substr(0, 12).c_str(), r.plan.c_str(), r.step_s, r.fwd_s, r.bwd_s, r.exposed_s,
                  r.pred_comm_s, format_bytes(r.intra_bytes).c_str(), format_bytes(r.inter_bytes).c_str(),
                  format_bytes(r.peak_bytes).c_str(), r.model_mem_bytes > 0 ? r.peak_bytes / r.model_mem_bytes : 0.0,
                  format_bytes(r.state_bytes).c_str(), format_bytes(r.model_state_bytes).c_str(), r.loss, r.tgs,
                  100 * r.mfu, r.bytes_match ? "" : "  (measured bytes differ from the schedule)");
    std::printf(
        "(means over the timed steps; times are the slowest rank's; bytes are message bytes per rank per step; "
        "/model is peak_mem over the memory model's total; pred_comm is the cost model's %s pricing on %s)\n",
        pricing_name(*pricing),
        a.get("profile").empty() ? a.get("network").c_str() : ("profile " + a.get("profile")).c_str());
    std::printf("wrote %s\n", csv_path.c_str());
  }

  JsonObject run;
  run.set("command", "step").set("backend", backend_name);
  run.set("precision", dtype_name(precision)).set("compute", dtype_name(compute));
  run.set(
      "dtype",
      std::string(precision == DType::bf16 ? "bf16 P and G, fp32 master weights and Adam moments"
                                           : "fp32 P, G and optimizer states") +
          (compute == DType::bf16 ? "; bf16 activations, fp32 weight gradients" : "; fp32 activations") +
          (gpu ? (compute == DType::bf16 ? "; bf16 tensor-core kernels" : "; GEMMs and attention on bf16 tensor cores")
               : (compute == DType::bf16 ? "; bf16 emulated on the CPU (fp32 arithmetic, rounded outputs)" : "")));
  run.set("model", model->name);
  run.set("params", (long long)model->param_count()).set("topology", topo->to_string());
  run.set("gpus_per_node", topo->gpus_per_node).set("nodes", topo->nodes).set("seq", workload->seq);
  run.set("micro_batch_size", workload->micro_batch_size).set("micro_batches", workload->micro_batches);
  run.set("global_batch_tokens", (long long)workload->global_batch_tokens);
  run.set("recompute", workload->recompute).set("overlap", overlap_name(*overlap));
  run.set("warmup_steps", (long long)*warmup).set("timed_steps", *steps).set("seed", (long long)*seed);
  run.set("lr", *lr).set("bucket_bytes", (long long)*bucket).set("mpi_progress", mpi_progress_name(progress));
  run.set("peak_tflops", peak_tflops).set("peak_tflops_source", peak_source);
  run.set("network", a.get("network")).set("profile", a.get("profile")).set("pricing", pricing_name(*pricing));
  run.set("watchdog_timeout_s", *timeout).set("resumed", a.flag("resume"));
  JsonArray chosen;
  for (size_t i = 0; i < plans.size(); ++i) {
    JsonObject p;
    p.set("strategy", strategies[i]).set("plan", plans[i].to_string()).set("engine", engine_name(plans[i].engine));
    chosen.push(p);
  }
  run.set("strategies", chosen);
  std::vector<std::string> words = {"lins", "step"};
  words.insert(words.end(), args.begin(), args.end());
  if (auto p = write_provenance(MPI_COMM_WORLD, provenance_path_for(csv_path), words, run); !p) return fail(p.error());
  return finish_mpi(0);
}

}  // namespace lins
