// The CPU training step on one rank against sgemm alone: how much of the step is sgemm, and what rate the whole step
// reaches compared with sgemm on exactly the GEMM calls the step issued, in the same run. Counters:
//   step_s              wall time of one optimizer step
//   gemm_gflop          GFLOP the step's GEMMs issue (2mnk per call; causal attention issues only the lower
//                       triangle's row blocks, so this is less than the model's FLOPs)
//   gemm_fraction       share of the step spent inside sgemm
//   step_gemm_gflops    gemm_gflop / step time (every non-GEMM kernel counts as overhead)
//   step_model_gflops   the model's FLOPs for the step's tokens / step time, with Megatron's count per token,
//                       72 L h^2 (1 + s / 6h + V / 12Lh) (ModelSpec::flops_per_token: full attention, no recompute)
//   sgemm_gflops        the same GEMM calls replayed alone after each step (same shapes, transposes, leading
//                       dimensions, alpha and beta; one set of operands per shape)
//   step_vs_sgemm       step_gemm_gflops / sgemm_gflops = replay time / step time: 1.0 would be a step that costs
//                       only its GEMMs at the rate sgemm reaches on those shapes; the rest is the non-GEMM kernels,
//                       copies and bookkeeping (target: >= 0.8 at seq 256 x 4 and 512 x 2 on the small model)
// Run with one BLAS thread: OPENBLAS_NUM_THREADS=1 build/bench/bench_step
#include <benchmark/benchmark.h>

#include <chrono>
#include <map>
#include <tuple>
#include <vector>

#include "kernels/ops.h"
#include "train/executor.h"

namespace lins {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<kernels::cpu::GemmShape>* g_shapes = nullptr;
void record_shape(const kernels::cpu::GemmShape& s, double) {
  if (g_shapes) g_shapes->push_back(s);
}

// Replays GEMM calls with their own operands (one set per distinct shape), returns seconds.
class GemmReplay {
 public:
  explicit GemmReplay(std::vector<kernels::cpu::GemmShape> calls) : calls_(std::move(calls)) {
    for (const auto& c : calls_) {
      const auto key = std::make_tuple(c.trans_a, c.trans_b, c.m, c.n, c.k, c.lda, c.ldb, c.ldc);
      if (operands_.count(key)) continue;
      const int64_t a_rows = c.trans_a ? c.k : c.m, b_rows = c.trans_b ? c.n : c.k;
      operands_[key] =
          Operands{std::vector<float>(size_t(a_rows * c.lda), 0.01f), std::vector<float>(size_t(b_rows * c.ldb), 0.02f),
                   std::vector<float>(size_t(c.m * c.ldc), 0.0f)};
    }
  }
  double run() {
    const auto t0 = Clock::now();
    for (const auto& c : calls_) {
      auto& o = operands_[std::make_tuple(c.trans_a, c.trans_b, c.m, c.n, c.k, c.lda, c.ldb, c.ldc)];
      kernels::cpu::gemm_strided(c.trans_a, c.trans_b, c.m, c.n, c.k, c.alpha, o.a.data(), c.lda, o.b.data(), c.ldb,
                                 c.beta, o.c.data(), c.ldc);
    }
    return std::chrono::duration<double>(Clock::now() - t0).count();
  }
  double flops() const {
    double f = 0;
    for (const auto& c : calls_) f += 2.0 * double(c.m) * double(c.n) * double(c.k);
    return f;
  }

 private:
  struct Operands {
    std::vector<float> a, b, c;
  };
  std::vector<kernels::cpu::GemmShape> calls_;
  std::map<std::tuple<bool, bool, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t>, Operands> operands_;
};

// Args: sequence length, sequences per micro-batch, recomputation.
void BM_StepVsSgemm(benchmark::State& state) {
  const int seq = int(state.range(0)), batch = int(state.range(1));
  const bool recompute = state.range(2) != 0;
  auto model = *make_model_preset("small");
  auto be = make_cpu_backend();
  const Topology one{1, 1};
  auto plan = parse_plan("ddp", one);
  ExecutorOptions o;
  o.seq = seq;
  o.micro_batch_size = batch;
  o.micro_batches = 1;
  o.recompute = recompute ? lins::Recompute::full : lins::Recompute::none;
  auto ex = Executor::create(model, *plan, one, 0, nullptr, *be, o);
  if (!ex) {
    state.SkipWithError(ex.error().c_str());
    return;
  }
  Executor& e = **ex;
  (void)e.step();  // warm-up: first-touch of every buffer

  // The GEMM calls of one step, to replay alone.
  std::vector<kernels::cpu::GemmShape> shapes;
  g_shapes = &shapes;
  kernels::cpu::reset_gemm_stats();
  kernels::cpu::set_gemm_observer(record_shape);
  kernels::cpu::set_gemm_timing(true);
  (void)e.step();
  kernels::cpu::set_gemm_timing(false);
  kernels::cpu::reset_gemm_stats();
  g_shapes = nullptr;
  GemmReplay replay(shapes);
  replay.run();  // warm-up

  double step_s = 0, gemm_s = 0, gemm_flops = 0, replay_s = 0;
  int64_t steps = 0;
  for (auto _ : state) {
    kernels::cpu::reset_gemm_stats();
    kernels::cpu::set_gemm_timing(true);
    auto st = e.step();
    kernels::cpu::set_gemm_timing(false);
    if (!st) {
      state.SkipWithError(st.error().c_str());
      return;
    }
    const auto g = kernels::cpu::gemm_stats();
    const double r = replay.run();
    state.SetIterationTime(st->step_s);
    step_s += st->step_s, gemm_s += g.seconds, gemm_flops += g.flops, replay_s += r;
    ++steps;
  }
  const double tokens = double(seq) * batch;
  state.counters["step_s"] = step_s / steps;
  state.counters["gemm_gflop"] = gemm_flops / steps / 1e9;
  state.counters["gemm_fraction"] = gemm_s / step_s;
  state.counters["step_gemm_gflops"] = gemm_flops / step_s / 1e9;
  state.counters["step_model_gflops"] = model.flops_per_token(seq) * tokens * steps / step_s / 1e9;
  const double replay_flops = replay.flops() * double(steps);
  state.counters["sgemm_gflops"] = replay_flops / replay_s / 1e9;
  state.counters["gemm_in_step_gflops"] = gemm_flops / gemm_s / 1e9;
  state.counters["step_vs_sgemm"] = (gemm_flops / step_s) / (replay_flops / replay_s);
  state.counters["gemm_calls"] = double(shapes.size());
  state.SetLabel("small model, seq " + std::to_string(seq) + " x " + std::to_string(batch) +
                 (recompute ? ", recompute" : ""));
}
BENCHMARK(BM_StepVsSgemm)
    ->Args({128, 1, 0})
    ->Args({256, 4, 0})
    ->Args({512, 2, 0})
    ->Args({256, 4, 1})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0);

}  // namespace
}  // namespace lins

BENCHMARK_MAIN();
