// The step program and its timing; see timeline.h.
#include "core/schedule/timeline.h"

#include <algorithm>
#include <limits>

namespace lins {

const char* action_kind_name(Action::Kind k) { return kActionKindNames.name(k); }

namespace {

// The ops of each slot in op order, as one array (a counting sort by slot): the ops of slot k are
// items[start[k] .. start[k + 1]). A step has a few ops per slot over many slots; one array per slot would cost an
// allocation each. `slot_of[i]` is op i's slot, or -1 for an op of no slot here.
struct OpsBySlot {
  std::vector<int> start, items;
  OpsBySlot(const std::vector<int>& slot_of, int slots) : start(static_cast<std::size_t>(slots) + 1, 0) {
    for (const int k : slot_of)
      if (k >= 0) ++start[static_cast<std::size_t>(k) + 1];
    for (std::size_t k = 1; k < start.size(); ++k) start[k] += start[k - 1];
    items.resize(static_cast<std::size_t>(start.back()));
    std::vector<int> next(start.begin(), start.end() - 1);
    for (std::size_t i = 0; i < slot_of.size(); ++i)
      if (const int k = slot_of[i]; k >= 0)
        items[static_cast<std::size_t>(next[static_cast<std::size_t>(k)]++)] = static_cast<int>(i);
  }
  const int* begin(int slot) const { return items.data() + start[static_cast<std::size_t>(slot)]; }
  const int* end(int slot) const { return items.data() + start[static_cast<std::size_t>(slot) + 1]; }
};

}  // namespace

std::vector<Action> step_program(const Schedule& s) {
  const int slots = 2 * s.shape.task_count() + 1;  // slot 2K is the end of the step
  // The ops' slots, read in one pass: an expanded step has 10^4-10^5 ops, too many to walk their records again.
  std::vector<int> issue_slot(s.ops.size()), wait_slot(s.ops.size(), -1), carried_slot(s.ops.size(), -1);
  for (std::size_t i = 0; i < s.ops.size(); ++i) {
    const CommOp& op = s.ops[i];
    issue_slot[i] = int(op.issue.slot);
    (op.wait.next_step ? carried_slot : wait_slot)[i] = int(op.wait.slot);
  }
  const OpsBySlot issues(issue_slot, slots), waits(wait_slot, slots), carried(carried_slot, slots);
  std::vector<Action> out;
  out.reserve(s.ops.size() * 2 + static_cast<std::size_t>(s.shape.task_count()));
  for (int slot = 1; slot < slots; ++slot) {
    for (const int* i = carried.begin(slot); i != carried.end(slot); ++i)
      out.push_back(Action{Action::Kind::wait, *i, true});
    for (const int* i = waits.begin(slot); i != waits.end(slot); ++i)
      if (issue_slot[static_cast<std::size_t>(*i)] < slot) out.push_back(Action{Action::Kind::wait, *i, false});
    for (const int* i = issues.begin(slot); i != issues.end(slot); ++i)
      out.push_back(Action{Action::Kind::issue, *i, false});
    for (const int* i = waits.begin(slot); i != waits.end(slot); ++i)
      if (issue_slot[static_cast<std::size_t>(*i)] == slot) out.push_back(Action{Action::Kind::wait, *i, false});
    if (slot % 2 == 1) out.push_back(Action{Action::Kind::compute, slot / 2, false});
  }
  return out;
}

TimelineResult run_timeline(const Schedule& s, const std::vector<Action>& program, const TimelineCosts& costs) {
  TimelineResult r;
  r.ops.assign(s.ops.size(), OpTiming{});
  r.stream_busy_s.assign(std::max<std::size_t>(1, s.streams.size()), 0.0);
  // Streams are free from the start of time: the previous step's ops may have started before this step did.
  std::vector<double> stream_free(r.stream_busy_s.size(), std::numeric_limits<double>::lowest());
  std::vector<double> carried_end(s.ops.size(), 0.0);
  auto start_op = [&](std::size_t i, double issue, double after_end) {
    const CommOp& op = s.ops[i];
    const auto st = static_cast<std::size_t>(op.stream);
    const double d = costs.op_s(static_cast<int>(i));
    const double start = std::max({issue, stream_free[st], after_end});
    stream_free[st] = start + d;
    r.stream_busy_s[st] += d;
    return OpTiming{issue, start, start + d};
  };
  // The previous step's last ops (its broadcasts) were issued as it ended: at time 0 of this step, unless told.
  for (std::size_t i = 0; i < s.ops.size(); ++i) {
    const CommOp& op = s.ops[i];
    if (!op.wait.next_step) continue;
    const double after_end = op.after >= 0 && s.ops[static_cast<std::size_t>(op.after)].wait.next_step
                                 ? carried_end[static_cast<std::size_t>(op.after)]
                                 : std::numeric_limits<double>::lowest();
    r.ops[i] = start_op(i, costs.carried_issue_s ? costs.carried_issue_s(static_cast<int>(i)) : 0.0, after_end);
    carried_end[i] = r.ops[i].end_s;
  }
  double t = 0;
  // The host cursor (TimelineCosts::host_ahead_s); without a host of its own it stays at 0, never ahead of t.
  const bool own_host = bool(costs.host_ahead_s) || bool(costs.host_sync) || bool(costs.host_wait_op);
  double host_t = 0;
  if (own_host) r.host_end_s.reserve(program.size());
  r.action_end_s.reserve(program.size());
  for (std::size_t pos = 0; pos < program.size(); ++pos) {
    const Action& a = program[pos];
    if (own_host) {
      if (costs.host_sync && costs.host_sync(static_cast<int>(pos))) host_t = std::max(host_t, t);
      if (costs.host_wait_op)
        if (const int op = costs.host_wait_op(static_cast<int>(pos)); op >= 0)
          host_t = std::max(host_t, r.ops[static_cast<std::size_t>(op)].end_s);
      if (costs.host_ahead_s) {
        const double w = costs.host_ahead_s(static_cast<int>(pos));
        host_t += w;
        r.host_ahead_s += w;
      }
    }
    if (costs.host_s) {
      const double h = costs.host_s(static_cast<int>(pos));
      t += h;
      r.host_s += h;
    }
    switch (a.kind) {
      case Action::Kind::compute: {
        const double d = costs.compute_s(a.index);
        if (host_t > t) {  // the device waits for the host to launch the task
          r.host_stall_s += host_t - t;
          t = host_t;
        }
        t += d;
        r.compute_s += d;
        break;
      }
      case Action::Kind::issue: {
        const auto i = static_cast<std::size_t>(a.index);
        const CommOp& op = s.ops[i];
        if (op.wait.next_step) break;  // timed as the next step's carried copy
        const double after_end = op.after >= 0 ? r.ops[static_cast<std::size_t>(op.after)].end_s : 0.0;
        r.ops[i] = start_op(i, std::max(t, host_t), after_end);
        break;
      }
      case Action::Kind::wait: {
        const double done =
            a.carried ? carried_end[static_cast<std::size_t>(a.index)] : r.ops[static_cast<std::size_t>(a.index)].end_s;
        if (s.ops[static_cast<std::size_t>(a.index)].host_wait && own_host) host_t = std::max(host_t, done);
        if (done > t) {
          r.waited_s += done - t;
          t = done;
          if (costs.wake_s) {
            const double h = costs.wake_s(static_cast<int>(pos));
            t += h;
            r.host_s += h;
          }
        }
        break;
      }
    }
    if (costs.after_s) {
      const double h = costs.after_s(static_cast<int>(pos));
      t += h;
      r.host_s += h;
    }
    r.action_end_s.push_back(t);
    if (own_host) r.host_end_s.push_back(host_t);
  }
  r.step_s = std::max(t, host_t);
  return r;
}

}  // namespace lins
