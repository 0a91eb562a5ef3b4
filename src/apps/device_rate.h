// The emulated device's rates that `lins step` and `lins comm --contention` pace the CPU backend's work to:
// --device-rate TFLOPS|off and --device-gbps GBPS|off, each defaulting to the environment's LINS_DEVICE_TFLOPS and
// LINS_DEVICE_GBPS (scripts/cluster.sh run exports them). One parser, so both commands read them the same way.
#pragma once

#include <string>

#include "core/util/cli.h"
#include "core/util/result.h"

namespace lins {

struct DeviceRates {
  double tflops = 0, gbps = 0;  // per rank; 0: off
  std::string source;           // where they came from (options or environment), for the output's provenance
  bool paced() const { return tflops > 0 || gbps > 0; }
};

// Reads --device-rate and --device-gbps (or their defaults from the environment). A memory rate needs a compute
// rate; `--device-rate off` turns the environment's memory rate off too.
Result<DeviceRates> read_device_rates(const ParsedArgs& a);

}  // namespace lins
