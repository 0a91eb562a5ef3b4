// `lins rate`: the compute rate every rank sustains while every rank computes at once, as an emulated device must not
// outrun it (lins step --device-rate). Each rank trains the model alone (one-rank DDP, no collectives) for a few
// seconds, all starting together, and reports its tasks' FLOPs (the simulator's count) and optimizer bytes per second.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "apps/commands.h"
#include "apps/mpi_app.h"
#include "core/projection/simulator.h"
#include "core/schedule/workload.h"
#include "core/util/cli.h"
#include "core/util/stats.h"
#include "train/backend.h"
#include "train/executor.h"

namespace lins {
namespace {

CommandSpec rate_spec() {
  CommandSpec spec;
  spec.name = "rate";
  spec.summary =
      "Measure the compute rate each rank sustains while every rank computes at once (the ceiling of "
      "lins step --device-rate).";
  spec.usage = "mpirun -np N lins rate [options]";
  spec.options = concat_options(model_options("small"), workload_options("128", "1", ""));
  spec.options = concat_options(spec.options, {
                                                  {"seconds", 0, "SECONDS", "3", "how long every rank computes"},
                                              });
  spec.epilog =
      "Prints each rank's rate of the forward and backward tasks (FLOPs as lins simulate and --device-rate count "
      "them, over the time the tasks took) and of the optimizer (its bytes), then their minimum, median and maximum, "
      "and last one line `tasks_tflops_min=X optimizer_gbps_min=Y` for scripts (scripts/cluster.sh up reads it).\n";
  return spec;
}

}  // namespace

int run_rate(const Args& args) {
  const MpiRun mpi = init_mpi();
  const int rank = mpi.rank, world = mpi.world;
  auto fail = [&](const std::string& msg) { return fail_mpi(rank, "lins rate", msg); };
  ParsedArgs a;
  if (auto code = parse_mpi_args(rate_spec(), args, rank, &a)) return *code;
  auto model = parse_model(a);
  if (!model) return fail(model.error());
  const Topology one{1, 1};
  auto workload = parse_workload(a, *model, one);
  if (!workload) return fail(workload.error());
  auto seconds = a.get_double("seconds");
  if (!seconds) return fail(seconds.error());
  if (!(*seconds > 0) || *seconds > 600) return fail("--seconds must be above 0 and at most 600");

  ExecutorOptions eo;
  eo.seq = workload->seq;
  eo.micro_batch_size = workload->micro_batch_size;
  eo.micro_batches = workload->micro_batches;
  eo.recompute = workload->recompute;
  eo.state_dtype = DType::bf16;  // lins step's default storage: the same converts around each task
  auto be = make_cpu_backend();
  auto plan = parse_plan("ddp", one);
  if (!plan) return fail(plan.error());
  auto ex = Executor::create(*model, *plan, one, 0, nullptr, *be, eo);
  if (auto s = agree_any(ex ? Status() : Status(make_error(ex.error()))); !s) return fail(s.error());
  Executor& e = **ex;
  // One step's work: FLOPs of the forward and backward tasks, bytes of the optimizer (rates of 1 give the work).
  const std::vector<double> work = compute_task_seconds(e.schedule(), *model, eo.seq, eo.micro_batch_size, eo.recompute,
                                                        ComputeRates{1.0, 1.0, 0.0, nullptr});
  double flops = 0, bytes = 0;
  for (std::size_t t = 0; t < work.size(); ++t)
    (e.schedule().shape.task(int(t)).kind == TaskKind::optimizer ? bytes : flops) += work[t];

  if (auto st = e.step(); !st) return fail(st.error());  // warm-up: first touches, the allocator
  MPI_Barrier(MPI_COMM_WORLD);
  const auto t0 = std::chrono::steady_clock::now();
  double task_s = 0, optimizer_s = 0;
  int steps = 0;
  do {
    auto st = e.step();
    if (!st) return fail(st.error());
    task_s += st->forward_s + st->backward_s;
    optimizer_s += st->optimizer_s;
    ++steps;
  } while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < *seconds);
  const double mine[2] = {flops * steps / task_s / 1e12, bytes * steps / optimizer_s / 1e9};
  std::vector<double> all(2 * std::size_t(world));
  MPI_Gather(mine, 2, MPI_DOUBLE, all.data(), 2, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    std::vector<double> tflops, gbps;
    for (int r = 0; r < world; ++r) tflops.push_back(all[2 * r]), gbps.push_back(all[2 * r + 1]);
    std::printf(
        "lins rate: %d ranks computing at once for %.1f s, model %s, seq %d, micro-batch %d, M %d "
        "(%.4g GFLOP and %.4g MB of optimizer per step)\n",
        world, *seconds, model->name.c_str(), eo.seq, eo.micro_batch_size, eo.micro_batches, flops / 1e9, bytes / 1e6);
    for (int r = 0; r < world; ++r)
      std::printf("  rank %d: tasks %.5f TFLOP/s, optimizer %.3f GB/s\n", r, tflops[std::size_t(r)],
                  gbps[std::size_t(r)]);
    std::printf("  tasks TFLOP/s: min %.5f, median %.5f, max %.5f; optimizer GB/s: min %.3f, median %.3f, max %.3f\n",
                *std::min_element(tflops.begin(), tflops.end()), median(tflops),
                *std::max_element(tflops.begin(), tflops.end()), *std::min_element(gbps.begin(), gbps.end()),
                median(gbps), *std::max_element(gbps.begin(), gbps.end()));
    std::printf("tasks_tflops_min=%.6g optimizer_gbps_min=%.6g\n", *std::min_element(tflops.begin(), tflops.end()),
                *std::min_element(gbps.begin(), gbps.end()));
    std::fflush(stdout);
  }
  return finish_mpi(0);
}

}  // namespace lins
