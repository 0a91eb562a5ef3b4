// The paper's two-level device mesh (docs/method.md, "The sharding space"): R GPUs per node, N nodes, ranks placed
// node first (rank r sits on node r / R at local index r % R). Emulated nodes on one machine use the same rule.
#pragma once

#include <string>

#include "core/util/result.h"

namespace lins {

struct Topology {
  int gpus_per_node = 1;  // R = s0_dp
  int nodes = 1;          // N = s1_dp

  int world() const { return gpus_per_node * nodes; }
  int node_of(int rank) const { return rank / gpus_per_node; }
  int local_of(int rank) const { return rank % gpus_per_node; }
  std::string to_string() const;  // "2x4" = 2 GPUs per node x 4 nodes
  bool operator==(const Topology&) const = default;
};

// Validates both counts (positive, product fits an int).
Result<Topology> make_topology(long long gpus_per_node, long long nodes);
// The topology of `world` ranks with `gpus_per_node` per node; an error when world is not a multiple of it.
Result<Topology> topology_for_world(int world, int gpus_per_node);

}  // namespace lins
