// Calibration recovers the rate and the fixed cost it was given, per engine, from step rows at two micro-batch counts.
#include "core/cost/calibrate.h"

#include <gtest/gtest.h>

#include <iomanip>
#include <sstream>

#include "core/model/model_spec.h"

namespace lins {
namespace {

// A step CSV with only the columns calibration reads.
std::string rows(const std::vector<std::tuple<std::string, int, double, double>>& cases) {
  const ModelSpec m = make_model_preset("small").value();
  std::ostringstream o;
  o << std::setprecision(17);
  o << "source,engine,model,seq,tokens,world_size,recompute,forward_s,backward_s,optimizer_s,step_time_s,"
       "exposed_comm_s,micro_batches\n";
  for (const auto& [engine, M, rate, fixed] : cases) {
    const double tokens = 128.0 * M * 4;  // seq 128, one sequence per micro-batch, 4 ranks
    const double flops = m.flops_per_token(128) * tokens / 4;
    const double compute = 0.002 + flops / rate;  // 2 ms of per-step compute that does not scale with M
    o << "measured," << engine << ",small,128," << tokens << ",4,0," << compute / 3 << "," << 2 * compute / 3
      << ",0.001," << compute + 0.001 + 0.01 + fixed << ",0.01," << M << "\n";
  }
  o << "projected,lins,small,128,512,4,0,1,1,0,9,0,1\n";  // projected rows are not measurements
  return o.str();
}

TEST(Calibrate, FitsEachEnginesRateAndFixedCost) {
  auto c = calibrate_from_step_text(rows({{"zero", 2, 2e9, 0.003},
                                          {"zero", 4, 2e9, 0.003},
                                          {"lins", 2, 5e9, 0.001},
                                          {"lins", 4, 5e9, 0.001},
                                          {"lins", 8, 5e9, 0.001}}),
                                    "rows.csv");
  ASSERT_TRUE(c) << c.error();
  EXPECT_NEAR(c->of("zero").flops_per_s / 2e9, 1.0, 1e-6);
  EXPECT_NEAR(c->of("lins").flops_per_s / 5e9, 1.0, 1e-6);
  EXPECT_NEAR(c->of("zero").fixed_step_s, 0.003 + 0.002, 1e-9);  // host time plus the per-step compute
  EXPECT_NEAR(c->of("lins").fixed_step_s, 0.001 + 0.002, 1e-9);
  EXPECT_EQ(c->of("lins").micro_batch_counts, 3);
  EXPECT_EQ(c->of("lins").rows, 3);
  // An engine without rows of its own gets the pooled fit.
  EXPECT_EQ(c->of("fsdp").rows, 5);
}

TEST(Calibrate, OneMicroBatchCountGivesFlopsOverSeconds) {
  auto c = calibrate_from_step_text(rows({{"ddp", 2, 1e9, 0.0}}), "one.csv");
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->of("ddp").micro_batch_counts, 1);
  EXPECT_LT(c->of("ddp").flops_per_s, 1e9);  // the 2 ms per-step compute cannot be told apart: a lower rate
}

TEST(Calibrate, BadInputIsNamed) {
  auto none = calibrate_from_step_text("source,engine\nmeasured,lins\n", "cols.csv");
  ASSERT_FALSE(none);
  EXPECT_NE(none.error().find("no column"), std::string::npos);
  auto projected_only = calibrate_from_step_text(rows({}), "p.csv");
  ASSERT_FALSE(projected_only);
  EXPECT_NE(projected_only.error().find("no measured row"), std::string::npos);
  EXPECT_FALSE(calibrate_from_step_csv("/no/such/step.csv"));
  // A figure that is not a number is named with its file, line and column (it was once read as 0).
  std::string garbled = rows({{"zero", 2, 2e9, 0.003}});
  garbled.replace(garbled.find(",0.001,"), 7, ",1.0e-3x,");
  auto bad = calibrate_from_step_text(garbled, "garbled.csv");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("garbled.csv:2: column 'optimizer_s': '1.0e-3x' is not a finite number"),
            std::string::npos)
      << bad.error();
}

}  // namespace
}  // namespace lins
