// DeepSpeed's engines (read at tag v0.19.5; MiCS's gradient path as of v0.19.2), at lins's module granularity.
// ZeRO-1/2 (deepspeed/runtime/zero/stage_1_and_2.py): gradients are reduced with an all-reduce of each bucket of whole
// tensors (reduce_bucket_size, 5e8 elements; the default use_multi_rank_bucket_allreduce path of average_tensor), each
// rank then keeping its own partition; overlap_comm is off by default for stages 1 and 2, so each all-reduce runs on
// the compute stream. Stage 2 reduces in every micro-batch, from the gradient hooks (a bucket is flushed when the next
// gradient does not fit, the rest at the end of backward); stage 1 only at the end of the last micro-batch's backward,
// walking the parameters in forward order (reduce_gradients). After the optimizer step one all-gather of the whole
// flat partition (all_gather_dp_groups) on the compute stream.
// ZeRO-3 (stage3.py, partitioned_param_coordinator.py, partition_parameters.py): parameters are gathered per module on
// fetch, the next ones in the recorded trace prefetched up to stage3_prefetch_bucket_size elements; a module used
// again within stage3_max_reuse_distance elements of the trace is not released (no backward gather); modules of at
// most stage3_param_persistence_threshold elements are never gathered in the step and are re-gathered after it.
// Gradients fill buckets (reduce_bucket_size) reduce-scattered on the reduce stream, which shares the process group
// (one NCCL communicator, so one stream) with the all-gathers; before a new bucket the host waits for the bucket three
// back (max_param_reduce_events = 2), and at the end of every micro-batch's backward for all of them. With
// overlap_comm off (on by default in stage 3) the reduce stream is the compute stream: each bucket waited where issued.
// MiCS (mics.py): ZeRO-3 inside the shard group; in the last micro-batch each bucket's accumulated shard is
// all-reduced across the replica group right after its reduce-scatter, ordered on the same reduce stream.
// ZeRO++ hpZ: after the first gather of a module its rank's part of a secondary copy inside the node is kept until the
// optimizer step; every later gather of the step (backward, and the forwards of later micro-batches) reads it.
// ZeRO++ qwZ (zero_quantized_weights, zero3 and zeropp): every parameter gather, from the shards or from the secondary
// copy, sends int8 blocks and their scales (partitioned_param_coordinator.py __all_gather_params passes quantize to
// all_gather_coalesced, whose quantized path all-gathers the values and the scales: partition_parameters.py
// 1457-1494); the update gathers of persistent modules stay unquantized (quantize=False for trainable parameters,
// 1729). qgZ (zero_quantized_gradients): with more than one node, each gradient the reduce-scatter would carry goes
// through all_to_all_quant_reduce (stage3.py 1804-1813; coalesced_collectives.py 31-76), one tensor after another:
// here one module after another, each an all-to-all inside the node and one across nodes, or the plain
// reduce-scatter of that module where DeepSpeed sends its tensors the plain way (core/model/quantization.h).
#include <algorithm>

#include "core/model/quantization.h"
#include "core/schedule/engines.h"

namespace lins {
namespace {

// The backward module whose gradient hook flushes a bucket cut from the end: the one holding the element just below
// it (DeepSpeed flushes when the next gradient does not fit), or -1 when only the end of backward flushes it.
int flush_module(const EngineBuilder& b, const Bucket& k) { return k.offset > 0 ? b.module_at(k.offset - 1) : -1; }

}  // namespace

Status build_deepspeed_zero12_ops(EngineBuilder& b) {
  b.set_streams({"dp"});
  const EngineOptions& e = b.engine();
  const StepShape& shape = b.shape();
  const int stage = zero_stage(b.plan());
  const bool overlap_comm = e.ds_overlap_comm_at(stage);
  BucketRule rule;
  rule.cap_elems = e.ds_reduce_bucket_elems;
  rule.whole_tensors = true;
  rule.from_start = stage == 1 && !overlap_comm;  // reduce_gradients walks the parameters in forward order
  rule.option = "--ds-reduce-bucket";
  auto buckets = cut_buckets(b.model(), b.layout(), rule);
  if (!buckets) return make_error(buckets.error());
  if (auto s = b.check_budget(static_cast<int64_t>(buckets->size()) + 1, "--ds-reduce-bucket"); !s) return s;
  for (const MicroBatchCopy& c : b.copies()) {
    if (stage == 1 && !c.last) continue;  // stage 1 reduces only at the gradient-accumulation boundary
    int previous = -1;
    for (std::size_t i = 0; i < buckets->size(); ++i) {
      const Bucket& k = (*buckets)[i];
      EngineBuilder::OpSpec op;
      op.purpose = Purpose::zero_grad_reduce;
      op.kind = CollKind::all_reduce;
      op.term = c.last ? Term::os_sync : Term::grad;
      op.role = GroupRole::os_shard;
      op.elems = k.elems;
      op.local_offset = k.offset;
      op.label = "bucket ";
      op.label_number = static_cast<int>(i);
      if (stage == 1 && !overlap_comm) {
        op.issue = shape.end_of_backward(c.mb);
      } else {
        const int flush = flush_module(b, k);
        op.issue = flush >= 0 ? shape.after_backward(c.mb, flush) : shape.end_of_backward(c.mb);
      }
      // Without overlap_comm the all-reduce runs on the compute stream; with it, compute waits for a bucket when
      // the next one is flushed, and the host for the last at the end of backward.
      op.wait = overlap_comm ? shape.end_of_backward(c.mb) : op.issue;
      op.host_wait = overlap_comm;  // the host synchronises on the reduction stream (or the bucket's event)
      const int idx = b.add(c, Phase::backward, op);
      if (overlap_comm && previous >= 0 && idx >= 0) b.op(previous).wait = op.issue;
      if (idx >= 0) previous = idx;
    }
  }
  // After the optimizer: the updated partitions all-gathered in one collective, on the compute stream.
  const MicroBatchCopy last{b.micro_batches() - 1, 1, b.micro_batches() == 1, true};
  EngineBuilder::OpSpec op;
  op.purpose = Purpose::update_gather;
  op.kind = CollKind::all_gather;
  op.term = Term::os_bcast;
  op.role = GroupRole::os_shard;
  op.elems = b.layout().local_elems;
  op.issue = shape.end_of_step();
  op.wait = shape.end_of_step();
  op.label = "parameters";
  b.add(last, Phase::optimizer, op);
  return {};
}

Status build_deepspeed_zero3_ops(EngineBuilder& b) {
  const Plan& plan = b.plan();
  const EngineOptions& e = b.engine();
  const ShardLayout& L = b.layout();
  const StepShape& shape = b.shape();
  const int n = b.modules();
  const bool mics = plan.engine == Engine::mics;
  // hpZ over one GPU is DeepSpeed's default (zero_hpz_partition_size = 1): off.
  const bool hpz = plan.engine == Engine::zeropp && b.group_size(GroupRole::hpz) > 1;
  constexpr int kDp = 0, kSecond = 1;
  if (mics)
    b.set_streams({"shard", "replica"});
  else if (hpz)
    b.set_streams({"dp", "hpz"});
  else
    b.set_streams({"dp"});
  // A shard group of one rank (MiCS on one GPU per group) gathers and reduce-scatters nothing; the replica
  // all-reduce still runs.
  const bool sharded = L.shard_count > 1;
  // overlap_comm (on by default in stage 3): the reduce-scatters (and MiCS's replica all-reduces, issued inside the
  // same stream context by partition_grads) run on reduce_and_partition_stream; off, that stream is the default
  // stream, so compute waits for each where it is issued (stage3.py: `Stream() if overlap_comm else
  // default_stream()`).
  const bool overlap_comm = e.ds_overlap_comm_at(3);
  const bool qwz = plan.quantized_weights && !mics;
  // qgZ needs the P shard group to span nodes (DeepSpeed: num_nodes > 1), and here two GPUs a node: with one, the
  // exchange inside the node is a copy that lins leaves out with its quantize and reduce passes, so such a plan
  // reduce-scatters (DeepSpeed would still quantize and requantize on the one GPU).
  const Mesh shard_mesh = b.mesh(GroupRole::p_shard);
  const bool qgz = plan.quantized_gradients && !mics && shard_mesh.inter > 1 && shard_mesh.intra > 1;

  std::vector<int64_t> numel(static_cast<std::size_t>(n));  // full (gathered) elements of each module
  std::vector<bool> persistent(static_cast<std::size_t>(n));
  for (int m = 0; m < n; ++m) {
    numel[static_cast<std::size_t>(m)] = L.modules[static_cast<std::size_t>(m)].padded_elems;
    persistent[static_cast<std::size_t>(m)] =
        sharded && b.model().modules[static_cast<std::size_t>(m)].elems <= e.ds_param_persistence_threshold_elems;
  }
  BucketRule rule;
  rule.cap_elems = e.ds_reduce_bucket_elems / std::max(1, L.shard_count);  // local elements of a full-size bucket
  rule.whole_modules = true;
  rule.option = "--ds-reduce-bucket";
  auto buckets = cut_buckets(b.model(), L, rule);
  if (!buckets) return make_error(buckets.error());
  if (auto s = b.check_budget(static_cast<int64_t>(buckets->size()) * (mics ? 2 : 1) + 2 * n, "--ds-reduce-bucket"); !s)
    return s;

  // The trace DeepSpeed records: every module's forward, then every module's backward.
  struct Use {
    bool forward;
    int module;
  };
  std::vector<Use> trace;
  for (int m = 0; m < n; ++m) trace.push_back({true, m});
  for (int m = n - 1; m >= 0; --m) trace.push_back({false, m});
  // Kept after forward: the module occurs again (in backward) before stage3_max_reuse_distance elements of the trace
  // have been walked from the position after it (PartitionedParameterCoordinator.__params_to_release).
  std::vector<bool> kept(static_cast<std::size_t>(n), false);
  for (int m = 0; m < n; ++m) {
    int64_t walked = 0;
    for (std::size_t pos = static_cast<std::size_t>(m) + 1; pos < trace.size(); ++pos) {
      if (walked >= e.ds_max_reuse_distance_elems) break;
      if (trace[pos].module == m) {
        kept[static_cast<std::size_t>(m)] = true;
        break;
      }
      walked += numel[static_cast<std::size_t>(trace[pos].module)];
    }
  }

  std::vector<bool> has_secondary(static_cast<std::size_t>(n), false);
  for (const MicroBatchCopy& c : b.copies()) {
    const int mb = c.mb;
    auto point_of = [&](const Use& u) {
      return u.forward ? shape.before_forward(mb, u.module) : shape.before_backward(mb, u.module);
    };
    auto task_of = [&](const Use& u) {
      return u.forward ? shape.forward_task(mb, u.module) : shape.backward_task(mb, u.module);
    };
    std::vector<int> inflight(static_cast<std::size_t>(n), -1);  // the gather whose output the module's next use reads
    std::vector<bool> available(static_cast<std::size_t>(n), false);
    auto gather = [&](const Use& u, Point issue) {
      const int m = u.module;
      const bool secondary = hpz && has_secondary[static_cast<std::size_t>(m)];
      EngineBuilder::OpSpec op;
      op.purpose = secondary ? Purpose::hpz_gather : u.forward ? Purpose::forward_gather : Purpose::backward_gather;
      op.kind = CollKind::all_gather;
      op.role = secondary ? GroupRole::hpz : GroupRole::p_shard;
      op.module = m;
      op.elems = numel[static_cast<std::size_t>(m)];
      op.stream = secondary ? kSecond : kDp;
      op.issue = issue;
      op.wait = point_of(u);
      if (qwz) {  // each rank's part quantized in blocks by DeepSpeed's rule; a size it refuses goes the plain way
        const int members = b.group_size(op.role);
        const int64_t blocks = qwz_group_count(op.elems / std::max(1, members));
        if (blocks > 0) op.quant = Quant::int8_blocks, op.quant_blocks = blocks * members;
      }
      inflight[static_cast<std::size_t>(m)] = b.add(c, u.forward ? Phase::forward : Phase::backward, op);
    };
    for (std::size_t pos = 0; pos < trace.size() && sharded; ++pos) {
      const Use u = trace[pos];
      const int m = u.module;
      const bool persists = persistent[static_cast<std::size_t>(m)];
      const Point here = point_of(u);
      if (persists) {
        if (b.expanded()) b.params_of(task_of(u)) = {.source = TaskParams::Source::persistent, .release = false};
      } else if (!available[static_cast<std::size_t>(m)] && inflight[static_cast<std::size_t>(m)] < 0) {
        gather(u, here);
      }
      const int source = inflight[static_cast<std::size_t>(m)];
      // Prefetch, after this module's wait: the next modules of the trace that are neither available nor in flight,
      // until the prefetch bucket is reached (at least one). A persistent module prefetches too: fetch_sub_module
      // starts the prefetches after every module's fetch, whether it gathered anything.
      int64_t prefetching = 0;
      for (std::size_t q = pos + 1; q < trace.size() && prefetching < e.ds_prefetch_bucket_elems; ++q) {
        const int m2 = trace[q].module;
        if (m2 == m) continue;  // this module's own later use depends on its release below
        if (persistent[static_cast<std::size_t>(m2)] || available[static_cast<std::size_t>(m2)] ||
            inflight[static_cast<std::size_t>(m2)] >= 0)
          continue;
        gather(trace[q], here);
        prefetching += numel[static_cast<std::size_t>(m2)];
      }
      if (persists) continue;  // never gathered, never released
      // Release after the use, unless forward keeps it for its backward.
      const bool keep = u.forward && kept[static_cast<std::size_t>(m)];
      const bool make_secondary = hpz && !has_secondary[static_cast<std::size_t>(m)] && !keep;
      if (b.expanded())
        b.params_of(task_of(u)) = {.source = TaskParams::Source::gathered,
                                   .gather_op = source,
                                   .release = !keep,
                                   .keep_hpz_part = make_secondary};
      if (make_secondary) has_secondary[static_cast<std::size_t>(m)] = true;
      available[static_cast<std::size_t>(m)] = keep;
      inflight[static_cast<std::size_t>(m)] = keep ? source : -1;
    }

    // Gradients: buckets of whole modules, cut from the end, each reduce-scattered when the next module's gradient
    // does not fit (or at the end of backward); in the last micro-batch MiCS all-reduces it across the replicas.
    struct BucketOps {
      std::vector<int> ops;  // the bucket's reductions (one, or qgZ's per module), MiCS's all-reduce last
    };
    std::vector<BucketOps> bucket_ops;
    int previous_replica = -1;
    for (std::size_t i = 0; i < buckets->size(); ++i) {
      const Bucket& k = (*buckets)[i];
      const int flush = flush_module(b, k);
      const Point issue = flush >= 0 ? shape.after_backward(mb, flush) : shape.end_of_backward(mb);
      // The host waits for the bucket three back before issuing this one (more than two reduce events in flight).
      // Without overlap_comm every reduction is waited where it is issued, so none is ever in flight.
      if (overlap_comm && i >= 3)
        for (int old : bucket_ops[i - 3].ops) b.op(old).wait = issue;
      EngineBuilder::OpSpec rs;
      rs.purpose = Purpose::grad_reduce_scatter;
      rs.kind = CollKind::reduce_scatter;
      rs.role = GroupRole::p_shard;
      rs.elems = k.elems * L.shard_count;
      rs.local_offset = k.offset;
      rs.stream = kDp;
      rs.issue = issue;
      rs.wait = overlap_comm ? shape.end_of_backward(mb) : issue;
      // Waited by the host: the bucket three back by its event's synchronize(), the rest by the end-of-backward
      // reduce_and_partition_stream.synchronize() (independent_gradient_partition_epilogue).
      rs.host_wait = overlap_comm;
      rs.after = previous_replica;  // the reduce stream is ordered after the previous bucket's all-reduce
      rs.label = "bucket ";
      rs.label_number = static_cast<int>(i);
      BucketOps ops;
      if (!qgz) {
        ops.ops.push_back(b.add(c, Phase::backward, rs));
      } else {
        // qgZ: the bucket's modules one after another, in the order backward produced their gradients.
        for (int m = b.module_at(k.offset + k.elems - 1); m >= 0; --m) {
          const ModuleShard& ms = L.modules[static_cast<std::size_t>(m)];
          if (ms.local_offset < k.offset) break;
          const QgzModuleLayout q =
              qgz_module_layout(b.model(), m, ms.padded_elems, shard_mesh.inter, shard_mesh.intra);
          if (!q.quantized()) {  // this module the plain way: its own reduce-scatter
            EngineBuilder::OpSpec plain = rs;
            plain.elems = ms.padded_elems;
            plain.local_offset = ms.local_offset;
            plain.label = b.model().modules[static_cast<std::size_t>(m)].name;
            plain.label_number = -1;
            ops.ops.push_back(b.add(c, Phase::backward, plain));
            continue;
          }
          const int64_t blocks = q.groups_per_rank * L.shard_count;  // G over the whole module
          EngineBuilder::OpSpec node = rs;
          node.purpose = Purpose::qgz_node_exchange;
          node.kind = CollKind::all_to_all;
          node.role = GroupRole::p_shard_node;
          node.module = m;
          node.elems = ms.padded_elems;  // every value of the module, int4, in G blocks
          node.quant = Quant::int4_blocks;
          node.quant_blocks = blocks;
          node.label = {};
          node.label_number = -1;
          const int node_op = b.add(c, Phase::backward, node);
          EngineBuilder::OpSpec peers = node;
          peers.purpose = Purpose::qgz_peer_exchange;
          peers.role = GroupRole::p_shard_peers;
          peers.elems = ms.padded_elems / shard_mesh.intra;  // the node's reduced sums: 1/R of the module
          peers.quant_blocks = blocks / shard_mesh.intra;  // (the same stream runs it after the node's exchange)
          ops.ops.push_back(node_op);
          ops.ops.push_back(b.add(c, Phase::backward, peers));
        }
      }
      const int last_reduction = ops.ops.empty() ? -1 : ops.ops.back();
      if (mics && c.last) {
        EngineBuilder::OpSpec ar;
        ar.purpose = Purpose::replica_all_reduce;
        ar.kind = CollKind::all_reduce;
        ar.term = Term::os_sync;
        ar.role = GroupRole::p_replica;
        ar.elems = k.elems;
        ar.local_offset = k.offset;
        ar.stream = kSecond;
        ar.issue = issue;
        ar.wait = overlap_comm ? shape.end_of_backward(mb) : issue;
        ar.host_wait = overlap_comm;
        ar.after = last_reduction;
        ar.label = "bucket ";
        ar.label_number = static_cast<int>(i);
        const int all_reduce = b.add(c, Phase::backward, ar);
        ops.ops.push_back(all_reduce);
        if (all_reduce >= 0) previous_replica = all_reduce;
      }
      std::erase(ops.ops, -1);
      bucket_ops.push_back(ops);
    }
  }

  // After the optimizer: each persistent module re-gathered from its updated shard, the host waiting for all.
  const MicroBatchCopy last{b.micro_batches() - 1, 1, b.micro_batches() == 1, true};
  for (int m = 0; m < n; ++m) {
    if (!persistent[static_cast<std::size_t>(m)]) continue;
    EngineBuilder::OpSpec op;
    op.purpose = Purpose::update_gather;
    op.kind = CollKind::all_gather;
    op.term = Term::param;
    op.role = GroupRole::p_shard;
    op.module = m;
    op.elems = numel[static_cast<std::size_t>(m)];
    op.stream = kDp;
    op.issue = shape.end_of_step();
    op.wait = shape.end_of_step();
    if (b.add(last, Phase::optimizer, op) >= 0) b.mark_persistent(m);
  }
  return {};
}

}  // namespace lins
