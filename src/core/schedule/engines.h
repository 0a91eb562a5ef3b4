// The engines: how each system schedules the collectives of one step. One function per engine fills a Schedule's ops
// with their purpose, group, stream, issue point and wait point, following its real system (docs/engines.md has a
// table per engine with the source file and function it follows). build_schedule (schedule.cpp) picks the engine
// from the plan, then applies the overlap mode and checks the points.
//
// How to add an engine (say, FSDP2-style per-parameter sharding):
//   1. add its name to Engine (plan.h) and its preset rows to kPresets (plan.h; parse_plan, the help, `lins schema`
//      and the Python side read them);
//   2. write `Status build_<name>_ops(EngineBuilder&)` in a new engine_<name>.cpp: for every micro-batch copy
//      (b.copies()), call b.add(...) for each collective in issue order with the points of b.shape(); give each op a
//      Purpose that exists, or add a purpose: one case of purpose_rule (purposes.cpp), plus the executor's buffer
//      mechanics (executor_ops.cpp) only if its rules name an issue or a completion no purpose had;
//   3. give it its row in engines/engine_table.cpp (its build function, layout rule, memory rule and host family;
//      engine_table.h) and its section in docs/engines.md;
//   4. tests/unit/core/engine_test.cpp builds every preset of plan_presets(): say in its overlapping_purposes() which
//      of the engine's purposes overlap compute (its table in docs/engines.md), run it with LINS_UPDATE_GOLDEN=1 to
//      write tests/unit/core/golden/<engine>.txt, review that program against the table and write the promises you
//      checked in the file's leading '#' lines; add it to the step equivalence test's strategies (tests/mpi/train),
//      which checks its loss against DDP.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/schedule/schedule.h"

namespace lins {

// One copy of a micro-batch's ops: `mb` the micro-batch it stands for, `repeat` how many identical micro-batches it
// stands for (compressed schedules), `first`/`last` whether it is the step's first or last micro-batch.
struct MicroBatchCopy {
  int mb = 0;
  int repeat = 1;
  bool first = true, last = true;
};

class EngineBuilder {
 public:
  EngineBuilder(const ModelSpec& model, Schedule& s);

  const ModelSpec& model() const { return model_; }
  const Plan& plan() const { return s_.plan; }
  const Topology& topo() const { return s_.topo; }
  const ScheduleOptions& options() const { return s_.options; }
  const EngineOptions& engine() const { return s_.options.engine; }
  const ShardLayout& layout() const { return s_.layout; }
  const StepShape& shape() const { return s_.shape; }
  int modules() const { return s_.shape.modules; }
  int micro_batches() const { return s_.shape.micro_batches; }
  bool expanded() const { return s_.options.expand_micro_batches; }
  // The micro-batch copies to build: every micro-batch when expanded; otherwise the first, one standing for the
  // middle ones, and the last (as many as are distinct).
  std::vector<MicroBatchCopy> copies() const;
  int group_size(GroupRole role) const { return role_group_[static_cast<int>(role)].size(); }
  Mesh mesh(GroupRole role) const { return role_mesh_[static_cast<int>(role)]; }

  // Names the streams; an op's stream is its index here.
  void set_streams(std::vector<std::string> names) { s_.streams = std::move(names); }

  struct OpSpec {
    Purpose purpose = Purpose::forward_gather;
    CollKind kind = CollKind::all_gather;
    Term term = Term::param;
    GroupRole role = GroupRole::world;
    int64_t elems = 0;
    int module = -1;           // -1: a range of the local buffer (a bucket)
    int64_t local_offset = 0;  // bucket ranges, broadcasts
    int root = 0;              // broadcasts
    bool in_place = false;     // broadcasts
    int stream = 0;
    Point issue, wait;
    int after = -1;
    bool host_wait = false;  // CommOp::host_wait
    Quant quant = Quant::none;  // CommOp::quant, quant_blocks
    int64_t quant_blocks = 0;
    std::string_view label;  // default: the module's name
    int label_number = -1;   // appended to the label when not negative ("bucket 5")
  };
  // Appends the op unless its group is a single rank or it moves nothing; returns its index, or -1 when left out.
  int add(const MicroBatchCopy& c, Phase phase, const OpSpec& spec);
  CommOp& op(int index) { return s_.ops[static_cast<std::size_t>(index)]; }
  int op_count() const { return static_cast<int>(s_.ops.size()); }
  // What each compute task computes with (Schedule::task_params); the default is the local P.
  TaskParams& params_of(int task) { return s_.task_params[static_cast<std::size_t>(task)]; }
  // A module whose gathered parameters stay allocated across steps (Schedule::persistent_modules).
  void mark_persistent(int module) { s_.persistent_modules.push_back(module); }
  void set_transient_grads(bool on) { s_.transient_grads = on; }

  // Errors when `per_copy` ops in each micro-batch copy would make the schedule longer than kMaxScheduleOps.
  Status check_budget(int64_t per_copy, const char* what) const;
  // The forward-prefetch unit of a module: 0 for the embedding, 1 + layer for a layer's modules, L + 1 for the head.
  int unit_of(int module) const;
  // The index of the module holding local-buffer element `offset`.
  int module_at(int64_t offset) const;

 private:
  const ModelSpec& model_;
  Schedule& s_;
  GroupSpec role_group_[kGroupRoleCount];
  Mesh role_mesh_[kGroupRoleCount];
  bool ops_reserved_ = false;  // add(): the expanded step's ops reserved at the second micro-batch
};

// A run of the local gradient buffer reduced by one collective: [offset, offset + elems), produced once the backward
// of `ready_module` has run.
struct Bucket {
  int64_t offset = 0, elems = 0;
  int ready_module = 0;
};
struct BucketRule {
  int64_t cap_elems = 1;
  int64_t first_cap_elems = 0;      // the first bucket's cap (0: the same as the others)
  bool whole_tensors = false;       // buckets hold whole tensors (DDP, DeepSpeed); false: cut anywhere (Lins's U)
  bool whole_modules = false;       // buckets hold whole modules (DeepSpeed ZeRO-3's reduce-scatter buckets)
  bool from_start = false;          // cut in forward order (DeepSpeed ZeRO-1); default from the end, as backward runs
  const char* option = "--bucket";  // named in the error when the buckets would be too many
  int elem_bytes = 0;               // the option's unit: bytes per element when it is given in bytes, 0 for elements
};
// Buckets of at most the cap each (a tensor or module larger than the cap gets a bucket of its own), in the order
// they are cut. A bucket is ready once the backward of the module of its lowest element has run: backward runs from
// the last module to the first, so that module is the last of the bucket's to run. Errors when the buckets would be
// more than kMaxOpsPerMicroBatch, naming the smallest cap allowed.
Result<std::vector<Bucket>> cut_buckets(const ModelSpec& model, const ShardLayout& layout, const BucketRule& rule);

// One function per engine (engine_<name>.cpp).
Status build_ddp_ops(EngineBuilder& b);
Status build_deepspeed_zero12_ops(EngineBuilder& b);  // ZeRO-1, ZeRO-2 (stage_1_and_2.py)
Status build_deepspeed_zero3_ops(EngineBuilder& b);   // ZeRO-3, MiCS, ZeRO++ hpZ (stage3.py and friends)
Status build_fsdp_ops(EngineBuilder& b);              // PyTorch FSDP2 full shard and HSDP
Status build_lins_ops(EngineBuilder& b);              // the Lins engine: any 6-tuple

}  // namespace lins
