// The executor's set-up (communicators per group role and stream, the states of the plan's layout, initial weights)
// and its step: the program of core/timeline.h performed action by action. Each op purpose's rules live in
// core/purposes.h, their buffer mechanics in executor_ops.cpp; see executor.h.
#include "train/executor.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <set>
#include <sstream>
#include <thread>

#include "core/projection/simulator.h"  // compute_task_seconds: the projection's FLOPs and bytes of each task
#include "train/executor_impl.h"
#include "train/pacing.h"

namespace lins {

double Executor::Impl::now() {
  return steady_now_s();
}

void Executor::Impl::add_trace(const std::string& name, const char* cat, double t0, double t1, int lane) {
  if (opt.trace) trace->push_back(TraceEvent{name, cat, t0 - step_origin_s, t1 - t0, lane});
}

void Executor::Impl::record_action(int position, double t0, double t1) {
  if (!opt.trace) return;
  actions->push_back(ActionRecord{step_index, position, program[static_cast<std::size_t>(position)], t0 - step_origin_s,
                                  t1 - step_origin_s, false, 0, 0});
}

// ---- set-up --------------------------------------------------------------------------------------------------------

Status Executor::Impl::init(Communicator* world) {
  const ShardLayout& L = sched->layout;
  n_mod = static_cast<int>(spec->modules.size());
  sd = opt.state_dtype;
  esize = dtype_bytes(sd);
  g_owned = plan.g.total() > plan.p.total();
  task = SyntheticTask{opt.seed, spec->dims.vocab, opt.seq};
  program = step_program(*sched);

  owner_ranges.assign(static_cast<std::size_t>(L.owner_count), {});
  const std::vector<OwnedSlice> pieces = tensor_pieces(*spec, L.modules);  // local order, like the slices
  std::size_t piece = 0;
  for (const auto& sl : L.slices()) {
    owner_ranges[static_cast<std::size_t>(sl.owner)].push_back(ElemRange{sl.local_offset, sl.elems});
    if (sl.owner != L.owner_index) continue;
    // Cut the slice where weight decay starts or stops applying (slices may span tensors).
    while (piece < pieces.size() && pieces[piece].local_offset + pieces[piece].elems <= sl.local_offset) ++piece;
    for (std::size_t q = piece; q < pieces.size() && pieces[q].local_offset < sl.local_offset + sl.elems; ++q) {
      const int64_t a = std::max(pieces[q].local_offset, sl.local_offset);
      const int64_t b = std::min(pieces[q].local_offset + pieces[q].elems, sl.local_offset + sl.elems);
      const bool decay =
          pieces[q].tensor >= 0 && spec->tensors[static_cast<std::size_t>(pieces[q].tensor)].shape.size() >= 2;
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
  if (auto s = make_communicators(world); !s) return s;
  if (auto s = index_ops(); !s) return s;
  if (auto s = allocate_states(); !s) return s;
  flights.resize(sched->ops.size());
  carried.resize(sched->ops.size());
  if (opt.device_flops_per_s > 0 || opt.device_bytes_per_s > 0) {
    // The simulator's own work per task (rates of 1: FLOPs, and bytes for the optimizer), so that a paced run and
    // its projection at the same rates agree on every task's time.
    const std::vector<double> work =
        compute_task_seconds(*sched, *spec, opt.seq, opt.micro_batch_size, opt.recompute, ComputeRates{1.0, 1.0, 0.0, nullptr});
    device_task_s.assign(work.size(), 0.0);
    for (std::size_t t = 0; t < work.size(); ++t) {
      const double rate = sched->shape.task(static_cast<int>(t)).kind == TaskKind::optimizer ? opt.device_bytes_per_s
                                                                                             : opt.device_flops_per_s;
      if (rate > 0) device_task_s[t] = work[t] / rate;
    }
  }
  be->reset_peak_memory();  // the steps' high-water mark, not the set-up's scratch
  return {};
}

Status Executor::Impl::make_communicators(Communicator* world) {
  const int streams = static_cast<int>(sched->streams.size());
  op_comm.assign(sched->ops.size(), nullptr);
  if (sched->ops.empty()) return {};
  if (!world) return make_error("executor: the schedule has collectives but no communicator was given");
  // Which (stream, role) pairs the schedule uses, agreed by every rank (a rank whose broadcasts of a module are all
  // empty leaves them out, yet every rank must take part in every split).
  const int pairs = streams * kGroupRoleCount;
  std::vector<float> used(static_cast<std::size_t>(pairs), 0.0f);
  for (const auto& op : sched->ops) used[static_cast<std::size_t>(op.stream * kGroupRoleCount + int(op.role))] = 1.0f;
  LINS_ASSIGN_OR_RETURN(auto buf, be->allocate(int64_t(pairs) * 4, MemCategory::buffer, /*zero=*/false));
  be->upload(buf.data(), used.data(), int64_t(pairs) * 4);
  Request r = world->all_reduce(buf.data(), buf.data(), pairs, DType::fp32);
  r.wait();
  be->download(used.data(), buf.data(), int64_t(pairs) * 4);
  std::vector<std::shared_ptr<CommStream>> stream_objects(static_cast<std::size_t>(streams));
  std::vector<Communicator*> table(static_cast<std::size_t>(pairs), nullptr);
  for (int s = 0; s < streams; ++s) {
    for (int role = 0; role < kGroupRoleCount; ++role) {
      if (used[static_cast<std::size_t>(s * kGroupRoleCount + role)] <= 0.0f) continue;
      if (!stream_objects[static_cast<std::size_t>(s)])
        stream_objects[static_cast<std::size_t>(s)] = world->make_stream();
      const GroupSpec g = group_spec(static_cast<GroupRole>(role), plan, topo);
      const Mesh mesh = group_mesh(g, topo, rank);
      auto c = world->split(group_ranks(g, rank).front(), rank,
                            std::string(group_role_name(static_cast<GroupRole>(role))) + "@" +
                                sched->streams[static_cast<std::size_t>(s)],
                            mesh.inter > 1 ? Axis::inter : Axis::intra, stream_objects[static_cast<std::size_t>(s)]);
      if (!c) return make_error("executor: " + c.error());
      table[static_cast<std::size_t>(s * kGroupRoleCount + role)] = c->get();
      comms.push_back(std::move(*c));
    }
  }
  for (std::size_t i = 0; i < sched->ops.size(); ++i) {
    const CommOp& op = sched->ops[i];
    Communicator* c = table[static_cast<std::size_t>(op.stream * kGroupRoleCount + int(op.role))];
    if (!c || c->size() != op.group.size())
      return make_error(std::string("executor: the ") + group_role_name(op.role) + " communicator has " +
                        (c ? std::to_string(c->size()) : std::string("no")) + " ranks but the schedule's group has " +
                        std::to_string(op.group.size()));
    op_comm[i] = c;
  }
  return {};
}

// Each op's rules (core/purposes.h), the whole-module gradients it reads and the buffer it holds from its issue.
Status Executor::Impl::index_ops() {
  const int M = opt.micro_batches;
  if (sched->shape.micro_batches != M || sched->shape.modules != n_mod)
    return make_error("executor: the schedule's step shape differs from the model and its micro-batches");
  purposes = PurposeContext{g_owned, sched->transient_grads};
  op_rules.clear();
  for (const CommOp& op : sched->ops) {
    if (op.repeat != 1 || op.micro_batch < 0 || op.micro_batch >= M)
      return make_error("executor: the schedule must be expanded per micro-batch");
    const PurposeRule r = purpose_rule(op.purpose, purposes);
    if (op.kind != r.kind)
      return make_error(std::string("executor: ") + op.label + " is a " + coll_kind_name(op.kind) + ", but a " +
                        purpose_name(op.purpose) + " is a " + coll_kind_name(r.kind));
    if (op.module < 0 && r.bucket_range == BucketRange::none)
      return make_error(std::string("executor: ") + op.label + ": a " + purpose_name(op.purpose) + " names no module");
    op_rules.push_back(r);
  }
  GradientReaders reads = gradient_readers(*sched, purposes);
  grad_readers = std::move(reads.per_module);
  op_grad_modules = std::move(reads.op_modules);
  op_holds.clear();
  for (std::size_t i = 0; i < sched->ops.size(); ++i)
    op_holds.push_back(op_hold(sched->ops[i], op_rules[i], op_grad_modules[i].size()));
  return {};
}

Status Executor::Impl::allocate_states() {
  const ShardLayout& L = sched->layout;
  auto p = alloc_state(L.local_elems, MemCategory::param);
  auto g = alloc_state(g_owned ? owned_elems : L.local_elems, MemCategory::grad);
  auto ms = alloc_f32(owned_elems, MemCategory::optimizer);
  auto mm = alloc_f32(owned_elems, MemCategory::optimizer);
  auto vv = alloc_f32(owned_elems, MemCategory::optimizer);
  if (!p || !g || !ms || !mm || !vv) return make_error("executor: out of memory for the model states");
  p_local = std::move(*p), g_acc = std::move(*g), master = std::move(*ms), mom = std::move(*mm);
  var = std::move(*vv);
  if (sched->transient_grads) {
    LINS_ASSIGN_OR_RETURN(g_mb, alloc_state(L.local_elems, MemCategory::buffer));
  }
  grad_full.resize(static_cast<std::size_t>(n_mod));
  grad_full_left.assign(static_cast<std::size_t>(n_mod), 0);
  params_compute.resize(static_cast<std::size_t>(n_mod));
  persistent.resize(static_cast<std::size_t>(n_mod));
  hpz_part.resize(static_cast<std::size_t>(n_mod));
  // Initial weights: this rank's slice of every module (drawn in fp32, rounded into bf16 storage through a scratch of
  // one module), the persistent modules whole, then the owned master copy widened from P, so P = round(master).
  int64_t most = 0;
  for (const auto& msh : L.modules) most = std::max(most, msh.padded_elems);
  DeviceBuffer scratch;
  if (mixed() || !sched->persistent_modules.empty()) {
    LINS_ASSIGN_OR_RETURN(scratch, alloc_f32(most, MemCategory::buffer, /*zero=*/false));
  }
  for (const auto& msh : L.modules) {
    float* dst = mixed() ? scratch.f32() : p_local.f32() + msh.local_offset;
    model->init_module_range(msh.module, msh.module_offset, msh.shard_elems, dst, opt.seed);
    if (mixed()) be->convert(dst, DType::fp32, at(p_local, msh.local_offset), sd, msh.shard_elems, false);
  }
  for (int m : sched->persistent_modules) {
    const ModuleShard& msh = shard_of(m);
    LINS_ASSIGN_OR_RETURN(persistent[static_cast<std::size_t>(m)],
                          alloc_state(msh.padded_elems, MemCategory::buffer, /*zero=*/false));
    model->init_module_range(m, 0, msh.padded_elems, scratch.f32(), opt.seed);
    be->convert(scratch.f32(), DType::fp32, persistent[static_cast<std::size_t>(m)].data(), sd, msh.padded_elems,
                false);
  }
  scratch.reset();
  for (const auto& r : owned)
    be->convert(at(p_local, r.local_offset), sd, master.f32() + r.owned_offset, DType::fp32, r.elems, false);
  return {};
}

// ---- compute --------------------------------------------------------------------------------------------------------

// The parameters module m computes with, in the backend's compute dtype: `src` itself when the storage dtype is the
// same; else a working copy converted from it (released after the module's compute).
Result<const void*> Executor::Impl::compute_params(int m, const void* src, int64_t elems) {
  const DType cd = be->compute_dtype();
  if (cd == sd) return src;
  LINS_ASSIGN_OR_RETURN(params_compute[static_cast<std::size_t>(m)],
                        be->allocate(elems * dtype_bytes(cd), MemCategory::buffer, /*zero=*/false));
  be->convert(src, sd, params_compute[static_cast<std::size_t>(m)].data(), cd, elems, false);
  return static_cast<const void*>(params_compute[static_cast<std::size_t>(m)].data());
}

// Where task `task` (module m) reads its parameters, and how many elements they are.
Result<const void*> Executor::Impl::task_params(int task, int m, int64_t* elems) {
  const TaskParams& tp = sched->task_params[static_cast<std::size_t>(task)];
  const ModuleShard& msh = shard_of(m);
  switch (tp.source) {
    case TaskParams::Source::local:
      *elems = msh.shard_elems;
      return static_cast<const void*>(local(msh.local_offset));
    case TaskParams::Source::persistent:
      *elems = msh.padded_elems;
      return static_cast<const void*>(persistent[static_cast<std::size_t>(m)].data());
    case TaskParams::Source::gathered: {
      const Flight& f = flights[static_cast<std::size_t>(tp.gather_op)];
      if (!f.waited || f.buf.empty())
        return make_error("executor: " + spec->modules[static_cast<std::size_t>(m)].name +
                          " computes before its gathered parameters are in");
      *elems = msh.padded_elems;
      return static_cast<const void*>(f.buf.data());
    }
  }
  return make_error("executor: no parameters for " + spec->modules[static_cast<std::size_t>(m)].name);
}

// What a task's end releases or keeps of its parameters.
void Executor::Impl::after_task(int task, int m) {
  const TaskParams& tp = sched->task_params[static_cast<std::size_t>(task)];
  params_compute[static_cast<std::size_t>(m)].reset();
  if (tp.source != TaskParams::Source::gathered) return;
  Flight& f = flights[static_cast<std::size_t>(tp.gather_op)];
  if (tp.keep_hpz_part) {
    const GroupSpec hg = group_spec(GroupRole::hpz, plan, topo);
    const int64_t part = shard_of(m).padded_elems / std::max(1, hg.size());
    auto b = alloc_state(part, MemCategory::buffer, /*zero=*/false);  // lives until the end of the step at most
    if (b) {
      hpz_part[static_cast<std::size_t>(m)] = std::move(*b);
      be->copy(hpz_part[static_cast<std::size_t>(m)].data(), at(f.buf, int64_t(group_index(hg, rank)) * part),
               part * esize);
    }
  }
  if (tp.release) f.buf.reset();
  if (tp.drop_hpz_part) hpz_part[static_cast<std::size_t>(m)].reset();
}

Status Executor::Impl::forward_module(int mb, int m, int task_index) {
  (void)mb;
  int64_t elems = 0;
  LINS_ASSIGN_OR_RETURN(auto params, task_params(task_index, m, &elems));
  Event e0 = be->record_event();
  LINS_ASSIGN_OR_RETURN(auto p, compute_params(m, params, elems));
  if (auto s = model->forward(m, p); !s) return s;
  Event e1 = pace(task_index, e0);
  spans.push_back(Span{std::move(e0), std::move(e1), Section::forward,
                       "forward " + spec->modules[static_cast<std::size_t>(m)].name});
  after_task(task_index, m);
  return {};
}

Status Executor::Impl::backward_module(int mb, int m, int task_index) {
  int64_t elems = 0;
  LINS_ASSIGN_OR_RETURN(auto params, task_params(task_index, m, &elems));
  const ModuleShard& msh = shard_of(m);
  // Where the module's gradient goes: a whole-module buffer that an op reads, else the transient buffer or G itself
  // (accumulated over micro-batches). With bf16 storage the backward writes an fp32 scratch that is then rounded into
  // that place.
  const int readers = grad_readers[static_cast<std::size_t>(mb)][static_cast<std::size_t>(m)];
  const bool to_full = readers > 0;
  const int64_t grad_elems = to_full ? msh.padded_elems : msh.shard_elems;
  if (to_full) {
    if (!grad_full[static_cast<std::size_t>(m)].empty())
      return make_error("executor: the backward of " + spec->modules[static_cast<std::size_t>(m)].name +
                        " runs while the previous micro-batch's gradient of it is still being reduced");
    LINS_ASSIGN_OR_RETURN(grad_full[static_cast<std::size_t>(m)],
                          alloc_state(msh.padded_elems, MemCategory::buffer, /*zero=*/!mixed()));
    grad_full_left[static_cast<std::size_t>(m)] = readers;
  }
  void* grad_dst = to_full ? grad_full[static_cast<std::size_t>(m)].data()
                           : at(sched->transient_grads ? g_mb : g_acc, msh.local_offset);
  DeviceBuffer grad_scratch;
  if (mixed()) {
    LINS_ASSIGN_OR_RETURN(grad_scratch, alloc_f32(grad_elems, MemCategory::buffer));
  }
  Event e0 = be->record_event();
  LINS_ASSIGN_OR_RETURN(auto p, compute_params(m, params, elems));
  float* grads = mixed() ? grad_scratch.f32() : static_cast<float*>(grad_dst);
  if (auto s = model->backward(m, p, grads); !s) return s;
  if (mixed()) be->convert(grads, DType::fp32, grad_dst, sd, grad_elems, /*accumulate=*/!to_full);
  Event e1 = pace(task_index, e0);
  spans.push_back(Span{std::move(e0), std::move(e1), Section::backward,
                       "backward " + spec->modules[static_cast<std::size_t>(m)].name});
  grad_scratch.reset();
  after_task(task_index, m);
  return {};
}

Status Executor::Impl::optimizer(int task_index) {
  const int step_number = step_index + 1;
  // fp32 master weights and moments; the updated master is written (rounded, with bf16 storage) into P.
  kernels::cpu::AdamWConfig no_decay = opt.adamw;
  no_decay.weight_decay = 0.0f;
  Event e0 = be->record_event();
  for (const auto& r : owned) {
    const void* g = at(g_acc, g_owned ? r.owned_offset : r.local_offset);
    be->adamw(master.f32() + r.owned_offset, g, sd, mom.f32() + r.owned_offset, var.f32() + r.owned_offset,
              local(r.local_offset), sd, r.elems, r.decay ? opt.adamw : no_decay, step_number);
  }
  be->zero(g_acc.data(), g_acc.bytes());
  Event e1 = pace(task_index, e0);
  spans.push_back(Span{std::move(e0), std::move(e1), Section::optimizer, "optimizer"});
  for (auto& part : hpz_part) part.reset();  // secondary copies of P are made again from the next gathers
  return {};
}

Status Executor::Impl::run_task(int task_index) {
  const ComputeTask t = sched->shape.task(task_index);
  switch (t.kind) {
    case TaskKind::forward:
      if (t.module == 0) {
        std::vector<int32_t> ids, targets;
        const double global = double(int64_t(topo.world()) * opt.micro_batches * opt.micro_batch_size * opt.seq);
        micro_batch_tokens(task, step_index, rank, t.micro_batch, opt.micro_batches, opt.micro_batch_size, &ids,
                           &targets);
        if (auto s = model->begin_micro_batch(ids.data(), targets.data(), float(1.0 / global)); !s) return s;
        // The transient gradient is written in place by the backward of modules no op reads whole: start from zero.
        if (sched->transient_grads) {
          const auto& readers = grad_readers[static_cast<std::size_t>(t.micro_batch)];
          if (std::any_of(readers.begin(), readers.end(), [](int r) { return r == 0; }))
            be->zero(g_mb.data(), g_mb.bytes());
        }
      }
      return forward_module(t.micro_batch, t.module, task_index);
    case TaskKind::backward: {
      if (auto s = backward_module(t.micro_batch, t.module, task_index); !s) return s;
      if (t.module == 0) model->end_micro_batch();
      return {};
    }
    case TaskKind::optimizer:
      return optimizer(task_index);
  }
  return {};
}

// The end of task `task`, begun at `start`: a paced task that finished its work within its device time ends when the
// device would have (start + device time) and the host sleeps until then; one that took longer (an overrun) ends
// when its work did. A host that wakes after the device's end (the scheduler gave its core away) is late, as a host
// that launches late is: that shows in the step's time, not in the task's. A task with no device time (the
// embedding's gather, the norms: no FLOPs in the formula) runs unpaced and is not counted. The backend is the
// synchronous CPU's (create refuses pacing on the GPU's, which keeps its own time), so its work is done here.
Event Executor::Impl::pace(int task, const Event& start) {
  const double device_s = device_task_s.empty() ? 0.0 : device_task_s[static_cast<std::size_t>(task)];
  if (device_s <= 0) return be->record_event();
  ++paced_tasks;
  const double end_s = start.host_s + device_s;
  double late_s = 0;
  if (!pace_until(end_s, &late_s)) {
    ++overrun_tasks;
    return be->record_event();
  }
  pace_late_s += late_s;
  Event end;
  end.host_s = end_s;
  return end;
}

// ---- waits ----------------------------------------------------------------------------------------------------------

// Waits for one request and times the wait twice: the host's (wait_s and the trace, named `what`) and the compute
// stream's (wait_spans). Returns when the host's wait ended.
double Executor::Impl::timed_wait(Request& req, const std::string& what) {
  const double t0 = now();
  Event w0 = be->record_event();
  req.wait();
  wait_spans.push_back(WaitSpan{std::move(w0), be->record_event()});
  const double t1 = now();
  wait_s += t1 - t0;
  add_trace(what, "wait", t0, t1, 1);
  return t1;
}

Status Executor::Impl::wait_op(int i) {
  Flight& f = flights[static_cast<std::size_t>(i)];
  const CommOp& op = sched->ops[static_cast<std::size_t>(i)];
  if (!f.issued)
    return make_error("executor: waited for op " + std::to_string(i) + " (" + op.label + ") before it was issued");
  if (f.waited) return {};
  comm_events->push_back(Action{.kind = Action::Kind::wait, .index = i});
  const double t1 = timed_wait(f.done, std::string("wait ") + purpose_name(op.purpose) + " " + op.label);
  f.collective.wait();  // settles its counters
  double a = 0, z = 0;
  if (exec_interval(f, &a, &z))
    a += step_origin_s, z += step_origin_s;
  else
    a = f.issue_s + step_origin_s, z = t1;
  add_trace(std::string(coll_kind_name(op.kind)) + " " + op.label, "comm", a, z, 2 + op.stream);
  f.waited = true;
  return complete(i, f);
}

// Waits for the previous step's op i (its next-step wait); *exec_* get when it ran on its stream, from this step's
// start (negative: it started before). Nothing is carried into the first step.
Status Executor::Impl::wait_carried(int i, bool* timed, double* exec_start, double* exec_end) {
  Flight& f = carried[static_cast<std::size_t>(i)];
  if (!f.issued || f.waited) return {};
  const CommOp& op = sched->ops[static_cast<std::size_t>(i)];
  if (comm_events) comm_events->push_back(Action{.kind = Action::Kind::wait, .index = i, .carried = true});
  timed_wait(f.done, std::string("wait ") + purpose_name(op.purpose) + " " + op.label + " (previous step)");
  f.collective.wait();
  f.waited = true;
  if (timed) *timed = exec_interval(f, exec_start, exec_end);
  auto s = complete(i, f);
  f = Flight{};
  return s;
}

Status Executor::Impl::finish() {
  for (std::size_t i = 0; i < carried.size(); ++i)
    if (auto s = wait_carried(static_cast<int>(i), nullptr, nullptr, nullptr); !s) return s;
  return {};
}

// When the op ran on its stream: from its first piece of work to the end of its last, host seconds from the step's
// start; false when the backend does not time its streams on the host.
bool Executor::Impl::exec_interval(const Flight& f, double* start, double* end) const {
  double a = 0, z = 0, a0 = 0, z0 = 0;
  if (!f.done.executed(&a, &z)) return false;
  const Request& head = f.first.impl() ? f.first : f.collective.impl() ? f.collective : f.done;
  if (head.executed(&a0, &z0)) a = a0;
  *start = a - step_origin_s;
  *end = z - step_origin_s;
  return true;
}

// ---- the step -------------------------------------------------------------------------------------------------------

Result<StepStats> Executor::Impl::step() {
  StepStats st;
  st.step = step_index;
  std::set<Communicator*> distinct;
  for (auto& c : comms) distinct.insert(c.get());
  for (auto* c : distinct) c->reset_counters();
  if (opt.trace) trace->clear(), actions->clear();
  issued->clear();
  comm_events->clear();
  wait_s = 0;
  (void)model->take_loss_sum();  // nothing is left from a step cut short
  spans.clear();
  wait_spans.clear();
  paced_tasks = overrun_tasks = 0;
  pace_late_s = 0;
  flights.clear();
  flights.resize(sched->ops.size());
  const double t_start = now();
  step_origin_s = t_start;
  step_event = be->record_event();
  for (std::size_t pos = 0; pos < program.size(); ++pos) {
    const Action& a = program[pos];
    const double t0 = now();
    Status s;
    switch (a.kind) {
      case Action::Kind::compute:
        s = run_task(a.index);
        break;
      case Action::Kind::issue:
        s = issue(a.index);
        break;
      case Action::Kind::wait:
        if (a.carried) {
          bool timed = false;
          double exec_start = 0, exec_end = 0;
          s = wait_carried(a.index, &timed, &exec_start, &exec_end);
          if (!s) return make_error(s.error());
          record_action(static_cast<int>(pos), t0, now());
          if (opt.trace) {
            actions->back().exec_timed = timed;
            actions->back().exec_start_s = exec_start, actions->back().exec_end_s = exec_end;
          }
          continue;
        }
        s = wait_op(a.index);
        break;
    }
    if (!s) return make_error(s.error());
    record_action(static_cast<int>(pos), t0, now());
  }
  // Everything issued has been waited for, but what the next step waits for: carry it.
  for (std::size_t i = 0; i < flights.size(); ++i) {
    Flight& f = flights[i];
    if (!f.issued)
      return make_error("executor: op " + std::to_string(i) + " (" + sched->ops[i].label + ") never issued");
    if (f.waited) continue;
    if (!sched->ops[i].wait.next_step)
      return make_error("executor: op " + std::to_string(i) + " (" + sched->ops[i].label + ") never waited for");
    carried[i] = std::move(f);
  }
  be->synchronize();
  st.step_s = now() - t_start;
  // Exec times of this step's issues that completed within it.
  if (opt.trace)
    for (auto& rec : *actions) {
      if (rec.action.kind != Action::Kind::issue) continue;
      const Flight& f = flights[static_cast<std::size_t>(rec.action.index)];
      if (f.waited) rec.exec_timed = exec_interval(f, &rec.exec_start_s, &rec.exec_end_s);
    }
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
  st.loss_sum = model->take_loss_sum();
  st.tokens = int64_t(opt.micro_batches) * opt.micro_batch_size * opt.seq;
  for (auto* c : distinct) {
    const auto& k = c->counters();
    for (int i = 0; i < kCollKindCount; ++i)
      st.bytes[static_cast<std::size_t>(i)][int(c->axis())] += k.message_bytes[i];
  }
  st.peak_mem_bytes = be->memory().total_peak_bytes;
  st.state_bytes = be->memory().state_current_bytes();
  st.buffer_peak_bytes = be->memory().peak_bytes[static_cast<std::size_t>(MemCategory::buffer)];
  st.paced_tasks = paced_tasks, st.overrun_tasks = overrun_tasks, st.pace_late_s = pace_late_s;
  ++step_index;
  return st;
}

// ---- the public face ------------------------------------------------------------------------------------------------

Result<std::unique_ptr<Executor>> Executor::create(const ModelSpec& model, const Plan& plan, const Topology& topo,
                                                   int rank, Communicator* world, ComputeBackend& backend,
                                                   const ExecutorOptions& options) {
  if (options.micro_batches < 1) return make_error("executor: micro-batches must be at least 1");
  if (!(options.device_flops_per_s >= 0) || !(options.device_bytes_per_s >= 0))
    return make_error("executor: a device rate must be positive (or 0: unpaced)");
  // Pacing sleeps the host after each task's work is done, which only a synchronous backend's host knows.
  if ((options.device_flops_per_s > 0 || options.device_bytes_per_s > 0) && backend.native_stream() != nullptr)
    return make_error(
        "executor: pacing to an emulated device rate needs a synchronous (CPU) backend; a GPU keeps its own time");
  LINS_ASSIGN_OR_RETURN(
      auto sched, build_schedule(model, plan, topo,
                                 schedule_options(options.micro_batches, options.bucket_bytes, options.state_dtype,
                                                  options.engine, options.overlap, /*expand=*/true, rank)));
  std::unique_ptr<Executor> ex(new Executor());
  ex->sched_ = std::move(sched);
  ModelOptions mo;
  mo.seq = options.seq;
  mo.micro_batch_size = options.micro_batch_size;
  mo.recompute = options.recompute;
  LINS_ASSIGN_OR_RETURN(auto lm, LlamaModel::create(model, backend, mo));
  ex->model_ = std::make_unique<LlamaModel>(std::move(lm));
  ex->impl_ = std::make_unique<Impl>();
  Impl& im = *ex->impl_;
  im.spec = &model;
  im.plan = plan;
  im.topo = topo;
  im.rank = rank;
  im.be = &backend;
  im.opt = options;
  im.sched = &ex->sched_;
  im.model = ex->model_.get();
  im.trace = &ex->trace_;
  im.actions = &ex->actions_;
  im.issued = &ex->issued_;
  im.comm_events = &ex->comm_events_;
  LINS_TRY(im.init(world));
  return ex;
}

Executor::~Executor() {
  if (impl_) {
    impl_->flights.clear();  // requests before the communicators they point into
    impl_->carried.clear();
  }
}

double StepStats::bytes_of_axis(Axis a) const {
  double s = 0;
  for (const auto& k : bytes) s += k[int(a)];
  return s;
}

Result<StepStats> Executor::step() { return impl_->step(); }

Status Executor::finish() { return impl_->finish(); }

const std::vector<Action>& Executor::program() const { return impl_->program; }

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

}  // namespace lins
