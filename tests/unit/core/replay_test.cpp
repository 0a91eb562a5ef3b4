// The trace replay: a run whose durations follow the timeline's rules replays to its own step time exactly; a replay
// whose rules are too strict (all streams made one) misses the step, and one whose rules are too lax (`after` dropped)
// shows the wait it no longer knows as dispatch delay.
#include "core/projection/replay.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "core/projection/simulator.h"
#include "core/util/csv.h"

namespace lins {
namespace {

struct TimedRun {
  Schedule schedule;
  ModelSpec model = make_model_preset("small").value();
  TimelineResult timed;
  std::string csv;
};

// A "measured" run made by the timeline itself, written as `lins step --trace` writes its action log.
// Optionally each op starts on its stream `dispatch_s` after the timeline lets it, and the host resumes `wake_s` after
// an op it blocked on ended.
TimedRun synthesize(const std::string& plan_text, double dispatch_s = 0, double wake_s = 0) {
  TimedRun run;
  const Topology t{2, 2};
  ScheduleOptions o;
  o.micro_batches = 2;
  o.bucket_bytes = 64 << 10;
  o.expand_micro_batches = true;
  run.schedule = build_schedule(run.model, parse_plan(plan_text, t).value(), t, o).value();
  const Schedule& s = run.schedule;
  const auto program = step_program(s);
  std::vector<double> task_s(static_cast<std::size_t>(s.shape.task_count()));
  for (std::size_t k = 0; k < task_s.size(); ++k) task_s[k] = 1e-4 * double(1 + k % 7);
  TimelineCosts costs;
  costs.compute_s = [&](int k) { return task_s[static_cast<std::size_t>(k)]; };
  costs.op_s = [&](int i) { return dispatch_s + 2e-4 + 1e-9 * double(s.ops[static_cast<std::size_t>(i)].bytes()); };
  costs.wake_s = [&](int) { return wake_s; };
  run.timed = run_timeline(s, program, costs);
  std::vector<ActionRecord> records;
  double before = 0;
  for (std::size_t pos = 0; pos < program.size(); ++pos) {
    ActionRecord rec;
    rec.step = 1;
    rec.position = static_cast<int>(pos);
    rec.action = program[pos];
    rec.end_s = run.timed.action_end_s[pos];
    rec.start_s = program[pos].kind == Action::Kind::compute
                      ? rec.end_s - task_s[static_cast<std::size_t>(program[pos].index)]
                      : before;
    const auto i = static_cast<std::size_t>(program[pos].index);
    const bool own = (program[pos].kind == Action::Kind::issue && !s.ops[i].wait.next_step) ||
                     (program[pos].kind == Action::Kind::wait && program[pos].carried);
    if (own)
      rec.exec_timed = true, rec.exec_start_s = run.timed.ops[i].start_s + dispatch_s,
      rec.exec_end_s = run.timed.ops[i].end_s;
    before = rec.end_s;
    records.push_back(rec);
  }
  run.csv = action_log_csv(s, run.model, records);
  return run;
}

// The log with one column rewritten on every op row.
std::string rewrite(const std::string& csv, const std::string& column, const std::string& value) {
  auto rows = parse_csv(csv, "log").value();
  const auto& head = rows.front().fields;
  const auto col = static_cast<std::size_t>(std::find(head.begin(), head.end(), column) - head.begin());
  std::string out = csv_join(head) + "\n";
  for (std::size_t r = 1; r < rows.size(); ++r) {
    auto f = rows[r].fields;
    if (!f[col].empty()) f[col] = value;
    out += csv_join(f) + "\n";
  }
  return out;
}

TEST(Replay, ATimelineRunReplaysExactly) {
  for (const char* plan : {"p=2x1,g=2x2,os=2x2", "zero3", "mics", "hsdp", "p=1x1,g=1x1,os=2x2", "zero2"}) {
    const TimedRun run = synthesize(plan);
    auto log = parse_action_log(run.csv, plan);
    ASSERT_TRUE(log) << log.error();
    auto r = replay(*log);
    ASSERT_TRUE(r) << r.error();
    EXPECT_NEAR(r->measured_s, run.timed.step_s, 1e-9) << plan;
    EXPECT_NEAR(r->replayed_s, r->measured_s, 1e-9) << plan;
    EXPECT_EQ(r->untimed_ops, 0) << plan;
  }
}

TEST(Replay, BreakingATimelineRuleMissesTheStep) {
  // The Lins engine with P sharded runs gathers and reduce-scatters on one stream and all-reduces on another: made
  // one stream, the replay serialises what ran side by side.
  const TimedRun lins = synthesize("p=2x1,g=2x2,os=2x2");
  ASSERT_GT(lins.schedule.streams.size(), 1u);
  auto one_stream = replay(parse_action_log(rewrite(lins.csv, "stream", "0"), "log").value());
  ASSERT_TRUE(one_stream);
  EXPECT_GT(one_stream->error(), 0.01) << one_stream->replayed_s << " vs " << one_stream->measured_s;
  // The all-reduces of the same engine read the reduce-scatters before them. Without `after` an all-reduce looks
  // dispatched late, by the wait for its reduce-scatter the timeline no longer knows: dispatch delay a run that follows
  // the rules does not have.
  auto exact = replay(parse_action_log(lins.csv, "log").value());
  ASSERT_TRUE(exact);
  EXPECT_NEAR(exact->dispatch_delay_s, 0.0, 1e-9);
  auto no_after = replay(parse_action_log(rewrite(lins.csv, "after", "-1"), "log").value());
  ASSERT_TRUE(no_after);
  EXPECT_GT(no_after->dispatch_delay_s, 1e-4) << "the lax rule hid in the replay";
  EXPECT_GT(no_after->largest_dispatch_delay_s, 1e-4);
}

TEST(Replay, HostTimeIsKeptWhereTheRunSpentIt) {
  // A run whose streams start every op 50 us after they could and whose host resumes 30 us after each op it blocked
  // on ended: the replay carries both (as dispatch delay and as host time) and ends where the run ended.
  const TimedRun run = synthesize("zero3", 5e-5, 3e-5);
  auto r = replay(parse_action_log(run.csv, "late").value());
  ASSERT_TRUE(r) << r.error();
  EXPECT_NEAR(r->measured_s, run.timed.step_s, 1e-9);
  EXPECT_NEAR(r->replayed_s, r->measured_s, 1e-9);
  EXPECT_NEAR(r->largest_dispatch_delay_s, 5e-5, 1e-9);
  EXPECT_GT(r->dispatch_delay_s, 5e-5 * 10);
}

TEST(Replay, OpsNotTimedOnTheirStreamsArePricedZeroAndCounted) {
  // The GPU backend times its streams on the device only: its logs have no exec times.
  const TimedRun run = synthesize("p=2x1,g=2x2,os=2x2");
  auto untimed = parse_action_log(rewrite(rewrite(run.csv, "exec_start_s", ""), "exec_end_s", ""), "gpu.csv");
  ASSERT_TRUE(untimed) << untimed.error();
  auto r = replay(*untimed);
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(r->ops, static_cast<int>(run.schedule.ops.size()));
  EXPECT_EQ(r->untimed_ops, r->ops);
  EXPECT_LT(r->replayed_s, r->measured_s);  // communication priced 0: compute and host time only
  EXPECT_GE(r->replayed_s, r->compute_s);
}

TEST(Replay, BadLogsAreNamed) {
  EXPECT_FALSE(parse_action_log("", "empty.csv"));
  auto missing = parse_action_log("step,position\n1,0\n", "short.csv");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().find("no column"), std::string::npos) << missing.error();
  const TimedRun run = synthesize("zero3");
  auto bad = parse_action_log(rewrite(run.csv, "start_s", "soon"), "bad.csv");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("bad.csv:"), std::string::npos) << bad.error();
  // An op on no stream, or past any schedule's length, is refused before anything is sized by it.
  for (auto [column, value] : {std::pair<const char*, const char*>{"stream", "-1"},
                               {"stream", "1e9"},
                               {"index", "1e12"},
                               {"after", "4194304"}}) {
    auto out_of_range = parse_action_log(rewrite(run.csv, column, value), "range.csv");
    ASSERT_FALSE(out_of_range) << column << "=" << value;
    EXPECT_NE(out_of_range.error().find("range.csv:"), std::string::npos) << out_of_range.error();
  }
  // An op that runs after one the log never issues.
  auto orphan = replay(parse_action_log(rewrite(run.csv, "after", "4000000"), "orphan.csv").value());
  ASSERT_FALSE(orphan);
  EXPECT_NE(orphan.error().find("never issues"), std::string::npos) << orphan.error();
}

}  // namespace
}  // namespace lins
