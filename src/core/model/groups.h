// Rank groups of a plan, built from consecutive ranks as the paper does (docs/method.md, "The sharding space"): a
// group is the set of ranks in the same block of `block` consecutive ranks whose index modulo `period` matches. Every
// collective of a Schedule names its group by role; the communicator layer turns roles into communicators.
#pragma once

#include <string>
#include <vector>

#include "core/model/plan.h"
#include "core/model/topology.h"
#include "core/util/names.h"

namespace lins {

struct GroupSpec {
  int block = 1;   // consecutive ranks per block
  int period = 1;  // members are `period` apart inside the block
  int size() const { return block / period; }
  bool operator==(const GroupSpec&) const = default;
};

// Where a group lies on the mesh: GPUs of one node in it x nodes it spans (the paper's p0 x p1).
struct Mesh {
  int intra = 1;
  int inter = 1;
  int size() const { return intra * inter; }
  std::string to_string() const { return std::to_string(intra) + "x" + std::to_string(inter); }
  bool operator==(const Mesh&) const = default;
};

enum class GroupRole {
  world,       // every rank
  p_shard,     // block of s_p ranks that together hold one copy of P (gathers and reduce-scatters)
  os_shard,    // block of s_os ranks sharing one copy of the optimizer states (ZeRO-1/2 intra-tensor)
  p_replica,   // ranks holding the same P shard across the whole world (OS sync AllReduce, MiCS across groups)
  g_replica,   // ranks holding the same P shard inside one G block (T_g AllReduce)
  os_replica,  // ranks holding the same P shard inside one OS block (parameter Broadcast)
  hpz,         // ZeRO++ secondary partition inside the node
  // ZeRO++ qgZ's two all-to-alls: the ranks of the P shard group on this node, and the ranks of the P shard group
  // with this rank's index on their node (one per node).
  p_shard_node,
  p_shard_peers,
};
constexpr int kGroupRoleCount = 9;
inline constexpr NameTable<GroupRole, kGroupRoleCount> kGroupRoleNames{
    "group role",
    {{
        {GroupRole::world, "world", "", "every rank"},
        {GroupRole::p_shard, "p_shard", "", "the ranks that together hold one copy of P"},
        {GroupRole::os_shard, "os_shard", "", "the ranks sharing one copy of the optimizer states"},
        {GroupRole::p_replica, "p_replica", "", "the ranks holding the same P shard across the world"},
        {GroupRole::g_replica, "g_replica", "", "the ranks holding the same P shard inside one G block"},
        {GroupRole::os_replica, "os_replica", "", "the ranks holding the same P shard inside one OS block"},
        {GroupRole::hpz, "hpz", "", "ZeRO++'s secondary partition inside the node"},
        {GroupRole::p_shard_node, "p_shard_node", "", "the P shard group's ranks on this node (ZeRO++ qgZ)"},
        {GroupRole::p_shard_peers, "p_shard_peers", "",
         "the P shard group's ranks with this rank's place on their node (ZeRO++ qgZ)"},
    }}};
static_assert(kGroupRoleNames.complete(GroupRole::p_shard_peers));

const char* group_role_name(GroupRole role);
GroupSpec group_spec(GroupRole role, const Plan& plan, const Topology& topo);
// Ranks of `rank`'s group, ascending; `rank`'s index in it is group_index().
std::vector<int> group_ranks(const GroupSpec& g, int rank);
int group_index(const GroupSpec& g, int rank);
// Mesh shape of `rank`'s group on `topo` (the same for every group of a spec when the plan is legal).
Mesh group_mesh(const GroupSpec& g, const Topology& topo, int rank);

}  // namespace lins
