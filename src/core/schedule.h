// The Schedule: the ordered list of every collective of one training step for a (model, plan, topology, micro-batch
// count, bucket size). The executor runs it, the cost model prices it, the memory model sizes its buffers, and the
// communicator's byte counters are tested against it (DESIGN.md, "The one idea that holds it together").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/groups.h"
#include "core/layout.h"
#include "core/model_spec.h"
#include "core/plan.h"
#include "core/result.h"
#include "core/topology.h"

namespace lins {

enum class Phase { forward, backward, optimizer, next_forward };
enum class CollKind { all_gather, reduce_scatter, all_reduce, broadcast };
// Which term of PAPER.md section 4 an op belongs to (baselines map their ops onto the same four).
enum class Term {
  param,     // T_p: gathers and reduce-scatters of P shards, every micro-batch
  grad,      // T_g: gradient sync beyond P in every micro-batch but the last (ZeRO-2: its reduce-scatters)
  os_sync,   // T_os0: gradient sync once per step (DDP all-reduce, ZeRO-1 reduce-scatter, MiCS cross-group)
  os_bcast,  // T_os1: spreading updated parameters (Lins broadcasts, ZeRO-1/2 all-gathers)
};
enum class DType { fp32, bf16 };
enum class Axis { intra, inter };  // intra: the group lies inside one node; inter: it spans nodes
constexpr int kCollKindCount = 4;
constexpr int kTermCount = 4;

const char* phase_name(Phase p);
const char* coll_kind_name(CollKind k);
const char* term_name(Term t);
const char* dtype_name(DType d);
const char* axis_name(Axis a);
int dtype_bytes(DType d);
// nccl-tests' bus-bandwidth factor: all_reduce 2(n-1)/n; all_gather, reduce_scatter (n-1)/n; broadcast 1.
double bus_factor(CollKind kind, int group_size);

struct CommOp {
  Phase phase = Phase::forward;
  int micro_batch = 0;  // index; kEveryButLast when the op stands for each of micro-batches 0..M-2
  int repeat = 1;       // how many times it runs per step (M-1 for kEveryButLast, else 1)
  int module = -1;      // ModelSpec module index, -1 for bucket ops
  std::string label;    // "layers.3.attn", "bucket 5"
  CollKind kind = CollKind::all_gather;
  Term term = Term::param;
  GroupRole role = GroupRole::world;
  GroupSpec group;
  Mesh mesh;
  // Message elements: the gathered (AG) or input (RS) size of the full buffer, the buffer (AR), the payload (BC).
  int64_t elems = 0;
  // Buckets: where the bucket starts in the rank's local buffer. Broadcasts: where the module's shard starts.
  int64_t local_offset = 0;
  // Broadcast: the owner (index inside the os_replica group) that sends; its payload is the concatenation, in
  // local-buffer order, of the parts of its owned slices (ShardLayout::slices) that fall inside op.module's shard.
  int root = 0;
  DType dtype = DType::bf16;

  int64_t bytes() const { return elems * dtype_bytes(dtype); }                   // message bytes v (PAPER.md section 4)
  double bus_bytes() const { return bytes() * bus_factor(kind, group.size()); }  // nccl-tests bus bytes per rank
  Axis axis() const { return mesh.inter > 1 ? Axis::inter : Axis::intra; }
};
constexpr int kEveryButLast = -1;

struct ScheduleOptions {
  int micro_batches = 1;              // M
  int64_t bucket_bytes = 25ll << 20;  // U
  DType dtype = DType::bf16;          // P and G on the wire (bf16 on GPU, fp32 on the CPU backend)
  int rank = 0;                       // the schedule is per rank (owners' broadcast sizes can differ)
  bool expand_micro_batches = false;  // true: one copy per micro-batch (the executor); false: compressed
};

struct Schedule {
  Plan plan;
  Topology topo;
  ScheduleOptions options;
  ShardLayout layout;
  std::vector<CommOp> ops;  // issue order; the same order on every rank of a group

  // Per-step totals of this rank (repeat counted).
  double message_bytes() const;
  double bus_bytes() const;
  double bus_bytes(CollKind kind) const;
  double bus_bytes(Axis axis) const;
  double message_bytes(CollKind kind, Axis axis) const;
  double bus_bytes(Term term) const;
  int64_t op_count() const;
};

// Builds the step's schedule. Groups of size one move nothing and are left out.
Result<Schedule> build_schedule(const ModelSpec& model, const Plan& plan, const Topology& topo,
                                const ScheduleOptions& options);

}  // namespace lins
