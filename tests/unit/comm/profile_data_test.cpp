// The committed bandwidth profiles load with the planner's reader and cover every mesh of their topology with all
// five collectives.
#include <gtest/gtest.h>

#include <set>

#include "comm/mesh_comms.h"
#include "core/cost/cost_model.h"

namespace lins {
namespace {

TEST(ProfileData, CpuProfileLoadsAndCoversEveryMesh) {
  auto prof = BandwidthProfile::load(std::string(LINS_SOURCE_DIR) + "/data/profiles/cpu-2core-4ranks.csv");
  ASSERT_TRUE(prof) << prof.error();
  for (const Mesh& m : profile_meshes(Topology{2, 2}))
    for (int k = 0; k < kCollKindCount; ++k) {
      const auto kind = static_cast<CollKind>(k);
      EXPECT_TRUE(prof->has(kind, m)) << coll_kind_name(kind) << " " << m.to_string();
      auto bw = prof->algbw_gbps(kind, m, 1 << 20);
      ASSERT_TRUE(bw.has_value());
      EXPECT_GT(*bw, 0.0);
    }
  EXPECT_EQ(prof->point_count(), std::size_t(kCollKindCount) * 3u * 13u);  // ops x meshes x sizes 4 KiB..16 MiB
}

}  // namespace
}  // namespace lins
