// `lins replay`: re-times the steps `lins step --trace` recorded (the action logs timeline.<strategy>.rank<r>.csv)
// through the simulator's timeline with the durations the run measured, and reports, per strategy, the replayed step
// time against the measured one (core/replay.h). Writes the table as CSV with --csv.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "apps/commands.h"
#include "core/cost/host_model.h"
#include "core/projection/replay.h"
#include "core/util/cli.h"
#include "core/util/csv.h"
#include "core/util/json.h"
#include "core/util/text.h"

namespace lins {
namespace {

CommandSpec replay_spec() {
  return CommandSpec{
      "replay",
      "Re-time the steps `lins step --trace` recorded through the simulator's timeline, with the measured durations.",
      "lins replay [options] DIR|FILE...",
      {
          {"csv", 0, "FILE", "",
           "also write the table as CSV (strategy, rank, measured_s, replayed_s, error, dispatch delays)"},
          {"detail", 0, "", "", "print every action of each log: measured end, replayed end and their difference"},
          {"max-error", 0, "FRACTION", "",
           "exit 1 when a strategy's replayed step time is further than this from the measured one (e.g. 0.05)"},
          {"host-model", 0, "off|lins", "off",
           "off: every host time as measured; lins: each issue's host time from the host model of lins's executor "
           "(the lins_issue cost, docs/engines.md), the rest as measured"},
          {"host-costs", 0, "FILE", "",
           "with --host-model lins: host costs measured by python -m lins_peers.host_costs instead of the built-in"},
      },
      "DIR: a `lins step --out` folder (its timeline.*.rank*.csv files); FILE: one action log.\n"
      "A strategy's step time is its slowest rank's, measured and replayed alike.\n"
      "example:\n"
      "  mpirun -np 4 lins step --gpus-per-node 2 --trace --out results/step && lins replay results/step"};
}

int fail(const std::string& message) {
  std::fprintf(stderr, "lins replay: %s\n", message.c_str());
  return 2;
}

// "timeline.zero3.rank2.csv" -> ("zero3", 2); false for other names.
bool parse_name(const std::string& file, std::string* strategy, int* rank) {
  const std::string prefix = "timeline.", suffix = ".csv";
  if (file.rfind(prefix, 0) != 0 || file.size() <= prefix.size() + suffix.size() ||
      file.compare(file.size() - suffix.size(), suffix.size(), suffix) != 0)
    return false;
  const std::string mid = file.substr(prefix.size(), file.size() - prefix.size() - suffix.size());
  const auto dot = mid.rfind(".rank");
  if (dot == std::string::npos) return false;
  *strategy = mid.substr(0, dot);
  const auto r = parse_whole(mid.substr(dot + 5));
  if (!r || *r > 1u << 30) return false;
  *rank = static_cast<int>(*r);
  return true;
}

// One action log found on the command line: whose strategy and rank it is, and where.
struct Entry {
  std::string strategy, path;
  int rank = 0;
};

// The action logs named by the arguments (folders: their timeline.*.rank*.csv files), by strategy then rank.
Result<std::vector<Entry>> find_logs(const std::vector<std::string>& paths) {
  std::vector<Entry> files;
  for (const auto& p : paths) {
    std::error_code ec;
    if (std::filesystem::is_directory(p, ec)) {
      for (const auto& de : std::filesystem::directory_iterator(p, ec)) {
        Entry e;
        if (parse_name(de.path().filename().string(), &e.strategy, &e.rank))
          e.path = de.path().string(), files.push_back(e);
      }
      if (ec) return make_error("cannot read the folder " + p + ": " + ec.message());
    } else if (std::filesystem::is_regular_file(p, ec)) {
      Entry e;
      if (!parse_name(std::filesystem::path(p).filename().string(), &e.strategy, &e.rank)) e.strategy = p, e.rank = 0;
      e.path = p;
      files.push_back(e);
    } else {
      return make_error("'" + p + "' is neither a folder nor a file");
    }
  }
  if (files.empty())
    return make_error("no action logs (timeline.<strategy>.rank<r>.csv) found; run `lins step --trace` to write them");
  std::sort(files.begin(), files.end(), [](const Entry& a, const Entry& b) {
    return a.strategy != b.strategy ? a.strategy < b.strategy : a.rank < b.rank;
  });
  return files;
}

// --detail: every action of one log, measured against replayed.
void print_detail(const Entry& f, const ActionLog& log, const ReplayResult& r) {
  std::printf("%s:\n%8s %-8s %-40s %12s %12s %12s\n", f.path.c_str(), "position", "action", "label", "measured",
              "replayed", "difference");
  for (std::size_t pos = 0; pos < log.rows.size(); ++pos) {
    const auto& row = log.rows[pos];
    std::printf("%8zu %-8s %-40s %12.6f %12.6f %+12.6f\n", pos, action_kind_name(row.rec.action.kind),
                row.label.substr(0, 40).c_str(), row.rec.end_s, r.replayed_end_s[pos],
                r.replayed_end_s[pos] - row.rec.end_s);
  }
}

// The table: a row per log, then a row per strategy (its slowest rank, measured and replayed alike).
struct ReplayTable {
  struct Worst {
    double measured = 0, replayed = 0, dispatch = 0, largest_dispatch = 0;
  };
  std::vector<std::vector<std::string>> rows;  // the CSV's rows
  std::map<std::string, Worst> per_strategy;
  std::vector<std::string> order;  // strategies in the order first seen
  // Measured waits by op purpose, per strategy: the slowest rank's seconds for each purpose.
  std::map<std::string, std::map<std::string, double>> exposed;
  std::vector<std::string> purposes;  // in the order first seen
};

// Replays every log, printing a line for each (and its actions with --detail).
Result<ReplayTable> replay_logs(const std::vector<Entry>& files, bool detail, const ReplayOptions& options) {
  ReplayTable t;
  std::printf(
      "lins replay: each log re-timed with its own measured durations under the timeline's rules; the error says "
      "whether the run kept those rules (near 0 when it did), not whether a projection is right (for that, lins "
      "simulate against measured rows: scripts/validate-projection.sh)\n");
  std::printf("%-22s %5s %12s %12s %8s %10s %10s %10s %11s\n", "strategy", "rank", "measured_s", "replayed_s", "error",
              "compute_s", "host_s", "waited_s", "dispatch_s");
  for (const auto& f : files) {
    LINS_ASSIGN_OR_RETURN(auto text, read_text_file(f.path));
    LINS_ASSIGN_OR_RETURN(auto log, parse_action_log(text, f.path));
    auto r = replay(log, options);
    if (!r) return make_error(f.path + ": " + r.error());
    if (detail) print_detail(f, log, *r);
    std::printf("%-22s %5d %12.6f %12.6f %+7.2f%% %10.6f %10.6f %10.6f %11.6f%s\n", f.strategy.substr(0, 22).c_str(),
                f.rank, r->measured_s, r->replayed_s, 100 * r->error(), r->compute_s, r->host_s, r->waited_s,
                r->dispatch_delay_s, r->untimed_ops ? "  (ops not timed on their streams priced 0)" : "");
    if (!t.per_strategy.count(f.strategy)) t.order.push_back(f.strategy);
    ReplayTable::Worst& w = t.per_strategy[f.strategy];
    w.measured = std::max(w.measured, r->measured_s);
    w.replayed = std::max(w.replayed, r->replayed_s);
    w.dispatch = std::max(w.dispatch, r->dispatch_delay_s);
    w.largest_dispatch = std::max(w.largest_dispatch, r->largest_dispatch_delay_s);
    std::map<std::string, double> waited;
    for (const auto& row : log.rows)
      if (row.rec.action.kind == Action::Kind::wait) waited[row.purpose] += row.rec.end_s - row.rec.start_s;
    for (const auto& [purpose, s] : waited) {
      if (std::find(t.purposes.begin(), t.purposes.end(), purpose) == t.purposes.end()) t.purposes.push_back(purpose);
      double& worst = t.exposed[f.strategy][purpose];
      worst = std::max(worst, s);
    }
    t.rows.push_back({f.strategy, std::to_string(f.rank), std::to_string(r->measured_s), std::to_string(r->replayed_s),
                      std::to_string(r->error()), std::to_string(r->dispatch_delay_s),
                      std::to_string(r->largest_dispatch_delay_s)});
  }
  return t;
}

// The per-strategy lines; true when a strategy's error is beyond max_error (when positive).
bool print_per_strategy(ReplayTable& t, double max_error) {
  std::printf(
      "\nper strategy (slowest rank; dispatch: the most any rank's ops were dispatched late, summed, and the largest "
      "one delay):\n%-22s %12s %12s %8s %11s %12s\n",
      "strategy", "measured_s", "replayed_s", "error", "dispatch_s", "largest_s");
  bool over = false;
  for (const auto& s : t.order) {
    const ReplayTable::Worst& w = t.per_strategy[s];
    const double err = w.measured > 0 ? (w.replayed - w.measured) / w.measured : 0;
    over = over || (max_error > 0 && std::abs(err) > max_error);
    std::printf("%-22s %12.6f %12.6f %+7.2f%% %11.6f %12.6f\n", s.substr(0, 22).c_str(), w.measured, w.replayed,
                100 * err, w.dispatch, w.largest_dispatch);
    t.rows.push_back({s, "slowest", std::to_string(w.measured), std::to_string(w.replayed), std::to_string(err),
                      std::to_string(w.dispatch), std::to_string(w.largest_dispatch)});
  }
  // Which collectives each strategy's compute waited for, as measured.
  std::printf("\nmeasured waits by what the collective is for (ms per step, slowest rank):\n%-22s", "strategy");
  for (const auto& p : t.purposes) std::printf(" %*s", static_cast<int>(std::max<std::size_t>(8, p.size())), p.c_str());
  std::printf("\n");
  for (const auto& s : t.order) {
    std::printf("%-22s", s.substr(0, 22).c_str());
    for (const auto& p : t.purposes) {
      const auto it = t.exposed[s].find(p);
      std::printf(" %*.1f", static_cast<int>(std::max<std::size_t>(8, p.size())),
                  it == t.exposed[s].end() ? 0.0 : 1e3 * it->second);
    }
    std::printf("\n");
  }
  return over;
}

}  // namespace

int run_replay(const Args& argv) {
  const CommandSpec spec = replay_spec();
  auto args = parse_args(spec, argv);
  if (!args) return fail(args.error());
  if (args->flag("help")) {
    std::fputs(help_text(spec).c_str(), stdout);
    return 0;
  }
  double max_error = -1;
  if (args->has("max-error")) {
    auto v = args->get_double("max-error");
    if (!v || *v <= 0) return fail(v ? "--max-error must be positive (a fraction such as 0.05)" : v.error());
    max_error = *v;
  }
  if (args->positional().empty()) return fail("give a `lins step --out` folder or action log files (see --help)");
  const std::string csv_path = args->get("csv");
  if (!csv_path.empty())
    if (auto s = check_output_file("--csv", csv_path); !s) return fail(s.error());

  ReplayOptions options;
  const std::string host_model = args->get("host-model"), host_costs = args->get("host-costs");
  if (host_model != "off" && host_model != "lins")
    return fail("--host-model " + host_model + ": valid values are off (every host time as measured) and lins");
  if (host_model == "off" && !host_costs.empty()) return fail("--host-costs needs --host-model lins");
  if (host_model == "lins") {
    HostCosts costs = default_host_costs();
    if (!host_costs.empty()) {
      auto c = read_host_costs(host_costs);
      if (!c) return fail("--host-costs: " + c.error());
      costs = *c;
    }
    options.issue_host_s = costs.lins_issue_s;
  }

  auto files = find_logs(args->positional());
  if (!files) return fail(files.error());
  auto table = replay_logs(*files, args->flag("detail"), options);
  if (!table) return fail(table.error());
  const bool over = print_per_strategy(*table, max_error);
  if (!csv_path.empty()) {
    std::string out = "strategy,rank,measured_s,replayed_s,error,dispatch_delay_s,largest_dispatch_delay_s\n";
    for (const auto& r : table->rows) out += csv_join(r) + "\n";
    if (auto s = write_file_atomic(csv_path, out); !s) return fail(s.error());
  }
  if (over) {
    std::fprintf(stderr, "lins replay: a strategy's replayed step time is more than %.1f%% from the measured one\n",
                 100 * max_error);
    return 1;
  }
  return 0;
}

}  // namespace lins
