// The fit of `lins comm --contention`: measured times in, contention parameters out, with the clamps (negative
// slowdowns, eta above 1), the links-shared decision and the sum/max decision of B4, on hand-made measurements.
#include "core/cost/contention_fit.h"

#include <gtest/gtest.h>

#include <string>

namespace lins {
namespace {

// `n` repeats: alone `alone_s`, under alone_s * (1 + slowdown), with +-`jitter` on the under time of the first two.
PairedTimes paired(double alone_s, double slowdown, int n = 5, double jitter = 0) {
  PairedTimes p;
  for (int i = 0; i < n; ++i) {
    p.alone_s.push_back(alone_s);
    const double j = i == 0 ? jitter : (i == 1 ? -jitter : 0);
    p.under_s.push_back(alone_s * (1 + slowdown + j));
  }
  return p;
}

bool has_note(const ContentionFit& f, const std::string& part) {
  for (const auto& n : f.notes)
    if (n.find(part) != std::string::npos) return true;
  return false;
}

TEST(ContentionFit, EstimateIsMedianAndRange) {
  const Estimate e = estimate_of({3, 1, 2, 10});
  EXPECT_EQ(e.n, 4);
  EXPECT_DOUBLE_EQ(e.median, 2.5);
  EXPECT_DOUBLE_EQ(e.min, 1);
  EXPECT_DOUBLE_EQ(e.max, 10);
  EXPECT_EQ(estimate_of({}).n, 0);
}

TEST(ContentionFit, SlowdownIsPairedRatioMinusOne) {
  const Estimate e = slowdown_estimate(paired(0.1, 0.25, 5, 0.05));
  EXPECT_NEAR(e.median, 0.25, 1e-12);
  EXPECT_NEAR(e.min, 0.20, 1e-12);
  EXPECT_NEAR(e.max, 0.30, 1e-12);
  // Pairs, not medians of each side: a drift that moves both alone and under cancels.
  PairedTimes drift;
  drift.alone_s = {1.0, 2.0, 4.0};
  drift.under_s = {1.5, 3.0, 6.0};
  EXPECT_NEAR(slowdown_estimate(drift).median, 0.5, 1e-12);
  EXPECT_EQ(slowdown_estimate(PairedTimes{}).n, 0);
}

TEST(ContentionFit, ShareIsNTimesAloneOverConcurrent) {
  PairedTimes t;
  t.alone_s = {1.0, 1.0, 1.0};
  t.under_s = {2.5, 2.5, 2.0};
  const Estimate e = share_estimate(t, 2);
  EXPECT_NEAR(e.median, 0.8, 1e-12);
  EXPECT_NEAR(e.max, 1.0, 1e-12);
}

TEST(ContentionFit, FitsEveryParameter) {
  ContentionSamples s;
  s.compute[0][0] = paired(0.1, 0.05);
  s.compute[0][1] = paired(0.1, 0.10);
  s.compute[1][0] = paired(0.1, 0.30);
  s.compute[1][1] = paired(0.1, 0.20);
  s.transfer[0] = paired(0.01, 0.4);
  s.transfer[1] = paired(0.02, 0.1);
  s.shared.alone_s = {1, 1, 1};
  s.shared.under_s = {2.5, 2.5, 2.5};  // eta 0.8: shared
  s.compute_both[0] = paired(0.1, 0.15);  // the sum of 0.05 and 0.10
  s.compute_both[1] = paired(0.1, 0.50);  // the sum of 0.30 and 0.20
  const ContentionFit f = fit_contention(s, "measured: test");
  const Contention& p = f.params;
  EXPECT_NEAR(p.kappa[0][0], 0.05, 1e-12);
  EXPECT_NEAR(p.kappa[0][1], 0.10, 1e-12);
  EXPECT_NEAR(p.kappa[1][0], 0.30, 1e-12);
  EXPECT_NEAR(p.kappa[1][1], 0.20, 1e-12);
  EXPECT_NEAR(p.lambda[0], 0.4, 1e-12);
  EXPECT_NEAR(p.lambda[1], 0.1, 1e-12);
  EXPECT_TRUE(p.links_shared);
  EXPECT_NEAR(p.eta, 0.8, 1e-12);
  EXPECT_EQ(p.combine, KappaCombine::sum);
  EXPECT_NEAR(f.sum_error, 0, 1e-12);
  EXPECT_NEAR(f.max_error, 0.05 + 0.2, 1e-12);
  EXPECT_EQ(p.source, "measured: test");
  EXPECT_TRUE(has_note(f, "kappa_combine = sum"));
}

TEST(ContentionFit, ClampsNoise) {
  ContentionSamples s;
  s.compute[0][0] = paired(0.1, -0.04);  // faster beside a collective: noise
  s.compute[0][1] = paired(0.1, 0.02);
  s.transfer[1] = paired(0.01, -0.1);
  s.shared.alone_s = {1, 1, 1};
  s.shared.under_s = {1.6, 1.6, 1.6};  // eta 1.25: above 1, yet 1.6x is closer to fair shares (2x) than to 1x
  const ContentionFit f = fit_contention(s, "x");
  EXPECT_DOUBLE_EQ(f.params.kappa[0][0], 0);
  EXPECT_NEAR(f.kappa[0][0].median, -0.04, 1e-12);  // the raw value is kept for the table
  EXPECT_NEAR(f.params.kappa[0][1], 0.02, 1e-12);
  EXPECT_DOUBLE_EQ(f.params.lambda[1], 0);
  EXPECT_DOUBLE_EQ(f.params.eta, 1);
  EXPECT_TRUE(f.params.links_shared);
  EXPECT_TRUE(has_note(f, "kappa_gemm_intra: measured -0.04"));
  EXPECT_TRUE(has_note(f, "lambda_inter: measured -0.1"));
  EXPECT_TRUE(has_note(f, "eta: measured 1.25"));
  EXPECT_TRUE(has_note(f, "kappa_memory_intra: not measured"));
  // A collective 111 times slower under compute (ranks starved for a core on an oversubscribed machine): the ceiling
  // a network file accepts (network_spec_test loads a file at it), with a note.
  ContentionSamples starved;
  starved.transfer[0] = paired(1e-4, 110.8);
  const ContentionFit g = fit_contention(starved, "measured: test");
  EXPECT_DOUBLE_EQ(g.params.lambda[0], kMaxSlowdown);
  EXPECT_NEAR(g.lambda[0].median, 110.8, 1e-9);
  EXPECT_TRUE(has_note(g, "lambda_intra: measured 110.8 (above 100"));
  // Just above the ceiling the note does not round the measured value onto it.
  starved.transfer[0] = paired(1e-4, 100.045);
  EXPECT_TRUE(has_note(fit_contention(starved, "x"), "lambda_intra: measured 100.045 (above 100"));
  // Never measured: zeros, links not shared, combine sum, each said.
  const ContentionFit none = fit_contention(ContentionSamples{}, "x");
  EXPECT_FALSE(none.params.any());
  EXPECT_EQ(none.params.combine, KappaCombine::sum);
  EXPECT_TRUE(has_note(none, "eta: not measured"));
  EXPECT_TRUE(has_note(none, "kappa_combine: not measured"));
}

TEST(ContentionFit, LinksNotSharedWhenConcurrentIsAsFastAsAlone) {
  ContentionSamples s;
  s.shared.alone_s = {1, 1, 1};
  s.shared.under_s = {1.1, 1.05, 0.95};  // eta ~1.9: each group has a link of its own
  const ContentionFit f = fit_contention(s, "x");
  EXPECT_FALSE(f.params.links_shared);
  EXPECT_DOUBLE_EQ(f.params.eta, 1);
  EXPECT_TRUE(has_note(f, "links_shared = false"));
  EXPECT_FALSE(choose_links_shared(1.3, 2, 1.0));  // below sqrt(2): closer to 1x
  EXPECT_TRUE(choose_links_shared(1.5, 2, 1.0));
  EXPECT_TRUE(choose_links_shared(3.0, 2, 0.7));
  EXPECT_FALSE(choose_links_shared(3.0, 1, 0.7));  // one group shares with nobody
}

TEST(ContentionFit, ChoosesMaxWhenTheSlowdownsDoNotAdd) {
  ContentionSamples s;
  s.compute[0][0] = paired(0.1, 0.20);
  s.compute[0][1] = paired(0.1, 0.10);
  s.compute[1][0] = paired(0.1, 0.40);
  s.compute[1][1] = paired(0.1, 0.30);
  s.compute_both[0] = paired(0.1, 0.21);  // max 0.20, sum 0.30
  s.compute_both[1] = paired(0.1, 0.45);  // max 0.40, sum 0.70
  const ContentionFit f = fit_contention(s, "x");
  EXPECT_EQ(f.params.combine, KappaCombine::max);
  EXPECT_NEAR(f.max_error, 0.01 + 0.05, 1e-9);
  EXPECT_NEAR(f.sum_error, 0.09 + 0.25, 1e-9);
  EXPECT_TRUE(has_note(f, "kappa_combine = max"));
}

TEST(ContentionFit, CombineTiesAndMissingEvidenceGoToSum) {
  const double measured[2] = {0.1, 0.2}, sum[2] = {0.1, 0.2}, max[2] = {0.1, 0.2};
  const bool have[2] = {true, true}, none[2] = {false, false};
  double es = -1, em = -1;
  EXPECT_EQ(choose_combine(measured, sum, max, have, &es, &em), KappaCombine::sum);
  EXPECT_DOUBLE_EQ(es, 0);
  EXPECT_DOUBLE_EQ(em, 0);
  const double far[2] = {5, 5};
  EXPECT_EQ(choose_combine(measured, far, max, none, &es, &em), KappaCombine::sum);  // classes not measured count not
  // The clamped kappas feed the prediction: a negative single kappa adds 0, not its noise.
  ContentionSamples s;
  s.compute[0][0] = paired(0.1, -0.05);
  s.compute[0][1] = paired(0.1, 0.10);
  s.compute_both[0] = paired(0.1, 0.10);
  const ContentionFit f = fit_contention(s, "x");
  EXPECT_NEAR(f.both_sum[0], 0.10, 1e-12);
  EXPECT_NEAR(f.both_max[0], 0.10, 1e-12);
  EXPECT_EQ(f.params.combine, KappaCombine::sum);
  EXPECT_TRUE(has_note(f, "sum and max predict alike"));
}

TEST(ContentionFit, TomlCarriesTheFittedValues) {
  ContentionSamples s;
  s.compute[0][1] = paired(0.1, 0.125);
  const ContentionFit f = fit_contention(s, "measured: lins comm --contention on mpi, 2x2");
  const std::string toml = contention_toml(f.params, "line one\nline two");
  EXPECT_NE(toml.find("# line one\n# line two\n[contention]\n"), std::string::npos);
  EXPECT_NE(toml.find("kappa_gemm_inter = 0.125\n"), std::string::npos);
  EXPECT_NE(toml.find("source = \"measured: lins comm --contention on mpi, 2x2\""), std::string::npos);
  EXPECT_NE(toml.find("kappa_combine = \"sum\""), std::string::npos);
}

}  // namespace
}  // namespace lins
