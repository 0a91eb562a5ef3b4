// Plan search: evaluate, filter by memory, rank, explain; see planner.h.
#include "core/planner.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/units.h"

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

const char* kind_words(CollKind k) {
  switch (k) {
    case CollKind::all_gather:
      return "all-gather";
    case CollKind::reduce_scatter:
      return "reduce-scatter";
    case CollKind::all_reduce:
      return "all-reduce";
    case CollKind::broadcast:
      return "broadcast";
  }
  return "?";
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
    s += std::string(": more ") + (wa == 1 ? "inter-node " : "intra-node ") + kind_words(static_cast<CollKind>(wk)) +
         " (+" + format_seconds(worst) + ")";
  return s;
}

}  // namespace

std::string PlanEvaluation::label() const { return plan.name == "custom" ? plan.to_string() : plan.name; }

std::vector<Plan> baseline_plans(const Topology& topo) {
  std::vector<Plan> out;
  for (const char* name : {"ddp", "zero1", "zero2", "zero3", "mics", "zeropp"}) {
    auto p = parse_plan(name, topo);
    if (p) out.push_back(*p);
  }
  return out;
}

Result<PlanEvaluation> evaluate_plan(const Workload& w, const Topology& topo, const Plan& plan, const CostModel& cost,
                                     const PlannerOptions& opt) {
  ScheduleOptions so;
  so.micro_batches = w.micro_batches;
  so.bucket_bytes = opt.bucket_bytes;
  so.dtype = opt.dtype;
  so.rank = 0;
  so.expand_micro_batches = false;
  auto s = build_schedule(w.model, plan, topo, so);
  if (!s) return make_error(s.error());
  PlanEvaluation e;
  e.plan = plan;
  e.baseline = plan.engine != Engine::lins;
  e.memory = estimate_memory(*s, w, opt.state_bytes, MemoryOf::worst_rank);
  add_memory_reserve(e.memory, *s, opt.reserve);
  cost.price_both(*s, &e.isolated, &e.shared);
  for (const auto& op : s->ops)
    (op.axis() == Axis::inter ? e.inter_message_bytes : e.intra_message_bytes) += double(op.bytes()) * op.repeat;
  // The reserve is part of what must fit: a plan whose tensors alone fit can still run out of memory once the CUDA
  // context, NCCL's buffers and fragmentation take their share.
  e.feasible = e.memory.required_bytes() <= opt.gpu_mem_bytes;
  if (!e.feasible)
    e.infeasible_reason = "needs " + gib(e.memory.total_bytes) + " + " + gib(e.memory.reserve_bytes) +
                          " reserve = " + gib(e.memory.required_bytes()) + " > " + gib(opt.gpu_mem_bytes);
  return e;
}

PlanSearch rank_plans(std::vector<PlanEvaluation> evals, Pricing rank_by) {
  PlanSearch out;
  out.rank_by = rank_by;
  std::stable_sort(evals.begin(), evals.end(), [&](const PlanEvaluation& a, const PlanEvaluation& b) {
    if (a.feasible != b.feasible) return a.feasible;
    if (!a.feasible) return a.memory.required_bytes() < b.memory.required_bytes();
    const double ta = a.comm(rank_by).total_s(), tb = b.comm(rank_by).total_s();
    if (ta != tb) return ta < tb;
    if (a.memory.required_bytes() != b.memory.required_bytes())
      return a.memory.required_bytes() < b.memory.required_bytes();
    if (a.baseline != b.baseline) return !a.baseline;
    return a.plan.to_string() < b.plan.to_string();
  });
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
    if (out.best < 0 && !e.baseline) out.best = static_cast<int>(i);
  }
  // The reference for "why it loses" is the chosen plan, or the best feasible baseline when no 6-tuple fits.
  int ref = out.best;
  if (ref < 0 && !out.plans.empty() && out.plans[0].feasible) ref = 0;
  for (std::size_t i = 0; i < out.plans.size(); ++i) {
    auto& e = out.plans[i];
    if (!e.feasible || ref < 0) continue;
    e.why = static_cast<int>(i) == ref ? (e.baseline ? "best (a baseline)" : "chosen")
                                       : why_loses(e, out.plans[ref], rank_by);
  }
  return out;
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
  std::vector<PlanEvaluation> evals;
  evals.reserve(candidates.size());
  for (const auto& plan : candidates) {
    auto e = evaluate_plan(w, topo, plan, cost, opt);
    if (!e) return make_error("plan " + plan.to_string() + ": " + e.error());
    evals.push_back(std::move(*e));
  }
  PlanSearch out = rank_plans(std::move(evals), opt.rank_by);
  out.legal_count = legal;
  return out;
}

}  // namespace lins
