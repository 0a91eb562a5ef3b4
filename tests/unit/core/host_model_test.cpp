// The host side of a projected step (core/host_model.h): a host that runs ahead of the device costs nothing while it
// stays ahead, adds what it falls behind, loses its lead at a synchronisation; DeepSpeed's per-rank costs grow with
// the group; the built-in costs are the measured file's; overlap_comm off waits for every reduction where issued.
#include "core/cost/host_model.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "core/projection/projection.h"
#include "core/projection/simulator.h"

namespace lins {
namespace {

// Two compute tasks and one op: the timeline with hand-made costs.
Schedule two_tasks(bool host_wait) {
  Schedule s;
  s.shape = StepShape{1, 0};  // tasks: the optimizer only; compute tasks are given by the program below
  s.streams = {"c"};
  CommOp op;
  op.issue = Point{1, false};
  op.wait = Point{3, false};
  op.host_wait = host_wait;
  s.ops.push_back(op);
  return s;
}

// issue op 0, compute task 0 (1 s), wait op 0, compute task 1 (1 s).
std::vector<Action> program() {
  return {{Action::Kind::issue, 0, false},
          {Action::Kind::compute, 0, false},
          {Action::Kind::wait, 0, false},
          {Action::Kind::compute, 1, false}};
}

TimelineResult run(const Schedule& s, std::vector<double> ahead, std::vector<char> sync, double op_s = 0.5) {
  TimelineCosts c;
  c.compute_s = [](int) { return 1.0; };
  c.op_s = [op_s](int) { return op_s; };
  HostProgram hp{std::move(ahead), std::move(sync), std::vector<int>(4, -1)};
  attach_host(c, hp);
  return run_timeline(s, program(), c);
}

TEST(HostTimeline, NoHostWorkIsTheDeviceScheduleAlone) {
  const Schedule s = two_tasks(false);
  TimelineCosts c;
  c.compute_s = [](int) { return 1.0; };
  c.op_s = [](int) { return 0.5; };
  const TimelineResult device = run_timeline(s, program(), c);
  const TimelineResult hosted = run(s, {0, 0, 0, 0}, {0, 0, 0, 0});
  EXPECT_DOUBLE_EQ(device.step_s, 2.0);
  EXPECT_DOUBLE_EQ(hosted.step_s, device.step_s);
  EXPECT_DOUBLE_EQ(hosted.host_stall_s, 0.0);
}

TEST(HostTimeline, HostWorkHidesWhileTheHostStaysAhead) {
  // 0.8 s of host work before the second task: the host launched it while the first still ran.
  const TimelineResult r = run(two_tasks(false), {0, 0, 0, 0.8}, {0, 0, 0, 0});
  EXPECT_DOUBLE_EQ(r.step_s, 2.0);
  EXPECT_DOUBLE_EQ(r.host_ahead_s, 0.8);
  EXPECT_DOUBLE_EQ(r.host_stall_s, 0.0);
}

TEST(HostTimeline, HostWorkAddsOnceTheHostFallsBehind) {
  // 1.5 s of host work before the second task: it starts 0.5 s late.
  const TimelineResult r = run(two_tasks(false), {0, 0, 0, 1.5}, {0, 0, 0, 0});
  EXPECT_DOUBLE_EQ(r.step_s, 2.5);
  EXPECT_DOUBLE_EQ(r.host_stall_s, 0.5);
}

TEST(HostTimeline, ASynchronisationThrowsTheLeadAway) {
  // The same 0.8 s, but the host first waits for the first task (a .item()): 1 + 0.8 before the second starts.
  const TimelineResult r = run(two_tasks(false), {0, 0, 0, 0.8}, {0, 0, 0, 1});
  EXPECT_DOUBLE_EQ(r.step_s, 2.8);
  EXPECT_NEAR(r.host_stall_s, 0.8, 1e-12);
}

TEST(HostTimeline, AHostWaitBlocksTheHostUntilTheOpEnds) {
  // The op runs 1.5 s from time 0. A stream wait lets the host run on; a host wait (an event synchronize) holds it
  // until 1.5 s, so 0.3 s of host work after it delays the second task to 1.8 s.
  const TimelineResult stream_wait = run(two_tasks(false), {0, 0, 0, 0.3}, {0, 0, 0, 0}, 1.5);
  const TimelineResult host_wait = run(two_tasks(true), {0, 0, 0, 0.3}, {0, 0, 0, 0}, 1.5);
  EXPECT_DOUBLE_EQ(stream_wait.step_s, 2.5);
  EXPECT_DOUBLE_EQ(host_wait.step_s, 2.8);
}

TEST(HostTimeline, AnOpStartsNoEarlierThanTheHostIssuedIt) {
  // 1.2 s of host work before the issue: the op starts at 1.2, ends at 1.7; the first task starts at 1.2 too.
  const TimelineResult r = run(two_tasks(false), {1.2, 0, 0, 0}, {0, 0, 0, 0});
  EXPECT_DOUBLE_EQ(r.ops[0].start_s, 1.2);
  EXPECT_DOUBLE_EQ(r.step_s, 3.2);
}

// A host model with the measured default costs (data/host/host_costs.csv), DeepSpeed's per-submodule gathers on or
// off.
HostModel measured_host(bool per_submodule = true) {
  HostModel h;
  h.costs = default_host_costs();
  h.ds_gather_per_submodule = per_submodule;
  return h;
}

struct Projected {
  ModelSpec model = make_model_preset("small").value();
  Schedule schedule(const std::string& plan, Topology topo, std::optional<bool> overlap_comm = {}) {
    ScheduleOptions o;
    o.micro_batches = 2;
    o.expand_micro_batches = true;
    o.engine.ds_reduce_bucket_elems = 100'000;
    o.engine.ds_overlap_comm = overlap_comm;
    return build_schedule(model, parse_plan(plan, topo).value(), topo, o).value();
  }
  // DeepSpeed's ZeRO-3 comparison settings (docs/peers.md): every module gathered before its forward and again
  // before its backward, no prefetch, nothing persistent.
  Schedule comparison(const std::string& plan, Topology topo) {
    ScheduleOptions o;
    o.micro_batches = 2;
    o.expand_micro_batches = true;
    o.engine.ds_prefetch_bucket_elems = 0;
    o.engine.ds_max_reuse_distance_elems = 0;
    o.engine.ds_param_persistence_threshold_elems = 0;
    return build_schedule(model, parse_plan(plan, topo).value(), topo, o).value();
  }
  StepProjection run(const Schedule& s, const HostModel* host) {
    return project_step(
        s, model, 128, 2, Recompute::none, ComputeRates{1e12, 1e12, 0.0, nullptr},
        [](const CommOp& op) { return 1e-6 + op.bytes() * 1e-10; }, nullptr, host);
  }
};

TEST(HostModel, DeepSpeedStage3HostWorkGrowsWithTheGroup) {
  Projected p;
  const HostModel host = measured_host();
  double previous = 0;
  for (int nodes : {1, 4, 16}) {
    const Schedule s = p.schedule("zero3", Topology{8, nodes});
    const HostProgram hp = host_program(s, p.model, step_program(s), host);
    EXPECT_GT(hp.ahead_total_s(), previous) << nodes << " nodes";
    previous = hp.ahead_total_s();
  }
  // MiCS's groups stay inside the node: its host work does not grow with the cluster.
  const Schedule m4 = p.schedule("mics", Topology{8, 4}), m16 = p.schedule("mics", Topology{8, 16});
  EXPECT_NEAR(host_program(m4, p.model, step_program(m4), host).ahead_total_s(),
              host_program(m16, p.model, step_program(m16), host).ahead_total_s(), 1e-5);
}

TEST(HostModel, OnlyTheDeepSpeedEnginesWaitForTheLossInThePapersEra) {
  Projected p;
  HostModel paper, today;
  paper.costs = today.costs = default_host_costs();
  today.era = HostEra::today;
  const Topology topo{8, 2};
  auto syncs = [&](const std::string& plan, const HostModel& h) {
    const Schedule s = p.schedule(plan, topo);
    int n = 0;
    for (char c : host_program(s, p.model, step_program(s), h).sync) n += c;
    return n;
  };
  EXPECT_EQ(syncs("zero3", paper), 2);  // one per micro-batch
  EXPECT_EQ(syncs("zero1", paper), 2);
  EXPECT_EQ(syncs("zero3", today), 0);
  EXPECT_EQ(syncs("fsdp", paper), 0);
  EXPECT_EQ(syncs("p=8x1,g=8x2,os=8x2", paper), 0);
}

TEST(HostModel, AHostModelOnlyAddsTime) {
  Projected p;
  const HostModel host = measured_host();
  for (const char* plan : {"zero3", "mics", "zeropp", "zero1", "ddp", "fsdp", "p=8x1,g=8x2,os=8x2"}) {
    const Schedule s = p.schedule(plan, Topology{8, 4});
    const StepProjection device = p.run(s, nullptr), hosted = p.run(s, &host);
    EXPECT_GE(hosted.step_s, device.step_s - 1e-12) << plan;
    EXPECT_GT(hosted.host_work_s, 0) << plan;
  }
}

// FSDP2, DDP and the Lins engine pay their own small costs: the Lins engine its own issue in place of torch's, DDP
// its reducer per bucket besides the issue, FSDP2 its hooks per module and pass besides the issues.
TEST(HostModel, FsdpDdpAndLinsPayTheirOwnCosts) {
  Projected p;
  HostModel h;
  h.costs.collective_issue_s = 1e-3;
  h.costs.lins_issue_s = 1e-4;
  h.costs.ddp_bucket_s = 1e-2;
  h.costs.fsdp2_hooks_s = 1e-1;
  const Topology topo{4, 2};
  auto work = [&](const std::string& plan, int* issues, int* tasks) {
    const Schedule s = p.schedule(plan, topo);
    const std::vector<Action> prog = step_program(s);
    *issues = *tasks = 0;
    for (const Action& a : prog) {
      if (a.kind == Action::Kind::issue) ++*issues;
      if (a.kind == Action::Kind::compute && s.shape.task(a.index).kind != TaskKind::optimizer) ++*tasks;
    }
    return host_program(s, p.model, prog, h).ahead_total_s();
  };
  int issues = 0, tasks = 0;
  const double lins = work("p=4x2,g=4x2,os=4x2", &issues, &tasks);
  EXPECT_GT(issues, 0);
  EXPECT_NEAR(lins, issues * 1e-4, 1e-12);
  const double ddp = work("ddp", &issues, &tasks);
  EXPECT_GT(issues, 0);
  EXPECT_NEAR(ddp, issues * (1e-3 + 1e-2), 1e-12);  // every DDP op is a bucket all-reduce
  const double fsdp = work("fsdp", &issues, &tasks);
  EXPECT_EQ(tasks, 2 * 2 * int(p.model.modules.size()));  // forward and backward of every module, M = 2
  EXPECT_NEAR(fsdp, issues * 1e-3 + tasks * 1e-1, 1e-9);
}

TEST(HostModel, OnACpuDeviceEveryHostCostAddsToTheStep) {
  // Free communication: on a GPU the host's work hides under compute; with the device in the host's thread the
  // step is compute plus all of it.
  Projected p;
  HostModel gpu, cpu;
  gpu.costs = cpu.costs = default_host_costs();
  gpu.era = cpu.era = HostEra::today;
  cpu.device_in_host_thread = true;
  const Schedule s = p.schedule("zero3", Topology{8, 4});
  auto run = [&](const HostModel& h) {
    return project_step(
        s, p.model, 128, 2, Recompute::none, ComputeRates{1e12, 1e12, 0.0, nullptr}, [](const CommOp&) { return 0.0; }, nullptr, &h);
  };
  const StepProjection g = run(gpu), c = run(cpu);
  EXPECT_NEAR(c.step_s, c.compute_s() + c.host_work_s, 1e-9);
  EXPECT_LT(g.step_s, c.step_s);
}

// DeepSpeed's fetch_sub_module gathers each leaf module's own parameters: a lins attention module (attention_norm,
// wq, wk, wv, wo) is five all-gathers, an MLP four, the head two (norm, output), the embedding one. On the small
// model (4 layers) at M = 2 that is 156 all-gathers per step, the count the real DeepSpeed 0.19.8 run logs
// (docs/peers.md); without a host model, or with the mechanism off, every op stays one collective.
TEST(HostModel, DeepSpeedGathersOnePerSubmoduleWithParameters) {
  Projected p;
  const HostModel host = measured_host(), off = measured_host(/*per_submodule=*/false);
  for (const char* plan : {"zero3", "zeropp"}) {
    const Schedule s = p.comparison(plan, Topology{2, 2});
    int calls = 0, ops = 0;
    for (const CommOp& op : s.ops) {
      if (op.kind != CollKind::all_gather) continue;
      ++ops;
      const int n = ds_gather_calls(s, p.model, op, &host);
      const std::string& kind = p.model.modules[static_cast<std::size_t>(op.module)].kind;
      EXPECT_EQ(n, kind == "attn" ? 5 : kind == "mlp" ? 4 : kind == "head" ? 2 : 1) << plan << " " << op.label;
      EXPECT_EQ(ds_gather_calls(s, p.model, op, nullptr), 1);
      EXPECT_EQ(ds_gather_calls(s, p.model, op, &off), 1);
      // Each call's parameters padded to the group, as DeepSpeed partitions them: never fewer than the module's.
      int64_t sum = 0;
      for (int64_t e : ds_gather_call_elems(s, p.model, op, &host)) {
        EXPECT_EQ(e % op.group.size(), 0);
        sum += e;
      }
      EXPECT_GE(sum, p.model.modules[static_cast<std::size_t>(op.module)].elems);
      calls += n;
    }
    EXPECT_EQ(ops, 40) << plan;  // lins's per-module gathers
    EXPECT_EQ(calls, 156) << plan;
  }
  // Other engines' gathers are one collective each.
  for (const char* plan : {"fsdp", "zero1"}) {
    const Schedule s = p.schedule(plan, Topology{2, 2});
    for (const CommOp& op : s.ops) EXPECT_EQ(ds_gather_calls(s, p.model, op, &host), 1) << plan << " " << op.label;
  }
}

// The host issues each of those calls (c10d's dispatch and _all_gather_dtype per call), and the cost model prices
// each at its own size: with a latency-bound cost every call pays the latency.
TEST(HostModel, PerSubmoduleGathersAreIssuedAndPricedPerCall) {
  Projected p;
  const HostModel host = measured_host(), off = measured_host(/*per_submodule=*/false);
  const Schedule s = p.comparison("zero3", Topology{2, 2});
  const std::vector<Action> prog = step_program(s);
  const HostProgram on_hp = host_program(s, p.model, prog, host), off_hp = host_program(s, p.model, prog, off);
  double extra = 0;
  for (const CommOp& op : s.ops)
    if (op.kind == CollKind::all_gather)
      extra += (ds_gather_calls(s, p.model, op, &host) - 1) *
               (host.costs.collective_issue_s + host.costs.ds_gather_issue.at(op.group.size()));
  EXPECT_NEAR(on_hp.ahead_total_s() - off_hp.ahead_total_s(), extra, 1e-12);
  EXPECT_GT(extra, 0);

  AlphaBeta net = network_preset("paper-a800").value();
  const CostModel cost(net);
  const std::vector<double> plain = price_ops(s, cost, Pricing::paper_isolated);
  const std::vector<double> unhosted = price_ops(s, cost, Pricing::paper_isolated, &p.model, nullptr);
  const std::vector<double> per_call = price_ops(s, cost, Pricing::paper_isolated, &p.model, &host);
  ASSERT_EQ(plain.size(), s.ops.size());
  for (std::size_t i = 0; i < s.ops.size(); ++i) {
    EXPECT_EQ(unhosted[i], plain[i]);
    const CommOp& op = s.ops[i];
    const std::vector<int64_t> calls = ds_gather_call_elems(s, p.model, op, &host);
    double want = 0;
    for (int64_t e : calls) {
      CommOp one = op;
      one.elems = e;
      want += cost.op_time_s(one, s.topo, Pricing::paper_isolated);
    }
    EXPECT_NEAR(per_call[i], want, 1e-15) << op.label;
    if (calls.size() > 1) {
      EXPECT_GT(per_call[i], plain[i]) << op.label;  // each call pays the latency again
    }
  }
}

// ZeRO-3 hooks every torch module: per micro-batch and pass, 52 of them on the small model (the root, the
// embedding, per layer the layer, attention, feed_forward, both norms and seven Linear layers, the final norm and
// the output) and 28 on the tiny one, the counts the real DeepSpeed 0.19.8 runs' hooks are called (lins_peers
// .host_breakdown: 104 and 56 forward hook calls per step at M = 2). The host pays them before each forward and
// backward task of a DeepSpeed ZeRO-3 engine, and never in another engine.
TEST(HostModel, DeepSpeedHooksEveryTorchModuleOfTheModel) {
  Projected p;
  const std::vector<int> hooked = ds_hooked_modules(p.model);
  ASSERT_EQ(hooked.size(), p.model.modules.size());
  int total = 0;
  for (std::size_t m = 0; m < hooked.size(); ++m) {
    const std::string& kind = p.model.modules[m].kind;
    EXPECT_EQ(hooked[m], kind == "embed" ? 2 : kind == "attn" ? 7 : kind == "mlp" ? 5 : 2) << p.model.modules[m].name;
    total += hooked[m];
  }
  EXPECT_EQ(total, 52);
  int tiny = 0;
  for (int n : ds_hooked_modules(make_model_preset("tiny").value())) tiny += n;
  EXPECT_EQ(tiny, 28);

  HostModel with, without;
  with.costs = without.costs = default_host_costs();
  with.costs.ds_module_hooks_s = 1e-3;
  without.costs.ds_module_hooks_s = 0;
  for (const char* plan : {"zero3", "zeropp", "mics", "zero1", "fsdp", "ddp"}) {
    const Schedule s = p.comparison(plan, Topology{2, 2});
    const std::vector<Action> prog = step_program(s);
    const double added =
        host_program(s, p.model, prog, with).ahead_total_s() - host_program(s, p.model, prog, without).ahead_total_s();
    const bool stage3 = std::string(plan) == "zero3" || std::string(plan) == "zeropp" || std::string(plan) == "mics";
    EXPECT_NEAR(added, stage3 ? 2 * 2 * 52 * 1e-3 : 0.0, 1e-12) << plan;  // M = 2, forward and backward
  }
}

TEST(HostModel, DefaultsAreTheMeasuredFile) {
  auto measured = read_host_costs(LINS_HOST_DATA_DIR "/host_costs.csv");
  ASSERT_TRUE(measured) << measured.error();
  const HostCosts d = default_host_costs();
  EXPECT_DOUBLE_EQ(measured->collective_issue_s, d.collective_issue_s);
  for (auto [m, e] :
       {std::pair{measured->ds_gather_issue, d.ds_gather_issue}, std::pair{measured->ds_gather_wait, d.ds_gather_wait},
        std::pair{measured->ds_reduce_scatter, d.ds_reduce_scatter}}) {
    EXPECT_DOUBLE_EQ(m.a_s, e.a_s);
    EXPECT_DOUBLE_EQ(m.b_s, e.b_s);
  }
  EXPECT_DOUBLE_EQ(measured->ds_module_hooks_s, d.ds_module_hooks_s);
  EXPECT_GT(d.ds_module_hooks_s, 0);
  EXPECT_DOUBLE_EQ(measured->fsdp2_hooks_s, d.fsdp2_hooks_s);
  EXPECT_DOUBLE_EQ(measured->ddp_bucket_s, d.ddp_bucket_s);
  EXPECT_DOUBLE_EQ(measured->lins_issue_s, d.lins_issue_s);
  EXPECT_GT(d.fsdp2_hooks_s, 0);
  EXPECT_GT(d.lins_issue_s, 0);
}

TEST(HostModel, ABadCostsFileIsRefusedWithItsLine) {
  const std::string path = testing::TempDir() + "host_costs_bad.csv";
  {
    std::ofstream f(path);
    f << "kind,a_s,b_s\nds_gather_wait,1e-5,2e-6\nds_gather_wiat,1e-5,2e-6\n";
  }
  auto r = read_host_costs(path);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find(":3"), std::string::npos) << r.error();
  EXPECT_NE(r.error().find("valid: collective_issue"), std::string::npos) << r.error();
  std::remove(path.c_str());
}

TEST(OverlapComm, OffWaitsForEveryStage3ReductionWhereItIsIssued) {
  Projected p;
  const Topology topo{4, 2};
  for (const char* plan : {"zero3", "mics", "zeropp"}) {
    const Schedule on = p.schedule(plan, topo), off = p.schedule(plan, topo, false);
    ASSERT_EQ(on.ops.size(), off.ops.size()) << plan;
    int later_on = 0;
    for (std::size_t i = 0; i < off.ops.size(); ++i) {
      const CommOp& a = on.ops[i];
      const CommOp& b = off.ops[i];
      EXPECT_EQ(a.issue, b.issue) << plan << " op " << i;
      const bool reduction = b.purpose == Purpose::grad_reduce_scatter || b.purpose == Purpose::replica_all_reduce;
      if (reduction) {
        EXPECT_EQ(b.wait, b.issue) << plan << " op " << i;
        EXPECT_FALSE(b.host_wait) << plan << " op " << i;
        later_on += a.wait.order() > a.issue.order();
      } else {
        EXPECT_EQ(a.wait, b.wait) << plan << " op " << i;
      }
    }
    EXPECT_GT(later_on, 0) << plan << ": with overlap_comm on (the default) some reduction overlaps compute";
    // Waiting where issued can only add time.
    EXPECT_GE(p.run(off, nullptr).step_s, p.run(on, nullptr).step_s - 1e-12) << plan;
  }
}

}  // namespace
}  // namespace lins
