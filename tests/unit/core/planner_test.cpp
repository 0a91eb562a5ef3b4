// Planner: only legal plans, feasible always above infeasible, the chosen plan equals a brute-force minimum over
// enumerate_legal_plans, and the reasons it gives.
#include "core/projection/planner.h"

#include <gtest/gtest.h>

#include <limits>
#include <map>
#include <random>

namespace lins {
namespace {

Workload workload(const std::string& model, int M = 1, int seq = 4096) {
  Workload w;
  w.model = make_model_preset(model).value();
  w.seq = seq;
  w.micro_batch_size = 1;
  w.micro_batches = M;
  return w;
}

// The brute force: every legal plan priced and sized independently of the planner's loop.
double brute_force_best(const Workload& w, const Topology& t, const CostModel& cost, const PlannerOptions& opt) {
  double best = std::numeric_limits<double>::infinity();
  for (const auto& plan : enumerate_legal_plans(t)) {
    ScheduleOptions so;
    so.micro_batches = w.micro_batches;
    so.bucket_bytes = opt.bucket_bytes;
    so.dtype = opt.dtype;
    auto s = build_schedule(w.model, plan, t, so);
    EXPECT_TRUE(s) << s.error();
    auto m = estimate_memory(*s, w, opt.state_bytes);
    add_memory_reserve(m, *s, opt.reserve);
    if (m.required_bytes() > opt.gpu_mem_bytes) continue;
    best = std::min(best, cost.price(*s, opt.rank_by).total_s());
  }
  return best;
}

void check_search(const PlanSearch& search, const Topology& t, const PlannerOptions& opt) {
  bool seen_infeasible = false;
  double prev = -1;
  for (const auto& e : search.plans) {
    if (!e.baseline) {
      EXPECT_TRUE(validate_plan(e.plan, t)) << e.plan.to_string();
    }
    EXPECT_EQ(e.feasible, e.memory.required_bytes() <= opt.gpu_mem_bytes);
    EXPECT_GT(e.memory.reserve_bytes, e.memory.communicators * opt.reserve.nccl_bytes_per_communicator);
    if (!e.feasible) {
      seen_infeasible = true;
      EXPECT_EQ(e.rank, 0);
      EXPECT_NE(e.why.find("needs"), std::string::npos) << e.why;
      continue;
    }
    EXPECT_FALSE(seen_infeasible) << "a feasible plan ranked below an infeasible one: " << e.label();
    EXPECT_GE(e.comm(search.rank_by).total_s(), prev);
    prev = e.comm(search.rank_by).total_s();
  }
}

TEST(Planner, AgreesWithBruteForceOnThePapersCluster) {
  const Topology t{8, 128};
  const CostModel cost(network_preset("paper-a800").value());
  for (const char* model : {"llama-7b", "llama-13b", "llama-30b"}) {
    for (Pricing p : {Pricing::paper_isolated, Pricing::shared_links}) {
      PlannerOptions opt;
      opt.objective = Objective::comm;
      opt.rank_by = p;
      opt.include_baselines = true;
      auto w = workload(model);
      w.recompute = std::string(model) == "llama-30b" ? Recompute::full : Recompute::none;
      auto search = search_plans(w, t, cost, opt);
      ASSERT_TRUE(search) << search.error();
      EXPECT_EQ(search->legal_count, 121);
      EXPECT_EQ(search->plans.size(), 121u + baseline_plans(t).size());
      check_search(*search, t, opt);
      ASSERT_NE(search->chosen(), nullptr) << model;
      EXPECT_FALSE(search->chosen()->baseline);
      EXPECT_EQ(search->chosen()->why, "chosen");
      EXPECT_DOUBLE_EQ(search->chosen()->comm(p).total_s(), brute_force_best(w, t, cost, opt)) << model;
    }
  }
}

TEST(Planner, AgreesWithBruteForceOnRandomClustersAndLimits) {
  std::mt19937 rng(3);
  const int gpus[] = {1, 2, 4, 8};
  const int nodes[] = {1, 2, 3, 4, 6, 8, 16};
  const char* nets[] = {"paper-a800", "h100-ndr", "ethernet-100g"};
  for (int trial = 0; trial < 25; ++trial) {
    const Topology t{gpus[rng() % 4], nodes[rng() % 7]};
    const CostModel cost(network_preset(nets[rng() % 3]).value());
    auto w = workload("small", 1 + int(rng() % 4), 256);
    PlannerOptions opt;
    opt.objective = Objective::comm;
    opt.bucket_bytes = int64_t(1) << (12 + rng() % 10);
    opt.rank_by = rng() % 2 ? Pricing::paper_isolated : Pricing::shared_links;
    // A limit between the smallest and the largest need, so some plans do not fit.
    PlannerOptions unlimited;
    unlimited.gpu_mem_bytes = std::numeric_limits<double>::max();
    unlimited.bucket_bytes = opt.bucket_bytes;
    unlimited.objective = Objective::comm;
    auto all = search_plans(w, t, cost, unlimited);
    ASSERT_TRUE(all);
    double lo = std::numeric_limits<double>::max(), hi = 0;
    for (const auto& e : all->plans)
      lo = std::min(lo, e.memory.required_bytes()), hi = std::max(hi, e.memory.required_bytes());
    opt.gpu_mem_bytes = lo + (hi - lo) * (rng() % 100) / 100.0;
    auto search = search_plans(w, t, cost, opt);
    ASSERT_TRUE(search) << search.error();
    EXPECT_EQ(search->plans.size(), enumerate_legal_plans(t).size());
    check_search(*search, t, opt);
    const double brute = brute_force_best(w, t, cost, opt);
    if (std::isinf(brute)) {
      EXPECT_EQ(search->chosen(), nullptr);
    } else {
      ASSERT_NE(search->chosen(), nullptr) << t.to_string();
      EXPECT_DOUBLE_EQ(search->chosen()->comm(opt.rank_by).total_s(), brute) << t.to_string();
    }
  }
}

TEST(Planner, NothingFitsMeansNoChoiceAndEveryReasonSaysWhy) {
  const Topology t{8, 2};
  const CostModel cost(network_preset("paper-a800").value());
  PlannerOptions opt;
  opt.gpu_mem_bytes = 1 << 20;  // 1 MiB
  auto search = search_plans(workload("llama-7b"), t, cost, opt);
  ASSERT_TRUE(search);
  EXPECT_EQ(search->chosen(), nullptr);
  for (const auto& e : search->plans) {
    EXPECT_FALSE(e.feasible);
    EXPECT_NE(e.infeasible_reason.find(" GiB > 0.0 GiB"), std::string::npos) << e.infeasible_reason;
  }
  // Sorted by how much they need: the closest to fitting first.
  for (std::size_t i = 1; i < search->plans.size(); ++i)
    EXPECT_LE(search->plans[i - 1].memory.required_bytes(), search->plans[i].memory.required_bytes());
}

TEST(Planner, ExplainsWhyEachPlanLoses) {
  const Topology t{8, 16};
  const CostModel cost(network_preset("paper-a800").value());
  PlannerOptions opt;
  opt.objective = Objective::comm;
  opt.include_baselines = true;
  auto search = search_plans(workload("llama-7b", 8), t, cost, opt);
  ASSERT_TRUE(search);
  ASSERT_NE(search->chosen(), nullptr);
  for (const auto& e : search->plans) {
    if (!e.feasible || &e == search->chosen()) continue;
    if (e.comm(opt.rank_by).total_s() > search->chosen()->comm(opt.rank_by).total_s()) {
      EXPECT_NE(e.why.find("comm vs best: more "), std::string::npos) << e.label() << ": " << e.why;
    }
  }
  // ZeRO-3's gathers over all 128 GPUs cross nodes: its reason names inter-node traffic.
  for (const auto& e : search->plans)
    if (e.plan.name == "zero3" && e.feasible) {
      EXPECT_NE(e.why.find("inter-node"), std::string::npos) << e.why;
    }
}

TEST(Planner, NeverChoosesAPlanAboveTheUsableMemory) {
  // LLaMA-13B on 16 nodes of 8 x 80 GiB, 4M tokens per step (M = 8). Without a reserve the planner picks
  // p=1x1,g=1x1,os=8x8, whose tensors need 78.3 GiB of the 80: on a GPU the CUDA context, NCCL's buffers and the
  // allocator's fragmentation would not fit beside them. With the reserve that plan needs more than 80 GiB, and
  // whatever is chosen fits with its reserve.
  const Topology t{8, 16};
  auto w = workload("llama-13b", 8);
  w.global_batch_tokens = 4 << 20;
  const CostModel cost(network_preset("paper-a800").value());
  PlannerOptions bare;
  bare.objective = Objective::comm;
  bare.reserve = MemoryReserve{0, 0, 0, 0};
  auto without = search_plans(w, t, cost, bare);
  ASSERT_TRUE(without);
  ASSERT_NE(without->chosen(), nullptr);
  EXPECT_EQ(without->chosen()->plan.to_string(), "p=1x1,g=1x1,os=8x8");
  // Its tensors fit in the 80 GiB with less than the reserve to spare.
  EXPECT_GT(without->chosen()->memory.total_bytes / double(1ull << 30), 76.0);
  EXPECT_LT(without->chosen()->memory.total_bytes / double(1ull << 30), 80.0);
  PlannerOptions reserved;
  reserved.objective = Objective::comm;
  auto with = search_plans(w, t, cost, reserved);
  ASSERT_TRUE(with);
  ASSERT_NE(with->chosen(), nullptr);
  EXPECT_NE(with->chosen()->plan.to_string(), "p=1x1,g=1x1,os=8x8");
  EXPECT_LE(with->chosen()->memory.required_bytes(), reserved.gpu_mem_bytes);
  for (const auto& e : with->plans) {
    if (e.plan.to_string() != "p=1x1,g=1x1,os=8x8") continue;
    EXPECT_FALSE(e.feasible);
    EXPECT_NE(e.infeasible_reason.find("reserve"), std::string::npos) << e.infeasible_reason;
  }
}

TEST(Planner, EvaluatesOnePlan) {
  const Topology t{8, 4};
  const CostModel cost(network_preset("paper-a800").value());
  auto e = evaluate_plan(workload("llama-7b"), t, parse_plan("p=8,g=8,os=8x4", t).value(), cost, PlannerOptions{});
  ASSERT_TRUE(e) << e.error();
  EXPECT_TRUE(e->feasible);
  EXPECT_GT(e->isolated.param_s, 0);
  EXPECT_GT(e->inter_message_bytes, 0);
  EXPECT_GT(e->intra_message_bytes, 0);
  Plan bad = parse_plan("p=8,g=8,os=8x4", t).value();
  bad.os = ShardFactor{8, 3};
  auto err = evaluate_plan(workload("llama-7b"), t, bad, cost, PlannerOptions{});
  ASSERT_FALSE(err);
  EXPECT_NE(err.error().find("divisibility"), std::string::npos) << err.error();
}

}  // namespace
}  // namespace lins

namespace lins {
namespace {

// A projected plan for the tier tests: its step time, whether it fits, and whether a framework runs it.
PlanEvaluation projected(const std::string& text, double step_s, bool feasible = true) {
  const Topology t{8, 4};
  PlanEvaluation e;
  e.plan = parse_plan(text, t).value();
  e.baseline = e.plan.engine != Engine::lins;
  e.projected = true;
  e.step.step_s = step_s;
  e.step.forward_s = step_s;
  e.feasible = feasible;
  if (!feasible) e.infeasible_reason = "needs more";
  return e;
}

// Tiers: tier 1 holds the plans within the tie of the fastest, tier 2 those within it of the first plan outside tier
// 1; the recommendation is the fastest baseline of tier 1, else the fastest plan; the chosen plan stays the fastest.
TEST(PlannerTiers, TiesAndRecommendation) {
  std::vector<PlanEvaluation> evals = {
      projected("p=8x1,g=8x1,os=8x4", 1.00), projected("zero3", 1.15), projected("zeropp", 1.19),
      projected("zero1", 1.25),              projected("ddp", 1.60),   projected("zero2", 0.5, /*feasible=*/false)};
  PlanSearch s = rank_plans(evals, Pricing::paper_isolated, Objective::step, 0.2);
  ASSERT_NE(s.chosen(), nullptr);
  EXPECT_EQ(s.chosen()->label(), "p=8x1,g=8x1,os=8x4");
  std::map<std::string, int> tier;
  for (const auto& e : s.plans) tier[e.label()] = e.tier;
  EXPECT_EQ(tier["p=8x1,g=8x1,os=8x4"], 1);
  EXPECT_EQ(tier["zero3"], 1);
  EXPECT_EQ(tier["zeropp"], 1);
  EXPECT_EQ(tier["zero1"], 2);  // 25% slower: opens tier 2
  EXPECT_EQ(tier["ddp"], 3);    // 28% slower than zero1
  EXPECT_EQ(tier["zero2"], 0);  // does not fit
  ASSERT_NE(s.recommendation(), nullptr);
  EXPECT_EQ(s.recommendation()->label(), "zero3");
  // A tie of 0: every plan its own tier, the fastest recommended.
  s = rank_plans(evals, Pricing::paper_isolated, Objective::step, 0.0);
  EXPECT_EQ(s.recommendation()->label(), "p=8x1,g=8x1,os=8x4");
  // The paper's objective recommends its chosen 6-tuple.
  s = rank_plans(evals, Pricing::paper_isolated, Objective::comm, 0.2);
  EXPECT_EQ(s.recommended, s.best);
}

// The setting behind an exposed wait is named while it is at its default, and not once it is given.
TEST(PlannerTiers, ExposedSetting) {
  const Topology t{8, 4};
  EngineOptions engine;
  const Plan zero2 = parse_plan("zero2", t).value(), zero3 = parse_plan("zero3", t).value();
  EXPECT_NE(exposed_setting(zero2, CollKind::all_reduce, engine).find("--ds-overlap-comm on"), std::string::npos);
  EXPECT_NE(exposed_setting(zero3, CollKind::all_gather, engine).find("--ds-prefetch-bucket"), std::string::npos);
  EXPECT_EQ(exposed_setting(zero3, CollKind::all_gather, engine).find("overlap_comm"), std::string::npos);
  EXPECT_EQ(exposed_setting(parse_plan("fsdp", t).value(), CollKind::all_gather, engine), "");
  engine.ds_overlap_comm = true;
  engine.ds_reduce_bucket_elems = 1000;
  EXPECT_EQ(exposed_setting(zero2, CollKind::all_reduce, engine), "");
}

}  // namespace
}  // namespace lins
