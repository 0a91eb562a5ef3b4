// The MPI backend under mpiexec: every op x dtype x group shape against a serial reference, on every
// GPUs-per-node that divides the world; per-role communicators of several plans; byte counters against the
// schedule; asynchronous completion and overlap; bf16 round-to-nearest-even; errors agreed by every rank.
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <thread>

#include "comm/mesh_comms.h"
#include "comm/mpi_communicator.h"
#include "core/model/model_spec.h"
#include "core/schedule/schedule.h"
#include "core/util/bf16.h"
#include "mpi_world.h"
#include "reference.h"

namespace lins {
namespace {

using test::world_rank;
using test::world_size;
std::vector<int> divisors(int n) {
  std::vector<int> d;
  for (int k = 1; k <= n; ++k)
    if (n % k == 0) d.push_back(k);
  return d;
}
std::unique_ptr<Communicator> world_comm(MpiProgress progress = MpiProgress::thread) {
  auto c = MpiCommunicator::create(MPI_COMM_WORLD, "world", Axis::inter, {progress, nullptr});
  EXPECT_TRUE(c) << c.error();
  return std::move(*c);
}
// True on every rank when it is true on all of them (so a failure on one rank cannot leave others waiting).
bool all_ranks(bool ok) {
  int v = ok, all = 0;
  MPI_Allreduce(&v, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
  return all != 0;
}

void expect_values(Communicator& c, const std::vector<int>& members, int64_t n, const std::string& where) {
  for (DType dt : {DType::fp32, DType::bf16}) {
    auto mm = test::check_collectives<test::HostMemory>(c, members, world_rank(), dt, n);
    EXPECT_EQ(mm.count, 0) << where << " " << dtype_name(dt) << " n=" << n << ": " << mm.first;
  }
}

TEST(MpiComm, EveryMeshShapeGivesTheSerialReference) {
  const int W = world_size(), rank = world_rank();
  auto world = world_comm();
  for (int gpn : divisors(W)) {
    const Topology topo = *topology_for_world(W, gpn);
    auto meshes = profile_meshes(topo);
    meshes.insert(meshes.begin(), Mesh{1, 1});
    for (const Mesh& m : meshes) {
      auto spec = mesh_group_spec(m, topo);
      ASSERT_TRUE(spec) << spec.error();
      auto c = split_group(*world, *spec, topo, "mesh " + m.to_string());
      ASSERT_TRUE(c) << c.error();
      const auto members = group_ranks(*spec, rank);
      const std::string where = "topology " + topo.to_string() + " mesh " + m.to_string();
      EXPECT_EQ((*c)->size(), m.size()) << where;
      EXPECT_EQ((*c)->rank(), group_index(*spec, rank)) << where;
      EXPECT_EQ(group_mesh(*spec, topo, rank), m) << where;
      EXPECT_EQ((*c)->axis(), m.inter > 1 ? Axis::inter : Axis::intra) << where;
      expect_values(**c, members, 7, where);
    }
  }
  // One larger message on the whole world (several MPI algorithm switch points lie below 64 KiB).
  std::vector<int> all(W);
  for (int r = 0; r < W; ++r) all[r] = r;
  expect_values(*world, all, 20000, "world, large");
  expect_values(*world, all, 0, "world, empty");
}

std::vector<std::string> plans_for(const Topology& topo) {
  std::vector<std::string> out = {"ddp", "zero1", "zero2", "zero3", "mics", "zeropp"};
  auto legal = enumerate_legal_plans(topo);
  for (size_t i = 0; i < legal.size(); i += std::max<size_t>(1, legal.size() / 3)) out.push_back(legal[i].to_string());
  return out;
}

TEST(MpiComm, EveryRoleOfSeveralPlansGivesTheSerialReference) {
  const int W = world_size(), rank = world_rank();
  for (int gpn : divisors(W)) {
    const Topology topo = *topology_for_world(W, gpn);
    for (const auto& text : plans_for(topo)) {
      auto plan = parse_plan(text, topo);
      ASSERT_TRUE(plan) << plan.error();
      auto mesh = make_mesh_comms(Backend::mpi, MPI_COMM_WORLD, *plan, topo);
      ASSERT_TRUE(mesh) << mesh.error();
      for (int r = 0; r < kGroupRoleCount; ++r) {
        const auto role = static_cast<GroupRole>(r);
        const GroupSpec g = group_spec(role, *plan, topo);
        Communicator& c = (*mesh)->get(role);
        const std::string where = "plan " + text + " on " + topo.to_string() + " role " + group_role_name(role);
        EXPECT_EQ(c.size(), g.size()) << where;
        EXPECT_EQ(c.rank(), group_index(g, rank)) << where;
        EXPECT_EQ(c.name(), group_role_name(role)) << where;
        EXPECT_EQ((*mesh)->mesh(role), group_mesh(g, topo, rank)) << where;
        if (g.size() > 1) expect_values(c, group_ranks(g, rank), 3, where);
      }
    }
  }
}

// Runs every op of one rank's schedule through the plan's communicators and compares the counters with the
// schedule's message bytes per kind and axis.
TEST(MpiComm, ByteCountersEqualTheSchedule) {
  const int W = world_size(), rank = world_rank();
  auto model = *make_model_preset("tiny");
  for (int gpn : divisors(W)) {
    const Topology topo = *topology_for_world(W, gpn);
    for (const auto& text : plans_for(topo)) {
      auto plan = parse_plan(text, topo);
      ASSERT_TRUE(plan) << plan.error();
      ScheduleOptions o;
      o.micro_batches = 2;
      o.expand_micro_batches = true;
      o.bucket_bytes = 4096;
      o.dtype = DType::fp32;
      o.rank = rank;
      auto sched = build_schedule(model, *plan, topo, o);
      ASSERT_TRUE(sched) << sched.error();
      auto mesh = make_mesh_comms(Backend::mpi, MPI_COMM_WORLD, *plan, topo);
      ASSERT_TRUE(mesh) << mesh.error();
      std::vector<Request> pending;
      std::vector<std::vector<float>> bufs;
      for (const CommOp& op : sched->ops) {
        Communicator& c = (*mesh)->get(op.role);
        ASSERT_EQ(c.size(), op.group.size());
        const bool per_rank = collective(op.kind).count_per_rank;
        ASSERT_EQ(op.elems % (per_rank ? c.size() : 1), 0);
        for (int rep = 0; rep < op.repeat; ++rep) {
          bufs.emplace_back(op.elems, 1.0f);
          bufs.emplace_back(op.elems, 0.0f);
          float* a = bufs[bufs.size() - 2].data();
          float* b = bufs.back().data();
          pending.push_back(c.run(op.kind, a, b, per_rank ? op.elems / c.size() : op.elems, op.dtype, op.root));
        }
      }
      for (auto& r : pending) r.wait();
      const std::string where = "plan " + text + " on " + topo.to_string();
      for (int k = 0; k < kCollKindCount; ++k) {
        const auto kind = static_cast<CollKind>(k);
        for (Axis axis : {Axis::intra, Axis::inter}) {
          double measured = 0;
          int64_t calls = 0, scheduled_calls = 0;
          for (int r = 0; r < kGroupRoleCount; ++r) {
            Communicator& c = (*mesh)->get(static_cast<GroupRole>(r));
            if (c.axis() != axis) continue;
            measured += c.counters().message_bytes[k];
            calls += c.counters().calls[k];
          }
          for (const CommOp& op : sched->ops)
            if (op.kind == kind && op.axis() == axis) scheduled_calls += op.repeat;
          EXPECT_DOUBLE_EQ(measured, sched->message_bytes(kind, axis))
              << where << " " << coll_kind_name(kind) << " " << axis_name(axis);
          EXPECT_EQ(calls, scheduled_calls) << where << " " << coll_kind_name(kind) << " " << axis_name(axis);
        }
      }
      EXPECT_DOUBLE_EQ((*mesh)->world().counters().total_message_bytes(), 0.0);
      // Seconds are recorded for every kind that ran.
      for (int r = 0; r < kGroupRoleCount; ++r) {
        const auto& cnt = (*mesh)->get(static_cast<GroupRole>(r)).counters();
        for (int k = 0; k < kCollKindCount; ++k)
          if (cnt.calls[k] > 0) {
            EXPECT_GT(cnt.seconds[k], 0.0) << where;
          }
      }
      (*mesh)->reset_counters();
      EXPECT_EQ((*mesh)->get(GroupRole::p_shard).counters().total_message_bytes(), 0.0);
    }
  }
}

TEST(MpiComm, AsynchronousRequestsCompleteInAnyWaitOrder) {
  const int W = world_size(), rank = world_rank();
  for (MpiProgress progress : {MpiProgress::thread, MpiProgress::nonblocking}) {
    auto world = world_comm(progress);
    // A second communicator: requests on two groups interleave.
    const Topology topo = *topology_for_world(W, W % 2 == 0 ? 2 : 1);
    const GroupSpec intra{topo.gpus_per_node, 1};
    auto node = split_group(*world, intra, topo, "intra");
    ASSERT_TRUE(node) << node.error();
    constexpr int kOps = 6;
    constexpr int64_t n = 513;
    std::vector<test::HostBuf> send, recv;
    std::vector<Request> reqs;
    for (int k = 0; k < kOps; ++k) {
      send.emplace_back(DType::fp32, n);
      recv.emplace_back(DType::fp32, n);
      send.back().fill(rank, k * n);
    }
    for (int k = 0; k < kOps; ++k) {
      Communicator& c = k % 2 ? **node : *world;
      reqs.push_back(c.all_reduce(send[k].data(), recv[k].data(), n, DType::fp32));
      EXPECT_TRUE(reqs.back().pending());
    }
    for (int k = kOps - 1; k >= 0; --k) {
      reqs[k].wait();
      EXPECT_FALSE(reqs[k].pending());
    }
    int64_t bad = 0;
    for (int k = 0; k < kOps; ++k) {
      const auto members = k % 2 ? group_ranks(intra, rank) : group_ranks(GroupSpec{W, 1}, rank);
      for (int64_t i = 0; i < n; ++i)
        if (recv[k].get(i) != test::expected_sum(members, k * n + i, DType::fp32).value) ++bad;
    }
    EXPECT_EQ(bad, 0) << "progress " << mpi_progress_name(progress);
    EXPECT_EQ(world->counters().calls[int(CollKind::all_reduce)], kOps / 2);
    world->barrier();
    Request none;
    EXPECT_FALSE(none.pending());
    none.wait();
  }
}

// With the progress thread a collective completes while the caller computes without entering MPI.
TEST(MpiComm, ProgressThreadCompletesWhileTheCallerComputes) {
  auto world = world_comm(MpiProgress::thread);
  auto* mpi = dynamic_cast<MpiCommunicator*>(world.get());
  ASSERT_NE(mpi, nullptr);
  if (mpi->progress() != MpiProgress::thread) GTEST_SKIP() << "MPI_THREAD_MULTIPLE not provided";
  std::vector<float> a(256, 1.0f), b(256, 0.0f);
  world->barrier();
  const auto sleep = std::chrono::milliseconds(600);
  Request r = world->all_reduce(a.data(), b.data(), 256, DType::fp32);
  std::this_thread::sleep_for(sleep);  // stands for compute: no MPI call on this thread
  r.wait();
  const double issue_to_done = world->counters().seconds[int(CollKind::all_reduce)];
  EXPECT_LT(issue_to_done, 0.5 * 0.6) << "the collective waited for the caller instead of progressing";
  EXPECT_EQ(b[0], float(world_size()));
}

// Two-rank sums are rounded once: they must equal round-to-nearest-even of the exact sum, ties included.
TEST(MpiComm, Bf16SumsRoundToNearestEven) {
  const int W = world_size(), rank = world_rank();
  if (W < 2) GTEST_SKIP() << "needs two ranks";
  auto world = world_comm();
  auto pair = world->split(rank < 2 ? 0 : 1, rank, "pair", Axis::intra);
  ASSERT_TRUE(pair) << pair.error();
  // (a, b, a + b rounded): ties go to the even neighbour, just above a tie rounds up.
  struct Case {
    float a, b, sum;
  };
  const float t = 1.0f / 256;  // half a bf16 ulp at 1.0
  const std::vector<Case> cases = {
      {1.0f, t, 1.0f},                   // tie between 1 and 1+2^-7: even is 1
      {1.0f + 2 * t, t, 1.0f + 4 * t},   // tie between 1+2^-7 and 1+2^-6: even is 1+2^-6
      {1.0f, t + t / 64, 1.0f + 2 * t},  // just above the tie (b is bf16: 2^-8 + 2^-14)
      {-1.0f, -t, -1.0f},                // negative tie
      {256.0f, 1.0f, 256.0f},            // 257 is a tie between 256 and 258
      {256.0f, 3.0f, 260.0f},            // 259: tie between 258 and 260 -> 260 (even)
      {std::ldexp(1.0f, 127), std::ldexp(1.0f, 127), std::numeric_limits<float>::infinity()},  // overflow
      {1.5f, -1.5f, 0.0f},
  };
  std::vector<uint16_t> mine, sum(cases.size());
  for (const auto& c : cases) mine.push_back(float_to_bf16(rank % 2 ? c.b : c.a));
  (*pair)->all_reduce(mine.data(), sum.data(), int64_t(mine.size()), DType::bf16).wait();
  if ((*pair)->size() == 2)
    for (size_t i = 0; i < cases.size(); ++i) {
      EXPECT_EQ(bf16_to_float(float_to_bf16(cases[i].a)), cases[i].a) << "case " << i << " a is not bf16";
      EXPECT_EQ(bf16_to_float(float_to_bf16(cases[i].b)), cases[i].b) << "case " << i << " b is not bf16";
      EXPECT_EQ(bf16_to_float(sum[i]), cases[i].sum) << "case " << i;
    }
}

TEST(MpiComm, WrongTopologyIsTheSameErrorOnEveryRank) {
  const int W = world_size();
  auto plan = parse_plan("ddp", Topology{1, W + 1});
  ASSERT_TRUE(plan);
  auto mesh = make_mesh_comms(Backend::mpi, MPI_COMM_WORLD, *plan, Topology{1, W + 1});
  EXPECT_FALSE(mesh);
  EXPECT_TRUE(all_ranks(!mesh));
  if (!mesh) {
    EXPECT_NE(mesh.error().find("ranks"), std::string::npos) << mesh.error();
  }
  auto bad = make_communicator("gloo", MPI_COMM_WORLD);
  EXPECT_FALSE(bad);
  if (!bad) {
    EXPECT_NE(bad.error().find("mpi"), std::string::npos) << bad.error();
  }
}

TEST(MpiComm, DescribeGroupsNamesEveryRoleWithItsMesh) {
  const int W = world_size();
  if (W % 2) GTEST_SKIP() << "needs an even world";
  const Topology topo = *topology_for_world(W, 2);
  const std::string text = describe_groups(*parse_plan("zero3", topo), topo, 0);
  for (int r = 0; r < kGroupRoleCount; ++r)
    EXPECT_NE(text.find(group_role_name(static_cast<GroupRole>(r))), std::string::npos) << text;
  EXPECT_NE(text.find("mesh 2x" + std::to_string(W / 2)), std::string::npos) << text;
}

}  // namespace
}  // namespace lins

namespace lins {
namespace {

// One rank per GPU (NCCL refuses two on one device): every rank of this test runs on one host, so with one device per
// host the check fails on every rank alike, naming the counts, unless each rank is its own node to NCCL (its own
// NCCL_HOSTID). Collective: a rank that disagreed would hang the test.
TEST(NodePlacement, OneRankPerGpuIsCheckedOnEveryRankAlike) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  unsetenv("NCCL_HOSTID");
  const NodePlace shared = node_place(MPI_COMM_WORLD);
  EXPECT_EQ(shared.ranks, size);
  EXPECT_EQ(shared.local_rank, rank);
  EXPECT_TRUE(check_one_rank_per_gpu(MPI_COMM_WORLD, shared, size).ok());
  const Status one = check_one_rank_per_gpu(MPI_COMM_WORLD, shared, 1);
  EXPECT_EQ(one.ok(), size == 1);
  if (size > 1) {
    EXPECT_NE(one.error().find("a host runs " + std::to_string(size) + " ranks but has 1 CUDA device"),
              std::string::npos)
        << one.error();
    EXPECT_NE(one.error().find("ppr:1:node"), std::string::npos) << one.error();
  }
  // Each rank its own NCCL host: one device each is enough, and every rank is local rank 0 of its node.
  const std::string id = "lins-test-host-" + std::to_string(rank);
  setenv("NCCL_HOSTID", id.c_str(), 1);
  const NodePlace own = node_place(MPI_COMM_WORLD);
  EXPECT_EQ(own.ranks, 1);
  EXPECT_EQ(own.local_rank, 0);
  EXPECT_TRUE(check_one_rank_per_gpu(MPI_COMM_WORLD, own, 1).ok());
  unsetenv("NCCL_HOSTID");
}

}  // namespace
}  // namespace lins
