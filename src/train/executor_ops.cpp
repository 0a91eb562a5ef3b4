// What each op purpose does in the executor: its buffers, the collective, the work its stream does before and after
// it (Communicator::then), and what its wait releases. One block per purpose; the schedule says when (executor.h).
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
  switch (op.purpose) {
    case Purpose::forward_gather:
    case Purpose::backward_gather:
    case Purpose::hpz_gather:
      s = issue_gather(i, f);
      break;
    case Purpose::grad_reduce_scatter:
      s = issue_reduce_scatter(i, f);
      break;
    case Purpose::zero_grad_reduce:
      s = issue_zero_reduce(i, f);
      break;
    case Purpose::grad_bucket_all_reduce:
    case Purpose::sync_bucket_all_reduce:
    case Purpose::replica_all_reduce:
      s = issue_all_reduce(i, f);
      break;
    case Purpose::update_gather:
      s = issue_update_gather(i, f);
      break;
    case Purpose::update_broadcast:
      s = issue_broadcast(i, f);
      break;
  }
  if (!s) return s;
  if (!f.done.impl()) std::swap(f.done, f.collective);  // no work after the collective: waiting for it is enough
  f.issued = true;
  issued->push_back(i);
  comm_events->push_back(Action{Action::Kind::issue, i, false});
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
  if (op.purpose == Purpose::hpz_gather) {
    if (hpz_part[static_cast<std::size_t>(m)].empty())
      return make_error("executor: " + op.label + " gathers from a secondary copy that was never kept");
    send = hpz_part[static_cast<std::size_t>(m)].data();
  } else {
    if (count != msh.shard_elems)
      return make_error("executor: gather of " + op.label + " over a group that is not the P shard group");
    send = local(msh.local_offset);
  }
  auto buf = alloc_state(op.elems, MemCategory::buffer, /*zero=*/false);  // the gather writes all of it
  if (!buf) return make_error(buf.error());
  f.buf = std::move(*buf);
  f.collective = c->all_gather(send, f.buf.data(), count, sd);
  return {};
}

// ---- gradient reduce-scatter over the P shard group -----------------------------------------------------------------
// The input is the whole-module gradient the backward wrote (grad_full); a bucket of several modules is first packed on
// the stream so that rank r's part is its shards of those modules, in local order (DeepSpeed's interleaving
// concatenation). This rank's slice then lands in the transient buffer or is added into G.
Status Executor::Impl::issue_reduce_scatter(int i, Flight& f) {
  const CommOp& op = sched->ops[static_cast<std::size_t>(i)];
  Communicator* c = op_comm[static_cast<std::size_t>(i)];
  const ElemRange r = local_range(op);
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
  void* base = nullptr;
  if (modules.size() == 1 && shard_of(modules[0]).shard_elems == r.elems) {
    base = grad_full[static_cast<std::size_t>(modules[0])].data();
  } else {
    auto buf = alloc_state(r.elems * n, MemCategory::buffer, /*zero=*/false);
    if (!buf) return make_error(buf.error());
    f.buf = std::move(*buf);
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
  const bool transient = sched->transient_grads;
  f.done = c->then([this, mine, r, transient](void* stream) {
    if (transient)
      copy_on(stream, at(g_mb, r.offset), mine, r.elems);
    else
      accumulate_on(stream, at(g_acc, r.offset), mine, r.elems);
  });
  return {};
}

// ---- DeepSpeed ZeRO-1/2: all-reduce of a gradient bucket over the optimizer-state group -----------------------------
// ZeRO-1 keeps the whole G and all-reduces a range of it in place. ZeRO-2 keeps only its partition of G: the bucket is
// packed from the modules' gradients, all-reduced, and each rank adds the part it owns into G.
Status Executor::Impl::issue_zero_reduce(int i, Flight& f) {
  const CommOp& op = sched->ops[static_cast<std::size_t>(i)];
  Communicator* c = op_comm[static_cast<std::size_t>(i)];
  const ElemRange r = local_range(op);
  if (!g_owned) {
    f.collective = c->all_reduce(at(g_acc, r.offset), at(g_acc, r.offset), r.elems, sd);
    return {};
  }
  auto buf = alloc_state(r.elems, MemCategory::buffer, /*zero=*/false);
  if (!buf) return make_error(buf.error());
  f.buf = std::move(*buf);
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
  f.done = c->then([this, base, r](void* stream) {
    for (const auto& ow : owned) {
      const int64_t a = std::max(r.offset, ow.local_offset), z = std::min(r.end(), ow.local_offset + ow.elems);
      if (a < z)
        accumulate_on(stream, at(g_acc, ow.owned_offset + (a - ow.local_offset)),
                      static_cast<char*>(base) + (a - r.offset) * esize, z - a);
    }
  });
  return {};
}

// ---- gradient all-reduces: Lins buckets (T_g, the OS sync), DDP buckets, replica all-reduces ------------------------
// Accumulated gradients (DDP, MiCS, the Lins engine when s_g == s_p) are all-reduced in place in G. Transient ones
// (Schedule::transient_grads) are all-reduced in the transient buffer, after which each rank keeps the part it owns
// (select & drop): added into G, or in the last micro-batch of the Lins engine, whose owned parts of G joined the
// buffer before the sync, copied into G.
Status Executor::Impl::issue_all_reduce(int i, Flight& f) {
  const CommOp& op = sched->ops[static_cast<std::size_t>(i)];
  Communicator* c = op_comm[static_cast<std::size_t>(i)];
  const ElemRange r = local_range(op);
  if (!sched->transient_grads) {
    f.collective = c->all_reduce(at(g_acc, r.offset), at(g_acc, r.offset), r.elems, sd);
    return {};
  }
  const bool sync = op.purpose == Purpose::sync_bucket_all_reduce;
  auto g_at = [this](const OwnedRange& ow, int64_t a) {
    return at(g_acc, (g_owned ? ow.owned_offset : ow.local_offset) + (a - ow.local_offset));
  };
  if (sync)
    f.first = c->then([this, r, g_at](void* stream) {
      for (const auto& ow : owned) {
        const int64_t a = std::max(r.offset, ow.local_offset), z = std::min(r.end(), ow.local_offset + ow.elems);
        if (a < z) accumulate_on(stream, at(g_mb, a), g_at(ow, a), z - a);
      }
    });
  f.collective = c->all_reduce(at(g_mb, r.offset), at(g_mb, r.offset), r.elems, sd);
  f.done = c->then([this, r, g_at, sync](void* stream) {
    for (const auto& ow : owned) {
      const int64_t a = std::max(r.offset, ow.local_offset), z = std::min(r.end(), ow.local_offset + ow.elems);
      if (a >= z) continue;
      if (sync)
        copy_on(stream, g_at(ow, a), at(g_mb, a), z - a);
      else
        accumulate_on(stream, g_at(ow, a), at(g_mb, a), z - a);
    }
  });
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
  auto buf = alloc_state(op.elems, MemCategory::buffer, /*zero=*/false);  // packed or received whole
  if (!buf) return make_error(buf.error());
  f.buf = std::move(*buf);
  // The lambdas keep the payload's address: the buffer itself may move into the next step's carried ops.
  const bool root = c->rank() == op.root;
  const int owner = op.root;
  void* payload = f.buf.data();
  const ModuleShard* m = &msh;
  if (root)
    f.first = c->then([this, owner, m, payload](void* stream) { pack_owner(owner, *m, payload, true, stream); });
  f.collective = c->broadcast(payload, op.elems, sd, op.root);
  if (!root)
    f.done = c->then([this, owner, m, payload](void* stream) { pack_owner(owner, *m, payload, false, stream); });
  return {};
}

// ---- after a wait ---------------------------------------------------------------------------------------------------
// What the compute side releases once an op is in: packed send buffers and payloads, and the whole-module gradients no
// later op of the micro-batch reads. Gathered parameters stay until their tasks release them.
Status Executor::Impl::complete(int i, Flight& f) {
  const CommOp& op = sched->ops[static_cast<std::size_t>(i)];
  switch (op.purpose) {
    case Purpose::forward_gather:
    case Purpose::backward_gather:
    case Purpose::hpz_gather:
    case Purpose::update_gather:
      return {};
    case Purpose::grad_reduce_scatter:
    case Purpose::zero_grad_reduce:
      f.buf.reset();
      for (int m : op_grad_modules[static_cast<std::size_t>(i)])
        if (--grad_full_left[static_cast<std::size_t>(m)] == 0) grad_full[static_cast<std::size_t>(m)].reset();
      return {};
    case Purpose::grad_bucket_all_reduce:
    case Purpose::sync_bucket_all_reduce:
    case Purpose::replica_all_reduce:
    case Purpose::update_broadcast:
      f.buf.reset();
      return {};
  }
  return {};
}

}  // namespace lins
