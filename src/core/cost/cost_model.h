// Communication time of a Schedule: each collective o of v message bytes over a group of p0 GPUs on each of p1 nodes
// takes t = v / w(o, v, p0 x p1), the paper's cost model. w comes from a measured bandwidth profile (log-linear in
// message size; `lins comm --profile` or nccl-tests output), else from a model of a described network: NCCL's own
// algorithm/protocol model (nccl_model.h) or a hierarchical alpha-beta ring. Two pricings: the paper's (every group
// priced as if alone on the network) and shared links (the groups that run the same collective at the same time on
// one node share its network links). docs/cost-model.md explains both models and their sources.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "core/cost/contention.h"
#include "core/cost/nccl_model.h"
#include "core/cost/network_model.h"
#include "core/cost/network_spec.h"
#include "core/schedule/schedule.h"
#include "core/util/result.h"

namespace lins {

struct LinkFit;  // link_fit.h

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
  // Every measured point as it prices it (repeated sizes averaged): time_s = message_bytes / (algbw_gbps x 1e9).
  struct Measurement {
    CollKind op;
    Mesh mesh;
    double message_bytes;
    double time_s;
  };
  std::vector<Measurement> measurements() const;
  const std::string& source() const { return source_; }
  void set_source(std::string source) { source_ = std::move(source); }
  // Adds every measurement of `other` (its series join this profile's; equal sizes are averaged).
  void merge(const BandwidthProfile& other);
  // What was left out while importing (nccl-tests rows with wrong results), for the commands to report.
  void add_note(std::string note) { notes_.push_back(std::move(note)); }
  const std::vector<std::string>& notes() const { return notes_; }

 private:
  struct Point {
    double bytes;
    double gbps;
    int count;
  };
  using Key = std::tuple<int, int, int>;      // op, intra, inter
  std::map<Key, std::vector<Point>> series_;  // each sorted by bytes
  std::string source_;
  std::vector<std::string> notes_;
};

// The alpha-beta terms of a described network.
AlphaBeta alpha_beta_of(const NetworkSpec& net);
// The presets of data/networks/ (cpu-local, ethernet-100g, h100-ndr, paper-a800) as alpha-beta networks.
std::vector<AlphaBeta> network_presets();
Result<AlphaBeta> network_preset(std::string_view name);

enum class Pricing {
  paper_isolated,  // the paper's: each group priced alone (what a per-group profile measures)
  shared_links,    // groups of one op running at once on a node share the node's inter-node links
};
// --pricing and the ranked_by column of the plan CSV.
inline constexpr NameTable<Pricing, 2> kPricingNames{
    "pricing",
    {{
        {Pricing::paper_isolated, "paper", "", "each group alone, as the paper"},
        {Pricing::shared_links, "shared", "", "groups on a node share its links"},
    }}};
static_assert(kPricingNames.complete(Pricing::shared_links));
const char* pricing_name(Pricing p);
// "paper" or "shared"; the error names --pricing and lists both.
Result<Pricing> parse_pricing(std::string_view text);

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
  int64_t fallback_ops = 0;  // of those, priced by the network model because the profile lacked their (op, mesh)
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
  // Any network model (network_model.h), the profile (when given) first for the (op, mesh) pairs it measured;
  // `network` names the cluster (and prices nothing).
  CostModel(AlphaBeta network, std::shared_ptr<const NetworkCostModel> model,
            std::optional<BandwidthProfile> profile = std::nullopt);
  // A described network priced by `model`, the profile (when given) first for the (op, mesh) pairs it measured.
  // With a profile and `fit_links`, the alpha-beta link terms are fitted to every measured point (link_fit.h): the
  // alpha-beta model then prices every other (op, mesh) with the fitted terms; the nccl model keeps its own and the
  // fit is there to compare. Fails when the model cannot price the network (nccl without GPUs, or with SHARP or NVLS).
  static Result<CostModel> make(const NetworkSpec& net, NetworkModel model,
                                std::optional<BandwidthProfile> profile = std::nullopt, bool fit_links = true);

  // Seconds of one run of `op` (repeat not counted) on `topo`. *fell_back (when given) says whether the network
  // model priced it (the profile lacked its op and mesh).
  double op_time_s(const CommOp& op, const Topology& topo, Pricing pricing, bool* fell_back = nullptr) const;
  // Every op of the schedule, repeat counted, summed per term.
  CommTimeBreakdown price(const Schedule& s, Pricing pricing) const;
  // Both pricings in one pass over the ops (what the planner needs).
  void price_both(const Schedule& s, CommTimeBreakdown* isolated, CommTimeBreakdown* shared) const;
  // The network model alone (no profile): one collective with `concurrent` groups sharing each node's network.
  double model_time_s(CollKind op, double message_bytes, Mesh mesh, int concurrent = 1) const;

  const AlphaBeta& network() const { return net_; }
  // What overlap costs on this network (its [contention] table, or --contention); the timeline's rates.
  const Contention& contention() const { return contention_; }
  void set_contention(Contention c) { contention_ = std::move(c); }
  const BandwidthProfile* profile() const { return profile_ ? &*profile_ : nullptr; }
  NetworkModel model() const { return model_; }
  // What prices what the profile lacks (network_model.h).
  const NetworkCostModel& network_model() const { return *network_model_; }
  // "NCCL 2.21.5 model (Ring/Tree x LL/LL128/Simple)" or "alpha-beta hierarchical ring".
  std::string model_description() const { return network_model_->description(); }
  // The link terms fitted to the profile (null without one, or when not asked for).
  const LinkFit* link_fit() const { return link_fit_.get(); }
  // Whether the network model prices with the fitted terms (the alpha-beta model; some term was fitted).
  bool priced_by_fit() const { return priced_by_fit_; }
  // What the network says that this model leaves out or that looks wrong (nvls or sharp under alpha-beta, the
  // network's own warnings); the commands print each as a warning line.
  const std::vector<std::string>& warnings() const { return warnings_; }

 private:
  double time_s(CollKind op, double bytes, Mesh mesh, const Topology& topo, Pricing pricing, bool* fell_back) const;
  AlphaBeta net_;
  NetworkModel model_ = NetworkModel::alpha_beta;
  std::shared_ptr<const NetworkCostModel> network_model_;  // shared: a CostModel is copied freely
  std::optional<BandwidthProfile> profile_;
  std::shared_ptr<const LinkFit> link_fit_;
  bool priced_by_fit_ = false;
  Contention contention_;
  std::vector<std::string> warnings_;
};

}  // namespace lins
