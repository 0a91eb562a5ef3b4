// Group construction from consecutive ranks; see groups.h.
#include "core/groups.h"

namespace lins {

const char* group_role_name(GroupRole role) {
  switch (role) {
    case GroupRole::world:
      return "world";
    case GroupRole::p_shard:
      return "p_shard";
    case GroupRole::os_shard:
      return "os_shard";
    case GroupRole::p_replica:
      return "p_replica";
    case GroupRole::g_replica:
      return "g_replica";
    case GroupRole::os_replica:
      return "os_replica";
    case GroupRole::hpz:
      return "hpz";
  }
  return "?";
}

GroupSpec group_spec(GroupRole role, const Plan& plan, const Topology& topo) {
  const int world = topo.world(), sp = plan.p.total();
  switch (role) {
    case GroupRole::world:
      return {world, 1};
    case GroupRole::p_shard:
      return {sp, 1};
    case GroupRole::os_shard:
      return {plan.os.total(), 1};
    case GroupRole::p_replica:
      return {world, sp};
    case GroupRole::g_replica:
      return {plan.g.total(), sp};
    case GroupRole::os_replica:
      return {plan.os.total(), sp};
    case GroupRole::hpz:
      return {plan.hpz_intra > 0 ? plan.hpz_intra : 1, 1};
  }
  return {1, 1};
}

std::vector<int> group_ranks(const GroupSpec& g, int rank) {
  std::vector<int> out;
  const int base = (rank / g.block) * g.block + rank % g.period;
  for (int k = 0; k < g.size(); ++k) out.push_back(base + k * g.period);
  return out;
}

int group_index(const GroupSpec& g, int rank) { return (rank % g.block) / g.period; }

Mesh group_mesh(const GroupSpec& g, const Topology& topo, int rank) {
  // Members are ascending, so their node ids are too: count the distinct ones without building the member list
  // (the planner asks this for every group of every plan).
  const int base = (rank / g.block) * g.block + rank % g.period;
  const int my_node = topo.node_of(rank);
  int nodes = 0, same_node = 0, last_node = -1;
  for (int k = 0, n = g.size(); k < n; ++k) {
    const int node = topo.node_of(base + k * g.period);
    if (node != last_node) ++nodes, last_node = node;
    if (node == my_node) ++same_node;
  }
  return Mesh{same_node, nodes};
}

}  // namespace lins
