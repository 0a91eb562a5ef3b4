// libFuzzer target: the plan parser and validator on several topologies (including the paper's 8 x 128). Any input
// must give a Plan that validates or an error message, never a crash, hang or sanitizer report.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/model/plan.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 256) return 0;
  const std::string text(reinterpret_cast<const char*>(data), size);
  const lins::Topology topos[] = {{1, 1}, {2, 2}, {8, 128}, {6, 3}};
  for (const auto& topo : topos) {
    auto plan = lins::parse_plan(text, topo);
    if (plan) {
      if (!lins::validate_plan(*plan, topo)) __builtin_trap();  // parse_plan must only return legal plans
      auto again = lins::parse_plan(plan->to_string(), topo);   // and its text must parse back
      if (plan->engine == lins::Engine::lins && (!again || !again->same_factors(*plan))) __builtin_trap();
    } else if (plan.error().empty()) {
      __builtin_trap();  // every rejection says why
    }
  }
  return 0;
}
