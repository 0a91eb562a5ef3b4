// Shared model/topology/workload options: presets, overrides, world-derived topology, and M from the token budget.
#include "core/schedule/workload.h"

#include <gtest/gtest.h>

namespace lins {
namespace {

CommandSpec spec() {
  CommandSpec s;
  s.name = "test";
  s.usage = "lins test";
  s.options = concat_options(concat_options(model_options(), topology_options()), workload_options());
  return s;
}

ParsedArgs parse(const std::vector<std::string>& words) {
  auto a = parse_args(spec(), words);
  EXPECT_TRUE(a) << a.error();
  return *a;
}

TEST(Workload, Llama7bParamCount) {
  auto m = parse_model(parse({}));
  ASSERT_TRUE(m) << m.error();
  EXPECT_EQ(m->name, "llama-7b");
  EXPECT_EQ(m->param_count(), 6738415616);
}

TEST(Workload, ShapeFlagsOverrideThePreset) {
  auto m = parse_model(parse({"--model", "llama-13b", "--layers", "2"}));
  ASSERT_TRUE(m) << m.error();
  EXPECT_EQ(m->name, "custom");
  EXPECT_EQ(m->dims.layers, 2);
  EXPECT_EQ(m->dims.hidden, 5120);
  auto bad = parse_model(parse({"--hidden", "100", "--heads", "3"}));
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("divisible by heads"), std::string::npos) << bad.error();
  auto unknown = parse_model(parse({"--model", "gpt-5"}));
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().find("valid models"), std::string::npos);
  auto zero = parse_model(parse({"--layers", "0"}));
  ASSERT_FALSE(zero);
  EXPECT_NE(zero.error().find("--layers"), std::string::npos) << zero.error();
}

TEST(Workload, TopologyFromFlagsOrWorld) {
  auto t = parse_topology(parse({}));
  ASSERT_TRUE(t) << t.error();
  EXPECT_EQ(t->world(), 1024);
  auto w = parse_topology(parse({"--gpus-per-node", "4"}), 8);
  ASSERT_TRUE(w) << w.error();
  EXPECT_EQ(w->nodes, 2);
  auto not_multiple = parse_topology(parse({"--gpus-per-node", "4"}), 6);
  ASSERT_FALSE(not_multiple);
  EXPECT_NE(not_multiple.error().find("not a multiple"), std::string::npos) << not_multiple.error();
  auto inconsistent = parse_topology(parse({"--gpus-per-node", "4", "--nodes", "3"}), 8);
  ASSERT_FALSE(inconsistent);
  EXPECT_NE(inconsistent.error().find("but the job has 8"), std::string::npos) << inconsistent.error();
  EXPECT_TRUE(parse_topology(parse({"--gpus-per-node", "4", "--nodes", "2"}), 8));
  EXPECT_FALSE(parse_topology(parse({"--nodes", "0"})));
}

TEST(Workload, MicroBatchesFromGlobalBatchTokens) {
  auto model = *make_model_preset("llama-7b");
  // The paper: 4M tokens, seq 4096, one sequence per micro-batch: M = 1024 / GPUs.
  auto w = parse_workload(parse({}), model, Topology{8, 1});
  ASSERT_TRUE(w) << w.error();
  EXPECT_EQ(w->micro_batches, 128);
  EXPECT_EQ(w->global_batch_tokens, 4 << 20);
  EXPECT_EQ(w->recompute, Recompute::none);
  EXPECT_FALSE(w->recompute_fixed);
  EXPECT_FALSE(w->micro_batch_fixed);
  auto w1024 = parse_workload(parse({"--recompute"}), model, Topology{8, 128});
  ASSERT_TRUE(w1024);
  EXPECT_EQ(w1024->micro_batches, 1);
  EXPECT_EQ(w1024->recompute, Recompute::full);
  EXPECT_TRUE(w1024->recompute_fixed);
  auto explicit_m = parse_workload(parse({"--micro-batches", "4", "--seq", "128"}), model, Topology{2, 1});
  ASSERT_TRUE(explicit_m);
  EXPECT_EQ(explicit_m->micro_batches, 4);
  EXPECT_EQ(explicit_m->global_batch_tokens, 4 * 128 * 2);
}

TEST(Workload, RejectsAWrongTokenBudget) {
  auto model = *make_model_preset("tiny");
  auto too_small = parse_workload(parse({"--global-batch-tokens", "1M"}), model, Topology{8, 128});
  ASSERT_FALSE(too_small);
  EXPECT_NE(too_small.error().find("not a whole positive number"), std::string::npos) << too_small.error();
  EXPECT_NE(too_small.error().find("multiples of 4194304"), std::string::npos) << too_small.error();
  auto uneven = parse_workload(parse({"--global-batch-tokens", "5000", "--seq", "1000"}), model, Topology{2, 1});
  ASSERT_FALSE(uneven);
  EXPECT_NE(uneven.error().find("such as 4000"), std::string::npos) << uneven.error();
  auto both = parse_workload(parse({"--global-batch-tokens", "4M", "--micro-batches", "2"}), model, Topology{8, 1});
  ASSERT_FALSE(both);
  EXPECT_NE(both.error().find("not both"), std::string::npos);
  EXPECT_FALSE(parse_workload(parse({"--seq", "0"}), model, Topology{8, 1}));
  EXPECT_FALSE(parse_workload(parse({"--micro-batches", "-1"}), model, Topology{8, 1}));
}

TEST(Workload, OneDefaultBucketForEveryCommand) {
  CommandSpec s = spec();
  s.options.push_back(bucket_option());
  auto d = parse_args(s, {});
  ASSERT_TRUE(d) << d.error();
  auto bucket = parse_bucket(*d);
  ASSERT_TRUE(bucket) << bucket.error();
  EXPECT_EQ(*bucket, kDefaultBucketBytes);
  EXPECT_EQ(*bucket, 25ll << 20) << "DDP's bucket_cap_mb = 25, the Lins engine's U (docs/engines.md)";
  EXPECT_EQ(*bucket, EngineOptions{}.bucket_bytes);
  for (const char* bad : {"0", "2T"}) {
    auto a = parse_args(s, {"--bucket", bad});
    ASSERT_TRUE(a) << a.error();
    auto b = parse_bucket(*a);
    ASSERT_FALSE(b) << bad;
    EXPECT_NE(b.error().find(std::string("--bucket ") + bad + " must be between 1 byte and 1TiB (default 25MiB)"),
              std::string::npos)
        << b.error();
  }
  auto one = parse_args(s, {"--bucket", "1M"});
  ASSERT_TRUE(one);
  EXPECT_EQ(*parse_bucket(*one), 1 << 20);
}

}  // namespace
}  // namespace lins

namespace lins {
namespace {

TEST(Workload, RecomputeModes) {
  auto model = *make_model_preset("llama-7b");
  const Topology t{8, 4};
  for (Recompute r : kRecomputeNames.values()) {
    auto w = parse_workload(parse({"--recompute-mode", recompute_name(r)}), model, t);
    ASSERT_TRUE(w) << w.error();
    EXPECT_EQ(w->recompute, r);
    EXPECT_TRUE(w->recompute_fixed);
  }
  // --recompute is full, and with --recompute-mode full it is the same request.
  auto both = parse_workload(parse({"--recompute", "--recompute-mode", "full"}), model, t);
  ASSERT_TRUE(both) << both.error();
  EXPECT_EQ(both->recompute, Recompute::full);
  auto clash = parse_workload(parse({"--recompute", "--recompute-mode", "selective"}), model, t);
  ASSERT_FALSE(clash);
  EXPECT_NE(clash.error().find("--recompute-mode selective"), std::string::npos) << clash.error();
  auto bad = parse_workload(parse({"--recompute-mode", "some"}), model, t);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("none, selective, full"), std::string::npos) << bad.error();
  auto fixed = parse_workload(parse({"--micro-batch", "2"}), model, t);
  ASSERT_TRUE(fixed) << fixed.error();
  EXPECT_TRUE(fixed->micro_batch_fixed);
}

TEST(Workload, VariantsKeepTheGlobalBatch) {
  auto model = *make_model_preset("llama-7b");
  const Topology t{8, 16};
  auto w = parse_workload(parse({"--global-batch-tokens", "2M"}), model, t);  // 512 sequences on 128 GPUs: M b = 4
  ASSERT_TRUE(w) << w.error();
  for (int b : {1, 2, 4}) {
    auto v = workload_variant(*w, t, b, Recompute::selective);
    ASSERT_TRUE(v) << v.error();
    EXPECT_EQ(v->micro_batch_size, b);
    EXPECT_EQ(v->micro_batches, 4 / b);
    EXPECT_EQ(v->global_batch_tokens, w->global_batch_tokens);
    EXPECT_EQ(v->recompute, Recompute::selective);
  }
  EXPECT_FALSE(workload_variant(*w, t, 8, Recompute::none));
  EXPECT_FALSE(workload_variant(*w, t, 3, Recompute::none));
}

}  // namespace
}  // namespace lins
