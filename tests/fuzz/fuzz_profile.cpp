// libFuzzer target: the bandwidth-profile reader (`lins plan/step/simulate --profile`). Any text must load into a
// profile whose every bandwidth is positive and finite, or be rejected with a message naming the line.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/cost/cost_model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 16384) return 0;
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto profile = lins::BandwidthProfile::parse(text, "fuzz.csv");
  if (!profile) {
    if (profile.error().find("fuzz.csv") == std::string::npos) __builtin_trap();  // errors name the file
    return 0;
  }
  for (const auto& [op, mesh] : profile->series())
    for (double v : {1.0, 4096.0, 1e6, 1e9, 1e12}) {
      auto w = profile->algbw_gbps(op, mesh, v);
      if (!w || !(*w > 0) || !std::isfinite(*w)) __builtin_trap();
      auto t = profile->time_s(op, mesh, v);
      if (!t || !(*t >= 0) || !std::isfinite(*t)) __builtin_trap();
    }
  return 0;
}
