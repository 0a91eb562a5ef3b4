// The verdict lins step and lins comm reach before they allocate: does what the ranks of one node (or of one GPU) are
// about to take fit what it can give? Pure arithmetic and wording; the commands gather the figures over MPI.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/util/result.h"

namespace lins {

// What one node (or GPU) can give, and in words where that figure comes from.
struct NodeBudget {
  std::string where;  // "host node-3", "GPU 1 of host node-3"
  double available_bytes = 0;
  std::string source;  // "21.5 GiB (MemAvailable ...)", "given by --memory-limit"
};

// One thing the command is about to run there: the sum over the node's ranks, and the largest rank's share.
struct NodeDemand {
  std::string what;       // "strategy ddp", "the buffers of -e 1T"
  int ranks = 1;          // ranks on the node that take it
  double node_bytes = 0;  // summed over those ranks
  double rank_max_bytes = 0;
  std::string detail;  // how the largest rank's share splits ("states 1.2 GiB, activations ...")
};

// OK when every demand fits the budget. Otherwise one message: each demand that does not fit with its need and
// parts, what is available and where that figure comes from, `would_fit` (alternatives that do fit, already worded)
// and `override_hint` (how to run anyway).
Status check_node_memory(const NodeBudget& budget, const std::vector<NodeDemand>& demands,
                         const std::vector<std::string>& would_fit, const std::string& override_hint);

// Bytes one rank of lins comm allocates for messages up to `max_bytes`: a send and a receive buffer where the
// collectives run (host memory, or the device with NCCL), and a host staging copy for fills and checks.
struct CommBufferBytes {
  double host_bytes = 0;
  double device_bytes = 0;
};
CommBufferBytes comm_buffer_bytes(std::uint64_t max_bytes, bool on_device);

}  // namespace lins
