// The Schedule: every collective of one training step for a (model, plan, topology, micro-batch count, engine
// options), each with what it is for (its purpose), the stream it runs on, the point of the step where it may be
// issued and the point where compute must wait for it. An engine (engines.h) fills these in the way its real system
// does; the executor runs them, the simulator and the trace replay price the very same points (timeline.h), the cost
// model prices the ops, the memory model sizes their buffers, and the tests compare the communicators' byte counters
// with them. docs/design.md explains who reads what.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/model/groups.h"
#include "core/schedule/layout.h"
#include "core/model/model_spec.h"
#include "core/model/plan.h"
#include "core/model/topology.h"
#include "core/model/vocabulary.h"  // CollKind, DType, Axis
#include "core/schedule/overlap.h"
#include "core/util/names.h"
#include "core/util/result.h"

namespace lins {

enum class Phase { forward, backward, optimizer, next_forward };
inline constexpr NameTable<Phase, 4> kPhaseNames{"phase",
                                                 {{
                                                     {Phase::forward, "forward"},
                                                     {Phase::backward, "backward"},
                                                     {Phase::optimizer, "optimizer"},
                                                     {Phase::next_forward, "next_forward"},
                                                 }}};
static_assert(kPhaseNames.complete(Phase::next_forward));

// Which term of the paper's communication model an op belongs to (docs/cost-model.md); every engine maps its ops
// onto the same four so that strategies can be compared term by term.
enum class Term {
  param,     // T_p: gathers and reduce-scatters of P shards, every micro-batch
  grad,      // T_g: gradient sync beyond P in every micro-batch but the last (ZeRO-2: its reduce-scatters)
  os_sync,   // T_os0: gradient sync once per step (DDP all-reduce, ZeRO-1 reduce-scatter, MiCS cross-group)
  os_bcast,  // T_os1: spreading updated parameters (Lins broadcasts, ZeRO-1/2 all-gathers)
};
constexpr int kTermCount = 4;
inline constexpr NameTable<Term, kTermCount> kTermNames{"term",
                                                        {{
                                                            {Term::param, "param", "", "T_p"},
                                                            {Term::grad, "grad", "", "T_g"},
                                                            {Term::os_sync, "os_sync", "", "T_os0"},
                                                            {Term::os_bcast, "os_bcast", "", "T_os1"},
                                                        }}};
static_assert(kTermNames.complete(Term::os_bcast));

// What an op is for. What an op does with the step's buffers (what it reads and holds, what happens when it is issued
// and when it lands) is chosen by purpose alone: its rules, core/purposes.h, read by the executor and the memory model.
// The engine decides which purposes a strategy uses and when.
enum class Purpose {
  forward_gather,          // all-gather of a module's P shards before its forward (P shard group)
  backward_gather,         // all-gather of a module's P shards before its backward (P shard group)
  hpz_gather,              // ZeRO++ hpZ: backward all-gather from the secondary copy of P kept inside the node
  grad_reduce_scatter,     // reduce-scatter of a module's gradient over the P shard group (sharded P)
  zero_grad_reduce,        // ZeRO-1/2: reduce-scatter of a gradient bucket over the optimizer-state group
  grad_bucket_all_reduce,  // Lins T_g: bucket all-reduce over the G group in a micro-batch but the last
  sync_bucket_all_reduce,  // DDP, Lins T_os0: bucket all-reduce of the last micro-batch over the P replicas
  replica_all_reduce,      // MiCS/HSDP: all-reduce of a gradient shard across the replica groups
  update_gather,           // ZeRO-1/2: all-gather of the updated parameters after the optimizer
  update_broadcast,        // Lins: an owner broadcasts its updated slices of one module to the ranks that hold it
  qgz_node_exchange,       // ZeRO++ qgZ: a module's int4 gradient all-to-all inside the node, then reduced
  qgz_peer_exchange,       // ZeRO++ qgZ: the reduced int4 slices all-to-all across nodes, then reduced into G
};
constexpr int kPurposeCount = 12;
// The action logs' purpose column.
inline constexpr NameTable<Purpose, kPurposeCount> kPurposeNames{
    "purpose",
    {{
        {Purpose::forward_gather, "forward_gather", "", "all-gather of a module's P shards before its forward"},
        {Purpose::backward_gather, "backward_gather", "", "all-gather of a module's P shards before its backward"},
        {Purpose::hpz_gather, "hpz_gather", "", "backward all-gather from the secondary copy of P inside the node"},
        {Purpose::grad_reduce_scatter, "grad_reduce_scatter", "", "reduce-scatter of a module's gradient"},
        {Purpose::zero_grad_reduce, "zero_grad_reduce", "", "ZeRO-1/2 reduce-scatter of a gradient bucket"},
        {Purpose::grad_bucket_all_reduce, "grad_bucket_all_reduce", "",
         "Lins T_g bucket all-reduce in a micro-batch but the last"},
        {Purpose::sync_bucket_all_reduce, "sync_bucket_all_reduce", "",
         "bucket all-reduce of the last micro-batch over the P replicas"},
        {Purpose::replica_all_reduce, "replica_all_reduce", "", "all-reduce of a gradient shard across replica groups"},
        {Purpose::update_gather, "update_gather", "", "ZeRO-1/2 all-gather of the updated parameters"},
        {Purpose::update_broadcast, "update_broadcast", "", "Lins broadcast of an owner's updated slices"},
        {Purpose::qgz_node_exchange, "qgz_node_exchange", "",
         "ZeRO++ qgZ all-to-all of a module's int4 gradient inside the node"},
        {Purpose::qgz_peer_exchange, "qgz_peer_exchange", "",
         "ZeRO++ qgZ all-to-all of the node's reduced int4 slices across nodes"},
    }}};
static_assert(kPurposeNames.complete(Purpose::qgz_peer_exchange));

// Each value's name in the tables above.
const char* phase_name(Phase p);
const char* term_name(Term t);
const char* purpose_name(Purpose p);
// Gathers produce inputs of compute; every other purpose consumes what compute produced. The overlap modes move a
// gather's issue to where it is needed, and every other op's wait to where it was issued (schedule.cpp).
bool is_gather(Purpose p);

// The compute tasks of one step, in the order they run: for each micro-batch every module's forward (forward
// order), then every module's backward (reverse order); after the last micro-batch, the optimizer.
enum class TaskKind { forward, backward, optimizer };
inline constexpr NameTable<TaskKind, 3> kTaskKindNames{"task",
                                                       {{
                                                           {TaskKind::forward, "forward"},
                                                           {TaskKind::backward, "backward"},
                                                           {TaskKind::optimizer, "optimizer"},
                                                       }}};
static_assert(kTaskKindNames.complete(TaskKind::optimizer));
struct ComputeTask {
  TaskKind kind = TaskKind::forward;
  int micro_batch = 0;
  int module = -1;  // -1 for the optimizer
};

// A place in that sequence. `slot` 2t+1 is just before task t; 2t is just after task t-1 (both lie between the same
// two tasks: "after" comes first). Slot 2K (K tasks) is the end of the step. `next_step`: the same place in the
// following step (where the next step waits for what this step issued last, the Lins broadcasts).
struct Point {
  int32_t slot = 0;
  bool next_step = false;
  bool operator==(const Point&) const = default;
  // Order within the step (a next-step point comes after every point of this step).
  int64_t order() const { return int64_t(slot) + (next_step ? (int64_t(1) << 32) : 0); }
};

struct StepShape {
  int micro_batches = 1;
  int modules = 0;
  int task_count() const { return micro_batches * 2 * modules + 1; }
  int forward_task(int mb, int m) const { return mb * 2 * modules + m; }
  int backward_task(int mb, int m) const { return mb * 2 * modules + modules + (modules - 1 - m); }
  int optimizer_task() const { return micro_batches * 2 * modules; }
  ComputeTask task(int index) const;

  static Point before(int task) { return Point{2 * task + 1, false}; }
  static Point after(int task) { return Point{2 * (task + 1), false}; }
  Point before_forward(int mb, int m) const { return before(forward_task(mb, m)); }
  Point after_forward(int mb, int m) const { return after(forward_task(mb, m)); }
  Point before_backward(int mb, int m) const { return before(backward_task(mb, m)); }
  Point after_backward(int mb, int m) const { return after(backward_task(mb, m)); }
  Point end_of_backward(int mb) const { return after_backward(mb, 0); }
  Point before_optimizer() const { return before(optimizer_task()); }
  Point end_of_step() const { return after(optimizer_task()); }
  static Point in_next_step(Point p) { return Point{p.slot, true}; }
  std::string describe(Point p) const;  // "before backward of module 3 (micro-batch 0)"
};

// What an op's payload is on the wire: its dtype (CommOp::dtype), or ZeRO++'s quantized blocks (core/model/
// quantization.h), each block's values and one fp32 scale, moved by two collectives as DeepSpeed issues them.
enum class Quant {
  none,
  int8_blocks,  // qwZ: one int8 a value
  int4_blocks,  // qgZ: two values a byte
};
inline constexpr NameTable<Quant, 3> kQuantNames{"quantization",
                                                 {{
                                                     {Quant::none, "none"},
                                                     {Quant::int8_blocks, "int8"},
                                                     {Quant::int4_blocks, "int4"},
                                                 }}};
static_assert(kQuantNames.complete(Quant::int4_blocks));

struct CommOp {
  Phase phase = Phase::forward;
  int micro_batch = 0;  // index (compressed schedules: of the first micro-batch this copy stands for)
  int repeat = 1;       // how many times it runs per step (compressed schedules: the micro-batches it stands for)
  int module = -1;      // ModelSpec module index; -1 for a bucket (a range of the local buffer)
  std::string label;    // "layers.3.attn", "bucket 5"
  CollKind kind = CollKind::all_gather;
  Term term = Term::param;
  Purpose purpose = Purpose::forward_gather;
  GroupRole role = GroupRole::world;
  GroupSpec group;
  Mesh mesh;
  // Message elements: the gathered (AG) or input (RS) size of the full buffer, the buffer (AR), the payload (BC).
  int64_t elems = 0;
  // Ranges of the local buffer (buckets, ZeRO-1/2 reductions): where the range starts. Broadcasts: where the
  // module's shard starts.
  int64_t local_offset = 0;
  // Broadcast: the owner (index inside the os_replica group) that sends; its payload is the concatenation, in
  // local-buffer order, of the parts of its owned slices (ShardLayout::slices) that fall inside op.module's shard.
  int root = 0;
  // Broadcast: the owner's part of the module is one contiguous range of the local buffer starting at local_offset,
  // broadcast where it lies in P (no payload to pack or unpack).
  bool in_place = false;
  DType dtype = DType::bf16;
  // Quantized ops: `elems` values in `quant_blocks` blocks (the whole message: a qwZ gather's every rank's part; a
  // qgZ exchange's every peer's part), each value int8 or int4 and each block one fp32 scale.
  Quant quant = Quant::none;
  int64_t quant_blocks = 0;

  // When and where (expanded schedules only). The op runs on communication stream `stream` (Schedule::streams), one
  // op at a time in issue order; it is issued at `issue` and compute waits for it at `wait`. `after`: the index of an
  // op on another stream whose result this op reads; its stream waits for that op (no compute wait involved).
  int stream = 0;
  Point issue, wait;
  int after = -1;
  // The wait blocks the host, not only the compute stream: the framework synchronises on the op's event or stream
  // there (DeepSpeed's reduce events and its end-of-backward stream synchronize). Read by the host model of the
  // timeline (core/host_model.h); on the CPU backend host and compute are one.
  bool host_wait = false;

  // Message bytes v: for a quantized op, its values' and its scales' (two collectives) together.
  int64_t bytes() const { return quant == Quant::none ? elems * dtype_bytes(dtype) : payload_bytes() + scale_bytes(); }
  int64_t payload_bytes() const {
    return quant == Quant::int8_blocks ? elems : quant == Quant::int4_blocks ? elems / 2 : elems * dtype_bytes(dtype);
  }
  int64_t scale_bytes() const { return quant == Quant::none ? 0 : 4 * quant_blocks; }
  double bus_bytes() const { return bytes() * bus_factor(kind, group.size()); }  // nccl-tests bus bytes per rank
  Axis axis() const { return mesh.inter > 1 ? Axis::inter : Axis::intra; }
};

// What one compute task computes with. P is sharded: the output of gather op `gather_op` (this step), or a buffer kept
// across steps (DeepSpeed's persistent parameters, refreshed by an update gather after every optimizer step). P is
// replicated: the local P.
struct TaskParams {
  enum class Source { local, gathered, persistent };
  Source source = Source::local;
  int gather_op = -1;
  bool release = true;         // the gathered buffer is freed after the task (false: a later task of the step reads it)
  bool keep_hpz_part = false;  // after the task, keep this rank's part of the secondary copy of P (ZeRO++, FSDP2 K)
  bool drop_hpz_part = false;  // after the task, free that part (FSDP2; ZeRO++ keeps it to the end of the step)
};

// Engine settings with their real systems' defaults (docs/engines.md says where each comes from).
struct EngineOptions {
  // Lins (U) and DDP (bucket_cap_mb) gradient bucket.
  int64_t bucket_bytes = 25ll << 20;
  // DDP: the first bucket (the gradients backward produces first) is smaller, so the first all-reduce starts early.
  int64_t ddp_first_bucket_bytes = 1ll << 20;
  // DeepSpeed ZeRO (element counts, as its config gives them).
  int64_t ds_reduce_bucket_elems = 500'000'000;            // reduce_bucket_size
  int64_t ds_prefetch_bucket_elems = 50'000'000;           // stage3_prefetch_bucket_size
  int64_t ds_max_reuse_distance_elems = 1'000'000'000;     // stage3_max_reuse_distance
  int64_t ds_param_persistence_threshold_elems = 100'000;  // stage3_param_persistence_threshold
  // overlap_comm; unset: DeepSpeed's default for the stage (off for stages 1 and 2, on for stage 3: its config
  // validator turns it on when the stage is 3). Off, the reductions run on the compute stream, waited where issued.
  std::optional<bool> ds_overlap_comm;
  bool ds_overlap_comm_at(int stage) const { return ds_overlap_comm.value_or(stage == 3); }
  // zero_quantized_weights and zero_quantized_gradients for every zero3 and zeropp plan of a run (a plan spelled with
  // "+qwz" / "+qgz" has them whatever these say; Plan::quantized_weights).
  bool ds_quantized_weights = false;
  bool ds_quantized_gradients = false;
  // What qgZ leaves each rank. false: the mean over the W ranks, as the unquantized reduce-scatter (lins's default).
  // true: DeepSpeed's, the sum divided by the node count N, R times the mean (coalesced_collectives.py divides by
  // num_nodes; docs/engines.md).
  bool ds_qgz_divide_by_nodes = false;
  // PyTorch FSDP2 prefetches one unit ahead in both directions, as its defaults do (engine_fsdp.cpp); it has no
  // setting here.
};

struct ScheduleOptions {
  int micro_batches = 1;              // M
  int64_t bucket_bytes = 25ll << 20;  // U (copied into engine.bucket_bytes by build_schedule)
  DType dtype = DType::bf16;          // P and G on the wire (bf16 on GPU, fp32 on the CPU backend)
  int rank = 0;                       // the schedule is per rank (owners' broadcast sizes can differ)
  bool expand_micro_batches = false;  // true: one copy per micro-batch, with issue/wait points; false: compressed
  Overlap overlap = Overlap::all;     // applied to the engine's points (expanded schedules)
  EngineOptions engine;
};

// The options of a schedule, from the one place every command builds them: the engines' options are a required
// argument, since they decide buckets, prefetch and persistence, and with them the memory and the bytes of a plan
// (a schedule built without them sized plans differently under `lins plan --objective comm`). `expand`: one copy per
// micro-batch with issue and wait points (what the executor runs and the simulator times); false: the compressed
// schedule (the paper's summed communication).
ScheduleOptions schedule_options(int micro_batches, int64_t bucket_bytes, DType dtype, const EngineOptions& engine,
                                 Overlap overlap, bool expand = true, int rank = 0);

struct Schedule {
  Plan plan;
  Topology topo;
  ScheduleOptions options;
  ShardLayout layout;
  StepShape shape;
  std::vector<std::string> streams;     // names of the communication streams the ops run on ("params", "grads")
  std::vector<CommOp> ops;              // issue order; the same order on every rank of a group
  std::vector<TaskParams> task_params;  // per compute task of `shape` (expanded schedules)
  std::vector<int> persistent_modules;  // modules whose gathered parameters stay allocated across steps
  // Where each micro-batch's reduced gradient lands. false: added into G where it lands (reduce-scatter output, DDP's
  // and MiCS's all-reduces of the accumulated G). true: a transient buffer, all-reduced there, after which each rank
  // adds the part it owns into G (the Lins engine when s_g > s_p, HSDP's all-reduce of every micro-batch).
  bool transient_grads = false;

  // Per-step totals of this rank (repeat counted).
  double message_bytes() const;
  double bus_bytes() const;
  double bus_bytes(CollKind kind) const;
  double bus_bytes(Axis axis) const;
  double message_bytes(CollKind kind, Axis axis) const;
  double bus_bytes(Term term) const;
  int64_t op_count() const;
};

// The most ops one micro-batch's copy may hold, and one schedule in all: a bucket so small that it would make more is
// refused with the smallest bucket that is allowed (a 1 KiB bucket on a 7B model would be millions of ops).
constexpr int64_t kMaxOpsPerMicroBatch = 1 << 16;
constexpr int64_t kMaxScheduleOps = 1 << 22;

// Builds the step's schedule on the plan's engine. Groups of size one move nothing and are left out. Expanded
// schedules get their issue/wait points from the engine, then the overlap mode, and are checked (check_points).
Result<Schedule> build_schedule(const ModelSpec& model, const Plan& plan, const Topology& topo,
                                const ScheduleOptions& options);

// The rules every expanded schedule keeps: waits not before issues, `after` names an earlier op on another stream
// issued no later, points inside the step (next-step waits only for ops issued at the end of the step).
Status check_points(const Schedule& s);

}  // namespace lins
