// The link terms of the alpha-beta model fitted to measured collectives; see link_fit.h.
#include "core/cost/link_fit.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <tuple>

#include "core/util/stats.h"

namespace lins {
namespace {

constexpr int kIntraLat = static_cast<int>(LinkTerm::intra_latency);
constexpr int kInterLat = static_cast<int>(LinkTerm::inter_latency);
constexpr int kIntraBw = static_cast<int>(LinkTerm::intra_bandwidth);
constexpr int kInterBw = static_cast<int>(LinkTerm::inter_bandwidth);
bool is_bandwidth(int j) { return j == kIntraBw || j == kInterBw; }

// A column is taken as a combination of those before it when what is left of it, after removing them, is below this
// fraction of its length: exact dependence (one mesh, one size) leaves rounding, about 1e-16.
constexpr double kDependent = 1e-9;
// The paths of broadcast and all-to-all on meshes spanning both link classes are chosen again from the new terms at
// most this many times.
constexpr int kMaxPathRounds = 20;

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

std::vector<double> column(const std::vector<LinkForm>& rows, int j) {
  std::vector<double> c(rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) c[i] = rows[i][j];
  return c;
}

// Modified Gram-Schmidt over the columns `cols` of `rows`, in that order: the columns independent of those kept
// before them (the others are skipped), their orthonormal basis and R.
struct Orthogonal {
  std::vector<int> kept;
  std::vector<int> dependent;
  std::vector<std::vector<double>> q;
  std::vector<std::vector<double>> r;  // r[i][k]: column kept[k] on q[i]
};

Orthogonal orthogonalize(const std::vector<LinkForm>& rows, const std::vector<int>& cols) {
  Orthogonal o;
  for (int j : cols) {
    std::vector<double> v = column(rows, j);
    const double norm = std::sqrt(dot(v, v));
    std::vector<double> rcol;
    for (const auto& q : o.q) {
      const double c = dot(q, v);
      for (std::size_t i = 0; i < v.size(); ++i) v[i] -= c * q[i];
      rcol.push_back(c);
    }
    const double left = std::sqrt(dot(v, v));
    if (norm == 0 || left <= kDependent * norm) {
      o.dependent.push_back(j);
      continue;
    }
    for (double& x : v) x /= left;
    rcol.push_back(left);
    for (std::size_t i = 0; i < o.r.size(); ++i) o.r[i].push_back(rcol[i]);
    o.r.push_back(std::vector<double>(o.kept.size(), 0.0));
    o.r.back().push_back(left);
    o.q.push_back(std::move(v));
    o.kept.push_back(j);
  }
  return o;
}

// Least squares over the columns `cols` (independent, checked by the caller): x on those columns, 0 elsewhere, and
// the sum of squared residuals.
struct Solution {
  LinkForm x{};
  double residual = 0;
};

Solution least_squares(const std::vector<LinkForm>& rows, const std::vector<double>& rhs, const std::vector<int>& cols) {
  Solution s;
  const Orthogonal o = orthogonalize(rows, cols);
  std::vector<double> b = rhs;
  std::vector<double> y(o.kept.size());
  for (std::size_t i = 0; i < o.q.size(); ++i) {
    y[i] = dot(o.q[i], b);
    for (std::size_t k = 0; k < b.size(); ++k) b[k] -= y[i] * o.q[i][k];
  }
  for (std::size_t ii = o.kept.size(); ii-- > 0;) {
    double v = y[ii];
    for (std::size_t k = ii + 1; k < o.kept.size(); ++k) v -= o.r[ii][k] * s.x[o.kept[k]];
    s.x[o.kept[ii]] = v / o.r[ii][ii];
  }
  s.residual = dot(b, b);
  return s;
}

// The non-negative least squares over `cols` (at most 4): every subset of them solved with the rest at 0, the best
// solution without a negative term kept. With 4 terms that is 16 small solves, and exact: the non-negative optimum is
// the unconstrained optimum over the terms it leaves above 0.
Solution non_negative_least_squares(const std::vector<LinkForm>& rows, const std::vector<double>& rhs,
                                    const std::vector<int>& cols) {
  Solution best;
  best.residual = dot(rhs, rhs);  // every term at 0
  const int n = static_cast<int>(cols.size());
  for (int mask = 1; mask < (1 << n); ++mask) {
    std::vector<int> sub;
    for (int k = 0; k < n; ++k)
      if (mask & (1 << k)) sub.push_back(cols[k]);
    const Solution s = least_squares(rows, rhs, sub);
    bool non_negative = true;
    for (int j : sub) non_negative = non_negative && s.x[j] >= 0;
    if (non_negative && s.residual < best.residual) best = s;
  }
  return best;
}

double form_time(const LinkForm& f, const LinkForm& x) {
  double t = 0;
  for (int j = 0; j < kLinkTermCount; ++j) t += f[j] * x[j];
  return t;
}

// The form of `forms` with the largest time at x (the path the model takes).
int chosen_form(const std::vector<LinkForm>& forms, const LinkForm& x) {
  int best = 0;
  for (int k = 1; k < static_cast<int>(forms.size()); ++k)
    if (form_time(forms[k], x) > form_time(forms[best], x)) best = k;
  return best;
}

// The error of largest magnitude, with its sign.
double worst(const std::vector<double>& v) {
  double w = 0;
  for (double e : v)
    if (std::fabs(e) > std::fabs(w)) w = e;
  return w;
}

LinkForm terms_of(const AlphaBeta& net) {
  LinkForm x{};
  x[kIntraLat] = net.intra_latency_s;
  x[kInterLat] = net.inter_latency_s;
  x[kIntraBw] = net.intra_gpu_gbps > 0 ? 1.0 / (net.intra_gpu_gbps * 1e9) : 0.0;
  x[kInterBw] = net.inter_node_gbps > 0 ? 1.0 / (net.inter_node_gbps * 1e9) : 0.0;
  return x;
}

// One GPU's cap across nodes as a fraction of the node's rate, as the network file gives them.
double gpu_share(const AlphaBeta& net) {
  return net.inter_node_gbps > 0 && net.inter_gpu_gbps > 0 ? net.inter_gpu_gbps / net.inter_node_gbps : 1.0;
}

std::string percent(double e, bool sign) {
  char buf[32];
  std::snprintf(buf, sizeof buf, sign ? "%+.1f%%" : "%.1f%%", 100 * e);
  return buf;
}

std::string term_text(int j, double v) {
  char buf[48];
  if (is_bandwidth(j))
    std::snprintf(buf, sizeof buf, "%.4g GB/s", v);
  else
    std::snprintf(buf, sizeof buf, "%.4g us", v * 1e6);
  return buf;
}

}  // namespace

const char* link_term_name(LinkTerm t) {
  switch (t) {
    case LinkTerm::intra_latency:
      return "intra-node latency";
    case LinkTerm::inter_latency:
      return "inter-node latency";
    case LinkTerm::intra_bandwidth:
      return "intra-node bandwidth";
    case LinkTerm::inter_bandwidth:
      return "inter-node bandwidth";
  }
  return "?";
}

std::vector<LinkForm> alpha_beta_forms(const AlphaBeta& shape, CollKind op, double v, Mesh mesh) {
  const int p0 = mesh.intra, p1 = mesh.inter;
  const double doublings = p1 > 1 ? std::log2(double(p1)) : 0.0;
  const double lat_factor = std::pow(shape.latency_factor_per_node_doubling, doublings);
  // b_n = min(node, p0 x one GPU's cap) x the per-doubling factor = node x this.
  const double node_share = std::min(1.0, p0 * gpu_share(shape)) * std::pow(shape.bw_factor_per_node_doubling, doublings);
  LinkForm intra_ring{}, inter_ring{};
  if (p0 > 1) intra_ring[kIntraLat] = p0 - 1, intra_ring[kIntraBw] = v * (p0 - 1) / p0;
  if (p1 > 1) inter_ring[kInterLat] = (p1 - 1) * lat_factor, inter_ring[kInterBw] = v * (p1 - 1) / p1 / node_share;
  auto sum = [](const LinkForm& a, const LinkForm& b, double k) {
    LinkForm s{};
    for (int j = 0; j < kLinkTermCount; ++j) s[j] = k * (a[j] + b[j]);
    return s;
  };
  switch (op) {
    case CollKind::all_gather:
    case CollKind::reduce_scatter:
      return {sum(intra_ring, inter_ring, 1)};
    case CollKind::all_reduce:
      return {sum(intra_ring, inter_ring, 2)};
    case CollKind::broadcast: {
      // A pipelined chain: every step's latency, and v at the slowest link's rate.
      LinkForm chain{};
      chain[kIntraLat] = p0 - 1;
      chain[kInterLat] = (p1 - 1) * lat_factor;
      std::vector<LinkForm> out;
      if (p0 > 1) out.push_back(chain), out.back()[kIntraBw] = v;
      if (p1 > 1) out.push_back(chain), out.back()[kInterBw] = v / node_share;
      if (out.empty()) out.push_back(chain);
      return out;
    }
    case CollKind::all_to_all: {
      // The sends to node peers and those leaving the node go out at once; the slower sets the time.
      const double n = double(p0) * p1;
      std::vector<LinkForm> out;
      if (p0 > 1) {
        LinkForm f{};
        f[kIntraLat] = p0 - 1, f[kIntraBw] = v * (p0 - 1) / n;
        out.push_back(f);
      }
      if (p1 > 1) {
        LinkForm f{};
        f[kInterLat] = (p1 - 1) * lat_factor, f[kInterBw] = v * p0 * (p1 - 1) / p1 / node_share;
        out.push_back(f);
      }
      if (out.empty()) out.push_back(LinkForm{});
      return out;
    }
  }
  return {LinkForm{}};
}

bool LinkFit::any_fitted() const {
  for (const auto& t : terms)
    if (t.from == TermFrom::fitted || t.from == TermFrom::tied) return true;
  return false;
}

std::vector<LinkFitPoint> link_fit_points(const BandwidthProfile& profile) {
  std::vector<LinkFitPoint> out;
  for (const auto& m : profile.measurements()) out.push_back({m.op, m.mesh, m.message_bytes, m.time_s});
  return out;
}

LinkFit fit_link_terms(const AlphaBeta& file, const std::vector<LinkFitPoint>& points) {
  LinkFit fit;
  fit.file = file;
  fit.fitted = file;
  fit.points = static_cast<int>(points.size());
  const LinkForm file_x = terms_of(file);
  std::vector<std::vector<LinkForm>> forms;
  for (const auto& p : points) forms.push_back(alpha_beta_forms(file, p.op, p.message_bytes, p.mesh));

  // Terms some point depends on; the others keep the file's value.
  std::array<bool, kLinkTermCount> seen{};
  for (const auto& fs : forms)
    for (const auto& f : fs)
      for (int j = 0; j < kLinkTermCount; ++j) seen[j] = seen[j] || f[j] != 0;
  std::array<TermFrom, kLinkTermCount> from{};
  for (int j = 0; j < kLinkTermCount; ++j) from[j] = seen[j] ? TermFrom::fitted : TermFrom::no_points;

  // Each point weighted by 1 / its measured time: the residuals are relative errors, so a 4 KiB point (latency)
  // counts as much as a 16 MiB one (bandwidth).
  LinkForm x = file_x;
  std::vector<int> path(points.size(), -1);
  bool at_zero[kLinkTermCount] = {};
  for (int round = 0; round < kMaxPathRounds; ++round) {
    std::vector<int> chosen(points.size());
    for (std::size_t i = 0; i < points.size(); ++i) chosen[i] = chosen_form(forms[i], x);
    if (chosen == path) break;
    path = chosen;
    std::vector<LinkForm> rows(points.size());
    for (std::size_t i = 0; i < points.size(); ++i) {
      rows[i] = forms[i][path[i]];
      for (double& c : rows[i]) c /= points[i].time_s;
    }
    for (int j = 0; j < kLinkTermCount; ++j)
      if (from[j] == TermFrom::not_separable || from[j] == TermFrom::tied) from[j] = TermFrom::fitted;
    // The unknowns: each free term alone, or, where the points cannot tell the two classes' latencies (or rates)
    // apart, the two together along the file's ratio (one scale for both).
    bool tie[2] = {false, false};  // latencies, rates
    for (;;) {
      std::vector<LinkForm> dirs;  // an unknown u_k moves x along dirs[k]
      std::vector<std::vector<int>> covers;
      auto free_term = [&](int j) { return from[j] == TermFrom::fitted || from[j] == TermFrom::tied; };
      for (int j : {kIntraLat, kIntraBw, kInterLat, kInterBw}) {
        if (!free_term(j)) continue;
        const int partner = j == kIntraLat ? kInterLat : j == kInterLat ? kIntraLat : j == kIntraBw ? kInterBw : kIntraBw;
        const bool tied = tie[is_bandwidth(j)] && free_term(partner);
        if (tied && (j == kInterLat || j == kInterBw)) continue;  // in its intra partner's unknown
        LinkForm d{};
        if (tied) {
          d[j] = file_x[j] > 0 || file_x[partner] > 0 ? file_x[j] : 1.0;
          d[partner] = file_x[j] > 0 || file_x[partner] > 0 ? file_x[partner] : 1.0;
          from[j] = from[partner] = TermFrom::tied;
          covers.push_back({j, partner});
        } else {
          d[j] = 1.0;
          covers.push_back({j});
        }
        dirs.push_back(d);
      }
      std::vector<LinkForm> prow(points.size());
      for (std::size_t i = 0; i < points.size(); ++i)
        for (std::size_t k = 0; k < dirs.size(); ++k) prow[i][k] = form_time(rows[i], dirs[k]);
      std::vector<int> all_k;
      for (std::size_t k = 0; k < dirs.size(); ++k) all_k.push_back(static_cast<int>(k));
      const Orthogonal o = orthogonalize(prow, all_k);
      if (!o.dependent.empty()) {
        // Tie the class whose inter-node term follows the intra-node one; what stays dependent keeps the file's.
        bool tied_now = false;
        for (int k : o.dependent)
          for (int j : covers[k])
            if ((j == kInterLat || j == kInterBw) && !tie[is_bandwidth(j)] &&
                free_term(j == kInterLat ? kIntraLat : kIntraBw))
              tie[is_bandwidth(j)] = tied_now = true;
        if (!tied_now)
          for (int k : o.dependent)
            for (int j : covers[k]) from[j] = TermFrom::not_separable;
        for (int j = 0; j < kLinkTermCount; ++j)
          if (from[j] == TermFrom::tied && !tie[is_bandwidth(j)]) from[j] = TermFrom::fitted;
        continue;
      }
      // The fixed terms' share of each point's time moves to the right-hand side.
      std::vector<double> rhs(points.size(), 1.0);
      for (std::size_t i = 0; i < points.size(); ++i)
        for (int j = 0; j < kLinkTermCount; ++j)
          if (!free_term(j)) rhs[i] -= rows[i][j] * file_x[j];
      const Solution sol = non_negative_least_squares(prow, rhs, o.kept);
      bool refit = false;
      for (int k : o.kept)
        if (sol.x[k] <= 0)
          for (int j : covers[k])
            if (is_bandwidth(j)) from[j] = TermFrom::no_bandwidth, refit = true;
      if (refit) {
        for (int j = 0; j < kLinkTermCount; ++j)
          if (from[j] == TermFrom::tied) from[j] = TermFrom::fitted;
        tie[0] = tie[1] = false;
        continue;
      }
      for (int j = 0; j < kLinkTermCount; ++j) x[j] = free_term(j) ? 0.0 : file_x[j];
      for (std::size_t k = 0; k < dirs.size(); ++k)
        for (int j : covers[k]) x[j] += sol.x[k] * dirs[k][j];
      for (int j = 0; j < kLinkTermCount; ++j) at_zero[j] = free_term(j) && x[j] <= 0;
      break;
    }
  }

  fit.fitted.intra_latency_s = x[kIntraLat];
  fit.fitted.inter_latency_s = x[kInterLat];
  fit.fitted.intra_gpu_gbps = 1.0 / x[kIntraBw] / 1e9;
  fit.fitted.inter_node_gbps = 1.0 / x[kInterBw] / 1e9;
  fit.fitted.inter_gpu_gbps = gpu_share(file) * fit.fitted.inter_node_gbps;
  const double fitted_values[] = {fit.fitted.intra_latency_s, fit.fitted.inter_latency_s, fit.fitted.intra_gpu_gbps,
                                  fit.fitted.inter_node_gbps};
  const double file_values[] = {file.intra_latency_s, file.inter_latency_s, file.intra_gpu_gbps, file.inter_node_gbps};
  for (int j = 0; j < kLinkTermCount; ++j) {
    fit.terms[j].file = file_values[j];
    const bool fitted = from[j] == TermFrom::fitted || from[j] == TermFrom::tied;
    fit.terms[j].fitted = fitted ? fitted_values[j] : file_values[j];
    fit.terms[j].from = from[j];
    fit.terms[j].at_bound = at_zero[j] && !is_bandwidth(j);
  }

  // The fitted model against every measured point, per (collective, mesh), in the order the points come.
  std::vector<double> all;
  std::map<std::tuple<int, int, int>, std::size_t> index;
  std::vector<std::pair<std::vector<double>, std::vector<double>>> errors;  // below and from 1 MiB
  for (const auto& p : points) {
    const double e = (alpha_beta_time_s(fit.fitted, p.op, p.message_bytes, p.mesh) - p.time_s) / p.time_s;
    all.push_back(std::fabs(e));
    const auto key = std::make_tuple(static_cast<int>(p.op), p.mesh.intra, p.mesh.inter);
    auto [it, added] = index.emplace(key, fit.series.size());
    if (added) {
      fit.series.push_back(SeriesFitError{p.op, p.mesh});
      errors.emplace_back();
    }
    (p.message_bytes >= kLinkFitLargeBytes ? errors[it->second].second : errors[it->second].first).push_back(e);
  }
  for (std::size_t k = 0; k < fit.series.size(); ++k) {
    auto abs_of = [](std::vector<double> v) {
      for (double& e : v) e = std::fabs(e);
      return v;
    };
    SeriesFitError& s = fit.series[k];
    const auto& [small, large] = errors[k];
    s.small_points = static_cast<int>(small.size()), s.large_points = static_cast<int>(large.size());
    s.small_median = median(abs_of(small)), s.small_worst = worst(small);
    s.large_median = median(abs_of(large)), s.large_worst = worst(large);
  }
  fit.median_error = median(all);
  fit.worst_error = all.empty() ? 0 : *std::max_element(all.begin(), all.end());

  // What the measurements leave to the network file.
  const bool intra_points = seen[kIntraLat] || seen[kIntraBw], inter_points = seen[kInterLat] || seen[kInterBw];
  if (!intra_points)
    fit.notes.push_back(
        "no measured collective has 2 or more GPUs of one node: the intra-node terms are the network file's (measure "
        "one inside a node, R x 1)");
  if (!inter_points)
    fit.notes.push_back(
        "no measured collective spans nodes: the inter-node terms are the network file's (measure one across 2 "
        "nodes, 1 x 2 and R x 2)");
  for (int j = 0; j < kLinkTermCount; ++j) {
    const std::string name = link_term_name(LinkTerm(j));
    if (from[j] == TermFrom::tied && (j == kInterLat || j == kInterBw))
      fit.notes.push_back(std::string("the measurements do not tell the intra-node and inter-node ") +
                          (is_bandwidth(j) ? "rates" : "latencies") +
                          " apart (a single mesh): both are scaled by one factor, their ratio the network file's "
                          "(measure R x 1, 1 x 2 and R x 2 to fit each)");
    else if (from[j] == TermFrom::not_separable)
      fit.notes.push_back(name + " moves together with the terms fitted before it in these measurements (a single "
                                 "size): the network file's value (measure R x 1, 1 x 2 and R x 2 "
                                 "over a range of sizes)");
    else if (from[j] == TermFrom::no_bandwidth)
      fit.notes.push_back(name +
                          ": the fit gives it no time per byte (the measurements do not resolve it): the network "
                          "file's value (measure sizes of several MiB)");
    else if (fit.terms[j].at_bound)
      fit.notes.push_back(name + " held at 0 by the non-negative fit (the measured small sizes allow no latency)");
  }
  return fit;
}

std::vector<std::string> link_fit_lines(const LinkFit& fit, bool prices) {
  std::vector<std::string> out;
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "  alpha-beta link terms fitted to %d measured points (least squares on the relative time error, "
                "non-negative)%s:",
                fit.points,
                prices ? ", which price every collective not measured"
                       : "; shown for comparison: the chosen model prices what was not measured (--network-model "
                         "alpha-beta prices with these)");
  out.push_back(buf);
  std::snprintf(buf, sizeof buf, "    %-22s %-14s %-14s", "term", "network file", "fitted");
  out.push_back(buf);
  for (int j = 0; j < kLinkTermCount; ++j) {
    const TermFit& t = fit.terms[j];
    const char* why = t.from == TermFrom::fitted         ? ""
                      : t.from == TermFrom::tied          ? "  (with the other class's, one scale)"
                      : t.from == TermFrom::no_points     ? "  (kept: no point constrains it)"
                      : t.from == TermFrom::not_separable ? "  (kept: not separable from the terms above)"
                                                          : "  (kept: no time per byte fitted)";
    const char* what = j == kIntraBw ? "  one GPU's link" : j == kInterBw ? "  the node's links" : "";
    std::snprintf(buf, sizeof buf, "    %-22s %-14s %-14s%s%s", link_term_name(LinkTerm(j)),
                  term_text(j, t.file).c_str(), term_text(j, t.fitted).c_str(), what, why);
    out.push_back(buf);
  }
  for (const auto& n : fit.notes) out.push_back("    " + n);
  std::snprintf(buf, sizeof buf,
                "  fit error, (model - measured) / measured: median |e| %s, worst |e| %s; per measured collective, "
                "median |e| / worst e (points):",
                percent(fit.median_error, false).c_str(), percent(fit.worst_error, false).c_str());
  out.push_back(buf);
  std::snprintf(buf, sizeof buf, "    %-15s %-7s %-24s %-24s", "collective", "mesh", "below 1 MiB", "1 MiB and up");
  out.push_back(buf);
  auto cell = [](int n, double med, double w) {
    if (n == 0) return std::string("-");
    return percent(med, false) + " / " + percent(w, true) + " (" + std::to_string(n) + ")";
  };
  for (const auto& s : fit.series) {
    std::snprintf(buf, sizeof buf, "    %-15s %-7s %-24s %-24s", coll_kind_name(s.op), s.mesh.to_string().c_str(),
                  cell(s.small_points, s.small_median, s.small_worst).c_str(),
                  cell(s.large_points, s.large_median, s.large_worst).c_str());
    out.push_back(buf);
  }
  for (auto& line : out) line.erase(line.find_last_not_of(' ') + 1);  // the padding of the last column
  return out;
}

}  // namespace lins
