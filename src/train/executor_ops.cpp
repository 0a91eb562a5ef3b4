// The buffer mechanics of the op purposes' rules (core/purposes.h): the buffers each rule names, the collective, the
// work its stream does before and after it (Communicator::then), and what its wait releases. One block per kind of
// issue (AtIssue), one for the completions (AtCompletion); the purposes' rules say which, the schedule says when
// (executor.h).
#include <algorithm>

#include "train/executor_impl.h"

namespace lins {

void Executor::Impl::accumulate_on(void* stream, void* dst, const void* src, int64_t n) {
  be->convert_on(stream, src, sd, dst, sd, n, /*accumulate=*/true);  // fp32 sums rounded once to the storage dtype
}

void Executor::Impl::copy_on(void* stream, void* dst, const void* src, int64_t n) {
  be->copy_on(stream, dst, src, n * esize);
}

Status Executor::Impl::issue(int i) {
  const CommOp& op = sched->ops[static_cast<std::size_t>(i)];
  Flight& f = flights[static_cast<std::size_t>(i)];
  f.issue_s = now() - step_origin_s;
  if (op.after >= 0) {  // this op reads another stream's result: its stream waits for it
    const Flight& dep = flights[static_cast<std::size_t>(op.after)];
    if (!dep.issued) return make_error("executor: " + op.label + " runs after an op not yet issued");
    op_comm[static_cast<std::size_t>(i)]->stream_wait(dep.done);
  }
  Status s;
  switch (op_rules[static_cast<std::size_t>(i)].at_issue) {
    case AtIssue::gather_shard:
    case AtIssue::gather_hpz_part:
      s = issue_gather(i, f);
      break;
    case AtIssue::reduce_scatter_grads:
      s = issue_reduce_scatter(i, f);
      break;
    case AtIssue::all_reduce_g:
      s = issue_all_reduce_g(i, f);
      break;
    case AtIssue::all_reduce_packed_grads:
      s = issue_packed_all_reduce(i, f);
      break;
    case AtIssue::all_reduce_transient:
    case AtIssue::all_reduce_transient_with_g:
      s = issue_transient_all_reduce(i, f);
      break;
    case AtIssue::gather_update:
      s = issue_update_gather(i, f);
      break;
    case AtIssue::broadcast_update:
      s = issue_broadcast(i, f);
      break;
    case AtIssue::exchange_quantized_grads:
      s = issue_qgz_node_exchange(i, f);
      break;
    case AtIssue::exchange_reduced_slices:
      s = issue_qgz_peer_exchange(i, f);
      break;
  }
  if (!s) return s;
  if (!f.done.impl()) std::swap(f.done, f.collective);  // no work after the collective: waiting for it is enough
  f.issued = true;
  issued->push_back(i);
  comm_events->push_back(Action{.kind = Action::Kind::issue, .index = i});
  return {};
}

// ---- what an op holds, and what its stream does once the collective is in -------------------------------------------
// The buffer of op_holds[i] (nothing for an op in place), in the storage dtype; the op writes all of it.
Status Executor::Impl::allocate_held(int i, Flight& f) {
  const OpHold& h = op_holds[static_cast<std::size_t>(i)];
  if (h.in_place()) return {};
  LINS_ASSIGN_OR_RETURN(f.buf, alloc_state(h.elems, MemCategory::buffer, /*zero=*/false));
  return {};
}

Request Executor::Impl::land(int i, Communicator* c, ElemRange r, void* result) {
  const CommOp& op = sched->ops[static_cast<std::size_t>(i)];
  switch (op_rules[static_cast<std::size_t>(i)].at_completion) {
    case AtCompletion::nothing:
      return {};
    case AtCompletion::slice_into_g:
      return c->then([this, r, result](void* stream) { accumulate_on(stream, at(g_acc, r.offset), result, r.elems); });
    case AtCompletion::slice_into_transient:
      return c->then([this, r, result](void* stream) { copy_on(stream, at(g_mb, r.offset), result, r.elems); });
    case AtCompletion::owned_added_into_g:
    case AtCompletion::owned_copied_into_g: {
      // Each rank keeps the part it owns (select & drop).
      const bool copy = op_rules[static_cast<std::size_t>(i)].at_completion == AtCompletion::owned_copied_into_g;
      return c->then([this, r, result, copy](void* stream) {
        for (const auto& ow : owned) {
          const int64_t a = std::max(r.offset, ow.local_offset), z = std::min(r.end(), ow.local_offset + ow.elems);
          if (a >= z) continue;
          const void* src = static_cast<const char*>(result) + (a - r.offset) * esize;
          if (copy)
            copy_on(stream, g_at_owned(ow, a), src, z - a);
          else
            accumulate_on(stream, g_at_owned(ow, a), src, z - a);
        }
      });
    }
    case AtCompletion::unpack_payload: {
      if (op_holds[static_cast<std::size_t>(i)].in_place() || c->rank() == op.root) return {};
      // The lambda keeps the payload's address: the buffer itself may move into the next step's carried ops.
      const int owner = op.root;
      const ModuleShard* m = &shard_of(op.module);
      return c->then([this, owner, m, result](void* stream) { pack_owner(owner, *m, result, false, stream); });
    }
  }
  return {};
}

// ---- parameter gathers: forward, backward, from the secondary copy --------------------------------------------------
// The module's padded parameters gathered into a buffer of their own, which the tasks reading them release
// (Schedule::task_params). A secondary-copy gather reads this rank's part of that copy instead of the local shard.
Status Executor::Impl::issue_gather(int i, Flight& f) {
  const CommOp& op = sched->ops[static_cast<std::size_t>(i)];
  Communicator* c = op_comm[static_cast<std::size_t>(i)];
  const int m = op.module;
  const ModuleShard& msh = shard_of(m);
  if (op.elems != msh.padded_elems || op.elems % c->size() != 0)
    return make_error("executor: gather of " + op.label + " does not match the layout");
  const int64_t count = op.elems / c->size();
  const void* send = nullptr;
  if (op_rules[static_cast<std::size_t>(i)].at_issue == AtIssue::gather_hpz_part) {
    if (hpz_part[static_cast<std::size_t>(m)].empty())
      return make_error("executor: " + op.label + " gathers from a secondary copy that was never kept");
    send = hpz_part[static_cast<std::size_t>(m)].data();
  } else {
    if (count != msh.shard_elems)
      return make_error("executor: gather of " + op.label + " over a group that is not the P shard group");
    send = local(msh.local_offset);
  }
  if (auto s = allocate_held(i, f); !s) return s;
  if (f.buf.empty()) return make_error("executor: gather of " + op.label + " holds no buffer");
  if (op.quant == Quant::int8_blocks) return issue_quantized_gather(i, f, send, count);
  f.collective = c->all_gather(send, f.buf.data(), count, sd);
  return {};
}

// ---- ZeRO++ qwZ: the gather in int8 blocks ------------------------------------------------------------------------
// As DeepSpeed's quantized all-gather (partition_parameters.py 1457-1494, 717-720): this rank's part quantized to int8
// in g blocks on the stream, the values and the fp32 scales all-gathered by two collectives, every rank's part
// dequantized into the gathered buffer. The int8 values travel as 16-bit words (the collective only moves them).
Status Executor::Impl::issue_quantized_gather(int i, Flight& f, const void* send, int64_t part) {
  const CommOp& op = sched->ops[static_cast<std::size_t>(i)];
  Communicator* c = op_comm[static_cast<std::size_t>(i)];
  const int n = c->size();
  const int64_t blocks = op.quant_blocks / n;
  if (blocks <= 0 || part % 8 != 0 || blocks * n != op.quant_blocks)
    return make_error("executor: quantized gather of " + op.label + " has no block layout");
  // [in S][out nS] (storage other than fp32) [scales g][all ng][values S][all nS] (quantization_buffer_layout).
  const QuantBufferLayout l = quantization_buffer_layout(op, sd);
  LINS_ASSIGN_OR_RETURN(f.quant, be->allocate(l.bytes, MemCategory::buffer, false));
  char* base = static_cast<char*>(f.quant.data());
  float* in = mixed() ? reinterpret_cast<float*>(base + l.fp32_in) : nullptr;
  float* out = mixed() ? reinterpret_cast<float*>(base + l.fp32_out) : nullptr;
  float* scales = reinterpret_cast<float*>(base + l.scales);
  float* all_scales = reinterpret_cast<float*>(base + l.received_scales);
  int8_t* values = reinterpret_cast<int8_t*>(base + l.values);
  int8_t* all_values = reinterpret_cast<int8_t*>(base + l.received_values);
  void* gathered = f.buf.data();
  const DType storage = sd;
  f.first = c->then([this, send, in, part, blocks, values, scales, storage](void* stream) {
    const float* x = static_cast<const float*>(send);
    if (in) be->convert_on(stream, send, storage, in, DType::fp32, part, false), x = in;
    be->quantize_int8_on(stream, x, part, blocks, values, scales);
  });
  c->all_gather(values, all_values, part / 2, DType::bf16);
  f.collective = c->all_gather(scales, all_scales, blocks, DType::fp32);
  f.done = c->then([this, n, part, blocks, all_values, all_scales, out, gathered, storage](void* stream) {
    float* dst = out ? out : static_cast<float*>(gathered);
    for (int k = 0; k < n; ++k)  // each rank's part with its own blocks
      be->dequantize_int8_on(stream, all_values + k * part, all_scales + k * blocks, part, blocks, dst + k * part);
    if (out) be->convert_on(stream, out, DType::fp32, gathered, storage, n * part, false);
  });
  return {};
}

// ---- ZeRO++ qgZ: the gradient in int4 blocks, exchanged inside the node, then across nodes --------------------------
// DeepSpeed's all_to_all_quant_reduce (coalesced_collectives.py 31-76) on the module's whole gradient: quantized to
// int4 in G blocks with each rank's slice where the exchange inside the node sends it (swizzle_quantize_int4), values
// and scales all-to-all'ed inside the node, the R peers' blocks reduced into the node's int4 sums (written into the
// buffer of the op after it, the exchange across nodes), which all-to-alls them among the N ranks of this rank's place
// and reduces them into this rank's slice, added into G. The int4 values travel as 16-bit words.
Status Executor::Impl::issue_qgz_node_exchange(int i, Flight& f) {
  const CommOp& op = sched->ops[static_cast<std::size_t>(i)];
  Communicator* c = op_comm[static_cast<std::size_t>(i)];
  const std::size_t j = static_cast<std::size_t>(i) + 1;
  if (j >= sched->ops.size() || sched->ops[j].purpose != Purpose::qgz_peer_exchange || sched->ops[j].module != op.module)
    return make_error("executor: qgZ exchange of " + op.label + " is not followed by its exchange across nodes");
  const CommOp& next = sched->ops[j];
  const int m = op.module, R = c->size(), N = op_comm[j]->size();
  const int64_t M = op.elems, G = op.quant_blocks, W = int64_t(R) * N;
  const ModuleShard& msh = shard_of(m);
  if (M != msh.padded_elems || M % (8 * W) != 0 || G % W != 0 || msh.shard_elems * W != M)
    return make_error("executor: qgZ exchange of " + op.label + " does not match the layout");
  if (grad_full[static_cast<std::size_t>(m)].empty())
    return make_error("executor: qgZ exchange of " + op.label + " before the backward of " +
                      spec->modules[static_cast<std::size_t>(m)].name);
  // This op's buffer: [the gradient in fp32, M (storage other than fp32)][scales G][received G][values M/2][received
  // M/2]. The next op's: [its slice in fp32, S][sums' scales G/R][received G/R][sums M/2R][received M/2R], whose sums
  // and their scales this op's reduction writes (quantization_buffer_layout).
  const QuantBufferLayout l = quantization_buffer_layout(op, sd), next_l = quantization_buffer_layout(next, sd);
  LINS_ASSIGN_OR_RETURN(f.quant, be->allocate(l.bytes, MemCategory::buffer, false));
  Flight& g = flights[j];
  LINS_ASSIGN_OR_RETURN(g.quant, be->allocate(next_l.bytes, MemCategory::buffer, false));
  char* base = static_cast<char*>(f.quant.data());
  float* in = mixed() ? reinterpret_cast<float*>(base + l.fp32_in) : nullptr;
  float* scales = reinterpret_cast<float*>(base + l.scales);
  float* got_scales = reinterpret_cast<float*>(base + l.received_scales);
  uint8_t* values = reinterpret_cast<uint8_t*>(base + l.values);
  uint8_t* got_values = reinterpret_cast<uint8_t*>(base + l.received_values);
  char* next_base = static_cast<char*>(g.quant.data());
  float* sum_scales = reinterpret_cast<float*>(next_base + next_l.scales);
  uint8_t* sums = reinterpret_cast<uint8_t*>(next_base + next_l.values);
  const void* grad = grad_full[static_cast<std::size_t>(m)].data();
  const DType storage = sd;
  f.first = c->then([this, grad, in, M, G, N, R, values, scales, storage](void* stream) {
    const float* x = static_cast<const float*>(grad);
    if (in) be->convert_on(stream, grad, storage, in, DType::fp32, M, false), x = in;
    be->swizzle_quantize_int4_on(stream, x, M, G, N, R, values, scales);
  });
  c->all_to_all(values, got_values, M / (4 * R), DType::bf16);  // M/2R bytes to each peer
  f.collective = c->all_to_all(scales, got_scales, G / R, DType::fp32);
  f.done = c->then([this, got_values, got_scales, M, G, R, sums, sum_scales](void* stream) {
    be->quantized_reduction_int4_on(stream, got_values, got_scales, M / R, G / R, R, sums, sum_scales);
  });
  return {};
}

Status Executor::Impl::issue_qgz_peer_exchange(int i, Flight& f) {
  const CommOp& op = sched->ops[static_cast<std::size_t>(i)];
  Communicator* c = op_comm[static_cast<std::size_t>(i)];
  if (f.quant.empty())
    return make_error("executor: qgZ exchange across nodes of " + op.label + " was issued before the one inside");
  const int N = c->size();
  const int64_t elems = op.elems, blocks = op.quant_blocks;  // the node's sums: M/R values in G/R blocks
  const int64_t S = elems / N, g = blocks / N;
  const ElemRange r = local_range(i);
  if (r.elems != S) return make_error("executor: qgZ exchange across nodes of " + op.label + " is not this rank's shard");
  const QuantBufferLayout l = quantization_buffer_layout(op, sd);
  char* base = static_cast<char*>(f.quant.data());
  float* out = reinterpret_cast<float*>(base + l.fp32_out);
  float* sum_scales = reinterpret_cast<float*>(base + l.scales);
  float* got_scales = reinterpret_cast<float*>(base + l.received_scales);
  uint8_t* sums = reinterpret_cast<uint8_t*>(base + l.values);
  uint8_t* got = reinterpret_cast<uint8_t*>(base + l.received_values);
  c->all_to_all(sums, got, S / 4, DType::bf16);  // S/2 bytes to each node
  f.collective = c->all_to_all(sum_scales, got_scales, g, DType::fp32);
  // The divisor: lins's gradients are already divided by the global token count, so the plain sum is the mean that
  // DeepSpeed's averaged reduce-scatter leaves (divisor 1); DeepSpeed's qgZ divides its sum of the W ranks' means by
  // N instead of W, leaving R times the mean: divisor 1/R (exact for R a power of two), --ds-qgz-average deepspeed.
  const int R = op_comm[static_cast<std::size_t>(i) - 1]->size();
  const float divisor = sched->options.engine.ds_qgz_divide_by_nodes ? 1.0f / float(R) : 1.0f;
  const bool into_g = op_rules[static_cast<std::size_t>(i)].at_completion == AtCompletion::slice_into_g;
  void* dst = into_g ? at(g_acc, r.offset) : at(g_mb, r.offset);
  const DType storage = sd;
  f.done = c->then([this, got, got_scales, S, g, N, divisor, out, dst, into_g, storage](void* stream) {
    be->dequantize_reduce_int4_on(stream, got, got_scales, S, g, N, divisor, out);
    be->convert_on(stream, out, DType::fp32, dst, storage, S, /*accumulate=*/into_g);
  });
  return {};
}

// ---- gradient reduce-scatter over the P shard group -----------------------------------------------------------------
// The input is the whole-module gradient the backward wrote (grad_full); a bucket of several modules is first packed on
// the stream into the op's send buffer so that rank r's part is its shards of those modules, in local order
// (DeepSpeed's interleaving concatenation). This rank's slice then lands in the transient buffer or is added into G.
Status Executor::Impl::issue_reduce_scatter(int i, Flight& f) {
  const CommOp& op = sched->ops[static_cast<std::size_t>(i)];
  Communicator* c = op_comm[static_cast<std::size_t>(i)];
  const ElemRange r = local_range(i);
  const auto& modules = op_grad_modules[static_cast<std::size_t>(i)];
  const int64_t n = c->size();
  for (int m : modules) {
    const ModuleShard& msh = shard_of(m);
    if (grad_full[static_cast<std::size_t>(m)].empty())
      return make_error("executor: reduce-scatter of " + op.label + " before the backward of " +
                        spec->modules[static_cast<std::size_t>(m)].name);
    if (msh.local_offset < r.offset || msh.local_offset + msh.shard_elems > r.end())
      return make_error("executor: reduce-scatter of " + op.label + " splits a module");
  }
  if (g_owned && !sched->transient_grads)
    return make_error("executor: a reduce-scatter into an owned-only G is not supported");
  if (auto s = allocate_held(i, f); !s) return s;
  void* base = nullptr;
  if (f.buf.empty()) {  // one module: its whole gradient is the input
    if (modules.size() != 1 || shard_of(modules[0]).shard_elems != r.elems)
      return make_error("executor: reduce-scatter of " + op.label + " is not one module's gradient");
    base = grad_full[static_cast<std::size_t>(modules[0])].data();
  } else {
    if (r.elems * n != op_holds[static_cast<std::size_t>(i)].elems)
      return make_error("executor: reduce-scatter of " + op.label + " does not split evenly over its group");
    base = f.buf.data();
    struct Part {
      int64_t offset, shard;
      const char* grad;  // the module's whole gradient
    };
    std::vector<Part> parts;
    for (int m : modules)
      parts.push_back(Part{shard_of(m).local_offset, shard_of(m).shard_elems,
                           static_cast<const char*>(grad_full[static_cast<std::size_t>(m)].data())});
    f.first = c->then([this, base, parts, r, n](void* stream) {
      for (const Part& p : parts)
        for (int64_t k = 0; k < n; ++k)
          copy_on(stream, static_cast<char*>(base) + (k * r.elems + (p.offset - r.offset)) * esize,
                  p.grad + k * p.shard * esize, p.shard);
    });
  }
  void* mine = static_cast<char*>(base) + int64_t(c->rank()) * r.elems * esize;
  f.collective = c->reduce_scatter(base, mine, r.elems, sd);
  f.done = land(i, c, r, mine);
  return {};
}

// ---- gradient all-reduces in place in G: DDP and MiCS buckets, ZeRO-1's reductions, replica all-reduces ------------
// Accumulated gradients (DDP, MiCS, ZeRO-1, the Lins engine when s_g == s_p) are all-reduced in place in G.
Status Executor::Impl::issue_all_reduce_g(int i, Flight& f) {
  Communicator* c = op_comm[static_cast<std::size_t>(i)];
  const ElemRange r = local_range(i);
  f.collective = c->all_reduce(at(g_acc, r.offset), at(g_acc, r.offset), r.elems, sd);
  f.done = land(i, c, r, at(g_acc, r.offset));
  return {};
}

// ---- DeepSpeed ZeRO-2: all-reduce of a packed gradient bucket over the optimizer-state group ------------------------
// ZeRO-2 keeps only its partition of G: the bucket is packed from the modules' gradients into the op's send buffer,
// all-reduced there, and each rank adds the part it owns into G.
Status Executor::Impl::issue_packed_all_reduce(int i, Flight& f) {
  const CommOp& op = sched->ops[static_cast<std::size_t>(i)];
  Communicator* c = op_comm[static_cast<std::size_t>(i)];
  const ElemRange r = local_range(i);
  if (auto s = allocate_held(i, f); !s) return s;
  if (f.buf.empty() || op_holds[static_cast<std::size_t>(i)].elems != r.elems)
    return make_error("executor: reduction of " + op.label + " holds no send buffer of its size");
  void* base = f.buf.data();
  struct Part {
    int64_t from, to;  // the local range of the module inside the bucket
    const char* grad;  // where `from` is in the module's whole gradient
  };
  std::vector<Part> parts;
  for (int m : op_grad_modules[static_cast<std::size_t>(i)]) {
    const ModuleShard& msh = shard_of(m);
    if (grad_full[static_cast<std::size_t>(m)].empty())
      return make_error("executor: reduction of " + op.label + " before the backward of " +
                        spec->modules[static_cast<std::size_t>(m)].name);
    const int64_t a = std::max(r.offset, msh.local_offset), z = std::min(r.end(), msh.local_offset + msh.shard_elems);
    if (a < z)
      parts.push_back(
          Part{a, z, static_cast<const char*>(at(grad_full[static_cast<std::size_t>(m)], a - msh.local_offset))});
  }
  f.first = c->then([this, base, parts, r](void* stream) {
    for (const Part& p : parts)
      copy_on(stream, static_cast<char*>(base) + (p.from - r.offset) * esize, p.grad, p.to - p.from);
  });
  f.collective = c->all_reduce(base, base, r.elems, sd);
  f.done = land(i, c, r, base);
  return {};
}

// ---- gradient all-reduces of the transient buffer: Lins buckets (T_g, the OS sync), HSDP replica all-reduces -------
// Transient gradients (Schedule::transient_grads) are all-reduced in the transient buffer, after which each rank
// keeps the part it owns (select & drop): added into G, or in the last micro-batch of the Lins engine, whose owned
// parts of G joined the buffer before the sync, copied into G.
Status Executor::Impl::issue_transient_all_reduce(int i, Flight& f) {
  Communicator* c = op_comm[static_cast<std::size_t>(i)];
  const ElemRange r = local_range(i);
  if (op_rules[static_cast<std::size_t>(i)].at_issue == AtIssue::all_reduce_transient_with_g)
    f.first = c->then([this, r](void* stream) {
      for (const auto& ow : owned) {
        const int64_t a = std::max(r.offset, ow.local_offset), z = std::min(r.end(), ow.local_offset + ow.elems);
        if (a < z) accumulate_on(stream, at(g_mb, a), g_at_owned(ow, a), z - a);
      }
    });
  f.collective = c->all_reduce(at(g_mb, r.offset), at(g_mb, r.offset), r.elems, sd);
  f.done = land(i, c, r, at(g_mb, r.offset));
  return {};
}

// ---- all-gather of updated parameters after the optimizer -----------------------------------------------------------
// ZeRO-1/2: every rank's updated partition gathered in place into the whole P. DeepSpeed ZeRO-3's persistent modules:
// the module's updated shards gathered into the buffer they are computed from.
Status Executor::Impl::issue_update_gather(int i, Flight& f) {
  const CommOp& op = sched->ops[static_cast<std::size_t>(i)];
  Communicator* c = op_comm[static_cast<std::size_t>(i)];
  if (op.module >= 0) {
    const ModuleShard& msh = shard_of(op.module);
    DeviceBuffer& dst = persistent[static_cast<std::size_t>(op.module)];
    if (dst.empty() || op.elems != msh.padded_elems)
      return make_error("executor: update gather of " + op.label + " has no persistent buffer of its size");
    f.collective = c->all_gather(local(msh.local_offset), dst.data(), msh.shard_elems, sd);
    return {};
  }
  const int64_t count = sched->layout.local_elems / c->size();
  if (count * c->size() != op.elems) return make_error("executor: update gather of " + op.label + " is uneven");
  f.collective = c->all_gather(local(int64_t(c->rank()) * count), local(0), count, sd);
  return {};
}

// ---- Lins broadcast of one module's updated slices by one owner -----------------------------------------------------
// The owner packs its slices inside the module's shard into a payload on the stream; the others unpack it into P.
int64_t Executor::Impl::pack_owner(int owner, const ModuleShard& msh, void* payload, bool to_payload, void* stream) {
  const int64_t lo = msh.local_offset, hi = msh.local_offset + msh.shard_elems;
  int64_t n = 0;
  for (const auto& r : owner_ranges[static_cast<std::size_t>(owner)]) {
    const int64_t a = std::max(lo, r.offset), b = std::min(hi, r.end());
    if (a >= b) continue;
    void* p = static_cast<char*>(payload) + n * esize;
    if (to_payload)
      copy_on(stream, p, local(a), b - a);
    else
      copy_on(stream, local(a), p, b - a);
    n += b - a;
  }
  return n;
}

Status Executor::Impl::issue_broadcast(int i, Flight& f) {
  const CommOp& op = sched->ops[static_cast<std::size_t>(i)];
  Communicator* c = op_comm[static_cast<std::size_t>(i)];
  const ModuleShard& msh = shard_of(op.module);
  int64_t owned_here = 0;  // what the owner's slices inside this module add up to
  for (const auto& r : owner_ranges[static_cast<std::size_t>(op.root)])
    owned_here += std::max<int64_t>(
        0, std::min(msh.local_offset + msh.shard_elems, r.end()) - std::max(msh.local_offset, r.offset));
  if (owned_here != op.elems)
    return make_error("executor: owner " + std::to_string(op.root) + " holds " + std::to_string(owned_here) +
                      " elements of " + op.label + " but the schedule broadcasts " + std::to_string(op.elems));
  if (op.in_place) {  // the owner's part is one range of P: broadcast it there
    f.collective = c->broadcast(local(op.local_offset), op.elems, sd, op.root);
    return {};
  }
  if (auto s = allocate_held(i, f); !s) return s;  // the payload, packed or received whole
  if (f.buf.empty()) return make_error("executor: broadcast of " + op.label + " holds no payload");
  // The lambdas keep the payload's address: the buffer itself may move into the next step's carried ops.
  const int owner = op.root;
  void* payload = f.buf.data();
  const ModuleShard* m = &msh;
  if (c->rank() == op.root)
    f.first = c->then([this, owner, m, payload](void* stream) { pack_owner(owner, *m, payload, true, stream); });
  f.collective = c->broadcast(payload, op.elems, sd, op.root);
  f.done = land(i, c, local_range(i), payload);
  return {};
}

// ---- after a wait ---------------------------------------------------------------------------------------------------
// What the compute side releases once an op is in: what it held (packed send buffers and payloads; gathered parameters
// stay until their tasks release them), and the whole-module gradients no later op of the micro-batch reads.
Status Executor::Impl::complete(int i, Flight& f) {
  if (!op_holds[static_cast<std::size_t>(i)].until_task) f.buf.reset();
  f.quant.reset();
  for (int m : op_grad_modules[static_cast<std::size_t>(i)])
    if (--grad_full_left[static_cast<std::size_t>(m)] == 0) grad_full[static_cast<std::size_t>(m)].reset();
  return {};
}

}  // namespace lins
