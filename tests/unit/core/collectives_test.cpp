// The collective table: every row is self-consistent (its message is its larger buffer, its result reads only
// elements that exist, its bus factor is nccl-tests'), and all_to_all, the row added through it, is priced by the
// alpha-beta model under either network model.
#include "core/model/collectives.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "core/cost/cost_model.h"
#include "core/cost/network_model.h"
#include "core/cost/network_spec.h"
#include "core/model/vocabulary.h"

namespace lins {
namespace {

TEST(Collectives, EveryRowIsItsKindAndNamesItsCalls) {
  for (CollKind k : kCollKindNames.values()) {
    const Collective& c = collective(k);
    EXPECT_EQ(c.kind, k);
    EXPECT_NE(std::string(c.short_name), "") << coll_kind_name(k);
    EXPECT_NE(std::string(c.mpi_call).find("MPI_"), std::string::npos) << coll_kind_name(k);
    EXPECT_NE(std::string(c.nccl_call).find("nccl"), std::string::npos) << coll_kind_name(k);
    EXPECT_NE(std::string(c.nccl_tests_program).find("_perf"), std::string::npos) << coll_kind_name(k);
    EXPECT_NE(nccl_tests_programs().find(c.nccl_tests_program), std::string::npos);
  }
}

TEST(Collectives, TheMessageIsTheLargerBufferAndTheResultReadsOnlyInputsThatExist) {
  for (CollKind k : kCollKindNames.values()) {
    const Collective& c = collective(k);
    for (int n : {1, 2, 3, 8}) {
      const int64_t count = 5;
      const int64_t in = c.send_elems(count, n), out = c.recv_elems(count, n);
      EXPECT_EQ(c.message_elems(count, n), std::max(in, out)) << coll_kind_name(k) << " n=" << n;
      EXPECT_DOUBLE_EQ(message_bytes(k, count, n, 2), 2.0 * std::max(in, out));
      // count_for_message inverts the message size.
      EXPECT_EQ(count_for_message(k, message_bytes(k, count, n, 4), n, 4), count) << coll_kind_name(k);
      for (int me = 0; me < n; ++me)
        for (int64_t i = 0; i < out; ++i) {
          const ResultSource s = c.result(i, count, n, me, n - 1);
          EXPECT_GE(s.index, 0);
          EXPECT_LT(s.index, in) << coll_kind_name(k) << " n=" << n << " me=" << me << " i=" << i;
          if (!s.sum) {
            EXPECT_GE(s.member, 0);
            EXPECT_LT(s.member, n);
          }
        }
    }
  }
}

TEST(Collectives, AllToAllSendsEachPeerItsOwnBlock) {
  const Collective& c = collective(CollKind::all_to_all);
  // Rank 2 of 4, 3 elements per peer: block j of its result is rank j's elements [6, 9).
  for (int j = 0; j < 4; ++j)
    for (int k = 0; k < 3; ++k) {
      const ResultSource s = c.result(j * 3 + k, 3, 4, 2, 0);
      EXPECT_FALSE(s.sum);
      EXPECT_EQ(s.member, j);
      EXPECT_EQ(s.index, 6 + k);
    }
}

TEST(Collectives, BusFactorsAreNcclTests) {
  EXPECT_DOUBLE_EQ(bus_factor(CollKind::all_gather, 8), 7.0 / 8);
  EXPECT_DOUBLE_EQ(bus_factor(CollKind::reduce_scatter, 8), 7.0 / 8);
  EXPECT_DOUBLE_EQ(bus_factor(CollKind::all_reduce, 8), 14.0 / 8);
  EXPECT_DOUBLE_EQ(bus_factor(CollKind::broadcast, 8), 1.0);
  EXPECT_DOUBLE_EQ(bus_factor(CollKind::all_to_all, 8), 7.0 / 8);
  for (CollKind k : kCollKindNames.values()) EXPECT_EQ(bus_factor(k, 1), 0.0);
}

AlphaBeta test_network() {
  AlphaBeta n;
  n.intra_gpu_gbps = 100;
  n.inter_node_gbps = 50;
  n.inter_gpu_gbps = 50;
  n.intra_latency_s = 5e-6;
  n.inter_latency_s = 20e-6;
  return n;
}

TEST(Collectives, AllToAllInsideANodeMovesWhatAnAllGatherMoves) {
  // Inside one node every GPU sends (p0 - 1)/p0 of the buffer either way, one latency per peer.
  const AlphaBeta net = test_network();
  const double v = 64e6;
  EXPECT_DOUBLE_EQ(alpha_beta_time_s(net, CollKind::all_to_all, v, Mesh{8, 1}, 1),
                   alpha_beta_time_s(net, CollKind::all_gather, v, Mesh{8, 1}, 1));
  // Across nodes it has no hierarchy to exploit: each of the node's 8 GPUs sends 3/4 of its buffer off the node,
  // 8x what the all-gather's node phase moves.
  const double a2a = alpha_beta_time_s(net, CollKind::all_to_all, v, Mesh{8, 4}, 1);
  const double bn = 50e9;
  EXPECT_NEAR(a2a, 3 * 20e-6 + v * 8 * 3 / 4 / bn, 1e-12);
  EXPECT_GT(a2a, alpha_beta_time_s(net, CollKind::all_gather, v, Mesh{8, 4}, 1));
}

TEST(Collectives, NcclsModelLeavesAllToAllToAlphaBeta) {
  auto spec = resolve_network_spec("paper-a800");
  ASSERT_TRUE(spec) << spec.error();
  auto nccl = make_network_model(NetworkModel::nccl, *spec);
  ASSERT_TRUE(nccl) << nccl.error();
  const double v = 16e6;
  for (Mesh m : {Mesh{8, 1}, Mesh{8, 4}, Mesh{1, 16}}) {
    EXPECT_DOUBLE_EQ((*nccl)->time_s(CollKind::all_to_all, v, m, 1),
                     alpha_beta_time_s(alpha_beta_of(*spec), CollKind::all_to_all, v, m, 1))
        << m.to_string();
    EXPECT_EQ((*nccl)->choice(CollKind::all_to_all, v, m, 1), "p2p (alpha-beta)");
    EXPECT_GT((*nccl)->time_s(CollKind::all_to_all, v, m, 1), 0.0);
  }
  // The collectives NCCL tunes keep NCCL's choice.
  EXPECT_NE((*nccl)->choice(CollKind::all_gather, v, Mesh{8, 4}, 1), "p2p (alpha-beta)");
}

}  // namespace
}  // namespace lins
