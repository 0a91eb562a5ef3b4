// The executor: runs a Schedule with real data; see executor.h for what waits for what.
#include "train/executor.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <set>
#include <sstream>

namespace lins {
namespace {

enum class OpClass {
  fwd_gather,       // all_gather before a module's forward (p_shard)
  bwd_gather,       // all_gather before a module's backward (p_shard, or hpz for ZeRO++)
  param_rs,         // reduce_scatter of a module's gradient over p_shard
  zero_rs,          // ZeRO-1/2 reduce_scatter of a module's gradient over os_shard
  module_ar,        // MiCS all_reduce of a module's gradient shard across groups (p_replica)
  bucket_ar,        // Lins/DDP bucket all_reduce (g_replica for T_g, p_replica for T_os0), then select & drop
  zero_opt_gather,  // ZeRO-1/2 all_gather of updated parameters over os_shard
  broadcast,        // Lins owner broadcast of updated parameters of one module (os_replica)
};

const char* op_class_name(OpClass c) {
  switch (c) {
    case OpClass::fwd_gather:
      return "fwd_gather";
    case OpClass::bwd_gather:
      return "bwd_gather";
    case OpClass::param_rs:
      return "param_rs";
    case OpClass::zero_rs:
      return "zero_rs";
    case OpClass::module_ar:
      return "module_ar";
    case OpClass::bucket_ar:
      return "bucket_ar";
    case OpClass::zero_opt_gather:
      return "zero_opt_gather";
    case OpClass::broadcast:
      return "broadcast";
  }
  return "?";
}

Result<OpClass> classify(const CommOp& op) {
  switch (op.kind) {
    case CollKind::all_gather:
      if (op.module < 0) break;
      if (op.phase == Phase::forward) return OpClass::fwd_gather;
      if (op.phase == Phase::backward) return OpClass::bwd_gather;
      if (op.phase == Phase::optimizer && op.role == GroupRole::os_shard) return OpClass::zero_opt_gather;
      break;
    case CollKind::reduce_scatter:
      if (op.module < 0) break;
      if (op.role == GroupRole::p_shard) return OpClass::param_rs;
      if (op.role == GroupRole::os_shard) return OpClass::zero_rs;
      break;
    case CollKind::all_reduce:
      if (op.module >= 0 && op.role == GroupRole::p_replica) return OpClass::module_ar;
      if (op.module < 0) return OpClass::bucket_ar;
      break;
    case CollKind::broadcast:
      if (op.module >= 0 && op.role == GroupRole::os_replica) return OpClass::broadcast;
      break;
  }
  return make_error(std::string("executor: no handler for the scheduled ") + coll_kind_name(op.kind) + " '" + op.label +
                    "' on " + group_role_name(op.role) + " in phase " + phase_name(op.phase));
}

// A range of the local buffer owned by this rank, and where it sits in the owned (optimizer) buffers. `decay`:
// AdamW's weight decay applies to the whole range (matrices and the embedding; not norm weights, not padding), the
// usual LLM practice (Megatron-LM, GPT-2/nanoGPT); owned slices are cut where that changes.
struct OwnedRange {
  int64_t local_offset = 0, elems = 0, owned_offset = 0;
  bool decay = false;
};

struct Range {
  int64_t offset = 0, elems = 0;
};

}  // namespace

struct Executor::Impl {
  const ModelSpec* spec = nullptr;
  Plan plan;
  Topology topo;
  int rank = 0;
  RoleComms comms{};
  ComputeBackend* be = nullptr;
  ExecutorOptions opt;
  Schedule* sched = nullptr;
  LlamaModel* model = nullptr;
  std::vector<TraceEvent>* trace = nullptr;
  SyntheticTask task;

  int n_mod = 0;
  int shard_index = 0;
  DType sd = DType::fp32;         // storage dtype of P, G and every collective's payload (ExecutorOptions::state_dtype)
  int64_t esize = 4;              // its bytes per element
  bool p_sharded = false;         // shard_count > 1
  bool g_owned = false;           // G kept only for the owned elements (s_g > s_p)
  bool t_g = false;               // Lins T_g: the micro-batch gradient is transient and synced every micro-batch
  int zero_stage = 0;             // ZeRO engine only
  std::vector<OwnedRange> owned;  // this rank's owned ranges, local order
  std::vector<std::vector<Range>> owner_ranges;  // per owner index: its slices, local order
  int64_t owned_elems = 0;

  // Persistent state.
  DeviceBuffer p_local;           // P: [local_elems]
  DeviceBuffer g_acc;             // G: [local_elems] or [owned_elems]
  DeviceBuffer master, mom, var;  // OS: [owned_elems] each
  DeviceBuffer g_mb;              // transient micro-batch gradient [local_elems] (T_g mode only; a buffer, not a state)
  std::vector<DeviceBuffer> hpz_secondary;  // ZeRO++: per module [padded / hpz] (P category)

  // Per-module working buffers.
  std::vector<DeviceBuffer> gathered;        // [padded] parameters of modules being computed
  std::vector<DeviceBuffer> grad_full;       // [padded] gradient of one micro-batch for a module (sharded P, ZeRO-2)
  std::vector<DeviceBuffer> params_compute;  // a module's parameters in the compute dtype while computed, when the
                                             // storage dtype differs

  // The schedule, classified and indexed.
  std::vector<OpClass> cls;
  std::vector<int64_t> ready_at;                       // timeline point at which each op may be issued
  std::vector<std::vector<int>> fwd_ag, bwd_ag, p_rs;  // [mb][module] -> op index or -1
  std::vector<std::vector<int>> bcast_of_module;       // module -> op indexes of its broadcasts

  // Issue state of the current step.
  size_t cursor = 0;
  struct Inflight {
    Request req;
    bool issued = false, done = false;
    double issue_s = 0;
    DeviceBuffer payload;  // broadcast payload
  };
  std::vector<Inflight> inflight;
  // Broadcasts of the previous step still in flight: op index -> request (their ops are the same every step).
  std::vector<Inflight> carried;
  bool carried_any = false;

  // Step measurements.
  int step_index = 0;
  double wait_s = 0;
  double step_origin_s = 0;

  // ---- timeline -------------------------------------------------------------------------------------------------
  // Points in execution order: F(mb, m) before module m's forward, B(mb, m) before its backward, A(mb, m) after it,
  // OPT after the optimizer.
  int64_t per_mb() const { return 3ll * n_mod; }
  int64_t F(int mb, int m) const { return mb * per_mb() + m; }
  int64_t B(int mb, int m) const { return mb * per_mb() + n_mod + 2ll * (n_mod - 1 - m); }
  int64_t A(int mb, int m) const { return B(mb, m) + 1; }
  int64_t OPT() const { return int64_t(opt.micro_batches) * per_mb(); }

  // Forward prefetch unit: the embedding, each layer (attn + mlp), the head.
  int unit_of(int m) const {
    const int layer = spec->modules[m].layer;
    if (layer < 0) return 0;
    return std::min(layer, spec->dims.layers) + 1;
  }
  int first_module_of_unit(int u) const {
    for (int m = 0; m < n_mod; ++m)
      if (unit_of(m) == u) return m;
    return 0;
  }

  // Host time (waits, issue times, the step's wall time). Compute is timed with the backend's events instead, so
  // a backend whose kernels run asynchronously (GPU) times them where they run.
  static double now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  }
  void add_trace(const std::string& name, const char* cat, double t0, double t1, int lane) {
    if (opt.trace) trace->push_back(TraceEvent{name, cat, t0 - step_origin_s, t1 - t0, lane});
  }
  // Compute spans of the step, resolved after the step (elapsed_s may have to wait for the stream).
  enum class Section { forward, backward, optimizer };
  struct Span {
    Event start, end;
    Section section;
    std::string name;
  };
  std::vector<Span> spans;
  // Compute-stream events around each wait: on a backend whose waits only order streams (GPU) the host returns at
  // once, and the time the compute stream stalls between these two events is the exposed communication.
  struct WaitSpan {
    Event start, end;
  };
  std::vector<WaitSpan> wait_spans;
  Event step_event;
  void compute_span(Event start, Section section, std::string name) {
    spans.push_back(Span{std::move(start), be->record_event(), section, std::move(name)});
  }

  Communicator* comm(GroupRole r) const { return comms[int(r)]; }

  // Buffers in the storage dtype (P, G, gathered parameters, gradients to reduce, payloads) and in fp32 (optimizer
  // states, compute copies).
  Result<DeviceBuffer> alloc_state(int64_t elems, MemCategory c, bool zero = true) {
    return be->allocate(elems * esize, c, zero);
  }
  Result<DeviceBuffer> alloc_f32(int64_t elems, MemCategory c, bool zero = true) {
    return be->allocate(elems * 4, c, zero);
  }
  // Storage narrower than fp32: the fp32 initial weights and the model's fp32 weight gradients go through fp32 scratch.
  bool mixed() const { return sd != DType::fp32; }
  // Element i of a storage-dtype buffer.
  void* at(const DeviceBuffer& b, int64_t i) const { return static_cast<char*>(b.data()) + i * esize; }
  // dst += src over n storage-dtype elements (fp32 sums rounded once to the storage dtype).
  void accumulate(void* dst, const void* src, int64_t n) { be->convert(src, sd, dst, sd, n, /*accumulate=*/true); }
  void copy_elems(void* dst, const void* src, int64_t n) { be->copy(dst, src, n * esize); }

  // The parameters module m computes with, in the backend's compute dtype: `src` itself when the storage dtype is the
  // same; else a working copy converted from it (released by release_params).
  Result<const void*> compute_params(int m, const void* src, int64_t elems) {
    const DType cd = be->compute_dtype();
    if (cd == sd) return src;
    auto b = be->allocate(elems * dtype_bytes(cd), MemCategory::buffer, /*zero=*/false);
    if (!b) return make_error(b.error());
    params_compute[m] = std::move(*b);
    be->convert(src, sd, params_compute[m].data(), cd, elems, false);
    return static_cast<const void*>(params_compute[m].data());
  }
  void release_params(int m) { params_compute[m].reset(); }

  // ---- set-up ---------------------------------------------------------------------------------------------------
  Status init() {
    const ShardLayout& L = sched->layout;
    n_mod = int(spec->modules.size());
    shard_index = L.shard_index;
    p_sharded = L.shard_count > 1;
    sd = opt.state_dtype;
    esize = dtype_bytes(sd);
    zero_stage = plan.engine == Engine::zero ? lins::zero_stage(plan) : 0;  // 0 on every other engine
    const bool lins_like = plan.engine == Engine::lins || plan.engine == Engine::ddp;
    g_owned = plan.g.total() > plan.p.total();
    t_g = lins_like && g_owned;
    task = SyntheticTask{opt.seed, spec->dims.vocab, opt.seq};

    owner_ranges.assign(L.owner_count, {});
    const std::vector<OwnedSlice> pieces = tensor_pieces(*spec, L.modules);  // local order, like the slices
    std::size_t piece = 0;
    for (const auto& sl : L.slices) {
      owner_ranges[sl.owner].push_back(Range{sl.local_offset, sl.elems});
      if (sl.owner != L.owner_index) continue;
      // Cut the slice where weight decay starts or stops applying (slices may span tensors).
      while (piece < pieces.size() && pieces[piece].local_offset + pieces[piece].elems <= sl.local_offset) ++piece;
      for (std::size_t q = piece; q < pieces.size() && pieces[q].local_offset < sl.local_offset + sl.elems; ++q) {
        const int64_t a = std::max(pieces[q].local_offset, sl.local_offset);
        const int64_t b = std::min(pieces[q].local_offset + pieces[q].elems, sl.local_offset + sl.elems);
        const bool decay = pieces[q].tensor >= 0 && spec->tensors[pieces[q].tensor].shape.size() >= 2;
        if (!owned.empty() && owned.back().decay == decay && owned.back().local_offset + owned.back().elems == a &&
            owned.back().owned_offset + owned.back().elems == owned_elems) {
          owned.back().elems += b - a;  // contiguous in both buffers: one optimizer call
        } else {
          owned.push_back(OwnedRange{a, b - a, owned_elems, decay});
        }
        owned_elems += b - a;
      }
    }
    if (owned_elems != L.owned_elems())
      return make_error("executor: owned slices add up to " + std::to_string(owned_elems) + " elements, layout says " +
                        std::to_string(L.owned_elems()));

    // Classify and index the schedule; check each op's group against its communicator.
    const int M = opt.micro_batches;
    fwd_ag.assign(M, std::vector<int>(n_mod, -1));
    bwd_ag = p_rs = fwd_ag;
    bcast_of_module.assign(n_mod, {});
    for (size_t i = 0; i < sched->ops.size(); ++i) {
      const CommOp& op = sched->ops[i];
      auto c = classify(op);
      if (!c) return make_error(c.error());
      cls.push_back(*c);
      Communicator* cm = comm(op.role);
      if (!cm || cm->size() != op.group.size())
        return make_error(std::string("executor: the ") + group_role_name(op.role) + " communicator has " +
                          (cm ? std::to_string(cm->size()) : std::string("no")) +
                          " ranks but the schedule's group has " + std::to_string(op.group.size()));
      if (op.repeat != 1 || op.micro_batch < 0 || op.micro_batch >= M)
        return make_error("executor: the schedule must be expanded per micro-batch");
      const int mb = op.micro_batch, m = op.module;
      int64_t ready = 0;
      switch (*c) {
        case OpClass::fwd_gather: {
          fwd_ag[mb][m] = int(i);
          const int u = unit_of(m);
          ready = overlaps_gathers(opt.overlap) && u > 0 ? F(mb, first_module_of_unit(u - 1)) : F(mb, m);
          break;
        }
        case OpClass::bwd_gather:
          bwd_ag[mb][m] = int(i);
          ready = overlaps_gathers(opt.overlap) && m + 1 < n_mod ? B(mb, m + 1) : B(mb, m);
          break;
        case OpClass::param_rs:
          p_rs[mb][m] = int(i);
          ready = A(mb, m);
          break;
        case OpClass::zero_rs:
        case OpClass::module_ar:
          ready = A(mb, m);
          break;
        case OpClass::bucket_ar: {
          // After the backward of the module holding the bucket's first element (buckets are cut from the end).
          int first = 0;
          for (const auto& ms : L.modules)
            if (ms.local_offset <= op.local_offset && op.local_offset < ms.local_offset + ms.shard_elems)
              first = ms.module;
          ready = A(mb, first);
          break;
        }
        case OpClass::zero_opt_gather:
        case OpClass::broadcast:
          ready = OPT();
          break;
      }
      if (*c == OpClass::broadcast) bcast_of_module[m].push_back(int(i));
      ready_at.push_back(ready);
    }
    // Issue order must be executable: ready points may not go backwards by more than a prefetch allows; an op
    // that is ready earlier than its predecessor simply waits for it (order is the contract).

    // Persistent state.
    auto p = alloc_state(L.local_elems, MemCategory::param);
    auto g = alloc_state(g_owned ? owned_elems : L.local_elems, MemCategory::grad);
    auto ms = alloc_f32(owned_elems, MemCategory::optimizer);
    auto mm = alloc_f32(owned_elems, MemCategory::optimizer);
    auto vv = alloc_f32(owned_elems, MemCategory::optimizer);
    if (!p || !g || !ms || !mm || !vv) return make_error("executor: out of memory for the model states");
    p_local = std::move(*p), g_acc = std::move(*g), master = std::move(*ms), mom = std::move(*mm);
    var = std::move(*vv);
    if (t_g) {
      auto b = alloc_state(L.local_elems, MemCategory::buffer);
      if (!b) return make_error(b.error());
      g_mb = std::move(*b);
    }
    gathered.resize(n_mod);
    grad_full.resize(n_mod);
    params_compute.resize(n_mod);
    if (plan.engine == Engine::zeropp && p_sharded) {
      const int k = std::max(1, plan.hpz_intra);
      for (const auto& msh : L.modules) {
        if (msh.padded_elems % k != 0)
          return make_error("executor: module padded to " + std::to_string(msh.padded_elems) +
                            " elements does not split over the hpZ group of " + std::to_string(k));
        auto s = alloc_state(msh.padded_elems / k, MemCategory::param);
        if (!s) return make_error(s.error());
        hpz_secondary.push_back(std::move(*s));
      }
    }
    // Initial weights: this rank's slice of every module (drawn in fp32, rounded into bf16 storage through a
    // scratch of one module's slice), then the owned master copy widened from P, so P = round(master) from the start.
    DeviceBuffer init_scratch;
    if (mixed()) {
      int64_t most = 0;
      for (const auto& msh : L.modules) most = std::max(most, msh.shard_elems);
      auto b = alloc_f32(most, MemCategory::buffer, /*zero=*/false);
      if (!b) return make_error(b.error());
      init_scratch = std::move(*b);
    }
    for (const auto& msh : L.modules) {
      float* dst = mixed() ? init_scratch.f32() : p_local.f32() + msh.local_offset;
      model->init_module_range(msh.module, msh.module_offset, msh.shard_elems, dst, opt.seed);
      if (mixed()) be->convert(dst, DType::fp32, at(p_local, msh.local_offset), sd, msh.shard_elems, false);
    }
    init_scratch.reset();
    for (const auto& r : owned)
      be->convert(at(p_local, r.local_offset), sd, master.f32() + r.owned_offset, DType::fp32, r.elems, false);
    carried.resize(sched->ops.size());
    be->reset_peak_memory();  // the steps' high-water mark, not the set-up's scratch
    return {};
  }

  // ---- issuing and waiting --------------------------------------------------------------------------------------
  // Issues, in list order, every op whose ready point has been reached.
  Status pump(int64_t point) {
    while (cursor < sched->ops.size() && ready_at[cursor] <= point) {
      if (auto s = issue(int(cursor)); !s) return s;
      ++cursor;
    }
    return {};
  }

  // Waits for one request and times the wait twice: the host's (wait_s and the trace, named `what`) and the compute
  // stream's (wait_spans). Returns when the host's wait ended.
  double timed_wait(Request& req, const std::string& what) {
    const double t0 = now();
    Event w0 = be->record_event();
    req.wait();
    wait_spans.push_back(WaitSpan{std::move(w0), be->record_event()});
    const double t1 = now();
    wait_s += t1 - t0;
    add_trace(what, "wait", t0, t1, 1);
    return t1;
  }

  Status wait_op(int i) {
    if (i < 0) return {};
    Inflight& f = inflight[i];
    if (!f.issued)
      return make_error("executor: waited for op " + std::to_string(i) + " (" + sched->ops[i].label +
                        ") before it was issued");
    if (f.done) return {};
    const double t1 = timed_wait(f.req, std::string("wait ") + op_class_name(cls[i]) + " " + sched->ops[i].label);
    add_trace(std::string(coll_kind_name(sched->ops[i].kind)) + " " + sched->ops[i].label, "comm", f.issue_s, t1, 2);
    f.done = true;
    return complete(i, f);
  }

  Status wait_all_issued() {
    for (size_t i = 0; i < cursor; ++i)
      if (inflight[i].issued && !inflight[i].done)
        if (auto s = wait_op(int(i)); !s) return s;
    return {};
  }

  // Waits for the previous step's broadcasts of module m (they update this rank's P slice of m).
  Status wait_carried_broadcasts(int m) {
    if (!carried_any) return {};
    for (int i : bcast_of_module[m]) {
      Inflight& f = carried[i];
      if (!f.issued || f.done) continue;
      timed_wait(f.req, "wait broadcast " + sched->ops[i].label + " (previous step)");
      f.done = true;
      unpack_broadcast(i, f);
      f = Inflight{};
    }
    return {};
  }

  Status wait_all_carried() {
    for (int m = 0; m < n_mod; ++m)
      if (auto s = wait_carried_broadcasts(m); !s) return s;
    carried_any = false;
    return {};
  }

  void* local(int64_t offset) const { return at(p_local, offset); }

  Status issue(int i) {
    const CommOp& op = sched->ops[i];
    Communicator* c = comm(op.role);
    const ShardLayout& L = sched->layout;
    Inflight& f = inflight[i];
    f.issue_s = now();
    const int m = op.module;
    const ModuleShard* msh = m >= 0 ? &L.modules[m] : nullptr;
    switch (cls[i]) {
      case OpClass::fwd_gather:
      case OpClass::bwd_gather: {
        if (op.elems != msh->padded_elems || op.elems % c->size() != 0)
          return make_error("executor: gather of " + op.label + " does not match the layout");
        if (!gathered[m].empty()) return make_error("executor: " + op.label + " gathered twice");
        if (cls[i] == OpClass::fwd_gather)
          if (auto s = wait_carried_broadcasts(m); !s) return s;
        auto buf = alloc_state(op.elems, MemCategory::buffer, /*zero=*/false);  // the gather writes all of it
        if (!buf) return make_error(buf.error());
        gathered[m] = std::move(*buf);
        const int64_t count = op.elems / c->size();
        const void* send = op.role == GroupRole::hpz ? hpz_secondary[m].data() : local(msh->local_offset);
        if (op.role != GroupRole::hpz && count != msh->shard_elems)
          return make_error("executor: gather of " + op.label + " over a group that is not the P shard group");
        f.req = c->all_gather(send, gathered[m].data(), count, sd);
        break;
      }
      case OpClass::param_rs: {
        if (grad_full[m].empty()) return make_error("executor: reduce-scatter of " + op.label + " before its backward");
        const int64_t count = op.elems / c->size();
        f.req = c->reduce_scatter(grad_full[m].data(), at(grad_full[m], int64_t(c->rank()) * count), count, sd);
        break;
      }
      case OpClass::zero_rs: {
        // ZeRO-2: the micro-batch's module gradient (transient); ZeRO-1: the accumulated local gradient. In place.
        if (zero_stage == 2 && grad_full[m].empty())
          return make_error("executor: reduce-scatter of " + op.label + " before its backward");
        const DeviceBuffer& buf = zero_stage == 2 ? grad_full[m] : g_acc;
        const int64_t first = zero_stage == 2 ? 0 : msh->local_offset;
        const int64_t count = op.elems / c->size();
        f.req = c->reduce_scatter(at(buf, first), at(buf, first + int64_t(c->rank()) * count), count, sd);
        break;
      }
      case OpClass::module_ar: {
        // MiCS: the accumulated shard of this module, in place, once its reduce-scatter has landed.
        if (auto s = wait_op(p_rs[op.micro_batch][m]); !s) return s;
        void* g = at(g_acc, msh->local_offset);
        f.req = c->all_reduce(g, g, op.elems, sd);
        break;
      }
      case OpClass::bucket_ar: {
        const int64_t lo = op.local_offset, hi = op.local_offset + op.elems;
        for (const auto& s : L.modules)  // the reduce-scatters that write into the bucket must have landed
          if (s.local_offset < hi && lo < s.local_offset + s.shard_elems)
            if (auto st = wait_op(p_rs[op.micro_batch][s.module]); !st) return st;
        const DeviceBuffer& base = t_g ? g_mb : g_acc;
        if (t_g && op.term == Term::os_sync) {
          // Last micro-batch: the owned parts accumulated by T_g join this micro-batch's gradient before the sync.
          for (const auto& r : owned) {
            const int64_t a = std::max(lo, r.local_offset), b = std::min(hi, r.local_offset + r.elems);
            if (a < b) accumulate(at(base, a), at(g_acc, r.owned_offset + (a - r.local_offset)), b - a);
          }
        }
        f.req = c->all_reduce(at(base, lo), at(base, lo), op.elems, sd);
        break;
      }
      case OpClass::zero_opt_gather: {
        const int64_t count = op.elems / c->size();
        void* dst = local(msh->local_offset);
        f.req = c->all_gather(local(msh->local_offset + int64_t(c->rank()) * count), dst, count, sd);
        break;
      }
      case OpClass::broadcast: {
        auto buf = alloc_state(op.elems, MemCategory::buffer, /*zero=*/false);  // packed or received whole
        if (!buf) return make_error(buf.error());
        f.payload = std::move(*buf);
        if (c->rank() == op.root) {
          const int64_t n = pack(op.root, *msh, f.payload, true);
          if (n != op.elems)
            return make_error("executor: owner " + std::to_string(op.root) + " packs " + std::to_string(n) +
                              " elements of " + op.label + " but the schedule broadcasts " + std::to_string(op.elems));
        }
        f.req = c->broadcast(f.payload.data(), op.elems, sd, op.root);
        break;
      }
    }
    f.issued = true;
    // Overlap switches: wait at once where the mode turns overlap off (the order of issue does not change).
    const bool is_ar = cls[i] == OpClass::bucket_ar || cls[i] == OpClass::module_ar;
    if (opt.overlap == Overlap::none || (is_ar && !overlaps_all_reduce(opt.overlap)))
      if (cls[i] != OpClass::fwd_gather && cls[i] != OpClass::bwd_gather) return wait_op(i);
    return {};
  }

  // Copies owner `owner`'s slices inside module shard `msh` between P and a payload (to_payload) or back.
  int64_t pack(int owner, const ModuleShard& msh, const DeviceBuffer& payload, bool to_payload) {
    const int64_t lo = msh.local_offset, hi = msh.local_offset + msh.shard_elems;
    int64_t n = 0;
    for (const auto& r : owner_ranges[owner]) {
      const int64_t a = std::max(lo, r.offset), b = std::min(hi, r.offset + r.elems);
      if (a >= b) continue;
      if (to_payload)
        copy_elems(at(payload, n), local(a), b - a);
      else
        copy_elems(local(a), at(payload, n), b - a);
      n += b - a;
    }
    return n;
  }

  void unpack_broadcast(int i, Inflight& f) {
    const CommOp& op = sched->ops[i];
    if (comm(op.role)->rank() != op.root) pack(op.root, sched->layout.modules[op.module], f.payload, false);
    f.payload.reset();
  }

  // What happens when an op's result is in.
  Status complete(int i, Inflight& f) {
    const CommOp& op = sched->ops[i];
    const ShardLayout& L = sched->layout;
    const int m = op.module;
    switch (cls[i]) {
      case OpClass::fwd_gather:
        if (!hpz_secondary.empty()) {  // ZeRO++: keep this rank's part of the hpZ partition for the backward
          const GroupSpec hg = group_spec(GroupRole::hpz, plan, topo);
          const int64_t part = op.elems / std::max(1, hg.size());
          copy_elems(hpz_secondary[m].data(), at(gathered[m], int64_t(group_index(hg, rank)) * part), part);
        }
        break;
      case OpClass::bwd_gather:
        break;
      case OpClass::param_rs: {
        const ModuleShard& msh = L.modules[m];
        const void* mine = at(grad_full[m], int64_t(shard_index) * msh.shard_elems);
        if (t_g)
          copy_elems(at(g_mb, msh.local_offset), mine, msh.shard_elems);
        else
          accumulate(at(g_acc, msh.local_offset), mine, msh.shard_elems);
        grad_full[m].reset();
        break;
      }
      case OpClass::zero_rs:
        if (zero_stage == 2) {
          const ModuleShard& msh = L.modules[m];
          const int64_t part = op.elems / comm(op.role)->size();
          const int64_t my_local = msh.local_offset + int64_t(L.owner_index) * part;
          for (const auto& r : owned)
            if (r.local_offset == my_local)
              accumulate(at(g_acc, r.owned_offset), at(grad_full[m], int64_t(L.owner_index) * part), part);
          grad_full[m].reset();
        }
        break;
      case OpClass::module_ar:
        break;
      case OpClass::bucket_ar:
        if (t_g) {  // select & drop: keep the owned part of the bucket
          const int64_t lo = op.local_offset, hi = op.local_offset + op.elems;
          for (const auto& r : owned) {
            const int64_t a = std::max(lo, r.local_offset), b = std::min(hi, r.local_offset + r.elems);
            if (a >= b) continue;
            void* dst = at(g_acc, r.owned_offset + (a - r.local_offset));
            if (op.term == Term::os_sync)
              copy_elems(dst, at(g_mb, a), b - a);
            else
              accumulate(dst, at(g_mb, a), b - a);
          }
        }
        break;
      case OpClass::zero_opt_gather:
        break;
      case OpClass::broadcast:
        unpack_broadcast(i, f);
        break;
    }
    return {};
  }

  // ---- compute --------------------------------------------------------------------------------------------------
  Status forward_module(int mb, int m) {
    if (auto s = pump(F(mb, m)); !s) return s;
    if (auto s = wait_carried_broadcasts(m); !s) return s;
    const ModuleShard& msh = sched->layout.modules[m];
    const void* params = local(msh.local_offset);
    int64_t elems = msh.shard_elems;
    if (p_sharded) {
      if (fwd_ag[mb][m] < 0) return make_error("executor: no forward gather of a sharded module in the schedule");
      if (auto s = wait_op(fwd_ag[mb][m]); !s) return s;
      params = gathered[m].data();
      elems = msh.padded_elems;
    }
    Event e0 = be->record_event();
    auto p = compute_params(m, params, elems);
    if (!p) return make_error(p.error());
    if (auto s = model->forward(m, *p); !s) return s;
    compute_span(std::move(e0), Section::forward, "forward " + spec->modules[m].name);
    release_params(m);
    if (p_sharded) gathered[m].reset();
    return {};
  }

  Status backward_module(int mb, int m) {
    if (auto s = pump(B(mb, m)); !s) return s;
    const ModuleShard& msh = sched->layout.modules[m];
    const void* params = local(msh.local_offset);
    int64_t elems = msh.shard_elems;
    if (p_sharded) {
      elems = msh.padded_elems;
      if (bwd_ag[mb][m] >= 0) {
        if (auto s = wait_op(bwd_ag[mb][m]); !s) return s;
        params = gathered[m].data();
      } else if (!hpz_secondary.empty()) {
        params = hpz_secondary[m].data();  // hpZ partition of one GPU: the secondary copy is the whole module
      } else {
        return make_error("executor: no backward gather of a sharded module in the schedule");
      }
    }
    // Where the module's gradient goes: a whole-module buffer to reduce-scatter (sharded P, ZeRO-2), else the local
    // G (accumulated over micro-batches). With bf16 storage the backward writes an fp32 scratch that is then rounded
    // into that place.
    const bool to_full = p_sharded || zero_stage == 2;
    const int64_t grad_elems = to_full ? msh.padded_elems : msh.shard_elems;
    if (to_full) {
      auto g = alloc_state(msh.padded_elems, MemCategory::buffer, /*zero=*/!mixed());
      if (!g) return make_error(g.error());
      grad_full[m] = std::move(*g);
    }
    void* grad_dst = to_full ? grad_full[m].data() : at(t_g ? g_mb : g_acc, msh.local_offset);
    DeviceBuffer grad_scratch;
    if (mixed()) {
      auto g = alloc_f32(grad_elems, MemCategory::buffer);
      if (!g) return make_error(g.error());
      grad_scratch = std::move(*g);
    }
    Event e0 = be->record_event();
    auto p = compute_params(m, params, elems);
    if (!p) return make_error(p.error());
    float* grads = mixed() ? grad_scratch.f32() : static_cast<float*>(grad_dst);
    if (auto s = model->backward(m, *p, grads); !s) return s;
    if (mixed()) be->convert(grads, DType::fp32, grad_dst, sd, grad_elems, /*accumulate=*/!to_full);
    compute_span(std::move(e0), Section::backward, "backward " + spec->modules[m].name);
    release_params(m);
    grad_scratch.reset();
    if (p_sharded) gathered[m].reset();
    return pump(A(mb, m));
  }

  Status optimizer() {
    const int step = step_index + 1;
    // fp32 master weights and moments; the updated master is written (rounded, with bf16 storage) into P.
    kernels::cpu::AdamWConfig no_decay = opt.adamw;
    no_decay.weight_decay = 0.0f;
    for (const auto& r : owned) {
      const void* g = at(g_acc, g_owned ? r.owned_offset : r.local_offset);
      be->adamw(master.f32() + r.owned_offset, g, sd, mom.f32() + r.owned_offset, var.f32() + r.owned_offset,
                local(r.local_offset), sd, r.elems, r.decay ? opt.adamw : no_decay, step);
    }
    be->zero(g_acc.data(), g_acc.bytes());
    return {};
  }

  Result<StepStats> step() {
    StepStats st;
    st.step = step_index;
    const int M = opt.micro_batches;
    std::set<Communicator*> distinct;
    for (auto* c : comms)
      if (c) distinct.insert(c);
    for (auto* c : distinct) c->reset_counters();
    if (opt.trace) trace->clear();
    wait_s = 0;
    spans.clear();
    wait_spans.clear();
    inflight.clear();
    inflight.resize(sched->ops.size());
    cursor = 0;
    const double t_start = now();
    step_origin_s = t_start;
    step_event = be->record_event();
    const double global_tokens = double(int64_t(topo.world()) * M * opt.micro_batch_size * opt.seq);
    std::vector<int32_t> ids, targets;
    for (int mb = 0; mb < M; ++mb) {
      micro_batch_tokens(task, step_index, rank, mb, M, opt.micro_batch_size, &ids, &targets);
      if (auto s = model->begin_micro_batch(ids.data(), targets.data(), float(1.0 / global_tokens)); !s)
        return make_error(s.error());
      if (t_g && !p_sharded) be->zero(g_mb.data(), g_mb.bytes());
      for (int m = 0; m < n_mod; ++m)
        if (auto s = forward_module(mb, m); !s) return make_error(s.error());
      for (int m = n_mod - 1; m >= 0; --m)
        if (auto s = backward_module(mb, m); !s) return make_error(s.error());
      // Everything of this micro-batch lands before the next one reuses the gradient buffers.
      if (auto s = wait_all_issued(); !s) return make_error(s.error());
      st.loss_sum += model->end_micro_batch();
    }
    // Optimizer on the owned shard, then the collectives that spread the update.
    if (auto s = wait_all_carried(); !s) return make_error(s.error());  // none left unless a module had no forward
    Event e0 = be->record_event();
    if (auto s = optimizer(); !s) return make_error(s.error());
    compute_span(std::move(e0), Section::optimizer, "optimizer");
    if (auto s = pump(OPT()); !s) return make_error(s.error());
    if (cursor != sched->ops.size())
      return make_error("executor: " + std::to_string(sched->ops.size() - cursor) + " scheduled ops were never issued");
    bool any_bcast = false;
    for (size_t i = 0; i < cursor; ++i) {
      if (cls[i] == OpClass::broadcast && overlaps_broadcast(opt.overlap)) {
        any_bcast = true;
        continue;  // lands under the next step's forward
      }
      if (auto s = wait_op(int(i)); !s) return make_error(s.error());
    }
    if (any_bcast) {
      for (size_t i = 0; i < cursor; ++i)
        if (cls[i] == OpClass::broadcast && !inflight[i].done) carried[i] = std::move(inflight[i]);
      carried_any = true;
    }
    be->synchronize();
    st.step_s = now() - t_start;
    for (const auto& sp : spans) {
      const double dt = be->elapsed_s(sp.start, sp.end);
      (sp.section == Section::forward    ? st.forward_s
       : sp.section == Section::backward ? st.backward_s
                                         : st.optimizer_s) += dt;
      if (opt.trace) {
        const double t0 = step_origin_s + be->elapsed_s(step_event, sp.start);
        add_trace(sp.name, "compute", t0, t0 + dt, 0);
      }
    }
    if (be->native_stream() == nullptr) {
      st.exposed_comm_s = wait_s;  // synchronous backend: the host waited
    } else {
      for (const auto& w : wait_spans) st.exposed_comm_s += be->elapsed_s(w.start, w.end);
    }
    st.tokens = int64_t(M) * opt.micro_batch_size * opt.seq;
    for (auto* c : distinct) {
      const auto& k = c->counters();
      for (int i = 0; i < kCollKindCount; ++i) st.bytes[i][int(c->axis())] += k.message_bytes[i];
    }
    st.peak_mem_bytes = be->memory().total_peak_bytes;
    st.state_bytes = be->memory().state_current_bytes();
    ++step_index;
    return st;
  }
};

Result<std::unique_ptr<Executor>> Executor::create(const ModelSpec& model, const Plan& plan, const Topology& topo,
                                                   int rank, const RoleComms& comms, ComputeBackend& backend,
                                                   const ExecutorOptions& options) {
  if (options.micro_batches < 1) return make_error("executor: micro-batches must be at least 1");
  ScheduleOptions so;
  so.micro_batches = options.micro_batches;
  so.bucket_bytes = options.bucket_bytes;
  so.dtype = options.state_dtype;
  so.rank = rank;
  so.expand_micro_batches = true;
  auto sched = build_schedule(model, plan, topo, so);
  if (!sched) return make_error(sched.error());
  std::unique_ptr<Executor> ex(new Executor());
  ex->sched_ = std::move(*sched);
  ModelOptions mo;
  mo.seq = options.seq;
  mo.micro_batch_size = options.micro_batch_size;
  mo.recompute = options.recompute;
  auto lm = LlamaModel::create(model, backend, mo);
  if (!lm) return make_error(lm.error());
  ex->model_ = std::make_unique<LlamaModel>(std::move(*lm));
  ex->impl_ = std::make_unique<Impl>();
  Impl& im = *ex->impl_;
  im.spec = &model;
  im.plan = plan;
  im.topo = topo;
  im.rank = rank;
  im.comms = comms;
  im.be = &backend;
  im.opt = options;
  im.sched = &ex->sched_;
  im.model = ex->model_.get();
  im.trace = &ex->trace_;
  if (auto s = im.init(); !s) return make_error(s.error());
  return ex;
}

Executor::~Executor() = default;

double StepStats::bytes_of_axis(Axis a) const {
  double s = 0;
  for (const auto& k : bytes) s += k[int(a)];
  return s;
}

Result<StepStats> Executor::step() { return impl_->step(); }

Status Executor::finish() { return impl_->wait_all_carried(); }

std::vector<float> Executor::local_parameters() const {
  const int64_t n = sched_.layout.local_elems;
  std::vector<float> out(static_cast<size_t>(n));
  if (impl_->sd == DType::fp32) {
    impl_->be->download(out.data(), impl_->p_local.data(), n * 4);
  } else {
    std::vector<uint16_t> raw(static_cast<size_t>(n));
    impl_->be->download(raw.data(), impl_->p_local.data(), n * 2);
    kernels::cpu::cast_bf16_to_fp32(raw.data(), out.data(), n);
  }
  return out;
}

int64_t Executor::global_tokens() const {
  return int64_t(impl_->topo.world()) * impl_->opt.micro_batches * impl_->opt.micro_batch_size * impl_->opt.seq;
}

std::string chrome_trace_json(const std::vector<TraceEvent>& events, int rank) {
  std::ostringstream o;
  o << "{\"traceEvents\":[\n";
  const char* lanes[] = {"compute", "waits", "collectives"};
  for (int l = 0; l < 3; ++l)
    o << "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" << rank << ",\"tid\":" << l << ",\"args\":{\"name\":\""
      << lanes[l] << "\"}},\n";
  for (size_t i = 0; i < events.size(); ++i) {
    const auto& e = events[i];
    std::string name;
    for (char c : e.name) name += (c == '"' || c == '\\') ? '_' : c;
    char buf[128];
    std::snprintf(buf, sizeof buf, "\"ts\":%.3f,\"dur\":%.3f", e.start_s * 1e6, e.dur_s * 1e6);
    o << "{\"name\":\"" << name << "\",\"cat\":\"" << e.cat << "\",\"ph\":\"X\",\"pid\":" << rank
      << ",\"tid\":" << e.lane << "," << buf << "}" << (i + 1 < events.size() ? ",\n" : "\n");
  }
  o << "]}\n";
  return o.str();
}

}  // namespace lins
