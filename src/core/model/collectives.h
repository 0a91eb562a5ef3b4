// The collectives lins runs, one row each, in the style of nccl-tests' `struct testColl` (src/common.h there): what a
// call's count means, the buffers it reads and writes, its message and bus bytes, where each element of its result
// comes from (the correctness check), its alpha-beta cost, and the MPI and NCCL calls that run it. The communicators,
// the collective check, `lins comm`, `bench_comm`, the profile and nccl-tests readers, the cost models and the step
// and plan columns all read these rows, so a new collective is its enumerator, its name, its row in collectives.cpp,
// and its call in each backend (comm/mpi_communicator.cpp, gpu/nccl_communicator.cpp).
#pragma once

#include <cstdint>
#include <string>

#include "core/util/names.h"

namespace lins {

enum class CollKind { all_gather, reduce_scatter, all_reduce, broadcast, all_to_all };
constexpr int kCollKindCount = 5;
// Written as the profile, step and collective-log CSVs spell them; read also as nccl-tests ("allgather",
// "alltoall") and NCCL ("AllGather", "AlltoAll") name them.
inline constexpr NameTable<CollKind, kCollKindCount> kCollKindNames{
    "collective",
    {{
        {CollKind::all_gather, "all_gather", "allgather AllGather all-gather", "", "all-gather"},
        {CollKind::reduce_scatter, "reduce_scatter", "reducescatter ReduceScatter reduce-scatter", "",
         "reduce-scatter"},
        {CollKind::all_reduce, "all_reduce", "allreduce AllReduce all-reduce", "", "all-reduce"},
        {CollKind::broadcast, "broadcast", "bcast Broadcast"},
        {CollKind::all_to_all, "all_to_all", "alltoall AlltoAll AllToAll all-to-all", "", "all-to-all"},
    }}};
static_assert(kCollKindNames.complete(CollKind::all_to_all));

// Where element i of a rank's result comes from: member `member`'s input element `index` (sum = false), or the sum
// over every member of input element `index` (sum = true). Members are indices in the group.
struct ResultSource {
  bool sum = false;
  int member = 0;
  int64_t index = 0;
};

// The terms of the hierarchical alpha-beta model (cost_model.cpp) for a group of p0 GPUs on each of p1 nodes and a
// message of v bytes: one ring phase inside the node and one across nodes, each (ranks - 1) latencies plus its
// (ranks - 1)/ranks share of v at the link's rate, and the plain terms for collectives that are not rings.
struct AlphaBetaTerms {
  int p0 = 1, p1 = 1;
  double v = 0;
  double intra_bps = 0, inter_bps = 0;  // one GPU's intra-node link; the node's links available to the group
  double intra_latency_s = 0, inter_latency_s = 0;
  double intra_ring_s = 0, inter_ring_s = 0;  // one all-gather phase inside the node, one across nodes
};

struct Collective {
  CollKind kind;
  const char* short_name;  // two letters for narrow tables: AG, RS, AR, BC, A2A
  const char* label;       // how figures name it: AllGather, ..., AllToAll
  const char* plural;      // "all-gathers", for prose
  // What a call's `count` is: elements per rank (all_gather: each rank's input; reduce_scatter: each rank's output;
  // all_to_all: what one rank sends to each peer) or of the whole buffer.
  bool count_per_rank;
  const char* count_unit;  // how messages name the count: "elements per rank", "elements per peer", "elements"
  bool has_root;
  int64_t (*send_elems)(int64_t count, int n);
  int64_t (*recv_elems)(int64_t count, int n);
  // The message: the larger of the two buffers, as nccl-tests' "size" and the schedule's CommOp::bytes() count it.
  int64_t (*message_elems)(int64_t count, int n);
  // nccl-tests' bus-bandwidth factor (doc/PERFORMANCE.md there): busbw = algbw x factor.
  double (*bus_factor)(int n);
  ResultSource (*result)(int64_t i, int64_t count, int n, int me, int root);
  double (*alpha_beta_s)(const AlphaBetaTerms& t);
  // NCCL's tuning model (src/graph/tuning.cc) prices it; false for collectives NCCL runs as grouped point-to-point
  // sends (all_to_all), which that model does not cover: the alpha-beta model prices them under either model.
  bool nccl_tuned;
  const char* mpi_call;
  const char* nccl_call;
  const char* nccl_tests_program;  // the nccl-tests binary that measures it (all_gather_perf, ...)
};

// The row of a collective.
const Collective& collective(CollKind kind);

// Each value's name in kCollKindNames.
const char* coll_kind_name(CollKind k);
// nccl-tests' bus-bandwidth factor of the collective over `group_size` ranks (0 for one rank).
double bus_factor(CollKind kind, int group_size);
// Message bytes of one call (collective(kind).message_elems x element bytes).
double message_bytes(CollKind kind, int64_t count, int group_size, int element_bytes);
// The largest count whose message fits in `bytes` (nccl-tests' rounding: whole elements, whole ranks).
int64_t count_for_message(CollKind kind, double bytes, int group_size, int element_bytes);
// "all_gather_perf, reduce_scatter_perf, ...": every row's nccl-tests program, for messages.
std::string nccl_tests_programs();
// "elements per rank" or "elements", for messages about a call's count.
const char* count_unit(CollKind kind);

}  // namespace lins
