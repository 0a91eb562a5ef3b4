// Parsing of the pricing and memory-reserve options; see cost_options.h.
#include "core/cost/cost_options.h"

#include <sstream>

#include "core/cost/nccl_tests_import.h"
#include "core/util/text.h"
#include "core/util/units.h"

namespace lins {
namespace {

std::string size_text(double bytes) {
  // Exact in MiB when it is a whole number of MiB, else in bytes: the help shows the default it parses back.
  const double mib = bytes / double(1 << 20);
  if (mib == static_cast<double>(static_cast<long long>(mib)))
    return std::to_string(static_cast<long long>(mib)) + "MiB";
  return std::to_string(static_cast<long long>(bytes)) + "B";
}

}  // namespace

std::vector<OptionSpec> cost_options(const std::string& default_network, const std::string& default_pricing,
                                     bool allow_both) {
  std::string names;
  for (const auto& n : network_preset_names()) names += (names.empty() ? "" : ", ") + n;
  return {
      {"network", 0, "FILE|PRESET", default_network,
       "the cluster's network: a preset (" + names + ") or a network file (docs/cost-model.md)"},
      {"network-model", 0, "MODEL", "auto",
       "how the network prices a collective: " + kNetworkModelNames.described() +
           ", or auto (nccl where the network describes GPUs, else alpha-beta)"},
      {"profile", 0, "FILE", "",
       "bandwidth profile CSV from `lins comm --profile` (the network model prices the meshes it lacks)"},
      {"nccl-tests", 0, "LIST", "",
       "nccl-tests outputs (" + nccl_tests_programs() +
           " stdout, or the JSON of their -J FILE.json), comma-separated, each FILE or FILE@GPUS_PER_NODExNODES when "
           "its rank list does not say"},
      {"contention", 0, "FILE|network|off", "network",
       "what overlap costs (compute beside collectives, collectives beside compute, collectives sharing a link): the "
       "network's [contention] table, a file `lins comm --contention FILE` wrote, or off (overlap is free)"},
      {"pricing", 0, "MODE", default_pricing,
       kPricingNames.described() + (allow_both ? ", or both (ranked by paper, both shown)" : "")},
  };
}

Result<CostModel> parse_cost_model(const ParsedArgs& args, int gpus_per_node) {
  auto net = resolve_network_spec(args.get("network"));
  if (!net) return make_error("--network: " + net.error());
  if (gpus_per_node > 0 && net->gpus_per_node > 0 && gpus_per_node > net->gpus_per_node)
    return make_error("--network " + net->name + " has " + std::to_string(net->gpus_per_node) +
                      " GPUs per node, fewer than the " + std::to_string(gpus_per_node) +
                      " asked for; lower --gpus-per-node or describe the cluster in a network file");
  const std::string model_text = args.get("network-model");
  NetworkModel model = net->has_gpu() ? NetworkModel::nccl : NetworkModel::alpha_beta;
  if (model_text != "auto") {
    LINS_ASSIGN_OR_RETURN(model, kNetworkModelNames.parse(model_text, "--network-model", {"auto"}));
  }
  std::optional<BandwidthProfile> profile;
  std::string sources;
  if (const std::string path = args.get("profile"); !path.empty()) {
    auto p = BandwidthProfile::load(path);
    if (!p) return make_error("--profile: " + p.error());
    profile = std::move(*p);
    sources = path;
  }
  for (const auto& item : split(args.get("nccl-tests"), ',', /*keep_empty=*/false)) {
    LINS_ASSIGN_OR_RETURN(auto a, parse_nccl_tests_arg(item));
    BandwidthProfile measured;
    auto imported = load_nccl_tests(a.path, a.mesh, &measured);
    if (!imported) return make_error("--nccl-tests: " + imported.error());
    if (!profile) profile = BandwidthProfile();
    profile->merge(measured);
    for (const auto& r : imported->rejected) profile->add_note(r);
    sources += (sources.empty() ? "" : ", ") + a.path + " (" + coll_kind_name(imported->op) + " " +
               imported->mesh.to_string() + ")";
  }
  if (profile) profile->set_source(sources);
  auto cost = CostModel::make(*net, model, std::move(profile));
  if (!cost) return make_error("--network-model " + std::string(network_model_name(model)) + ": " + cost.error());
  if (const std::string c = args.get("contention"); c == "off") {
    cost->set_contention(Contention{});
  } else if (c != "network") {
    auto file = load_contention(c);
    if (!file) return make_error("--contention: " + file.error() + "; or give network or off");
    cost->set_contention(std::move(*file));
  }
  return cost;
}

std::vector<OptionSpec> memory_reserve_options() {
  const MemoryReserve d;
  return {
      {"reserve-context", 0, "SIZE", size_text(d.cuda_context_bytes),
       "memory the CUDA context takes on each GPU (the default is PyTorch's measurement with eager module loading)"},
      {"reserve-cublas", 0, "SIZE", size_text(d.cublas_workspace_bytes), "cuBLAS workspace of the compute stream"},
      {"reserve-nccl", 0, "SIZE", size_text(d.nccl_bytes_per_communicator),
       "NCCL buffers per communicator (the plan's group roles each have one)"},
      {"reserve-fragmentation", 0, "FRACTION", "0.05",
       "allocator fragmentation, as a fraction of the counted tensors (0 to 1)"},
  };
}

Result<MemoryReserve> parse_memory_reserve(const ParsedArgs& args) {
  MemoryReserve r;
  LINS_ASSIGN_OR_RETURN(auto context, args.get_memory_size("reserve-context"));
  LINS_ASSIGN_OR_RETURN(auto cublas, args.get_memory_size("reserve-cublas"));
  LINS_ASSIGN_OR_RETURN(auto nccl, args.get_memory_size("reserve-nccl"));
  LINS_ASSIGN_OR_RETURN(auto frag, args.get_double("reserve-fragmentation"));
  if (!(frag >= 0 && frag <= 1))
    return make_error("--reserve-fragmentation " + args.get("reserve-fragmentation") +
                      " is not a fraction; valid: 0 to 1 (0.05 = 5% of the counted tensors)");
  r.cuda_context_bytes = double(context);
  r.cublas_workspace_bytes = double(cublas);
  r.nccl_bytes_per_communicator = double(nccl);
  r.fragmentation_fraction = frag;
  return r;
}

}  // namespace lins
