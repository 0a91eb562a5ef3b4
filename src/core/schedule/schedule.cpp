// The Schedule's vocabulary and totals, the engine builder every engine file uses, and build_schedule: the engine of
// the plan fills the ops, then the overlap mode moves their points, then the points are checked. See schedule.h.
#include "core/schedule/schedule.h"

#include <algorithm>
#include <charconv>

#include "core/schedule/engine_table.h"
#include "core/schedule/engines.h"
#include "core/schedule/purposes.h"

namespace lins {

ScheduleOptions schedule_options(int micro_batches, int64_t bucket_bytes, DType dtype, const EngineOptions& engine,
                                 Overlap overlap, bool expand, int rank) {
  ScheduleOptions so;
  so.micro_batches = micro_batches;
  so.bucket_bytes = bucket_bytes;
  so.dtype = dtype;
  so.engine = engine;
  so.overlap = overlap;
  so.expand_micro_batches = expand;
  so.rank = rank;
  return so;
}

const char* phase_name(Phase p) { return kPhaseNames.name(p); }
const char* term_name(Term t) { return kTermNames.name(t); }
const char* purpose_name(Purpose p) { return kPurposeNames.name(p); }

bool is_gather(Purpose p) {
  // A gather's output is what compute reads: the full-module buffer the tasks release (core/purposes.h).
  return purpose_rule(p, PurposeContext{}).held == HeldBuffer::module_params;
}

ComputeTask StepShape::task(int index) const {
  if (index >= optimizer_task()) return ComputeTask{TaskKind::optimizer, micro_batches - 1, -1};
  const int per_mb = 2 * modules;
  const int mb = index / per_mb, k = index % per_mb;
  if (k < modules) return ComputeTask{TaskKind::forward, mb, k};
  return ComputeTask{TaskKind::backward, mb, modules - 1 - (k - modules)};
}

std::string StepShape::describe(Point p) const {
  std::string where;
  const int task = p.slot / 2;
  const bool before = p.slot % 2 == 1;
  if (!before && task == task_count()) {
    where = "the end of the step";
  } else {
    const ComputeTask t = this->task(before ? task : task - 1);
    const char* what = t.kind == TaskKind::forward    ? "forward"
                       : t.kind == TaskKind::backward ? "backward"
                                                      : "optimizer";
    where = std::string(before ? "before " : "after ") + what;
    if (t.kind != TaskKind::optimizer)
      where += " of module " + std::to_string(t.module) + " (micro-batch " + std::to_string(t.micro_batch) + ")";
  }
  return p.next_step ? where + " of the next step" : where;
}

double Schedule::message_bytes() const {
  double s = 0;
  for (const auto& op : ops) s += double(op.bytes()) * op.repeat;
  return s;
}
double Schedule::bus_bytes() const {
  double s = 0;
  for (const auto& op : ops) s += op.bus_bytes() * op.repeat;
  return s;
}
double Schedule::bus_bytes(CollKind kind) const {
  double s = 0;
  for (const auto& op : ops)
    if (op.kind == kind) s += op.bus_bytes() * op.repeat;
  return s;
}
double Schedule::bus_bytes(Axis axis) const {
  double s = 0;
  for (const auto& op : ops)
    if (op.axis() == axis) s += op.bus_bytes() * op.repeat;
  return s;
}
double Schedule::message_bytes(CollKind kind, Axis axis) const {
  double s = 0;
  for (const auto& op : ops)
    if (op.kind == kind && op.axis() == axis) s += double(op.bytes()) * op.repeat;
  return s;
}
double Schedule::bus_bytes(Term term) const {
  double s = 0;
  for (const auto& op : ops)
    if (op.term == term) s += op.bus_bytes() * op.repeat;
  return s;
}
int64_t Schedule::op_count() const {
  int64_t n = 0;
  for (const auto& op : ops) n += op.repeat;
  return n;
}

// ---- the builder the engines share ----------------------------------------------------------------------------------

EngineBuilder::EngineBuilder(const ModelSpec& model, Schedule& s) : model_(model), s_(s) {
  for (int r = 0; r < kGroupRoleCount; ++r) {
    role_group_[r] = group_spec(static_cast<GroupRole>(r), s.plan, s.topo);
    role_mesh_[r] = group_mesh(role_group_[r], s.topo, s.options.rank);
  }
}

std::vector<MicroBatchCopy> EngineBuilder::copies() const {
  const int M = micro_batches();
  std::vector<MicroBatchCopy> out;
  if (expanded() || M <= 3) {
    for (int mb = 0; mb < M; ++mb) out.push_back(MicroBatchCopy{mb, 1, mb == 0, mb == M - 1});
    return out;
  }
  out.push_back(MicroBatchCopy{0, 1, true, false});
  out.push_back(MicroBatchCopy{1, M - 2, false, false});
  out.push_back(MicroBatchCopy{M - 1, 1, false, true});
  return out;
}

int EngineBuilder::add(const MicroBatchCopy& c, Phase phase, const OpSpec& spec) {
  const GroupSpec& g = role_group_[static_cast<int>(spec.role)];
  if (g.size() <= 1 || spec.elems == 0) return -1;
  if (c.mb == 1 && expanded() && !ops_reserved_) {
    // The ops so far are about one micro-batch's: room for M of them, and one more for what only the last adds, at
    // once, instead of growing by doubling (each growth moves every op; an expanded step has up to 10^5).
    s_.ops.reserve(s_.ops.size() * static_cast<std::size_t>(micro_batches() + 1));
    ops_reserved_ = true;
  }
  CommOp& op = s_.ops.emplace_back();  // filled in place: the planner builds ~10^5 ops per search
  op.phase = phase;
  op.micro_batch = c.mb;
  op.repeat = c.repeat;
  op.module = spec.module;
  if (spec.label.empty() && spec.module >= 0)
    op.label = model_.modules[static_cast<std::size_t>(spec.module)].name;
  else
    op.label.assign(spec.label);
  if (spec.label_number >= 0) {
    char digits[16];
    const auto end = std::to_chars(digits, digits + sizeof digits, spec.label_number).ptr;
    op.label.append(digits, end);
  }
  op.kind = spec.kind;
  op.term = spec.term;
  op.purpose = spec.purpose;
  op.role = spec.role;
  op.group = g;
  op.mesh = role_mesh_[static_cast<int>(spec.role)];
  op.elems = spec.elems;
  op.local_offset = spec.local_offset;
  op.root = spec.root;
  op.in_place = spec.in_place;
  op.dtype = s_.options.dtype;
  op.stream = spec.stream;
  op.issue = spec.issue;
  op.wait = spec.wait;
  op.after = spec.after;
  op.host_wait = spec.host_wait;
  op.quant = spec.quant;
  op.quant_blocks = spec.quant_blocks;
  return static_cast<int>(s_.ops.size()) - 1;
}

int EngineBuilder::unit_of(int module) const {
  const int layer = model_.modules[static_cast<std::size_t>(module)].layer;
  if (layer < 0) return 0;
  return std::min(layer, model_.dims.layers) + 1;
}

int EngineBuilder::module_at(int64_t offset) const {
  int found = 0;
  for (const auto& ms : layout().modules)
    if (ms.local_offset <= offset && offset < ms.local_offset + ms.shard_elems) found = ms.module;
  return found;
}

Status EngineBuilder::check_budget(int64_t per_copy, const char* what) const {
  const int64_t copies = static_cast<int64_t>(this->copies().size());
  if (per_copy * copies <= kMaxScheduleOps) return {};
  return make_error(std::string(what) + " gives " + std::to_string(per_copy) + " collectives per micro-batch, " +
                    std::to_string(per_copy * copies) + " in the expanded step, more than the " +
                    std::to_string(kMaxScheduleOps) + " allowed; use a larger bucket or fewer micro-batches");
}

Result<std::vector<Bucket>> cut_buckets(const ModelSpec& model, const ShardLayout& layout, const BucketRule& rule) {
  const int64_t cap_elems = std::max<int64_t>(1, rule.cap_elems);
  const int64_t first_cap = rule.first_cap_elems > 0 ? std::min(rule.first_cap_elems, cap_elems) : cap_elems;
  const int64_t total = layout.local_elems;
  // Refused before anything is built: there are at least total / cap buckets.
  if (total / cap_elems + 1 > kMaxOpsPerMicroBatch) {
    const int64_t smallest = (total + kMaxOpsPerMicroBatch - 2) / (kMaxOpsPerMicroBatch - 1);
    auto amount = [&](int64_t elems) {
      return rule.elem_bytes > 0 ? std::to_string(elems * rule.elem_bytes) + " bytes"
                                 : std::to_string(elems) + " elements";
    };
    return make_error(std::string(rule.option) + " of " + amount(cap_elems) + " would cut the local gradient of " +
                      std::to_string(total) + " elements into more than " + std::to_string(kMaxOpsPerMicroBatch) +
                      " buckets per micro-batch; the smallest " + rule.option + " allowed is " + amount(smallest));
  }
  // The pieces a bucket may not split, in local order: tensors (and padding), modules, or one piece per module that
  // buckets may cut anywhere.
  std::vector<OwnedSlice> pieces;
  if (rule.whole_tensors && !rule.whole_modules) {
    pieces = tensor_pieces(model, layout.modules);
  } else {
    for (const auto& ms : layout.modules) pieces.push_back(OwnedSlice{ms.module, ms.local_offset, ms.shard_elems, 0});
  }
  const bool whole = rule.whole_tensors || rule.whole_modules;
  auto module_of = [&](int64_t offset) {
    int found = 0;
    for (const auto& ms : layout.modules)
      if (ms.local_offset <= offset && offset < ms.local_offset + ms.shard_elems) found = ms.module;
    return found;
  };
  std::vector<Bucket> out;
  int64_t open_at = rule.from_start ? 0 : total;  // where the bucket being filled starts (its far end)
  int64_t filled = 0;
  auto cap = [&] { return out.empty() ? first_cap : cap_elems; };
  auto close = [&](int64_t at) {  // the bucket spans from open_at to `at`
    const int64_t lo = std::min(open_at, at), hi = std::max(open_at, at);
    if (hi > lo) out.push_back(Bucket{lo, hi - lo, module_of(lo)});
    open_at = at;
    filled = 0;
  };
  const std::size_t n = pieces.size();
  for (std::size_t k = 0; k < n; ++k) {
    const OwnedSlice& p = pieces[rule.from_start ? k : n - 1 - k];
    const int64_t lo = p.local_offset, hi = p.local_offset + p.elems;
    const int64_t near = rule.from_start ? lo : hi, far = rule.from_start ? hi : lo;
    if (whole) {
      if (filled > 0 && filled + p.elems > cap()) close(near);
      filled += p.elems;
      if (filled >= cap()) close(far);
      continue;
    }
    int64_t at = near;
    int64_t left = p.elems;
    while (left > 0) {
      const int64_t take = std::min(left, cap() - filled);
      at += rule.from_start ? take : -take;
      left -= take;
      filled += take;
      if (filled == cap()) close(at);
    }
  }
  close(rule.from_start ? total : 0);
  return out;
}

// ---- build_schedule -------------------------------------------------------------------------------------------------

namespace {

Status build_engine_ops(EngineBuilder& b) { return engine_row(b.plan().engine).build(b); }

// The overlap modes (the paper's Table V), applied to any engine's points: `none` issues each gather where it is
// needed and waits for every op where it is issued; `no_allreduce` also waits for each all-reduce where it is issued;
// `no_bcast` waits for what spreads the update at the end of the step instead of under the next forward.
void apply_overlap(Schedule& s) {
  const Overlap o = s.options.overlap;
  const Point end = s.shape.end_of_step();
  for (auto& op : s.ops) {
    const bool update = op.purpose == Purpose::update_broadcast || op.purpose == Purpose::update_gather;
    if (update && !overlaps_broadcast(o) && op.wait.next_step) op.wait = end;
    if (o == Overlap::none) {
      if (is_gather(op.purpose))
        op.issue = op.wait;
      else
        op.wait = op.issue;
      continue;
    }
    if (op.kind == CollKind::all_reduce && !overlaps_all_reduce(o)) op.wait = op.issue;
  }
}

}  // namespace

Status check_points(const Schedule& s) {
  const int64_t end = s.shape.end_of_step().order();
  for (std::size_t i = 0; i < s.ops.size(); ++i) {
    const CommOp& op = s.ops[i];
    auto fail = [&](const std::string& why) {
      return make_error("schedule: op " + std::to_string(i) + " (" + purpose_name(op.purpose) + " " + op.label +
                        ", issued " + s.shape.describe(op.issue) + ", waited " + s.shape.describe(op.wait) + ") " +
                        why);
    };
    if (op.issue.next_step || op.issue.order() < 1 || op.issue.order() > end) return fail("is issued outside the step");
    if (op.wait.order() < op.issue.order()) return fail("is waited for before it is issued");
    if (op.wait.next_step && !(op.issue == s.shape.end_of_step()))
      return fail("waits in the next step but is not issued at the end of this one");
    if (op.wait.next_step && op.wait.order() - (int64_t(1) << 32) >= end)
      return fail("is waited for after the end of the next step");
    if (op.stream < 0 || op.stream >= static_cast<int>(s.streams.size())) return fail("runs on an unnamed stream");
    if (op.after >= 0) {
      if (op.after >= static_cast<int>(i)) return fail("runs after an op that is not issued before it");
      const CommOp& dep = s.ops[static_cast<std::size_t>(op.after)];
      if (dep.stream == op.stream) return fail("names an op on its own stream as the one it runs after");
      if (dep.issue.order() > op.issue.order()) return fail("runs after an op that is issued later");
    }
  }
  for (std::size_t t = 0; t < s.task_params.size(); ++t) {
    const TaskParams& tp = s.task_params[t];
    if (tp.source != TaskParams::Source::gathered) continue;
    if (tp.gather_op < 0 || tp.gather_op >= static_cast<int>(s.ops.size()))
      return make_error("schedule: compute task " + std::to_string(t) + " reads a gather that is not in the schedule");
    const CommOp& g = s.ops[static_cast<std::size_t>(tp.gather_op)];
    if (g.wait.order() > StepShape::before(static_cast<int>(t)).order())
      return make_error("schedule: compute task " + std::to_string(t) + " (" +
                        s.shape.describe(StepShape::before(static_cast<int>(t))) + ") reads gather " + g.label +
                        " that is waited for only " + s.shape.describe(g.wait));
  }
  return {};
}

Result<Schedule> build_schedule(const ModelSpec& model, const Plan& plan, const Topology& topo,
                                const ScheduleOptions& options) {
  LINS_TRY(validate_plan(plan, topo));
  if (options.micro_batches < 1)
    return make_error("micro-batches must be at least 1, got " + std::to_string(options.micro_batches));
  if (options.bucket_bytes < 1)
    return make_error("bucket size must be at least 1 byte, got " + std::to_string(options.bucket_bytes));
  if (options.rank < 0 || options.rank >= topo.world())
    return make_error("rank " + std::to_string(options.rank) + " is outside the world of " +
                      std::to_string(topo.world()));
  Schedule s;
  s.plan = plan;
  s.topo = topo;
  s.options = options;
  s.options.engine.bucket_bytes = options.bucket_bytes;
  s.layout = make_layout(model, plan, topo, options.rank);
  s.shape = StepShape{options.micro_batches, static_cast<int>(model.modules.size())};
  if (options.expand_micro_batches) {
    // Bounded before anything is built: the step's compute tasks and the ops of every micro-batch.
    if (int64_t(s.shape.task_count()) * 4 > kMaxScheduleOps)
      return make_error("a step of " + std::to_string(options.micro_batches) + " micro-batches of " +
                        std::to_string(model.modules.size()) + " modules is too long to expand (at most " +
                        std::to_string(kMaxScheduleOps / 4) + " compute tasks)");
    s.task_params.assign(static_cast<std::size_t>(s.shape.task_count()), TaskParams{});
  }
  EngineBuilder b(model, s);
  LINS_TRY(build_engine_ops(b));
  if (s.streams.empty()) s.streams = {"comm"};
  if (s.op_count() > 0 && int64_t(s.ops.size()) > kMaxScheduleOps)
    return make_error("the schedule has " + std::to_string(s.ops.size()) + " ops, more than the " +
                      std::to_string(kMaxScheduleOps) + " allowed; use a larger bucket or fewer micro-batches");
  if (options.expand_micro_batches) {
    apply_overlap(s);
    LINS_TRY(check_points(s));
  }
  return s;
}

}  // namespace lins
