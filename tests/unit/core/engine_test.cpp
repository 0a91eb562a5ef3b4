// The engines' step programs, made visible and checked (docs/engines.md has a table per engine):
//   - golden text: every engine (each preset of parse_plan, the Lins engine on a few 6-tuples) on the tiny model at
//     M = 2 on 4 GPUs per node x 2 nodes, under each overlap mode, rendered one line per op (kind, purpose, group
//     role and mesh, stream, issue point, wait point, after) and compared with tests/unit/core/golden/<engine>.txt;
//   - overlap: under `all` the collectives the docs say overlap compute do (a compute task lies between their issue
//     and wait), under `none` none waits later than it is issued, so that a regression to "wait where issued" fails
//     here even after the golden files are regenerated.
//
// Regenerating the golden files after an intended change of an engine:
//     LINS_UPDATE_GOLDEN=1 build/tests/unit/core/unit_core --gtest_filter='EngineGolden.*'
// rewrites tests/unit/core/golden/*.txt in the source tree, keeping each file's leading comment lines (those that
// start with '#': the promises of docs/engines.md checked in the text, ignored by the comparison). Review the diff
// against docs/engines.md before committing it.
#include <gtest/gtest.h>

#include <cctype>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/schedule/engines.h"
#include "core/schedule/schedule.h"
#include "timeline_reference.h"

#ifndef LINS_GOLDEN_DIR
#error "LINS_GOLDEN_DIR must name tests/unit/core/golden"
#endif

namespace lins {
namespace {

const Topology kTopo{4, 2};
constexpr int kMicroBatches = 2;
const Overlap kModes[] = {Overlap::all, Overlap::no_bcast, Overlap::no_allreduce, Overlap::none};

// Engine settings scaled to the tiny model (5968 parameters; modules of 384, 1040, 1552 and 400 elements), so that
// every branch of each engine shows: DDP's small first bucket and several buckets; DeepSpeed's persistent module
// (the embedding), prefetch of one or two modules, modules kept from forward to backward (the head and the last MLP)
// and released ones, four reduce buckets (the fourth is issued at E, so the wait for the bucket three back falls
// there too); several Lins buckets.
EngineOptions golden_engine_options() {
  EngineOptions e;
  e.bucket_bytes = 2048;
  e.ddp_first_bucket_bytes = 1024;
  e.ds_reduce_bucket_elems = 2400;
  e.ds_prefetch_bucket_elems = 1100;
  e.ds_max_reuse_distance_elems = 1000;
  e.ds_param_persistence_threshold_elems = 384;
  return e;
}

// One program of the golden files: a plan as parse_plan reads it, optionally with DeepSpeed's overlap_comm.
struct Case {
  std::string plan;
  std::optional<bool> overlap_comm;  // unset: DeepSpeed's default for the stage
  std::string title() const {
    return overlap_comm ? plan + " --ds-overlap-comm " + (*overlap_comm ? "on" : "off") : plan;
  }
};

// The plans to render: every preset of plan_presets() ("mics[:S]" gives mics and mics:2, "fsdp[:noreshard|:K]"
// gives fsdp, fsdp:noreshard and fsdp:2), ZeRO-1/2 also with overlap_comm on and ZeRO-3, MiCS and ZeRO++ with it off
// (the stages' defaults are the other way round), and the Lins engine on a few 6-tuples.
// "lins" (the planner's choice, not a plan) and the 6-tuple syntax are not presets.
std::vector<Case> golden_cases() {
  std::vector<Case> out;
  for (const auto& [name, help] : plan_presets()) {
    if (name == "lins" || name.find('=') != std::string::npos) continue;
    const auto open = name.find('[');
    const std::string base = name.substr(0, open);
    out.push_back({base, std::nullopt});
    if (open != std::string::npos) {
      std::string alternatives = name.substr(open + 1, name.find(']') - open - 1);  // ":noreshard|:K"
      std::stringstream in(alternatives);
      for (std::string alt; std::getline(in, alt, '|');) {
        const std::string arg = alt.substr(alt.rfind(':', 0) == 0 ? 1 : 0);  // without the ':'
        // A one-letter placeholder (S, K) is a group size: 2, half a node.
        out.push_back({base + ":" + (arg.size() == 1 && std::isupper(static_cast<unsigned char>(arg[0])) ? "2" : arg),
                       std::nullopt});
      }
    }
    if (base == "zero1" || base == "zero2") out.push_back({base, true});
    if (base == "zero3" || base == "mics" || base == "zeropp") out.push_back({base, false});
  }
  // ZeRO++'s quantized communication (qwZ and qgZ), with and without the secondary copy.
  for (const char* quantized : {"zeropp+qwz+qgz", "zero3+qwz+qgz"}) out.push_back({quantized, std::nullopt});
  for (const char* tuple :
       {"p=2x1,g=2x1,os=4x1", "p=4x1,g=4x1,os=4x1", "p=2x1,g=4x2,os=4x2", "p=1x1,g=1x1,os=4x2", "p=4x2,g=4x2,os=4x2"})
    out.push_back({tuple, std::nullopt});
  return out;
}

Result<Schedule> build_case(const Case& c, Overlap overlap, std::string* engine = nullptr) {
  LINS_ASSIGN_OR_RETURN(auto plan, parse_plan(c.plan, kTopo));
  if (engine) *engine = engine_name(plan.engine);
  ScheduleOptions o;
  o.micro_batches = kMicroBatches;
  o.bucket_bytes = golden_engine_options().bucket_bytes;
  o.expand_micro_batches = true;
  o.overlap = overlap;
  o.engine = golden_engine_options();
  o.engine.ds_overlap_comm = c.overlap_comm;
  return build_schedule(make_model_preset("tiny").value(), plan, kTopo, o);
}

// The golden files write a task as a letter (F, B, A, ...), not as kTaskKindNames' words: the letters are written here.
const char* task_letter(TaskKind k, bool before, bool first_module) {
  switch (k) {
    case TaskKind::forward:
      return before ? "F" : "AF";
    case TaskKind::backward:
      return before ? "B" : first_module ? "E" : "A";
    case TaskKind::optimizer:
      return before ? "O" : "S";
  }
  return "?";
}

// docs/engines.md's point names: F(m,b) before module m's forward in micro-batch b, AF(m,b) after it, B(m,b) before
// its backward, A(m,b) after it, E(b) the end of micro-batch b's backward (after module 0's), O before the
// optimizer, S the end of the step; a ' marks the same point of the next step.
std::string point_text(const StepShape& shape, Point p) {
  const int end = 2 * shape.task_count();
  std::string s;
  if (p.slot < 1 || p.slot > end) {
    s = "slot" + std::to_string(p.slot);
  } else {
    const bool before = p.slot % 2 == 1;
    const ComputeTask t = shape.task(before ? p.slot / 2 : p.slot / 2 - 1);
    s = task_letter(t.kind, before, t.module == 0);
    if (p.next_step) s += "'";
    if (t.kind == TaskKind::backward && !before && t.module == 0)
      s += "(" + std::to_string(t.micro_batch) + ")";
    else if (t.kind != TaskKind::optimizer)
      s += "(" + std::to_string(t.module) + "," + std::to_string(t.micro_batch) + ")";
    return s;
  }
  return p.next_step ? s + "'" : s;
}

// One program as text: a title line, then one line per op in schedule order. Names come from the name tables
// (kPhaseNames, kCollKindNames, kPurposeNames, kOverlapNames, kEngineNames) and group_role_name (GroupRole has a name
// function but no table yet); points from point_text above.
std::vector<std::string> render(const Case& c, Overlap overlap, const Schedule& s) {
  std::vector<std::string> out;
  std::string streams, persistent;
  for (const auto& name : s.streams) streams += (streams.empty() ? "" : ",") + name;
  for (int m : s.persistent_modules) persistent += (persistent.empty() ? "" : ",") + std::to_string(m);
  out.push_back("== " + c.title() + " overlap=" + overlap_name(overlap) + " streams=" + streams +
                " persistent=" + (persistent.empty() ? "-" : persistent) +
                " transient_grads=" + (s.transient_grads ? "yes" : "no") + " ops=" + std::to_string(s.ops.size()));
  for (std::size_t i = 0; i < s.ops.size(); ++i) {
    const CommOp& op = s.ops[i];
    std::ostringstream line;
    line << "op" << i << " mb" << op.micro_batch << " " << phase_name(op.phase) << " " << coll_kind_name(op.kind) << " "
         << purpose_name(op.purpose) << " " << (op.label.empty() ? "-" : op.label) << " " << group_role_name(op.role)
         << ":" << op.mesh.to_string() << " stream=" << s.streams[static_cast<std::size_t>(op.stream)]
         << " issue=" << point_text(s.shape, op.issue) << " wait=" << point_text(s.shape, op.wait)
         << " after=" << (op.after >= 0 ? "op" + std::to_string(op.after) : std::string("-")) << " elems=" << op.elems;
    if (op.kind == CollKind::broadcast) line << " root=" << op.root << (op.in_place ? " in_place" : "");
    if (op.quant != Quant::none) line << " " << kQuantNames.name(op.quant) << "_blocks=" << op.quant_blocks;
    out.push_back(line.str());
  }
  return out;
}

// The body of every golden file, by engine name (kEngineNames), each program after a blank line.
std::map<std::string, std::vector<std::string>> golden_bodies() {
  std::map<std::string, std::vector<std::string>> files;
  const auto model = make_model_preset("tiny").value();
  for (const Case& c : golden_cases()) {
    for (Overlap mode : kModes) {
      std::string engine;
      auto s = build_case(c, mode, &engine);
      EXPECT_TRUE(s) << c.title() << " " << overlap_name(mode) << ": " << (s ? "" : s.error());
      if (!s) continue;
      auto& body = files[engine];
      if (body.empty()) {
        body.push_back("topology " + kTopo.to_string() + ", model tiny, M=" + std::to_string(kMicroBatches) +
                       ", rank 0; modules:");
        for (std::size_t m = 0; m < model.modules.size(); ++m)
          body.push_back("  " + std::to_string(m) + " " + model.modules[m].name);
      }
      body.push_back("");
      for (auto& line : render(c, mode, *s)) body.push_back(std::move(line));
    }
  }
  return files;
}

std::vector<std::string> read_lines(const std::string& path, bool* found) {
  std::ifstream in(path);
  *found = static_cast<bool>(in);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(EngineGolden, ProgramsMatchTheCheckedInText) {
  const bool update = std::getenv("LINS_UPDATE_GOLDEN") != nullptr;
  const auto bodies = golden_bodies();
  ASSERT_EQ(bodies.size(), static_cast<std::size_t>(kEngineCount)) << "every engine has a golden file";
  for (const auto& [engine, body] : bodies) {
    const std::string path = std::string(LINS_GOLDEN_DIR) + "/" + engine + ".txt";
    bool found = false;
    const auto file = read_lines(path, &found);
    std::vector<std::string> header, expected;
    std::vector<std::size_t> file_line;  // of each line of `expected`
    // Comment lines are not compared; those before the first other line are the header an update keeps.
    for (std::size_t n = 0; n < file.size(); ++n) {
      if (file[n].rfind("#", 0) != 0)
        expected.push_back(file[n]), file_line.push_back(n + 1);
      else if (expected.empty())
        header.push_back(file[n]);
    }
    if (update) {
      std::ofstream out(path, std::ios::trunc);
      for (const auto& line : header) out << line << "\n";
      for (const auto& line : body) out << line << "\n";
      ASSERT_TRUE(out.good()) << "cannot write " << path;
      continue;
    }
    ASSERT_TRUE(found) << path << " is missing; run with LINS_UPDATE_GOLDEN=1 to write it";
    std::size_t k = 0;
    while (k < body.size() && k < expected.size() && body[k] == expected[k]) ++k;
    if (k == body.size() && k == expected.size()) continue;
    ADD_FAILURE() << path << ": the " << engine << " engine's programs differ from the golden text at body line "
                  << k + 1 << " (file line " << (k < file_line.size() ? file_line[k] : file.size() + 1) << "):\n"
                  << "  golden: " << (k < expected.size() ? expected[k] : "<end of file>") << "\n"
                  << "  now:    " << (k < body.size() ? body[k] : "<end of output>") << "\n"
                  << "If the change is intended, regenerate with LINS_UPDATE_GOLDEN=1 (see the top of "
                     "tests/unit/core/engine_test.cpp) and review the diff against docs/engines.md.";
  }
}

// A compute task lies between the op's issue and its wait: the op can overlap compute.
bool overlaps_compute(const Schedule& s, const CommOp& op) {
  auto tasks_done = [&](Point p) { return int64_t(p.slot / 2) + (p.next_step ? s.shape.task_count() : 0); };
  return tasks_done(op.wait) > tasks_done(op.issue);
}

// What docs/engines.md says overlaps compute under `all`, per plan: each purpose listed has at least one op with a
// compute task between its issue and its wait. A preset added to plan_presets() needs its entry here.
const std::map<std::string, std::set<Purpose>>& overlapping_purposes() {
  using P = Purpose;
  static const std::map<std::string, std::set<Purpose>> table = {
      // DDP: a bucket's all-reduce at A(m) of the module completing it, waited at E.
      {"ddp", {P::sync_bucket_all_reduce}},
      // ZeRO-1/2: overlap_comm off, every all-reduce runs on the compute stream: nothing overlaps.
      {"zero1", {}},
      {"zero2", {}},
      // With overlap_comm a bucket is waited when the next one is flushed, the last at E.
      {"zero1 --ds-overlap-comm on", {P::zero_grad_reduce}},
      {"zero2 --ds-overlap-comm on", {P::zero_grad_reduce}},
      // Stage 3 with overlap_comm off: the gathers still prefetch, every reduction is waited where issued.
      {"zero3 --ds-overlap-comm off", {P::forward_gather, P::backward_gather}},
      {"mics --ds-overlap-comm off", {P::forward_gather, P::backward_gather}},
      {"zeropp --ds-overlap-comm off", {P::forward_gather, P::hpz_gather}},
      // ZeRO-3: gathers prefetched after the previous use, reduce-scatters at A(m) waited later.
      {"zero3", {P::forward_gather, P::backward_gather, P::grad_reduce_scatter}},
      // MiCS: ZeRO-3 in the shard group, and the replica all-reduces waited with their bucket.
      {"mics", {P::forward_gather, P::backward_gather, P::grad_reduce_scatter, P::replica_all_reduce}},
      {"mics:2", {P::forward_gather, P::backward_gather, P::grad_reduce_scatter, P::replica_all_reduce}},
      // ZeRO++: every gather after a module's first reads the secondary copy.
      {"zeropp", {P::forward_gather, P::hpz_gather, P::grad_reduce_scatter}},
      {"zeropp:2", {P::forward_gather, P::hpz_gather, P::grad_reduce_scatter}},
      // qgZ: each module's two exchanges where its reduce-scatter was, waited at E.
      {"zeropp+qwz+qgz", {P::forward_gather, P::hpz_gather, P::qgz_node_exchange, P::qgz_peer_exchange}},
      {"zero3+qwz+qgz", {P::forward_gather, P::backward_gather, P::qgz_node_exchange, P::qgz_peer_exchange}},
      // FSDP2: gathers one unit ahead, reduce-scatters waited at the next unit's; HSDP's all-reduces at E.
      {"fsdp", {P::forward_gather, P::backward_gather, P::grad_reduce_scatter}},
      {"fsdp:noreshard", {P::forward_gather, P::grad_reduce_scatter}},
      {"fsdp:2", {P::forward_gather, P::hpz_gather, P::grad_reduce_scatter}},
      {"hsdp", {P::forward_gather, P::backward_gather, P::grad_reduce_scatter, P::replica_all_reduce}},
      {"hsdp:2", {P::forward_gather, P::backward_gather, P::grad_reduce_scatter, P::replica_all_reduce}},
      // Lins: gathers ahead, reduce-scatters two modules later, bucket all-reduces at E, broadcasts under the next
      // forward; which of them exist depends on the factors.
      {"p=2x1,g=2x1,os=4x1",
       {P::forward_gather, P::backward_gather, P::grad_reduce_scatter, P::sync_bucket_all_reduce, P::update_broadcast}},
      {"p=4x1,g=4x1,os=4x1",
       {P::forward_gather, P::backward_gather, P::grad_reduce_scatter, P::sync_bucket_all_reduce}},
      {"p=2x1,g=4x2,os=4x2",
       {P::forward_gather, P::backward_gather, P::grad_reduce_scatter, P::grad_bucket_all_reduce,
        P::sync_bucket_all_reduce, P::update_broadcast}},
      {"p=1x1,g=1x1,os=4x2", {P::sync_bucket_all_reduce, P::update_broadcast}},
      {"p=4x2,g=4x2,os=4x2", {P::forward_gather, P::backward_gather, P::grad_reduce_scatter}},
  };
  return table;
}

TEST(EngineOverlap, EnginesThatOverlapDoAndNoneOverlapsNothing) {
  for (const Case& c : golden_cases()) {
    const auto it = overlapping_purposes().find(c.title());
    ASSERT_NE(it, overlapping_purposes().end()) << c.title() << ": say in overlapping_purposes() what overlaps";
    for (Overlap mode : kModes) {
      auto s = build_case(c, mode);
      ASSERT_TRUE(s) << s.error();
      const std::string where = c.title() + " overlap=" + overlap_name(mode);
      std::set<Purpose> expected;
      for (Purpose p : it->second) {
        const bool update = p == Purpose::update_broadcast || p == Purpose::update_gather;
        const bool all_reduce = p == Purpose::sync_bucket_all_reduce || p == Purpose::grad_bucket_all_reduce ||
                                p == Purpose::replica_all_reduce || p == Purpose::zero_grad_reduce;
        if (update && !overlaps_broadcast(mode)) continue;
        if (all_reduce && !overlaps_all_reduce(mode)) continue;
        if (!overlaps_gathers(mode)) continue;
        expected.insert(p);
      }
      std::set<Purpose> seen;
      for (std::size_t i = 0; i < s->ops.size(); ++i) {
        const CommOp& op = s->ops[i];
        const bool later = op.wait.order() > op.issue.order();
        if (overlaps_compute(*s, op)) seen.insert(op.purpose);
        if (mode == Overlap::none) {
          EXPECT_FALSE(later) << where << ": op " << i << " (" << purpose_name(op.purpose) << " " << op.label
                              << ") is waited " << s->shape.describe(op.wait) << ", after its issue "
                              << s->shape.describe(op.issue);
        }
        if (op.kind == CollKind::all_reduce && !overlaps_all_reduce(mode)) {
          EXPECT_FALSE(later) << where << ": all-reduce " << i << " (" << op.label << ") is not waited where issued";
        }
        if ((op.purpose == Purpose::update_broadcast || op.purpose == Purpose::update_gather) &&
            !overlaps_broadcast(mode)) {
          EXPECT_FALSE(op.wait.next_step) << where << ": update op " << i << " is waited in the next step";
        }
      }
      for (Purpose p : expected) {
        EXPECT_TRUE(seen.count(p)) << where << ": no " << purpose_name(p)
                                   << " overlaps compute (every one is waited where it is issued)";
      }
      for (Purpose p : seen) {
        EXPECT_TRUE(expected.count(p)) << where << ": " << purpose_name(p)
                                       << " overlaps compute, which docs/engines.md does not say";
      }
    }
  }
}

// With nothing contending, the progress-rate timeline is the plain event model to the bit, on every golden program and
// overlap mode: with the rates left empty and with rates that are all 1, with and without a host of its own, with
// host time on the compute cursor and with the previous step's ops issued before this step began.
TEST(TimelineProgress, WithoutContentionEveryGoldenProgramTimesAsThePlainEventModel) {
  // Durations that differ per task and op and are not round (so that any change in the arithmetic shows).
  auto spread = [](int i, double base) { return base * (1.0 + 0.37 * ((i * 7919) % 13) / 13.0); };
  int checked = 0;
  for (const Case& c : golden_cases())
    for (Overlap mode : kModes) {
      auto s = build_case(c, mode);
      ASSERT_TRUE(s) << s.error();
      const std::vector<Action> program = step_program(*s);
      for (int variant = 0; variant < 4; ++variant) {
        TimelineCosts costs;
        costs.compute_s = [&](int t) { return spread(t, 1.3e-3); };
        costs.op_s = [&](int i) { return spread(i + 5, 0.9e-3); };
        if (variant >= 1) {  // the replay's host time on the compute cursor, and carried ops issued before the step
          costs.host_s = [](int pos) { return pos % 3 == 0 ? 1.1e-5 : 0.0; };
          costs.after_s = [](int pos) { return pos % 5 == 0 ? 2.3e-5 : 0.0; };
          costs.wake_s = [](int pos) { return pos % 2 == 0 ? 7e-6 : 0.0; };
          costs.carried_issue_s = [](int i) { return -1e-4 * (i % 4); };
        }
        if (variant >= 2) {  // a host of its own
          costs.host_ahead_s = [](int pos) { return pos % 4 == 0 ? 4e-4 : 3e-5; };
          costs.host_sync = [](int pos) { return pos % 17 == 0; };
          costs.host_wait_op = [&](int pos) { return pos % 11 == 0 && pos > 0 ? (pos / 11) % int(s->ops.size()) : -1; };
        }
        if (variant == 3) {  // rates given, all 1
          costs.rates.compute = [](int, const int*) { return 1.0; };
          costs.rates.transfer = [](int, int, bool) { return 1.0; };
          costs.rates.latency_s = [](int) { return 1e-4; };
        }
        const TimelineResult want = reference::run_timeline(*s, program, costs);
        const TimelineResult got = run_timeline(*s, program, costs);
        const std::string where = c.title() + " overlap=" + overlap_name(mode) + " variant " + std::to_string(variant);
        ASSERT_EQ(got.step_s, want.step_s) << where;
        EXPECT_EQ(got.compute_s, want.compute_s) << where;
        EXPECT_EQ(got.waited_s, want.waited_s) << where;
        EXPECT_EQ(got.host_s, want.host_s) << where;
        EXPECT_EQ(got.host_ahead_s, want.host_ahead_s) << where;
        EXPECT_EQ(got.host_stall_s, want.host_stall_s) << where;
        EXPECT_EQ(got.action_end_s, want.action_end_s) << where;
        EXPECT_EQ(got.host_end_s, want.host_end_s) << where;
        EXPECT_EQ(got.stream_busy_s, want.stream_busy_s) << where;
        EXPECT_EQ(got.compute_stretch_s, 0.0) << where;
        ASSERT_EQ(got.ops.size(), want.ops.size());
        for (std::size_t i = 0; i < got.ops.size(); ++i) {
          EXPECT_EQ(got.ops[i].start_s, want.ops[i].start_s) << where << " op " << i;
          EXPECT_EQ(got.ops[i].end_s, want.ops[i].end_s) << where << " op " << i;
        }
        ++checked;
      }
    }
  EXPECT_GT(checked, 100);
}

}  // namespace
}  // namespace lins
