// The planner: every legal 6-tuple (sharding factors of P, G and OS inside and across nodes, on the Lins engine; and,
// if asked, the baselines' presets on their own engines) is built into the same Schedule the executor runs, sized by
// the memory model plus the reserve a GPU run loses, and ranked among the plans that fit in GPU memory by one of two
// objectives: the projected step time (the step program timed as `lins simulate` times it: overlap, streams, compute,
// the calibrated host cost; projection.h), or the paper's summed communication time. Each plan says why it lost.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/cost/compute_model.h"
#include "core/cost/cost_model.h"
#include "core/cost/host_model.h"
#include "core/model/plan.h"
#include "core/projection/memory_model.h"
#include "core/projection/simulator.h"
#include "core/schedule/overlap.h"
#include "core/schedule/schedule.h"
#include "core/schedule/workload.h"
#include "core/util/names.h"

namespace lins {

// What the planner minimises.
enum class Objective {
  step,  // projected step time of the step program (the default: what a user waits for)
  comm,  // T_comm = T_p + T_g + T_os0 + T_os1, the paper's (no compute, no overlap)
};
inline constexpr NameTable<Objective, 2> kObjectiveNames{
    "objective",
    {{
        {Objective::step, "step", "", "projected step time: the step program timed with overlap and compute"},
        {Objective::comm, "comm", "", "summed communication time per step, the paper's"},
    }}};
static_assert(kObjectiveNames.complete(Objective::comm));
const char* objective_name(Objective o);

// Plans whose objective is within this fraction of the best form tier 1 (lins plan --tie): 0.2, the worst error of the
// projected step time against measured steps that the project reports as validated (REPRODUCE.md, section 7: every
// strategy's projected step within 20% of the measured one, data/validation/cpu-2core-4ranks; largest error 19.4%).
// Differences smaller than that are not evidence that one plan is faster.
inline constexpr double kDefaultTie = 0.2;
// The tiers of steps (or objectives) in order, fastest first: a tier holds those within `tie` of its first; 1, 2, ...
std::vector<int> tiers_in_order(const std::vector<double>& in_order, double tie);
// --tie of lins plan and lins simulate (`help` says what shares a tier there), and its value: a fraction from 0 to 1.
OptionSpec tie_option(const std::string& help);
Result<double> parse_tie(const ParsedArgs& args);

struct PlannerOptions {
  double gpu_mem_bytes = 80.0 * (1ull << 30);  // the memory limit per GPU
  int64_t bucket_bytes = 25ll << 20;           // U
  DType dtype = DType::bf16;                   // P and G on the wire
  StateBytes state_bytes;                      // bytes per parameter of P, G, OS
  MemoryReserve reserve;                       // what a GPU run loses beyond the tensors; must fit too
  Pricing rank_by = Pricing::paper_isolated;   // which pricing orders the plans (and prices the projected step)
  bool include_legal = true;                   // every legal 6-tuple on the Lins engine
  bool include_baselines = false;              // ddp, zero1, zero2, zero3, mics, zeropp, fsdp, hsdp on their engines
  Objective objective = Objective::step;       // what orders the plans
  bool rank_both = false;                      // also evaluate the other objective (its rank and numbers per plan)
  // The step objective's projection (projection.h): compute rates, the engines' settings, the overlap mode.
  ComputeModel compute;
  EngineOptions engine;
  std::optional<HostModel> host;  // the real systems' host side (host_model.h); none: the device schedule only
  Overlap overlap = Overlap::all;
  // Threads that evaluate the candidates (each plan on one thread, into its own slot: the ranking is the same for any
  // count). 1 under MPI, where the ranks share the cores; lins plan and lins simulate use every core.
  int threads = 1;
  // Tiers (PlanEvaluation::tier): plans within this fraction of a tier's fastest share its tier.
  double tie = kDefaultTie;

  // The engines' settings as build_schedule gives them to the engines: `engine` with the bucket U.
  EngineOptions scheduled_engine() const {
    EngineOptions e = engine;
    e.bucket_bytes = bucket_bytes;
    return e;
  }
};

struct PlanEvaluation {
  Plan plan;
  bool baseline = false;  // a preset on its own system's engine (not a candidate for the chosen plan)
  // The workload it was evaluated under: the given one, or the micro-batch size and recomputation the search chose
  // for this plan (search_plans).
  int micro_batch_size = 1;
  int micro_batches = 1;
  Recompute recompute = Recompute::none;
  MemoryEstimate memory;
  CommTimeBreakdown isolated;      // Pricing::paper_isolated
  CommTimeBreakdown shared;        // Pricing::shared_links
  double intra_message_bytes = 0;  // per rank per step, from the schedule
  double inter_message_bytes = 0;
  // The projected step (step objective, or rank_both): the same numbers `lins simulate` gives for this plan.
  bool projected = false;
  StepProjection step;
  bool feasible = true;
  std::string infeasible_reason;  // "needs 78.3 GiB + 6.1 GiB reserve = 84.4 GiB > 80.0 GiB"
  int rank = 0;                   // 1 = best among the feasible; 0 when infeasible
  int other_rank = 0;             // its rank under the other objective (0: infeasible, or not evaluated)
  // 1: its objective within PlanSearch::tie of the best; 2: within the tie of the fastest plan outside tier 1; and
  // so on. 0 when infeasible. Plans of one tier are a tie as far as the projection can tell.
  int tier = 0;
  std::string why;                // "chosen", or why it loses to the best ("+12% comm vs best: ...")

  const CommTimeBreakdown& comm(Pricing p) const { return p == Pricing::paper_isolated ? isolated : shared; }
  // What `objective` minimises: the projected step seconds, or the communication seconds under `p`.
  double objective_s(Objective objective, Pricing p) const;
  std::string label() const;  // preset name, or the 6-tuple text for a legal plan
};

struct PlanSearch {
  Pricing rank_by = Pricing::paper_isolated;
  Objective objective = Objective::step;
  // Feasible plans by the objective (ties: less memory, a 6-tuple before a baseline, then plan text), then the
  // infeasible ones by how much memory (reserve included) they need.
  std::vector<PlanEvaluation> plans;
  // Index in `plans` of the chosen plan, -1 when none fits: under the step objective the best feasible plan, a baseline
  // included (it says which system to run); under the paper's objective the best feasible 6-tuple.
  int best = -1;
  int legal_count = 0;
  double tie = kDefaultTie;  // the fraction that makes a tier
  // Index of the plan to run: under the step objective the fastest baseline (a preset on its own system's engine,
  // which PyTorch or DeepSpeed runs) in tier 1, else the chosen plan; -1 when none fits.
  int recommended = -1;
  const PlanEvaluation* chosen() const { return best >= 0 ? &plans[best] : nullptr; }
  const PlanEvaluation* recommendation() const { return recommended >= 0 ? &plans[recommended] : nullptr; }
  // The best-ranked feasible plan other than the chosen one (a baseline included); null when there is none.
  const PlanEvaluation* runner_up() const;
};

// Evaluates one plan: its compressed schedule (rank 0) priced under both pricings; under the step objective (or with
// rank_both) also its projected step, and then its memory is the projection's (the expanded schedule's walk, as
// `lins simulate` sizes it), else the compressed schedule's.
Result<PlanEvaluation> evaluate_plan(const Workload& w, const Topology& topo, const Plan& plan, const CostModel& cost,
                                     const PlannerOptions& opt);
// The baselines the planner compares with on `topo`: ddp, zero1, zero2, zero3, mics (one node), zeropp, fsdp, hsdp
// (one node); those a topology cannot hold are left out.
std::vector<Plan> baseline_plans(const Topology& topo);
// The cores this process may run on (its CPU affinity; at least 1): PlannerOptions::threads for lins plan and lins
// simulate.
int available_cores();
// Evaluates every candidate and ranks them; fills rank and why. Where `w` leaves them open (micro_batch_fixed,
// recompute_fixed false), each candidate is also tried at every micro-batch size 1, 2, 4, ... that keeps the global
// batch and under each recomputation level, and keeps its best (fits first, then the objective, then less memory; of
// those that do not fit, the one needing least). Recomputation only adds compute, so for each plan and size only the
// least level that fits is projected; a size that fits under no level ends the sizes tried (a larger one needs more).
// Each plan appears once in the ranking, with the micro-batch size and recomputation it was evaluated under.
Result<PlanSearch> search_plans(const Workload& w, const Topology& topo, const CostModel& cost,
                                const PlannerOptions& opt);
// Ranks already evaluated plans by `objective` (exposed so a single --plan evaluation gets the same feasibility text);
// fills rank, other_rank (when every plan was projected), tier, the recommendation and why. `engine`, when given,
// lets a step-time reason name the engine setting behind it (exposed_setting).
PlanSearch rank_plans(std::vector<PlanEvaluation> evals, Pricing rank_by, Objective objective = Objective::comm,
                      double tie = kDefaultTie, const EngineOptions* engine = nullptr);

// The engine setting that decides how much of `plan`'s collectives of kind `k` (on either axis: the settings act on
// both alike) compute waits for, when it is at its default: "overlap_comm is off by default for ZeRO stage 2
// (--ds-overlap-comm on overlaps it)", "--ds-prefetch-bucket 50000000 elements (the default)", ... ; "" when no
// setting of lins's decides it or the setting was given.
std::string exposed_setting(const Plan& plan, CollKind k, const EngineOptions& engine);

}  // namespace lins
