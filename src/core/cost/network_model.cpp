// The two network models behind NetworkCostModel; see network_model.h.
#include "core/cost/network_model.h"

#include "core/cost/cost_model.h"
#include "core/cost/nccl_model.h"

namespace lins {

const char* network_model_name(NetworkModel m) { return kNetworkModelNames.name(m); }
Result<NetworkModel> parse_network_model(std::string_view text) { return kNetworkModelNames.parse(text); }

namespace {

class AlphaBetaModel final : public NetworkCostModel {
 public:
  AlphaBetaModel(AlphaBeta net, std::string description)
      : net_(std::move(net)), description_(description.empty() ? kAlphaBetaDescription : std::move(description)) {}
  double time_s(CollKind op, double bytes, Mesh mesh, int concurrent) const override {
    return alpha_beta_time_s(net_, op, bytes, mesh, concurrent);
  }
  std::string description() const override { return description_; }

 private:
  AlphaBeta net_;
  std::string description_;
};

class NcclNetworkModel final : public NetworkCostModel {
 public:
  // NCCL's tuning model covers the ring and tree collectives; the others (all_to_all: grouped point-to-point
  // sends) are priced by the alpha-beta model of the same network.
  NcclNetworkModel(NcclModel model, AlphaBeta net) : model_(std::move(model)), net_(std::move(net)) {}
  double time_s(CollKind op, double bytes, Mesh mesh, int concurrent) const override {
    if (!collective(op).nccl_tuned) return alpha_beta_time_s(net_, op, bytes, mesh, concurrent);
    return model_.time_s(op, bytes, mesh, concurrent);
  }
  std::string description() const override {
    return std::string("NCCL ") + kNcclModelVersion + " model (Ring/Tree x LL/LL128/Simple, as NCCL picks them)";
  }
  bool makes_choices() const override { return true; }
  std::string choice(CollKind op, double bytes, Mesh mesh, int concurrent) const override {
    if (!collective(op).nccl_tuned) return "p2p (alpha-beta)";
    const NcclChoice c = model_.choose(op, bytes, mesh, concurrent);
    return std::string(nccl_algo_name(c.algo)) + "/" + nccl_proto_name(c.proto);
  }

 private:
  NcclModel model_;
  AlphaBeta net_;
};

}  // namespace

std::unique_ptr<NetworkCostModel> make_alpha_beta_model(const AlphaBeta& net, std::string description) {
  return std::make_unique<AlphaBetaModel>(net, std::move(description));
}

Result<std::unique_ptr<NetworkCostModel>> make_nccl_network_model(const NetworkSpec& net) {
  LINS_ASSIGN_OR_RETURN(auto n, NcclModel::make(net));
  return std::unique_ptr<NetworkCostModel>(std::make_unique<NcclNetworkModel>(std::move(n), alpha_beta_of(net)));
}

Result<std::unique_ptr<NetworkCostModel>> make_network_model(NetworkModel model, const NetworkSpec& net) {
  switch (model) {
    case NetworkModel::alpha_beta:
      return make_alpha_beta_model(alpha_beta_of(net));
    case NetworkModel::nccl:
      return make_nccl_network_model(net);
  }
  return make_error("network model: unknown value");
}

}  // namespace lins
