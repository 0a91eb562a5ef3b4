// The fit of the contention rates from paired measurements; see contention_fit.h.
#include "core/cost/contention_fit.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/util/stats.h"

namespace lins {
namespace {

const char* kFabricNames[2] = {"intra", "inter"};

// `digits` significant digits: 3 for the notes, more where a value near a bound must not round onto it.
std::string num(double v, int digits = 3) {
  char b[32];
  std::snprintf(b, sizeof b, "%.*g", digits, v);
  return b;
}

// A slowdown is at least 0: a compute task cannot run faster because a collective runs beside it, so a negative
// median is noise of the machine, which the note makes visible instead of the model quietly speeding work up. Above
// kMaxSlowdown it is the ceiling a network file accepts, so that what `lins comm --contention` writes always loads.
double clamp_slowdown(const Estimate& e, const std::string& key, std::vector<std::string>& notes) {
  if (e.n == 0) {
    notes.push_back(key + ": not measured, 0");
    return 0;
  }
  if (e.median < 0) {
    notes.push_back(key + ": measured " + num(e.median) + " (below 0: noise), clamped to 0");
    return 0;
  }
  if (e.median > kMaxSlowdown) {
    notes.push_back(key + ": measured " + num(e.median, 6) + " (above " + num(kMaxSlowdown) +
                    ": the rank starved for a core, not overlap), clamped to " + num(kMaxSlowdown));
    return kMaxSlowdown;
  }
  return e.median;
}

}  // namespace

Estimate estimate_of(std::vector<double> values) {
  values.erase(std::remove_if(values.begin(), values.end(), [](double v) { return !std::isfinite(v); }),
               values.end());
  Estimate e;
  if (values.empty()) return e;
  const auto [lo, hi] = std::minmax_element(values.begin(), values.end());
  e.n = int(values.size());
  e.min = *lo;
  e.max = *hi;
  e.median = median(values);
  return e;
}

Estimate slowdown_estimate(const PairedTimes& t) {
  if (!t.measured()) return {};
  std::vector<double> v;
  for (size_t i = 0; i < t.alone_s.size(); ++i)
    if (t.alone_s[i] > 0 && t.under_s[i] > 0) v.push_back(t.under_s[i] / t.alone_s[i] - 1);
  return estimate_of(v);
}

Estimate share_estimate(const PairedTimes& t, int n) {
  if (!t.measured() || n < 2) return {};
  std::vector<double> v;
  for (size_t i = 0; i < t.alone_s.size(); ++i)
    if (t.alone_s[i] > 0 && t.under_s[i] > 0) v.push_back(n * t.alone_s[i] / t.under_s[i]);
  return estimate_of(v);
}

KappaCombine choose_combine(const double measured[kTaskClassCount], const double sum[kTaskClassCount],
                            const double max[kTaskClassCount], const bool have[kTaskClassCount], double* sum_error,
                            double* max_error) {
  double es = 0, em = 0;
  for (int c = 0; c < kTaskClassCount; ++c) {
    if (!have[c]) continue;
    es += std::fabs(measured[c] - sum[c]);
    em += std::fabs(measured[c] - max[c]);
  }
  if (sum_error) *sum_error = es;
  if (max_error) *max_error = em;
  return em < es ? KappaCombine::max : KappaCombine::sum;
}

bool choose_links_shared(double ratio, int n, double eta) {
  if (!(ratio > 0) || n < 2 || !(eta > 0)) return false;
  const double shared = std::log(n / eta), alone = 0, r = std::log(ratio);
  return std::fabs(r - shared) < std::fabs(r - alone);
}

ContentionFit fit_contention(const ContentionSamples& s, const std::string& source) {
  ContentionFit f;
  Contention& p = f.params;
  p.source = source;
  for (int c = 0; c < kTaskClassCount; ++c)
    for (int fab = 0; fab < 2; ++fab) {
      f.kappa[c][fab] = slowdown_estimate(s.compute[c][fab]);
      p.kappa[c][fab] = clamp_slowdown(
          f.kappa[c][fab], std::string("kappa_") + kTaskClassNames.name(TaskClass(c)) + "_" + kFabricNames[fab],
          f.notes);
    }
  for (int fab = 0; fab < 2; ++fab) {
    f.lambda[fab] = slowdown_estimate(s.transfer[fab]);
    p.lambda[fab] = clamp_slowdown(f.lambda[fab], std::string("lambda_") + kFabricNames[fab], f.notes);
  }

  // B3: eta from fair shares; whether links are shared at all is the closer of the two models.
  f.eta = share_estimate(s.shared, s.shared_n);
  if (f.eta.n == 0) {
    f.notes.push_back("eta: not measured (needs two groups on one fabric: 2 or more ranks per node and 2 or more "
                      "nodes); links not shared");
  } else {
    double eta = f.eta.median;
    if (eta > 1) {
      f.notes.push_back("eta: measured " + num(eta) + " (above 1: the link was not the bottleneck, or noise), clamped "
                        "to 1");
      eta = 1;
    } else if (eta < 0.05) {
      f.notes.push_back("eta: measured " + num(eta) + ", clamped to 0.05");
      eta = 0.05;
    }
    const double ratio = s.shared_n / f.eta.median;  // concurrent / alone
    p.links_shared = choose_links_shared(ratio, s.shared_n, eta);
    p.eta = eta;
    f.notes.push_back(std::string("links_shared = ") + (p.links_shared ? "true" : "false") + ": " +
                      std::to_string(s.shared_n) + " groups at once took " + num(ratio) +
                      "x one alone, closer to " + (p.links_shared ? "fair shares (" + num(s.shared_n / eta) + "x)"
                                                                   : std::string("a link each (1x)")) +
                      " than to " + (p.links_shared ? std::string("a link each (1x)")
                                                    : "fair shares (" + num(s.shared_n / eta) + "x)"));
  }

  // B4: the slowdown beside both fabrics' collectives against the sum and the max of the clamped single kappas.
  double measured[kTaskClassCount] = {0, 0};
  bool have[kTaskClassCount] = {false, false};
  for (int c = 0; c < kTaskClassCount; ++c) {
    f.both[c] = slowdown_estimate(s.compute_both[c]);
    f.both_sum[c] = p.kappa[c][0] + p.kappa[c][1];
    f.both_max[c] = std::max(p.kappa[c][0], p.kappa[c][1]);
    have[c] = f.both[c].n > 0 && f.kappa[c][0].n > 0 && f.kappa[c][1].n > 0;
    measured[c] = std::max(0.0, f.both[c].median);
    f.combine_measured = f.combine_measured || have[c];
  }
  p.combine = choose_combine(measured, f.both_sum, f.both_max, have, &f.sum_error, &f.max_error);
  if (!f.combine_measured) {
    f.notes.push_back("kappa_combine: not measured (needs both fabrics), sum");
  } else if (f.sum_error == f.max_error) {
    f.notes.push_back("kappa_combine: sum and max predict alike (" + num(f.sum_error) + " off), sum");
  } else {
    f.notes.push_back(std::string("kappa_combine = ") + kKappaCombineNames.name(p.combine) + ": beside both fabrics " +
                      "the slowdown is " + num(p.combine == KappaCombine::sum ? f.sum_error : f.max_error) +
                      " off the " + kKappaCombineNames.name(p.combine) + " of the single kappas, " +
                      num(p.combine == KappaCombine::sum ? f.max_error : f.sum_error) + " off the " +
                      (p.combine == KappaCombine::sum ? "max" : "sum"));
  }
  return f;
}

}  // namespace lins
