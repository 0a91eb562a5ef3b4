// The projection of one step: the program of timeline.h timed with FLOPs and the cost model; see simulator.h.
#include "core/projection/simulator.h"

namespace lins {

double module_forward_flops(const ModelSpec& model, int module, double tokens, int seq) {
  const auto& m = model.modules[static_cast<std::size_t>(module)];
  if (m.kind == "embed") return 0.0;  // a gather, no matmul
  double flops = 0;
  for (int t : m.tensors)
    if (model.tensors[static_cast<std::size_t>(t)].shape.size() == 2)
      flops += 2.0 * double(model.tensors[static_cast<std::size_t>(t)].elems) * tokens;
  if (m.kind == "attn") flops += 4.0 * double(seq) * model.dims.hidden * tokens;
  return flops;
}

double module_recompute_flops(const ModelSpec& model, int module, double tokens, int seq, Recompute r) {
  switch (r) {
    case Recompute::none:
      return 0.0;
    case Recompute::selective:  // QK^T and the product with V: 2*seq*h each per token
      return model.modules[static_cast<std::size_t>(module)].kind == "attn"
                 ? 4.0 * double(seq) * model.dims.hidden * tokens
                 : 0.0;
    case Recompute::full:  // one more forward of every module, as full recomputation has always been priced
      return module_forward_flops(model, module, tokens, seq);
  }
  return 0.0;
}

namespace {
constexpr double kOptimizerBytesPerElem = 3 * 4 * 2 + 2 + 2;  // master, m, v read+write; grad read; param write
}  // namespace

std::vector<double> compute_task_seconds(const Schedule& s, const ModelSpec& model, int seq, int micro_batch_size,
                                         Recompute recompute, const ComputeRates& rates) {
  const double tokens = double(seq) * micro_batch_size;
  std::vector<double> out(static_cast<std::size_t>(s.shape.task_count()));
  for (int t = 0; t < s.shape.task_count(); ++t) {
    const ComputeTask task = s.shape.task(t);
    if (task.kind == TaskKind::optimizer) {
      out[static_cast<std::size_t>(t)] =
          double(s.layout.owned_elems()) * kOptimizerBytesPerElem / rates.optimizer_bytes_per_s;
      continue;
    }
    if (rates.roofline) {  // each kernel of the module at its own rate (roofline.h)
      const Roofline& r = *rates.roofline;
      const double fwd = r.forward_s(model, task.module, tokens, seq);
      // Recomputed in backward: the whole forward (full), or the attention core alone (selective).
      const double again = recompute == Recompute::full ? fwd
                           : recompute == Recompute::selective &&
                                   model.modules[static_cast<std::size_t>(task.module)].kind == "attn"
                               ? r.attention_forward_s(model, tokens, seq)
                               : 0.0;
      out[static_cast<std::size_t>(t)] =
          task.kind == TaskKind::forward ? fwd : r.backward_s(model, task.module, tokens, seq) + again;
      continue;
    }
    const double fwd = module_forward_flops(model, task.module, tokens, seq) / rates.sustained_flops_per_s;
    const double again =
        module_recompute_flops(model, task.module, tokens, seq, recompute) / rates.sustained_flops_per_s;
    out[static_cast<std::size_t>(t)] = task.kind == TaskKind::forward ? fwd : 2 * fwd + again;
  }
  return out;
}

TaskClass task_class(const Schedule& s, const ModelSpec& model, int task) {
  const ComputeTask t = s.shape.task(task);
  if (t.kind == TaskKind::optimizer) return TaskClass::memory;
  return model.modules[static_cast<std::size_t>(t.module)].kind == "embed" ? TaskClass::memory : TaskClass::gemm;
}

std::vector<TraceEvent> timeline_trace(const Schedule& s, const ModelSpec& model, const std::vector<Action>& program,
                                       const TimelineResult& r, const HostProgram* host) {
  std::vector<TraceEvent> out;
  double before = 0;  // the cursor before each action
  for (std::size_t pos = 0; pos < program.size(); ++pos) {
    const Action& a = program[pos];
    const double end = r.action_end_s[pos];
    if (a.kind == Action::Kind::compute) {
      const ComputeTask t = s.shape.task(a.index);
      const double d = r.task_s[static_cast<std::size_t>(a.index)];
      std::string name = kTaskKindNames.name(t.kind);
      if (t.kind != TaskKind::optimizer) name += " " + model.modules[static_cast<std::size_t>(t.module)].name;
      out.push_back(TraceEvent{name, "compute", end - d, d, 0});
    } else if (a.kind == Action::Kind::wait && end > before) {
      const CommOp& op = s.ops[static_cast<std::size_t>(a.index)];
      out.push_back(TraceEvent{std::string("wait ") + purpose_name(op.purpose) + " " + op.label, "wait", before,
                               end - before, 1});
    }
    before = end;
  }
  if (host && r.host_end_s.size() == program.size()) {
    for (std::size_t pos = 0; pos < program.size(); ++pos) {
      const double w = host->ahead_s[pos];
      if (w <= 0) continue;
      const Action& a = program[pos];
      std::string name = "host " + std::string(action_kind_name(a.kind));
      if (a.kind != Action::Kind::compute) {
        const CommOp& op = s.ops[static_cast<std::size_t>(a.index)];
        name += std::string(" ") + purpose_name(op.purpose) + " " + op.label;
      }
      out.push_back(TraceEvent{name, "host", r.host_end_s[pos] - w, w, kHostLane});
    }
  }
  for (std::size_t i = 0; i < s.ops.size(); ++i) {
    const CommOp& op = s.ops[i];
    const OpTiming& t = r.ops[i];
    out.push_back(TraceEvent{std::string(coll_kind_name(op.kind)) + " " + op.label, "comm", t.start_s,
                             t.end_s - t.start_s, 2 + op.stream});
  }
  return out;
}

StepProjection project_step(const Schedule& s, const ModelSpec& model, int seq, int micro_batch_size,
                            Recompute recompute, const ComputeRates& rates,
                            const std::function<double(const CommOp&)>& op_seconds, std::vector<TraceEvent>* trace,
                            const HostModel* host) {
  std::vector<double> op_s(s.ops.size());
  for (std::size_t i = 0; i < s.ops.size(); ++i) op_s[i] = op_seconds(s.ops[i]);
  return project_step(s, model, seq, micro_batch_size, recompute, rates, op_s, trace, host);
}

StepProjection project_step(const Schedule& s, const ModelSpec& model, int seq, int micro_batch_size,
                            Recompute recompute, const ComputeRates& rates, const std::vector<double>& op_s,
                            std::vector<TraceEvent>* trace, const HostModel* host, const Contention* contention,
                            const std::vector<double>* op_latency_s) {
  const std::vector<double> task_s = compute_task_seconds(s, model, seq, micro_batch_size, recompute, rates);
  TimelineCosts costs;
  costs.compute_s = [&](int t) { return task_s[static_cast<std::size_t>(t)]; };
  costs.op_s = [&](int i) { return op_s[static_cast<std::size_t>(i)]; };
  if (contention)
    costs.rates = timeline_rates(
        *contention, s, [&](int t) { return task_class(s, model, t); },
        op_latency_s ? std::function<double(int)>([op_latency_s](int i) { return (*op_latency_s)[std::size_t(i)]; })
                     : std::function<double(int)>());
  const std::vector<Action> program = step_program(s);
  HostProgram hp;
  if (host) {
    hp = host_program(s, model, program, *host);
    attach_host(costs, hp);
  }
  const TimelineResult r = run_timeline(s, program, costs);
  if (trace) *trace = timeline_trace(s, model, program, r, host ? &hp : nullptr);
  StepProjection out;
  for (int t = 0; t < s.shape.task_count(); ++t) {
    const TaskKind kind = s.shape.task(t).kind;
    (kind == TaskKind::forward    ? out.forward_s
     : kind == TaskKind::backward ? out.backward_s
                                  : out.optimizer_s) += task_s[static_cast<std::size_t>(t)];
  }
  out.fixed_s = rates.fixed_step_s;
  out.step_s = r.step_s + rates.fixed_step_s;
  out.exposed_comm_s = r.waited_s;
  out.host_work_s = r.host_ahead_s;
  out.host_stall_s = r.host_stall_s;
  for (std::size_t pos = 0; pos < program.size(); ++pos) {
    if (program[pos].kind != Action::Kind::wait) continue;
    const double stood = r.action_end_s[pos] - (pos > 0 ? r.action_end_s[pos - 1] : 0.0);
    if (stood <= 0) continue;
    const CommOp& op = s.ops[static_cast<std::size_t>(program[pos].index)];
    out.exposed_kind_axis_s[int(op.kind)][int(op.axis())] += stood;
    out.exposed_purpose_axis_s[int(op.purpose)][int(op.axis())] += stood;
  }
  out.contention_compute_s = r.compute_stretch_s;
  for (std::size_t i = 0; i < s.ops.size(); ++i) {
    const double stretch = (r.ops[i].end_s - r.ops[i].start_s) - op_s[i];
    // An op nothing slowed ends at its start plus its price, up to the rounding of the subtraction.
    if (stretch <= 1e-9 * op_s[i]) continue;
    out.contention_comm_s += stretch;
    out.contention_purpose_s[int(s.ops[i].purpose)] += stretch;
  }
  out.stream_busy_s = r.stream_busy_s;
  for (double b : r.stream_busy_s) out.comm_busy_s += b;
  return out;
}

}  // namespace lins
