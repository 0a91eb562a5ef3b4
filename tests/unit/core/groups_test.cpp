// group_mesh's closed form against the members themselves: for every group shape of many small meshes and every rank,
// the nodes the members span and the members on the rank's own node, counted from group_ranks.
#include "core/model/groups.h"

#include <gtest/gtest.h>

#include <set>

namespace lins {
namespace {

Mesh mesh_by_walking(const GroupSpec& g, const Topology& topo, int rank) {
  std::set<int> nodes;
  int same = 0;
  for (int r : group_ranks(g, rank)) {
    nodes.insert(topo.node_of(r));
    same += topo.node_of(r) == topo.node_of(rank);
  }
  return Mesh{same, int(nodes.size())};
}

TEST(GroupMesh, ClosedFormEqualsTheMembersOnEveryShape) {
  int checked = 0;
  for (int R = 1; R <= 6; ++R)
    for (int N = 1; N <= 6; ++N) {
      const Topology topo{R, N};
      const int world = topo.world();
      for (int block = 1; block <= world; ++block) {
        if (world % block) continue;
        for (int period = 1; period <= block; ++period) {
          if (block % period) continue;
          const GroupSpec g{block, period};
          for (int rank = 0; rank < world; ++rank, ++checked)
            ASSERT_EQ(group_mesh(g, topo, rank), mesh_by_walking(g, topo, rank))
                << "R " << R << " N " << N << " block " << block << " period " << period << " rank " << rank;
        }
      }
    }
  EXPECT_GT(checked, 5000);
}

TEST(GroupMesh, AtTwoToTheThirtyRanksWithoutOverflow) {
  const Topology topo{8, 1 << 27};  // 2^30 ranks
  const int world = topo.world();
  EXPECT_EQ(group_mesh(GroupSpec{world, 1}, topo, world - 1), (Mesh{8, 1 << 27}));
  EXPECT_EQ(group_mesh(GroupSpec{world, 8}, topo, world - 1), (Mesh{1, 1 << 27}));
  EXPECT_EQ(group_mesh(GroupSpec{world, 4}, topo, 5), (Mesh{2, 1 << 27}));
  EXPECT_EQ(group_mesh(GroupSpec{16, 1}, topo, world - 3), (Mesh{8, 2}));
}

}  // namespace
}  // namespace lins
