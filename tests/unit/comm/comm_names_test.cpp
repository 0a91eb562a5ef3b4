// The name tables of the communication enums (backend, MPI progress mode) round-trip like the core ones.
#include <gtest/gtest.h>

#include "../core/names_check.h"
#include "comm/gpu_plugin.h"
#include "comm/mesh_comms.h"
#include "comm/mpi_communicator.h"

namespace lins {
namespace {

TEST(CommNames, EveryTableRoundTrips) {
  expect_table_round_trips(kBackendNames, backend_name);
  expect_table_round_trips(kMpiProgressNames, mpi_progress_name);
  expect_table_round_trips(kAttentionKernelNames, [](AttentionKernel k) { return kAttentionKernelNames.name(k); });
}

TEST(CommNames, AnUnknownBackendListsTheValidOnes) {
  auto bad = parse_backend("carrier-pigeon");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().rfind("unknown backend 'carrier-pigeon'; valid: mpi, nccl", 0), 0u) << bad.error();
}

}  // namespace
}  // namespace lins
