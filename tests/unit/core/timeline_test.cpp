// The step program, against its rule written out the slow way: at each point the previous step's ops waited for
// there, the waits for ops issued earlier, the issues, the waits for ops issued at this very point, then the task the
// point comes before; ops of each group in op order. Every engine and overlap mode.
#include "core/schedule/timeline.h"

#include <gtest/gtest.h>

#include "core/cost/contention.h"

namespace lins {
namespace {

std::vector<Action> program_by_rule(const Schedule& s) {
  std::vector<Action> out;
  const int slots = 2 * s.shape.task_count() + 1;
  for (int slot = 1; slot < slots; ++slot) {
    for (int i = 0; i < int(s.ops.size()); ++i)
      if (s.ops[i].wait.next_step && s.ops[i].wait.slot == slot) out.push_back({Action::Kind::wait, i, true});
    for (int i = 0; i < int(s.ops.size()); ++i)
      if (!s.ops[i].wait.next_step && s.ops[i].wait.slot == slot && s.ops[i].issue.slot < slot)
        out.push_back({Action::Kind::wait, i, false});
    for (int i = 0; i < int(s.ops.size()); ++i)
      if (s.ops[i].issue.slot == slot) out.push_back({Action::Kind::issue, i, false});
    for (int i = 0; i < int(s.ops.size()); ++i)
      if (!s.ops[i].wait.next_step && s.ops[i].wait.slot == slot && s.ops[i].issue.slot == slot)
        out.push_back({Action::Kind::wait, i, false});
    if (slot % 2 == 1) out.push_back({Action::Kind::compute, slot / 2, false});
  }
  return out;
}

TEST(StepProgram, FollowsItsRuleForEveryEngineAndOverlapMode) {
  const ModelSpec model = make_model_preset("small").value();
  const Topology topo{4, 2};
  for (const char* plan : {"ddp", "zero1", "zero2", "zero3", "mics", "zeropp", "fsdp", "hsdp", "p=4x1,g=4x2,os=4x2",
                           "p=1x1,g=1x1,os=4x2", "p=2x1,g=2x1,os=4x1"})
    for (Overlap overlap : kOverlapNames.values()) {
      ScheduleOptions o;
      o.micro_batches = 3;
      o.expand_micro_batches = true;
      o.bucket_bytes = 64 << 10;
      o.overlap = overlap;
      o.engine.ds_reduce_bucket_elems = 100'000;
      o.engine.ds_prefetch_bucket_elems = 10'000;
      auto s = build_schedule(model, parse_plan(plan, topo).value(), topo, o);
      ASSERT_TRUE(s) << s.error();
      EXPECT_EQ(step_program(*s), program_by_rule(*s)) << plan << " " << overlap_name(overlap);
    }
}

// ---- contention: hand-computed timelines
// ----------------------------------------------------------------------------- One module, one micro-batch: three
// tasks (forward, backward, optimizer) of 1 s each; ops of 1 s on their own streams.
struct Tiny {
  Schedule s;
  std::vector<Action> program;
  TimelineCosts costs;
  std::vector<double> latency;
  Contention c;
  explicit Tiny(std::vector<Axis> op_axes) {
    s.shape.micro_batches = 1;
    s.shape.modules = 1;
    for (std::size_t i = 0; i < op_axes.size(); ++i) {
      CommOp op;
      op.stream = static_cast<int>(i);
      op.mesh = op_axes[i] == Axis::inter ? Mesh{1, 2} : Mesh{2, 1};
      s.ops.push_back(op);
      s.streams.push_back("s" + std::to_string(i));
    }
    latency.assign(op_axes.size(), 0.0);
    costs.compute_s = [](int) { return 1.0; };
    costs.op_s = [](int) { return 1.0; };
  }
  TimelineResult run() {
    costs.rates = timeline_rates(
        c, s, [](int) { return TaskClass::gemm; }, [this](int op) { return latency[static_cast<std::size_t>(op)]; });
    return run_timeline(s, program, costs);
  }
};
constexpr auto kIssue = Action::Kind::issue;
constexpr auto kWait = Action::Kind::wait;
constexpr auto kCompute = Action::Kind::compute;

TEST(TimelineContention, ComputeAndTransferSlowEachOtherWhileBothRun) {
  Tiny t({Axis::intra});
  t.program = {{kIssue, 0}, {kCompute, 0}, {kCompute, 1}, {kCompute, 2}, {kWait, 0}};
  t.c.kappa[int(TaskClass::gemm)][0] = 0.5;  // compute at 2/3 beside the op
  t.c.lambda[0] = 1.0;                       // the op at 1/2 beside compute
  const TimelineResult r = t.run();
  // Both run from 0: the forward ends at 1.5 (1 s at 2/3) with 0.75 s of the op done; the backward starts at once, the
  // op ends at 2.0; the backward's last 2/3 s run alone (to 2.667); the optimizer alone to 3.667.
  EXPECT_NEAR(r.ops[0].end_s, 2.0, 1e-12);
  EXPECT_NEAR(r.task_s[0], 1.5, 1e-12);
  EXPECT_NEAR(r.task_s[1], 0.5 + 2.0 / 3.0, 1e-12);
  EXPECT_NEAR(r.task_s[2], 1.0, 1e-12);
  EXPECT_NEAR(r.step_s, 3.0 + 2.0 / 3.0, 1e-12);
  EXPECT_NEAR(r.compute_stretch_s, 2.0 / 3.0, 1e-12);
  EXPECT_EQ(r.waited_s, 0.0);
}

TEST(TimelineContention, LatencyDoesNotStretch) {
  Tiny t({Axis::inter});
  t.program = {{kIssue, 0}, {kCompute, 0}, {kWait, 0}, {kCompute, 1}, {kCompute, 2}};
  t.costs.compute_s = [](int task) { return task == 0 ? 5.0 : 1.0; };
  t.latency[0] = 0.5;
  t.c.lambda[1] = 1.0;
  const TimelineResult r = t.run();
  EXPECT_NEAR(r.ops[0].end_s, 1.5, 1e-12);  // 0.5 s of latency at full rate, then 0.5 s of transfer at 1/2
  EXPECT_NEAR(r.step_s, 7.0, 1e-12);
}

TEST(TimelineContention, OpsOfOneFabricShareItAndOpsOfOneStreamQueue) {
  Tiny t({Axis::inter, Axis::inter});
  t.program = {{kIssue, 0}, {kIssue, 1}, {kWait, 0}, {kWait, 1}, {kCompute, 0}, {kCompute, 1}, {kCompute, 2}};
  t.c.links_shared = true;
  t.c.eta = 0.8;  // two ops each at 0.4
  TimelineResult r = t.run();
  EXPECT_NEAR(r.ops[0].end_s, 2.5, 1e-12);
  EXPECT_NEAR(r.ops[1].end_s, 2.5, 1e-12);
  EXPECT_NEAR(r.waited_s, 2.5, 1e-12);
  // Different fabrics do not share.
  Tiny u({Axis::intra, Axis::inter});
  u.program = t.program;
  u.c = t.c;
  r = u.run();
  EXPECT_NEAR(r.ops[0].end_s, 1.0, 1e-12);
  EXPECT_NEAR(r.ops[1].end_s, 1.0, 1e-12);
  // One stream: the second waits for the first and runs alone (no sharing).
  Tiny v({Axis::inter, Axis::inter});
  v.s.ops[1].stream = 0;
  v.program = t.program;
  v.c = t.c;
  r = v.run();
  EXPECT_NEAR(r.ops[0].end_s, 1.0, 1e-12);
  EXPECT_NEAR(r.ops[1].start_s, 1.0, 1e-12);
  EXPECT_NEAR(r.ops[1].end_s, 2.0, 1e-12);
}

TEST(TimelineContention, KappasOfTwoFabricsAddOrTakeTheLarger) {
  for (KappaCombine combine : {KappaCombine::sum, KappaCombine::max}) {
    Tiny t({Axis::intra, Axis::inter});
    t.costs.op_s = [](int) { return 10.0; };  // both run through the forward
    t.program = {{kIssue, 0}, {kIssue, 1}, {kCompute, 0}, {kWait, 0}, {kWait, 1}, {kCompute, 1}, {kCompute, 2}};
    t.c.kappa[int(TaskClass::gemm)][0] = 0.2;
    t.c.kappa[int(TaskClass::gemm)][1] = 0.3;
    t.c.combine = combine;
    const TimelineResult r = t.run();
    EXPECT_NEAR(r.task_s[0], combine == KappaCombine::sum ? 1.5 : 1.3, 1e-12) << kKappaCombineNames.name(combine);
    EXPECT_NEAR(r.task_s[1], 1.0, 1e-12);
  }
}

TEST(TimelineContention, NoContentionGivesNoRates) {
  Tiny t({Axis::intra});
  EXPECT_FALSE(t.c.any());
  const TimelineRates rates = timeline_rates(t.c, t.s, nullptr, nullptr);
  EXPECT_FALSE(rates.compute);
  EXPECT_FALSE(rates.transfer);
  t.c.links_shared = true;
  EXPECT_TRUE(t.c.any());
}

}  // namespace
}  // namespace lins
