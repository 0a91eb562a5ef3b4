// How a network prices one collective: the interface every network model implements, and the two lins has. A
// measured profile or imported nccl-tests data is composed in front of a model by CostModel (cost_model.h): measured
// (op, mesh) pairs come from the data, every other one from the model.
//
// Adding a model is one file (a class implementing NetworkCostModel) and one row: its NetworkModel value and name
// and its case in make_network_model, both below.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "core/cost/nccl_model.h"  // kNcclModelVersion
#include "core/model/groups.h"  // Mesh
#include "core/model/vocabulary.h"
#include "core/util/names.h"
#include "core/util/result.h"

namespace lins {

struct NetworkSpec;

// Hierarchical alpha-beta model of a cluster network. Bandwidths are per direction, GB/s (1e9 B/s).
struct AlphaBeta {
  std::string name;
  std::string description;
  double intra_gpu_gbps = 0;   // one GPU's bandwidth to the others of its node (NVLink/NVSwitch)
  double inter_node_gbps = 0;  // a node's total network bandwidth (all its NICs)
  double inter_gpu_gbps = 0;   // the most one GPU can drive across nodes (its NIC share, PCIe)
  double intra_latency_s = 0;  // per step of a ring inside the node
  double inter_latency_s = 0;  // per step of a ring across nodes
  // Per doubling of the nodes a group spans: inter-node bandwidth x bw_factor, inter-node latency x latency_factor.
  double bw_factor_per_node_doubling = 1.0;
  double latency_factor_per_node_doubling = 1.0;
};

// Which model prices what no profile measured.
enum class NetworkModel {
  alpha_beta,  // the hierarchical ring of alpha_beta_time_s (cost_model.h)
  nccl,        // NCCL 2.21.5's own algorithm and protocol model (nccl_model.h)
};
// --network-model and the network_model column of the plan CSV.
inline constexpr NameTable<NetworkModel, 2> kNetworkModelNames{
    "network model",
    {{
        {NetworkModel::alpha_beta, "alpha-beta", "", "hierarchical ring"},
        {NetworkModel::nccl, "nccl", "", "NCCL 2.21.5's algorithm and protocol model"},
    }}};
static_assert(kNetworkModelNames.complete(NetworkModel::nccl));
static_assert(std::string_view(kNcclModelVersion) == "2.21.5", "say the new version in kNetworkModelNames' help");
const char* network_model_name(NetworkModel m);  // "alpha-beta", "nccl"
Result<NetworkModel> parse_network_model(std::string_view text);

class NetworkCostModel {
 public:
  virtual ~NetworkCostModel() = default;
  // Seconds of one collective of `message_bytes` (the schedule's CommOp::bytes()) on a group of shape `mesh`, with
  // `concurrent` groups of the same op sharing each node's network (1 = alone).
  virtual double time_s(CollKind op, double message_bytes, Mesh mesh, int concurrent) const = 0;
  // One line: what prices the collectives ("alpha-beta hierarchical ring").
  virtual std::string description() const = 0;
  // Whether choice() says anything: the model picks among ways to run a collective (NCCL's algorithms and protocols).
  virtual bool makes_choices() const { return false; }
  // How the model priced one collective, for a schedule's table ("ring/simple"); "" where it has no choice to show.
  virtual std::string choice(CollKind op, double message_bytes, Mesh mesh, int concurrent) const {
    (void)op, (void)message_bytes, (void)mesh, (void)concurrent;
    return "";
  }
};

// The hierarchical ring of alpha_beta_time_s (cost_model.h); `description` replaces its description() where given
// (kFittedAlphaBetaDescription: its link terms fitted to measurements, link_fit.h).
std::unique_ptr<NetworkCostModel> make_alpha_beta_model(const AlphaBeta& net, std::string description = "");
inline constexpr const char* kAlphaBetaDescription = "alpha-beta hierarchical ring";
inline constexpr const char* kFittedAlphaBetaDescription =
    "alpha-beta hierarchical ring, its link terms fitted to the measurements";
// NCCL 2.21.5's algorithm and protocol model (nccl_model.h); fails where it cannot price `net` (no GPUs, SHARP, NVLS).
Result<std::unique_ptr<NetworkCostModel>> make_nccl_network_model(const NetworkSpec& net);
// `model` for a described network.
Result<std::unique_ptr<NetworkCostModel>> make_network_model(NetworkModel model, const NetworkSpec& net);

}  // namespace lins
