// The nccl model against hand-computed points: NCCL v2.21.5-1's tuning formulas (src/graph/tuning.cc) worked by hand
// for a few (collective, size, mesh) points of the paper's cluster and an H100 one, the channel search it stands on,
// the relation to nccl-tests' bus bandwidth, and the networks it refuses.
#include "core/cost/nccl_model.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/cost/cost_model.h"

namespace lins {
namespace {

NcclModel a800() { return NcclModel::make(resolve_network_spec("paper-a800").value()).value(); }

TEST(NcclModel, ChannelSearchOfThePapersNodes) {
  const auto m = a800();
  // One node of 8 A800: 8 NVLinks x 20 GB/s (SM80_NVLINK_BW) = 160 GB/s per GPU. The fastest intra speed that fits
  // is 40 -> floor(160 / 40) = 4 channels; ncclTopoDupChannels doubles them at half speed: 8 x 20. Pass 2 finds no
  // faster speed with 8 channels (30 -> 5, 40 -> 4), so 8 x 20 GB/s = 160 GB/s of bus bandwidth.
  auto g = m.graph(Mesh{8, 1});
  EXPECT_EQ(g.channels, 8);
  EXPECT_DOUBLE_EQ(g.bw_intra_gbps, 20.0);
  EXPECT_TRUE(g.nvlink);
  EXPECT_EQ(g.comm_channels, 16);
  // Across nodes: a GPU-NIC path is PCIe Gen4 x16 = 16 x 120 / 80 = 24 GB/s (NIC 200 Gb/s = 25 GB/s), so the speed
  // is 24 (speedArrayInter), one channel per NIC, 4 NICs: 4 x 24 = 96 GB/s; 24 < 25 so no duplication.
  g = m.graph(Mesh{8, 128});
  EXPECT_EQ(g.channels, 4);
  EXPECT_DOUBLE_EQ(g.bw_inter_gbps, 24.0);
  EXPECT_EQ(g.comm_channels, 8);
  // One GPU per node reaches one NIC: 1 x 24.
  g = m.graph(Mesh{1, 128});
  EXPECT_EQ(g.channels, 1);
  EXPECT_DOUBLE_EQ(g.bw_inter_gbps, 24.0);
  EXPECT_FALSE(g.nvlink);
  // Eight 1 x 128 groups at once share the 4 NICs: each gets half a NIC, 12.5 GB/s, so speed 12 (18 and 15 are
  // faster than the path): 1 x 12.
  g = m.graph(Mesh{1, 128}, 8);
  EXPECT_EQ(g.channels, 1);
  EXPECT_DOUBLE_EQ(g.bw_inter_gbps, 12.0);
}

TEST(NcclModel, ChannelSearchOfAnH100Node) {
  const auto m = NcclModel::make(resolve_network_spec("h100-ndr").value()).value();
  // 18 NVLinks x 20.6 (SM90_NVLINK_BW) = 370.8 GB/s. sm90SpeedArrayIntra: 60 -> floor(370.8 / 60) = 6 channels;
  // duplicated (60 >= 50, so the Hopper exception does not apply) to 12 x 30 = 360 GB/s.
  auto g = m.graph(Mesh{8, 1});
  EXPECT_EQ(g.channels, 12);
  EXPECT_DOUBLE_EQ(g.bw_intra_gbps, 30.0);
  // Across nodes: PCIe Gen5 x16 = 48 GB/s, NDR 50 GB/s: speed 48, one channel per NIC, 8 NICs; each GPU sends on
  // NVLink in 7 of 8 channels: 8 x 48 x 7/8 = 336 <= 370.8, so 8 x 48 = 384 GB/s. Not duplicated (Hopper, < 50, > 4).
  g = m.graph(Mesh{8, 16});
  EXPECT_EQ(g.channels, 8);
  EXPECT_DOUBLE_EQ(g.bw_inter_gbps, 48.0);
  EXPECT_EQ(g.comm_channels, 16);
}

// (a) all-gather inside one A800 node, 8 ranks: nsteps = 7, no network steps, NVLink latencies.
//   busBw = 8 x 20 = 160. LL: min(llMaxBw = 87.7, 160 x .5) = 80; LL128: min(160 x .92, 8 x 20) = 147.2; Simple 160.
//   algBw = busBw x nRanks / nsteps = x 8/7: LL 91.43, LL128 168.23, Simple 182.86 GB/s.
//   Latency = baseLat + 7 x hwLat[NVLINK][RING]: LL 6.6 + 7 x .6 = 10.8; LL128 14 + 7 x 1.9 = 27.3;
//   Simple 8.4 + 7 x 3.4 = 32.2 us.
//   64 MiB: LL 10.8 + 67108864 / 91428.6 = 744.8; LL128 27.3 + 398.92 = 426.2; Simple 32.2 + 367.00 = 399.2 us.
//   64 KiB: LL 10.8 + 0.7168 = 11.517; LL128 27.69; Simple 32.56 us.
TEST(NcclModel, AllGatherInsideANode) {
  const auto m = a800();
  auto c = m.choose(CollKind::all_gather, 67108864, Mesh{8, 1});
  EXPECT_EQ(c.algo, NcclAlgo::ring);
  EXPECT_EQ(c.proto, NcclProto::simple);
  EXPECT_NEAR(c.time_s * 1e6, 32.2 + 67108864 / (160.0 * 8 / 7 * 1000), 1e-6);
  EXPECT_NEAR(c.time_s * 1e6, 399.2, 0.05);
  EXPECT_NEAR(c.latency_s * 1e6, 32.2, 1e-9);
  EXPECT_NEAR(c.algbw_gbps, 182.857, 1e-3);
  double t[2][3];
  m.pair_times_s(CollKind::all_gather, 67108864, Mesh{8, 1}, 1, t);
  EXPECT_LT(t[0][0], 0);  // no Tree for all-gather
  EXPECT_NEAR(t[1][0] * 1e6, 744.8, 0.05);
  EXPECT_NEAR(t[1][1] * 1e6, 426.2, 0.05);
  c = m.choose(CollKind::all_gather, 65536, Mesh{8, 1});
  EXPECT_EQ(c.proto, NcclProto::ll);
  EXPECT_NEAR(c.time_s * 1e6, 11.517, 0.001);
}

// (b) all-reduce over all 1024 GPUs of the paper's cluster (8 x 128), 256 MiB. nRanks 1024, nNodes 128, ppn 8.
//   Graph 4 x 24 (inter), busBw 96. Tables at [Ampere][>2 nodes], Intel host: llMaxBw 20.4, perChMaxTreeBw 17.8,
//   perChMaxRingLL128Bw 20, perChMaxTreeLL128Bw 20.
//   Ring: LL min(20.4, 48) = 20.4; LL128 min(88.32, 80) = 80; Simple 96; x nRanks / (2 (nRanks - 1)) = 0.500489.
//   Tree: min(96 x .92, 4 x 17.8) = 71.2; LL 71.2 / 3.8 = 18.74; LL128 min(71.2 x 120/128, 80) = 66.75; Simple 71.2;
//   x .5: LL128 33.375, Simple 35.6.
//   Ring latency: nsteps 2046, of which 2 x 128 = 256 across nodes; the net overhead (1 us, x3 for Simple) floors
//   the intra hops: LL 6.6 + 1790 x 1.0 + 256 x 2.7 = 2487.8; LL128 14 + 1790 x 1.9 + 256 x 4 = 4439;
//   Simple (8.4 + 1790 x 3.4 + 256 x 14) x 1.4 (ring plateau) = 9678.4 x 1.4 = 13549.76 us.
//   Tree latency: base + 2 x (7 x intra + log2(128) x net): LL128 14 + 2 x (7 x 1.25 + 7 x 8.5) = 150.5;
//   Simple 0 + 2 x (7 x 28 + 7 x 28) = 784 us.
//   Tree correction at log2(256 MiB / 64) = 22: LL128 1.0, Simple 0.9.
//   Tree LL128: 150.5 + 268435456 / 33375 = 8193.5 us; Tree Simple: 784 + 268435456 / 32040 = 9162.1;
//   Ring LL128: 4439 + 268435456 / 40039.1 = 11143.3; Ring Simple: 13549.8 + 5587.0 = 19136.7. Tree/LL128 wins.
TEST(NcclModel, AllReduceOverThePapersWholeCluster) {
  const auto m = a800();
  const double v = 268435456;
  auto c = m.choose(CollKind::all_reduce, v, Mesh{8, 128});
  EXPECT_EQ(c.algo, NcclAlgo::tree);
  EXPECT_EQ(c.proto, NcclProto::ll128);
  EXPECT_NEAR(c.time_s * 1e6, 150.5 + v / 33375.0, 1e-6);
  EXPECT_NEAR(c.time_s * 1e6, 8193.5, 0.05);
  double t[2][3];
  m.pair_times_s(CollKind::all_reduce, v, Mesh{8, 128}, 1, t);
  EXPECT_NEAR(t[0][2] * 1e6, 784 + v / 32040.0, 1e-6);
  EXPECT_NEAR(t[1][1] * 1e6, 4439 + v / (80 * 1024.0 / 2046 * 1000), 1e-6);
  EXPECT_NEAR(t[1][2] * 1e6, 9678.4 * 1.4 + v / (96 * 1024.0 / 2046 * 1000), 1e-6);
  EXPECT_NEAR(t[1][0] * 1e6, 2487.8 + v / (20.4 * 1024.0 / 2046 * 1000), 1e-6);
  // NCCL's ring latency grows with every rank: over 1024 ranks it is ~thousand hops, far above the alpha-beta
  // model's (8 - 1) + (128 - 1) steps.
  EXPECT_GT(t[1][2], 0.013);
}

// (c) all-gather with one GPU per node across 128 nodes (ppn 1), 16 MiB. Graph 1 x 24. nsteps = nInterSteps = 127.
//   Ring LL: min(20.4, 12) = 12; LL128: min(24 x 0.7 (ppn < 2), 1 x 20) = 16.8; Simple 24; x 128/127.
//   Latency: LL 6.6 + 127 x 2.7 = 349.5; LL128 14 + 127 x 4 = 522; Simple 8.4 + 127 x 14 = 1786.4 us.
//   LL: 349.5 + 16777216 / 12094.5 = 1736.7; LL128: 522 + 16777216 / 16932.3 = 1512.8; Simple 1786.4 + 693.6 =
//   2480.0 us. LL128 wins.
TEST(NcclModel, AllGatherWithOneGpuPerNode) {
  const auto m = a800();
  const double v = 16777216;
  auto c = m.choose(CollKind::all_gather, v, Mesh{1, 128});
  EXPECT_EQ(c.algo, NcclAlgo::ring);
  EXPECT_EQ(c.proto, NcclProto::ll128);
  EXPECT_NEAR(c.time_s * 1e6, 522 + v / (16.8 * 128 / 127 * 1000), 1e-6);
  EXPECT_NEAR(c.time_s * 1e6, 1512.8, 0.05);
}

// (d) broadcast over 8 x 16, 1 GiB: Ring only, ratio nRanks / nsteps = 1, bus = algorithm bandwidth = 96 GB/s for
//   Simple; latency with the same channel order on every channel is one hop: 8.4 + hwLat[NET][RING][Simple] 14 =
//   22.4 us. 22.4 + 1073741824 / 96000 = 11207.2 us.
TEST(NcclModel, BroadcastAcrossNodes) {
  const auto m = a800();
  auto c = m.choose(CollKind::broadcast, 1073741824.0, Mesh{8, 16});
  EXPECT_EQ(c.algo, NcclAlgo::ring);
  EXPECT_EQ(c.proto, NcclProto::simple);
  EXPECT_NEAR(c.time_s * 1e6, 22.4 + 1073741824.0 / 96000, 1e-6);
}

TEST(NcclModel, LargeMessagesReachTheBusBandwidthNcclTestsReports) {
  // nccl-tests' busbw = algbw x bus_factor (all-reduce 2(n-1)/n, all-gather (n-1)/n). For large messages the Ring
  // Simple algorithm bandwidth is busBw x n / nsteps, so busbw -> channels x speed: 96 GB/s for a node of 4 HDR NICs,
  // "about 24 GB/s per NIC". All-gather of 8 GiB over 8 x 16 (no Tree for all-gather): latency
  // 8.4 + (127 - 15) x max(3.4, 3 x 1.0) + 15 x 14 = 599.2 us; time = 599.2 + 8 GiB x 127/128 / 96000 us;
  // busbw = 8 GiB / time x 127/128 = 95.36 GB/s, the last 0.7% being the latency.
  const auto m = a800();
  const double v = 8.0 * (1ull << 30);
  const Mesh mesh{8, 16};
  const double t = m.time_s(CollKind::all_gather, v, mesh);
  EXPECT_NEAR(t * 1e6, 599.2 + v * 127 / 128 / 96000, 1e-6);
  const double busbw = v / t / 1e9 * bus_factor(CollKind::all_gather, mesh.size());
  EXPECT_NEAR(busbw, 95.36, 0.01);
}

TEST(NcclModel, MonotoneInSizeAndSharingNeverHelps) {
  const auto m = a800();
  for (int k = 0; k < kCollKindCount; ++k)
    for (Mesh mesh : {Mesh{2, 1}, Mesh{8, 1}, Mesh{1, 2}, Mesh{2, 4}, Mesh{8, 2}, Mesh{8, 128}, Mesh{1, 128}}) {
      double prev = 0;
      for (double v = 64; v <= double(1ull << 33); v *= 2) {
        const double t = m.time_s(CollKind(k), v, mesh);
        EXPECT_GE(t, prev) << coll_kind_name(CollKind(k)) << " " << mesh.to_string() << " " << v;
        EXPECT_GE(m.time_s(CollKind(k), v, mesh, 8 / mesh.intra), t * (1 - 1e-12));
        prev = t;
      }
    }
  EXPECT_EQ(m.time_s(CollKind::all_reduce, 1 << 20, Mesh{1, 1}), 0.0);
}

TEST(NcclModel, RefusesWhatItDoesNotModel) {
  auto spec = resolve_network_spec("paper-a800").value();
  spec.sharp = true;
  auto bad = NcclModel::make(spec);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("CollNet"), std::string::npos) << bad.error();
  EXPECT_NE(bad.error().find("out of scope"), std::string::npos) << bad.error();
  spec.sharp = false;
  spec.nvls = true;
  bad = NcclModel::make(spec);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("NVLS"), std::string::npos) << bad.error();
  bad = NcclModel::make(resolve_network_spec("cpu-local").value());
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("alpha-beta"), std::string::npos) << bad.error();
  spec.nvls = false;
  spec.nvswitch = false;
  bad = NcclModel::make(spec);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("NVSwitch"), std::string::npos) << bad.error();
}

TEST(NcclModel, DegradationWithScaleSlowsOnlyGroupsAcrossNodes) {
  auto spec = resolve_network_spec("paper-a800").value();
  const auto flat = NcclModel::make(spec).value();
  spec.bw_factor_per_node_doubling = 0.9;
  spec.latency_factor_per_node_doubling = 1.1;
  const auto slow = NcclModel::make(spec).value();
  EXPECT_DOUBLE_EQ(slow.time_s(CollKind::all_gather, 1 << 26, Mesh{8, 1}),
                   flat.time_s(CollKind::all_gather, 1 << 26, Mesh{8, 1}));
  // 16 nodes = 4 doublings: bandwidth x 0.9^4, latency x 1.1^4 for every pair, so the chosen Ring/Simple time of a
  // large all-gather becomes latency x 1.4641 + bytes / (algbw x 0.6561).
  const auto c = flat.choose(CollKind::all_gather, 1 << 30, Mesh{8, 16});
  const double expect = c.latency_s * std::pow(1.1, 4) + (1 << 30) / (c.algbw_gbps * std::pow(0.9, 4) * 1e9);
  EXPECT_NEAR(slow.time_s(CollKind::all_gather, 1 << 30, Mesh{8, 16}), expect, 1e-12);
}

TEST(CostModelNccl, PricesWhatTheProfileLacksWithNccl) {
  const auto spec = resolve_network_spec("paper-a800").value();
  auto cost = CostModel::make(spec, NetworkModel::nccl).value();
  CommOp op;
  op.kind = CollKind::all_reduce;
  op.mesh = Mesh{8, 128};
  op.elems = 128 << 20;  // 256 MiB of bf16
  const Topology t{8, 128};
  EXPECT_DOUBLE_EQ(cost.op_time_s(op, t, Pricing::paper_isolated), a800().time_s(op.kind, double(op.bytes()), op.mesh));
  EXPECT_NE(cost.model_description().find("NCCL 2.21.5"), std::string::npos);
  auto ab = CostModel::make(spec, NetworkModel::alpha_beta).value();
  EXPECT_DOUBLE_EQ(ab.op_time_s(op, t, Pricing::paper_isolated),
                   alpha_beta_time_s(network_preset("paper-a800").value(), op.kind, double(op.bytes()), op.mesh));
  EXPECT_FALSE(CostModel::make(resolve_network_spec("cpu-local").value(), NetworkModel::nccl));
}

}  // namespace
}  // namespace lins
