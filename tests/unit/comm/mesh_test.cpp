// Mesh shapes: which meshes a profile covers, the group spec of each (checked against group_mesh), mesh parsing,
// backend names, and provenance paths. No MPI needed.
#include <gtest/gtest.h>

#include <set>

#include "comm/mesh_comms.h"
#include "comm/provenance.h"

namespace lins {
namespace {

TEST(Mesh, ProfileMeshesCoverEveryDivisorPair) {
  const Topology t{4, 6};
  auto meshes = profile_meshes(t);
  std::set<std::string> names;
  for (const Mesh& m : meshes) names.insert(m.to_string());
  EXPECT_EQ(meshes.size(), 3u * 4u - 1u);  // intra in {1,2,4} x inter in {1,2,3,6}, minus 1x1
  for (const char* want : {"2x1", "4x1", "1x2", "4x6", "2x3", "1x6"}) EXPECT_TRUE(names.count(want)) << want;
  EXPECT_FALSE(names.count("1x1"));
  EXPECT_FALSE(names.count("3x1"));
  EXPECT_EQ(meshes.front(), (Mesh{2, 1}));  // intra-node meshes first
  EXPECT_TRUE(profile_meshes(Topology{1, 1}).empty());
}

TEST(Mesh, GroupSpecOfEveryProfileMeshHasThatShapeOnEveryRank) {
  for (const Topology t : {Topology{4, 6}, Topology{2, 2}, Topology{8, 1}, Topology{1, 5}, Topology{3, 2}}) {
    for (const Mesh& m : profile_meshes(t)) {
      auto g = mesh_group_spec(m, t);
      ASSERT_TRUE(g) << g.error();
      EXPECT_EQ(t.world() % g->block, 0);
      std::set<int> seen;
      for (int r = 0; r < t.world(); ++r) {
        EXPECT_EQ(group_mesh(*g, t, r), m) << t.to_string() << " mesh " << m.to_string() << " rank " << r;
        auto members = group_ranks(*g, r);
        EXPECT_EQ(members[group_index(*g, r)], r);
        seen.insert(members.front());
      }
      EXPECT_EQ(int(seen.size()), t.world() / m.size()) << "groups must partition the world";
    }
  }
}

TEST(Mesh, IntraNodeMeshesUseConsecutiveRanks) {
  const Topology t{4, 2};
  EXPECT_EQ(*mesh_group_spec(Mesh{2, 1}, t), (GroupSpec{2, 1}));
  EXPECT_EQ(*mesh_group_spec(Mesh{4, 2}, t), (GroupSpec{8, 1}));
  EXPECT_EQ(*mesh_group_spec(Mesh{1, 2}, t), (GroupSpec{8, 4}));  // same local index on each node
}

TEST(Mesh, BadMeshesAreErrorsThatSayWhatFits) {
  const Topology t{4, 2};
  auto e = mesh_group_spec(Mesh{3, 1}, t);
  ASSERT_FALSE(e);
  EXPECT_NE(e.error().find("dividing 4"), std::string::npos) << e.error();
  EXPECT_FALSE(mesh_group_spec(Mesh{2, 3}, t));
  EXPECT_EQ(*parse_mesh("2x3"), (Mesh{2, 3}));
  EXPECT_EQ(*parse_mesh("4"), (Mesh{4, 1}));
  for (const char* bad : {"", "x2", "2x", "0x1", "axb", "2x-1"}) EXPECT_FALSE(parse_mesh(bad)) << bad;
}

TEST(Backend, NamesParseAndUnknownOnesListTheValidOnes) {
  EXPECT_EQ(*parse_backend("mpi"), Backend::mpi);
  auto bad = parse_backend("gloo");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("mpi"), std::string::npos);
  // nccl is accepted exactly where the GPU plugin loads; a unit test links no plugin and finds none beside it.
  EXPECT_EQ(parse_backend("nccl").ok(), nccl_available());
  auto nccl = parse_backend("nccl");
  if (!nccl) {
    EXPECT_NE(nccl.error().find("GPU plugin"), std::string::npos) << nccl.error();
    EXPECT_NE(nccl.error().find("--backend mpi"), std::string::npos) << nccl.error();
  }
}

TEST(Provenance, PathSitsBesideTheCsv) {
  EXPECT_EQ(provenance_path_for("out/ag.csv"), "out/ag.provenance.json");
  EXPECT_EQ(provenance_path_for("run.d/result"), "run.d/result.provenance.json");
  EXPECT_EQ(provenance_path_for("x"), "x.provenance.json");
}

}  // namespace
}  // namespace lins
