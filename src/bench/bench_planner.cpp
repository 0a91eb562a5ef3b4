// Planner and projection cost: (1) the plan search of the paper's 8 x 128 cluster (every legal plan built into its
// compressed schedule, priced under both pricings, sized with its memory reserve) for each LLaMA preset, by the paper's
// objective and by projected step time (every plan and baseline also expanded and its step program timed; with
// paper-a800's contention priors, and with overlap free), and on
// 8 x 8192 GPUs (a 256M-token batch, M = 1) by both; the process's peak resident memory is reported; (2) the
// Fig. 11-13 projection sweep of `lins simulate --model llama-7b,llama-13b,llama-30b --gpus 8,32,128,512,1024
// --paper-recompute` (five strategies, the planner's choice among them), each under the alpha-beta and the nccl
// network model, and (3) one projected row of every strategy, the planner's choice included, at 10^3, 10^6 and 10^9
// GPUs: its cost must not grow with the rank count (only the planner's search does, with the divisors of the node
// count). Reports wall and CPU time (and the process's peak resident memory so far, the sizes run smallest first); it
// measures, it does not judge.
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <algorithm>
#include <optional>
#include <string>

#include "core/cost/cost_model.h"
#include "core/output/step_columns.h"
#include "core/projection/planner.h"
#include "core/projection/simulator.h"

namespace {

// paper-a800 as shipped (its contention priors on), or with overlap free (`contention` false).
lins::CostModel cost_model(lins::NetworkModel model, bool contention = true) {
  auto cost = lins::CostModel::make(lins::resolve_network_spec("paper-a800").value(), model).value();
  if (!contention) cost.set_contention(lins::Contention{});
  return cost;
}

lins::Workload workload(const std::string& model_name, int gpus, bool paper_recompute,
                        int64_t global_batch_tokens = 4 << 20) {
  lins::Workload w;
  w.model = lins::make_model_preset(model_name).value();
  w.seq = 4096;
  w.micro_batch_size = 1;
  w.global_batch_tokens = global_batch_tokens;
  w.micro_batches = int(w.global_batch_tokens / (int64_t(w.seq) * gpus));  // 4M tokens per step
  w.recompute = paper_recompute && model_name == "llama-30b" ? lins::Recompute::full : lins::Recompute::none;
  return w;
}

double peak_rss_mib() {
  struct rusage u {};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_maxrss) / 1024.0;  // Linux: KiB
}

void BM_PlanSearch(benchmark::State& state, const char* model_name, bool baselines, lins::NetworkModel model,
                   lins::Objective objective, int nodes, bool contention = true) {
  const lins::Topology topo{8, nodes};
  // 4M tokens per step on 8 x 128 (M = 1); on more GPUs one sequence per GPU.
  const int64_t tokens = std::max<int64_t>(4 << 20, int64_t(4096) * topo.world());
  const lins::Workload w = workload(model_name, topo.world(), true, tokens);
  const lins::CostModel cost = cost_model(model, contention);
  lins::PlannerOptions opt;
  opt.include_baselines = baselines;
  opt.objective = objective;
  int plans = 0;
  for (auto _ : state) {
    auto search = lins::search_plans(w, topo, cost, opt);
    if (!search) {
      state.SkipWithError(search.error().c_str());
      break;
    }
    plans = static_cast<int>(search->plans.size());
    benchmark::DoNotOptimize(search->best);
  }
  state.counters["plans"] = plans;
  state.counters["plans_per_s"] = benchmark::Counter(double(plans), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["peak_rss_mib"] = peak_rss_mib();
}

// A strategy's plan ('lins': the planner's choice; nullopt when no plan fits) and its expanded schedule, as lins
// simulate builds them; `legal`, when given, receives the planner's count of legal plans.
lins::Result<std::optional<lins::Schedule>> strategy_schedule(const char* strategy, const lins::Workload& w,
                                                              const lins::Topology& topo, const lins::CostModel& cost,
                                                              const lins::PlannerOptions& popt, int* legal = nullptr) {
  lins::Plan plan;
  if (std::string(strategy) == "lins") {
    auto search = lins::search_plans(w, topo, cost, popt);
    if (!search || !search->chosen()) return std::optional<lins::Schedule>{};
    plan = search->chosen()->plan;
    if (legal) *legal = search->legal_count;
  } else {
    plan = lins::parse_plan(strategy, topo).value();
  }
  auto sched = lins::build_schedule(
      w.model, plan, topo,
      lins::schedule_options(w.micro_batches, popt.bucket_bytes, popt.dtype, popt.engine, popt.overlap));
  if (!sched) return lins::make_error(sched.error());
  return std::optional<lins::Schedule>(std::move(*sched));
}

// What `lins simulate` does per (model, GPU count, strategy), less the CSV: the planner for "lins", the expanded
// schedule, its memory with the reserve, the predicted communication and the projected step.
void BM_ProjectionSweep(benchmark::State& state, lins::NetworkModel model) {
  const lins::CostModel cost = cost_model(model);
  const lins::ComputeRates rates{0.6 * 312e12, 1600e9, 0.0, nullptr};
  int rows = 0;
  for (auto _ : state) {
    rows = 0;
    double sum_s = 0;
    for (const char* model_name : {"llama-7b", "llama-13b", "llama-30b"})
      for (int gpus : {8, 32, 128, 512, 1024}) {
        const lins::Topology topo{8, gpus / 8};
        const lins::Workload w = workload(model_name, gpus, true);
        lins::PlannerOptions popt;
        popt.include_baselines = true;  // as lins simulate asks for "lins": by projected step, baselines included
        for (const char* strategy : {"zero1", "zero3", "zeropp", "mics", "lins"}) {
          auto built = strategy_schedule(strategy, w, topo, cost, popt);
          if (!built) {
            state.SkipWithError(built.error().c_str());
            return;
          }
          if (!*built) continue;
          const lins::Schedule* sched = &**built;
          auto mem = lins::estimate_memory(*sched, w);
          lins::add_memory_reserve(mem, *sched, popt.reserve);
          const auto predicted = lins::predict_comm(*sched, cost, lins::Pricing::paper_isolated);
          const auto proj = lins::project_step(
              *sched, w.model, w.seq, w.micro_batch_size, w.recompute, rates,
              [&](const lins::CommOp& op) { return cost.op_time_s(op, topo, lins::Pricing::paper_isolated); });
          benchmark::DoNotOptimize(mem.required_bytes());
          benchmark::DoNotOptimize(predicted);
          sum_s += proj.step_s;
          ++rows;
        }
      }
    benchmark::DoNotOptimize(sum_s);
  }
  state.counters["rows"] = rows;
}

// What `lins simulate --model llama-7b --gpus N --micro-batches 1` does for each of its default strategies on N GPUs
// (8 per node): the planner's search for "lins", each strategy's expanded schedule, memory, prices and projection.
void BM_ProjectionAtScale(benchmark::State& state) {
  const int gpus = static_cast<int>(state.range(0));
  const lins::Topology topo{8, gpus / 8};
  const lins::CostModel cost = cost_model(lins::NetworkModel::nccl);
  const lins::ComputeRates rates{0.6 * 312e12, 1600e9, 0.0, nullptr};
  lins::Workload w = workload("llama-7b", 8, false);
  w.micro_batches = 1;
  w.global_batch_tokens = int64_t(w.seq) * gpus;
  int64_t ops = 0;
  int legal = 0;
  for (auto _ : state) {
    ops = 0;
    lins::PlannerOptions popt;
    for (const char* strategy : {"ddp", "zero1", "zero2", "zero3", "mics", "zeropp", "lins"}) {
      auto built = strategy_schedule(strategy, w, topo, cost, popt, &legal);
      if (!built) {
        state.SkipWithError(built.error().c_str());
        return;
      }
      if (!*built) continue;
      const lins::Schedule* sched = &**built;
      auto mem = lins::estimate_memory(*sched, w);
      const auto proj = lins::project_step(
          *sched, w.model, w.seq, w.micro_batch_size, w.recompute, rates,
          [&](const lins::CommOp& op) { return cost.op_time_s(op, topo, lins::Pricing::paper_isolated); });
      benchmark::DoNotOptimize(mem.required_bytes());
      benchmark::DoNotOptimize(proj.step_s);
      ops += static_cast<int64_t>(sched->ops.size());
    }
  }
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  state.counters["gpus"] = gpus;
  state.counters["schedule_ops"] = double(ops);
  state.counters["legal_plans"] = legal;  // the planner's search grows with the divisors of the node count
  state.counters["peak_rss_bytes"] =
      benchmark::Counter(double(ru.ru_maxrss) * 1024, benchmark::Counter::kDefaults, benchmark::Counter::kIs1024);
}

}  // namespace

using lins::NetworkModel;
using lins::Objective;
// The paper's objective and the step objective in the same run, with the baselines (what `lins plan` searches).
BENCHMARK_CAPTURE(BM_PlanSearch, llama_7b_alpha_beta_comm, "llama-7b", false, NetworkModel::alpha_beta, Objective::comm,
                  128)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_PlanSearch, llama_7b_nccl_comm, "llama-7b", true, NetworkModel::nccl, Objective::comm, 128)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_PlanSearch, llama_13b_nccl_comm, "llama-13b", true, NetworkModel::nccl, Objective::comm, 128)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_PlanSearch, llama_30b_nccl_comm, "llama-30b", true, NetworkModel::nccl, Objective::comm, 128)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_PlanSearch, llama_7b_nccl_step, "llama-7b", true, NetworkModel::nccl, Objective::step, 128)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_PlanSearch, llama_13b_nccl_step, "llama-13b", true, NetworkModel::nccl, Objective::step, 128)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_PlanSearch, llama_30b_nccl_step, "llama-30b", true, NetworkModel::nccl, Objective::step, 128)
    ->Unit(benchmark::kMillisecond);
// The step objective with overlap free (the timeline's plain event model), beside the rows above (contention on).
BENCHMARK_CAPTURE(BM_PlanSearch, llama_7b_nccl_step_free_overlap, "llama-7b", true, NetworkModel::nccl, Objective::step,
                  128, false)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_PlanSearch, llama_13b_nccl_step_free_overlap, "llama-13b", true, NetworkModel::nccl,
                  Objective::step, 128, false)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_PlanSearch, llama_30b_nccl_step_free_overlap, "llama-30b", true, NetworkModel::nccl,
                  Objective::step, 128, false)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_PlanSearch, llama_30b_alpha_beta_step, "llama-30b", true, NetworkModel::alpha_beta,
                  Objective::step, 128)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_PlanSearch, llama_7b_nccl_comm_8x8192, "llama-7b", true, NetworkModel::nccl, Objective::comm, 8192)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_PlanSearch, llama_7b_nccl_step_8x8192, "llama-7b", true, NetworkModel::nccl, Objective::step, 8192)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_PlanSearch, llama_13b_nccl_step_8x8192, "llama-13b", true, NetworkModel::nccl, Objective::step,
                  8192)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_PlanSearch, llama_30b_nccl_step_8x8192, "llama-30b", true, NetworkModel::nccl, Objective::step,
                  8192)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_ProjectionSweep, fig11_13_alpha_beta, NetworkModel::alpha_beta)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_ProjectionSweep, fig11_13_nccl, NetworkModel::nccl)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ProjectionAtScale)->Arg(1000)->Arg(1000000)->Arg(1000000000)->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
