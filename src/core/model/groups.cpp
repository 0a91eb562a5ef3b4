// Group construction from consecutive ranks; see groups.h.
#include "core/model/groups.h"

#include <algorithm>
#include <cstdint>

namespace lins {

const char* group_role_name(GroupRole role) { return kGroupRoleNames.name(role); }

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
    case GroupRole::p_shard_node:  // the P shard group fills the node first (validate_plan)
      return {std::min(sp, topo.gpus_per_node), 1};
    case GroupRole::p_shard_peers:
      return sp > topo.gpus_per_node ? GroupSpec{sp, topo.gpus_per_node} : GroupSpec{1, 1};
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
  // Members are base + k * period for k < n, ascending, so their nodes are too. Closed forms, so that the planner and
  // the simulator cost the same at any world size:
  // - nodes spanned: members `period` >= R apart each sit on a node of their own; closer members leave no node between
  //   the first and the last one unvisited (every run of R consecutive ranks holds one);
  // - members on rank's node: the k whose member falls in [node * R, node * R + R).
  const int64_t R = topo.gpus_per_node, p = g.period, n = g.size();
  const int64_t base = (int64_t(rank) / g.block) * g.block + rank % g.period;
  const int64_t last = base + (n - 1) * p;
  const int64_t nodes = p >= R ? n : last / R - base / R + 1;
  const int64_t lo = int64_t(topo.node_of(rank)) * R, hi = lo + R;  // rank's node holds ranks [lo, hi)
  auto first_at_or_above = [&](int64_t r) { return r <= base ? 0 : (r - base + p - 1) / p; };  // smallest such k
  const int64_t k0 = std::min(n, first_at_or_above(lo)), k1 = std::min(n, first_at_or_above(hi));
  return Mesh{int(k1 - k0), int(nodes)};
}

}  // namespace lins
