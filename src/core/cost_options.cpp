// Parsing of the pricing options; see cost_options.h.
#include "core/cost_options.h"

namespace lins {

std::vector<OptionSpec> cost_options(const std::string& default_network, const std::string& default_pricing,
                                     bool allow_both) {
  std::string names;
  for (const auto& n : network_presets()) names += (names.empty() ? "" : ", ") + n.name;
  return {
      {"network", 0, "PRESET", default_network, "alpha-beta network model: " + names},
      {"profile", 0, "FILE", "",
       "bandwidth profile CSV from `lins comm --profile` (the network preset prices the meshes "
       "it lacks)"},
      {"pricing", 0, "MODE", default_pricing,
       std::string("paper (each group alone, as the paper) or shared (groups on a node share its links)") +
           (allow_both ? ", or both (ranked by paper, both shown)" : "")},
  };
}

Result<CostModel> parse_cost_model(const ParsedArgs& args) {
  auto net = network_preset(args.get("network"));
  if (!net) return make_error("--network: " + net.error());
  const std::string profile_path = args.get("profile");
  if (profile_path.empty()) return CostModel(*net);
  auto profile = BandwidthProfile::load(profile_path);
  if (!profile) return make_error("--profile: " + profile.error());
  return CostModel(*net, std::move(*profile));
}

Result<Pricing> parse_pricing(const std::string& text) {
  if (text == "paper") return Pricing::paper_isolated;
  if (text == "shared") return Pricing::shared_links;
  return make_error("--pricing: unknown mode '" + text + "'; valid modes: paper, shared");
}

}  // namespace lins
