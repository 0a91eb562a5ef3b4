// Memory model; see memory_model.h. Every assumption is stated where it is used.
#include "core/projection/memory_model.h"

#include <algorithm>
#include <vector>

#include "core/model/plan.h"
#include "core/schedule/engine_table.h"
#include "core/schedule/purposes.h"
#include "core/schedule/timeline.h"

namespace lins {

double activation_bytes(const ModelSpec& model, int seq, int micro_batch_size, Recompute recompute) {
  const double s = seq, b = micro_batch_size, h = model.dims.hidden, L = model.dims.layers, V = model.dims.vocab;
  // Megatron-LM (Korthikanti et al. 2022) per layer in bf16: sbh(34 + 5as/h); FlashAttention never materialises
  // the a*s*s attention scores, which leaves 34*s*b*h bytes per layer (the paper's memory analysis does the same). The
  // SwiGLU MLP keeps a few more tensors than GPT's GeLU MLP; the estimate ignores that, as the paper's source does.
  const double layer = 34.0 * s * b * h;
  double layers = L * layer;
  switch (recompute) {
    case Recompute::none:
      break;
    case Recompute::selective:
      // The attention core's output o (bf16, 2*s*b*h: the attention-over-values output of Megatron's 34) is dropped
      // after forward; backward recomputes it one layer at a time, so one layer's o is alive again on top. (Its fp32
      // logsumexp, 4*a*s*b bytes, goes too; the 34 never counted it.)
      layers = L * (layer - 2.0 * s * b * h) + 2.0 * s * b * h;
      break;
    case Recompute::full:
      // Full recomputation keeps only each layer's input (bf16, 2*s*b*h) and re-runs one layer at a time in
      // backward, so one layer's full working set is alive on top of the checkpoints.
      layers = L * 2.0 * s * b * h + layer;
      break;
  }
  // Logits: bf16 [s*b, V] kept for backward plus an fp32 copy inside the cross-entropy (assumption: the loss is not
  // fused and not chunked), 6 bytes per logit.
  const double logits = 6.0 * s * b * V;
  return layers + logits;
}

void set_activation_bytes(MemoryEstimate& m, double bytes, const MemoryReserve& r) {
  const double fragmentation = r.fragmentation_fraction * m.total_bytes;
  m.activation_bytes = bytes;
  m.total_bytes = m.state_bytes + m.activation_bytes + m.buffer_bytes;
  if (m.reserve_bytes > 0) m.reserve_bytes += r.fragmentation_fraction * m.total_bytes - fragmentation;
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
  const bool grad_full = p_sharded || engine_row(s.plan.engine).keeps_whole_gradients(s.plan);
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
  const PurposeContext ctx = purpose_context(s);
  for (const auto& op : s.ops) {  // broadcast payloads to pack: all in flight as the next step starts
    const PurposeRule r = purpose_rule(op.purpose, ctx);
    if (r.held == HeldBuffer::payload) out += double(op_hold(op, r, 0).elems) * dtype_bytes(op.dtype);
  }
  // ZeRO++'s quantization buffers: those of the largest quantized op, for each of the two units gathered at once and
  // for a module's two exchanges of qgZ.
  const DType storage = b.storage();
  int64_t quantized = 0;
  for (const auto& op : s.ops) quantized = std::max(quantized, quantization_buffer_bytes(op, storage));
  out += 2.0 * double(quantized);
  return out;
}

// The walk: the buffers the executor allocates, in the order of the step's program. Parameters gathered (from their
// gather's issue until the task that releases them), whole-module gradients (from their backward until the last op
// reading them is waited for), what each op holds by its purpose's rules (core/purposes.h: packed send buffers and
// payloads, issue to wait), secondary copies of P (kept after a task, freed after the optimizer), the transient
// gradient and persistent modules (always), and the working copies of the module computing. The peak over the program
// is the buffer bytes.
double walk_buffer_bytes(const Schedule& s, const ModelSpec& model, const StateBytes& b) {
  (void)model;
  const ShardLayout& L = s.layout;
  const int n = s.shape.modules;
  auto padded = [&](int m) { return double(L.modules[static_cast<std::size_t>(m)].padded_elems); };
  const PurposeContext ctx = purpose_context(s);
  const GradientReaders reads = gradient_readers(s, ctx);
  std::vector<double> held(s.ops.size(), 0.0);  // what each op holds from its issue, in bytes
  std::vector<double> quantized(s.ops.size(), 0.0);  // ZeRO++'s quantization buffers, from its issue to its wait
  std::vector<bool> until_task(s.ops.size(), false);
  const DType storage = b.storage();
  for (std::size_t i = 0; i < s.ops.size(); ++i) {
    const OpHold h = op_hold(s.ops[i], purpose_rule(s.ops[i].purpose, ctx), reads.op_modules[i].size());
    held[i] = double(h.elems) * (h.state == HeldState::p ? b.p : b.g);
    quantized[i] = double(quantization_buffer_bytes(s.ops[i], storage));
    until_task[i] = h.until_task;
  }
  double live = 0, peak = 0;
  for (int m : s.persistent_modules) live += padded(m) * b.p;
  if (s.transient_grads) live += double(L.local_elems) * b.g;
  std::vector<double> op_live(s.ops.size(), 0.0);  // what each op in flight holds until its wait
  std::vector<int> left(static_cast<std::size_t>(n), 0);
  std::vector<double> hpz(static_cast<std::size_t>(n), 0.0);
  const double copy_bytes = b.activation != b.p ? b.activation : 0.0;
  const double scratch_bytes = b.weight_grad != b.g ? b.weight_grad : 0.0;
  // The previous step's ops waited for in this one (the Lins broadcasts) still hold theirs when this step starts.
  for (std::size_t i = 0; i < s.ops.size(); ++i)
    if (s.ops[i].wait.next_step) live += held[i];
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
          const int r = reads.per_module[static_cast<std::size_t>(t.micro_batch)][static_cast<std::size_t>(t.module)];
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
        if (tp.source == TaskParams::Source::gathered && tp.release)
          live -= held[static_cast<std::size_t>(tp.gather_op)];  // the gathered module, held until this task
        if (tp.drop_hpz_part)
          live -= hpz[static_cast<std::size_t>(t.module)], hpz[static_cast<std::size_t>(t.module)] = 0;
        break;
      }
      case Action::Kind::issue: {
        const std::size_t i = static_cast<std::size_t>(a.index);
        // A gather's buffer is released by the task that reads it; a next-step wait's hold is counted from the
        // step's start.
        if (until_task[i]) {
          live += held[i];
        } else if (!s.ops[i].wait.next_step) {
          op_live[i] = held[i];
          live += held[i];
        }
        op_live[i] += quantized[i];
        live += quantized[i];
        peak = std::max(peak, live);
        break;
      }
      case Action::Kind::wait: {
        const std::size_t i = static_cast<std::size_t>(a.index);
        if (a.carried) {
          live -= held[i];
          break;
        }
        live -= op_live[i];
        op_live[i] = 0;
        for (int m : reads.op_modules[i])
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
