// The projected step: compute plus exposed communication, timed through the same program the executor performs.
#include "core/projection/simulator.h"

#include <gtest/gtest.h>

namespace lins {
namespace {

struct Case {
  ModelSpec model = make_model_preset("small").value();
  Topology topo{4, 2};
  ComputeRates rates{1e12, 1e12, 0.0, nullptr};
  Schedule schedule(const std::string& plan, int M = 2, Overlap overlap = Overlap::all) {
    ScheduleOptions o;
    o.micro_batches = M;
    o.expand_micro_batches = true;
    o.bucket_bytes = 64 << 10;
    o.overlap = overlap;
    o.engine.ds_reduce_bucket_elems = 100'000;  // several buckets on the small model
    o.engine.ds_prefetch_bucket_elems = 10'000;
    o.engine.ds_max_reuse_distance_elems = 0;
    o.engine.ds_param_persistence_threshold_elems = 0;
    return build_schedule(model, parse_plan(plan, topo).value(), topo, o).value();
  }
  StepProjection run(const Schedule& s, double seconds_per_byte) {
    return project_step(s, model, 128, 2, Recompute::none, rates,
                        [&](const CommOp& op) { return 1e-6 + op.bytes() * seconds_per_byte; });
  }
};

TEST(Simulator, FreeCommunicationCostsOnlyCompute) {
  Case c;
  auto s = c.schedule("zero3");
  auto p = project_step(s, c.model, 128, 2, Recompute::none, c.rates, [](const CommOp&) { return 0.0; });
  EXPECT_GT(p.forward_s, 0);
  EXPECT_NEAR(p.backward_s, 2 * p.forward_s, 1e-12);
  EXPECT_NEAR(p.step_s, p.forward_s + p.backward_s + p.optimizer_s, 1e-12);
  EXPECT_NEAR(p.exposed_comm_s, 0, 1e-12);
}

TEST(Simulator, ComputeMatchesTheMegatronFlopsOfTheModel) {
  Case c;
  auto s = c.schedule("ddp", 1);
  auto p = project_step(s, c.model, 128, 2, Recompute::none, c.rates, [](const CommOp&) { return 0.0; });
  // Per token: 3 x forward; the Megatron formula counts the same matmuls (its LM head term is 2Vh forward per token).
  const double tokens = 256;
  EXPECT_NEAR((p.forward_s + p.backward_s) * c.rates.sustained_flops_per_s / tokens, c.model.flops_per_token(128),
              0.02 * c.model.flops_per_token(128));
}

// Recomputation's compute: selective re-runs the attention core's forward in every attn backward, the score and value
// products (4 s h per token per layer, a third of the 12 L h s term of flops_per_token_terms); full one more forward
// of every module, as it always has.
TEST(Simulator, RecomputationAddsItsForwardFlops) {
  Case c;
  auto s = c.schedule("ddp", 1);
  const int seq = 128, b = 2;
  const double tokens = double(seq) * b;
  const auto free_comm = [](const CommOp&) { return 0.0; };
  const auto none = project_step(s, c.model, seq, b, Recompute::none, c.rates, free_comm);
  const auto selective = project_step(s, c.model, seq, b, Recompute::selective, c.rates, free_comm);
  const auto full = project_step(s, c.model, seq, b, Recompute::full, c.rates, free_comm);
  const double L = c.model.dims.layers, h = c.model.dims.hidden;
  EXPECT_EQ(selective.forward_s, none.forward_s);
  EXPECT_NEAR((selective.backward_s - none.backward_s) * c.rates.sustained_flops_per_s, 4 * L * h * seq * tokens,
              1e-9 * 4 * L * h * seq * tokens);
  EXPECT_NEAR(full.backward_s - none.backward_s, none.forward_s, 1e-12);
  // The same number from the model's FLOPs per token, and the causal-free seq term it is a third of.
  EXPECT_DOUBLE_EQ(c.model.recompute_flops_per_token(seq, Recompute::selective), 4 * L * h * seq);
  double seq_term = 0;
  for (const FlopsTerm& t : flops_per_token_terms(false))
    if (t.seq == 1) seq_term = t.coefficient * L * h * seq;
  EXPECT_DOUBLE_EQ(3 * c.model.recompute_flops_per_token(seq, Recompute::selective), seq_term);
  EXPECT_EQ(c.model.recompute_flops_per_token(seq, Recompute::none), 0.0);
  double per_module = 0;
  for (int m = 0; m < int(c.model.modules.size()); ++m)
    per_module += module_recompute_flops(c.model, m, tokens, seq, Recompute::selective);
  EXPECT_DOUBLE_EQ(per_module, c.model.recompute_flops_per_token(seq, Recompute::selective) * tokens);
}

TEST(Simulator, EachOverlapSwitchCanOnlyAddTime) {
  Case c;
  for (const char* plan :
       {"zero3", "p=1x1,g=1x1,os=4x2", "p=4x1,g=4x2,os=4x2", "mics", "zeropp", "zero2", "fsdp", "hsdp", "ddp"}) {
    const double per_byte = 2e-9;
    auto all = c.run(c.schedule(plan, 3, Overlap::all), per_byte);
    auto no_bcast = c.run(c.schedule(plan, 3, Overlap::no_bcast), per_byte);
    auto no_ar = c.run(c.schedule(plan, 3, Overlap::no_allreduce), per_byte);
    auto none = c.run(c.schedule(plan, 3, Overlap::none), per_byte);
    EXPECT_LE(all.step_s, no_bcast.step_s + 1e-12) << plan;
    EXPECT_LE(no_bcast.step_s, no_ar.step_s + 1e-12) << plan;
    EXPECT_LE(no_ar.step_s, none.step_s + 1e-12) << plan;
    EXPECT_GE(all.exposed_comm_s, 0);
    // Without overlap every collective is exposed.
    EXPECT_NEAR(none.step_s, none.forward_s + none.backward_s + none.optimizer_s + none.comm_busy_s, 1e-9) << plan;
  }
}

TEST(Simulator, BroadcastHidesBehindALongForward) {
  Case c;
  c.rates.sustained_flops_per_s = 1e8;  // slow compute: the broadcast fits under the forward
  auto all = c.run(c.schedule("p=1x1,g=1x1,os=4x1", 1, Overlap::all), 1e-12);
  auto no_bcast = c.run(c.schedule("p=1x1,g=1x1,os=4x1", 1, Overlap::no_bcast), 1e-12);
  EXPECT_LT(all.exposed_comm_s, no_bcast.exposed_comm_s);
}

}  // namespace
}  // namespace lins
