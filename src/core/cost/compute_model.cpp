// The compute model of a projection and its options; see compute_model.h.
#include "core/cost/compute_model.h"

#include <cstdio>

#include "core/cost/cost_options.h"

namespace lins {

ComputeRates ComputeModel::rates_for(Engine engine) const {
  if (!calibration) return ComputeRates{sustained_flops_per_s, optimizer_bytes_per_s, 0.0, roofline};
  const EngineCalibration& c =
      calibration->of(calibration_as.empty() ? std::string(engine_name(engine)) : calibration_as);
  return ComputeRates{c.flops_per_s, optimizer_bytes_per_s, c.fixed_step_s, nullptr};
}

std::vector<OptionSpec> compute_options() {
  return {
      {"compute-model", 0, "NAME", "roofline",
       "how compute is timed: roofline (each kernel of each task at the GPU generation's measured or published GEMM, "
       "attention and memory rates: predicted, MFU an output; docs/cost-model.md, \"Compute\") or efficiency (one "
       "sustained rate: --compute-efficiency x peak, --sustained-tflops, or --calibrate); giving one of those three "
       "selects efficiency, as does a planner without a GPU generation (lins step on CPUs)"},
      {"kernel-rates", 0, "FILE", "",
       "--compute-model roofline: the kernel rates a GPU check measured (bench_kernels_gpu.csv of "
       "scripts/gpu-check.sh) instead of the GPU generation's built-in ones"},
      {"sustained-tflops", 0, "X", "", "compute rate of forward/backward per GPU [default: efficiency x peak]"},
      {"compute-efficiency", 0, "X", "0.6", "sustained / peak when --sustained-tflops and --calibrate are absent"},
      {"calibrate", 0, "FILES", "",
       "fit each engine's sustained rate and fixed per-step cost to the measured rows of `lins step` CSVs "
       "(comma-separated; rows at 2+ micro-batch counts separate the two)"},
      {"calibrate-as", 0, "ENGINE", "",
       "use this engine's calibration for every strategy (where ranks share cores, only an engine with no "
       "synchronisation between modules, such as ddp, measures the contended compute rate the others also pay)"},
      {"hbm-gbps", 0, "X", "", hbm_gbps_help()},
  };
}

std::string compute_description(const ComputeModel& c, const std::string& hbm_from) {
  char text[224];
  if (c.roofline) {  // each task at its kernels' rates: no one sustained rate, MFU comes out of the projection
    std::snprintf(text, sizeof text,
                  "; GEMMs at %.1f TFLOP/s at full tiles, times each one's tile fill), optimizer at %.0f GB/s (AdamW "
                  "at %g of the HBM's %g GB/s, ",
                  c.sustained_flops_per_s / 1e12, c.optimizer_bytes_per_s / 1e9, c.roofline->kernels.optimizer,
                  c.roofline->hbm_bytes_per_s / 1e9);
    return "predicted per task by a roofline of its kernels (kernel rates " + c.roofline->kernels.source + text +
           hbm_from + ")";
  }
  std::snprintf(text, sizeof text, "%.1f TFLOP/s sustained per GPU (", c.sustained_flops_per_s / 1e12);
  std::string s = text + c.rate_source;
  std::snprintf(text, sizeof text, "), optimizer at %g GB/s (", c.optimizer_bytes_per_s / 1e9);
  return s + text + hbm_from + ")";
}

Result<ComputeModel> parse_compute_model(const ParsedArgs& args, double peak_tflops, double hbm_gbps,
                                         int compute_capability) {
  ComputeModel m;
  std::string mode = args.get("compute-model");
  if (mode != "efficiency" && mode != "roofline")
    return make_error("--compute-model " + mode + ": valid models are roofline and efficiency");
  if (args.has("sustained-tflops") && args.has("calibrate"))
    return make_error("give --sustained-tflops or --calibrate, not both");
  if (args.has("calibrate-as") && !args.has("calibrate"))
    return make_error("--calibrate-as needs --calibrate (the measured rows to take the engine's calibration from)");
  // The default is the roofline; a rate given, or no GPU generation to take kernel rates from, means efficiency.
  if (!args.has("compute-model") &&
      (compute_capability == 0 || args.has("compute-efficiency") || args.has("sustained-tflops") ||
       args.has("calibrate")))
    mode = "efficiency";
  if (args.has("kernel-rates") && mode != "roofline")
    return make_error("--kernel-rates sets the roofline's kernel rates: it does not go with --compute-model efficiency, "
                      "--compute-efficiency, --sustained-tflops or --calibrate");
  if (mode == "roofline") {
    if (compute_capability == 0)
      return make_error("--compute-model roofline takes its kernel rates from a GPU generation, and this command has "
                        "none (lins step on CPUs measures its own peak): use --compute-model efficiency");
    for (const char* rate : {"compute-efficiency", "sustained-tflops", "calibrate"})
      if (args.has(rate))
        return make_error(std::string("--compute-model roofline times each kernel by its own rate: --") + rate +
                          " belongs to --compute-model efficiency");
    auto r = std::make_shared<Roofline>();
    r->peak_flops_per_s = peak_tflops * 1e12;
    r->hbm_bytes_per_s = hbm_gbps * 1e9;
    if (args.has("kernel-rates")) {
      LINS_ASSIGN_OR_RETURN(r->kernels, kernel_efficiency_from_bench(args.get("kernel-rates"), compute_capability,
                                                                     peak_tflops, hbm_gbps));
    } else {
      r->kernels = kernel_efficiency(compute_capability);
    }
    m.optimizer_bytes_per_s = hbm_gbps * 1e9 * r->kernels.optimizer;
    m.sustained_flops_per_s = peak_tflops * 1e12 * r->kernels.gemm;  // for what reads one rate (not the tasks)
    m.rate_source = "roofline, " + r->kernels.source;
    m.roofline = std::move(r);
    return m;
  }
  auto eff = args.get_double("compute-efficiency");
  if (!eff || *eff <= 0 || *eff > 1) return make_error(eff ? "--compute-efficiency must be in (0, 1]" : eff.error());
  m.optimizer_bytes_per_s = hbm_gbps * 1e9;
  m.sustained_flops_per_s = *eff * peak_tflops * 1e12;
  m.rate_source = "compute-efficiency " + args.get("compute-efficiency") + " x peak";
  if (args.has("sustained-tflops")) {
    auto v = args.get_double("sustained-tflops");
    if (!v || *v <= 0) return make_error(v ? "--sustained-tflops must be positive" : v.error());
    m.sustained_flops_per_s = *v * 1e12;
    m.rate_source = "given by --sustained-tflops";
  } else if (args.has("calibrate")) {
    LINS_ASSIGN_OR_RETURN(auto v, calibrate_from_step_csv(args.get("calibrate")));
    m.sustained_flops_per_s = v.all.flops_per_s;
    m.rate_source = "calibrated per engine from " + args.get("calibrate") + " (see calibration)";
    m.calibration = std::move(v);
    if (args.has("calibrate-as")) {
      LINS_ASSIGN_OR_RETURN(auto e, kEngineNames.parse(args.get("calibrate-as"), "--calibrate-as"));
      const std::string name = engine_name(e);
      if (!m.calibration->engine.count(name))
        return make_error("--calibrate-as " + name + ": the calibration rows have no measured row of that engine");
      m.calibration_as = name;
    }
  }
  return m;
}

}  // namespace lins
