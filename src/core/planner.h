// The planner, as the paper's search over sharding plans: every legal 6-tuple (sharding factors of P, G and OS inside
// and across nodes; and, if asked, the baselines' presets) is built into the same Schedule the executor runs, priced
// by the cost model, sized by the memory model plus the reserve a GPU run loses, and ranked by predicted
// communication time among the plans that fit in GPU memory; each plan says why it lost.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/cost_model.h"
#include "core/memory_model.h"
#include "core/plan.h"
#include "core/schedule.h"
#include "core/workload.h"

namespace lins {

struct PlannerOptions {
  double gpu_mem_bytes = 80.0 * (1ull << 30);  // the memory limit per GPU
  int64_t bucket_bytes = 25ll << 20;           // U
  DType dtype = DType::bf16;                   // P and G on the wire
  StateBytes state_bytes;                      // bytes per parameter of P, G, OS
  MemoryReserve reserve;                       // what a GPU run loses beyond the tensors; must fit too
  Pricing rank_by = Pricing::paper_isolated;   // which pricing orders the plans
  bool include_legal = true;                   // every legal 6-tuple on the Lins engine
  bool include_baselines = false;              // ddp, zero1, zero2, zero3, mics, zeropp on their own engines
};

struct PlanEvaluation {
  Plan plan;
  bool baseline = false;  // a preset on its own system's engine (not a candidate for the chosen plan)
  MemoryEstimate memory;
  CommTimeBreakdown isolated;      // Pricing::paper_isolated
  CommTimeBreakdown shared;        // Pricing::shared_links
  double intra_message_bytes = 0;  // per rank per step, from the schedule
  double inter_message_bytes = 0;
  bool feasible = true;
  std::string infeasible_reason;  // "needs 78.3 GiB + 6.1 GiB reserve = 84.4 GiB > 80.0 GiB"
  int rank = 0;                   // 1 = best among the feasible; 0 when infeasible
  std::string why;                // "chosen", or why it loses to the best ("+12% comm vs best: ...")

  const CommTimeBreakdown& comm(Pricing p) const { return p == Pricing::paper_isolated ? isolated : shared; }
  std::string label() const;  // preset name, or the 6-tuple text for a legal plan
};

struct PlanSearch {
  Pricing rank_by = Pricing::paper_isolated;
  // Feasible plans by predicted communication (ties: less memory, then plan text), then the infeasible ones by how
  // much memory (reserve included) they need.
  std::vector<PlanEvaluation> plans;
  int best = -1;  // index in `plans` of the chosen plan: the best feasible non-baseline plan; -1 when none fits
  int legal_count = 0;
  const PlanEvaluation* chosen() const { return best >= 0 ? &plans[best] : nullptr; }
};

// Builds the compressed schedule (rank 0) of one plan and evaluates it.
Result<PlanEvaluation> evaluate_plan(const Workload& w, const Topology& topo, const Plan& plan, const CostModel& cost,
                                     const PlannerOptions& opt);
// The baselines the planner compares with on `topo`: ddp, zero1, zero2, zero3, mics (one node), zeropp.
std::vector<Plan> baseline_plans(const Topology& topo);
// Evaluates every candidate and ranks them; fills rank and why.
Result<PlanSearch> search_plans(const Workload& w, const Topology& topo, const CostModel& cost,
                                const PlannerOptions& opt);
// Ranks already evaluated plans (exposed so a single --plan evaluation gets the same feasibility text).
PlanSearch rank_plans(std::vector<PlanEvaluation> evals, Pricing rank_by);

}  // namespace lins
