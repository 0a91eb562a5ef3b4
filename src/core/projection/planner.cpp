// Plan search: evaluate, filter by memory, rank, explain; see planner.h.
#include "core/projection/planner.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <exception>
#include <optional>
#include <thread>

#include "core/projection/projection.h"
#include "core/util/units.h"

namespace lins {
namespace {

std::string gib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", bytes / double(1ull << 30));
  return buf;
}

std::string percent(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, std::fabs(x) < 0.1 ? "%+.1f%%" : "%+.0f%%", x * 100);
  return buf;
}

// Why `e` loses to `best`: how much slower, and the (kind, axis) whose time grew the most.
std::string why_loses(const PlanEvaluation& e, const PlanEvaluation& best, Pricing p) {
  const double te = e.comm(p).total_s(), tb = best.comm(p).total_s();
  const double rel = tb > 0 ? (te - tb) / tb : (te > 0 ? INFINITY : 0);
  if (std::fabs(te - tb) <= 1e-12 * std::max(1.0, tb)) {
    if (e.memory.required_bytes() > best.memory.required_bytes())
      return "same comm as best, more memory (" + gib(e.memory.required_bytes()) + " vs " +
             gib(best.memory.required_bytes()) + ")";
    return "same comm as best";
  }
  double worst = 0;
  int wk = -1, wa = -1;
  for (int k = 0; k < kCollKindCount; ++k)
    for (int a = 0; a < 2; ++a) {
      const double d = e.comm(p).kind_axis_s[k][a] - best.comm(p).kind_axis_s[k][a];
      if (d > worst) worst = d, wk = k, wa = a;
    }
  std::string s = (std::isfinite(rel) ? percent(rel) : std::string("more")) + " comm vs best";
  if (wk >= 0)
    s += std::string(": more ") + (wa == 1 ? "inter-node " : "intra-node ") +
         kCollKindNames.prose(static_cast<CollKind>(wk)) + " (+" + format_seconds(worst) + ")";
  return s;
}

// Why `e` loses to `best` by projected step time: how much slower, and the part of the step (compute, host, or the
// exposed wait for one kind of collective on one axis) that grew the most; with `engine`, the setting that decides
// that exposed wait when a default does.
std::string why_loses_step(const PlanEvaluation& e, const PlanEvaluation& best, const EngineOptions* engine) {
  const double te = e.step.step_s, tb = best.step.step_s;
  if (std::fabs(te - tb) <= 1e-12 * std::max(1.0, tb)) {
    if (e.memory.required_bytes() > best.memory.required_bytes())
      return "same step time as best, more memory (" + gib(e.memory.required_bytes()) + " vs " +
             gib(best.memory.required_bytes()) + ")";
    return "same step time as best";
  }
  double worst = e.step.compute_s() - best.step.compute_s();
  std::string what = "compute";
  if (e.step.fixed_s - best.step.fixed_s > worst) worst = e.step.fixed_s - best.step.fixed_s, what = "host time";
  if (e.step.host_stall_s - best.step.host_stall_s > worst)
    worst = e.step.host_stall_s - best.step.host_stall_s, what = "device idle for the host";
  int wk = -1;
  for (int k = 0; k < kCollKindCount; ++k)
    for (int a = 0; a < 2; ++a) {
      const double d = e.step.exposed_kind_axis_s[k][a] - best.step.exposed_kind_axis_s[k][a];
      if (d > worst)
        worst = d, wk = k,
        what = std::string("exposed ") + (a == 1 ? "inter-node " : "intra-node ") +
               kCollKindNames.prose(static_cast<CollKind>(k));
    }
  std::string s = percent(tb > 0 ? (te - tb) / tb : 1.0) + " step vs best";
  if (worst > 0) {
    s += ": more " + what + " (+" + format_seconds(worst);
    const std::string setting = wk >= 0 && engine ? exposed_setting(e.plan, CollKind(wk), *engine) : "";
    s += setting.empty() ? ")" : "; " + setting + ")";
  }
  return s;
}

// Tiers over the feasible plans, already in rank order; the infeasible get 0.
void assign_tiers(std::vector<PlanEvaluation>& plans, Objective objective, Pricing rank_by, double tie) {
  std::vector<double> in_order;
  for (const auto& e : plans)
    if (e.feasible) in_order.push_back(e.objective_s(objective, rank_by));
  const std::vector<int> tiers = tiers_in_order(in_order, tie);
  std::size_t next = 0;
  for (auto& e : plans) e.tier = e.feasible ? tiers[next++] : 0;
}

// Orders feasible plans by `objective` (ties: less memory, a 6-tuple first, plan text), the infeasible after them.
void sort_plans(std::vector<PlanEvaluation>& evals, Pricing rank_by, Objective objective) {
  std::stable_sort(evals.begin(), evals.end(), [&](const PlanEvaluation& a, const PlanEvaluation& b) {
    if (a.feasible != b.feasible) return a.feasible;
    if (!a.feasible) return a.memory.required_bytes() < b.memory.required_bytes();
    const double ta = a.objective_s(objective, rank_by), tb = b.objective_s(objective, rank_by);
    if (ta != tb) return ta < tb;
    if (a.memory.required_bytes() != b.memory.required_bytes())
      return a.memory.required_bytes() < b.memory.required_bytes();
    if (a.baseline != b.baseline) return !a.baseline;
    return a.plan.to_string() < b.plan.to_string();
  });
}

}  // namespace

const char* objective_name(Objective o) { return kObjectiveNames.name(o); }

std::string exposed_setting(const Plan& plan, CollKind k, const EngineOptions& engine) {
  const EngineOptions defaults;
  const bool gather = k == CollKind::all_gather;
  const bool reduce = k == CollKind::reduce_scatter || k == CollKind::all_reduce;
  auto elems = [](int64_t n) { return std::to_string(n) + " elements"; };
  std::vector<std::string> out;
  switch (plan.engine) {
    case Engine::zero:
    case Engine::mics:
    case Engine::zeropp: {
      const int stage = plan.engine == Engine::zero ? zero_stage(plan) : 3;
      if (reduce && !engine.ds_overlap_comm && stage < 3)
        out.push_back("DeepSpeed's overlap_comm is off by default for ZeRO stage " + std::to_string(stage) +
                      ": --ds-overlap-comm on overlaps it");
      if (reduce && engine.ds_reduce_bucket_elems == defaults.ds_reduce_bucket_elems)
        out.push_back("reduce_bucket_size " + elems(defaults.ds_reduce_bucket_elems) +
                      " by default: --ds-reduce-bucket");
      if (gather && stage == 3 && engine.ds_prefetch_bucket_elems == defaults.ds_prefetch_bucket_elems)
        out.push_back("stage3_prefetch_bucket_size " + elems(defaults.ds_prefetch_bucket_elems) +
                      " by default: --ds-prefetch-bucket");
      break;
    }
    case Engine::ddp:
      if (k == CollKind::all_reduce && engine.bucket_bytes == kDefaultBucketBytes)
        out.push_back("bucket_cap_mb 25 MiB by default: --bucket");
      break;
    case Engine::lins:
      if (k == CollKind::all_reduce && engine.bucket_bytes == kDefaultBucketBytes)
        out.push_back("the bucket U 25 MiB by default: --bucket");
      break;
    case Engine::fsdp:
      break;  // FSDP2 prefetches one unit ahead in both directions; lins has no setting for it
  }
  std::string s;
  for (const auto& o : out) s += (s.empty() ? "" : "; ") + o;
  return s;
}

double PlanEvaluation::objective_s(Objective objective, Pricing p) const {
  return objective == Objective::step ? step.step_s : comm(p).total_s();
}

const PlanEvaluation* PlanSearch::runner_up() const {
  if (best < 0) return nullptr;
  for (std::size_t i = 0; i < plans.size(); ++i)
    if (static_cast<int>(i) != best && plans[i].feasible) return &plans[i];
  return nullptr;
}

std::string PlanEvaluation::label() const { return plan.name == "custom" ? plan.to_string() : plan.name; }

std::vector<Plan> baseline_plans(const Topology& topo) {
  std::vector<Plan> out;
  for (const char* name : {"ddp", "zero1", "zero2", "zero3", "mics", "zeropp", "fsdp", "hsdp"}) {
    auto p = parse_plan(name, topo);
    if (p) out.push_back(*p);
  }
  return out;
}

namespace {

// Every objective sizes a plan as the simulator does: its expanded schedule's buffers walked through the step program
// (the compressed schedule's are a closed-form bound, kept only where the step is too long to expand).
void sized_as_simulated(MemoryEstimate& m, const Workload& w, const Topology& topo, const Plan& plan,
                        const PlannerOptions& opt) {
  auto x = build_schedule(w.model, plan, topo,
                          schedule_options(w.micro_batches, opt.bucket_bytes, opt.dtype, opt.engine, opt.overlap));
  if (!x) return;
  m = estimate_memory(*x, w, opt.state_bytes, MemoryOf::worst_rank);
  add_memory_reserve(m, *x, opt.reserve);
}

}  // namespace

Result<PlanEvaluation> evaluate_plan(const Workload& w, const Topology& topo, const Plan& plan, const CostModel& cost,
                                     const PlannerOptions& opt) {
  LINS_ASSIGN_OR_RETURN(auto s, build_schedule(w.model, plan, topo,
                                               schedule_options(w.micro_batches, opt.bucket_bytes, opt.dtype,
                                                                opt.engine, opt.overlap, /*expand=*/false)));
  PlanEvaluation e;
  e.plan = plan;
  e.baseline = plan.engine != Engine::lins;
  e.micro_batch_size = w.micro_batch_size;
  e.micro_batches = w.micro_batches;
  e.recompute = w.recompute;
  e.memory = estimate_memory(s, w, opt.state_bytes, MemoryOf::worst_rank);
  add_memory_reserve(e.memory, s, opt.reserve);
  cost.price_both(s, &e.isolated, &e.shared);
  for (const auto& op : s.ops)
    (op.axis() == Axis::inter ? e.inter_message_bytes : e.intra_message_bytes) += double(op.bytes()) * op.repeat;
  if (opt.objective == Objective::step || opt.rank_both) {
    ProjectionSetup setup;
    setup.cost = &cost;
    setup.pricing = opt.rank_by;
    setup.compute = opt.compute;
    setup.engine = opt.engine;
    setup.bucket_bytes = opt.bucket_bytes;
    setup.dtype = opt.dtype;
    setup.overlap = opt.overlap;
    setup.state_bytes = opt.state_bytes;
    setup.reserve = opt.reserve;
    setup.host = opt.host ? &*opt.host : nullptr;
    auto p = project_plan(setup, w, topo, plan);
    if (p) {
      e.projected = true;
      e.step = p->step;
      e.memory = p->memory;
    } else if (opt.objective == Objective::step) {
      // A step too long to expand cannot be projected; the paper's objective prices the compressed schedule alone.
      return make_error("cannot project its step: " + p.error() +
                        " (the paper's objective, comm, needs no projection)");
    }
    // Under the paper's objective a plan whose step cannot be projected is still ranked; it has no step rank.
  } else {
    sized_as_simulated(e.memory, w, topo, plan, opt);
  }
  // The reserve is part of what must fit: a plan whose tensors alone fit can still run out of memory once the CUDA
  // context, NCCL's buffers and fragmentation take their share.
  e.feasible = e.memory.required_bytes() <= opt.gpu_mem_bytes;
  if (!e.feasible)
    e.infeasible_reason = "needs " + gib(e.memory.total_bytes) + " + " + gib(e.memory.reserve_bytes) +
                          " reserve = " + gib(e.memory.required_bytes()) + " > " + gib(opt.gpu_mem_bytes);
  return e;
}

PlanSearch rank_plans(std::vector<PlanEvaluation> evals, Pricing rank_by, Objective objective, double tie,
                      const EngineOptions* engine) {
  PlanSearch out;
  out.rank_by = rank_by;
  out.objective = objective;
  out.tie = tie;
  // The rank under the other objective first (over the same feasible plans), when every plan has both numbers.
  const Objective other = objective == Objective::step ? Objective::comm : Objective::step;
  const bool both = std::all_of(evals.begin(), evals.end(), [](const PlanEvaluation& e) { return e.projected; });
  if (both) {
    sort_plans(evals, rank_by, other);
    int r = 0;
    for (auto& e : evals) e.other_rank = e.feasible ? ++r : 0;
  }
  sort_plans(evals, rank_by, objective);
  out.plans = std::move(evals);
  int r = 0;
  for (std::size_t i = 0; i < out.plans.size(); ++i) {
    auto& e = out.plans[i];
    if (!e.feasible) {
      e.rank = 0;
      e.why = "does not fit: " + e.infeasible_reason;
      continue;
    }
    e.rank = ++r;
    if (out.best < 0 && (objective == Objective::step || !e.baseline)) out.best = static_cast<int>(i);
  }
  assign_tiers(out.plans, objective, rank_by, tie);
  // What to run: a plan a framework runs (a baseline) when one is in tier 1, as fast as the projection can tell; else
  // the chosen plan. Under the paper's objective the chosen 6-tuple is the point (its Table IV).
  out.recommended = out.best;
  if (objective == Objective::step)
    for (std::size_t i = 0; i < out.plans.size(); ++i)
      if (out.plans[i].tier == 1 && out.plans[i].baseline) {
        out.recommended = static_cast<int>(i);
        break;
      }
  // The reference for "why it loses" is the chosen plan, or the best feasible baseline when no 6-tuple fits.
  int ref = out.best;
  if (ref < 0 && !out.plans.empty() && out.plans[0].feasible) ref = 0;
  for (std::size_t i = 0; i < out.plans.size(); ++i) {
    auto& e = out.plans[i];
    if (!e.feasible || ref < 0) continue;
    if (static_cast<int>(i) == ref)
      e.why = e.baseline && objective == Objective::comm ? "best (a baseline)" : "chosen";
    else
      e.why = objective == Objective::step ? why_loses_step(e, out.plans[ref], engine)
                                           : why_loses(e, out.plans[ref], rank_by);
  }
  return out;
}

namespace {

// The micro-batch sizes a search tries: the given one, or 1, 2, 4, ... while micro-batch x M x world = the global
// batch with M a whole number of at least 1.
std::vector<int> micro_batch_sizes(const Workload& w, const Topology& topo) {
  if (w.micro_batch_fixed) return {w.micro_batch_size};
  std::vector<int> out;
  for (int b = 1; b <= (1 << 20); b *= 2)
    if (workload_variant(w, topo, b, w.recompute))
      out.push_back(b);
    else if (int64_t(w.seq) * b * topo.world() > w.global_batch_tokens)
      break;
  if (out.empty()) out.push_back(w.micro_batch_size);  // the given batch holds no power of two: keep what was given
  return out;
}

// Whether `a` is a better way to run its plan than `b`: fits first, then the objective, then less memory; of two that
// do not fit, the one needing less.
bool better_variant(const PlanEvaluation& a, const PlanEvaluation& b, const PlannerOptions& opt) {
  if (a.feasible != b.feasible) return a.feasible;
  if (a.feasible) {
    const double ta = a.objective_s(opt.objective, opt.rank_by), tb = b.objective_s(opt.objective, opt.rank_by);
    if (ta != tb) return ta < tb;
  }
  return a.memory.required_bytes() < b.memory.required_bytes();
}

// One plan under every workload the search leaves open (search_plans): its best evaluation.
Result<PlanEvaluation> evaluate_variants(const Workload& w, const Topology& topo, const Plan& plan,
                                         const CostModel& cost, const PlannerOptions& opt,
                                         const std::vector<int>& sizes) {
  std::vector<Recompute> levels = {w.recompute};
  if (!w.recompute_fixed) levels = {Recompute::none, Recompute::selective, Recompute::full};
  std::optional<PlanEvaluation> best;
  for (int b : sizes) {
    LINS_ASSIGN_OR_RETURN(Workload wb, workload_variant(w, topo, b, levels[0]));
    LINS_ASSIGN_OR_RETURN(PlanEvaluation e, evaluate_plan(wb, topo, plan, cost, opt));
    if (!e.feasible && levels.size() > 1) {
      // States and buffers are the same under every level: the least level whose activations fit is the one to
      // project (more recomputation only adds compute); the last level when none does.
      for (std::size_t l = 1; l < levels.size(); ++l) {
        MemoryEstimate m = e.memory;
        set_activation_bytes(m, activation_bytes(w.model, w.seq, b, levels[l]) * opt.state_bytes.activation / 2.0,
                             opt.reserve);
        if (m.required_bytes() <= opt.gpu_mem_bytes || l + 1 == levels.size()) {
          wb.recompute = levels[l];
          LINS_ASSIGN_OR_RETURN(e, evaluate_plan(wb, topo, plan, cost, opt));
          break;
        }
      }
    }
    const bool fits = e.feasible;
    if (!best || better_variant(e, *best, opt)) best = std::move(e);
    if (!fits) break;  // a larger micro-batch keeps more activations
  }
  return std::move(*best);
}

}  // namespace

int available_cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

Result<PlanSearch> search_plans(const Workload& w, const Topology& topo, const CostModel& cost,
                                const PlannerOptions& opt) {
  std::vector<Plan> candidates;
  int legal = 0;
  if (opt.include_legal) {
    candidates = enumerate_legal_plans(topo);
    legal = static_cast<int>(candidates.size());
  }
  if (opt.include_baselines)
    for (auto& b : baseline_plans(topo)) candidates.push_back(std::move(b));
  const std::vector<int> sizes = micro_batch_sizes(w, topo);
  const bool open = sizes.size() > 1 || sizes[0] != w.micro_batch_size || !w.recompute_fixed;
  // Each candidate is evaluated alone (a schedule of its own, read-only inputs), so they run on opt.threads threads,
  // each taking the next candidate; every result lands in its candidate's slot.
  std::vector<std::optional<Result<PlanEvaluation>>> results(candidates.size());
  // What a thread throws (an allocation that failed) is thrown again here, after every thread has ended, as the
  // one-thread search would throw it.
  std::atomic<std::size_t> next{0};
  std::vector<std::exception_ptr> thrown(candidates.size());
  auto work = [&] {
    for (std::size_t i = next++; i < candidates.size(); i = next++) {
      try {
        results[i].emplace(open ? evaluate_variants(w, topo, candidates[i], cost, opt, sizes)
                                : evaluate_plan(w, topo, candidates[i], cost, opt));
      } catch (...) {
        thrown[i] = std::current_exception();
      }
    }
  };
  const std::size_t threads =
      std::min<std::size_t>(static_cast<std::size_t>(std::max(1, opt.threads)), candidates.size());
  {
    std::vector<std::jthread> pool;
    for (std::size_t t = 1; t < threads; ++t) pool.emplace_back(work);
    work();
  }
  for (const auto& e : thrown)
    if (e) std::rethrow_exception(e);
  std::vector<PlanEvaluation> evals;
  evals.reserve(candidates.size());
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    auto& e = *results[i];
    if (!e) return make_error("plan " + candidates[i].to_string() + ": " + e.error());
    evals.push_back(std::move(*e));
  }
  const EngineOptions engine = opt.scheduled_engine();
  PlanSearch out = rank_plans(std::move(evals), opt.rank_by, opt.objective, opt.tie, &engine);
  out.legal_count = legal;
  return out;
}

std::vector<int> tiers_in_order(const std::vector<double>& in_order, double tie) {
  std::vector<int> tiers;
  int tier = 0;
  double first = 0;
  for (double t : in_order) {
    if (tier == 0 || t > first * (1 + tie)) ++tier, first = t;
    tiers.push_back(tier);
  }
  return tiers;
}

OptionSpec tie_option(const std::string& help) { return {"tie", 0, "FRACTION", "0.2", help}; }

Result<double> parse_tie(const ParsedArgs& args) {
  LINS_ASSIGN_OR_RETURN(const double tie, args.get_double("tie"));
  if (!(tie >= 0 && tie <= 1))
    return make_error("--tie " + args.get("tie") + ": give a fraction from 0 to 1 (0.2: within 20% of the fastest is a "
                      "tie)");
  return tie;
}

}  // namespace lins
