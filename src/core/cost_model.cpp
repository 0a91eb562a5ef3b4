// Bandwidth profiles, the alpha-beta fallback with its network presets, and the pricing of schedules; see
// cost_model.h.
#include "core/cost_model.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "core/csv.h"

namespace lins {
namespace {

std::string trim(std::string_view s) {
  std::size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

std::optional<CollKind> parse_kind(const std::string& s) {
  if (s == "all_gather") return CollKind::all_gather;
  if (s == "reduce_scatter") return CollKind::reduce_scatter;
  if (s == "all_reduce") return CollKind::all_reduce;
  if (s == "broadcast") return CollKind::broadcast;
  return std::nullopt;
}

// A positive finite number written plainly ("1048576", "1.5e9"); rejects "nan", "inf", "-1", "0", "12abc".
std::optional<double> parse_positive(const std::string& s) {
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || !std::isfinite(v) || v <= 0) return std::nullopt;
  return v;
}

std::optional<int> parse_count(const std::string& s) {
  if (s.empty() || s.size() > 9) return std::nullopt;
  int v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  if (v < 1) return std::nullopt;
  return v;
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
  BandwidthProfile prof;
  prof.source_ = where;
  const char* required[] = {"op", "mesh_intra", "mesh_inter", "message_bytes", "algbw_gbps"};
  int col[5] = {-1, -1, -1, -1, -1};
  std::size_t header_fields = 0;
  bool have_header = false;
  int line_no = 0;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    std::size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view raw = text.substr(pos, nl - pos);
    pos = nl + 1;
    ++line_no;
    const std::string line = trim(raw);
    if (line.empty() || line[0] == '#') {
      if (nl == text.size()) break;
      continue;
    }
    const std::string at = where + ":" + std::to_string(line_no) + ": ";
    for (char c : line)
      if (static_cast<unsigned char>(c) < 0x20 && c != '\t')
        return make_error(at + "unreadable (control characters); expected a CSV line of text");
    auto rec = parse_csv(line, where);
    if (!rec || rec->size() != 1) return make_error(at + "not a CSV line" + (rec ? "" : " (" + rec.error() + ")"));
    std::vector<std::string> fields;
    for (auto& f : (*rec)[0].fields) fields.push_back(trim(f));
    if (!have_header) {
      for (int k = 0; k < 5; ++k) {
        for (std::size_t i = 0; i < fields.size(); ++i)
          if (fields[i] == required[k]) col[k] = static_cast<int>(i);
        if (col[k] < 0)
          return make_error(at + "header lacks column '" + required[k] + "'; expected a header such as " +
                            std::string(kProfileHeader));
      }
      header_fields = fields.size();
      have_header = true;
      if (nl == text.size()) break;
      continue;
    }
    if (fields.size() != header_fields)
      return make_error(at + "has " + std::to_string(fields.size()) + " fields, expected " +
                        std::to_string(header_fields) + " as in the header (truncated or garbled line?)");
    const std::string& op_text = fields[col[0]];
    auto kind = parse_kind(op_text);
    if (!kind)
      return make_error(at + "op '" + op_text + "' is not one of all_gather, reduce_scatter, all_reduce, broadcast");
    auto intra = parse_count(fields[col[1]]);
    if (!intra) return make_error(at + "mesh_intra '" + fields[col[1]] + "' is not a positive whole number");
    auto inter = parse_count(fields[col[2]]);
    if (!inter) return make_error(at + "mesh_inter '" + fields[col[2]] + "' is not a positive whole number");
    if (*intra * static_cast<long long>(*inter) < 2)
      return make_error(at + "mesh " + fields[col[1]] + "x" + fields[col[2]] +
                        " is a single GPU; a collective needs at least 2 (mesh_intra x mesh_inter >= 2)");
    auto bytes = parse_positive(fields[col[3]]);
    if (!bytes)
      return make_error(at + "message_bytes '" + fields[col[3]] + "' is not a positive finite number of bytes");
    auto gbps = parse_positive(fields[col[4]]);
    if (!gbps) return make_error(at + "algbw_gbps '" + fields[col[4]] + "' is not a positive finite bandwidth in GB/s");
    prof.add(*kind, Mesh{*intra, *inter}, *bytes, *gbps);
    if (nl == text.size()) break;
  }
  if (!have_header)
    return make_error(where + ": empty bandwidth profile; expected the header " + std::string(kProfileHeader) +
                      " and one line per (op, mesh, message size)");
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

std::size_t BandwidthProfile::point_count() const {
  std::size_t n = 0;
  for (const auto& [k, pts] : series_) n += pts.size();
  return n;
}

std::vector<std::pair<CollKind, Mesh>> BandwidthProfile::series() const {
  std::vector<std::pair<CollKind, Mesh>> out;
  for (const auto& [k, pts] : series_)
    out.emplace_back(static_cast<CollKind>(std::get<0>(k)), Mesh{std::get<1>(k), std::get<2>(k)});
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
// Alpha-beta networks

std::vector<AlphaBeta> network_presets() {
  return {
      // The paper's testbed (PAPER.md section 7): 8 x A800-80GB per node, 4 x HDR InfiniBand per node, no SHARP.
      // - NVIDIA A800 40GB/80GB PCIe/SXM datasheet (2022): NVLink "400 GB/s" (bidirectional), i.e. 200 GB/s per
      //   direction per GPU through NVSwitch (the A100's 600 GB/s capped to 400 GB/s).
      // - NVIDIA ConnectX-6 VPI adapter product brief / InfiniBand HDR specification (IBTA): 200 Gb/s per port;
      //   4 ports per node = 800 Gb/s = 100 GB/s per direction per node; one GPU can drive one NIC, 25 GB/s.
      // - The paper states an intra/inter-node bandwidth ratio of about 2: 200 GB/s per GPU inside vs 100 GB/s per
      //   node across, as a ring's bus bandwidth sees them.
      // Latencies are assumptions (typical NCCL ring step costs), not measured on that cluster.
      {"paper-a800", "8 x A800 per node: NVLink 200 GB/s per GPU per direction; 4 x 200 Gb/s HDR InfiniBand per node",
       200.0, 100.0, 25.0, 2e-6, 6e-6},
      // H100 SXM datasheet: NVLink4 900 GB/s bidirectional (450 GB/s per direction); ConnectX-7 NDR 400 Gb/s per
      // port, 8 ports per node (one per GPU) = 400 GB/s per node. Latencies are assumptions.
      {"h100-ndr", "8 x H100 per node: NVLink4 450 GB/s per GPU per direction; 8 x 400 Gb/s NDR InfiniBand per node",
       450.0, 400.0, 50.0, 2e-6, 5e-6},
      // A commodity cluster: 8 GPUs with NVLink (A100-class, 300 GB/s per direction) and one 100 Gb/s Ethernet
      // (RoCE) port per node = 12.5 GB/s. Latencies are assumptions.
      {"ethernet-100g", "8 GPUs per node with NVLink 300 GB/s; one 100 Gb/s Ethernet port per node", 300.0, 12.5, 12.5,
       2e-6, 15e-6},
      // MPI over shared memory on one host, where emulated nodes share the same memory: fitted by eye to
      // data/profiles/cpu-2core-4ranks.csv (a few GB/s at MiB sizes, tens of microseconds per step). The default of
      // `lins step` on the CPU backend; a measured --profile predicts better.
      {"cpu-local", "MPI over shared memory on one host (emulated nodes share it)", 3.0, 3.0, 3.0, 20e-6, 20e-6},
  };
}

Result<AlphaBeta> network_preset(std::string_view name) {
  std::string names;
  for (const auto& n : network_presets()) {
    if (n.name == name) return n;
    names += (names.empty() ? "" : ", ") + n.name;
  }
  return make_error("unknown network '" + std::string(name) + "'; valid networks: " + names);
}

const char* pricing_name(Pricing p) { return p == Pricing::paper_isolated ? "paper" : "shared"; }

int concurrent_groups(Mesh mesh, const Topology& topo) {
  if (mesh.inter <= 1 || mesh.intra >= topo.gpus_per_node) return 1;
  return std::max(1, topo.gpus_per_node / mesh.intra);
}

// Hierarchical decomposition of a group of p0 GPUs on each of p1 nodes (NCCL's ring/tree pick is not modelled; this
// is the projection fallback PAPER.md section 4 allows):
// - all_gather / reduce_scatter of a full buffer of v bytes: a ring over the p1 nodes (each of the node's p0 GPUs
//   runs its 1/p0 part, together moving (p1-1)/p1 * v through the node's links), then a ring over the p0 GPUs of the
//   node moving (p0-1)/p0 * v per GPU (reduce_scatter: the same two phases in the other order);
// - all_reduce: reduce_scatter inside the node, all_reduce of each GPU's v/p0 across nodes (2(p1-1)/p1 * v through
//   the node's links), all_gather inside the node;
// - broadcast: a pipelined chain; every GPU receives v once, so the slowest link sets the rate.
// A node's inter-node bandwidth available to one group is min(node total / concurrent groups, p0 x one GPU's NIC
// share). Latency: one alpha per ring step.
double alpha_beta_time_s(const AlphaBeta& net, CollKind op, double v, Mesh mesh, int concurrent) {
  const int p0 = mesh.intra, p1 = mesh.inter;
  if (p0 * static_cast<long long>(p1) <= 1 || v <= 0) return 0.0;
  const double bi = net.intra_gpu_gbps * 1e9;
  const double bn = std::min(net.inter_node_gbps / std::max(1, concurrent), p0 * net.inter_gpu_gbps) * 1e9;
  const double ai = net.intra_latency_s, an = net.inter_latency_s;
  const double intra_ring = p0 > 1 ? (p0 - 1) * ai + v * (p0 - 1) / p0 / bi : 0.0;  // one AG or RS phase
  const double inter_ring = p1 > 1 ? (p1 - 1) * an + v * (p1 - 1) / p1 / bn : 0.0;
  switch (op) {
    case CollKind::all_gather:
    case CollKind::reduce_scatter:
      return intra_ring + inter_ring;
    case CollKind::all_reduce:
      return 2 * intra_ring + 2 * inter_ring;
    case CollKind::broadcast: {
      double slowest = 0;
      if (p0 > 1) slowest = std::max(slowest, v / bi);
      if (p1 > 1) slowest = std::max(slowest, v / bn);
      return (p0 - 1) * ai + (p1 - 1) * an + slowest;
    }
  }
  return 0.0;
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

CostModel::CostModel(AlphaBeta network) : net_(std::move(network)) {}
CostModel::CostModel(AlphaBeta network, BandwidthProfile profile)
    : net_(std::move(network)), profile_(std::move(profile)) {}

double CostModel::time_s(CollKind op, double bytes, Mesh mesh, const Topology& topo, Pricing pricing,
                         bool* fell_back) const {
  const int conc = pricing == Pricing::shared_links ? concurrent_groups(mesh, topo) : 1;
  if (profile_) {
    if (auto t = profile_->time_s(op, mesh, bytes)) {
      if (fell_back) *fell_back = false;
      if (conc == 1) return *t;
      // The profile measured one group alone. Sharing slows only the inter-node part; the alpha-beta model says how
      // much of the time that part is, so the measured time is scaled by the model's shared/alone ratio.
      const double alone = alpha_beta_time_s(net_, op, bytes, mesh, 1);
      const double shared = alpha_beta_time_s(net_, op, bytes, mesh, conc);
      return alone > 0 ? *t * (shared / alone) : *t;
    }
  }
  if (fell_back) *fell_back = profile_.has_value();
  return alpha_beta_time_s(net_, op, bytes, mesh, conc);
}

double CostModel::op_time_s(const CommOp& op, const Topology& topo, Pricing pricing, bool* fell_back) const {
  return time_s(op.kind, double(op.bytes()), op.mesh, topo, pricing, fell_back);
}

void CostModel::price_both(const Schedule& s, CommTimeBreakdown* isolated, CommTimeBreakdown* shared) const {
  // Schedules repeat a few shapes (every layer's modules, equal buckets): remember the last few prices.
  struct Memo {
    CollKind kind;
    int64_t bytes;
    Mesh mesh;
    double t[2];
    bool fell_back;
  };
  constexpr int kMemo = 8;
  Memo memo[kMemo];
  int memo_size = 0, memo_next = 0;
  CommTimeBreakdown* out[2] = {isolated, shared};
  for (const auto& op : s.ops) {
    const int64_t bytes = op.bytes();
    const Memo* hit = nullptr;
    for (int i = 0; i < memo_size; ++i)
      if (memo[i].bytes == bytes && memo[i].kind == op.kind && memo[i].mesh == op.mesh) {
        hit = &memo[i];
        break;
      }
    if (!hit) {
      Memo& m = memo[memo_next];
      m.kind = op.kind;
      m.bytes = bytes;
      m.mesh = op.mesh;
      m.t[0] = out[0] ? time_s(op.kind, double(bytes), op.mesh, s.topo, Pricing::paper_isolated, &m.fell_back) : 0;
      m.t[1] = out[1] ? time_s(op.kind, double(bytes), op.mesh, s.topo, Pricing::shared_links, &m.fell_back) : 0;
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
