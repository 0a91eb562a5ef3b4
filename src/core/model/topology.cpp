// Topology construction and checks; see topology.h.
#include "core/model/topology.h"

#include <limits>

namespace lins {

std::string Topology::to_string() const { return std::to_string(gpus_per_node) + "x" + std::to_string(nodes); }

Result<Topology> make_topology(long long gpus_per_node, long long nodes) {
  if (gpus_per_node < 1) return make_error("--gpus-per-node must be at least 1, got " + std::to_string(gpus_per_node));
  if (nodes < 1) return make_error("--nodes must be at least 1, got " + std::to_string(nodes));
  if (gpus_per_node > std::numeric_limits<int>::max() / nodes)
    return make_error("topology " + std::to_string(gpus_per_node) + " GPUs per node x " + std::to_string(nodes) +
                      " nodes has too many ranks (at most 2147483647)");
  return Topology{static_cast<int>(gpus_per_node), static_cast<int>(nodes)};
}

Result<Topology> topology_for_world(int world, int gpus_per_node) {
  if (gpus_per_node < 1) return make_error("--gpus-per-node must be at least 1, got " + std::to_string(gpus_per_node));
  if (world < 1) return make_error("world size must be at least 1, got " + std::to_string(world));
  if (world % gpus_per_node != 0)
    return make_error("world size " + std::to_string(world) + " is not a multiple of --gpus-per-node " +
                      std::to_string(gpus_per_node) + "; launch a multiple of it (for example " +
                      std::to_string(gpus_per_node * ((world + gpus_per_node - 1) / gpus_per_node)) +
                      " ranks) or set --gpus-per-node to a divisor of " + std::to_string(world));
  return Topology{gpus_per_node, world / gpus_per_node};
}

}  // namespace lins
