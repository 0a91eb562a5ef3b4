// The step time line of simulator.h: a compute cursor and one communication stream, with the executor's issue and
// wait points.
#include "core/simulator.h"

#include <algorithm>
#include <map>
#include <vector>

namespace lins {

double module_forward_flops(const ModelSpec& model, int module, double tokens, int seq) {
  const auto& m = model.modules[module];
  if (m.kind == "embed") return 0.0;  // a gather, no matmul
  double flops = 0;
  for (int t : m.tensors)
    if (model.tensors[t].shape.size() == 2) flops += 2.0 * double(model.tensors[t].elems) * tokens;
  if (m.kind == "attn") flops += 4.0 * double(seq) * model.dims.hidden * tokens;
  return flops;
}

namespace {

constexpr double kOptimizerBytesPerElem = 3 * 4 * 2 + 2 + 2;  // master, m, v read+write; grad read; param write

struct Timeline {
  const std::function<double(const CommOp&)>& price;
  double comm_free = 0;  // when the communication stream is next idle
  double busy = 0;
  // Runs an op issued at `issue`; returns when it completes.
  double run(const CommOp& op, double issue) {
    const double d = price(op);
    const double start = std::max(issue, comm_free);
    comm_free = start + d;
    busy += d;
    return comm_free;
  }
};

}  // namespace

StepProjection project_step(const Schedule& s, const ModelSpec& model, int seq, int micro_batch_size, bool recompute,
                            Overlap overlap, const ComputeRates& rates,
                            const std::function<double(const CommOp&)>& op_seconds) {
  StepProjection out;
  const int n_mod = static_cast<int>(model.modules.size());
  const double tokens = double(seq) * micro_batch_size;
  std::vector<double> fwd(n_mod), bwd(n_mod);
  for (int i = 0; i < n_mod; ++i) {
    fwd[i] = module_forward_flops(model, i, tokens, seq) / rates.sustained_flops_per_s;
    bwd[i] = 2 * fwd[i] + (recompute ? fwd[i] : 0);
  }
  // Group the expanded ops by (phase, micro-batch).
  const int M = s.options.micro_batches;
  std::vector<std::vector<const CommOp*>> fwd_ops(M), bwd_ops(M);
  std::vector<const CommOp*> opt_ops, bcast_ops;
  for (const auto& op : s.ops) {
    if (op.phase == Phase::forward) fwd_ops[op.micro_batch].push_back(&op);
    if (op.phase == Phase::backward) bwd_ops[op.micro_batch].push_back(&op);
    if (op.phase == Phase::optimizer) opt_ops.push_back(&op);
    if (op.phase == Phase::next_forward) bcast_ops.push_back(&op);
  }
  Timeline tl{op_seconds};
  const bool prefetch = overlaps_gathers(overlap);
  double t = 0;  // compute cursor

  // Broadcasts of the previous step's update open this step (steady state).
  std::map<int, double> bcast_done;  // module -> when its broadcasts are in
  for (const CommOp* op : bcast_ops) bcast_done[op->module] = tl.run(*op, 0.0);
  if (!overlaps_broadcast(overlap))
    for (auto& [m, done] : bcast_done) t = std::max(t, done);

  auto layer_of = [&](int module) { return model.modules[module].layer; };
  for (int mb = 0; mb < M; ++mb) {
    // Forward: gathers of layer k are issued when layer k-1 starts computing (one layer ahead).
    std::map<int, double> gathered;  // module -> gather done
    std::size_t next_op = 0;
    auto issue_layer = [&](int layer, double when) {
      while (next_op < fwd_ops[mb].size() && layer_of(fwd_ops[mb][next_op]->module) <= layer) {
        gathered[fwd_ops[mb][next_op]->module] = tl.run(*fwd_ops[mb][next_op], when);
        ++next_op;
      }
    };
    int current_layer = -2;
    for (int i = 0; i < n_mod; ++i) {
      if (prefetch && layer_of(i) != current_layer) {
        current_layer = layer_of(i);
        issue_layer(current_layer + 1, t);
      }
      if (!prefetch && next_op < fwd_ops[mb].size() && fwd_ops[mb][next_op]->module == i) {
        gathered[i] = tl.run(*fwd_ops[mb][next_op], t);
        ++next_op;
      }
      if (auto g = gathered.find(i); g != gathered.end()) t = std::max(t, g->second);
      if (mb == 0)
        if (auto b = bcast_done.find(i); b != bcast_done.end()) t = std::max(t, b->second);
      t += fwd[i];
      out.forward_s += fwd[i];
    }
    // Backward, last module first; ops of a module are in schedule order: gather, reduce-scatter, syncs.
    std::map<int, std::vector<const CommOp*>> by_module;
    std::vector<std::pair<int, const CommOp*>> buckets;  // (module after which it is ready, op)
    {
      int last_module = n_mod;  // the module whose backward most recently finished, in schedule order
      for (const CommOp* op : bwd_ops[mb]) {
        if (op->module >= 0) {
          by_module[op->module].push_back(op);
          last_module = op->module;
        } else {
          buckets.push_back({last_module, op});
        }
      }
      // A bucket listed before any module op belongs after the first module in backward order (the head).
      for (auto& b : buckets)
        if (b.first == n_mod) b.first = n_mod - 1;
    }
    double pending_done = t;  // everything this micro-batch issued must finish before its gradients are reused
    auto gather_of = [&](int module) -> const CommOp* {
      auto it = by_module.find(module);
      if (it == by_module.end()) return nullptr;
      for (const CommOp* op : it->second)
        if (op->kind == CollKind::all_gather) return op;
      return nullptr;
    };
    // With prefetch, module i's gather is issued when module i+1 starts its backward (the head's at the start);
    // without, right where it is needed.
    double gather_done = 0;
    if (prefetch)
      if (const CommOp* g = gather_of(n_mod - 1)) gather_done = tl.run(*g, t);
    std::size_t bucket_cursor = 0;
    for (int i = n_mod - 1; i >= 0; --i) {
      if (!prefetch)
        if (const CommOp* g = gather_of(i)) gather_done = tl.run(*g, t);
      t = std::max(t, gather_done);
      gather_done = 0;
      if (prefetch && i > 0)
        if (const CommOp* g = gather_of(i - 1)) gather_done = tl.run(*g, t);
      t += bwd[i];
      out.backward_s += bwd[i];
      double shard_ready = t;
      for (const CommOp* op : by_module[i]) {
        if (op->kind == CollKind::all_gather) continue;
        const double done = tl.run(*op, shard_ready);
        if (op->kind == CollKind::reduce_scatter && op->role == GroupRole::p_shard) shard_ready = done;
        pending_done = std::max(pending_done, done);
        const bool blocking = !prefetch || (op->kind == CollKind::all_reduce && !overlaps_all_reduce(overlap));
        if (blocking) t = std::max(t, done);
      }
      while (bucket_cursor < buckets.size() && buckets[bucket_cursor].first == i) {
        const double done = tl.run(*buckets[bucket_cursor].second, shard_ready);
        pending_done = std::max(pending_done, done);
        if (!overlaps_all_reduce(overlap)) t = std::max(t, done);
        ++bucket_cursor;
      }
    }
    t = std::max(t, pending_done);
  }
  // Optimizer on the owned shard, then (ZeRO-1/2) the blocking parameter all-gathers.
  const double owned = double(s.layout.owned_elems());
  out.optimizer_s = owned * kOptimizerBytesPerElem / rates.optimizer_bytes_per_s;
  t += out.optimizer_s;
  for (const CommOp* op : opt_ops) t = std::max(t, tl.run(*op, t));
  out.step_s = t;
  out.comm_busy_s = tl.busy;
  out.exposed_comm_s = std::max(0.0, out.step_s - out.forward_s - out.backward_s - out.optimizer_s);
  return out;
}

}  // namespace lins
