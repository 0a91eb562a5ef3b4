// Projects one training step of an expanded Schedule onto clusters we do not have: the step's program (timeline.h),
// the very sequence of issues and waits the executor performs, timed with compute from each module's FLOPs at a
// sustained rate and each collective from a price (the cost model), every op on its own communication stream.
#pragma once

#include <functional>
#include <vector>

#include "core/cost/compute_model.h"  // ComputeRates
#include "core/cost/contention.h"
#include "core/cost/host_model.h"
#include "core/model/model_spec.h"
#include "core/schedule/schedule.h"
#include "core/schedule/timeline.h"
#include "core/util/trace.h"

namespace lins {

struct StepProjection {
  double step_s = 0;
  double forward_s = 0;   // compute only
  double backward_s = 0;  // compute only (recomputation included)
  double optimizer_s = 0;
  double fixed_s = 0;         // ComputeRates::fixed_step_s, added to the step
  double exposed_comm_s = 0;  // time compute stood still waiting for collectives
  // With a host model: the host's own work (core/host_model.h) and the time the device stood idle for the host
  // (launches late because the host fell behind, or could not run ahead past a host synchronisation).
  double host_work_s = 0;
  double host_stall_s = 0;
  // Contention (core/cost/contention.h): compute time lost beside collectives (forward_s, backward_s and optimizer_s
  // are the tasks alone; this is on top of them), and collectives' time lost beside compute and each other, in all and
  // by purpose (part of comm_busy_s; it reaches the step only where compute waits for it).
  double contention_compute_s = 0;
  double contention_comm_s = 0;
  double contention_purpose_s[kPurposeCount] = {};
  double comm_busy_s = 0;             // sum of collective durations
  std::vector<double> stream_busy_s;  // per stream of the schedule
  // exposed_comm_s split by the collective compute waited for: its kind or its purpose, and its axis.
  double exposed_kind_axis_s[kCollKindCount][2] = {};
  double exposed_purpose_axis_s[kPurposeCount][2] = {};
  double compute_s() const { return forward_s + backward_s + optimizer_s; }  // alone, without contention
  double exposed_s(CollKind k) const { return exposed_kind_axis_s[int(k)][0] + exposed_kind_axis_s[int(k)][1]; }
};

// Forward FLOPs of one module for `tokens` tokens of sequence length `seq` (Megatron counting: weight matmuls 2 per
// parameter per token, attention 4*seq*h per token for QK^T and AV, the causal mask not halving it).
double module_forward_flops(const ModelSpec& model, int module, double tokens, int seq);

// The forward FLOPs a module's backward re-runs under recomputation `r`: full, the module's whole forward (priced for
// every module, the head's included, as it always was; the executor keeps the head's logits, so this overcounts by
// the head's forward); selective, the attention core's forward alone in an attn
// module (its score and value products, 4*seq*h per token: ModelSpec::recompute_flops_per_token); none, nothing.
double module_recompute_flops(const ModelSpec& model, int module, double tokens, int seq, Recompute r);

// Seconds of each compute task of `s` (backward = 2x forward plus what recomputation re-runs,
// module_recompute_flops; the optimizer reads and writes fp32 master, m and v and reads the gradient and writes the
// parameter of every owned element).
std::vector<double> compute_task_seconds(const Schedule& s, const ModelSpec& model, int seq, int micro_batch_size,
                                         Recompute recompute, const ComputeRates& rates);

// `schedule` must be expanded (one copy per micro-batch). `op_seconds` prices one collective. `trace`, when given,
// receives the projected step as trace events (compute, waits, each stream's collectives).
StepProjection project_step(const Schedule& schedule, const ModelSpec& model, int seq, int micro_batch_size,
                            Recompute recompute, const ComputeRates& rates,
                            const std::function<double(const CommOp&)>& op_seconds,
                            std::vector<TraceEvent>* trace = nullptr, const HostModel* host = nullptr);
// The same with every op's seconds given (op_s[i] for s.ops[i]). `host`, when given, gives the step a host of its
// own (host_model.h): its work runs ahead of the device, its synchronisations wait for it. `contention`, when given
// and not free, slows what runs side by side; `op_latency_s` (op_s's part that does not stretch) may then be given.
StepProjection project_step(const Schedule& schedule, const ModelSpec& model, int seq, int micro_batch_size,
                            Recompute recompute, const ComputeRates& rates, const std::vector<double>& op_s,
                            std::vector<TraceEvent>* trace = nullptr, const HostModel* host = nullptr,
                            const Contention* contention = nullptr, const std::vector<double>* op_latency_s = nullptr);

// A compute task's class for contention: the optimizer and the embedding (a gather) are memory-bound, the rest GEMMs.
TaskClass task_class(const Schedule& s, const ModelSpec& model, int task);

// Trace events of a timed program: compute (as it ran: r.task_s) and waits from the cursor, collectives from their
// stream times, and with a host of its own (`host` given) its work on the host lane.
std::vector<TraceEvent> timeline_trace(const Schedule& s, const ModelSpec& model, const std::vector<Action>& program,
                                       const TimelineResult& r, const HostProgram* host = nullptr);

}  // namespace lins
