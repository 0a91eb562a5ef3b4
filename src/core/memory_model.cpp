// Memory model; see memory_model.h. Every assumption is stated where it is used.
#include "core/memory_model.h"

#include <algorithm>
#include <vector>

#include "core/plan.h"

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

MemoryEstimate estimate_memory(const Schedule& s, const Workload& w, StateBytes b, MemoryOf which) {
  const ShardLayout& L = s.layout;
  const Plan& plan = s.plan;
  const ModelSpec& model = w.model;
  MemoryEstimate m;

  // P: the local buffer is the padded 1/shard_count slice of every module (the whole model when P is replicated);
  // padding makes it a little more than Phi/s_p.
  m.p_bytes = double(L.local_elems) * b.p;
  // ZeRO++ hpZ keeps a second copy of P sharded over hpz_intra GPUs of the node: what the backward gather of the
  // schedule reads, each module's padded buffer over the hpZ group (nothing when P is not sharded).
  if (plan.engine == Engine::zeropp && plan.hpz_intra > 0 && L.shard_count > 1) {
    int64_t hpz_elems = 0;
    for (const auto& ms : L.modules) hpz_elems += ms.padded_elems / plan.hpz_intra;
    m.p_bytes += double(hpz_elems) * b.p;
  }

  // OS: the owned part of the local buffer. Inter-tensor owners are uneven; the worst rank owns the most.
  const int64_t owned =
      which == MemoryOf::worst_rank ? *std::max_element(L.owner_elems.begin(), L.owner_elems.end()) : L.owned_elems();
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

  // Buffers.
  // (1) Gathered parameters when P is sharded: forward prefetches the whole next layer while one runs (the
  //     executor's overlap rule, core/simulator.h), so two consecutive "units" (embedding, each layer = attn + mlp,
  //     head) are gathered at once; backward holds the module running, the next module prefetched and the full gradient
  //     of the module whose reduce-scatter is still in flight (decoupled), i.e. at most two modules' parameters plus
  //     two modules' gradients. With recomputation the re-gathered layer is kept until its backward, which the two-unit
  //     bound already covers. ZeRO++'s secondary gathers land in the same buffers.
  // (1b) Working copies of the one module that computes (modules compute one at a time): its parameters converted
  //     to the compute dtype when that differs from P's storage (bf16 P with fp32 compute), and, in backward, a
  //     scratch for its weight gradient when the backward writes a wider dtype than G's storage. The module's size is
  //     the padded whole module when P is sharded (gradients too with ZeRO-2), else its local slice.
  const bool p_sharded = L.shard_count > 1;
  const bool grad_full = p_sharded || (plan.engine == Engine::zero && zero_stage(plan) == 2);
  const double copy_bytes = b.activation != b.p ? b.activation : 0.0;
  const double scratch_bytes = b.weight_grad != b.g ? b.weight_grad : 0.0;
  std::vector<int64_t> units;  // padded elements per unit, forward order
  int64_t max_module = 0;
  double working_fwd = 0, working_bwd = 0;
  int last_layer = -2;
  for (const auto& ms : L.modules) {
    const int layer = model.modules[ms.module].layer;
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
    gathered_bwd = 2.0 * double(max_module) * (b.p + b.g);
  }
  m.buffer_bytes += std::max(gathered_fwd + working_fwd, gathered_bwd + working_bwd);
  // (2) Gradient buckets: the largest all-reduce bucket of the schedule, double-buffered (one filling while the
  //     previous one is being reduced asynchronously). ZeRO-1/2 reduce-scatter in place of each module's
  //     gradient and MiCS all-reduces its shard in place, so they need no bucket here.
  int64_t bucket = 0;
  for (const auto& op : s.ops)
    if (op.kind == CollKind::all_reduce && op.module < 0) bucket = std::max(bucket, op.bytes());
  m.buffer_bytes += 2.0 * double(bucket);
  // Not counted here: CUDA context, cuBLAS workspace, NCCL's buffers and allocator fragmentation; add_memory_reserve
  // adds them, so total_bytes stays comparable with what an allocator reports for the tensors alone.

  m.total_bytes = m.state_bytes + m.activation_bytes + m.buffer_bytes;
  return m;
}

int schedule_communicators(const Schedule& s) {
  bool used[kGroupRoleCount] = {};
  for (const auto& op : s.ops) used[static_cast<int>(op.role)] = true;
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
