// The alpha-beta model's link terms fitted to measured collectives: every point of a `lins comm --profile` CSV or of
// imported nccl-tests output, whatever its collective and mesh, constrains the four terms the model prices every mesh
// with: inside a node the per-step latency a_i and one GPU's rate b_i, across nodes the per-step latency a_n and the
// node's rate b_n. Each collective's alpha-beta time (its row's alpha_beta_s, core/model/collectives.cpp) is linear in
// x = (a_i, a_n, 1/b_i, 1/b_n) on a given mesh and size, or the larger of two such forms (broadcast's slowest link,
// all-to-all's slower phase, on meshes spanning both), so the fit is a linear least squares; docs/cost-model.md,
// "Fitting the link terms", says how it is weighted, kept non-negative and reported.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "core/cost/cost_model.h"

namespace lins {

// The four terms, in the order of x.
enum class LinkTerm { intra_latency, inter_latency, intra_bandwidth, inter_bandwidth };
constexpr int kLinkTermCount = 4;
const char* link_term_name(LinkTerm t);  // "intra-node latency", ...

// One measured collective: `time_s` for one call of `op` on `message_bytes` over a group of shape `mesh`, alone.
struct LinkFitPoint {
  CollKind op = CollKind::all_gather;
  Mesh mesh;
  double message_bytes = 0;
  double time_s = 0;
};

// The alpha-beta time of `op` on `mesh` and `v` bytes alone (concurrent = 1) as linear forms in x: the time is the
// largest of c . x over the forms returned (one form for rings, two where the formula takes the slower of two paths).
// `shape` gives what the fit keeps from the network file: the per-GPU cap across nodes as a fraction of the node's
// rate (inter_gpu_gbps / inter_node_gbps, so b_n of a mesh is min(1, p0 x that fraction) x the node's rate) and the
// per-doubling factors of latency and bandwidth across nodes.
using LinkForm = std::array<double, kLinkTermCount>;
std::vector<LinkForm> alpha_beta_forms(const AlphaBeta& shape, CollKind op, double v, Mesh mesh);

// What became of one term.
enum class TermFrom {
  fitted,         // from the measurements
  no_points,      // no measured point depends on it: the network file's value
  tied,           // fitted with the other class's same term along the file's ratio: the points cannot tell the two
                  // classes apart (a single mesh)
  not_separable,  // it moves together with a term fitted before it (a single size): the file's value
  no_bandwidth,   // the fit gave it no time per byte (infinite rate): the file's value
};

struct TermFit {
  double file = 0;    // the network file's value: seconds for a latency, GB/s for a rate
  double fitted = 0;  // what prices: the fit's where from == fitted, else the file's
  TermFrom from = TermFrom::no_points;
  bool at_bound = false;  // a latency the non-negative fit held at 0
};

// How well the fitted model reproduces one measured (collective, mesh): relative errors (model - measured) /
// measured over its sizes, split at 1 MiB (below: latency dominates; from 1 MiB on: bandwidth).
struct SeriesFitError {
  CollKind op = CollKind::all_gather;
  Mesh mesh;
  int small_points = 0, large_points = 0;
  double small_median = 0, small_worst = 0;  // median of |error|; the error of largest magnitude, with its sign
  double large_median = 0, large_worst = 0;
};
inline constexpr double kLinkFitLargeBytes = 1 << 20;

struct LinkFit {
  AlphaBeta file;    // the network file's terms
  AlphaBeta fitted;  // the same network with the fitted terms (inter_gpu_gbps keeps its ratio to inter_node_gbps)
  std::array<TermFit, kLinkTermCount> terms;
  int points = 0;  // measured points fitted
  double median_error = 0, worst_error = 0;  // |relative error| over every point
  std::vector<SeriesFitError> series;
  // What the measurements leave unconstrained and which meshes would constrain it, one sentence each.
  std::vector<std::string> notes;
  bool any_fitted() const;
};

// Every measurement of a profile (repeated sizes averaged, as it prices them).
std::vector<LinkFitPoint> link_fit_points(const BandwidthProfile& profile);

// Minimises the sum over points of ((model - measured) / measured)^2 over the non-negative terms (exactly: every set
// of free terms is solved and the best non-negative solution kept), the forms that take the larger of two paths
// following the terms until the chosen path of every point stays the same. A term no point constrains keeps `file`'s
// value. `points` must have positive sizes and times.
LinkFit fit_link_terms(const AlphaBeta& file, const std::vector<LinkFitPoint>& points);

// The fit for a console: the terms beside the file's, what is unconstrained, each series' errors. Lines without a
// trailing newline, indented by two spaces. `prices`: whether the fitted terms price (CostModel::priced_by_fit), or
// are shown beside the model that does.
std::vector<std::string> link_fit_lines(const LinkFit& fit, bool prices);

}  // namespace lins
