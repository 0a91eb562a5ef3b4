// PyTorch FSDP2 (torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py, _fsdp_collectives.py, _fsdp_state.py),
// with lins's module (embedding, attention, MLP, head) as the fully_shard unit, wrapped as torchtitan wraps a model
// (parallelize_llama.py apply_fsdp): every unit resharded after forward except the head (final norm and output), kept
// for its backward, which comes right after. Forward: one all-gather per unit on the shard group, the next unit's
// issued while this one computes (FSDP2 has no explicit forward prefetch; the host running ahead of the GPU gives one
// unit); after forward a unit frees its parameters (reshard_after_forward=True), except the head;
// reshard_after_forward=False keeps every unit's, =K keeps a 1/K copy and gathers backward over those K ranks.
// Backward: the next unit's all-gather one ahead (the default backward prefetch); a unit's reduce-scatter after its
// backward, the compute stream waiting for the previous unit's reduce-scatter before issuing the next (post_backward);
// HSDP all-reduces each reduce-scatter's output across the replicas on its own stream; the end of backward waits for
// all (finalize_backward). Every micro-batch synchronises gradients (FSDP2's default).
#include "core/schedule/engines.h"

namespace lins {

Status build_fsdp_ops(EngineBuilder& b) {
  const Plan& plan = b.plan();
  const ShardLayout& L = b.layout();
  const StepShape& shape = b.shape();
  const int n = b.modules();
  constexpr int kShard = 0, kReplicate = 1, kPostForward = 2;
  b.set_streams({"shard", "replicate", "post_forward"});
  if (L.shard_count <= 1 && b.group_size(GroupRole::p_replica) <= 1) return {};
  const bool sharded = L.shard_count > 1;
  const bool partial = plan.hpz_intra > 1;  // reshard_after_forward=K
  // HSDP all-reduces each micro-batch's reduce-scattered shard before it is accumulated.
  b.set_transient_grads(b.group_size(GroupRole::p_replica) > 1);
  auto kept_after_forward = [&](int m) { return m == n - 1; };  // the head
  auto elems_of = [&](int m) { return L.modules[static_cast<std::size_t>(m)].padded_elems; };
  for (const MicroBatchCopy& c : b.copies()) {
    const int mb = c.mb;
    std::vector<int> fwd(static_cast<std::size_t>(n), -1);
    std::vector<bool> kept(static_cast<std::size_t>(n), false);
    if (sharded) {
      for (int m = 0; m < n; ++m) {
        EngineBuilder::OpSpec op;
        op.purpose = Purpose::forward_gather;
        op.kind = CollKind::all_gather;
        op.role = GroupRole::p_shard;
        op.module = m;
        op.elems = elems_of(m);
        op.stream = kShard;
        op.issue = shape.before_forward(mb, m > 0 ? m - 1 : 0);
        op.wait = shape.before_forward(mb, m);
        fwd[static_cast<std::size_t>(m)] = b.add(c, Phase::forward, op);
        kept[static_cast<std::size_t>(m)] = plan.keep_after_forward || kept_after_forward(m);
        if (b.expanded())
          b.params_of(shape.forward_task(mb, m)) = {.source = TaskParams::Source::gathered,
                                                    .gather_op = fwd[static_cast<std::size_t>(m)],
                                                    .release = !kept[static_cast<std::size_t>(m)],
                                                    .keep_hpz_part = partial && !kept[static_cast<std::size_t>(m)]};
      }
    }
    int previous_rs = -1;
    for (int m = n - 1; m >= 0; --m) {
      if (sharded) {
        auto gather = [&](int module, Point issue) {
          if (kept[static_cast<std::size_t>(module)]) return;  // still gathered from forward
          EngineBuilder::OpSpec op;
          op.purpose = partial ? Purpose::hpz_gather : Purpose::backward_gather;
          op.kind = CollKind::all_gather;
          op.role = partial ? GroupRole::hpz : GroupRole::p_shard;
          op.module = module;
          op.elems = elems_of(module);
          op.stream = partial ? kPostForward : kShard;
          op.issue = issue;
          op.wait = shape.before_backward(mb, module);
          const int i = b.add(c, Phase::backward, op);
          if (b.expanded())
            b.params_of(shape.backward_task(mb, module)) = {
                .source = TaskParams::Source::gathered, .gather_op = i, .release = true, .drop_hpz_part = partial};
        };
        if (m == n - 1) gather(m, shape.before_backward(mb, m));
        if (m > 0) gather(m - 1, shape.before_backward(mb, m));  // one unit ahead
        if (kept[static_cast<std::size_t>(m)] && b.expanded())
          b.params_of(shape.backward_task(mb, m)) = {.source = TaskParams::Source::gathered,
                                                     .gather_op = fwd[static_cast<std::size_t>(m)],
                                                     .release = true};
      }
      // The compute stream waits for the previous unit's reduce-scatter before this unit's is issued.
      if (previous_rs >= 0) b.op(previous_rs).wait = shape.after_backward(mb, m);
      EngineBuilder::OpSpec rs;
      rs.purpose = Purpose::grad_reduce_scatter;
      rs.kind = CollKind::reduce_scatter;
      rs.role = GroupRole::p_shard;
      rs.module = m;
      rs.elems = elems_of(m);
      rs.local_offset = L.modules[static_cast<std::size_t>(m)].local_offset;
      rs.stream = kShard;
      rs.issue = shape.after_backward(mb, m);
      rs.wait = shape.end_of_backward(mb);
      const int rs_index = b.add(c, Phase::backward, rs);
      if (rs_index >= 0) previous_rs = rs_index;
      EngineBuilder::OpSpec ar;
      ar.purpose = Purpose::replica_all_reduce;
      ar.kind = CollKind::all_reduce;
      ar.term = c.last ? Term::os_sync : Term::grad;
      ar.role = GroupRole::p_replica;
      ar.module = m;
      ar.elems = L.modules[static_cast<std::size_t>(m)].shard_elems;
      ar.local_offset = L.modules[static_cast<std::size_t>(m)].local_offset;
      ar.stream = kReplicate;
      ar.issue = shape.after_backward(mb, m);
      ar.wait = shape.end_of_backward(mb);
      ar.after = rs_index;
      b.add(c, Phase::backward, ar);
    }
  }
  return {};
}

}  // namespace lins
