// Projects one training step of a Schedule onto a time line: compute from each module's FLOPs at a sustained rate,
// collectives from a price per op (the cost model), and overlap by the executor's rules (PAPER.md section 6):
// forward gathers prefetched one layer ahead, backward gathers one module ahead, reduce-scatters decoupled, bucket
// all-reduces asynchronous, the parameter broadcast under the next forward (each module waits for its own), all
// switchable by Overlap (Table V). One communication stream: collectives run one after another in schedule order.
#pragma once

#include <functional>

#include "core/model_spec.h"
#include "core/overlap.h"
#include "core/schedule.h"

namespace lins {

struct ComputeRates {
  double sustained_flops_per_s = 0;  // GEMM-dominated forward/backward rate
  double optimizer_bytes_per_s = 0;  // memory rate of the AdamW update (memory bound)
};

struct StepProjection {
  double step_s = 0;
  double forward_s = 0;   // compute only
  double backward_s = 0;  // compute only (recomputation included)
  double optimizer_s = 0;
  double exposed_comm_s = 0;  // step time not covered by compute
  double comm_busy_s = 0;     // sum of collective durations
};

// Forward FLOPs of one module for `tokens` tokens of sequence length `seq` (Megatron counting: weight matmuls 2 per
// parameter per token, attention 4*seq*h per token for QK^T and AV, the causal mask not halving it).
double module_forward_flops(const ModelSpec& model, int module, double tokens, int seq);

// `schedule` must be expanded (one copy per micro-batch). `op_seconds` prices one collective. Bytes per owned
// optimizer element for the update: fp32 master, m, v read and written, bf16 gradient read and parameter written.
StepProjection project_step(const Schedule& schedule, const ModelSpec& model, int seq, int micro_batch_size,
                            bool recompute, Overlap overlap, const ComputeRates& rates,
                            const std::function<double(const CommOp&)>& op_seconds);

}  // namespace lins
