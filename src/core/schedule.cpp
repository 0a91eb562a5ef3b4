// Builds the per-step collective schedule of every engine; see schedule.h and PAPER.md section 4.
#include "core/schedule.h"

#include <algorithm>
#include <charconv>
#include <iterator>
#include <string_view>

namespace lins {

const char* phase_name(Phase p) {
  switch (p) {
    case Phase::forward:
      return "forward";
    case Phase::backward:
      return "backward";
    case Phase::optimizer:
      return "optimizer";
    case Phase::next_forward:
      return "next_forward";
  }
  return "?";
}

const char* coll_kind_name(CollKind k) {
  switch (k) {
    case CollKind::all_gather:
      return "all_gather";
    case CollKind::reduce_scatter:
      return "reduce_scatter";
    case CollKind::all_reduce:
      return "all_reduce";
    case CollKind::broadcast:
      return "broadcast";
  }
  return "?";
}

const char* term_name(Term t) {
  switch (t) {
    case Term::param:
      return "param";
    case Term::grad:
      return "grad";
    case Term::os_sync:
      return "os_sync";
    case Term::os_bcast:
      return "os_bcast";
  }
  return "?";
}

const char* dtype_name(DType d) { return d == DType::fp32 ? "fp32" : "bf16"; }
const char* axis_name(Axis a) { return a == Axis::intra ? "intra" : "inter"; }
int dtype_bytes(DType d) { return d == DType::fp32 ? 4 : 2; }

double bus_factor(CollKind kind, int n) {
  if (n <= 1) return 0.0;
  switch (kind) {
    case CollKind::all_reduce:
      return 2.0 * (n - 1) / n;
    case CollKind::all_gather:
    case CollKind::reduce_scatter:
      return double(n - 1) / n;
    case CollKind::broadcast:
      return 1.0;
  }
  return 0.0;
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

namespace {

struct Builder {
  const ModelSpec& model;
  const Plan& plan;
  const Topology& topo;
  const ScheduleOptions& opt;
  const ShardLayout& layout;
  std::vector<CommOp>& ops;
  // Group and mesh of each role, computed once per schedule (the planner builds thousands of ops per plan).
  GroupSpec role_group[kGroupRoleCount];
  Mesh role_mesh[kGroupRoleCount];

  void init_roles() {
    for (int r = 0; r < kGroupRoleCount; ++r) {
      role_group[r] = group_spec(static_cast<GroupRole>(r), plan, topo);
      role_mesh[r] = group_mesh(role_group[r], topo, opt.rank);
    }
  }

  // Appends an op unless its group is a single rank.
  // The label is `label` followed by `label_number` when that is not negative ("bucket 5"), written straight into the
  // op: the planner builds ~10^5 ops per search and temporary strings showed up in its profile.
  void add(Phase phase, int mb, int repeat, int module, std::string_view label, int label_number, CollKind kind,
           Term term, GroupRole role, int64_t elems, int64_t local_offset = 0, int root = 0) {
    const GroupSpec& g = role_group[static_cast<int>(role)];
    if (g.size() <= 1 || elems == 0) return;
    CommOp& op = ops.emplace_back();  // filled in place: no second copy of the op
    op.phase = phase;
    op.micro_batch = mb;
    op.repeat = repeat;
    op.module = module;
    op.label.assign(label);
    if (label_number >= 0) {
      char digits[16];
      const auto end = std::to_chars(digits, digits + sizeof digits, label_number).ptr;
      op.label.append(digits, end);
    }
    op.kind = kind;
    op.term = term;
    op.role = role;
    op.group = g;
    op.mesh = role_mesh[static_cast<int>(role)];
    op.elems = elems;
    op.local_offset = local_offset;
    op.root = root;
    op.dtype = opt.dtype;
  }

  void micro_batch(int mb, int repeat, bool last) {
    const bool p_sharded = layout.shard_count > 1;
    const auto& mods = layout.modules;
    auto mname = [&](int m) -> std::string_view { return model.modules[m].name; };

    // Forward: gather each module's parameters before it runs.
    if (p_sharded)
      for (const auto& ms : mods)
        add(Phase::forward, mb, repeat, ms.module, mname(ms.module), -1, CollKind::all_gather, Term::param,
            GroupRole::p_shard, ms.padded_elems);

    // Backward, last module first.
    const int64_t bucket_elems = std::max<int64_t>(1, opt.bucket_bytes / dtype_bytes(opt.dtype));
    int64_t next_bucket_end = layout.local_elems;
    int bucket_id = 0;
    const bool lins_like = plan.engine == Engine::lins || plan.engine == Engine::ddp;
    const int stage = zero_stage(plan);
    // Next-module prefetch (PAPER.md section 6): the gather of the module that runs next in backward is issued when
    // this module's backward starts, so it is listed before this module's reduce-scatter and gradient syncs.
    const GroupRole bwd_gather = plan.engine == Engine::zeropp ? GroupRole::hpz : GroupRole::p_shard;
    auto gather_for_backward = [&](const ModuleShard& ms) {
      add(Phase::backward, mb, repeat, ms.module, mname(ms.module), -1, CollKind::all_gather, Term::param, bwd_gather,
          ms.padded_elems);
    };
    if (p_sharded && !mods.empty()) gather_for_backward(mods.back());
    for (auto it = mods.rbegin(); it != mods.rend(); ++it) {
      const auto& ms = *it;
      if (p_sharded) {
        if (std::next(it) != mods.rend()) gather_for_backward(*std::next(it));
        add(Phase::backward, mb, repeat, ms.module, mname(ms.module), -1, CollKind::reduce_scatter, Term::param,
            GroupRole::p_shard, ms.padded_elems);
      }
      if (plan.engine == Engine::zero && stage == 2)
        add(Phase::backward, mb, repeat, ms.module, mname(ms.module), -1, CollKind::reduce_scatter,
            last ? Term::os_sync : Term::grad, GroupRole::os_shard, ms.padded_elems);
      if (plan.engine == Engine::zero && stage == 1 && last)
        add(Phase::backward, mb, repeat, ms.module, mname(ms.module), -1, CollKind::reduce_scatter, Term::os_sync,
            GroupRole::os_shard, ms.padded_elems);
      if (plan.engine == Engine::mics && last)
        add(Phase::backward, mb, repeat, ms.module, mname(ms.module), -1, CollKind::all_reduce, Term::os_sync,
            GroupRole::p_replica, ms.shard_elems, ms.local_offset);
      if (lins_like) {
        // Buckets are cut from the end of the local gradient buffer; a bucket goes out once backward has produced
        // every element of it.
        while (next_bucket_end > 0 && std::max<int64_t>(0, next_bucket_end - bucket_elems) >= ms.local_offset) {
          const int64_t start = std::max<int64_t>(0, next_bucket_end - bucket_elems);
          const int id = bucket_id++;  // the label is made only for an op that is kept
          if (last)
            add(Phase::backward, mb, repeat, -1, "bucket ", id, CollKind::all_reduce, Term::os_sync,
                GroupRole::p_replica, next_bucket_end - start, start);
          else if (plan.g.total() > plan.p.total())
            add(Phase::backward, mb, repeat, -1, "bucket ", id, CollKind::all_reduce, Term::grad, GroupRole::g_replica,
                next_bucket_end - start, start);
          next_bucket_end = start;
        }
      }
    }
  }

  void after_step() {
    if (plan.engine == Engine::zero && zero_stage(plan) < 3)
      for (const auto& ms : layout.modules)
        add(Phase::optimizer, opt.micro_batches - 1, 1, ms.module, model.modules[ms.module].name, -1,
            CollKind::all_gather, Term::os_bcast, GroupRole::os_shard, ms.padded_elems);
    if (plan.engine == Engine::lins || plan.engine == Engine::ddp) {
      // Each owner broadcasts its updated slices to the ranks holding the same P shard, module by module in forward
      // order, so the next step's forward of a module waits only for that module's broadcasts (PAPER.md section 6).
      // One sweep over the slices (they are in local-buffer order; a range slice may span modules), touching only
      // the owners that hold part of each module: the planner builds this for up to world-size owners.
      std::vector<int64_t> per_owner(layout.owner_count, 0);
      std::vector<int> touched;
      std::size_t first = 0;
      const auto& slices = layout.slices;
      for (const auto& ms : layout.modules) {
        const int64_t lo = ms.local_offset, hi = ms.local_offset + ms.shard_elems;
        while (first < slices.size() && slices[first].local_offset + slices[first].elems <= lo) ++first;
        for (std::size_t j = first; j < slices.size() && slices[j].local_offset < hi; ++j) {
          const auto& sl = slices[j];
          const int64_t a = std::max(lo, sl.local_offset), b = std::min(hi, sl.local_offset + sl.elems);
          if (a >= b) continue;
          if (per_owner[sl.owner] == 0) touched.push_back(sl.owner);
          per_owner[sl.owner] += b - a;
        }
        std::sort(touched.begin(), touched.end());  // owners broadcast in index order
        for (int owner : touched) {
          add(Phase::next_forward, opt.micro_batches - 1, 1, ms.module, model.modules[ms.module].name, -1,
              CollKind::broadcast, Term::os_bcast, GroupRole::os_replica, per_owner[owner], ms.local_offset, owner);
          per_owner[owner] = 0;
        }
        touched.clear();
      }
    }
  }
};

}  // namespace

Result<Schedule> build_schedule(const ModelSpec& model, const Plan& plan, const Topology& topo,
                                const ScheduleOptions& options) {
  if (auto s = validate_plan(plan, topo); !s) return make_error(s.error());
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
  s.layout = make_layout(model, plan, topo, options.rank);
  Builder b{model, plan, topo, s.options, s.layout, s.ops, {}, {}};
  b.init_roles();
  const int M = options.micro_batches;
  {
    // Reserve once: per micro-batch copy up to three ops per module and one per bucket; then the broadcasts.
    const int64_t bucket_elems = std::max<int64_t>(1, options.bucket_bytes / dtype_bytes(options.dtype));
    const int64_t per_mb = 3 * int64_t(s.layout.modules.size()) + s.layout.local_elems / bucket_elems + 2;
    const int64_t copies = options.expand_micro_batches ? M : std::min(M, 2);
    const int64_t after = int64_t(s.layout.slices.size()) + 2 * int64_t(s.layout.modules.size());
    s.ops.reserve(static_cast<std::size_t>(std::min<int64_t>(per_mb * copies + after, int64_t(1) << 22)));
  }
  if (options.expand_micro_batches || M == 1) {
    for (int m = 0; m < M; ++m) b.micro_batch(m, 1, m == M - 1);
  } else {
    b.micro_batch(kEveryButLast, M - 1, false);
    b.micro_batch(M - 1, 1, true);
  }
  b.after_step();
  return s;
}

}  // namespace lins
