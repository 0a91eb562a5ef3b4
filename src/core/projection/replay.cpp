// Trace replay; see replay.h.
#include "core/projection/replay.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

#include "core/util/csv.h"

namespace lins {
namespace {
// More communication streams than any engine uses (they use up to three): a log naming more is not one of ours.
constexpr int kMaxStreams = 64;
}  // namespace

std::string action_log_csv(const Schedule& s, const ModelSpec& model, const std::vector<ActionRecord>& actions) {
  std::ostringstream o;
  o << "step,position,action,index,carried,purpose,kind,stream,after,next_step,label,start_s,end_s,exec_start_s,"
       "exec_end_s\n";
  char nums[160];
  for (const auto& r : actions) {
    const bool is_op = r.action.kind != Action::Kind::compute;
    std::string label, purpose, kind, stream, after, next;
    if (is_op) {
      const CommOp& c = s.ops[static_cast<std::size_t>(r.action.index)];
      label = c.label, purpose = purpose_name(c.purpose), kind = coll_kind_name(c.kind);
      stream = std::to_string(c.stream), after = std::to_string(c.after);
      next.assign(1, c.wait.next_step ? '1' : '0');  // a char: GCC 12 warns falsely (-Wrestrict) on = "1"
    } else {
      const ComputeTask t = s.shape.task(r.action.index);
      label = kTaskKindNames.name(t.kind);
      if (t.kind != TaskKind::optimizer) label += " " + model.modules[static_cast<std::size_t>(t.module)].name;
    }
    if (r.exec_timed)
      std::snprintf(nums, sizeof nums, "%.9f,%.9f,%.9f,%.9f", r.start_s, r.end_s, r.exec_start_s, r.exec_end_s);
    else
      std::snprintf(nums, sizeof nums, "%.9f,%.9f,,", r.start_s, r.end_s);
    o << r.step << ',' << r.position << ',' << action_kind_name(r.action.kind) << ',' << r.action.index << ','
      << (r.action.carried ? 1 : 0) << ',' << purpose << ',' << kind << ',' << stream << ',' << after << ',' << next
      << ',' << csv_escape(label) << ',' << nums << '\n';
  }
  return o.str();
}

Result<ActionLog> parse_action_log(std::string_view text, const std::string& where) {
  LINS_ASSIGN_OR_RETURN(const CsvTable t, CsvTable::parse(text, where, "the action log of `lins step --trace`"));
  LINS_TRY(t.require({"step", "position", "action", "index", "carried", "stream", "after", "next_step", "label",
                      "start_s", "end_s", "exec_start_s", "exec_end_s"}));
  ActionLog log;
  for (std::size_t r = 0; r < t.rows(); ++r) {
    const std::string at = t.at(r);
    LINS_TRY(t.check_width(r));
    auto number = [&](const char* name, double* out) -> Status {
      LINS_ASSIGN_OR_RETURN(*out, t.number(r, name));
      return {};
    };
    ActionLog::Row row;
    double step = 0, pos = 0, index = 0, carried = 0, stream = -1, after = -1, next = 0;
    for (auto [name, out] : {std::pair<const char*, double*>{"step", &step},
                             {"position", &pos},
                             {"index", &index},
                             {"carried", &carried},
                             {"start_s", &row.rec.start_s},
                             {"end_s", &row.rec.end_s}})
      LINS_TRY(number(name, out));
    row.rec.exec_timed = !t.text(r, "exec_start_s").empty();
    if (row.rec.exec_timed)
      for (auto [name, out] : {std::pair<const char*, double*>{"exec_start_s", &row.rec.exec_start_s},
                               {"exec_end_s", &row.rec.exec_end_s}})
        LINS_TRY(number(name, out));
    const std::string& action = t.text(r, "action");
    auto kind = kActionKindNames.parse(action);
    if (!kind) return make_error(at + ": " + kind.error());
    row.rec.action.kind = *kind;
    if (*kind != Action::Kind::compute)
      for (auto [name, out] :
           {std::pair<const char*, double*>{"stream", &stream}, {"after", &after}, {"next_step", &next}})
        LINS_TRY(number(name, out));
    for (double v : {step, pos, index, after, stream})
      if (v != std::floor(v))
        return make_error(at + ": step, position, index, stream and after are whole numbers, not " + std::to_string(v));
    if (step < 0 || pos < 0 || step > double(std::numeric_limits<int>::max()) ||
        pos > double(std::numeric_limits<int>::max()))
      return make_error(at + ": step and position go from 0 to " + std::to_string(std::numeric_limits<int>::max()));
    const bool op_row = row.rec.action.kind != Action::Kind::compute;
    if (index < 0 || after < -1 || (op_row && stream < 0))
      return make_error(at +
                        ": a negative index, stream or after is not valid (an issue or wait names its op's "
                        "stream, 0 or more)");
    if (index >= double(kMaxScheduleOps) || after >= double(kMaxScheduleOps) || stream >= double(kMaxStreams))
      return make_error(at + ": index or after of " + std::to_string(kMaxScheduleOps) + " or more, or stream of " +
                        std::to_string(kMaxStreams) + " or more: no schedule is that long");
    row.rec.step = static_cast<int>(step);
    row.rec.position = static_cast<int>(pos);
    row.rec.action.index = static_cast<int>(index);
    row.rec.action.carried = carried != 0;
    row.stream = static_cast<int>(stream);
    row.after = static_cast<int>(after);
    row.next_step = next != 0;
    row.label = t.text(r, "label");
    row.purpose = t.text(r, "purpose");  // "" in logs written before the column existed
    if (!log.rows.empty() && row.rec.step != log.step)
      return make_error(at + ": step " + std::to_string(row.rec.step) + " in a log of step " +
                        std::to_string(log.step));
    log.step = row.rec.step;
    log.rows.push_back(std::move(row));
  }
  if (log.rows.empty()) return make_error(where + ": no actions");
  return log;
}

Result<ReplayResult> replay(const ActionLog& log, const ReplayOptions& options) {
  // A schedule holding just what the timeline reads of each op: its stream, the op it runs after, and whether the
  // next step waits for it. Compute tasks are indexed as the log names them.
  Schedule s;
  int max_op = -1, max_task = -1, max_stream = 0;
  for (const auto& r : log.rows) {
    if (r.rec.action.kind == Action::Kind::compute)
      max_task = std::max(max_task, r.rec.action.index);
    else
      max_op = std::max(max_op, r.rec.action.index), max_stream = std::max(max_stream, r.stream);
  }
  s.ops.resize(static_cast<std::size_t>(max_op + 1));
  for (auto& op : s.ops) op.stream = -1;  // set below for the ops the log has
  s.streams.assign(static_cast<std::size_t>(max_stream + 1), "");
  std::vector<double> op_s(s.ops.size(), -1.0), task_s(static_cast<std::size_t>(max_task + 1), 0.0);
  std::vector<Action> program;
  std::vector<double> host(log.rows.size(), 0.0), after(log.rows.size(), 0.0);
  double previous_end = 0;
  ReplayResult out;
  // Measured times per op: issued (the start of its issue action), ran on its stream [exec_start, exec_end].
  std::vector<double> issued_at(s.ops.size(), 0.0), exec_start(s.ops.size(), 0.0), exec_end(s.ops.size(), 0.0);
  std::vector<bool> timed(s.ops.size(), false), carried(s.ops.size(), false);
  std::vector<int> issue_order;  // this step's issues, in order
  for (std::size_t pos = 0; pos < log.rows.size(); ++pos) {
    const auto& r = log.rows[pos];
    const Action& a = r.rec.action;
    program.push_back(a);
    // Host time besides what the timeline models: the gap since the last action (and, after an issue, the issuing).
    host[pos] = std::max(0.0, r.rec.start_s - previous_end);
    previous_end = r.rec.end_s;
    if (a.kind == Action::Kind::compute) {
      task_s[static_cast<std::size_t>(a.index)] = r.rec.end_s - r.rec.start_s;
      continue;
    }
    const auto i = static_cast<std::size_t>(a.index);
    CommOp& op = s.ops[i];
    op.stream = r.stream;
    op.after = r.after;
    op.wait.next_step = r.next_step;
    if (a.kind == Action::Kind::issue) {
      // The op is on its stream from the start of its issue action; the rest of the action is host time after it.
      after[pos] = options.issue_host_s >= 0 ? options.issue_host_s : r.rec.end_s - r.rec.start_s;
      issued_at[i] = r.rec.start_s;
      if (!r.next_step) issue_order.push_back(a.index);
    }
    // An op's time on its stream: from its issue row, or for one the previous step issued, from its carried wait.
    const bool own = (a.kind == Action::Kind::issue && !r.next_step) || (a.kind == Action::Kind::wait && a.carried);
    if (own && r.rec.exec_timed && r.rec.exec_end_s >= r.rec.exec_start_s) {
      timed[i] = true;
      carried[i] = a.carried;
      exec_start[i] = r.rec.exec_start_s;
      exec_end[i] = r.rec.exec_end_s;
    }
  }
  for (const CommOp& op : s.ops)
    if (op.after >= static_cast<int>(s.ops.size()))
      return make_error("the action log names op " + std::to_string(op.after) + " that it never issues");
  // A wait's own host time: one that found its op done took (end - start); one that blocked resumed some time after
  // the op ended (a thread woken on shared cores), which the timeline adds when the replay blocks there too.
  std::vector<double> wake(log.rows.size(), 0.0);
  for (std::size_t pos = 0; pos < log.rows.size(); ++pos) {
    const auto& r = log.rows[pos];
    if (r.rec.action.kind != Action::Kind::wait) continue;
    const auto i = static_cast<std::size_t>(r.rec.action.index);
    if (!timed[i]) continue;  // its op is priced 0; the wait's time is that op's, unknown
    if (exec_end[i] > r.rec.start_s)
      wake[pos] = std::max(0.0, r.rec.end_s - exec_end[i]);
    else
      after[pos] = r.rec.end_s - r.rec.start_s;
  }
  // An op's cost on its stream is its measured run plus its dispatch delay: how long after the moment the timeline
  // says it can start (its issue, the end of the op before it on the stream, the end of the op it runs after, all as
  // measured) its stream started it; on shared cores, mostly a progress thread waiting for a core. The delay is taken
  // as measured and reported (its sum and largest), not hidden: rules too strict show as a replay that ends late (an
  // op held longer than it was), rules too lax as dispatch delay the run would not have had (an op that waited for a
  // dependency the timeline does not know looks dispatched late), so a large delay beside a small error is the sign
  // to read the log with --detail.
  std::vector<double> last_end(s.streams.size(), std::numeric_limits<double>::lowest());
  for (std::size_t i = 0; i < s.ops.size(); ++i)
    if (timed[i] && carried[i])
      last_end[static_cast<std::size_t>(s.ops[i].stream)] =
          std::max(last_end[static_cast<std::size_t>(s.ops[i].stream)], exec_end[i]);
  for (int idx : issue_order) {
    const auto i = static_cast<std::size_t>(idx);
    if (!timed[i]) continue;
    const auto st = static_cast<std::size_t>(s.ops[i].stream);
    double ready_at = std::max(last_end[st], issued_at[i]);
    if (s.ops[i].after >= 0 && timed[static_cast<std::size_t>(s.ops[i].after)])
      ready_at = std::max(ready_at, exec_end[static_cast<std::size_t>(s.ops[i].after)]);
    const double delay = std::max(0.0, exec_start[i] - ready_at);
    out.dispatch_delay_s += delay;
    out.largest_dispatch_delay_s = std::max(out.largest_dispatch_delay_s, delay);
    op_s[i] = (exec_end[i] - exec_start[i]) + delay;
    last_end[st] = exec_end[i];
  }
  for (std::size_t i = 0; i < s.ops.size(); ++i)
    if (timed[i] && carried[i]) op_s[i] = exec_end[i] - exec_start[i];
  // Ops the run did not time on their streams (the NCCL backend times on the device only) are priced 0.
  for (std::size_t i = 0; i < s.ops.size(); ++i) {
    if (s.ops[i].stream < 0) continue;  // not in this log
    ++out.ops;
    if (op_s[i] < 0) ++out.untimed_ops, op_s[i] = 0.0;
  }
  TimelineCosts costs;
  costs.compute_s = [&](int t) { return task_s[static_cast<std::size_t>(t)]; };
  costs.op_s = [&](int i) { return op_s[static_cast<std::size_t>(i)]; };
  costs.host_s = [&](int pos) { return host[static_cast<std::size_t>(pos)]; };
  costs.after_s = [&](int pos) { return after[static_cast<std::size_t>(pos)]; };
  costs.wake_s = [&](int pos) { return wake[static_cast<std::size_t>(pos)]; };
  costs.carried_issue_s = [&](int i) {
    return timed[static_cast<std::size_t>(i)] ? exec_start[static_cast<std::size_t>(i)] : 0.0;
  };
  const TimelineResult r = run_timeline(s, program, costs);
  out.measured_s = log.rows.back().rec.end_s;
  out.replayed_s = r.step_s;
  out.compute_s = r.compute_s;
  out.host_s = r.host_s;
  out.waited_s = r.waited_s;
  out.replayed_end_s = r.action_end_s;
  return out;
}

}  // namespace lins
