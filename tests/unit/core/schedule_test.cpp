// The schedule against the closed forms of the paper's communication model (docs/cost-model.md) and the volumes the
// real systems move (docs/engines.md).
#include "core/schedule/schedule.h"

#include <gtest/gtest.h>

#include <random>

namespace lins {
namespace {

// Every module's size is a multiple of 64, so no padding muddies the closed forms up to 64 ranks.
ModelSpec even_model() { return make_model({64, 2, 4, 128, 256}).value(); }

// DeepSpeed's thresholds are in elements; on this small model its defaults keep every module gathered (persistent) or
// never released. `gather_everything` sets them to the regime of a LLaMA-sized model: every module gathered in
// forward and again in backward.
EngineOptions gather_everything() {
  EngineOptions e;
  e.ds_param_persistence_threshold_elems = 0;
  e.ds_max_reuse_distance_elems = 0;
  e.ds_prefetch_bucket_elems = 1;
  return e;
}

Schedule build(const std::string& plan_text, Topology topo, int M = 1, int64_t bucket = 1 << 20,
               EngineOptions engine = gather_everything()) {
  auto model = even_model();
  auto plan = parse_plan(plan_text, topo);
  EXPECT_TRUE(plan) << plan.error();
  ScheduleOptions o;
  o.micro_batches = M;
  o.bucket_bytes = bucket;
  o.engine = engine;
  auto s = build_schedule(model, *plan, topo, o);
  EXPECT_TRUE(s) << s.error();
  return *s;
}

TEST(Schedule, DdpAllReducesTwoPhiBytesOnce) {
  const Topology t{4, 2};
  const double phi = even_model().param_count();
  for (int M : {1, 3}) {
    auto s = build("ddp", t, M);
    EXPECT_DOUBLE_EQ(s.message_bytes(), 2 * phi);
    EXPECT_DOUBLE_EQ(s.bus_bytes(CollKind::all_reduce), 2 * phi * 2.0 * 7 / 8);
    EXPECT_DOUBLE_EQ(s.bus_bytes(), s.bus_bytes(CollKind::all_reduce));
  }
}

TEST(Schedule, ZeroThreeMovesOneAndAHalfTimesDdp) {
  const Topology t{4, 2};
  EXPECT_DOUBLE_EQ(build("zero3", t).bus_bytes(), 1.5 * build("ddp", t).bus_bytes());
  // FSDP2 (wrapped as torchtitan does) keeps the head gathered from forward to backward: it is gathered once.
  const auto model = even_model();
  const double root = double(model.modules.back().elems);
  const double phi = double(model.param_count());
  EXPECT_DOUBLE_EQ(build("fsdp", t).bus_bytes(), build("ddp", t).bus_bytes() * (1.5 - root / phi / 2));
}

TEST(Schedule, DeepSpeedDefaultsKeepASmallModelPersistent) {
  // Every module of this model is under stage3_param_persistence_threshold: DeepSpeed never gathers it during the
  // step, reduce-scatters the gradient and all-gathers the updated shards after the optimizer: DDP's bus bytes.
  const Topology t{4, 2};
  auto s = build("zero3", t, 1, 1 << 20, EngineOptions{});
  EXPECT_DOUBLE_EQ(s.bus_bytes(), build("ddp", t).bus_bytes());
  for (const auto& op : s.ops) EXPECT_NE(op.purpose, Purpose::forward_gather);
}

TEST(Schedule, ZeroOneAndTwoAllReduceTheGradient) {
  // DeepSpeed's stage_1_and_2.py reduces each bucket with an all-reduce (its default use_multi_rank_bucket_allreduce
  // path), then all-gathers the updated partitions: DDP's all-reduce plus half of it again.
  const Topology t{8, 4};
  const double ddp = build("ddp", t).bus_bytes();
  EXPECT_DOUBLE_EQ(build("zero1", t).bus_bytes(), 1.5 * ddp);
  EXPECT_DOUBLE_EQ(build("zero2", t).bus_bytes(), 1.5 * ddp);
  // With accumulation ZeRO-1 still reduces once; ZeRO-2 reduces every micro-batch.
  EXPECT_DOUBLE_EQ(build("zero1", t, 4).bus_bytes(), 1.5 * build("ddp", t, 4).bus_bytes());
  EXPECT_DOUBLE_EQ(build("zero2", t, 4).bus_bytes(), ddp * (4 + 0.5));
  for (const auto& op : build("zero2", t, 4).ops)
    EXPECT_TRUE(op.kind == CollKind::all_reduce || op.purpose == Purpose::update_gather) << op.label;
}

TEST(Schedule, MicsSplitsIntraGroupAndInterGroupTraffic) {
  const int R = 8, N = 4, M = 2;
  const double phi = even_model().param_count();
  auto s = build("mics", Topology{R, N}, M);
  EXPECT_DOUBLE_EQ(s.bus_bytes(Axis::intra), M * 3 * 2 * phi * (R - 1) / R);
  EXPECT_DOUBLE_EQ(s.bus_bytes(Axis::inter), 2 * phi / R * 2.0 * (N - 1) / N);
  for (const auto& op : s.ops)
    if (op.axis() == Axis::inter) {
      EXPECT_EQ(op.kind, CollKind::all_reduce);
      EXPECT_EQ(op.mesh, (Mesh{1, N}));
    }
}

TEST(Schedule, HpzCrossesNodesLessThanZeroThree) {
  // ZeRO-3 gathers forward and backward and reduce-scatters across nodes in every micro-batch (3M units); ZeRO++
  // gathers across nodes only in the first forward of the step, every later gather reads its secondary copy inside
  // the node, and reduce-scatters as ZeRO-3 (1 + M units).
  const Topology t{8, 4};
  for (int M : {1, 2, 3}) {
    auto hpz = build("zeropp", t, M), z3 = build("zero3", t, M);
    EXPECT_DOUBLE_EQ(hpz.bus_bytes(Axis::inter), z3.bus_bytes(Axis::inter) * (1 + M) / (3 * M)) << M;
    EXPECT_GT(hpz.bus_bytes(Axis::intra), 0);
  }
}

// The communication model's terms T_p, T_g, T_os0, T_os1 (docs/method.md, "The communication model") for
// arbitrary legal 6-tuples: message bytes per term and the groups' meshes.
TEST(Schedule, LinsTermsMatchThePapersFormulas) {
  std::mt19937 rng(11);
  const int gpus[] = {1, 2, 4, 8};
  const int nodes[] = {1, 2, 4, 8};
  const double phi = even_model().param_count();
  int checked = 0;
  for (int trial = 0; trial < 60; ++trial) {
    const Topology t{gpus[rng() % 4], nodes[rng() % 4]};
    auto plans = enumerate_legal_plans(t);
    const Plan plan = plans[rng() % plans.size()];
    const int M = 1 + rng() % 4;
    const int64_t U = int64_t(1) << (10 + rng() % 8);
    ScheduleOptions o;
    o.micro_batches = M;
    o.bucket_bytes = U;
    o.rank = rng() % t.world();
    auto s = build_schedule(even_model(), plan, t, o);
    ASSERT_TRUE(s) << s.error();
    const int sp = plan.p.total(), sg = plan.g.total(), sos = plan.os.total(), sdp = t.world();
    const double two_phi = 2 * phi;
    double param = 0, grad = 0, sync = 0, bcast = 0;
    int64_t sync_ops = 0, bcast_ops = 0;
    for (const auto& op : s->ops) {
      const double b = double(op.bytes()) * op.repeat;
      switch (op.term) {
        case Term::param:
          param += b;
          break;
        case Term::grad:
          grad += b;
          break;
        case Term::os_sync:
          sync += b;
          sync_ops += op.repeat;
          EXPECT_EQ(op.mesh, (Mesh{t.gpus_per_node / plan.p.intra, t.nodes / plan.p.inter})) << plan.to_string();
          break;
        case Term::os_bcast:
          bcast += b;
          bcast_ops += op.repeat;
          EXPECT_EQ(op.mesh, (Mesh{plan.os.intra / plan.p.intra, plan.os.inter / plan.p.inter}));
          break;
      }
      if (op.term == Term::param) {
        EXPECT_EQ(op.mesh, (Mesh{plan.p.intra, plan.p.inter}));
      }
      if (op.term == Term::grad) {
        EXPECT_EQ(op.mesh, (Mesh{plan.g.intra / plan.p.intra, plan.g.inter / plan.p.inter}));
      }
    }
    EXPECT_DOUBLE_EQ(param, sp > 1 ? M * 3 * two_phi : 0) << plan.to_string();
    EXPECT_DOUBLE_EQ(grad, sg > sp ? (M - 1) * two_phi / sp : 0) << plan.to_string();
    EXPECT_DOUBLE_EQ(sync, sdp > sp ? two_phi / sp : 0) << plan.to_string();
    EXPECT_DOUBLE_EQ(bcast, sos > sp ? two_phi / sp : 0) << plan.to_string();
    if (sdp > sp) {
      EXPECT_EQ(sync_ops, (int64_t(2 * phi / sp) + U - 1) / U) << plan.to_string() << " U=" << U;
    }
    // Broadcasts go module by module: one per (module, owner owning part of it); each carries exactly that owner's
    // elements inside the module.
    if (sos > sp) {
      EXPECT_GE(bcast_ops, 1);
      EXPECT_LE(bcast_ops, int64_t(s->layout.modules.size()) * (sos / sp));
    } else {
      EXPECT_EQ(bcast_ops, 0);
    }
    ++checked;
  }
  EXPECT_EQ(checked, 60);
}

TEST(Schedule, CompressedAndExpandedAgree) {
  auto model = even_model();
  const Topology t{4, 2};
  auto plan = parse_plan("p=2x1,g=4x2,os=4x2", t).value();
  ScheduleOptions o;
  o.micro_batches = 5;
  auto compressed = build_schedule(model, plan, t, o).value();
  o.expand_micro_batches = true;
  auto expanded = build_schedule(model, plan, t, o).value();
  EXPECT_DOUBLE_EQ(compressed.bus_bytes(), expanded.bus_bytes());
  EXPECT_EQ(compressed.op_count(), expanded.op_count());
  for (const auto& op : expanded.ops) EXPECT_EQ(op.repeat, 1);
}

TEST(Schedule, BroadcastsFollowForwardOrderAndCoverEachOwnersSlices) {
  auto model = even_model();
  const Topology t{4, 2};
  for (const char* text : {"p=1x1,g=1x1,os=4x2", "p=2x1,g=4x2,os=4x2", "p=1x1,g=1x1,os=4x1,layout=intra"}) {
    auto plan = parse_plan(text, t).value();
    ScheduleOptions o;
    o.rank = 5;
    auto s = build_schedule(model, plan, t, o).value();
    std::vector<int64_t> sent(s.layout.owner_count, 0);
    int last_module = -1;
    for (const auto& op : s.ops) {
      if (op.kind != CollKind::broadcast) continue;
      EXPECT_GE(op.module, last_module) << text;
      last_module = op.module;
      sent[op.root] += op.elems;
      const auto& ms = s.layout.modules[op.module];
      if (!op.in_place) {
        EXPECT_EQ(op.local_offset, ms.local_offset);
        continue;
      }
      // In place: the owner's part of the module is the one range [local_offset, + elems) of its slices.
      EXPECT_GE(op.local_offset, ms.local_offset);
      EXPECT_LE(op.local_offset + op.elems, ms.local_offset + ms.shard_elems);
      int64_t covered = 0;
      for (const auto& sl : s.layout.slices())
        if (sl.owner == op.root)
          covered += std::max<int64_t>(0, std::min(sl.local_offset + sl.elems, op.local_offset + op.elems) -
                                              std::max(sl.local_offset, op.local_offset));
      EXPECT_EQ(covered, op.elems) << text << " " << op.label;
    }
    for (int k = 0; k < s.layout.owner_count; ++k)
      EXPECT_EQ(sent[k], s.layout.owner_elems(k)) << text << " owner " << k;
  }
}

TEST(Schedule, RejectsBadOptions) {
  auto model = even_model();
  const Topology t{2, 1};
  auto plan = parse_plan("ddp", t).value();
  ScheduleOptions o;
  o.micro_batches = 0;
  EXPECT_FALSE(build_schedule(model, plan, t, o));
  o.micro_batches = 1;
  o.bucket_bytes = 0;
  EXPECT_FALSE(build_schedule(model, plan, t, o));
  o.bucket_bytes = 1024;
  o.rank = 2;
  EXPECT_FALSE(build_schedule(model, plan, t, o));
}

}  // namespace
}  // namespace lins

namespace lins {
namespace {

TEST(Schedule, RefusesABucketThatWouldMakeMillionsOfOps) {
  // A 1 KiB bucket on LLaMA-7B would be 13 million bucket ops per micro-batch: refused at once, naming the smallest
  // bucket allowed, on every engine that cuts buckets.
  const auto model = make_model_preset("llama-7b").value();
  const Topology t{8, 1};
  for (const char* plan : {"ddp", "p=1x1,g=1x1,os=8x1", "p=1x1,g=8x1,os=8x1"}) {
    ScheduleOptions o;
    o.bucket_bytes = 1024;
    auto s = build_schedule(model, parse_plan(plan, t).value(), t, o);
    ASSERT_FALSE(s) << plan;
    EXPECT_NE(s.error().find("the smallest --bucket allowed is"), std::string::npos) << s.error();
  }
  ScheduleOptions o;
  o.engine.ds_reduce_bucket_elems = 16;
  auto s = build_schedule(model, parse_plan("zero2", t).value(), t, o);
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().find("--ds-reduce-bucket"), std::string::npos) << s.error();
  // The smallest bucket named is accepted, and every micro-batch of an expanded step counts against the total.
  ScheduleOptions ok;
  ok.bucket_bytes = 256 << 10;
  EXPECT_TRUE(build_schedule(model, parse_plan("ddp", t).value(), t, ok));
  ok.micro_batches = 128;
  ok.expand_micro_batches = true;
  auto big = build_schedule(model, parse_plan("p=1x1,g=8x1,os=8x1", t).value(), t, ok);
  ASSERT_FALSE(big);
  EXPECT_NE(big.error().find("fewer micro-batches"), std::string::npos) << big.error();
}

}  // namespace
}  // namespace lins

// check_points (schedule.cpp) refuses each broken rule with its own message: one test per refusal, each starting from
// a valid expanded schedule and breaking one field of one op (or of one compute task's parameters).
namespace lins {
namespace {

// The Lins engine with every kind of op: sharded P (gathers, reduce-scatters, tasks reading gathers), bucket
// all-reduces on a second stream that run after a reduce-scatter, and broadcasts waited in the next step.
Schedule valid_points() {
  const Topology t{4, 2};
  ScheduleOptions o;
  o.micro_batches = 2;
  o.bucket_bytes = 2048;
  o.expand_micro_batches = true;
  auto s = build_schedule(make_model_preset("tiny").value(), parse_plan("p=2x1,g=4x2,os=4x2", t).value(), t, o);
  EXPECT_TRUE(s) << s.error();
  EXPECT_TRUE(check_points(*s));
  return *s;
}

// The first op from index `from` on that matches `pred`.
template <class Pred>
int find_op(const Schedule& s, Pred pred, std::size_t from = 0) {
  for (std::size_t i = from; i < s.ops.size(); ++i)
    if (pred(s.ops[i])) return static_cast<int>(i);
  ADD_FAILURE() << "no such op in the schedule";
  return 0;
}

// check_points's message for op i as it is now.
std::string op_refusal(const Schedule& s, int i, const std::string& why) {
  const CommOp& op = s.ops[static_cast<std::size_t>(i)];
  return "schedule: op " + std::to_string(i) + " (" + purpose_name(op.purpose) + " " + op.label + ", issued " +
         s.shape.describe(op.issue) + ", waited " + s.shape.describe(op.wait) + ") " + why;
}

std::string refusal_of(const Schedule& s) {
  const Status st = check_points(s);
  return st ? std::string("<accepted>") : st.error();
}

TEST(CheckPoints, RefusesAnIssueOutsideTheStep) {
  const Schedule valid = valid_points();
  const int i = find_op(valid, [](const CommOp& op) { return op.purpose == Purpose::backward_gather; });
  for (const Point issue :
       {Point{valid.ops[i].issue.slot, true}, Point{0, false}, Point{valid.shape.end_of_step().slot + 1, false}}) {
    Schedule s = valid;
    s.ops[i].issue = issue;
    if (issue.next_step) s.ops[i].wait = issue;  // not waited before it is issued either way
    EXPECT_EQ(refusal_of(s), op_refusal(s, i, "is issued outside the step")) << issue.slot;
  }
}

TEST(CheckPoints, RefusesAWaitBeforeTheIssue) {
  Schedule s = valid_points();
  const int i = find_op(s, [](const CommOp& op) { return op.purpose == Purpose::grad_reduce_scatter; });
  s.ops[i].wait = Point{s.ops[i].issue.slot - 1, false};
  EXPECT_EQ(refusal_of(s), op_refusal(s, i, "is waited for before it is issued"));
}

TEST(CheckPoints, RefusesANextStepWaitOfAnOpNotIssuedAtTheEnd) {
  Schedule s = valid_points();
  const int i = find_op(s, [](const CommOp& op) { return op.purpose == Purpose::forward_gather; });
  s.ops[i].wait = StepShape::in_next_step(s.ops[i].wait);
  EXPECT_EQ(refusal_of(s), op_refusal(s, i, "waits in the next step but is not issued at the end of this one"));
}

TEST(CheckPoints, RefusesAWaitAfterTheEndOfTheNextStep) {
  Schedule s = valid_points();
  const int i = find_op(s, [](const CommOp& op) { return op.wait.next_step; });
  ASSERT_EQ(s.ops[i].purpose, Purpose::update_broadcast);
  s.ops[i].wait = StepShape::in_next_step(s.shape.end_of_step());
  EXPECT_EQ(refusal_of(s), op_refusal(s, i, "is waited for after the end of the next step"));
}

TEST(CheckPoints, RefusesAnUnnamedStream) {
  const Schedule valid = valid_points();
  const int i = find_op(valid, [](const CommOp& op) { return op.purpose == Purpose::forward_gather; });
  for (const int stream : {-1, static_cast<int>(valid.streams.size())}) {
    Schedule s = valid;
    s.ops[i].stream = stream;
    EXPECT_EQ(refusal_of(s), op_refusal(s, i, "runs on an unnamed stream")) << stream;
  }
}

TEST(CheckPoints, RefusesRunningAfterAnOpNotBeforeIt) {
  const Schedule valid = valid_points();
  const int i = find_op(valid, [](const CommOp& op) { return op.after >= 0; });
  for (const int after : {i, i + 1}) {
    Schedule s = valid;
    s.ops[i].after = after;
    EXPECT_EQ(refusal_of(s), op_refusal(s, i, "runs after an op that is not issued before it")) << after;
  }
}

TEST(CheckPoints, RefusesRunningAfterAnOpOnItsOwnStream) {
  Schedule s = valid_points();
  const int first = find_op(s, [](const CommOp& op) { return op.after >= 0; });
  const int i = find_op(
      s, [](const CommOp& op) { return op.after >= 0; }, static_cast<std::size_t>(first) + 1);
  ASSERT_EQ(s.ops[i].stream, s.ops[first].stream);
  s.ops[i].after = first;
  EXPECT_EQ(refusal_of(s), op_refusal(s, i, "names an op on its own stream as the one it runs after"));
}

TEST(CheckPoints, RefusesRunningAfterAnOpIssuedLater) {
  Schedule s = valid_points();
  const int i = find_op(s, [](const CommOp& op) { return op.after >= 0; });
  const CommOp& dep = s.ops[static_cast<std::size_t>(s.ops[i].after)];
  ASSERT_NE(dep.stream, s.ops[i].stream);
  s.ops[i].issue = Point{dep.issue.slot - 1, false};
  EXPECT_EQ(refusal_of(s), op_refusal(s, i, "runs after an op that is issued later"));
}

// The first compute task that reads a gather's output.
int gathered_task(const Schedule& s) {
  for (std::size_t t = 0; t < s.task_params.size(); ++t)
    if (s.task_params[t].source == TaskParams::Source::gathered) return static_cast<int>(t);
  ADD_FAILURE() << "no task reads a gather";
  return 0;
}

TEST(CheckPoints, RefusesATaskReadingAGatherNotInTheSchedule) {
  const Schedule valid = valid_points();
  const int t = gathered_task(valid);
  for (const int op : {-1, static_cast<int>(valid.ops.size())}) {
    Schedule s = valid;
    s.task_params[static_cast<std::size_t>(t)].gather_op = op;
    EXPECT_EQ(refusal_of(s),
              "schedule: compute task " + std::to_string(t) + " reads a gather that is not in the schedule")
        << op;
  }
}

TEST(CheckPoints, RefusesATaskReadingAGatherWaitedForLater) {
  Schedule s = valid_points();
  const int t = gathered_task(s);
  CommOp& g = s.ops[static_cast<std::size_t>(s.task_params[static_cast<std::size_t>(t)].gather_op)];
  g.wait = s.shape.end_of_step();
  EXPECT_EQ(refusal_of(s), "schedule: compute task " + std::to_string(t) + " (" +
                               s.shape.describe(StepShape::before(t)) + ") reads gather " + g.label +
                               " that is waited for only the end of the step");
}

}  // namespace
}  // namespace lins
