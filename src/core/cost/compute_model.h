// How fast a GPU computes, for projecting a step: by default a roofline of each task's kernels at the GPU generation's
// kernel rates (roofline.h); else one sustained forward/backward rate (efficiency x peak, given, or fitted per engine
// to measured `lins step` rows with --calibrate); and the optimizer's memory rate. Shared by
// `lins simulate`, `lins plan` and `lins step` (which all read the same flags) so that a plan is ranked with the
// compute the simulator projects it with.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/cost/calibrate.h"
#include "core/cost/roofline.h"
#include "core/model/plan.h"
#include "core/util/cli.h"
#include "core/util/result.h"

namespace lins {

// The rates one step is projected with (simulator.h).
struct ComputeRates {
  double sustained_flops_per_s = 0;  // GEMM-dominated forward/backward rate
  double optimizer_bytes_per_s = 0;  // memory rate of the AdamW update (memory bound)
  double fixed_step_s = 0;           // host time per step besides compute and communication (calibrate.h)
  // --compute-model roofline: each task timed by the roofline of its kernels instead of the sustained rate.
  std::shared_ptr<const Roofline> roofline;
};

struct ComputeModel {
  double sustained_flops_per_s = 0.6 * 312e12;  // forward/backward rate per GPU
  double optimizer_bytes_per_s = 1600e9;        // memory rate of the AdamW update
  std::string rate_source = "compute-efficiency 0.6 x peak";
  std::optional<Calibration> calibration;  // --calibrate: per engine rates and fixed costs
  std::string calibration_as;              // --calibrate-as: one engine's calibration for every strategy
  std::shared_ptr<const Roofline> roofline;  // --compute-model roofline (then the sustained rate is unused)

  // The rates of one engine: calibrated (its own rate and fixed per-step cost, or every engine's together when it had
  // no rows of its own), else the one sustained rate with no fixed cost.
  ComputeRates rates_for(Engine engine) const;
};

// --compute-model, --sustained-tflops, --compute-efficiency, --calibrate, --calibrate-as, --hbm-gbps (the command adds
// --peak-tflops).
std::vector<OptionSpec> compute_options();
// How compute is timed, for a console: the roofline with its kernel rates and GEMM rate, or the one sustained rate
// with its source; then the optimizer's rate (`hbm_from`: where the HBM bandwidth came from).
std::string compute_description(const ComputeModel& c, const std::string& hbm_from);
// The compute model of those options; `peak_tflops` is the peak per GPU that --compute-efficiency scales, `hbm_gbps`
// the optimizer's memory rate (both as parse_gpu_assumption resolves them: the network's GPU or the options).
// `compute_capability` is the GPU's generation whose kernel rates the roofline takes; 0 (none, as for lins step's
// planner on CPUs) makes efficiency the default.
Result<ComputeModel> parse_compute_model(const ParsedArgs& args, double peak_tflops, double hbm_gbps,
                                         int compute_capability = 0);

}  // namespace lins
