// Communication time of a Schedule (PAPER.md section 4): t(o, v, p0 x p1) = v / w(o, v, p0 x p1) with w read from a
// measured bandwidth profile (log-linear in message size), or from a hierarchical alpha-beta model of a named network
// where the profile has no entry. Two pricings: the paper's (every group priced as if alone on the network) and
// shared links (the groups that run the same collective at the same time on one node share its network links).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "core/result.h"
#include "core/schedule.h"

namespace lins {

// Header written by `lins comm --profile` and read here (extra columns are ignored, columns are found by name).
inline constexpr const char* kProfileHeader = "op,mesh_intra,mesh_inter,message_bytes,time_s,algbw_gbps,busbw_gbps";

// Measured effective (algorithm) bandwidth per op and mesh, as a function of message bytes. algbw in GB/s (1e9 B/s):
// message_bytes / time_s / 1e9, so t = v / (algbw * 1e9).
class BandwidthProfile {
 public:
  // Reads a CSV file. Lines starting with '#' and blank lines are comments. Every malformed, truncated or out of
  // range line is an error naming file:line and what was expected.
  static Result<BandwidthProfile> load(const std::string& path);
  static Result<BandwidthProfile> parse(std::string_view text, const std::string& where);

  // Adds one measurement (repeated measurements of one size are averaged).
  void add(CollKind op, Mesh mesh, double message_bytes, double algbw_gbps);
  bool has(CollKind op, Mesh mesh) const;
  // Bandwidth for `message_bytes`, interpolated linearly in log(message size) between measured sizes. Below the
  // smallest measured size the time stays that of the smallest (latency bound); above the largest the bandwidth
  // stays that of the largest. nullopt when the (op, mesh) pair was never measured.
  std::optional<double> algbw_gbps(CollKind op, Mesh mesh, double message_bytes) const;
  // Time in seconds, same rules; nullopt when absent.
  std::optional<double> time_s(CollKind op, Mesh mesh, double message_bytes) const;

  std::size_t point_count() const;
  std::vector<std::pair<CollKind, Mesh>> series() const;
  const std::string& source() const { return source_; }

 private:
  struct Point {
    double bytes;
    double gbps;
    int count;
  };
  using Key = std::tuple<int, int, int>;      // op, intra, inter
  std::map<Key, std::vector<Point>> series_;  // each sorted by bytes
  std::string source_;
};

// Hierarchical alpha-beta model of a cluster network. Bandwidths are per direction, GB/s (1e9 B/s).
struct AlphaBeta {
  std::string name;
  std::string description;
  double intra_gpu_gbps = 0;   // one GPU's bandwidth to the others of its node (NVLink/NVSwitch)
  double inter_node_gbps = 0;  // a node's total network bandwidth (all its NICs)
  double inter_gpu_gbps = 0;   // the most one GPU can drive across nodes (its NIC share, PCIe)
  double intra_latency_s = 0;  // per step of a ring inside the node
  double inter_latency_s = 0;  // per step of a ring across nodes
};

// Named presets: paper-a800, h100-ndr, ethernet-100g, cpu-local.
std::vector<AlphaBeta> network_presets();
Result<AlphaBeta> network_preset(std::string_view name);

enum class Pricing {
  paper_isolated,  // PAPER.md section 4: each group priced alone (what a per-group profile measures)
  shared_links,    // groups of one op running at once on a node share the node's inter-node links
};
const char* pricing_name(Pricing p);

// Seconds of one collective on the alpha-beta network. `concurrent` = how many groups of the same op share each
// node's network at the same time (1 = alone). Hierarchical decomposition, see cost_model.cpp.
double alpha_beta_time_s(const AlphaBeta& net, CollKind op, double message_bytes, Mesh mesh, int concurrent = 1);

// Groups of one op that run at the same time on each node of `topo` and share its network: R / p0 for a group
// spanning nodes with p0 GPUs per node, 1 otherwise (NVSwitch gives every GPU its own intra-node bandwidth).
int concurrent_groups(Mesh mesh, const Topology& topo);

struct CommTimeBreakdown {
  double param_s = 0;        // T_p
  double grad_s = 0;         // T_g
  double os_sync_s = 0;      // T_os0
  double os_bcast_s = 0;     // T_os1
  int64_t ops = 0;           // collectives priced (repeat counted)
  int64_t fallback_ops = 0;  // of those, priced by the alpha-beta model because the profile lacked their mesh
  double kind_axis_s[kCollKindCount][2] = {};  // the same seconds split by collective kind and mesh axis
  double total_s() const { return param_s + grad_s + os_sync_s + os_bcast_s; }
  double& term_s(Term t);
  double term_s(Term t) const;
  double time_s(CollKind k, Axis a) const { return kind_axis_s[static_cast<int>(k)][static_cast<int>(a)]; }
};

class CostModel {
 public:
  // Alpha-beta only.
  explicit CostModel(AlphaBeta network);
  // Profile first, alpha-beta for every (op, mesh) the profile lacks.
  CostModel(AlphaBeta network, BandwidthProfile profile);

  // Seconds of one run of `op` (repeat not counted) on `topo`. *fell_back (when given) says whether the alpha-beta
  // model priced it.
  double op_time_s(const CommOp& op, const Topology& topo, Pricing pricing, bool* fell_back = nullptr) const;
  // Every op of the schedule, repeat counted, summed per term.
  CommTimeBreakdown price(const Schedule& s, Pricing pricing) const;
  // Both pricings in one pass over the ops (what the planner needs).
  void price_both(const Schedule& s, CommTimeBreakdown* isolated, CommTimeBreakdown* shared) const;

  const AlphaBeta& network() const { return net_; }
  const BandwidthProfile* profile() const { return profile_ ? &*profile_ : nullptr; }

 private:
  double time_s(CollKind op, double bytes, Mesh mesh, const Topology& topo, Pricing pricing, bool* fell_back) const;
  AlphaBeta net_;
  std::optional<BandwidthProfile> profile_;
};

}  // namespace lins
