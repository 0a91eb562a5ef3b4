// Calibration of the simulator's compute from measured `lins step` rows: each engine's sustained compute rate and
// its fixed per-step cost, fitted so that projections of a machine's own runs start from what that machine does.
// With rows at two or more micro-batch counts M the compute time is fitted as a + M * b (b gives the rate, a is
// per-step compute that does not scale with M); the fixed cost is the host time a step spends besides compute,
// exposed communication and the optimizer, plus a. With rows at one M the rate is FLOPs over compute time.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "core/util/json.h"
#include "core/util/result.h"

namespace lins {

struct EngineCalibration {
  double flops_per_s = 0;   // sustained forward + backward rate per rank (Megatron FLOPs, recomputation counted)
  double fixed_step_s = 0;  // per step, besides compute, exposed communication and the optimizer
  int rows = 0;
  int micro_batch_counts = 0;  // distinct M among the rows (2+ fits the intercept)
};

struct Calibration {
  std::string source;                               // the files read
  EngineCalibration all;                            // every row together: for engines without rows of their own
  std::map<std::string, EngineCalibration> engine;  // by engine name (lins, ddp, zero, mics, zeropp, fsdp)
  const EngineCalibration& of(const std::string& engine_name) const;
  Json to_json() const;
};

// Reads the measured rows of one or more `lins step` CSVs (comma-separated paths) of preset models.
Result<Calibration> calibrate_from_step_csv(std::string_view paths);
// The same from CSV text (`where` names it in errors).
Result<Calibration> calibrate_from_step_text(std::string_view text, const std::string& where);

}  // namespace lins
