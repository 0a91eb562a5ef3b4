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
    return project_step(s, model, 128, 2, false, rates,
                        [&](const CommOp& op) { return 1e-6 + op.bytes() * seconds_per_byte; });
  }
};

TEST(Simulator, FreeCommunicationCostsOnlyCompute) {
  Case c;
  auto s = c.schedule("zero3");
  auto p = project_step(s, c.model, 128, 2, false, c.rates, [](const CommOp&) { return 0.0; });
  EXPECT_GT(p.forward_s, 0);
  EXPECT_NEAR(p.backward_s, 2 * p.forward_s, 1e-12);
  EXPECT_NEAR(p.step_s, p.forward_s + p.backward_s + p.optimizer_s, 1e-12);
  EXPECT_NEAR(p.exposed_comm_s, 0, 1e-12);
}

TEST(Simulator, ComputeMatchesTheMegatronFlopsOfTheModel) {
  Case c;
  auto s = c.schedule("ddp", 1);
  auto p = project_step(s, c.model, 128, 2, false, c.rates, [](const CommOp&) { return 0.0; });
  // Per token: 3 x forward; the Megatron formula counts the same matmuls (its LM head term is 2Vh forward per token).
  const double tokens = 256;
  EXPECT_NEAR((p.forward_s + p.backward_s) * c.rates.sustained_flops_per_s / tokens, c.model.flops_per_token(128),
              0.02 * c.model.flops_per_token(128));
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
