// Trace replay: the step a `lins step --trace` run recorded (its action log, one CSV per rank and strategy) timed
// again through the simulator's timeline (timeline.h), with the durations the run measured instead of any model:
// every compute task and every collective's time on its stream as measured, the host's time between actions as
// measured, and the waits predicted by the timeline's rules (streams run their ops one at a time in issue order, an op
// starts after its issue and after the op it runs after). The replayed step time against the measured one checks the
// timeline itself, apart from any network or compute model.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/model/model_spec.h"
#include "core/schedule/schedule.h"
#include "core/schedule/timeline.h"
#include "core/util/result.h"

namespace lins {

// The action log of one step as CSV (what `lins step --trace` writes as timeline.<strategy>.rank<r>.csv): one row
// per action in program order with its op's stream, the op it runs after and whether the next step waits for it.
std::string action_log_csv(const Schedule& s, const ModelSpec& model, const std::vector<ActionRecord>& actions);

struct ActionLog {
  int step = 0;
  struct Row {
    ActionRecord rec;
    int stream = -1, after = -1;
    bool next_step = false;
    std::string label;
    std::string purpose;  // issue and wait rows: the op's purpose
  };
  std::vector<Row> rows;  // program order
};
Result<ActionLog> parse_action_log(std::string_view text, const std::string& where);

struct ReplayResult {
  double measured_s = 0;                           // the end of the step's last action
  double replayed_s = 0;                           // the timeline's step time with the measured durations
  double compute_s = 0, host_s = 0, waited_s = 0;  // the replay's parts
  int ops = 0, untimed_ops = 0;  // collectives, and those the run did not time on its stream (priced 0)
  // Dispatch delays taken in (replay.cpp): their sum over the step's ops, and the largest.
  double dispatch_delay_s = 0, largest_dispatch_delay_s = 0;
  std::vector<double> replayed_end_s;  // per action of the log: when the replay has it end
  double error() const { return measured_s > 0 ? (replayed_s - measured_s) / measured_s : 0.0; }
};
// What the replay takes as measured. By default everything; with issue_host_s (>= 0) every issue action's own host
// time is that instead (a host model of lins's executor: HostCosts::lins_issue_s, `lins replay --host-model lins`),
// the gaps between actions and everything else still as measured.
struct ReplayOptions {
  double issue_host_s = -1;
};
Result<ReplayResult> replay(const ActionLog& log, const ReplayOptions& options = {});

}  // namespace lins
