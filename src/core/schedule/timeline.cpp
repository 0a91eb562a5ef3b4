// The step program and its timing; see timeline.h.
#include "core/schedule/timeline.h"

#include <algorithm>
#include <deque>
#include <limits>
#include <utility>

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

namespace {

// The progress-rate simulation behind run_timeline: the compute task of the cursor and the ops on their streams, each
// with the work it has left (in seconds at rate 1) and the rate it advances at. Rates are recomputed at every start and
// end; an item whose rate did not change keeps its projected end untouched, so that with every rate 1 each item ends
// at exactly its start plus its priced duration (the plain event model, to the bit).
// How long work priced at `priced_s` ran from `start` to `end`: the priced time itself when nothing stretched it (so
// that sums are the plain event model's to the bit), else end - start.
double ran_s(double start, double end, double priced_s) { return end == start + priced_s ? priced_s : end - start; }

class Progress {
 public:
  Progress(const Schedule& s, const TimelineCosts& costs, TimelineResult& r)
      : s_(s),
        costs_(costs),
        r_(r),
        state_(s.ops.size(), OpState::none),
        item_(s.ops.size()),
        queue_(r.stream_busy_s.size()) {}

  double now() const { return now_; }

  // Op `i` issued at `issue_s` (not before now) on its stream, to start once its stream is free and `after` ended.
  void issue(std::size_t i, double issue_s, bool respect_after) {
    state_[i] = OpState::pending;
    Item& it = item_[i];
    it.issue_s = issue_s;
    it.respect_after = respect_after;
    queue_[static_cast<std::size_t>(s_.ops[i].stream)].push_back(i);
    start_ready();
  }
  bool done(std::size_t i) const { return state_[i] == OpState::done || state_[i] == OpState::none; }

  // Advances to `until` with no compute task running (the cursor idles, waits or does host work).
  void idle_until(double until) { run(until, std::numeric_limits<std::size_t>::max(), false); }
  // Advances until op `i` has ended, with no compute task running; returns its end.
  double idle_until_done(std::size_t i) {
    if (!done(i)) run(std::numeric_limits<double>::infinity(), i, false);
    return r_.ops[i].end_s;
  }
  // Runs compute task `task` of `priced_s` seconds alone from `start_s` (not before now); returns its end.
  double compute(int task, double priced_s, double start_s) {
    idle_until(start_s);
    task_ = task;
    compute_ = Work{0, priced_s, 1.0, start_s, start_s + priced_s};
    computing_ = true;
    recompute_rates();
    run(std::numeric_limits<double>::infinity(), std::numeric_limits<std::size_t>::max(), true);
    return now_;
  }

 private:
  enum class OpState { none, pending, active, done };
  // Work left as of `since`: `latency_s` at rate 1 first, then `transfer_s` at `rate`; it ends at `end_s`.
  struct Work {
    double latency_s = 0, transfer_s = 0, rate = 1, since = 0, end_s = 0;
    void advance_to(double t) {
      double e = t - since;
      const double l = std::min(e, latency_s);
      latency_s -= l;
      e -= l;
      transfer_s = std::max(0.0, transfer_s - e * rate);
      since = t;
    }
    void set_rate(double t, double new_rate) {
      if (new_rate == rate) return;  // the projected end stands (exactly start + priced time while nothing changes)
      advance_to(t);
      rate = new_rate;
      end_s = t + latency_s + transfer_s / rate;
    }
  };
  struct Item {
    double issue_s = 0;
    double priced_s = 0;
    bool respect_after = true;
    Work work;
  };

  int fabric(std::size_t i) const { return int(s_.ops[i].axis()); }

  // Starts every op at the head of its stream's queue that may start now.
  void start_ready() {
    for (auto& q : queue_) {
      while (!q.empty()) {
        const std::size_t i = q.front();
        if (stream_active(i)) break;
        const Item& it = item_[i];
        const int after = s_.ops[i].after;
        if (it.issue_s > now_) break;
        if (it.respect_after && after >= 0 && !done(static_cast<std::size_t>(after))) break;
        q.pop_front();
        start(i, std::max({it.issue_s, stream_free_of(i), after_end(i)}));
      }
    }
  }
  bool stream_active(std::size_t i) const { return active_on_stream_[static_cast<std::size_t>(s_.ops[i].stream)]; }
  double stream_free_of(std::size_t i) const { return stream_free_[static_cast<std::size_t>(s_.ops[i].stream)]; }
  double after_end(std::size_t i) const {
    const int after = s_.ops[i].after;
    if (!item_[i].respect_after || after < 0 || state_[static_cast<std::size_t>(after)] == OpState::none)
      return std::numeric_limits<double>::lowest();
    return r_.ops[static_cast<std::size_t>(after)].end_s;
  }

  void start(std::size_t i, double start_s) {
    const double d = costs_.op_s(static_cast<int>(i));
    const double lat = costs_.rates.latency_s ? std::clamp(costs_.rates.latency_s(static_cast<int>(i)), 0.0, d) : 0.0;
    item_[i].work = Work{lat, d - lat, 1.0, start_s, start_s + d};
    item_[i].priced_s = d;
    state_[i] = OpState::active;
    active_.push_back(i);
    ++active_per_fabric_[fabric(i)];
    active_on_stream_[static_cast<std::size_t>(s_.ops[i].stream)] = true;
    r_.ops[i].issue_s = item_[i].issue_s;
    r_.ops[i].start_s = start_s;
    recompute_rates();
  }

  void finish(std::size_t i) {
    const double end = item_[i].work.end_s;
    state_[i] = OpState::done;
    active_.erase(std::find(active_.begin(), active_.end(), i));
    --active_per_fabric_[fabric(i)];
    const auto st = static_cast<std::size_t>(s_.ops[i].stream);
    active_on_stream_[st] = false;
    stream_free_[st] = end;
    r_.ops[i].end_s = end;
    r_.stream_busy_s[st] += ran_s(r_.ops[i].start_s, end, item_[i].priced_s);
  }

  void recompute_rates() {
    const TimelineRates& rates = costs_.rates;
    if (computing_ && rates.compute) compute_.set_rate(now_, rates.compute(task_, active_per_fabric_));
    if (rates.transfer)
      for (const std::size_t i : active_)
        item_[i].work.set_rate(now_, rates.transfer(static_cast<int>(i), active_per_fabric_[fabric(i)], computing_));
  }

  // Runs events in time order until `until`, or until op `target` has ended, or (with `computing`) until the compute
  // task has ended, whichever comes first.
  void run(double until, std::size_t target, bool computing) {
    computing_ = computing;
    recompute_rates();
    while (true) {
      // The next event: an op's end, a queued op's issue time, the compute task's end.
      double next = until;
      std::size_t ending = std::numeric_limits<std::size_t>::max();
      for (const std::size_t i : active_)
        if (item_[i].work.end_s < next || (item_[i].work.end_s == next && ending > i))
          next = item_[i].work.end_s, ending = i;
      double issue_next = std::numeric_limits<double>::infinity();
      for (const auto& q : queue_)
        if (!q.empty() && !stream_active(q.front()) && item_[q.front()].issue_s > now_)
          issue_next = std::min(issue_next, item_[q.front()].issue_s);
      const bool compute_first = computing_ && compute_.end_s <= next && compute_.end_s <= issue_next;
      if (compute_first) {
        now_ = compute_.end_s;
        computing_ = false;
        task_ = -1;
        recompute_rates();
        start_ready();
        return;
      }
      if (issue_next < next) {
        now_ = issue_next;
        start_ready();
        continue;
      }
      if (ending == std::numeric_limits<std::size_t>::max()) {
        if (until != std::numeric_limits<double>::infinity()) now_ = std::max(now_, until);
        return;
      }
      now_ = std::max(now_, next);
      finish(ending);
      start_ready();
      recompute_rates();
      if (ending == target) return;
    }
  }

  const Schedule& s_;
  const TimelineCosts& costs_;
  TimelineResult& r_;
  std::vector<OpState> state_;
  std::vector<Item> item_;
  std::vector<std::deque<std::size_t>> queue_;  // per stream: issued ops not yet started, in issue order
  std::vector<std::size_t> active_;             // ops running (at most one per stream)
  std::vector<double> stream_free_ =
      std::vector<double>(r_.stream_busy_s.size(), std::numeric_limits<double>::lowest());
  std::vector<bool> active_on_stream_ = std::vector<bool>(r_.stream_busy_s.size(), false);
  int active_per_fabric_[2] = {0, 0};
  double now_ = std::numeric_limits<double>::lowest();
  bool computing_ = false;
  int task_ = -1;
  Work compute_;
};

}  // namespace

TimelineResult run_timeline(const Schedule& s, const std::vector<Action>& program, const TimelineCosts& costs) {
  TimelineResult r;
  r.ops.assign(s.ops.size(), OpTiming{});
  r.stream_busy_s.assign(std::max<std::size_t>(1, s.streams.size()), 0.0);
  r.task_s.assign(static_cast<std::size_t>(s.shape.task_count()), 0.0);
  Progress p(s, costs, r);
  // The previous step's last ops (its broadcasts) were issued as it ended: at time 0 of this step, unless told. They
  // may have started before this step did; their `after` counts only when it is carried too.
  std::vector<std::pair<double, std::size_t>> carried;
  for (std::size_t i = 0; i < s.ops.size(); ++i)
    if (s.ops[i].wait.next_step)
      carried.emplace_back(costs.carried_issue_s ? costs.carried_issue_s(static_cast<int>(i)) : 0.0, i);
  double first = 0;
  for (const auto& c : carried) first = std::min(first, c.first);
  p.idle_until(first);
  for (const auto& [issue_s, i] : carried) {
    const int after = s.ops[i].after;
    p.issue(i, issue_s, after >= 0 && s.ops[static_cast<std::size_t>(after)].wait.next_step);
  }
  double t = 0;
  // The host cursor (TimelineCosts::host_ahead_s); without a host of its own it stays at 0, never ahead of t.
  const bool own_host = bool(costs.host_ahead_s) || bool(costs.host_sync) || bool(costs.host_wait_op);
  double host_t = 0;
  if (own_host) r.host_end_s.reserve(program.size());
  r.action_end_s.reserve(program.size());
  // Host time that holds the compute cursor: the device idles through it.
  auto hold = [&](double h) {
    t += h;
    r.host_s += h;
    p.idle_until(t);
  };
  for (std::size_t pos = 0; pos < program.size(); ++pos) {
    const Action& a = program[pos];
    if (own_host) {
      if (costs.host_sync && costs.host_sync(static_cast<int>(pos))) host_t = std::max(host_t, t);
      if (costs.host_wait_op)
        if (const int op = costs.host_wait_op(static_cast<int>(pos)); op >= 0)
          host_t = std::max(host_t, p.idle_until_done(static_cast<std::size_t>(op)));
      if (costs.host_ahead_s) {
        const double w = costs.host_ahead_s(static_cast<int>(pos));
        host_t += w;
        r.host_ahead_s += w;
      }
    }
    if (costs.host_s) hold(costs.host_s(static_cast<int>(pos)));
    switch (a.kind) {
      case Action::Kind::compute: {
        const double d = costs.compute_s(a.index);
        if (host_t > t) {  // the device waits for the host to launch the task
          r.host_stall_s += host_t - t;
          t = host_t;
        }
        const double end = p.compute(a.index, d, t);
        const double ran = ran_s(t, end, d);
        t = end;
        // Sized by the program, not the shape: the replay's schedule carries ops only.
        if (static_cast<std::size_t>(a.index) >= r.task_s.size())
          r.task_s.resize(static_cast<std::size_t>(a.index) + 1);
        r.task_s[static_cast<std::size_t>(a.index)] = ran;
        r.compute_s += ran;
        r.compute_stretch_s += ran - d;
        break;
      }
      case Action::Kind::issue: {
        const auto i = static_cast<std::size_t>(a.index);
        if (s.ops[i].wait.next_step) break;  // timed as the next step's carried copy
        p.issue(i, std::max(t, host_t), true);
        break;
      }
      case Action::Kind::wait: {
        const auto i = static_cast<std::size_t>(a.index);
        const double done = p.idle_until_done(i);
        if (s.ops[i].host_wait && own_host) host_t = std::max(host_t, done);
        if (done > t) {
          r.waited_s += done - t;
          t = done;
          if (costs.wake_s) hold(costs.wake_s(static_cast<int>(pos)));
        }
        break;
      }
    }
    if (costs.after_s) hold(costs.after_s(static_cast<int>(pos)));
    r.action_end_s.push_back(t);
    if (own_host) r.host_end_s.push_back(host_t);
  }
  r.step_s = std::max(t, host_t);
  return r;
}

}  // namespace lins
