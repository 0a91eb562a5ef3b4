// The inputs line; see inputs.h.
#include "core/cost/inputs.h"

#include <vector>

namespace lins {

std::string inputs_line(const ParsedArgs& args, const CostModel& cost, const ComputeModel& compute,
                        const GpuAssumption& gpu, const HostModel* host) {
  std::vector<std::string> assumed, given, measured;
  // Compute: the roofline's kernel rates, a rate fitted to measured steps, one given, or the efficiency times the peak.
  if (compute.roofline) {  // each kernel at its generation's rate: measured on one of its GPUs, else published/assumed
    const KernelEfficiency& k = compute.roofline->kernels;
    const std::string rates = args.has("kernel-rates") ? " measured in " + args.get("kernel-rates")
                              : k.measured ? " of sm90, measured on an H200 (data/gpu)"
                                           : " of sm" + std::to_string(k.compute_capability) +
                                                 ", published or assumed (docs/cost-model.md, Compute)";
    (k.measured ? measured : assumed).push_back("compute by roofline, kernel rates" + rates);
  } else if (compute.calibration) {
    measured.push_back("compute calibrated from " + args.get("calibrate"));
  } else if (args.has("sustained-tflops")) {
    given.push_back("compute " + args.get("sustained-tflops") + " TFLOP/s (--sustained-tflops)");
  } else if (args.has("compute-efficiency")) {
    given.push_back("compute efficiency " + args.get("compute-efficiency") + " x peak (--compute-efficiency)");
  } else {
    assumed.push_back("compute efficiency " + args.get("compute-efficiency") + " x peak");
  }
  // The network: measured bandwidth first where it covers a collective, the network model for everything else.
  const std::string model = std::string(network_model_name(cost.model())) + " model of network " + cost.network().name;
  if (const BandwidthProfile* p = cost.profile()) {
    measured.push_back("bandwidth " + p->source());
    assumed.push_back(model + " where the measurements do not reach");
  } else {
    assumed.push_back("collectives priced by the " + model);
  }
  // What overlap costs.
  const Contention& c = cost.contention();
  const bool contention_file = args.get("contention") != "network";
  if (!c.any()) {
    assumed.push_back("contention off (overlap free)");
  } else if (c.source.rfind("measured", 0) == 0) {
    measured.push_back("contention " + (contention_file ? args.get("contention") : "of network " + cost.network().name));
  } else {
    assumed.push_back("contention priors of " +
                      (contention_file ? args.get("contention") : "network " + cost.network().name));
  }
  // The memory reserve.
  std::string reserve;
  int reserve_given = 0;
  for (const char* o : {"reserve-context", "reserve-cublas", "reserve-nccl", "reserve-fragmentation"})
    if (args.has(o)) reserve += (reserve_given++ ? ", " : "") + std::string("--") + o;
  if (reserve_given > 0) given.push_back("memory reserve (" + reserve + ")");
  if (reserve_given < 4) assumed.push_back(reserve_given == 0 ? "memory reserve" : "the rest of the memory reserve");
  // The GPU: each number from an option, or from the network's GPU (a datasheet).
  std::string gpu_given, gpu_assumed_from;
  for (const std::string* from : {&gpu.peak_from, &gpu.hbm_from, &gpu.mem_from}) {
    if (from->rfind("--", 0) == 0)
      gpu_given += (gpu_given.empty() ? "" : ", ") + *from;
    else if (gpu_assumed_from.empty())
      gpu_assumed_from = *from;
  }
  if (!gpu_given.empty()) given.push_back("GPU " + gpu_given);
  if (!gpu_assumed_from.empty()) assumed.push_back("GPU numbers of the " + gpu_assumed_from);
  // The host side.
  if (!host) {
    assumed.push_back("host side off (the device schedule alone)");
  } else if (args.has("host-costs") && !args.get("host-costs").empty()) {
    measured.push_back("host costs " + args.get("host-costs"));
  } else {
    assumed.push_back("host costs built in (" + host_model_name(host) + ", timed on a CPU: data/host)");
  }
  auto join = [](const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
    return s.empty() ? std::string("-") : s;
  };
  return "assumed: " + join(assumed) + "; given: " + join(given) + "; measured: " + join(measured);
}

}  // namespace lins
