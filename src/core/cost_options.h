// The options that choose how communication is priced (--network, --profile, --pricing), shared by `lins plan`,
// `lins step` and `lins simulate` so they read the same flags the same way.
#pragma once

#include <string>
#include <vector>

#include "core/cli.h"
#include "core/cost_model.h"
#include "core/result.h"

namespace lins {

// --network PRESET, --profile FILE, --pricing paper|shared (|both when `allow_both`: rank by paper, show both).
std::vector<OptionSpec> cost_options(const std::string& default_network = "paper-a800",
                                     const std::string& default_pricing = "paper", bool allow_both = false);
// The cost model of --network (alpha-beta) and --profile (measured bandwidth, alpha-beta where it lacks a mesh).
Result<CostModel> parse_cost_model(const ParsedArgs& args);
// "paper" (each group alone, PAPER.md section 4) or "shared" (groups share a node's links).
Result<Pricing> parse_pricing(const std::string& text);

}  // namespace lins
