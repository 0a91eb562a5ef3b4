// The NCCL backend on device memory: every op x dtype against the serial reference (shared with the MPI tests),
// collectives ordered after work on a compute stream, fused groups, per-role communicators and byte counters.
// Exits 77 (ctest: skipped) when there is no CUDA device.
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

#include "comm/mesh_comms.h"
#include "gpu/nccl_communicator.h"
#include "mpi_world.h"
#include "reference.h"

namespace lins {
namespace {

struct DeviceMemory {
  void* alloc(size_t bytes) { return device_alloc(bytes); }
  void upload(void* dst, const void* src, size_t bytes) { copy_to_device(dst, src, bytes); }
  void download(void* dst, const void* src, size_t bytes) {
    cudaDeviceSynchronize();  // the collective ran on the communicator's stream
    copy_to_host(dst, src, bytes);
  }
  void release(void* p) { device_free(p); }
};

using test::world_rank;
using test::world_size;

std::unique_ptr<Communicator> nccl_world(cudaStream_t compute = nullptr) {
  CommOptions o;
  o.compute_stream = compute;
  auto c = make_communicator(Backend::nccl, MPI_COMM_WORLD, "world", Axis::intra, o);
  EXPECT_TRUE(c) << c.error();
  return c ? std::move(*c) : nullptr;
}

TEST(NcclComm, EveryOpAndDtypeGivesTheSerialReference) {
  auto world = nccl_world();
  ASSERT_NE(world, nullptr);
  std::vector<int> members(world_size());
  for (int r = 0; r < world_size(); ++r) members[r] = r;
  for (DType dt : {DType::fp32, DType::bf16})
    for (int64_t n : {int64_t(1), int64_t(7), int64_t(100000)}) {
      auto mm = test::check_collectives<DeviceMemory>(*world, members, world_rank(), dt, n);
      EXPECT_EQ(mm.count, 0) << dtype_name(dt) << " n=" << n << ": " << mm.first;
    }
}

TEST(NcclComm, CollectivesRunAfterTheComputeStreamAndWaitOrdersItBack) {
  cudaStream_t compute;
  ASSERT_EQ(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking), cudaSuccess);
  auto world = nccl_world(compute);
  ASSERT_NE(world, nullptr);
  const int64_t n = 1 << 22;
  float* buf = static_cast<float*>(device_alloc(n * sizeof(float)));
  float* sum = static_cast<float*>(device_alloc(n * sizeof(float)));
  // The compute stream writes the input (1.0f) with a 16 MiB host-to-device copy; the collective must see it, and the
  // compute stream must see the collective's result. Out of place: on one rank NCCL skips an in-place all-reduce
  // entirely (nothing would be ordered or timed), while an out-of-place one is a device copy of the whole input.
  std::vector<float> ones(n, 1.0f), out(n, 0.0f);
  void* staging = nullptr;
  ASSERT_EQ(cudaMallocHost(&staging, n * sizeof(float)), cudaSuccess);
  std::memcpy(staging, ones.data(), n * sizeof(float));
  ASSERT_EQ(cudaMemsetAsync(buf, 0, n * sizeof(float), compute), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(buf, staging, n * sizeof(float), cudaMemcpyHostToDevice, compute), cudaSuccess);
  Request r = world->all_reduce(buf, sum, n, DType::fp32);
  r.wait();  // the compute stream waits for the all-reduce; the host does not
  ASSERT_EQ(cudaMemcpyAsync(staging, sum, n * sizeof(float), cudaMemcpyDeviceToHost, compute), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(compute), cudaSuccess);
  std::memcpy(out.data(), staging, n * sizeof(float));
  int64_t bad = 0;
  for (float v : out) bad += v != float(world_size());
  EXPECT_EQ(bad, 0);
  world->synchronize();
  EXPECT_GT(world->counters().seconds[int(CollKind::all_reduce)], 0.0);
  EXPECT_EQ(world->counters().message_bytes[int(CollKind::all_reduce)], double(n) * 4);
  cudaFreeHost(staging);
  device_free(buf);
  device_free(sum);
  world.reset();
  cudaStreamDestroy(compute);
}

TEST(NcclComm, GroupedCollectivesCompleteAndCount) {
  auto world = nccl_world();
  ASSERT_NE(world, nullptr);
  const int W = world_size();
  const int64_t n = 1000;
  test::HostBuf a(DType::bf16, n * W), b(DType::bf16, n * W);
  a.fill(world_rank());
  b.fill(world_rank(), 5);
  void* da = device_alloc(n * W * 2);
  void* db = device_alloc(n * W * 2);
  void* dout = device_alloc(n * W * 2);
  copy_to_device(da, a.data(), n * W * 2);
  copy_to_device(db, b.data(), n * W * 2);
  world->group_start();
  Request r1 = world->all_reduce(da, da, n * W, DType::bf16);
  Request r2 = world->all_gather(db, dout, n, DType::bf16);
  world->group_end();
  r1.wait();
  r2.wait();
  world->synchronize();
  cudaDeviceSynchronize();
  test::HostBuf ra(DType::bf16, n * W), rg(DType::bf16, n * W);
  copy_to_host(ra.data(), da, n * W * 2);
  copy_to_host(rg.data(), dout, n * W * 2);
  std::vector<int> members(W);
  for (int r = 0; r < W; ++r) members[r] = r;
  int64_t bad = 0;
  for (int64_t i = 0; i < n * W; ++i) {
    const auto e = test::expected_sum(members, i, DType::bf16);
    bad += std::fabs(ra.get(i) - e.value) > e.tolerance;
    bad += rg.get(i) != test::fill_value(int(i / n), 5 + i % n);
  }
  EXPECT_EQ(bad, 0);
  EXPECT_EQ(world->counters().calls[int(CollKind::all_gather)], 1);
  EXPECT_EQ(world->counters().message_bytes[int(CollKind::all_gather)], double(n) * W * 2);
  EXPECT_GT(world->counters().seconds[int(CollKind::all_gather)], 0.0);
  device_free(da);
  device_free(db);
  device_free(dout);
}

// NCCL's group is the thread's: a collective on communicator B inside a group that A opened is enqueued only at A's
// group_end, so B's completion event must be recorded then, behind its kernel. B's stream is held by a host function
// (the gate) issued after B's collective and before the group_end: B's request, waited on by the compute stream, must
// stay incomplete while the gate holds (a completion event recorded at issue time sits before the gate and completes
// at once), and the result must be there once it opens.
TEST(NcclComm, CollectiveOnAnotherCommunicatorInsideAGroupCompletesAfterItsKernel) {
  cudaStream_t compute;
  ASSERT_EQ(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking), cudaSuccess);
  auto a = nccl_world(compute);
  auto b_comm = nccl_world(compute);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b_comm, nullptr);
  auto* b = dynamic_cast<NcclCommunicator*>(b_comm.get());
  ASSERT_NE(b, nullptr);
  const int64_t n = 1 << 20;
  std::vector<float> ones(n, 1.0f), out(n, 0.0f);
  float* send = static_cast<float*>(device_alloc(n * sizeof(float)));
  float* recv = static_cast<float*>(device_alloc(n * sizeof(float)));
  copy_to_device(send, ones.data(), n * sizeof(float));
  ASSERT_EQ(cudaMemset(recv, 0, n * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);

  std::atomic<bool> open_gate{false};
  a->group_start();
  Request r = b->all_reduce(send, recv, n, DType::fp32);  // out of place: a real copy even on one rank
  ASSERT_EQ(cudaLaunchHostFunc(
                b->stream(),
                [](void* p) {
                  auto* gate = static_cast<std::atomic<bool>*>(p);
                  while (!gate->load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
                },
                &open_gate),
            cudaSuccess);
  a->group_end();
  r.wait();
  cudaEvent_t after;
  ASSERT_EQ(cudaEventCreateWithFlags(&after, cudaEventDisableTiming), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(after, compute), cudaSuccess);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const cudaError_t while_held = cudaEventQuery(after);
  open_gate = true;  // before any assertion can return: the gate must open whatever happens
  EXPECT_EQ(while_held, cudaErrorNotReady)
      << "the request on B completed while B's stream was held before its all-reduce: its completion event was "
         "recorded before NCCL enqueued the kernel (at A's group_end)";
  ASSERT_EQ(cudaMemcpyAsync(out.data(), recv, n * sizeof(float), cudaMemcpyDeviceToHost, compute), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(compute), cudaSuccess);
  int64_t bad = 0;
  for (float v : out) bad += v != float(world_size());
  EXPECT_EQ(bad, 0);
  b->synchronize();
  a->synchronize();
  EXPECT_EQ(b->counters().calls[int(CollKind::all_reduce)], 1);
  EXPECT_EQ(a->counters().calls[int(CollKind::all_reduce)], 0);
  EXPECT_GT(b->counters().seconds[int(CollKind::all_reduce)], 0.0);
  cudaEventDestroy(after);
  device_free(send);
  device_free(recv);
  a.reset();
  b_comm.reset();
  cudaStreamDestroy(compute);
}

TEST(NcclComm, MeshCommsGiveEveryRoleOfAPlan) {
  const int W = world_size();
  const Topology topo = *topology_for_world(W, W);
  for (const char* text : {"ddp", "zero3"}) {
    auto plan = parse_plan(text, topo);
    ASSERT_TRUE(plan) << plan.error();
    auto mesh = make_mesh_comms(Backend::nccl, MPI_COMM_WORLD, *plan, topo);
    ASSERT_TRUE(mesh) << mesh.error();
    for (int r = 0; r < kGroupRoleCount; ++r) {
      const auto role = static_cast<GroupRole>(r);
      const GroupSpec g = group_spec(role, *plan, topo);
      Communicator& c = (*mesh)->get(role);
      EXPECT_EQ(c.size(), g.size()) << text << " " << group_role_name(role);
      EXPECT_STREQ(c.backend(), "nccl");
      auto mm = test::check_collectives<DeviceMemory>(c, group_ranks(g, world_rank()), world_rank(), DType::fp32, 5);
      EXPECT_EQ(mm.count, 0) << text << " " << group_role_name(role) << ": " << mm.first;
    }
  }
}

}  // namespace
}  // namespace lins

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int have = lins::cuda_device_count() > 0, all = 0;
  MPI_Allreduce(&have, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
  if (!all) {
    if (rank == 0) std::printf("no CUDA device: skipping the NCCL communicator tests (exit 77)\n");
    MPI_Finalize();
    return 77;
  }
  // The device NcclCommunicator picks, selected before any test creates a stream on it.
  cudaSetDevice(lins::node_place(MPI_COMM_WORLD).local_rank % lins::cuda_device_count());
  testing::InitGoogleTest(&argc, argv);
  int rc = RUN_ALL_TESTS(), worst = 0;
  MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return worst;
}
