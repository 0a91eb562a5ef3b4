// How a network prices one collective: the interface every network model implements, and the two lins has. A
// measured profile or imported nccl-tests data is composed in front of a model by CostModel (cost_model.h): measured
// (op, mesh) pairs come from the data, every other one from the model.
//
// Adding a model is one file (a class implementing NetworkCostModel) and one row: its NetworkModel value and name
// (cost_model.h) and its case in make_network_model below.
#pragma once

#include <memory>
#include <string>

#include "core/groups.h"  // Mesh
#include "core/result.h"
#include "core/vocabulary.h"

namespace lins {

struct AlphaBeta;
struct NetworkSpec;
enum class NetworkModel;

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

// The hierarchical ring of alpha_beta_time_s (cost_model.h).
std::unique_ptr<NetworkCostModel> make_alpha_beta_model(const AlphaBeta& net);
// NCCL 2.21.5's algorithm and protocol model (nccl_model.h); fails where it cannot price `net` (no GPUs, SHARP, NVLS).
Result<std::unique_ptr<NetworkCostModel>> make_nccl_network_model(const NetworkSpec& net);
// `model` for a described network.
Result<std::unique_ptr<NetworkCostModel>> make_network_model(NetworkModel model, const NetworkSpec& net);

}  // namespace lins
