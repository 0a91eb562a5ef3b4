// Plans: presets, the text syntax, every rule of the sharding space (docs/method.md), and the legal space.
#include "core/model/plan.h"

#include <gtest/gtest.h>

#include <random>
#include <set>

namespace lins {
namespace {

const Topology kPaper{8, 128};

TEST(Plan, PresetsAreThePapersPoints) {
  auto zero1 = parse_plan("zero1", kPaper);
  ASSERT_TRUE(zero1) << zero1.error();
  EXPECT_EQ(zero1->tuple_string(), "(1,1 | 1,1 | 8,128)");
  EXPECT_EQ(parse_plan("zero2", kPaper)->tuple_string(), "(1,1 | 8,128 | 8,128)");
  EXPECT_EQ(parse_plan("zero3", kPaper)->tuple_string(), "(8,128 | 8,128 | 8,128)");
  EXPECT_EQ(parse_plan("ddp", kPaper)->tuple_string(), "(1,1 | 1,1 | 1,1)");
  EXPECT_EQ(parse_plan("mics", kPaper)->tuple_string(), "(8,1 | 8,1 | 8,1)");
  EXPECT_EQ(parse_plan("mics:32", kPaper)->tuple_string(), "(8,4 | 8,4 | 8,4)");
  EXPECT_EQ(parse_plan("mics:4", kPaper)->tuple_string(), "(4,1 | 4,1 | 4,1)");
  EXPECT_EQ(parse_plan("hsdp", kPaper)->engine, Engine::fsdp);
  EXPECT_EQ(parse_plan("hsdp", kPaper)->tuple_string(), "(8,1 | 8,1 | 8,1)");
  EXPECT_EQ(parse_plan("fsdp", kPaper)->tuple_string(), "(8,128 | 8,128 | 8,128)");
  EXPECT_TRUE(parse_plan("fsdp:noreshard", kPaper)->keep_after_forward);
  EXPECT_EQ(parse_plan("fsdp:8", kPaper)->hpz_intra, 8);
  auto zpp = parse_plan("zeropp", kPaper);
  ASSERT_TRUE(zpp);
  EXPECT_EQ(zpp->hpz_intra, 8);
  EXPECT_EQ(zpp->engine, Engine::zeropp);
}

// Every row of the preset table parses (bare, and with its argument where it takes one) to its engine and to the
// factors its rules name, and a preset that takes no argument refuses one.
TEST(Plan, EveryPresetRowParsesToItsRules) {
  const Topology topo{4, 8};
  for (const PresetRow& row : kPresets) {
    SCOPED_TRACE(std::string(row.name));
    auto plan = parse_plan(row.name, topo);
    ASSERT_TRUE(plan) << plan.error();
    EXPECT_EQ(plan->engine, row.engine);
    auto expect = [&](PresetFactor rule, ShardFactor f) {
      const ShardFactor want = rule == PresetFactor::one ? ShardFactor{1, 1}
                               : rule == PresetFactor::all ? ShardFactor{4, 8}
                                                           : ShardFactor{4, 1};  // a group: one node by default
      EXPECT_EQ(f, want) << preset_factor_name(rule);
    };
    expect(row.p, plan->p);
    expect(row.g, plan->g);
    expect(row.os, plan->os);
    EXPECT_EQ(find_preset(row.name), &row);
    if (row.arg == PresetArg::none) {
      auto bad = parse_plan(std::string(row.name) + ":2", topo);
      ASSERT_FALSE(bad);
      EXPECT_NE(bad.error().find("takes no ':' argument"), std::string::npos) << bad.error();
    } else {
      auto with = parse_plan(std::string(row.name) + ":2", topo);
      ASSERT_TRUE(with) << with.error();
      EXPECT_EQ(with->name, std::string(row.name) + ":2");
    }
  }
  EXPECT_EQ(find_preset("lins"), nullptr);  // the planner's choice, not a preset
}

TEST(Plan, TextRoundTrips) {
  auto p = parse_plan("p=4x1,g=4x1,os=8x1", kPaper);
  ASSERT_TRUE(p) << p.error();
  EXPECT_EQ(p->engine, Engine::lins);
  EXPECT_EQ(p->os_layout, OsLayout::inter_tensor);
  EXPECT_EQ(p->to_string(), "p=4x1,g=4x1,os=8x1");
  auto q = parse_plan(p->to_string(), kPaper);
  ASSERT_TRUE(q);
  EXPECT_TRUE(q->same_factors(*p));
  auto short_form = parse_plan("p=2,g=2,os=8x4,layout=intra", kPaper);
  ASSERT_TRUE(short_form) << short_form.error();
  EXPECT_EQ(short_form->os, (ShardFactor{8, 4}));
  EXPECT_EQ(short_form->os_layout, OsLayout::intra_tensor);
}

void expect_rejected(const std::string& text, const std::string& needle, const Topology& topo = kPaper) {
  auto p = parse_plan(text, topo);
  ASSERT_FALSE(p) << text << " was accepted";
  EXPECT_NE(p.error().find(needle), std::string::npos) << text << ": " << p.error();
}

TEST(Plan, EveryRuleHasItsOwnMessage) {
  expect_rejected("p=3x1,g=3x1,os=3x1", "divisibility rule");
  expect_rejected("p=1x1,g=1x1,os=8x3", "divisibility rule");
  expect_rejected("p=4x2,g=4x2,os=8x2", "fill-the-node-first rule");
  expect_rejected("p=8x1,g=4x1,os=8x1", "nesting rule");
  expect_rejected("p=1x1,g=2x1,os=8x1", "dependency rule");
  expect_rejected("p=1x1,g=2x1,os=8x1", "nearest legal plan");
  expect_rejected("p=0x1,g=1x1,os=1x1", "at least 1");
  expect_rejected("p=1x1,g=1x1", "must give all of p, g and os");
  expect_rejected("p=1x1,g=1x1,os=1x1,q=2", "unknown key 'q'");
  expect_rejected("p=1x1,p=1x1,g=1x1,os=1x1", "given twice");
  expect_rejected("p=axb,g=1x1,os=1x1", "not a size");
  expect_rejected("p=1x1x1,g=1x1,os=1x1", "not a factor");
  expect_rejected("zero4", "unknown plan 'zero4'");
  expect_rejected("mics:3", "group size 3");
  expect_rejected("mics:24", "group size 24");
  expect_rejected("zeropp:3", "secondary partition");
  expect_rejected("zero1:2", "takes no ':' argument");
  expect_rejected("lins", "chosen by the planner");
  expect_rejected("p=1,g=1,os=1,layout=diagonal", "layout must be");
}

TEST(Plan, NestingNeedsDivisionNotJustOrder) {
  // 2 <= 3 but a block of 2 consecutive ranks does not nest in blocks of 3.
  expect_rejected("p=2x1,g=2x1,os=3x1", "nesting rule", Topology{6, 1});
  EXPECT_TRUE(parse_plan("p=2x1,g=2x1,os=6x1", Topology{6, 1}));
}

TEST(Plan, ListsKeepSixTuplesTogether) {
  EXPECT_EQ(split_plan_list("ddp,p=4x1,g=4x1,os=8x1,mics:16"),
            (std::vector<std::string>{"ddp", "p=4x1,g=4x1,os=8x1", "mics:16"}));
  EXPECT_EQ(split_plan_list("p=2,g=2,os=8,layout=intra,p=1,g=1,os=8"),
            (std::vector<std::string>{"p=2,g=2,os=8,layout=intra", "p=1,g=1,os=8"}));
  EXPECT_EQ(split_plan_list(" zero3 , ,lins"), (std::vector<std::string>{"zero3", "lins"}));
}

TEST(Plan, LegalPairsOfThePapersCluster) {
  auto pairs = legal_factors(kPaper);
  EXPECT_EQ(pairs.size(), 11u);  // 1,2,4,8 inside a node; 8 x {2,4,...,128} across nodes
}

TEST(Plan, EnumerationYieldsOnlyLegalDistinctPlans) {
  std::mt19937 rng(7);
  const int gpus[] = {1, 2, 3, 4, 6, 8};
  const int nodes[] = {1, 2, 3, 4, 6, 8, 12, 16, 128};
  for (int trial = 0; trial < 40; ++trial) {
    Topology t{gpus[rng() % 6], nodes[rng() % 9]};
    auto plans = enumerate_legal_plans(t);
    ASSERT_FALSE(plans.empty());
    std::set<std::string> seen;
    for (const auto& p : plans) {
      auto s = validate_plan(p, t);
      EXPECT_TRUE(s) << t.to_string() << " " << p.to_string() << ": " << s.error();
      EXPECT_TRUE(seen.insert(p.to_string()).second) << "duplicate " << p.to_string();
    }
    // Brute force over every 6-tuple of positive factors up to R and N (divisors or not): the enumeration finds
    // exactly the ones validate_plan accepts. Kept to small topologies so it stays fast.
    if (t.world() > 24) continue;
    int legal = 0;
    for (int a = 1; a <= t.gpus_per_node; ++a)
      for (int b = 1; b <= t.nodes; ++b)
        for (int c = 1; c <= t.gpus_per_node; ++c)
          for (int d = 1; d <= t.nodes; ++d)
            for (int e = 1; e <= t.gpus_per_node; ++e)
              for (int f = 1; f <= t.nodes; ++f) {
                Plan p;
                p.p = {a, b}, p.g = {c, d}, p.os = {e, f};
                if (validate_plan(p, t)) ++legal;
              }
    EXPECT_EQ(legal, static_cast<int>(plans.size())) << t.to_string();
  }
}

}  // namespace
}  // namespace lins
