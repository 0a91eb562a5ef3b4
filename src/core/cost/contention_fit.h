// The fit of the contention rates (contention.h) from what `lins comm --contention` measured: paired times (alone,
// then under contention, once per repeat) in, the parameters with their spread over repeats and every clamp or
// decision out. Pure functions, so the fit is tested without MPI or a device (tests/unit/core/contention_fit_test.cpp).
#pragma once

#include <string>
#include <vector>

#include "core/cost/contention.h"

namespace lins {

// One quantity measured alone and under contention, once per repeat: alone_s[i] and under_s[i] were taken one after
// the other, so their ratio cancels most of a noisy machine's drift between repeats. Empty: not measured.
struct PairedTimes {
  std::vector<double> alone_s, under_s;
  bool measured() const { return !alone_s.empty() && alone_s.size() == under_s.size(); }
};

// The median and range of a per-repeat value; n = 0 when nothing was measured.
struct Estimate {
  double median = 0, min = 0, max = 0;
  int n = 0;
};
// Median (mean of the two middle values for an even count), min and max of the finite values (negative ones kept:
// a slowdown below 0 is noise the fit clamps and reports).
Estimate estimate_of(std::vector<double> values);
// under_i / alone_i - 1 per repeat: the slowdown (kappa, lambda) before any clamp.
Estimate slowdown_estimate(const PairedTimes& t);
// n * alone_i / under_i per repeat: the sharing efficiency of n collectives of different groups on one link (eta).
Estimate share_estimate(const PairedTimes& t, int n);

// What the benchmark measured (B1-B4 of docs/cost-model.md, "Measuring contention"); fabric 0 intra, 1 inter.
struct ContentionSamples {
  PairedTimes compute[kTaskClassCount][2];     // B1: a compute kernel alone / under a continuous collective
  PairedTimes transfer[2];                     // B2: a collective alone / under continuous compute (GEMM)
  PairedTimes shared;                          // B3: one group's collective alone / beside `shared_n - 1` others
  int shared_n = 2;                            //     groups on one fabric at once (itself included)
  PairedTimes compute_both[kTaskClassCount];   // B4: a compute kernel alone / beside collectives on both fabrics
};

// The fitted parameters and the evidence behind them.
struct ContentionFit {
  Contention params;                         // clamped and decided: what the TOML file gets
  Estimate kappa[kTaskClassCount][2];        // raw slowdowns (may be negative: noise)
  Estimate lambda[2];
  Estimate eta;                              // raw share efficiency (may exceed 1)
  Estimate both[kTaskClassCount];            // B4's raw slowdown
  double both_sum[kTaskClassCount] = {0, 0};  // what sum and max of the clamped kappas predict for B4
  double both_max[kTaskClassCount] = {0, 0};
  double sum_error = 0, max_error = 0;        // |measured - predicted| summed over the classes B4 measured
  bool combine_measured = false;              // B4 ran (else combine stays sum, the default)
  std::vector<std::string> notes;             // clamps, decisions and what was not measured, one sentence each
};

// The decision of B4: sum when the measured slowdowns are closer to the sums of the single-collective kappas than to
// their maxima (ties, and no evidence, go to sum, the conservative choice).
KappaCombine choose_combine(const double measured[kTaskClassCount], const double sum[kTaskClassCount],
                            const double max[kTaskClassCount], const bool have[kTaskClassCount], double* sum_error,
                            double* max_error);
// The decision of B3: links are shared when the measured concurrent/alone ratio is closer (in log) to n / eta (fair
// shares at the clamped eta) than to 1 (each collective has the whole link).
bool choose_links_shared(double ratio, int n, double eta);

// Every parameter from the samples, clamped (a negative slowdown from noise to 0, eta above 1 to 1, eta below 0.05
// to 0.05) with a note for each clamp; `source` goes into params.source.
ContentionFit fit_contention(const ContentionSamples& s, const std::string& source);

}  // namespace lins
