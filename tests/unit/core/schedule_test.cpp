// The schedule against the closed forms of PAPER.md section 4 and the baselines' known volumes.
#include "core/schedule.h"

#include <gtest/gtest.h>

#include <random>

namespace lins {
namespace {

// Every module's size is a multiple of 64, so no padding muddies the closed forms up to 64 ranks.
ModelSpec even_model() { return make_model({64, 2, 4, 128, 256}).value(); }

Schedule build(const std::string& plan_text, Topology topo, int M = 1, int64_t bucket = 1 << 20) {
  auto model = even_model();
  auto plan = parse_plan(plan_text, topo);
  EXPECT_TRUE(plan) << plan.error();
  ScheduleOptions o;
  o.micro_batches = M;
  o.bucket_bytes = bucket;
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
}

TEST(Schedule, ZeroOneAndTwoMoveWhatDdpMoves) {
  const Topology t{8, 4};
  const double ddp = build("ddp", t).bus_bytes();
  EXPECT_DOUBLE_EQ(build("zero1", t).bus_bytes(), ddp);
  EXPECT_DOUBLE_EQ(build("zero2", t).bus_bytes(), ddp);
  // With accumulation ZeRO-1 still syncs once; ZeRO-2 reduce-scatters every micro-batch.
  EXPECT_DOUBLE_EQ(build("zero1", t, 4).bus_bytes(), build("ddp", t, 4).bus_bytes());
  EXPECT_DOUBLE_EQ(build("zero2", t, 4).bus_bytes(), ddp * (4 + 1) / 2);  // 4 reduce-scatters + 1 all-gather
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
  const Topology t{8, 4};
  auto hpz = build("zeropp", t, 2), z3 = build("zero3", t, 2);
  EXPECT_LT(hpz.bus_bytes(Axis::inter), z3.bus_bytes(Axis::inter));
  EXPECT_DOUBLE_EQ(hpz.bus_bytes(Axis::inter), z3.bus_bytes(Axis::inter) * 2 / 3);
  EXPECT_GT(hpz.bus_bytes(Axis::intra), 0);
}

// PAPER.md section 4 for arbitrary legal 6-tuples: message bytes per term and the groups' meshes.
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
      EXPECT_EQ(op.local_offset, s.layout.modules[op.module].local_offset);
    }
    for (int k = 0; k < s.layout.owner_count; ++k)
      EXPECT_EQ(sent[k], s.layout.owner_elems[k]) << text << " owner " << k;
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
