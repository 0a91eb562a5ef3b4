// The Lins engine (the paper's section on the executor): any legal 6-tuple.
// - Stream "params" (the P shard group): forward gathers one layer ahead; backward gathers one module ahead; each
//   module's reduce-scatter right after its backward, waited two modules later (decoupled: backward does not stop for
//   it, and at most three whole-module gradients are in flight).
// - Stream "grads" (its own communicators): bucketed all-reduce of the gradient (T_g in micro-batches but the last when
//   s_g > s_p, the OS sync in the last) as soon as backward has produced a bucket, each rank then keeping the part it
//   owns (select & drop); after the optimizer, each owner broadcasts its updated slices module by module, and the
//   next step's forward of a module waits only for that module's broadcasts.
#include <algorithm>
#include <map>

#include "core/schedule/engines.h"

namespace lins {

Status build_lins_ops(EngineBuilder& b) {
  b.set_streams({"params", "grads"});
  constexpr int kParams = 0, kGrads = 1;
  const ShardLayout& L = b.layout();
  const StepShape& shape = b.shape();
  const Plan& plan = b.plan();
  const int n = b.modules();
  const bool sharded = L.shard_count > 1;
  const bool t_g = plan.g.total() > plan.p.total();
  b.set_transient_grads(t_g);
  BucketRule rule;
  rule.cap_elems = b.engine().bucket_bytes / dtype_bytes(b.options().dtype);
  rule.option = "--bucket";
  rule.elem_bytes = dtype_bytes(b.options().dtype);
  auto buckets = cut_buckets(b.model(), L, rule);
  if (!buckets) return make_error(buckets.error());
  if (auto s = b.check_budget(static_cast<int64_t>(buckets->size()) + 3 * n, "--bucket"); !s) return s;

  // The first module of each forward-prefetch unit (embedding, each layer, head).
  auto first_of_unit = [&](int unit) {
    for (int m = 0; m < n; ++m)
      if (b.unit_of(m) == unit) return m;
    return 0;
  };
  std::vector<int> forward_gather_issue(static_cast<std::size_t>(n), -1);  // the next step reads these (broadcasts)
  for (const MicroBatchCopy& c : b.copies()) {
    const int mb = c.mb;
    std::vector<int> fwd(static_cast<std::size_t>(n), -1), rs(static_cast<std::size_t>(n), -1);
    if (sharded) {
      for (int m = 0; m < n; ++m) {
        EngineBuilder::OpSpec op;
        op.purpose = Purpose::forward_gather;
        op.kind = CollKind::all_gather;
        op.role = GroupRole::p_shard;
        op.module = m;
        op.elems = L.modules[static_cast<std::size_t>(m)].padded_elems;
        op.stream = kParams;
        const int unit = b.unit_of(m);
        op.issue = shape.before_forward(mb, unit > 0 ? first_of_unit(unit - 1) : m);  // one layer ahead
        op.wait = shape.before_forward(mb, m);
        fwd[static_cast<std::size_t>(m)] = b.add(c, Phase::forward, op);
        if (b.expanded())
          b.params_of(shape.forward_task(mb, m)) = {.source = TaskParams::Source::gathered,
                                                    .gather_op = fwd[static_cast<std::size_t>(m)],
                                                    .release = true};
      }
      if (mb == 0) forward_gather_issue = fwd;
    }
    // Backward, last module first: the gather of the module that runs next is issued when this one's backward
    // starts; this module's reduce-scatter and the buckets it completes follow its backward.
    std::size_t next_bucket = 0;
    for (int m = n - 1; m >= 0; --m) {
      if (sharded) {
        auto gather = [&](int module, Point issue) {
          EngineBuilder::OpSpec op;
          op.purpose = Purpose::backward_gather;
          op.kind = CollKind::all_gather;
          op.role = GroupRole::p_shard;
          op.module = module;
          op.elems = L.modules[static_cast<std::size_t>(module)].padded_elems;
          op.stream = kParams;
          op.issue = issue;
          op.wait = shape.before_backward(mb, module);
          const int i = b.add(c, Phase::backward, op);
          if (b.expanded())
            b.params_of(shape.backward_task(mb, module)) = {
                .source = TaskParams::Source::gathered, .gather_op = i, .release = true};
        };
        if (m == n - 1) gather(m, shape.before_backward(mb, m));
        if (m > 0) gather(m - 1, shape.before_backward(mb, m));  // one module ahead
        EngineBuilder::OpSpec op;
        op.purpose = Purpose::grad_reduce_scatter;
        op.kind = CollKind::reduce_scatter;
        op.role = GroupRole::p_shard;
        op.module = m;
        op.elems = L.modules[static_cast<std::size_t>(m)].padded_elems;
        op.stream = kParams;
        op.issue = shape.after_backward(mb, m);
        // Decoupled: backward moves on, and waits for this reduce-scatter only two modules later, when its whole-module
        // gradient buffer is to be freed (at most three in flight).
        op.wait = m >= 2 ? shape.after_backward(mb, m - 2) : shape.end_of_backward(mb);
        rs[static_cast<std::size_t>(m)] = b.add(c, Phase::backward, op);
      }
      for (; next_bucket < buckets->size() && (*buckets)[next_bucket].ready_module == m; ++next_bucket) {
        const Bucket& k = (*buckets)[next_bucket];
        if (!c.last && !t_g) continue;  // s_g == s_p: gradients accumulate locally until the last micro-batch
        EngineBuilder::OpSpec op;
        op.purpose = c.last ? Purpose::sync_bucket_all_reduce : Purpose::grad_bucket_all_reduce;
        op.kind = CollKind::all_reduce;
        op.term = c.last ? Term::os_sync : Term::grad;
        op.role = c.last ? GroupRole::p_replica : GroupRole::g_replica;
        op.elems = k.elems;
        op.local_offset = k.offset;
        op.stream = kGrads;
        op.issue = shape.after_backward(mb, m);
        op.wait = shape.end_of_backward(mb);
        op.after = sharded ? rs[static_cast<std::size_t>(m)] : -1;  // reads the reduce-scatters that fill it
        op.label = "bucket ";
        op.label_number = static_cast<int>(next_bucket);
        b.add(c, Phase::backward, op);
      }
    }
  }

  // Each owner broadcasts its updated slices to the ranks holding the same P shard, module by module in forward
  // order. Per module, only the slices that overlap it (a range slice may span modules) and so only the owners that
  // hold part of it: the planner builds this for up to world-size owners.
  const MicroBatchCopy last{b.micro_batches() - 1, 1, b.micro_batches() == 1, true};
  int64_t broadcasts = 0;  // at most one per (module, slice overlapping it), counted before any is built
  for (const auto& ms : L.modules) broadcasts += L.count_slices_in(ms.local_offset, ms.local_offset + ms.shard_elems);
  if (broadcasts > kMaxOpsPerMicroBatch)
    return make_error("the update broadcasts of " + std::to_string(L.owner_count) +
                      " optimizer-state owners would be " + std::to_string(broadcasts) + " collectives per step, " +
                      "more than the " + std::to_string(kMaxOpsPerMicroBatch) +
                      " allowed; give fewer owners (a smaller os factor over p) or layout=inter");
  struct OwnerPart {
    int64_t elems = 0, first = -1, last = -1;  // elements, and the local range they span
  };
  for (const auto& ms : L.modules) {
    const int64_t lo = ms.local_offset, hi = ms.local_offset + ms.shard_elems;
    std::map<int, OwnerPart> part;  // owners broadcast in index order
    for (const auto& sl : L.slices_in(lo, hi)) {
      const int64_t a = std::max(lo, sl.local_offset), z = std::min(hi, sl.local_offset + sl.elems);
      if (a >= z) continue;
      OwnerPart& p = part[sl.owner];
      if (p.elems == 0) p.first = a;
      p.elems += z - a;
      p.last = z;
    }
    // The next step waits for a module's broadcasts where it first reads the module's P: before issuing its forward
    // gather, or before its forward when P is not sharded.
    const int g = forward_gather_issue[static_cast<std::size_t>(ms.module)];
    const Point reader = sharded && g >= 0 ? b.op(g).issue : shape.before_forward(0, ms.module);
    for (const auto& [owner, p] : part) {
      EngineBuilder::OpSpec op;
      op.purpose = Purpose::update_broadcast;
      op.kind = CollKind::broadcast;
      op.term = Term::os_bcast;
      op.role = GroupRole::os_replica;
      op.module = ms.module;
      op.elems = p.elems;
      op.in_place = p.last - p.first == p.elems;  // one contiguous range: broadcast where it lies
      op.local_offset = op.in_place ? p.first : ms.local_offset;
      op.root = owner;
      op.stream = kGrads;
      op.issue = shape.end_of_step();
      op.wait = StepShape::in_next_step(reader);
      b.add(last, Phase::next_forward, op);
    }
  }
  return {};
}

}  // namespace lins
