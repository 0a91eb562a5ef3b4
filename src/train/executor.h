// The executor: runs one plan's Schedule (and nothing else) with real data on a compute backend and one
// communicator per group role. Every rank issues the schedule's collectives in list order; each op is issued as
// soon as its inputs exist and the overlap mode allows (forward gathers up to one layer ahead, backward gathers
// one module ahead where the list order permits), and waited for only where its result is needed:
//   forward all-gather (p_shard)        -> before that module's forward
//   backward all-gather (p_shard / hpz) -> before that module's backward (and its recomputation)
//   reduce-scatter of P gradients       -> decoupled; waited by the bucket or MiCS all-reduce that reads it, else at
//                                          the end of the micro-batch's backward
//   ZeRO-1/2 reduce-scatter (os_shard)  -> end of the micro-batch's backward
//   bucket all-reduce (T_g, T_os0)      -> end of the micro-batch's backward (select & drop then keeps the owned
//                                          part); MiCS's cross-group all-reduce likewise
//   ZeRO-1/2 all-gather after the step  -> at once (the baseline's behaviour)
//   Lins broadcast of module m          -> before module m's forward all-gather (or forward) of the NEXT step
// Overlap::no_bcast waits for the broadcasts at the end of the step; no_allreduce also waits for each all-reduce
// right after issuing it; none issues every op where it is needed and waits at once. The order of issue is the same
// in every mode.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "core/model_spec.h"
#include "core/overlap.h"
#include "core/plan.h"
#include "core/schedule.h"
#include "core/topology.h"
#include "train/backend.h"
#include "train/data.h"
#include "train/llama.h"

namespace lins {

struct ExecutorOptions {
  int seq = 64;
  int micro_batch_size = 1;
  int micro_batches = 1;  // M
  bool recompute = false;
  Overlap overlap = Overlap::all;
  int64_t bucket_bytes = 25ll << 20;
  uint64_t seed = 1;  // initial weights and data
  kernels::cpu::AdamWConfig adamw{};
  bool trace = false;  // keep Chrome-trace events of every step
  // Storage of P and G (and so of every collective's payload): fp32, or bf16 for the paper's mixed precision (bf16 P
  // and G, fp32 master weights and Adam moments: 16 bytes of states per parameter). Compute stays fp32: a module's
  // bf16 parameters are widened into an fp32 working copy before its forward or backward, and its fp32 gradient is
  // rounded into bf16 where it is stored or reduced.
  DType state_dtype = DType::fp32;
};

// One communicator per GroupRole (index = int(role)); may be null for a role whose group is one rank.
using RoleComms = std::array<Communicator*, kGroupRoleCount>;

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
  int64_t peak_mem_bytes = 0;  // high-water mark of the backend's allocations since the executor started
  int64_t state_bytes = 0;     // P + G + OS allocated
};

struct TraceEvent {
  std::string name, cat;
  double start_s = 0, dur_s = 0;
  int lane = 0;  // 0 compute, 1 waits, 2 collectives in flight
};

class Executor {
 public:
  static Result<std::unique_ptr<Executor>> create(const ModelSpec& model, const Plan& plan, const Topology& topo,
                                                  int rank, const RoleComms& comms, ComputeBackend& backend,
                                                  const ExecutorOptions& options);
  ~Executor();

  // One optimizer step over the global batch (world * M * micro-batch sequences).
  Result<StepStats> step();
  // Waits for collectives still in flight (the broadcasts overlapping the next forward); parameters are then final.
  Status finish();

  const Schedule& schedule() const { return sched_; }
  const ShardLayout& layout() const { return sched_.layout; }
  const LlamaModel& model() const { return *model_; }
  // This rank's local parameter buffer (the 1/s_p slice of every module, or the whole model), on the host.
  std::vector<float> local_parameters() const;
  // Trace events of the last step (when options.trace).
  const std::vector<TraceEvent>& trace() const { return trace_; }
  int64_t global_tokens() const;

 private:
  Executor() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
  Schedule sched_;
  std::unique_ptr<LlamaModel> model_;
  std::vector<TraceEvent> trace_;
};

// Chrome trace JSON ("traceEvents", microseconds) of one rank's events; pid = rank.
std::string chrome_trace_json(const std::vector<TraceEvent>& events, int rank);

}  // namespace lins
