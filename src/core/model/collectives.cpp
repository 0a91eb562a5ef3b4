// The rows of the collective table; see collectives.h.
#include "core/model/collectives.h"

#include <algorithm>
#include <array>

namespace lins {
namespace {

int64_t whole(int64_t count, int) { return count; }
int64_t times_ranks(int64_t count, int n) { return count * n; }
double ring_factor(int n) { return n > 1 ? double(n - 1) / n : 0.0; }

constexpr std::array<Collective, kCollKindCount> kCollectives = {{
    // recv[n * count] = every rank's send[count], in rank order.
    {.kind = CollKind::all_gather,
     .short_name = "AG",
     .label = "AllGather",
     .plural = "all-gathers",
     .count_per_rank = true,
     .count_unit = "elements per rank",
     .has_root = false,
     .send_elems = whole,
     .recv_elems = times_ranks,
     .message_elems = times_ranks,
     .bus_factor = ring_factor,
     .result =
         [](int64_t i, int64_t count, int, int, int) {
           return ResultSource{false, int(i / count), i % count};
         },
     .alpha_beta_s = [](const AlphaBetaTerms& t) { return t.intra_ring_s + t.inter_ring_s; },
     .nccl_tuned = true,
     .mpi_call = "MPI_Allgather",
     .nccl_call = "ncclAllGather",
     .nccl_tests_program = "all_gather_perf"},
    // recv[count] = this rank's slice of the sum of every rank's send[n * count].
    {.kind = CollKind::reduce_scatter,
     .short_name = "RS",
     .label = "ReduceScatter",
     .plural = "reduce-scatters",
     .count_per_rank = true,
     .count_unit = "elements per rank",
     .has_root = false,
     .send_elems = times_ranks,
     .recv_elems = whole,
     .message_elems = times_ranks,
     .bus_factor = ring_factor,
     .result =
         [](int64_t i, int64_t count, int, int me, int) {
           return ResultSource{true, 0, me * count + i};
         },
     .alpha_beta_s = [](const AlphaBetaTerms& t) { return t.intra_ring_s + t.inter_ring_s; },
     .nccl_tuned = true,
     .mpi_call = "MPI_Reduce_scatter_block",
     .nccl_call = "ncclReduceScatter",
     .nccl_tests_program = "reduce_scatter_perf"},
    // recv[count] = the sum of every rank's send[count]: a reduce-scatter then an all-gather.
    {.kind = CollKind::all_reduce,
     .short_name = "AR",
     .label = "AllReduce",
     .plural = "all-reduces",
     .count_per_rank = false,
     .count_unit = "elements",
     .has_root = false,
     .send_elems = whole,
     .recv_elems = whole,
     .message_elems = whole,
     .bus_factor = [](int n) { return n > 1 ? 2.0 * (n - 1) / n : 0.0; },
     .result =
         [](int64_t i, int64_t, int, int, int) {
           return ResultSource{true, 0, i};
         },
     .alpha_beta_s = [](const AlphaBetaTerms& t) { return 2 * t.intra_ring_s + 2 * t.inter_ring_s; },
     .nccl_tuned = true,
     .mpi_call = "MPI_Allreduce",
     .nccl_call = "ncclAllReduce",
     .nccl_tests_program = "all_reduce_perf"},
    // buf[count] on every rank = the root's: a pipelined chain, every GPU receives v once, the slowest link sets
    // the rate.
    {.kind = CollKind::broadcast,
     .short_name = "BC",
     .label = "Broadcast",
     .plural = "broadcasts",
     .count_per_rank = false,
     .count_unit = "elements",
     .has_root = true,
     .send_elems = whole,
     .recv_elems = whole,
     .message_elems = whole,
     .bus_factor = [](int n) { return n > 1 ? 1.0 : 0.0; },
     .result =
         [](int64_t i, int64_t, int, int, int root) {
           return ResultSource{false, root, i};
         },
     .alpha_beta_s =
         [](const AlphaBetaTerms& t) {
           double slowest = 0;
           if (t.p0 > 1) slowest = std::max(slowest, t.v / t.intra_bps);
           if (t.p1 > 1) slowest = std::max(slowest, t.v / t.inter_bps);
           return (t.p0 - 1) * t.intra_latency_s + (t.p1 - 1) * t.inter_latency_s + slowest;
         },
     .nccl_tuned = true,
     .mpi_call = "MPI_Bcast",
     .nccl_call = "ncclBroadcast",
     .nccl_tests_program = "broadcast_perf"},
    // recv[j * count + k] = rank j's send[me * count + k]: each rank sends `count` elements to every rank. Every
    // GPU sends v/n to each of its p0 - 1 node peers over its own link and v/n to each of the n - p0 others through
    // the node's links (the node's p0 GPUs together p0 (p1 - 1)/p1 x v); both go out at once (NCCL posts every send
    // of the group together), so the slower of the two sets the time.
    {.kind = CollKind::all_to_all,
     .short_name = "A2A",
     .label = "AllToAll",
     .plural = "all-to-alls",
     .count_per_rank = true,
     .count_unit = "elements per peer",
     .has_root = false,
     .send_elems = times_ranks,
     .recv_elems = times_ranks,
     .message_elems = times_ranks,
     .bus_factor = ring_factor,
     .result =
         [](int64_t i, int64_t count, int, int me, int) {
           return ResultSource{false, int(i / count), me * count + i % count};
         },
     .alpha_beta_s =
         [](const AlphaBetaTerms& t) {
           const double n = double(t.p0) * t.p1;
           const double intra = t.p0 > 1 ? (t.p0 - 1) * t.intra_latency_s + t.v * (t.p0 - 1) / n / t.intra_bps : 0.0;
           const double inter =
               t.p1 > 1 ? (t.p1 - 1) * t.inter_latency_s + t.v * t.p0 * (t.p1 - 1) / t.p1 / t.inter_bps : 0.0;
           return std::max(intra, inter);
         },
     .nccl_tuned = false,
     .mpi_call = "MPI_Alltoall",
     .nccl_call = "ncclAlltoAll (NCCL 2.28+; grouped ncclSend/ncclRecv before)",
     .nccl_tests_program = "alltoall_perf"},
}};

constexpr bool rows_in_enum_order() {
  for (int k = 0; k < kCollKindCount; ++k)
    if (static_cast<int>(kCollectives[k].kind) != k) return false;
  return true;
}
static_assert(rows_in_enum_order(), "kCollectives: one row per CollKind, in enum order");

}  // namespace

const Collective& collective(CollKind kind) { return kCollectives[static_cast<int>(kind)]; }

const char* coll_kind_name(CollKind k) { return kCollKindNames.name(k); }

double bus_factor(CollKind kind, int group_size) {
  return group_size > 1 ? collective(kind).bus_factor(group_size) : 0.0;
}

double message_bytes(CollKind kind, int64_t count, int group_size, int element_bytes) {
  return double(collective(kind).message_elems(count, group_size)) * element_bytes;
}

int64_t count_for_message(CollKind kind, double bytes, int group_size, int element_bytes) {
  const int64_t elems = static_cast<int64_t>(bytes) / element_bytes;
  return collective(kind).count_per_rank ? elems / group_size : elems;
}

std::string nccl_tests_programs() {
  std::string out;
  for (const Collective& c : kCollectives) out += (out.empty() ? "" : ", ") + std::string(c.nccl_tests_program);
  return out;
}

const char* count_unit(CollKind kind) { return collective(kind).count_unit; }

}  // namespace lins
