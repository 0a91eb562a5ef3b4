// Memory model; see memory_model.h. Every assumption is stated where it is used.
#include "core/memory_model.h"

#include <algorithm>
#include <vector>

#include "core/plan.h"
#include "core/timeline.h"

namespace lins {

double activation_bytes(const ModelSpec& model, int seq, int micro_batch_size, bool recompute) {
  const double s = seq, b = micro_batch_size, h = model.dims.hidden, L = model.dims.layers, V = model.dims.vocab;
  // Megatron-LM (Korthikanti et al. 2022) per layer in bf16: sbh(34 + 5as/h); FlashAttention never materialises
  // the a*s*s attention scores, which leaves 34*s*b*h bytes per layer (the paper's memory analysis does the same). The
  // SwiGLU MLP keeps a few more tensors than GPT's GeLU MLP; the estimate ignores that, as the paper's source does.
  const double layer = 34.0 * s * b * h;
  // Full recomputation keeps only each layer's input (bf16, 2*s*b*h) and re-runs one layer at a time in backward,
  // so one layer's full working set is alive on top of the checkpoints.
  const double layers = recompute ? L * 2.0 * s * b * h + layer : L * layer;
  // Logits: bf16 [s*b, V] kept for backward plus an fp32 copy inside the cross-entropy (assumption: the loss is not
  // fused and not chunked), 6 bytes per logit.
  const double logits = 6.0 * s * b * V;
  return layers + logits;
}

StateBytes executor_state_bytes(DType storage, DType compute) {
  StateBytes b = storage == DType::bf16 ? StateBytes{2, 2, 12} : StateBytes{4, 4, 12};
  b.activation = dtype_bytes(compute);
  b.weight_grad = 4;
  return b;
}

namespace {

// The closed form (compressed schedules, the planner's Lins-engine plans):
// (1) Gathered parameters when P is sharded: forward prefetches the whole next layer while one runs, so two
//     consecutive "units" (embedding, each layer = attn + mlp, head) are gathered at once; backward holds the module
//     running and the next module prefetched, and the whole gradients of up to three modules whose reduce-scatters are
//     in flight (waited two modules later), i.e. two modules' parameters plus three modules' gradients. With
//     recomputation the re-gathered layer is kept until its backward, which the two-unit bound already covers.
// (1b) Working copies of the one module that computes: its parameters converted to the compute dtype when that
//     differs from P's storage, and, in backward, a scratch for its weight gradient when the backward writes a wider
//     dtype than G's storage.
// (2) Gradient buckets: the largest all-reduce bucket of the schedule, double-buffered (one filling while the
//     previous one is reduced); the transient gradient when each micro-batch is all-reduced before it is kept.
double closed_form_buffer_bytes(const Schedule& s, const ModelSpec& model, const StateBytes& b) {
  const ShardLayout& L = s.layout;
  const bool p_sharded = L.shard_count > 1;
  const bool grad_full = p_sharded || (s.plan.engine == Engine::zero && zero_stage(s.plan) == 2);
  const double copy_bytes = b.activation != b.p ? b.activation : 0.0;
  const double scratch_bytes = b.weight_grad != b.g ? b.weight_grad : 0.0;
  std::vector<int64_t> units;  // padded elements per unit, forward order
  int64_t max_module = 0;
  double working_fwd = 0, working_bwd = 0;
  int last_layer = -2;
  for (const auto& ms : L.modules) {
    const int layer = model.modules[static_cast<std::size_t>(ms.module)].layer;
    const bool is_layer = layer >= 0 && layer < model.dims.layers;
    if (is_layer && layer == last_layer) {
      units.back() += ms.padded_elems;
    } else {
      units.push_back(ms.padded_elems);
    }
    last_layer = is_layer ? layer : -2;
    max_module = std::max(max_module, ms.padded_elems);
    const double param_elems = double(p_sharded ? ms.padded_elems : ms.shard_elems);
    const double grad_elems = double(grad_full ? ms.padded_elems : ms.shard_elems);
    working_fwd = std::max(working_fwd, param_elems * copy_bytes);
    working_bwd = std::max(working_bwd, param_elems * copy_bytes + grad_elems * scratch_bytes);
  }
  double gathered_fwd = 0, gathered_bwd = 0;
  if (p_sharded) {
    int64_t forward = units.empty() ? 0 : units[0];
    for (std::size_t i = 1; i < units.size(); ++i) forward = std::max(forward, units[i - 1] + units[i]);
    gathered_fwd = double(forward) * b.p;
    gathered_bwd = double(max_module) * (2.0 * b.p + 3.0 * b.g);
  }
  double out = std::max(gathered_fwd + working_fwd, gathered_bwd + working_bwd);
  int64_t bucket = 0;
  for (const auto& op : s.ops)
    if (op.kind == CollKind::all_reduce && op.module < 0) bucket = std::max(bucket, op.bytes());
  out += 2.0 * double(bucket);
  if (s.plan.g.total() > s.plan.p.total()) out += double(L.local_elems) * b.g;  // the transient gradient
  if (p_sharded && s.plan.hpz_intra > 1)  // a secondary copy of P inside the node (ZeRO++, FSDP2's K)
    for (const auto& ms : L.modules) out += double(ms.padded_elems) / s.plan.hpz_intra * b.p;
  for (const auto& op : s.ops)  // broadcast payloads to pack: all in flight as the next step starts
    if (op.purpose == Purpose::update_broadcast && !op.in_place) out += double(op.bytes());
  return out;
}

// The walk: the buffers the executor allocates, in the order of the step's program. Parameters gathered (from their
// gather's issue until the task that releases them), whole-module gradients (from their backward until the last op
// reading them is waited for), packed send buffers and payloads (issue to wait), secondary copies of P (kept after a
// task, freed after the optimizer), the transient gradient and persistent modules (always), and the working copies of
// the module computing. The peak over the program is the buffer bytes.
double walk_buffer_bytes(const Schedule& s, const ModelSpec& model, const StateBytes& b) {
  (void)model;
  const ShardLayout& L = s.layout;
  const int n = s.shape.modules, M = s.shape.micro_batches;
  auto padded = [&](int m) { return double(L.modules[static_cast<std::size_t>(m)].padded_elems); };
  const bool g_owned = s.plan.g.total() > s.plan.p.total();
  // Ops that read a module's whole gradient, per micro-batch and module, and the modules each op reads.
  std::vector<std::vector<int>> readers(static_cast<std::size_t>(M), std::vector<int>(static_cast<std::size_t>(n), 0));
  std::vector<std::vector<int>> op_modules(s.ops.size());
  auto range_of = [&](const CommOp& op) -> std::pair<int64_t, int64_t> {
    if (op.module >= 0) {
      const auto& ms = L.modules[static_cast<std::size_t>(op.module)];
      return {ms.local_offset, ms.local_offset + ms.shard_elems};
    }
    const int64_t len = op.kind == CollKind::reduce_scatter ? op.elems / op.group.size() : op.elems;
    return {op.local_offset, op.local_offset + len};
  };
  for (std::size_t i = 0; i < s.ops.size(); ++i) {
    const CommOp& op = s.ops[i];
    if (!(op.purpose == Purpose::grad_reduce_scatter || (op.purpose == Purpose::zero_grad_reduce && g_owned))) continue;
    const auto [lo, hi] = range_of(op);
    for (const auto& ms : L.modules)
      if (ms.local_offset < hi && lo < ms.local_offset + ms.shard_elems) {
        op_modules[i].push_back(ms.module);
        ++readers[static_cast<std::size_t>(op.micro_batch)][static_cast<std::size_t>(ms.module)];
      }
  }
  double live = 0, peak = 0;
  for (int m : s.persistent_modules) live += padded(m) * b.p;
  if (s.transient_grads) live += double(L.local_elems) * b.g;
  std::vector<double> op_live(s.ops.size(), 0.0);  // what each op in flight holds (a packed buffer, a payload)
  std::vector<int> left(static_cast<std::size_t>(n), 0);
  std::vector<double> hpz(static_cast<std::size_t>(n), 0.0);
  const double copy_bytes = b.activation != b.p ? b.activation : 0.0;
  const double scratch_bytes = b.weight_grad != b.g ? b.weight_grad : 0.0;
  // The previous step's broadcasts still hold their payloads when this step starts.
  for (std::size_t i = 0; i < s.ops.size(); ++i)
    if (s.ops[i].wait.next_step && !s.ops[i].in_place) live += double(s.ops[i].elems) * b.p;
  peak = live;
  for (const Action& a : step_program(s)) {
    switch (a.kind) {
      case Action::Kind::compute: {
        const ComputeTask t = s.shape.task(a.index);
        if (t.kind == TaskKind::optimizer) {
          for (double& h : hpz) live -= h, h = 0;
          break;
        }
        const TaskParams& tp = s.task_params[static_cast<std::size_t>(a.index)];
        const double param_elems = tp.source == TaskParams::Source::local
                                       ? double(L.modules[static_cast<std::size_t>(t.module)].shard_elems)
                                       : padded(t.module);
        double working = param_elems * copy_bytes;
        if (t.kind == TaskKind::backward) {
          const int r = readers[static_cast<std::size_t>(t.micro_batch)][static_cast<std::size_t>(t.module)];
          const double grad_elems = r > 0 ? padded(t.module) : param_elems;
          if (r > 0) live += padded(t.module) * b.g, left[static_cast<std::size_t>(t.module)] = r;
          working += grad_elems * scratch_bytes;
        }
        peak = std::max(peak, live + working);
        if (tp.keep_hpz_part) {
          const double part = padded(t.module) / std::max(1, s.plan.hpz_intra) * b.p;
          hpz[static_cast<std::size_t>(t.module)] = part;
          live += part;
        }
        if (tp.source == TaskParams::Source::gathered && tp.release) live -= padded(t.module) * b.p;
        if (tp.drop_hpz_part)
          live -= hpz[static_cast<std::size_t>(t.module)], hpz[static_cast<std::size_t>(t.module)] = 0;
        break;
      }
      case Action::Kind::issue: {
        const CommOp& op = s.ops[static_cast<std::size_t>(a.index)];
        double held = 0;
        if (is_gather(op.purpose)) {
          live += double(op.elems) * b.p;  // released by the task that reads it
        } else if (op.purpose == Purpose::grad_reduce_scatter &&
                   op_modules[static_cast<std::size_t>(a.index)].size() > 1) {
          held = double(op.elems) * b.g;
        } else if (op.purpose == Purpose::zero_grad_reduce && g_owned) {
          held = double(op.elems) * b.g;
        } else if (op.purpose == Purpose::update_broadcast && !op.wait.next_step && !op.in_place) {
          held = double(op.elems) * b.p;
        }
        op_live[static_cast<std::size_t>(a.index)] = held;
        live += held;
        peak = std::max(peak, live);
        break;
      }
      case Action::Kind::wait: {
        const CommOp& op = s.ops[static_cast<std::size_t>(a.index)];
        if (a.carried) {
          if (!op.in_place) live -= double(op.elems) * b.p;
          break;
        }
        live -= op_live[static_cast<std::size_t>(a.index)];
        op_live[static_cast<std::size_t>(a.index)] = 0;
        for (int m : op_modules[static_cast<std::size_t>(a.index)])
          if (--left[static_cast<std::size_t>(m)] == 0) live -= padded(m) * b.g;
        break;
      }
    }
  }
  return peak;
}

}  // namespace

MemoryEstimate estimate_memory(const Schedule& s, const Workload& w, StateBytes b, MemoryOf which) {
  const ShardLayout& L = s.layout;
  const Plan& plan = s.plan;
  const ModelSpec& model = w.model;
  MemoryEstimate m;

  // P: the local buffer is the padded 1/shard_count slice of every module (the whole model when P is replicated);
  // padding makes it a little more than Phi/s_p. (ZeRO++'s secondary copy lives only from the first gathers of a step
  // to its end: a buffer, below.)
  m.p_bytes = double(L.local_elems) * b.p;

  // OS: the owned part of the local buffer. Inter-tensor owners are uneven; the worst rank owns the most.
  const int64_t owned = which == MemoryOf::worst_rank ? L.max_owner_elems() : L.owned_elems();
  m.os_bytes = double(owned) * b.os;

  // G: kept across micro-batches at the granularity it is synchronised at. s_g == s_p: the whole local shard (the
  // Lins engine accumulates the local gradient, ZeRO-3/MiCS/ZeRO++ keep their reduce-scattered shard, DDP and
  // ZeRO-1 keep the full gradient). s_g > s_p (Lins with s_g = s_os, ZeRO-2): after each micro-batch's all-reduce
  // (or reduce-scatter) each rank keeps only the part whose optimizer states it owns, so G is sharded like OS.
  m.g_bytes = plan.g.total() > plan.p.total() ? double(owned) * b.g : double(L.local_elems) * b.g;

  m.state_bytes = m.p_bytes + m.g_bytes + m.os_bytes;
  const double phi = double(model.param_count());
  m.closed_form_state_bytes = b.p * phi / plan.p.total() + b.g * phi / plan.g.total() + b.os * phi / plan.os.total();

  m.activation_bytes = activation_bytes(model, w.seq, w.micro_batch_size, w.recompute) * b.activation / 2.0;

  // Buffers: walked through the step's program when the schedule is expanded (every allocation the executor makes,
  // at the action it makes it); a closed-form bound for the planner's compressed schedules.
  m.buffer_bytes =
      s.options.expand_micro_batches ? walk_buffer_bytes(s, model, b) : closed_form_buffer_bytes(s, model, b);
  // Not counted here: CUDA context, cuBLAS workspace, NCCL's buffers and allocator fragmentation; add_memory_reserve
  // adds them, so total_bytes stays comparable with what an allocator reports for the tensors alone.

  m.total_bytes = m.state_bytes + m.activation_bytes + m.buffer_bytes;
  return m;
}

int schedule_communicators(const Schedule& s) {
  // One communicator per (group role, stream) the schedule uses, as the executor creates them.
  std::vector<bool> used(std::max<std::size_t>(1, s.streams.size()) * kGroupRoleCount, false);
  for (const auto& op : s.ops) used[static_cast<std::size_t>(op.stream * kGroupRoleCount + int(op.role))] = true;
  int n = 0;
  for (bool u : used) n += u;
  return n;
}

void add_memory_reserve(MemoryEstimate& m, const Schedule& s, const MemoryReserve& r) {
  m.communicators = schedule_communicators(s);
  m.reserve_bytes = r.cuda_context_bytes + r.cublas_workspace_bytes + m.communicators * r.nccl_bytes_per_communicator +
                    r.fragmentation_fraction * m.total_bytes;
}

}  // namespace lins
