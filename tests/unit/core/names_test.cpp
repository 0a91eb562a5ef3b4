// The name tables of the core enums (core/names.h): each round-trips and its name function agrees with it; the
// aliases that inputs written by other tools use parse to the right value; help and error text come from the table.
#include "core/util/names.h"

#include <gtest/gtest.h>

#include "core/cost/cost_model.h"
#include "core/cost/nccl_model.h"
#include "core/cost/network_spec.h"
#include "core/model/plan.h"
#include "core/projection/planner.h"
#include "core/schedule/overlap.h"
#include "core/schedule/schedule.h"
#include "core/schedule/timeline.h"
#include "names_check.h"

namespace lins {
namespace {

TEST(Names, EveryTableRoundTrips) {
  expect_table_round_trips(kPhaseNames, phase_name);
  expect_table_round_trips(kCollKindNames, coll_kind_name);
  expect_table_round_trips(kTermNames, term_name);
  expect_table_round_trips(kPurposeNames, purpose_name);
  expect_table_round_trips(kDTypeNames, dtype_name);
  expect_table_round_trips(kAxisNames, axis_name);
  expect_table_round_trips(kGroupRoleNames, group_role_name);
  expect_table_round_trips(kNicPathNames, nic_path_name);
  expect_table_round_trips(kNcclAlgoNames, nccl_algo_name);
  expect_table_round_trips(kNcclProtoNames, nccl_proto_name);
  expect_table_round_trips(kActionKindNames, action_kind_name);
  expect_table_round_trips(kTaskKindNames, [](TaskKind k) { return kTaskKindNames.name(k); });
  expect_table_round_trips(kOverlapNames, overlap_name);
  expect_table_round_trips(kEngineNames, engine_name);
  expect_table_round_trips(kOsLayoutNames, os_layout_name);
  expect_table_round_trips(kPricingNames, pricing_name);
  expect_table_round_trips(kNetworkModelNames, network_model_name);
  expect_table_round_trips(kObjectiveNames, objective_name);
  expect_table_round_trips(kStepBackendNames, [](StepBackend b) { return kStepBackendNames.name(b); });
}

TEST(Names, TheCsvSpellingsStayAsTheAnalysisReadsThem) {
  // analysis/lins_analysis/schema.py: OPS, OVERLAP_MODES and the step CSV's text columns.
  EXPECT_EQ(kCollKindNames.list(), "all_gather, reduce_scatter, all_reduce, broadcast, all_to_all");
  EXPECT_EQ(kOverlapNames.list(), "all, no_bcast, no_allreduce, none");
  EXPECT_EQ(kDTypeNames.list(), "fp32, bf16");
  EXPECT_STREQ(pricing_name(Pricing::paper_isolated), "paper");
  EXPECT_STREQ(network_model_name(NetworkModel::alpha_beta), "alpha-beta");
  EXPECT_STREQ(os_layout_name(OsLayout::intra_tensor), "intra_tensor");
}

TEST(Names, AliasesOfOtherToolsParse) {
  EXPECT_EQ(kCollKindNames.find("allgather"), CollKind::all_gather);
  EXPECT_EQ(kCollKindNames.find("AllGather"), CollKind::all_gather);
  EXPECT_EQ(kCollKindNames.find("reducescatter"), CollKind::reduce_scatter);
  EXPECT_EQ(kCollKindNames.find("AllReduce"), CollKind::all_reduce);
  EXPECT_EQ(kCollKindNames.find("bcast"), CollKind::broadcast);
  EXPECT_EQ(kDTypeNames.find("float"), DType::fp32);
  EXPECT_EQ(kDTypeNames.find("bfloat16"), DType::bf16);
  EXPECT_EQ(kOsLayoutNames.find("intra"), OsLayout::intra_tensor);
  EXPECT_FALSE(kDTypeNames.find("fp16"));
  EXPECT_FALSE(kDTypeNames.find(""));
  EXPECT_FALSE(kCollKindNames.find("ALL_GATHER"));  // aliases are listed spellings, not case folding
}

TEST(Names, HelpAndErrorsComeFromTheTable) {
  EXPECT_EQ(kOverlapNames.unknown("some", "--overlap"),
            "--overlap: unknown overlap mode 'some'; valid: all, no_bcast, no_allreduce, none");
  EXPECT_EQ(
      kCollKindNames.unknown("gather", "--op", {"all"}),
      "--op: unknown collective 'gather'; valid: all_gather, reduce_scatter, all_reduce, broadcast, all_to_all, all");
  EXPECT_EQ(kPricingNames.described(),
            "paper (each group alone, as the paper), shared (groups on a node share its links)");
  EXPECT_EQ(kDTypeNames.aliases_text(), "float/float32 for fp32, bfloat16 for bf16");
  EXPECT_EQ(kCollKindNames.unknown("x"),
            "unknown collective 'x'; valid: all_gather, reduce_scatter, all_reduce, broadcast, all_to_all");
  EXPECT_STREQ(kCollKindNames.prose(CollKind::reduce_scatter), "reduce-scatter");
  EXPECT_STREQ(kCollKindNames.prose(CollKind::broadcast), "broadcast");
}

TEST(Names, ParsersOfTheEnumsUseTheTables) {
  auto o = parse_overlap("no_bcast");
  ASSERT_TRUE(o);
  EXPECT_EQ(*o, Overlap::no_bcast);
  auto bad = parse_overlap("sometimes");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error(), "--overlap: unknown overlap mode 'sometimes'; valid: all, no_bcast, no_allreduce, none");
  auto p = parse_pricing("shared");
  ASSERT_TRUE(p);
  EXPECT_EQ(*p, Pricing::shared_links);
  EXPECT_FALSE(parse_pricing("both"));
  auto m = parse_network_model("alpha-beta");
  ASSERT_TRUE(m);
  EXPECT_EQ(*m, NetworkModel::alpha_beta);
}

}  // namespace
}  // namespace lins
