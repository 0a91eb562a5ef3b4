// The options that choose how communication is priced (--network, --network-model, --profile, --nccl-tests,
// --pricing) and how much memory a GPU run loses beyond its tensors (--reserve-*), shared by `lins plan`,
// `lins step` and `lins simulate` so they read the same flags the same way.
#pragma once

#include <string>
#include <vector>

#include "core/cli.h"
#include "core/cost_model.h"
#include "core/memory_model.h"
#include "core/result.h"

namespace lins {

// --network FILE|PRESET, --network-model auto|nccl|alpha-beta, --profile FILE, --nccl-tests LIST,
// --pricing paper|shared (|both when `allow_both`: rank by paper, show both).
std::vector<OptionSpec> cost_options(const std::string& default_network = "paper-a800",
                                     const std::string& default_pricing = "paper", bool allow_both = false);
// The cost model of those options: the network (a preset or a file) priced by the chosen model, measured bandwidth
// (--profile and --nccl-tests files, merged) first where it covers an (op, mesh). With `gpus_per_node` > 0 the
// network must have room for that many GPUs per node.
Result<CostModel> parse_cost_model(const ParsedArgs& args, int gpus_per_node = 0);
// "paper" (each group priced as if alone on the network, as the paper does) or "shared" (groups share a node's links).
Result<Pricing> parse_pricing(const std::string& text);

// --reserve-context, --reserve-cublas, --reserve-nccl (per communicator), --reserve-fragmentation.
std::vector<OptionSpec> memory_reserve_options();
Result<MemoryReserve> parse_memory_reserve(const ParsedArgs& args);

}  // namespace lins
