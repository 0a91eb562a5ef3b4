// The step as one sequence of actions (compute a task, issue an op, wait for an op), made from the Schedule's points
// by step_program and read the same way by everyone who needs the step's timing:
//   - the executor performs the actions in this order (src/train/executor.cpp);
//   - the simulator times them with the cost model and FLOPs (core/simulator.h);
//   - the trace replay times them with the durations a measured run recorded (core/replay.h).
// At each point: first the waits for ops issued at earlier points (the previous step's first), then the issues, then
// the waits for ops issued at this very point; a point just before a compute task is followed by that task.
// run_timeline gives every op a start on its stream (after the op before it on that stream, after `after`, and not
// before it is issued) and an end, and advances the compute cursor through the waits. It is a progress-rate model:
// every compute task and every op advances at a rate recomputed whenever one starts or ends (TimelineCosts::rates:
// what runs beside a task or an op slows it, core/cost/contention.h); with no rates given, or every rate 1, each
// lasts exactly its priced duration and the model is the plain event model.
#pragma once

#include <functional>
#include <vector>

#include "core/schedule/schedule.h"

namespace lins {

struct Action {
  enum class Kind { compute, issue, wait };
  Kind kind = Kind::compute;
  int index = 0;         // compute: the task (StepShape); issue, wait: the op
  bool carried = false;  // a wait for an op the previous step issued (its next-step wait)
  bool operator==(const Action&) const = default;
};
inline constexpr NameTable<Action::Kind, 3> kActionKindNames{
    "action",
    {{
        {Action::Kind::compute, "compute", "", "a compute task of the step"},
        {Action::Kind::issue, "issue", "", "a collective issued"},
        {Action::Kind::wait, "wait", "", "compute waits for a collective"},
    }}};
static_assert(kActionKindNames.complete(Action::Kind::wait));
const char* action_kind_name(Action::Kind k);

// The actions of one step of an expanded schedule, in the order they happen.
std::vector<Action> step_program(const Schedule& s);

// One action of the step's program as the executor performed it: host seconds from the step's start. For an issue,
// exec_* is when the op ran on its stream (its first piece of work to the end of its last), where the backend times
// that on the host (the MPI backend; exec_timed); for a wait of the previous step's op, when that op ran (it may have
// started before this step: a negative start). The trace replay (core/replay.h) reads these.
struct ActionRecord {
  int step = 0;
  int position = 0;  // in the program
  Action action;
  double start_s = 0, end_s = 0;
  bool exec_timed = false;
  double exec_start_s = 0, exec_end_s = 0;
};

// How fast work advances beside other work (a fraction of its rate alone, in (0, 1]). Both may be empty (rate 1).
struct TimelineRates {
  // A compute task's rate with `active[f]` ops running on fabric f (0 inside a node, 1 across nodes).
  std::function<double(int task, const int active[2])> compute;
  // An op's bandwidth term's rate with `sharing` ops on its fabric (itself included) and a compute task running.
  std::function<double(int op, int sharing, bool compute_running)> transfer;
  // The part of op_s that advances at rate 1 whatever runs beside it (its latency terms); may be empty (none).
  std::function<double(int op)> latency_s;
};

struct TimelineCosts {
  std::function<double(int task)> compute_s;  // duration of a compute task
  std::function<double(int op)> op_s;         // duration of an op on its stream, once it starts
  // Host time spent on the action at `position` of the program besides what the functions above price (the replay's
  // measured issue costs and host work between actions); may be empty.
  std::function<double(int position)> host_s;
  // Host time spent after the action at `position` (the replay: issuing an op costs the host time after the op is on
  // its stream); may be empty.
  std::function<double(int position)> after_s;
  // Host time to resume after the wait at `position` when it blocks (the replay: a thread woken once its op ended, as
  // measured); may be empty.
  std::function<double(int position)> wake_s;
  // When an op the previous step issued (a next-step wait) was issued, from this step's start (default 0, as the
  // previous step ended; the replay gives the measured time, which may be earlier); may be empty.
  std::function<double(int op)> carried_issue_s;

  // The host as a thread of its own (core/host_model.h), for a device that runs compute and collectives
  // asynchronously: the host cursor walks the program spending `host_ahead_s` before each action; a compute task
  // starts on the device no earlier than the host reached it, an op no earlier than the host issued it; the host
  // waits for the compute stream where `host_sync` says (a `.item()`), and for an op's end where its wait is a host
  // wait (CommOp::host_wait). The step ends when both host and device are done. May be empty (no host of its own:
  // the fields above, which add to the compute cursor, are all the host there is).
  std::function<double(int position)> host_ahead_s;
  std::function<bool(int position)> host_sync;
  // Before the action at `position` the host waits for this op of the step (issued earlier) to end; -1: none
  // (DeepSpeed's fetch waits for the event of the gather three parameters back). May be empty.
  std::function<int(int position)> host_wait_op;
  // Contention (core/cost/contention.h); empty: overlap is free.
  TimelineRates rates;
};

struct OpTiming {
  double issue_s = 0, start_s = 0, end_s = 0;
};

struct TimelineResult {
  double step_s = 0;                  // when the last action ends
  double compute_s = 0;               // sum of compute tasks (as they ran, contention included)
  double host_s = 0;                  // sum of host_s
  double waited_s = 0;                // time the compute cursor stood still in waits (the exposed communication)
  std::vector<OpTiming> ops;          // this step's ops; next-step waits' ops: the copy carried into this step
  std::vector<double> action_end_s;   // per program position
  std::vector<double> stream_busy_s;  // per stream: sum of op durations
  std::vector<double> task_s;         // per compute task: how long it ran (its priced time, stretched by contention)
  double compute_stretch_s = 0;       // sum over tasks of task_s minus the priced time: compute lost to contention
  // With a host of its own (TimelineCosts::host_ahead_s): its work, the time the device's compute stood idle for
  // it, and where the host cursor stood after each action (empty without one).
  double host_ahead_s = 0;
  double host_stall_s = 0;
  std::vector<double> host_end_s;
};

// Times one steady-state step: the ops this step carries from the previous one (next-step waits) start on their
// streams at time 0, everything else as the program says.
TimelineResult run_timeline(const Schedule& s, const std::vector<Action>& program, const TimelineCosts& costs);

}  // namespace lins
