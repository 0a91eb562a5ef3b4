// Bandwidth profiles, the alpha-beta model of a network, the choice between it and the nccl model, and the pricing
// of schedules; see cost_model.h.
#include "core/cost/cost_model.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "core/cost/link_fit.h"
#include "core/util/csv.h"
#include "core/util/text.h"

namespace lins {
namespace {

// A positive finite number written plainly ("1048576", "1.5e9"); rejects "nan", "inf", "-1", "0", "12abc".
std::optional<double> parse_positive(const std::string& s) {
  const auto v = parse_finite(s);
  if (!v || *v <= 0) return std::nullopt;
  return v;
}

// A mesh dimension: a whole number from 1 to 999999999.
std::optional<int> parse_count(const std::string& s) {
  const auto v = parse_whole(s);
  if (!v || *v < 1 || *v > 999999999) return std::nullopt;
  return static_cast<int>(*v);
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// BandwidthProfile

Result<BandwidthProfile> BandwidthProfile::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return make_error("cannot open bandwidth profile '" + path + "' (expected a CSV with header " +
                      std::string(kProfileHeader) + ", as `lins comm --profile` writes)");
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse(ss.str(), path);
}

Result<BandwidthProfile> BandwidthProfile::parse(std::string_view text, const std::string& where) {
  const std::string expected = "a bandwidth profile with a header such as " + std::string(kProfileHeader) +
                               " and one line per (op, mesh, message size), as `lins comm --profile` writes";
  auto table = CsvTable::parse(text, where, expected, /*comments=*/true);
  if (!table) {
    if (table.error() == where + ": empty (expected " + expected + ")")
      return make_error(where + ": empty bandwidth profile; expected the header " + std::string(kProfileHeader) +
                        " and one line per (op, mesh, message size)");
    return make_error(table.error());
  }
  const CsvTable& t = *table;
  LINS_TRY(t.require({"op", "mesh_intra", "mesh_inter", "message_bytes", "algbw_gbps"}));
  BandwidthProfile prof;
  prof.source_ = where;
  for (std::size_t r = 0; r < t.rows(); ++r) {
    const std::string at = t.at(r) + ": ";
    if (auto w = t.check_width(r); !w) return make_error(w.error() + " (truncated or garbled line?)");
    auto kind = kCollKindNames.parse(t.text(r, "op"), "op");
    if (!kind) return make_error(at + kind.error());
    const std::string& intra_text = t.text(r, "mesh_intra");
    const std::string& inter_text = t.text(r, "mesh_inter");
    auto intra = parse_count(intra_text);
    if (!intra) return make_error(at + "mesh_intra '" + intra_text + "' is not a positive whole number");
    auto inter = parse_count(inter_text);
    if (!inter) return make_error(at + "mesh_inter '" + inter_text + "' is not a positive whole number");
    if (*intra * static_cast<long long>(*inter) < 2)
      return make_error(at + "mesh " + intra_text + "x" + inter_text +
                        " is a single GPU; a collective needs at least 2 (mesh_intra x mesh_inter >= 2)");
    const std::string& bytes_text = t.text(r, "message_bytes");
    auto bytes = parse_positive(bytes_text);
    if (!bytes) return make_error(at + "message_bytes '" + bytes_text + "' is not a positive finite number of bytes");
    const std::string& gbps_text = t.text(r, "algbw_gbps");
    auto gbps = parse_positive(gbps_text);
    if (!gbps) return make_error(at + "algbw_gbps '" + gbps_text + "' is not a positive finite bandwidth in GB/s");
    prof.add(*kind, Mesh{*intra, *inter}, *bytes, *gbps);
  }
  if (prof.series_.empty()) return make_error(where + ": bandwidth profile has a header but no measurements");
  return prof;
}

void BandwidthProfile::add(CollKind op, Mesh mesh, double message_bytes, double algbw_gbps) {
  auto& pts = series_[Key{static_cast<int>(op), mesh.intra, mesh.inter}];
  auto it =
      std::lower_bound(pts.begin(), pts.end(), message_bytes, [](const Point& p, double b) { return p.bytes < b; });
  if (it != pts.end() && it->bytes == message_bytes) {
    it->gbps = (it->gbps * it->count + algbw_gbps) / (it->count + 1);
    ++it->count;
  } else {
    pts.insert(it, Point{message_bytes, algbw_gbps, 1});
  }
}

bool BandwidthProfile::has(CollKind op, Mesh mesh) const {
  return series_.count(Key{static_cast<int>(op), mesh.intra, mesh.inter}) > 0;
}

std::optional<double> BandwidthProfile::algbw_gbps(CollKind op, Mesh mesh, double v) const {
  auto it = series_.find(Key{static_cast<int>(op), mesh.intra, mesh.inter});
  if (it == series_.end() || it->second.empty()) return std::nullopt;
  const auto& pts = it->second;
  if (v <= pts.front().bytes) {
    // Latency bound: a smaller message takes as long as the smallest measured one.
    return pts.front().gbps * (v / pts.front().bytes);
  }
  if (v >= pts.back().bytes) return pts.back().gbps;
  auto hi = std::upper_bound(pts.begin(), pts.end(), v, [](double b, const Point& p) { return b < p.bytes; });
  auto lo = hi - 1;
  const double x = (std::log(v) - std::log(lo->bytes)) / (std::log(hi->bytes) - std::log(lo->bytes));
  return lo->gbps + x * (hi->gbps - lo->gbps);
}

std::optional<double> BandwidthProfile::time_s(CollKind op, Mesh mesh, double v) const {
  auto w = algbw_gbps(op, mesh, v);
  if (!w) return std::nullopt;
  return v / (*w * 1e9);
}

void BandwidthProfile::merge(const BandwidthProfile& other) {
  for (const auto& [k, pts] : other.series_)
    for (const auto& p : pts)
      for (int i = 0; i < p.count; ++i)
        add(static_cast<CollKind>(std::get<0>(k)), Mesh{std::get<1>(k), std::get<2>(k)}, p.bytes, p.gbps);
}

std::size_t BandwidthProfile::point_count() const {
  std::size_t n = 0;
  for (const auto& [k, pts] : series_) n += pts.size();
  return n;
}

std::vector<BandwidthProfile::Measurement> BandwidthProfile::measurements() const {
  std::vector<Measurement> out;
  for (const auto& [k, pts] : series_)
    for (const auto& p : pts)
      out.push_back({static_cast<CollKind>(std::get<0>(k)), Mesh{std::get<1>(k), std::get<2>(k)}, p.bytes,
                     p.bytes / (p.gbps * 1e9)});
  return out;
}

std::vector<std::pair<CollKind, Mesh>> BandwidthProfile::series() const {
  std::vector<std::pair<CollKind, Mesh>> out;
  for (const auto& [k, pts] : series_)
    out.emplace_back(static_cast<CollKind>(std::get<0>(k)), Mesh{std::get<1>(k), std::get<2>(k)});
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
// Alpha-beta networks

AlphaBeta alpha_beta_of(const NetworkSpec& net) {
  AlphaBeta ab;
  ab.name = net.name;
  ab.description = net.description;
  ab.intra_gpu_gbps = net.intra_gpu_gbps;
  ab.inter_node_gbps = net.inter_node_gbps;
  ab.inter_gpu_gbps = net.inter_gpu_gbps;
  ab.intra_latency_s = net.intra_latency_s;
  ab.inter_latency_s = net.inter_latency_s;
  ab.bw_factor_per_node_doubling = net.bw_factor_per_node_doubling;
  ab.latency_factor_per_node_doubling = net.latency_factor_per_node_doubling;
  return ab;
}

std::vector<AlphaBeta> network_presets() {
  std::vector<AlphaBeta> out;
  for (const auto& n : network_spec_presets()) out.push_back(alpha_beta_of(n));
  return out;
}

Result<AlphaBeta> network_preset(std::string_view name) {
  std::string names;
  for (const auto& n : network_spec_presets()) {
    if (n.name == name) return alpha_beta_of(n);
    names += (names.empty() ? "" : ", ") + n.name;
  }
  return make_error("unknown network '" + std::string(name) + "'; valid networks: " + names);
}

const char* pricing_name(Pricing p) { return kPricingNames.name(p); }
Result<Pricing> parse_pricing(std::string_view text) { return kPricingNames.parse(text, "--pricing"); }

int concurrent_groups(Mesh mesh, const Topology& topo) {
  if (mesh.inter <= 1 || mesh.intra >= topo.gpus_per_node) return 1;
  return std::max(1, topo.gpus_per_node / mesh.intra);
}

// Hierarchical decomposition of a group of p0 GPUs on each of p1 nodes (no algorithm or protocol choice: that is the
// nccl model's job; this is the simple model the paper's cost model allows where nothing was measured):
// - all_gather / reduce_scatter of a full buffer of v bytes: a ring over the p1 nodes (each of the node's p0 GPUs
//   runs its 1/p0 part, together moving (p1-1)/p1 * v through the node's links), then a ring over the p0 GPUs of the
//   node moving (p0-1)/p0 * v per GPU (reduce_scatter: the same two phases in the other order);
// - all_reduce: reduce_scatter inside the node, all_reduce of each GPU's v/p0 across nodes (2(p1-1)/p1 * v through
//   the node's links), all_gather inside the node;
// - broadcast: a pipelined chain; every GPU receives v once, so the slowest link sets the rate;
// - all_to_all: every GPU's sends to its node peers and to the other nodes at once, the slower set the time.
// Each collective's formula is its row's alpha_beta_s (core/collectives.cpp); the terms are computed here.
// A node's inter-node bandwidth available to one group is min(node total / concurrent groups, p0 x one GPU's NIC
// share). Latency: one alpha per ring step. A network that degrades with scale scales the inter-node bandwidth and
// latency by its factors per doubling of p1.
double alpha_beta_time_s(const AlphaBeta& net, CollKind op, double v, Mesh mesh, int concurrent) {
  const int p0 = mesh.intra, p1 = mesh.inter;
  if (p0 * static_cast<long long>(p1) <= 1 || v <= 0) return 0.0;
  const double bi = net.intra_gpu_gbps * 1e9;
  const double doublings = p1 > 1 ? std::log2(double(p1)) : 0.0;
  const double bn = std::min(net.inter_node_gbps / std::max(1, concurrent), p0 * net.inter_gpu_gbps) * 1e9 *
                    std::pow(net.bw_factor_per_node_doubling, doublings);
  const double ai = net.intra_latency_s,
               an = net.inter_latency_s * std::pow(net.latency_factor_per_node_doubling, doublings);
  AlphaBetaTerms t;
  t.p0 = p0, t.p1 = p1, t.v = v, t.intra_bps = bi, t.inter_bps = bn, t.intra_latency_s = ai, t.inter_latency_s = an;
  t.intra_ring_s = p0 > 1 ? (p0 - 1) * ai + v * (p0 - 1) / p0 / bi : 0.0;  // one AG or RS phase
  t.inter_ring_s = p1 > 1 ? (p1 - 1) * an + v * (p1 - 1) / p1 / bn : 0.0;
  return collective(op).alpha_beta_s(t);
}

// ---------------------------------------------------------------------------------------------------------------
// CostModel

double& CommTimeBreakdown::term_s(Term t) {
  switch (t) {
    case Term::param:
      return param_s;
    case Term::grad:
      return grad_s;
    case Term::os_sync:
      return os_sync_s;
    case Term::os_bcast:
      return os_bcast_s;
  }
  return param_s;
}
double CommTimeBreakdown::term_s(Term t) const { return const_cast<CommTimeBreakdown*>(this)->term_s(t); }


CostModel::CostModel(AlphaBeta network) : net_(std::move(network)), network_model_(make_alpha_beta_model(net_)) {}
CostModel::CostModel(AlphaBeta network, BandwidthProfile profile)
    : net_(std::move(network)), network_model_(make_alpha_beta_model(net_)), profile_(std::move(profile)) {}

CostModel::CostModel(AlphaBeta network, std::shared_ptr<const NetworkCostModel> model,
                     std::optional<BandwidthProfile> profile)
    : net_(std::move(network)), network_model_(std::move(model)), profile_(std::move(profile)) {}

Result<CostModel> CostModel::make(const NetworkSpec& net, NetworkModel model, std::optional<BandwidthProfile> profile,
                                  bool fit_links) {
  LINS_ASSIGN_OR_RETURN(auto m, make_network_model(model, net));
  CostModel c(alpha_beta_of(net));
  c.model_ = model;
  c.network_model_ = std::move(m);
  c.profile_ = std::move(profile);
  if (c.profile_ && fit_links) {
    c.link_fit_ = std::make_shared<const LinkFit>(fit_link_terms(c.net_, link_fit_points(*c.profile_)));
    if (model == NetworkModel::alpha_beta && c.link_fit_->any_fitted()) {
      c.net_ = c.link_fit_->fitted;
      c.network_model_ = make_alpha_beta_model(c.net_, kFittedAlphaBetaDescription);
      c.priced_by_fit_ = true;
    }
  }
  c.contention_ = net.contention;
  c.warnings_ = net.warnings;
  // The nccl model refuses these (out of its scope); the alpha-beta model has no term for them: it prices the ring
  // it always prices, which a network with them beats, so the user hears that the key changed nothing.
  const std::string where = "network " + net.name + " (" + net.source + ")";
  if (model == NetworkModel::alpha_beta && net.nvls)
    c.warnings_.push_back(where +
                          " has nvls = true, which the alpha-beta model does not price: collectives inside a node are "
                          "priced as rings over NVLink, slower than NCCL's NVLS (NVSwitch multicast) all-reduce");
  if (model == NetworkModel::alpha_beta && net.sharp)
    c.warnings_.push_back(where +
                          " has sharp = true, which the alpha-beta model does not price: all-reduces across nodes are "
                          "priced as rings, slower than an in-network (SHARP) reduction");
  return c;
}

double CostModel::model_time_s(CollKind op, double bytes, Mesh mesh, int concurrent) const {
  return network_model_->time_s(op, bytes, mesh, concurrent);
}

double CostModel::time_s(CollKind op, double bytes, Mesh mesh, const Topology& topo, Pricing pricing,
                         bool* fell_back) const {
  const int conc = pricing == Pricing::shared_links ? concurrent_groups(mesh, topo) : 1;
  if (profile_) {
    if (auto t = profile_->time_s(op, mesh, bytes)) {
      if (fell_back) *fell_back = false;
      if (conc == 1) return *t;
      // The profile measured one group alone. Sharing slows only the inter-node part; the network model says how
      // much of the time that part is, so the measured time is scaled by the model's shared/alone ratio.
      const double alone = model_time_s(op, bytes, mesh, 1);
      const double shared = model_time_s(op, bytes, mesh, conc);
      return alone > 0 ? *t * (shared / alone) : *t;
    }
  }
  if (fell_back) *fell_back = profile_.has_value();
  return model_time_s(op, bytes, mesh, conc);
}

double CostModel::op_time_s(const CommOp& op, const Topology& topo, Pricing pricing, bool* fell_back) const {
  if (op.quant == Quant::none) return time_s(op.kind, double(op.bytes()), op.mesh, topo, pricing, fell_back);
  // ZeRO++'s quantized ops are two collectives, one after the other: the values, then the fp32 scales.
  bool values_fell_back = false, scales_fell_back = false;
  const double t = time_s(op.kind, double(op.payload_bytes()), op.mesh, topo, pricing, &values_fell_back) +
                   time_s(op.kind, double(op.scale_bytes()), op.mesh, topo, pricing, &scales_fell_back);
  if (fell_back) *fell_back = values_fell_back || scales_fell_back;
  return t;
}

void CostModel::price_both(const Schedule& s, CommTimeBreakdown* isolated, CommTimeBreakdown* shared) const {
  // Schedules repeat a few shapes (every layer's modules, equal buckets): remember the last few prices.
  struct Memo {
    CollKind kind;
    int64_t bytes, scale_bytes;
    Mesh mesh;
    double t[2];
    bool fell_back;
  };
  constexpr int kMemo = 8;
  Memo memo[kMemo];
  int memo_size = 0, memo_next = 0;
  CommTimeBreakdown* out[2] = {isolated, shared};
  for (const auto& op : s.ops) {
    const int64_t bytes = op.bytes(), scale_bytes = op.scale_bytes();
    const Memo* hit = nullptr;
    for (int i = 0; i < memo_size; ++i)
      if (memo[i].bytes == bytes && memo[i].scale_bytes == scale_bytes && memo[i].kind == op.kind &&
          memo[i].mesh == op.mesh) {
        hit = &memo[i];
        break;
      }
    if (!hit) {
      Memo& m = memo[memo_next];
      m.kind = op.kind;
      m.bytes = bytes;
      m.scale_bytes = scale_bytes;
      m.mesh = op.mesh;
      m.t[0] = out[0] ? op_time_s(op, s.topo, Pricing::paper_isolated, &m.fell_back) : 0;
      m.t[1] = out[1] ? op_time_s(op, s.topo, Pricing::shared_links, &m.fell_back) : 0;
      hit = &m;
      memo_next = (memo_next + 1) % kMemo;
      memo_size = std::min(memo_size + 1, kMemo);
    }
    for (int k = 0; k < 2; ++k) {
      if (!out[k]) continue;
      const double t = hit->t[k] * op.repeat;
      out[k]->term_s(op.term) += t;
      out[k]->kind_axis_s[static_cast<int>(op.kind)][static_cast<int>(op.axis())] += t;
      out[k]->ops += op.repeat;
      if (hit->fell_back) out[k]->fallback_ops += op.repeat;
    }
  }
}

CommTimeBreakdown CostModel::price(const Schedule& s, Pricing pricing) const {
  CommTimeBreakdown out;
  price_both(s, pricing == Pricing::paper_isolated ? &out : nullptr, pricing == Pricing::shared_links ? &out : nullptr);
  return out;
}

}  // namespace lins
