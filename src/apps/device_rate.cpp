// --device-rate and --device-gbps, shared by `lins step` and `lins comm --contention` (apps/device_rate.h): the
// option's value, else the environment's, else off.
#include "apps/device_rate.h"

#include <cmath>
#include <cstdlib>

namespace lins {
namespace {

// One device rate: the option's value, else the environment's (scripts/cluster.sh run exports it), else off (0).
// `what_valid` says what the option takes. *source names where it came from.
Result<double> parse_device_rate(const ParsedArgs& a, const char* option, const char* env, const char* what_valid,
                                 std::string* source) {
  std::string text = a.get(option), from = std::string("--") + option;
  if (text.empty()) {
    const char* e = std::getenv(env);
    if (!e || !*e) return 0.0;
    text = e;
    from = std::string(env) + " (the default of --" + option + ")";
  }
  if (text == "off") return 0.0;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || *end != '\0' || !std::isfinite(v) || v <= 0)
    return make_error(from + " '" + text + "' is not valid: give " + what_valid + ", a number above 0, or off");
  *source = from;
  return v;
}

}  // namespace

Result<DeviceRates> read_device_rates(const ParsedArgs& a) {
  std::string tflops_from, gbps_from;
  LINS_ASSIGN_OR_RETURN(auto tflops, parse_device_rate(a, "device-rate", "LINS_DEVICE_TFLOPS",
                                                       "TFLOP/s per rank (such as 0.01)", &tflops_from));
  LINS_ASSIGN_OR_RETURN(
      auto gbps, parse_device_rate(a, "device-gbps", "LINS_DEVICE_GBPS", "GB/s per rank (such as 5)", &gbps_from));
  if (tflops <= 0 && gbps > 0) {
    // The environment's memory rate goes with its compute rate: `--device-rate off` turns both off.
    if (!a.get("device-rate").empty() && a.get("device-gbps").empty())
      gbps = 0;
    else
      return make_error(gbps_from +
                        " paces the optimizer of an emulated device; give its compute rate too (--device-rate)");
  }
  DeviceRates r;
  r.tflops = tflops, r.gbps = gbps;
  if (r.paced()) r.source = tflops_from + (r.gbps > 0 ? ", " + gbps_from : std::string());
  return r;
}

}  // namespace lins
