// Running one strategy of `lins step`; see step_run.h.
#include "apps/step_run.h"

#include <mpi.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "apps/mpi_app.h"
#include "comm/gpu_plugin.h"
#include "comm/mesh_comms.h"
#include "comm/watchdog.h"
#include "core/output/results_schema.h"
#include "core/output/step_columns.h"
#include "core/projection/replay.h"
#include "core/util/json.h"
#include "core/util/trace.h"
#include "core/util/units.h"
#include "train/executor.h"

namespace lins {
namespace {

// One value reduced over every rank (the step's results); guarded, since a rank that never arrives would hang it.
double all_reduce_value(double v, MPI_Op op) {
  WatchdogScope watched("MPI_Allreduce of the step's results on group 'world'");
  double r = v;
  MPI_Allreduce(&v, &r, 1, MPI_DOUBLE, op, MPI_COMM_WORLD);
  return r;
}
// Every group role of the plan with its size and rank 0's mesh, for the progress line.
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
  WatchdogScope watched("MPI_Gather of the collective log on group 'world'");
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

// The columns that identify a row when a sweep resumes: the same strategy, backend, precision, workload, overlap and
// step index.
const std::vector<std::string> kResumeKey = {
    "strategy",         "model",         "backend",   "precision", "compute", "world_size", "gpus_per_node", "seq",
    "micro_batch_size", "micro_batches", "recompute", "overlap",   "step"};

// The key of a timed step's row, formatted exactly as the row writes it.
std::vector<std::string> resume_key(const StepRun& r, const std::string& strategy, const Plan& plan, int step) {
  StepRow row;
  set_run_columns(row, "measured", strategy, plan, r.o.workload, r.o.topo, kStepBackendNames.name(r.o.backend),
                  r.o.precision, r.o.compute, r.o.overlap);
  row.set("step", step);
  std::vector<std::string> key;
  for (const auto& c : kResumeKey) key.push_back(row.get(c));
  return key;
}

// Whether every timed step of this strategy is already in the file (rank 0 decides for all).
bool already_written(const StepRun& r, const std::string& strategy, const Plan& plan) {
  int done = 1;
  if (r.rank == 0)
    for (int t = 0; t < r.o.steps; ++t) done = done && r.writer->has_row(kResumeKey, resume_key(r, strategy, plan, t));
  MPI_Bcast(&done, 1, MPI_INT, 0, MPI_COMM_WORLD);
  return done != 0;
}

// The collectives of a step backend: MPI on host memory, NCCL on the device.
Backend collective_backend(StepBackend b) {
  switch (b) {
    case StepBackend::cpu:
      return Backend::mpi;
    case StepBackend::gpu:
      return Backend::nccl;
  }
  return Backend::mpi;
}

// What one strategy runs on, in the order it must be torn down in reverse: the backend outlives the communicator
// (whose NCCL streams are ordered after its compute stream), which outlives the executor.
struct StrategySetup {
  std::unique_ptr<ComputeBackend> backend;
  std::unique_ptr<Communicator> world_comm;
  std::unique_ptr<Executor> executor;
};

Result<StrategySetup> set_up_strategy(const StepRun& r, const Plan& plan) {
  const StepOptions& o = r.o;
  StrategySetup su;
  auto made = r.make_backend();
  LINS_TRY(agree_any(made ? Status() : Status(make_error(made.error()))));
  su.backend = std::move(*made);
  CommOptions co;
  co.mpi.progress = o.progress;
  co.compute_stream = su.backend->native_stream();
  auto world_comm = make_communicator(collective_backend(o.backend), MPI_COMM_WORLD, "world",
                                      o.topo.nodes > 1 ? Axis::inter : Axis::intra, co);
  LINS_TRY(agree_any(world_comm ? Status() : Status(make_error(world_comm.error()))));
  su.world_comm = std::move(*world_comm);
  ExecutorOptions eo;
  eo.engine = o.engine;
  eo.seq = o.workload.seq;
  eo.micro_batch_size = o.workload.micro_batch_size;
  eo.micro_batches = o.workload.micro_batches;
  eo.recompute = o.workload.recompute;
  eo.overlap = o.overlap;
  eo.bucket_bytes = int64_t(o.bucket);
  eo.seed = o.seed;
  eo.adamw.lr = float(o.lr);
  eo.trace = o.trace;
  eo.state_dtype = o.precision;
  eo.device_flops_per_s = o.device_tflops * 1e12;
  eo.device_bytes_per_s = o.device_gbps * 1e9;
  auto ex = Executor::create(o.model, plan, o.topo, r.rank, su.world_comm.get(), *su.backend, eo);
  LINS_TRY(agree_any(ex ? Status() : Status(make_error(ex.error()))));
  su.executor = std::move(*ex);
  return su;
}

// Per-rank predictions of the schedule, the cost model and the memory model; the CSV keeps the largest rank's.
struct Prediction {
  PredictedComm comm;
  double model_mem = 0, model_states = 0;
};

Prediction predict(const StepOptions& o, const Schedule& sched) {
  const MemoryEstimate mem =
      estimate_memory(sched, o.workload, executor_state_bytes(o.precision, o.compute), MemoryOf::schedule_rank);
  Prediction p;
  p.comm = predict_comm(sched, *o.cost, o.pricing);
  for (auto& b : p.comm.kind_bytes) b = all_max(b);
  for (auto& b : p.comm.axis_bytes) b = all_max(b);
  for (Term t : kTermNames.values()) p.comm.time.term_s(t) = all_max(p.comm.time.term_s(t));
  p.model_mem = all_max(mem.total_bytes);
  p.model_states = all_max(mem.state_bytes);
  return p;
}

// One timed step's figures over every rank: times are the slowest rank's, bytes the largest rank's.
struct StepFigures {
  double step_max = 0, step_min = 0, step_mean = 0, fwd = 0, bwd = 0, opt = 0, exposed = 0, loss = 0;
  double kind[kCollKindCount] = {}, axis[2] = {};
  double peak = 0, states = 0, tgs = 0, mfu = 0, mfu_causal = 0;
  double paced = 0, overruns = 0;  // tasks paced and tasks that overran their device time, summed over ranks
  double late = 0;                 // the host's late wakes from pacing, max over ranks
  bool match = true;               // every rank's bytes equal its schedule's
};

StepFigures reduce_step(const StepRun& r, const StepStats& st, Executor& e) {
  const Schedule& sched = e.schedule();
  StepFigures f;
  f.step_max = all_max(st.step_s), f.step_min = all_min(st.step_s);
  f.step_mean = all_sum(st.step_s) / r.world;
  f.fwd = all_max(st.forward_s), f.bwd = all_max(st.backward_s), f.opt = all_max(st.optimizer_s);
  f.exposed = all_max(st.exposed_comm_s);
  f.loss = all_sum(st.loss_sum) / double(e.global_tokens());
  bool match = true;
  for (int k = 0; k < kCollKindCount; ++k) {
    f.kind[k] = all_max(st.bytes_of_kind(CollKind(k)));
    for (int x = 0; x < 2; ++x) match = match && st.bytes[k][x] == sched.message_bytes(CollKind(k), Axis(x));
  }
  f.axis[0] = all_max(st.bytes_of_axis(Axis::intra));
  f.axis[1] = all_max(st.bytes_of_axis(Axis::inter));
  f.match = all_min(match ? 1.0 : 0.0) > 0.5;
  f.peak = all_max(double(st.peak_mem_bytes)), f.states = all_max(double(st.state_bytes));
  f.tgs = double(e.global_tokens()) / r.world / f.step_max;
  f.mfu = r.mfu_flops_per_token * f.tgs / (r.peak.tflops * 1e12);
  f.mfu_causal = r.mfu_causal_flops_per_token * f.tgs / (r.peak.tflops * 1e12);
  f.paced = all_sum(double(st.paced_tasks));
  f.overruns = all_sum(double(st.overrun_tasks));
  f.late = all_max(st.pace_late_s);
  return f;
}

// Rank 0: the timed step's CSV row, unless an interrupted run already wrote it.
void write_step_row(const StepRun& r, const std::string& strategy, const Plan& plan, int timed, const StepFigures& f,
                    const Prediction& pred) {
  StepRow row;
  set_run_columns(row, "measured", strategy, plan, r.o.workload, r.o.topo, kStepBackendNames.name(r.o.backend),
                  r.o.precision, r.o.compute, r.o.overlap);
  row.set("step", timed).set("fabric", r.fabric);
  row.set("step_time_s", f.step_max).set("step_time_min_s", f.step_min).set("step_time_mean_s", f.step_mean);
  row.set("forward_s", f.fwd).set("backward_s", f.bwd).set("optimizer_s", f.opt).set("exposed_comm_s", f.exposed);
  for (CollKind k : kCollKindNames.values()) row.set(std::string(coll_kind_name(k)) + "_bytes", f.kind[int(k)]);
  row.set("intra_bytes", f.axis[0]).set("inter_bytes", f.axis[1]);
  set_predicted_columns(row, pred.comm);
  row.set("peak_mem_bytes", f.peak).set("state_bytes", f.states);
  row.set("model_mem_bytes", pred.model_mem).set("model_state_bytes", pred.model_states);
  row.set("loss", f.loss).set("tgs", f.tgs).set("mfu", f.mfu).set("peak_tflops", r.peak.tflops).set("feasible", 1);
  row.set("mfu_causal", f.mfu_causal).set("peak_source", r.peak.kind).set("gemm_tflops", r.peak.gemm_tflops);
  if (r.o.paced()) row.set("overrun_tasks", f.overruns);
  if (r.writer->has_row(kResumeKey, resume_key(r, strategy, plan, timed))) return;  // kept from the interrupted run
  if (auto w = r.writer->write_row(row.ordered()); !w) {
    std::fprintf(stderr, "lins step: %s\n", w.error().c_str());
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
}

// --collective-log: this rank's collectives of one timed step, in issue order.
void log_collectives(StepRun& r, const std::string& strategy, int timed, Executor& e) {
  int index = 0;
  for (int i : e.issued()) {
    const CommOp& op = e.schedule().ops[static_cast<std::size_t>(i)];
    r.collective_rows += "lins," + strategy_csv_field(strategy) + "," + std::to_string(r.rank) + "," +
                         std::to_string(timed) + "," + std::to_string(index++) + "," + coll_kind_name(op.kind) + "," +
                         std::to_string(op.group.size()) + "," + std::to_string(op.elems) + "," + dtype_name(op.dtype) +
                         "," + std::to_string(op.bytes()) + "\n";
  }
}

void add_to_table(TableRow& tr, const StepFigures& f) {
  tr.step_s += f.step_max, tr.fwd_s += f.fwd, tr.bwd_s += f.bwd, tr.opt_s += f.opt, tr.exposed_s += f.exposed;
  tr.tgs += f.tgs, tr.mfu += f.mfu;
  tr.intra_bytes = f.axis[0], tr.inter_bytes = f.axis[1];
  tr.peak_bytes = std::max(tr.peak_bytes, f.peak);
  tr.state_bytes = f.states;
  tr.loss = f.loss;
  tr.bytes_match = tr.bytes_match && f.match;
  tr.paced_tasks += static_cast<long long>(f.paced), tr.overrun_tasks += static_cast<long long>(f.overruns);
  tr.pace_late_s += f.late;
  ++tr.steps;
}

// Warm-up, then the timed steps: each one's figures, row and collective log.
Status run_steps(StepRun& r, const std::string& strategy, const Plan& plan, Executor& e, const Prediction& pred,
                 TableRow& tr) {
  const int warmup = int(r.o.warmup), total_steps = warmup + r.o.steps;
  for (int s = 0; s < total_steps; ++s) {
    auto st = e.step();
    if (auto ok = agree_any(st ? Status() : Status(make_error(st.error()))); !ok) return ok;
    if (s < warmup) continue;
    const int timed = s - warmup;
    if (!r.o.collective_log.empty()) log_collectives(r, strategy, timed, e);
    const StepFigures f = reduce_step(r, *st, e);
    if (r.rank == 0) write_step_row(r, strategy, plan, timed, f, pred);
    add_to_table(tr, f);
  }
  return Status::ok_status();
}

// The pool and the device beyond the tracked allocations (cuBLAS workspace, NCCL, CUDA context).
void print_device_memory(const StepRun& r, const std::string& strategy, ComputeBackend& backend, const TableRow& tr) {
  const GpuPlugin* gpu = loaded_gpu_plugin();  // loaded: the GPU backend came from it
  const GpuMemoryInfo gm = gpu ? gpu->memory_info(backend) : GpuMemoryInfo{};
  const double reserved = all_max(double(gm.peak_reserved_bytes)), used = all_max(double(gm.device_used_bytes));
  if (r.rank == 0)
    std::printf(
        "      %s: device memory: peak allocated %s (memory model %s, ratio %.3f), pool peak %s, device in "
        "use %s of %s\n",
        strategy.c_str(), format_bytes(tr.peak_bytes).c_str(), format_bytes(tr.model_mem_bytes).c_str(),
        tr.model_mem_bytes > 0 ? tr.peak_bytes / tr.model_mem_bytes : 0.0, format_bytes(reserved).c_str(),
        format_bytes(used).c_str(), format_bytes(double(gm.device_total_bytes)).c_str());
}

// --trace: this rank's Chrome trace and action log of the last timed step.
void write_traces(const StepRun& r, const std::string& strategy, Executor& e) {
  std::string stem;  // the strategy as a file name: "p=4x1,g=4x1,os=4x2" -> "p4x1_g4x1_os4x2"
  for (char c : strategy)
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '-')
      stem += c;
    else if (c == ',' || c == ':')
      stem += '_';
  const std::string rank = std::to_string(r.rank);
  const std::string path = (std::filesystem::path(r.o.out_dir) / ("trace." + stem + ".rank" + rank + ".json")).string();
  std::ofstream f(path);
  f << chrome_trace_json(e.trace(), r.rank, e.schedule().streams);
  if (!f) std::fprintf(stderr, "lins step: rank %d could not write %s\n", r.rank, path.c_str());
  const std::string timeline =
      (std::filesystem::path(r.o.out_dir) / ("timeline." + stem + ".rank" + rank + ".csv")).string();
  if (auto w = write_file_atomic(timeline, action_log_csv(e.schedule(), e.model().spec(), e.actions())); !w)
    std::fprintf(stderr, "lins step: rank %d: %s\n", r.rank, w.error().c_str());
}

void print_strategy_line(const StepOptions& o, const TableRow& tr) {
  std::printf(
      "      %s: %.3f s/step (forward %.3f, backward %.3f, optimizer %.3f, exposed comm %.3f), loss %.4f, "
      "%.0f tokens/s/rank, bytes %s the schedule\n",
      tr.strategy.c_str(), tr.step_s, tr.fwd_s, tr.bwd_s, tr.opt_s, tr.exposed_s, tr.loss, tr.tgs,
      tr.bytes_match ? "equal" : "DIFFER FROM");
  if (o.paced())
    std::printf(
        "      %s: paced to the device: %lld of %lld tasks (all ranks, timed steps) overran their device time%s; "
        "the host woke %.1f ms per step late from its sleeps (max over ranks)\n",
        tr.strategy.c_str(), tr.overrun_tasks, tr.paced_tasks,
        tr.overrun_tasks > 0 ? " (their compute is their real time, above the device's)" : "", 1e3 * tr.pace_late_s);
  std::fflush(stdout);
}

}  // namespace

double all_max(double v) { return all_reduce_value(v, MPI_MAX); }
double all_min(double v) { return all_reduce_value(v, MPI_MIN); }
double all_sum(double v) { return all_reduce_value(v, MPI_SUM); }

// One strategy: set up, run the warm-up and timed steps, write its rows and traces. nullopt when its rows are kept
// from an earlier run.
Result<std::optional<TableRow>> run_strategy(StepRun& r, const std::string& strategy, const Plan& plan,
                                             std::size_t index, std::size_t count) {
  if (already_written(r, strategy, plan)) {
    if (r.rank == 0)
      std::printf("[%zu/%zu] %s: its %d rows are kept from the earlier run\n", index + 1, count, strategy.c_str(),
                  r.o.steps);
    return std::optional<TableRow>();
  }
  if (r.rank == 0) {
    std::printf("[%zu/%zu] %s %s on the %s engine; groups: %s\n", index + 1, count, strategy.c_str(),
                plan.tuple_string().c_str(), engine_name(plan.engine), group_summary(plan, r.o.topo).c_str());
    std::fflush(stdout);
  }
  LINS_ASSIGN_OR_RETURN(auto su, set_up_strategy(r, plan));
  Executor& e = *su.executor;
  const Prediction pred = predict(r.o, e.schedule());
  TableRow tr;
  tr.strategy = strategy;
  tr.plan = plan.tuple_string();
  tr.pred_comm_s = pred.comm.time.total_s();
  tr.model_state_bytes = pred.model_states;
  tr.model_mem_bytes = pred.model_mem;
  LINS_TRY(run_steps(r, strategy, plan, e, pred, tr));
  LINS_TRY(agree_any(e.finish()));
  if (r.o.backend == StepBackend::gpu) print_device_memory(r, strategy, *su.backend, tr);
  if (r.o.trace) write_traces(r, strategy, e);
  for (double* v : {&tr.step_s, &tr.fwd_s, &tr.bwd_s, &tr.opt_s, &tr.exposed_s, &tr.tgs, &tr.mfu, &tr.pace_late_s})
    *v /= std::max(1, tr.steps);
  if (r.rank == 0) print_strategy_line(r.o, tr);
  return std::optional<TableRow>(tr);
}

// --collective-log: every rank's rows, written by rank 0.
Status write_collective_log(const StepRun& r) {
  const std::string all = gather_text(r.collective_rows, r.rank, r.world);
  Status written;
  if (r.rank == 0)
    written = write_file_atomic(r.o.collective_log,
                                "system,strategy,rank,step,index,kind,group_size,elems,dtype,message_bytes\n" + all);
  return agree(written, r.rank);
}

}  // namespace lins
