// The check lins step and lins comm make before their first large allocation: every rank says what it is about to
// take, the ranks sharing one host (or, on the GPU, one device) add it up, the first of them compares the sum with what
// that host or device can give now (core/host_memory.h, cudaMemGetInfo), and every rank learns the verdict.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/util/resource_check.h"
#include "core/util/result.h"

namespace lins {

// This rank's share of one thing about to run (a strategy, the buffers).
struct RankDemand {
  std::string what;
  double bytes = 0;
  std::string detail;  // its parts, said in the message when this rank is the largest of its node
};

struct MemoryCheckOptions {
  bool device = false;                // device memory (ranks grouped by the GPU they use) instead of the host's
  std::optional<double> limit_bytes;  // given budget per host or device instead of the measured one
  std::string limit_option;           // the option that gave it, for the message
  std::string override_hint;          // how to run anyway
  // Alternatives that fit a budget of `available_bytes` shared by `ranks` ranks (called on one rank per host or
  // device, only when something does not fit).
  std::function<std::vector<std::string>(double available_bytes, int ranks)> would_fit;
};

// Collective over MPI_COMM_WORLD. `mine` has the same demands in the same order on every rank. An error (the same on
// every rank) when any demand does not fit anywhere; a host or device whose budget cannot be read is not checked
// (rank 0 says so on stderr).
Status check_memory_on_every_node(const std::vector<RankDemand>& mine, const MemoryCheckOptions& options);

}  // namespace lins
