// The step timeline as the plain event model computed it before contention (every op and task lasting exactly its
// priced time, ops started at max(issue, stream free, `after` ended)), kept verbatim as the oracle that the
// progress-rate timeline must reproduce to the bit when nothing contends (engine_test.cpp).
#pragma once

#include <algorithm>
#include <limits>

#include "core/schedule/timeline.h"

namespace lins::reference {

inline
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

}  // namespace lins::reference
