// Cost model: profile parsing (good and every kind of bad line), log-linear interpolation, the alpha-beta fallback,
// shared-link pricing against the paper's isolated pricing, and fallback counting.
#include "core/cost/cost_model.h"

#include <gtest/gtest.h>

#include <cmath>

namespace lins {
namespace {

const char* kGood =
    "# measured by lins comm --profile on a test cluster\n"
    "op,mesh_intra,mesh_inter,message_bytes,time_s,algbw_gbps,busbw_gbps\n"
    "all_gather,8,1,1048576,0.0001,10,8.75\n"
    "all_gather,8,1,4194304,0.0001,30,26.25\n"
    "\n"
    "all_reduce,8,2,1048576,0.001,1.0,1.875\n";

void expect_error(const std::string& text, const std::string& where_line, const std::string& what) {
  auto p = BandwidthProfile::parse(text, "prof.csv");
  ASSERT_FALSE(p) << "accepted: " << text;
  EXPECT_NE(p.error().find(where_line), std::string::npos) << p.error();
  EXPECT_NE(p.error().find(what), std::string::npos) << p.error();
}

TEST(Profile, ParsesAGoodFile) {
  auto p = BandwidthProfile::parse(kGood, "prof.csv");
  ASSERT_TRUE(p) << p.error();
  EXPECT_EQ(p->point_count(), 3u);
  EXPECT_TRUE(p->has(CollKind::all_gather, Mesh{8, 1}));
  EXPECT_TRUE(p->has(CollKind::all_reduce, Mesh{8, 2}));
  EXPECT_FALSE(p->has(CollKind::all_gather, Mesh{8, 2}));
  EXPECT_DOUBLE_EQ(*p->algbw_gbps(CollKind::all_gather, Mesh{8, 1}, 1048576), 10.0);
  EXPECT_FALSE(p->algbw_gbps(CollKind::broadcast, Mesh{8, 1}, 1e6));
}

TEST(Profile, FindsColumnsByNameAndIgnoresExtraOnes) {
  auto p = BandwidthProfile::parse(
      "host,algbw_gbps,message_bytes,mesh_inter,mesh_intra,op\nnodeA,5,1000,1,4,broadcast\n", "x.csv");
  ASSERT_TRUE(p) << p.error();
  EXPECT_DOUBLE_EQ(*p->algbw_gbps(CollKind::broadcast, Mesh{4, 1}, 1000), 5.0);
}

TEST(Profile, ReadsTheOtherToolsSpellingsOfAnOp) {
  auto p = BandwidthProfile::parse(
      "op,mesh_intra,mesh_inter,message_bytes,algbw_gbps\nallgather,2,1,1000,4\nAllReduce,2,1,1000,6\n", "x");
  ASSERT_TRUE(p) << p.error();
  EXPECT_DOUBLE_EQ(*p->algbw_gbps(CollKind::all_gather, Mesh{2, 1}, 1000), 4.0);
  EXPECT_DOUBLE_EQ(*p->algbw_gbps(CollKind::all_reduce, Mesh{2, 1}, 1000), 6.0);
}

TEST(Profile, RepeatedSizesAreAveraged) {
  auto p = BandwidthProfile::parse(
      "op,mesh_intra,mesh_inter,message_bytes,algbw_gbps\nall_reduce,2,1,1000,4\nall_reduce,2,1,1000,6\n", "x");
  ASSERT_TRUE(p) << p.error();
  EXPECT_DOUBLE_EQ(*p->algbw_gbps(CollKind::all_reduce, Mesh{2, 1}, 1000), 5.0);
}

TEST(Profile, RejectsEachKindOfBadLine) {
  const std::string h = "op,mesh_intra,mesh_inter,message_bytes,time_s,algbw_gbps,busbw_gbps\n";
  expect_error("", "prof.csv", "empty bandwidth profile");
  expect_error("# only a comment\n", "prof.csv", "empty bandwidth profile");
  expect_error(h, "prof.csv", "no measurements");
  expect_error("op,mesh_intra,message_bytes,algbw_gbps\nall_gather,8,1000,3\n", "prof.csv:1", "mesh_inter");
  expect_error(h + "all_gather,8,1,1048576,0.0001,10,8.75\nall_gather,8,1,2097\n", "prof.csv:3", "truncated");
  expect_error(h + "gather,8,1,1048576,0.0001,10,8.75\n", "prof.csv:2",
               "op: unknown collective 'gather'; valid: all_gather, reduce_scatter, all_reduce, broadcast");
  expect_error(h + "all_gather,eight,1,1048576,0.0001,10,8.75\n", "prof.csv:2", "mesh_intra 'eight'");
  expect_error(h + "all_gather,8,0,1048576,0.0001,10,8.75\n", "prof.csv:2", "mesh_inter '0'");
  expect_error(h + "all_gather,1,1,1048576,0.0001,10,8.75\n", "prof.csv:2", "single GPU");
  expect_error(h + "all_gather,8,1,-5,0.0001,10,8.75\n", "prof.csv:2", "message_bytes '-5'");
  expect_error(h + "all_gather,8,1,1048576,0.0001,nan,8.75\n", "prof.csv:2", "algbw_gbps 'nan'");
  expect_error(h + "all_gather,8,1,1048576,0.0001,inf,8.75\n", "prof.csv:2", "algbw_gbps 'inf'");
  expect_error(h + "all_gather,8,1,1048576,0.0001,0,8.75\n", "prof.csv:2", "positive finite bandwidth");
  expect_error(h + "all_gather,8,1,1e6x,0.0001,1,8.75\n", "prof.csv:2", "message_bytes '1e6x'");
  expect_error(h + std::string("\x01\x02\xff\xfe,garbage\n"), "prof.csv:2", "control characters");
  expect_error(h + "all_gather,8,1,\"1048576,0.0001,10,8.75\n", "prof.csv:2", "quoted field is never closed");
}

TEST(Profile, LoadNamesTheMissingFile) {
  auto p = BandwidthProfile::load("/nonexistent/profile.csv");
  ASSERT_FALSE(p);
  EXPECT_NE(p.error().find("/nonexistent/profile.csv"), std::string::npos);
  EXPECT_NE(p.error().find("lins comm --profile"), std::string::npos);
}

TEST(Profile, InterpolatesLogLinearlyInSize) {
  auto p = BandwidthProfile::parse(kGood, "prof.csv").value();
  const Mesh m{8, 1};
  // 2 MiB is halfway between 1 MiB and 4 MiB in log size: halfway between 10 and 30 GB/s.
  EXPECT_NEAR(*p.algbw_gbps(CollKind::all_gather, m, 2097152), 20.0, 1e-9);
  EXPECT_NEAR(*p.algbw_gbps(CollKind::all_gather, m, 1048576 * std::pow(4.0, 0.25)), 15.0, 1e-9);
  // Above the largest size the bandwidth stays; below the smallest the time stays (latency bound).
  EXPECT_DOUBLE_EQ(*p.algbw_gbps(CollKind::all_gather, m, 1e9), 30.0);
  EXPECT_DOUBLE_EQ(*p.time_s(CollKind::all_gather, m, 1024), *p.time_s(CollKind::all_gather, m, 1048576));
  EXPECT_DOUBLE_EQ(*p.time_s(CollKind::all_gather, m, 1048576), 1048576 / 10e9);
}

TEST(AlphaBeta, PresetsExistAndUnknownIsNamed) {
  for (const char* n : {"paper-a800", "h100-ndr", "ethernet-100g"}) EXPECT_TRUE(network_preset(n)) << n;
  auto bad = network_preset("infiniband");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("paper-a800"), std::string::npos);
  // The paper's intra/inter bandwidth ratio of about 2.
  auto a800 = network_preset("paper-a800").value();
  EXPECT_NEAR(a800.intra_gpu_gbps / a800.inter_node_gbps, 2.0, 0.01);
}

TEST(AlphaBeta, MonotoneInSizeAndInterSlowerThanIntra) {
  for (const auto& net : network_presets()) {
    for (int k = 0; k < kCollKindCount; ++k) {
      const auto op = static_cast<CollKind>(k);
      for (Mesh mesh : {Mesh{8, 1}, Mesh{2, 1}, Mesh{8, 2}, Mesh{8, 128}, Mesh{1, 16}}) {
        double prev = 0;
        for (double v = 1 << 10; v <= double(1ull << 32); v *= 4) {
          const double t = alpha_beta_time_s(net, op, v, mesh);
          EXPECT_GT(t, prev) << net.name << " " << coll_kind_name(op) << " " << mesh.to_string() << " " << v;
          prev = t;
        }
      }
      // The same group size across nodes is slower than inside one (equal where "nodes" share one machine's
      // memory, as cpu-local's emulated nodes do); more nodes is slower still.
      const double v = 256 << 20;
      const bool same_links = net.inter_gpu_gbps >= net.intra_gpu_gbps && net.inter_latency_s <= net.intra_latency_s;
      if (same_links)
        EXPECT_LE(alpha_beta_time_s(net, op, v, Mesh{8, 1}), alpha_beta_time_s(net, op, v, Mesh{1, 8})) << net.name;
      else
        EXPECT_LT(alpha_beta_time_s(net, op, v, Mesh{8, 1}), alpha_beta_time_s(net, op, v, Mesh{1, 8})) << net.name;
      EXPECT_LT(alpha_beta_time_s(net, op, v, Mesh{8, 2}), alpha_beta_time_s(net, op, v, Mesh{8, 16})) << net.name;
      EXPECT_EQ(alpha_beta_time_s(net, op, v, Mesh{1, 1}), 0.0);
    }
  }
}

TEST(AlphaBeta, SharingDividesTheNodesNetwork) {
  const auto net = network_preset("paper-a800").value();
  const double v = 1 << 30;
  // A 1 x 16 group (one GPU per node) alone can use one NIC (25 GB/s); eight of them share the node's 100 GB/s.
  const double alone = alpha_beta_time_s(net, CollKind::all_reduce, v, Mesh{1, 16}, 1);
  const double shared = alpha_beta_time_s(net, CollKind::all_reduce, v, Mesh{1, 16}, 8);
  EXPECT_NEAR(shared / alone, 2.0, 0.01);
  EXPECT_EQ(concurrent_groups(Mesh{1, 16}, Topology{8, 16}), 8);
  EXPECT_EQ(concurrent_groups(Mesh{2, 4}, Topology{8, 16}), 4);
  EXPECT_EQ(concurrent_groups(Mesh{8, 4}, Topology{8, 16}), 1);
  EXPECT_EQ(concurrent_groups(Mesh{2, 1}, Topology{8, 16}), 1);
}

Schedule build(const ModelSpec& m, const std::string& plan, Topology t, int M = 2) {
  ScheduleOptions o;
  o.micro_batches = M;
  o.bucket_bytes = 1 << 20;
  auto s = build_schedule(m, parse_plan(plan, t).value(), t, o);
  EXPECT_TRUE(s) << s.error();
  return *s;
}

TEST(CostModel, SharedLinksNeverCheaperAndEqualWhenNoGroupSharesANode) {
  const auto m = make_model_preset("small").value();
  const CostModel cost(network_preset("paper-a800").value());
  const Topology t{8, 4};
  int strictly_more = 0;
  auto plans = enumerate_legal_plans(t);
  for (const auto& b : {"ddp", "zero1", "zero2", "zero3", "mics", "zeropp"}) plans.push_back(parse_plan(b, t).value());
  for (const auto& plan : plans) {
    ScheduleOptions o;
    o.micro_batches = 2;
    o.bucket_bytes = 1 << 20;
    const auto s = build_schedule(m, plan, t, o).value();
    const auto iso = cost.price(s, Pricing::paper_isolated), sh = cost.price(s, Pricing::shared_links);
    EXPECT_GE(sh.total_s(), iso.total_s() * (1 - 1e-12)) << plan.to_string();
    bool shares = false;
    for (const auto& op : s.ops) shares |= concurrent_groups(op.mesh, t) > 1;
    if (!shares) {
      EXPECT_DOUBLE_EQ(sh.total_s(), iso.total_s()) << plan.to_string();
    } else {
      strictly_more += sh.total_s() > iso.total_s();
    }
    EXPECT_EQ(iso.ops, s.op_count());
    EXPECT_EQ(iso.fallback_ops, 0);  // no profile: alpha-beta is the model, not a fallback
  }
  EXPECT_GT(strictly_more, 0);  // e.g. MiCS's cross-group all-reduce on 1 x N meshes
  // One node: nothing crosses nodes, both pricings agree on every plan.
  for (const auto& plan : enumerate_legal_plans(Topology{8, 1})) {
    const auto s = build_schedule(m, plan, Topology{8, 1}, ScheduleOptions{}).value();
    EXPECT_DOUBLE_EQ(cost.price(s, Pricing::shared_links).total_s(), cost.price(s, Pricing::paper_isolated).total_s());
  }
}

TEST(CostModel, BreakdownFollowsTheTermsAndSums) {
  const auto m = make_model_preset("small").value();
  const CostModel cost(network_preset("paper-a800").value());
  const Topology t{8, 2};
  const auto s = build(m, "p=2,g=8x2,os=8x2", t, 3);
  const auto b = cost.price(s, Pricing::paper_isolated);
  double sum = 0;
  for (const auto& op : s.ops) sum += cost.op_time_s(op, t, Pricing::paper_isolated) * op.repeat;
  EXPECT_NEAR(b.total_s(), sum, 1e-12 * sum);
  EXPECT_GT(b.param_s, 0);
  EXPECT_GT(b.grad_s, 0);
  EXPECT_GT(b.os_sync_s, 0);
  EXPECT_GT(b.os_bcast_s, 0);
  double by_kind = 0;
  for (int k = 0; k < kCollKindCount; ++k)
    by_kind += b.time_s(CollKind(k), Axis::intra) + b.time_s(CollKind(k), Axis::inter);
  EXPECT_NEAR(by_kind, b.total_s(), 1e-12 * sum);
}

TEST(CostModel, ProfileFirstAlphaBetaForMissingMeshes) {
  const auto m = make_model_preset("small").value();
  const Topology t{8, 2};
  const auto net = network_preset("paper-a800").value();
  // Profile only all-gather and reduce-scatter inside one node, deliberately slow so its use is visible.
  auto prof = BandwidthProfile::parse(
                  "op,mesh_intra,mesh_inter,message_bytes,algbw_gbps\n"
                  "all_gather,8,1,1024,0.01\nall_gather,8,1,1073741824,1\n"
                  "reduce_scatter,8,1,1024,0.01\nreduce_scatter,8,1,1073741824,1\n",
                  "p.csv")
                  .value();
  const CostModel with(net, prof), without(net);
  const auto s = build(m, "mics", t);  // AG/RS over 8x1 (profiled), all-reduce over 1x2 (not profiled)
  const auto a = with.price(s, Pricing::paper_isolated), b = without.price(s, Pricing::paper_isolated);
  EXPECT_GT(a.fallback_ops, 0);
  EXPECT_LT(a.fallback_ops, a.ops);
  EXPECT_GT(a.param_s, 10 * b.param_s);        // the slow profile priced the gathers
  EXPECT_DOUBLE_EQ(a.os_sync_s, b.os_sync_s);  // the all-reduce fell back to alpha-beta
  int64_t inter_ops = 0;
  for (const auto& op : s.ops)
    if (op.mesh.inter > 1) inter_ops += op.repeat;
  EXPECT_EQ(a.fallback_ops, inter_ops);
}

TEST(CostModel, SharedPricingScalesAProfiledInterNodeTime) {
  const auto net = network_preset("paper-a800").value();
  auto prof = BandwidthProfile::parse(
                  "op,mesh_intra,mesh_inter,message_bytes,algbw_gbps\nall_reduce,1,4,1048576,2\n"
                  "all_reduce,1,4,1073741824,20\n",
                  "p.csv")
                  .value();
  const CostModel cost(net, prof);
  CommOp op;
  op.kind = CollKind::all_reduce;
  op.mesh = Mesh{1, 4};
  op.elems = 64 << 20;
  const Topology t{8, 4};
  const double iso = cost.op_time_s(op, t, Pricing::paper_isolated);
  const double shared = cost.op_time_s(op, t, Pricing::shared_links);
  EXPECT_DOUBLE_EQ(iso, *prof.time_s(CollKind::all_reduce, op.mesh, double(op.bytes())));
  const double ratio =
      alpha_beta_time_s(net, op.kind, op.bytes(), op.mesh, 8) / alpha_beta_time_s(net, op.kind, op.bytes(), op.mesh, 1);
  EXPECT_GT(ratio, 1.5);
  EXPECT_NEAR(shared / iso, ratio, 1e-12);
}

}  // namespace
}  // namespace lins
