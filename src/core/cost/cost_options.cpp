// Parsing of the pricing and memory-reserve options; see cost_options.h.
#include "core/cost/cost_options.h"

#include <cstdio>
#include <sstream>

#include "core/cost/gpu_peaks.h"
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

// A rate as the datasheets write it: 312, 989.4, 2039.
std::string number_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// "paper-a800 312, h100-ndr 989.4": a number of each shipped network's GPU, for the help of the option it defaults.
std::string preset_gpu_numbers(double NetworkGpu::*field) {
  std::string out;
  for (const auto& n : network_spec_presets())
    if (n.gpu.described()) out += (out.empty() ? "" : ", ") + n.name + " " + number_text(n.gpu.*field);
  return out;
}

// "a800-sxm and a100-sxm": the names of `presets`.
std::string preset_names(const std::vector<const GpuPreset*>& presets) {
  std::string out;
  for (std::size_t i = 0; i < presets.size(); ++i)
    out += std::string(i == 0 ? "" : i + 1 == presets.size() ? " and " : ", ") + presets[i]->name;
  return out;
}

// A warning when an explicit --peak-tflops is the peak of GPUs of another generation than the network's (its gpu
// preset's, else its gpu_arch): 312 on an H100 network is most likely a default carried over, not a measurement.
std::optional<std::string> peak_generation_warning(double peak_tflops, const NetworkSpec& net) {
  if (!net.has_gpu()) return std::nullopt;
  const auto matches = gpu_presets_with_peak(peak_tflops);
  const int network_cc = net.gpu.compute_capability > 0 ? net.gpu.compute_capability : net.compute_capability;
  if (matches.empty()) return std::nullopt;  // a peak of no listed GPU: nothing to compare
  for (const GpuPreset* p : matches)
    if (p->compute_capability == network_cc) return std::nullopt;
  std::string w = "--peak-tflops " + number_text(peak_tflops) + " is the dense bf16 peak of " + preset_names(matches) +
                  " (sm" + std::to_string(matches[0]->compute_capability) + "), but network " + net.name +
                  " has gpu_arch = \"sm" + std::to_string(net.compute_capability) + "\"";
  if (net.gpu.described())
    w += " and its GPU" + (net.gpu.preset.empty() ? std::string() : " " + net.gpu.preset) + " a peak of " +
         number_text(net.gpu.peak_tflops) + " TFLOP/s";
  return w + "; MFU and --compute-efficiency take " + number_text(peak_tflops) + " as given";
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
           ", or auto (alpha-beta with its link terms fitted to --profile and --nccl-tests when given; else nccl "
           "where the network describes GPUs, else alpha-beta)"},
      {"profile", 0, "FILE", "",
       "bandwidth profile CSV from `lins comm --profile` (the network model, its link terms fitted to the "
       "measurements, prices the meshes it lacks)"},
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

Result<NetworkSpec> parse_network(const ParsedArgs& args) {
  auto net = resolve_network_spec(args.get("network"));
  if (!net) return make_error("--network: " + net.error());
  return net;
}

Result<CostModel> parse_cost_model(const ParsedArgs& args, const NetworkSpec& net, int gpus_per_node) {
  if (gpus_per_node > 0 && net.gpus_per_node > 0 && gpus_per_node > net.gpus_per_node)
    return make_error("--network " + net.name + " has " + std::to_string(net.gpus_per_node) +
                      " GPUs per node, fewer than the " + std::to_string(gpus_per_node) +
                      " asked for; lower --gpus-per-node or describe the cluster in a network file");
  const std::string model_text = args.get("network-model");
  NetworkModel model = net.has_gpu() ? NetworkModel::nccl : NetworkModel::alpha_beta;
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
  // Measurements price every mesh through the alpha-beta terms fitted to them (link_fit.h), unless the nccl model is
  // asked for by name; then the fit is only reported beside it.
  if (profile && model_text == "auto") model = NetworkModel::alpha_beta;
  auto cost = CostModel::make(net, model, std::move(profile));
  // The refusal names --network-model only when it was given; under auto the network's GPUs chose the nccl model.
  if (!cost && args.has("network-model"))
    return make_error("--network-model " + std::string(network_model_name(model)) + ": " + cost.error());
  if (!cost)
    return make_error("the " + std::string(network_model_name(model)) + " model (chosen for a network with GPUs): " +
                      cost.error() + "; or price it with --network-model alpha-beta, which has no such terms");
  if (const std::string c = args.get("contention"); c == "off") {
    cost->set_contention(Contention{});
  } else if (c != "network") {
    auto file = load_contention(c);
    if (!file) return make_error("--contention: " + file.error() + "; or give network or off");
    cost->set_contention(std::move(*file));
  }
  return cost;
}

std::vector<OptionSpec> gpu_options(const std::string& gpu_mem_help) {
  return {
      {"peak-tflops", 0, "X", "",
       "dense bf16 peak TFLOP/s per GPU, for MFU and --compute-efficiency [default: the network's GPU: " +
           preset_gpu_numbers(&NetworkGpu::peak_tflops) + "]"},
      {"gpu-mem", 0, "SIZE", "",
       "memory per GPU; " + gpu_mem_help + " [default: the network's GPU: " + preset_gpu_numbers(&NetworkGpu::mem_gib) +
           " GiB]"},
  };
}

std::string hbm_gbps_help() {
  return "the optimizer update's memory rate per GPU, GB/s [default: the network's GPU's HBM bandwidth: " +
         preset_gpu_numbers(&NetworkGpu::hbm_gbps) + "]";
}

Result<GpuAssumption> parse_gpu_assumption(const ParsedArgs& args, const NetworkSpec& net) {
  GpuAssumption g;
  NetworkGpu gpu = net.gpu;
  const std::string of = "network " + net.name + "'s ";
  std::string peak_from = of + gpu.peak_from, hbm_from = of + gpu.hbm_from, mem_from = of + gpu.mem_from;
  if (!gpu.described()) {
    const GpuPreset& f = *find_gpu_preset(kFallbackGpu);
    gpu.peak_tflops = f.peak_tflops, gpu.hbm_gbps = f.hbm_gbps, gpu.mem_gib = f.mem_gib;
    peak_from = hbm_from = mem_from =
        std::string("gpu preset ") + kFallbackGpu + " (network " + net.name + " names no GPU)";
    const bool all_given = args.has("peak-tflops") && args.has("hbm-gbps") && args.has("gpu-mem");
    if (net.has_gpu() && !all_given)
      g.warnings.push_back("network " + net.name + " (" + net.source +
                           ") has GPUs but names none (gpu = \"...\", or peak_tflops, hbm_gbps and gpu_mem_gib): "
                           "what --peak-tflops, --hbm-gbps and --gpu-mem do not give is the paper's A800's (" +
                           kFallbackGpu + ": " + number_text(f.peak_tflops) + " TFLOP/s, " + number_text(f.hbm_gbps) +
                           " GB/s, " + number_text(f.mem_gib) + " GiB)");
  }
  g.compute_capability = gpu.compute_capability > 0   ? gpu.compute_capability
                         : net.compute_capability > 0 ? net.compute_capability
                                                      : find_gpu_preset(kFallbackGpu)->compute_capability;
  g.peak_tflops = gpu.peak_tflops, g.peak_from = peak_from;
  g.hbm_gbps = gpu.hbm_gbps, g.hbm_from = hbm_from;
  g.mem_bytes = gpu.mem_gib * double(1ull << 30), g.mem_from = mem_from;
  if (args.has("peak-tflops")) {
    LINS_ASSIGN_OR_RETURN(g.peak_tflops, args.get_double("peak-tflops"));
    if (g.peak_tflops <= 0) return make_error("--peak-tflops must be positive (TFLOP/s per GPU, as 989.4)");
    g.peak_from = "--peak-tflops";
    if (auto w = peak_generation_warning(g.peak_tflops, net)) g.warnings.push_back(*w);
  }
  if (args.has("hbm-gbps")) {
    LINS_ASSIGN_OR_RETURN(g.hbm_gbps, args.get_double("hbm-gbps"));
    if (g.hbm_gbps <= 0) return make_error("--hbm-gbps must be positive (GB/s per GPU, as 3350)");
    g.hbm_from = "--hbm-gbps";
  }
  if (args.has("gpu-mem")) {
    LINS_ASSIGN_OR_RETURN(auto mem, args.get_memory_size("gpu-mem"));
    if (mem == 0) return make_error("--gpu-mem must be positive (for example 80GiB)");
    g.mem_bytes = double(mem), g.mem_from = "--gpu-mem";
  }
  return g;
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
