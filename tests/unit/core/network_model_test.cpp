// core/network_model.h: both models answer through the one interface CostModel prices with, and a model of one's own
// plugs in with a measured profile composed in front of it.
#include "core/cost/network_model.h"

#include <gtest/gtest.h>

#include "core/cost/cost_model.h"
#include "core/cost/network_spec.h"

namespace lins {
namespace {

TEST(NetworkModel, BothModelsPriceThroughTheInterface) {
  auto net = resolve_network_spec("paper-a800");
  ASSERT_TRUE(net.ok()) << net.error();
  for (NetworkModel m : {NetworkModel::alpha_beta, NetworkModel::nccl}) {
    auto model = make_network_model(m, *net);
    ASSERT_TRUE(model.ok()) << model.error();
    const NetworkCostModel& nm = **model;
    EXPECT_FALSE(nm.description().empty());
    const double small = nm.time_s(CollKind::all_gather, 1 << 20, Mesh{8, 4}, 1);
    const double large = nm.time_s(CollKind::all_gather, 1 << 28, Mesh{8, 4}, 1);
    EXPECT_GT(small, 0) << network_model_name(m);
    EXPECT_GT(large, small) << network_model_name(m);
    EXPECT_GE(nm.time_s(CollKind::all_gather, 1 << 28, Mesh{1, 4}, 8),
              nm.time_s(CollKind::all_gather, 1 << 28, Mesh{1, 4}, 1))
        << network_model_name(m) << ": groups sharing a node's network cannot be faster";
    auto cost = CostModel::make(*net, m);
    ASSERT_TRUE(cost.ok());
    EXPECT_EQ(cost->model_time_s(CollKind::all_reduce, 1 << 24, Mesh{8, 2}),
              nm.time_s(CollKind::all_reduce, 1 << 24, Mesh{8, 2}, 1));
    EXPECT_EQ(cost->model_description(), nm.description());
  }
  auto nccl = make_network_model(NetworkModel::nccl, *net);
  EXPECT_TRUE((**nccl).makes_choices());
  EXPECT_NE((**nccl).choice(CollKind::all_reduce, 1 << 24, Mesh{8, 2}, 1).find('/'), std::string::npos);
  auto ab = make_network_model(NetworkModel::alpha_beta, *net);
  EXPECT_FALSE((**ab).makes_choices());
  EXPECT_EQ((**ab).choice(CollKind::all_reduce, 1 << 24, Mesh{8, 2}, 1), "");
}

// One second per collective, whatever it is: the simplest model a user could write.
struct OneSecond final : NetworkCostModel {
  double time_s(CollKind, double, Mesh, int) const override { return 1.0; }
  std::string description() const override { return "one second each"; }
};

TEST(NetworkModel, AModelOfOnesOwnPlugsInBehindAProfile) {
  auto net = resolve_network_spec("paper-a800");
  ASSERT_TRUE(net.ok());
  BandwidthProfile profile;
  profile.add(CollKind::all_gather, Mesh{2, 1}, 1e6, 100.0);  // 1 MB at 100 GB/s algbw: 10 us
  profile.add(CollKind::all_gather, Mesh{2, 1}, 1e8, 100.0);
  const CostModel cost(alpha_beta_of(*net), std::make_shared<OneSecond>(), profile);
  EXPECT_EQ(cost.model_description(), "one second each");
  CommOp measured;
  measured.kind = CollKind::all_gather;
  measured.mesh = Mesh{2, 1};
  measured.elems = 5'000'000;  // 10 MB of bf16
  measured.dtype = DType::bf16;
  const Topology topo{2, 2};
  bool fell_back = true;
  EXPECT_NEAR(cost.op_time_s(measured, topo, Pricing::paper_isolated, &fell_back), 1e7 / 100e9, 1e-9);
  EXPECT_FALSE(fell_back);
  CommOp unmeasured = measured;
  unmeasured.kind = CollKind::reduce_scatter;
  EXPECT_EQ(cost.op_time_s(unmeasured, topo, Pricing::paper_isolated, &fell_back), 1.0);
  EXPECT_TRUE(fell_back);
}

}  // namespace
}  // namespace lins
