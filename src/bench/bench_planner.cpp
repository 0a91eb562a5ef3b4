// Planner search time: every legal plan of the paper's 8 x 128 cluster (plus the baselines) built into its
// compressed schedule, priced under both pricings and sized, for each LLaMA preset (PAPER.md section 5).
#include <benchmark/benchmark.h>

#include "core/planner.h"

namespace {

void BM_PlanSearch(benchmark::State& state, const char* model_name, bool baselines) {
  const lins::Topology topo{8, 128};
  lins::Workload w;
  w.model = lins::make_model_preset(model_name).value();
  w.seq = 4096;
  w.micro_batch_size = 1;
  w.micro_batches = 1;  // 4M tokens / (4096 x 1024 GPUs)
  w.global_batch_tokens = 4 << 20;
  w.recompute = std::string(model_name) == "llama-30b";
  const lins::CostModel cost(lins::network_preset("paper-a800").value());
  lins::PlannerOptions opt;
  opt.include_baselines = baselines;
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
}

}  // namespace

BENCHMARK_CAPTURE(BM_PlanSearch, llama_7b, "llama-7b", false)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_PlanSearch, llama_13b, "llama-13b", false)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_PlanSearch, llama_30b, "llama-30b", false)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_PlanSearch, llama_7b_with_baselines, "llama-7b", true)->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
