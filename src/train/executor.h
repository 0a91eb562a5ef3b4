// The executor: runs one plan's Schedule with real data on a compute backend. It performs the step's program
// (core/timeline.h) action by action: compute a module's forward or backward (or the optimizer), issue a collective
// on its communication stream, wait for one. Where each op is issued and waited for comes from the engine that built
// the schedule (core/engines.h), never from the executor: the simulator and the trace replay time the same program.
//
// What each op purpose does with the step's buffers is its rules (core/purposes.h, shared with the memory model): what
// it reads, what it holds from its issue, what happens at its issue and its completion. The executor supplies only
// the buffer mechanics of those rules (executor_ops.cpp, one block per kind of issue): which buffer a gather fills,
// where a reduce-scatter's slice lands, what its stream does after an all-reduce (select & drop, accumulate into G),
// how a broadcast is packed and unpacked. Work around a collective runs on the collective's own stream
// (Communicator::then); an op that reads another stream's result makes its stream wait for it
// (Communicator::stream_wait); compute waits only at the schedule's wait points.
//
// To support a new op purpose: add it to Purpose (core/schedule.h) and give it a case in purpose_rule
// (core/purposes.cpp); only if its rules name an issue or a completion no purpose had, add that block here
// (Impl::issue, Impl::land in executor_ops.cpp). The step equivalence test (tests/mpi/train) then holds every engine
// that uses it to one-rank DDP, and its buffers to the memory model.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "core/model/model_spec.h"
#include "core/model/plan.h"
#include "core/model/topology.h"
#include "core/schedule/overlap.h"
#include "core/schedule/schedule.h"
#include "core/schedule/timeline.h"
#include "core/util/trace.h"
#include "train/backend.h"
#include "train/data.h"
#include "train/llama.h"

namespace lins {

struct ExecutorOptions {
  int seq = 64;
  int micro_batch_size = 1;
  int micro_batches = 1;  // M
  Recompute recompute = Recompute::none;  // activation recomputation (core/schedule/workload.h)
  Overlap overlap = Overlap::all;
  int64_t bucket_bytes = 25ll << 20;
  EngineOptions engine;  // the engines' settings (bucket_bytes above wins over engine.bucket_bytes)
  uint64_t seed = 1;     // initial weights and data
  kernels::cpu::AdamWConfig adamw{};
  bool trace = false;  // keep Chrome-trace events and the action log of every step
  // Storage of P and G (and so of every collective's payload): fp32, or bf16 for the paper's mixed precision (bf16 P
  // and G, fp32 master weights and Adam moments: 16 bytes of states per parameter). A module's parameters are widened
  // into a working copy in the backend's compute dtype before its forward or backward when that differs, and its fp32
  // weight gradient is rounded into the storage dtype where it is stored or reduced.
  DType state_dtype = DType::fp32;
  // An emulated device of a fixed rate (lins step --device-rate): each compute task runs, then sleeps until its FLOPs
  // at device_flops_per_s (the optimizer: its bytes at device_bytes_per_s) have elapsed since it started, so its
  // measured compute is the device's time whatever share of a core the rank got meanwhile (unless its work took
  // longer: an overrun, measured at its real time). Sleeping, not spinning,
  // leaves the core to other ranks' communication, as a GPU's copy engines leave the SMs. 0: that kind unpaced.
  double device_flops_per_s = 0;
  double device_bytes_per_s = 0;
};

// What one rank measured in one step.
struct StepStats {
  int step = 0;
  double step_s = 0;  // wall time of the step on the host (after the compute stream drained)
  // Compute of each section, summed from backend events around each module's kernels (and the optimizer's).
  double forward_s = 0, backward_s = 0, optimizer_s = 0;
  // Exposed communication. On a synchronous backend (CPU), the time the host was blocked waiting for collectives; on
  // an asynchronous one (GPU: a wait only makes the compute stream wait), the compute stream's time between events
  // recorded just before and just after each wait.
  double exposed_comm_s = 0;
  double loss_sum = 0;  // summed token loss of this rank's micro-batches
  int64_t tokens = 0;   // this rank's tokens
  // Message bytes counted by the communicators: [kind][axis] (axis 0 intra, 1 inter).
  std::array<std::array<double, 2>, kCollKindCount> bytes{};
  double bytes_of_kind(CollKind k) const { return bytes[int(k)][0] + bytes[int(k)][1]; }
  double bytes_of_axis(Axis a) const;
  int64_t peak_mem_bytes = 0;     // high-water mark of the backend's allocations since the executor started
  int64_t state_bytes = 0;        // P + G + OS allocated
  int64_t buffer_peak_bytes = 0;  // high-water mark of the executor's buffers (gathers, gradients in flight, payloads)
  // With a device rate (ExecutorOptions::device_*): the tasks paced (those with a device time), and those whose real
  // compute took longer than their device time (overruns: measured at their real time, not the device's).
  int paced_tasks = 0;
  int overrun_tasks = 0;
  // How late the host woke from its sleeps after the device's ends, summed: the emulation's own error (the scheduler
  // gave the core to another rank), in the step's time but not in its compute.
  double pace_late_s = 0;
};

class Executor {
 public:
  // `world` spans every rank of `topo` in order (null on one rank); the executor splits it into one communicator per
  // (group role, stream) its schedule uses. Collective over `world`.
  static Result<std::unique_ptr<Executor>> create(const ModelSpec& model, const Plan& plan, const Topology& topo,
                                                  int rank, Communicator* world, ComputeBackend& backend,
                                                  const ExecutorOptions& options);
  ~Executor();

  // One optimizer step over the global batch (world * M * micro-batch sequences).
  Result<StepStats> step();
  // Waits for collectives still in flight (the broadcasts overlapping the next forward); parameters are then final.
  Status finish();

  const Schedule& schedule() const { return sched_; }
  const ShardLayout& layout() const { return sched_.layout; }
  const LlamaModel& model() const { return *model_; }
  const std::vector<Action>& program() const;
  // This rank's local parameter buffer (the 1/s_p slice of every module, or the whole model), on the host.
  std::vector<float> local_parameters() const;
  // Trace events and the action log of the last step (when options.trace).
  const std::vector<TraceEvent>& trace() const { return trace_; }
  const std::vector<ActionRecord>& actions() const { return actions_; }
  // The ops of the last step in the order they were issued (indices into schedule().ops).
  const std::vector<int>& issued() const { return issued_; }
  // Every collective the last step handed to a communicator and every wait the host made for one, in the order they
  // happened (Action::Kind::issue or wait; carried = a wait for the previous step's op). The step's program says what
  // they should be; the timeline-order test holds the executor to it.
  const std::vector<Action>& comm_events() const { return comm_events_; }
  int64_t global_tokens() const;

 private:
  Executor() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
  Schedule sched_;
  std::unique_ptr<LlamaModel> model_;
  std::vector<TraceEvent> trace_;
  std::vector<ActionRecord> actions_;
  std::vector<int> issued_;
  std::vector<Action> comm_events_;
};

}  // namespace lins
