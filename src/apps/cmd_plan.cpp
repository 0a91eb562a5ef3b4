// `lins plan`: the planner (core/planner.h) on a model and a cluster nobody needs to have. Prints the chosen plan and
// the ranked alternatives by projected step time (the default) or by the paper's summed communication, with their
// memory (reserve included), where each one's step time goes (compute, exposed collectives per kind and axis, host)
// and their communication breakdowns (the paper's isolated pricing, the shared-link pricing, or both), each plan's
// rank under the other objective; evaluates one given plan, explains where the chosen plan's step goes beside the
// runner-up's and its schedule, and writes every plan as CSV.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <tuple>

#include "apps/commands.h"
#include "core/cost/compute_model.h"
#include "core/cost/cost_model.h"
#include "core/cost/cost_options.h"
#include "core/cost/host_model.h"
#include "core/cost/inputs.h"
#include "core/cost/link_fit.h"
#include "core/output/results_schema.h"
#include "core/output/text_table.h"
#include "core/projection/memory_model.h"
#include "core/projection/planner.h"
#include "core/schedule/workload.h"
#include "core/util/cli.h"
#include "core/util/csv.h"
#include "core/util/units.h"

namespace lins {
namespace {

CommandSpec plan_spec() {
  CommandSpec spec;
  spec.name = "plan";
  spec.summary =
      "Rank every legal sharding plan (sharding factors of parameters, gradients and optimizer states inside and "
      "across nodes) of a model on a cluster, and the baselines on their own engines, among those that fit in GPU "
      "memory: by projected step time (as lins simulate projects it), or by the paper's summed communication time.";
  spec.usage = "lins plan [options]";
  std::string presets;
  for (const auto& [n, d] : plan_presets()) presets += (presets.empty() ? "" : ", ") + n;
  spec.options = concat_options(concat_options(model_options("llama-7b"), topology_options("8", "128")),
                                workload_options("4096", "1", "4M"));
  spec.options = concat_options(spec.options, cost_options("paper-a800", "both", /*allow_both=*/true));
  spec.options = concat_options(spec.options, gpu_options("plans whose tensors plus reserve need more are marked "
                                                          "infeasible"));
  spec.options = concat_options(spec.options, memory_reserve_options());
  spec.options = concat_options(spec.options, engine_options());
  spec.options = concat_options(spec.options, host_options());
  spec.options = concat_options(spec.options, compute_options());
  spec.options = concat_options(
      spec.options,
      {
          {"objective", 0, "NAME", "step",
           "what ranks the plans: " + kObjectiveNames.described() + "; comm reproduces the paper's planner (Table IV)"},
          {"overlap", 0, "MODE", "all",
           "overlap mode of the projected steps (step objective): " + kOverlapNames.list()},
          bucket_option(),
          {"top", 0, "N", "10", "alternatives shown in the table (the CSV has all)"},
          tie_option(
              "plans whose objective is within this fraction of the best form tier 1, a tie as far as the projection "
              "can tell; the recommendation prefers a plan PyTorch or DeepSpeed runs within it. 0.2: the projection's "
              "validated error, every strategy's projected step within 20% of the measured one (REPRODUCE.md, "
              "section 7; docs/cost-model.md, \"What a projection rests on\")"),
          {"plan", 0, "PLAN", "", "evaluate just this plan: " + presets},
          {"explain", 0, "", "",
           "print where the chosen (or --plan) plan's projected step time goes beside the runner-up's, and its "
           "schedule: bytes and time per phase and axis"},
          {"csv", 0, "FILE", "", "write one row per plan (the finished file appears only when complete)"},
          {"no-baselines", 0, "", "", "leave the baselines (ddp, zero1/2/3, mics, zeropp, fsdp, hsdp) out"},
      });
  spec.epilog =
      "examples:\n"
      "  lins plan\n"
      "      LLaMA-7B on the paper's 8 x 128 A800 cluster, 4M tokens per step, by projected step time\n"
      "  lins plan --objective comm\n"
      "      the same by the paper's summed communication time (its Table IV)\n"
      "  lins plan --profile profile.csv --calibrate step_m2.csv,step_m4.csv --gpus-per-node 2 --nodes 2\n"
      "      ranked for a measured cluster: its bandwidth profile and its compute fitted to measured steps\n"
      "  lins plan --model llama-13b --gpus-per-node 8 --nodes 128 --gpu-mem 80GiB --seq 4096 --micro-batch 1 \\\n"
      "            --global-batch-tokens 4M --network paper-a800\n"
      "  lins plan --model llama-30b --recompute --nodes 4 --plan zero3 --explain\n"
      "  lins plan --profile profile.csv --pricing shared --csv plans.csv\n"
      "  lins plan --network my-cluster.toml --nccl-tests all_gather_perf.txt,all_reduce_perf.txt@8x16\n"
      "  lins plan --network-model alpha-beta --reserve-fragmentation 0\n"
      "networks, the nccl and alpha-beta models, nccl-tests import and the memory reserve: docs/cost-model.md";
  return spec;
}

constexpr double kGiB = double(1ull << 30);

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

struct View {
  bool paper = true, shared = true;
  Pricing rank_by = Pricing::paper_isolated;
  Objective objective = Objective::step;
  Overlap overlap = Overlap::all;
  double peak_flops = 0;      // per GPU, for MFU (the GPU assumption's peak)
  double flops_per_step = 0;  // model FLOPs per GPU per step (Megatron counting)
  bool priced_by_fit = false;  // the network model prices with link terms fitted to the measurements
  double gpu_mem_bytes = 0;    // the memory limit a plan's need is held to
};

// A table of `lins plan`: text columns (plan, 6-tuple, why) left-aligned, numbers right-aligned, two spaces apart.
TextTable plan_table(const std::vector<std::string>& head) {
  std::vector<TextTable::Column> columns;
  for (std::size_t i = 0; i < head.size(); ++i) {
    const bool text = i == 1 || i == 2 || i + 1 == head.size();
    columns.push_back(
        {.header = head[i], .align = text ? TextTable::Align::left : TextTable::Align::right, .gap = "  "});
  }
  return TextTable(std::move(columns));
}

double mfu(const PlanEvaluation& e, const View& v) {
  return e.projected && e.step.step_s > 0 ? v.flops_per_step / e.step.step_s / v.peak_flops : 0.0;
}

std::string other_rank_text(const PlanEvaluation& e) { return e.other_rank > 0 ? std::to_string(e.other_rank) : "-"; }
std::string tier_text(const PlanEvaluation& e) { return e.tier > 0 ? std::to_string(e.tier) : "-"; }

// "AG all-gather, RS reduce-scatter, ...": the short names of the step table's columns.
std::string collective_legend() {
  std::string out;
  for (CollKind k : kCollKindNames.values())
    out += (out.empty() ? "" : ", ") + std::string(collective(k).short_name) + " " + kCollKindNames.prose(k);
  return out;
}

// The purpose and axis of the collective compute waited for longest ("backward_gather x"), or "-".
std::string most_exposed(const StepProjection& p) {
  double worst = 0;
  std::string out = "-";
  for (int u = 0; u < kPurposeCount; ++u)
    for (int a = 0; a < 2; ++a)
      if (p.exposed_purpose_axis_s[u][a] > worst)
        worst = p.exposed_purpose_axis_s[u][a], out = std::string(purpose_name(Purpose(u))) + (a ? " x" : " in");
  return out;
}

// The step objective's table: projected step time, MFU, where it goes (compute, exposed collectives per kind and
// axis, the purpose waited for longest, host), memory, the paper's communication and the rank by it.
void print_step_table(const std::vector<const PlanEvaluation*>& rows, const View& v) {
  const bool both = v.paper && v.shared;
  std::vector<std::string> head = {"rank", "plan", "(s0_p,s1_p | s0_g,s1_g | s0_os,s1_os)", "tier", "step", "mfu",
                                   "compute"};
  for (CollKind k : kCollKindNames.values())
    head.insert(head.end(),
                {collective(k).short_name + std::string(" in"), collective(k).short_name + std::string(" x")});
  head.insert(head.end(), {"host", "most exposed", "need", "comm"});
  if (both) head.push_back("comm_shared");
  head.insert(head.end(), {"comm rank", "vs best / why"});
  TextTable t = plan_table(head);
  for (const auto* e : rows) {
    t.row();
    t.add(e->rank > 0 ? std::to_string(e->rank) : "-").add(e->label()).add(e->plan.tuple_string());
    t.add(tier_text(*e)).add(fixed(e->step.step_s, 3)).add(fixed(100 * mfu(*e, v), 1) + "%").add(fixed(e->step.compute_s(), 3));
    for (int k = 0; k < kCollKindCount; ++k)
      for (int a = 0; a < 2; ++a) t.add(fixed(e->step.exposed_kind_axis_s[k][a], 3));
    t.add(fixed(e->step.fixed_s, 3));
    t.add(most_exposed(e->step));
    t.add(fixed(e->memory.required_bytes() / kGiB, 1));
    t.add(fixed(e->comm(v.rank_by).total_s(), 3));
    if (both) t.add(fixed(e->shared.total_s(), 3));
    t.add(other_rank_text(*e));
    t.add(e->why);
  }
  t.print(std::cout);
}

void print_table(const std::vector<const PlanEvaluation*>& rows, const View& v) {
  std::vector<std::string> head = {"rank", "plan", "(s0_p,s1_p | s0_g,s1_g | s0_os,s1_os)", "tier", "states", "act",
                                   "buf",  "total", "need"};
  if (v.paper) head.insert(head.end(), {"T_p", "T_g", "T_os0", "T_os1", "comm"});
  if (v.shared) head.insert(head.end(), {v.paper ? "shared" : "T_p", "T_g", "T_os0", "T_os1", "comm"});
  if (v.shared && v.paper) head.resize(head.size() - 4), head.back() = "comm_shared";
  if (v.objective == Objective::comm) head.insert(head.end(), {"step", "step rank"});
  head.push_back("vs best / why");
  TextTable t = plan_table(head);
  auto terms = [&](const CommTimeBreakdown& b) {
    t.add(fixed(b.param_s, 3)).add(fixed(b.grad_s, 3)).add(fixed(b.os_sync_s, 3)).add(fixed(b.os_bcast_s, 3));
    t.add(fixed(b.total_s(), 3));
  };
  for (const auto* e : rows) {
    t.row();
    t.add(e->rank > 0 ? std::to_string(e->rank) : "-").add(e->label()).add(e->plan.tuple_string());
    t.add(tier_text(*e)).add(fixed(e->memory.state_bytes / kGiB, 1)).add(fixed(e->memory.activation_bytes / kGiB, 1));
    t.add(fixed(e->memory.buffer_bytes / kGiB, 1)).add(fixed(e->memory.total_bytes / kGiB, 1));
    t.add(fixed(e->memory.required_bytes() / kGiB, 1));
    if (v.paper) terms(e->isolated);
    if (v.shared && v.paper) {
      t.add(fixed(e->shared.total_s(), 3));
    } else if (v.shared) {
      terms(e->shared);
    }
    if (v.objective == Objective::comm) {
      t.add(e->projected ? fixed(e->step.step_s, 3) : "-");
      t.add(other_rank_text(*e));
    }
    t.add(e->why);
  }
  t.print(std::cout);
}

void print_plan_detail(const char* title, const PlanEvaluation& e, const View& v) {
  const auto& m = e.memory;
  std::printf("%s: %s  %s  [%s engine, %s optimizer states]\n", title, e.label().c_str(), e.plan.tuple_string().c_str(),
              engine_name(e.plan.engine), os_layout_name(e.plan.os_layout));
  std::printf("  runs micro-batch %d x M = %d micro-batches, recomputation %s\n", e.micro_batch_size, e.micro_batches,
              recompute_name(e.recompute));
  std::printf(
      "  memory per GPU: states %s (P %s + G %s + OS %s; closed form %s), activations %s, buffers %s, "
      "total %s\n",
      format_bytes(m.state_bytes).c_str(), format_bytes(m.p_bytes).c_str(), format_bytes(m.g_bytes).c_str(),
      format_bytes(m.os_bytes).c_str(), format_bytes(m.closed_form_state_bytes).c_str(),
      format_bytes(m.activation_bytes).c_str(), format_bytes(m.buffer_bytes).c_str(),
      format_bytes(m.total_bytes).c_str());
  std::printf("  reserve: %s (CUDA context, cuBLAS workspace, %d NCCL communicators, fragmentation); needs %s\n",
              format_bytes(m.reserve_bytes).c_str(), m.communicators, format_bytes(m.required_bytes()).c_str());
  if (!e.feasible)
    std::printf("  does not fit: %s\n", e.infeasible_reason.c_str());
  else if (m.required_bytes() > 0.95 * v.gpu_mem_bytes)
    std::printf("  fits within 5%% of the %s limit: the verdict depends on the reserve's assumptions (fragmentation "
                "and NCCL buffers; --reserve-*, docs/cost-model.md)\n",
                format_bytes(v.gpu_mem_bytes).c_str());
  auto comm = [&](const char* name, const CommTimeBreakdown& b) {
    std::printf("  comm per step (%s pricing): %s = T_p %s + T_g %s + T_os0 %s + T_os1 %s\n", name,
                format_seconds(b.total_s()).c_str(), format_seconds(b.param_s).c_str(),
                format_seconds(b.grad_s).c_str(), format_seconds(b.os_sync_s).c_str(),
                format_seconds(b.os_bcast_s).c_str());
  };
  if (e.projected)
    std::printf(
        "  projected step (overlap %s): %s, MFU %.1f%% = compute %s + compute lost to contention %s + exposed "
        "communication %s + device idle for the host %s + host fixed %s\n",
        overlap_name(v.overlap), format_seconds(e.step.step_s).c_str(), 100 * mfu(e, v),
        format_seconds(e.step.compute_s()).c_str(), format_seconds(e.step.contention_compute_s).c_str(),
        format_seconds(e.step.exposed_comm_s).c_str(), format_seconds(e.step.host_stall_s).c_str(),
        format_seconds(e.step.fixed_s).c_str());
  if (v.paper) comm("paper", e.isolated);
  if (v.shared) comm("shared-link", e.shared);
  std::printf("  bytes per GPU per step: %s inside nodes, %s across nodes\n",
              format_bytes(e.intra_message_bytes).c_str(), format_bytes(e.inter_message_bytes).c_str());
  if (e.isolated.fallback_ops > 0)
    std::printf("  %lld of %lld collectives priced by the network model%s (op and mesh not in the profile)\n",
                static_cast<long long>(e.isolated.fallback_ops), static_cast<long long>(e.isolated.ops),
                v.priced_by_fit ? ", its link terms fitted to the measurements" : "");
}

// --explain: where the projected step time of `a` (the chosen plan) goes, beside `b` (the runner-up; may be null):
// compute, the exposed wait for each purpose of collective on each axis, those waits per kind, the host; they add up
// to the step.
void print_step_breakdown(const PlanEvaluation& a, const PlanEvaluation* b, const View& v, const char* a_title,
                          const EngineOptions& engine) {
  std::printf("\nwhere the projected step goes (seconds per step; exposed = compute waiting for the collective):\n");
  std::vector<std::string> head = {"", "part of the step", a_title + std::string(" ") + a.label()};
  if (b) head.push_back("runner-up " + b->label());
  TextTable t = plan_table(head);
  auto row = [&](const std::string& name, double x, double y) {
    t.row().add("").add(name).add(fixed(x, 4));
    if (b) t.add(fixed(y, 4));
  };
  const StepProjection none;
  const StepProjection& q = b ? b->step : none;
  row("compute: forward", a.step.forward_s, q.forward_s);
  row("compute: backward", a.step.backward_s, q.backward_s);
  row("compute: optimizer", a.step.optimizer_s, q.optimizer_s);
  for (int p = 0; p < kPurposeCount; ++p)
    for (int x = 0; x < 2; ++x) {
      const double ea = a.step.exposed_purpose_axis_s[p][x], eb = q.exposed_purpose_axis_s[p][x];
      if (ea > 0 || eb > 0)
        row(std::string("  exposed ") + purpose_name(Purpose(p)) + (x ? " (inter-node)" : " (intra-node)"), ea, eb);
    }
  for (CollKind k : kCollKindNames.values())
    row(std::string("exposed ") + collective(k).plural, a.step.exposed_s(k), q.exposed_s(k));
  row("compute lost beside collectives (contention)", a.step.contention_compute_s, q.contention_compute_s);
  row("host: the device idle for the host", a.step.host_stall_s, q.host_stall_s);
  row("host (fixed per step)", a.step.fixed_s, q.fixed_s);
  row("step", a.step.step_s, q.step_s);
  // Where contention stretched the collectives: inside the exposed rows above, where compute waited for them.
  for (int p = 0; p < kPurposeCount; ++p) {
    const double ca = a.step.contention_purpose_s[p], cb = q.contention_purpose_s[p];
    if (ca > 5e-5 || cb > 5e-5)
      row(std::string("  (collective time lost to contention: ") + purpose_name(Purpose(p)) + ")", ca, cb);
  }
  t.row().add("").add("MFU").add(fixed(100 * mfu(a, v), 1) + "%");
  if (b) t.add(fixed(100 * mfu(*b, v), 1) + "%");
  t.print(std::cout);
  // The sum, term by term: compute + compute lost to contention + exposed communication + the device idle for the
  // host + the host's fixed cost is the step, to the rounding of the numbers shown.
  const StepProjection& p = a.step;
  std::printf("  %s: compute %s + contention %s + exposed communication %s + host stall %s + host fixed %s = %s "
              "(step %s)\n",
              a.label().c_str(), fixed(p.compute_s(), 4).c_str(), fixed(p.contention_compute_s, 4).c_str(),
              fixed(p.exposed_comm_s, 4).c_str(), fixed(p.host_stall_s, 4).c_str(), fixed(p.fixed_s, 4).c_str(),
              fixed(p.compute_s() + p.contention_compute_s + p.exposed_comm_s + p.host_stall_s + p.fixed_s, 4).c_str(),
              fixed(p.step_s, 4).c_str());
  // The exposed wait that costs the plan most, and the setting behind it where a default decides it.
  double worst = 0;
  int wk = -1, wa = -1;
  for (int k = 0; k < kCollKindCount; ++k)
    for (int x = 0; x < 2; ++x)
      if (p.exposed_kind_axis_s[k][x] > worst) worst = p.exposed_kind_axis_s[k][x], wk = k, wa = x;
  if (wk >= 0) {
    const std::string setting = exposed_setting(a.plan, CollKind(wk), engine);
    std::printf("  its largest exposed wait: %s %s, %s%s\n", wa ? "inter-node" : "intra-node",
                kCollKindNames.prose(CollKind(wk)), format_seconds(worst).c_str(),
                setting.empty() ? " (no engine setting of lins decides it)" : ("; " + setting).c_str());
  }
  if (b && !b->why.empty()) std::printf("  the runner-up %s: %s\n", b->label().c_str(), b->why.c_str());
}

// The schedule grouped by (phase, term, kind, group role, mesh): ops, message bytes and time per step.
void print_explain(const Schedule& s, const CostModel& cost, const View& v) {
  struct Row {
    int64_t ops = 0;
    double bytes = 0, paper_s = 0, shared_s = 0;
    int64_t min_bytes = INT64_MAX, max_bytes = 0;
    std::string choice;  // the network model's choice for the largest message (NCCL's algorithm/protocol)
  };
  using Key = std::tuple<int, int, int, int, int, int>;
  std::map<Key, Row> rows;
  double axis_bytes[4][2] = {};
  for (const auto& op : s.ops) {
    auto& r = rows[Key{int(op.phase), int(op.term), int(op.kind), int(op.role), op.mesh.intra, op.mesh.inter}];
    r.ops += op.repeat;
    r.bytes += double(op.bytes()) * op.repeat;
    const bool largest = op.bytes() >= r.max_bytes;
    r.min_bytes = std::min(r.min_bytes, op.bytes());
    r.max_bytes = std::max(r.max_bytes, op.bytes());
    r.paper_s += cost.op_time_s(op, s.topo, Pricing::paper_isolated) * op.repeat;
    r.shared_s += cost.op_time_s(op, s.topo, Pricing::shared_links) * op.repeat;
    if (cost.network_model().makes_choices() && largest && !(cost.profile() && cost.profile()->has(op.kind, op.mesh)))
      r.choice = cost.network_model().choice(op.kind, double(op.bytes()), op.mesh, 1);
    axis_bytes[int(op.phase)][int(op.axis())] += double(op.bytes()) * op.repeat;
  }
  std::printf("\nschedule of %s on %s (rank 0; M = %d, bucket %s, %s on the wire; %lld collectives per step):\n",
              s.plan.to_string().c_str(), s.topo.to_string().c_str(), s.options.micro_batches,
              format_bytes(double(s.options.bucket_bytes)).c_str(), dtype_name(s.options.dtype),
              static_cast<long long>(s.op_count()));
  using Align = TextTable::Align;
  std::vector<TextTable::Column> columns = {{.header = "phase", .width = 12},
                                            {.header = "term", .width = 8},
                                            {.header = "collective", .width = 14},
                                            {.header = "group", .width = 10},
                                            {.header = "mesh", .width = 7},
                                            {.header = "axis", .width = 5},
                                            {.header = "ops", .align = Align::right, .width = 7},
                                            {.header = "message bytes each", .width = 25},
                                            {.header = "bytes/step", .align = Align::right, .width = 11}};
  if (v.paper) columns.push_back({.header = "paper", .align = Align::right, .width = 10});
  if (v.shared) columns.push_back({.header = "shared", .align = Align::right, .width = 10});
  // The network model's choice for the largest op of each row, where it makes one (NCCL's algorithm and protocol).
  const bool choices = cost.network_model().makes_choices();
  if (choices) columns.push_back({.header = "model's choice (largest)", .gap = "  "});
  TextTable t(std::move(columns), "  ");
  for (const auto& [k, r] : rows) {
    const auto [phase, term, kind, role, intra, inter] = k;
    const Mesh mesh{intra, inter};
    std::string each = format_bytes(double(r.min_bytes));
    if (r.max_bytes != r.min_bytes) each += " .. " + format_bytes(double(r.max_bytes));
    t.row().add(phase_name(Phase(phase))).add(term_name(Term(term))).add(coll_kind_name(CollKind(kind)));
    t.add(group_role_name(GroupRole(role))).add(mesh.to_string()).add(inter > 1 ? "inter" : "intra");
    t.add(std::to_string(r.ops)).add(each).add(format_bytes(r.bytes));
    if (v.paper) t.add(format_seconds(r.paper_s));
    if (v.shared) t.add(format_seconds(r.shared_s));
    if (choices) t.add(r.choice.empty() ? "profile" : r.choice);
  }
  t.print(std::cout);
  std::printf("  bytes per phase and axis (per GPU per step):\n");
  for (int p = 0; p < 4; ++p)
    if (axis_bytes[p][0] + axis_bytes[p][1] > 0)
      std::printf("    %-12s intra %-12s inter %s\n", phase_name(Phase(p)), format_bytes(axis_bytes[p][0]).c_str(),
                  format_bytes(axis_bytes[p][1]).c_str());
}

// Everything `lins plan` takes from its options.
struct PlanOptions {
  Workload work;
  Topology topo;
  std::optional<CostModel> cost;
  GpuAssumption gpu;  // peak, HBM rate and memory, each with where it comes from
  PlannerOptions planner;
  View view;
  int top = 10;
  std::string plan;  // --plan, evaluated alone; empty (or "lins"): search every plan
  bool explain = false;
  std::string csv;  // --csv; empty: none
  std::string inputs;  // which inputs are assumed, given and measured (inputs.h)
};

// --pricing: paper or shared show and rank by that pricing alone; both ranks by paper and shows both.
Result<View> read_view(const ParsedArgs& args) {
  View view;
  if (args.get("pricing") == "both") return view;
  LINS_ASSIGN_OR_RETURN(auto pricing, args.get_enum("pricing", kPricingNames, {"both"}));
  switch (pricing) {
    case Pricing::paper_isolated:
      view.shared = false;
      break;
    case Pricing::shared_links:
      view.paper = false;
      break;
  }
  view.rank_by = pricing;
  return view;
}

Result<PlanOptions> read_plan_options(const ParsedArgs& args) {
  PlanOptions o;
  LINS_ASSIGN_OR_RETURN(auto model, parse_model(args));
  LINS_ASSIGN_OR_RETURN(o.topo, parse_topology(args, 0));
  LINS_ASSIGN_OR_RETURN(o.work, parse_workload(args, model, o.topo));
  LINS_ASSIGN_OR_RETURN(auto bucket, parse_bucket(args));
  LINS_ASSIGN_OR_RETURN(o.top, args.get_positive_int("top"));
  LINS_ASSIGN_OR_RETURN(o.view, read_view(args));
  LINS_ASSIGN_OR_RETURN(const NetworkSpec net, parse_network(args));
  LINS_ASSIGN_OR_RETURN(o.cost, parse_cost_model(args, net, o.topo.gpus_per_node));
  LINS_ASSIGN_OR_RETURN(o.gpu, parse_gpu_assumption(args, net));
  LINS_ASSIGN_OR_RETURN(auto reserve, parse_memory_reserve(args));
  LINS_ASSIGN_OR_RETURN(auto objective, args.get_enum("objective", kObjectiveNames));
  LINS_ASSIGN_OR_RETURN(auto overlap, args.get_enum("overlap", kOverlapNames));
  LINS_ASSIGN_OR_RETURN(auto compute, parse_compute_model(args, o.gpu.peak_tflops, o.gpu.hbm_gbps, o.gpu.compute_capability));
  LINS_ASSIGN_OR_RETURN(auto engine, parse_engine_options(args));
  o.view.objective = objective;
  o.view.overlap = overlap;
  o.view.priced_by_fit = o.cost->priced_by_fit();
  o.view.gpu_mem_bytes = o.gpu.mem_bytes;
  o.view.peak_flops = o.gpu.peak_tflops * 1e12;
  o.view.flops_per_step =
      o.work.model.flops_per_token(o.work.seq) * double(o.work.global_batch_tokens) / double(o.topo.world());
  o.planner.objective = objective;
  o.planner.rank_both = true;  // the table shows each plan's rank under the other objective
  o.planner.overlap = overlap;
  o.planner.compute = std::move(compute);
  o.planner.engine = engine;
  LINS_ASSIGN_OR_RETURN(o.planner.host, parse_host_model(args));
  o.planner.gpu_mem_bytes = o.gpu.mem_bytes;
  o.planner.bucket_bytes = bucket;
  o.planner.rank_by = o.view.rank_by;
  o.planner.include_baselines = !args.flag("no-baselines");
  o.planner.reserve = reserve;
  o.planner.threads = available_cores();
  LINS_ASSIGN_OR_RETURN(o.planner.tie, parse_tie(args));
  o.inputs = inputs_line(args, *o.cost, o.planner.compute, o.gpu, o.planner.host ? &*o.planner.host : nullptr);
  if (args.has("plan") && args.get("plan") != "lins") o.plan = args.get("plan");
  o.explain = args.flag("explain");
  o.csv = args.get("csv");
  return o;
}

const char* ranking_words(Pricing p) {
  switch (p) {
    case Pricing::paper_isolated:
      return "the paper's isolated";
    case Pricing::shared_links:
      return "shared-link";
  }
  return "?";
}

// What is planned, on what, under which assumptions.
void print_plan_header(const PlanOptions& o) {
  const Workload& w = o.work;
  const CostModel& cost = *o.cost;
  std::printf("lins plan: %s (%s parameters) on %d GPUs/node x %d nodes = %d GPUs\n", w.model.name.c_str(),
              fixed(double(w.model.param_count()) / 1e9, 2).append(" B").c_str(), o.topo.gpus_per_node, o.topo.nodes,
              o.topo.world());
  const std::string micro_batch = w.micro_batch_fixed
                                      ? "micro-batch " + std::to_string(w.micro_batch_size) +
                                            ", M = " + std::to_string(w.micro_batches) + " micro-batches"
                                      : "micro-batch searched (1, 2, 4, ... keeping the batch)";
  std::printf("  workload: seq %d, %s, %lld tokens per step, recomputation %s\n", w.seq, micro_batch.c_str(),
              static_cast<long long>(w.global_batch_tokens),
              w.recompute_fixed ? recompute_name(w.recompute) : "searched (none, selective, full)");
  const BandwidthProfile* profile = cost.profile();
  std::printf("  network: %s (%s), priced by the %s\n", cost.network().name.c_str(), cost.network().description.c_str(),
              cost.model_description().c_str());
  if (profile)
    std::printf("  measured first: %s (%zu measurements)\n", profile->source().c_str(), profile->point_count());
  if (const LinkFit* fit = cost.link_fit())
    for (const auto& line : link_fit_lines(*fit, cost.priced_by_fit())) std::printf("%s\n", line.c_str());
  if (profile)
    for (const auto& note : profile->notes()) std::fprintf(stderr, "lins plan: %s\n", note.c_str());
  for (const auto& w : cost.warnings()) std::fprintf(stderr, "lins plan: warning: %s\n", w.c_str());
  for (const auto& w : o.gpu.warnings) std::fprintf(stderr, "lins plan: warning: %s\n", w.c_str());
  std::printf("  memory limit %s per GPU (%s), reserve included; bucket %s; communication priced by %s pricing\n",
              format_bytes(o.planner.gpu_mem_bytes).c_str(), o.gpu.mem_from.c_str(),
              format_bytes(double(o.planner.bucket_bytes)).c_str(), ranking_words(o.view.rank_by));
  std::printf("  compute: %s, peak %g TFLOP/s for MFU (%s)\n",
              compute_description(o.planner.compute, o.gpu.hbm_from).c_str(), o.view.peak_flops / 1e12,
              o.gpu.peak_from.c_str());
  if (o.planner.host)
    std::printf("  host side: %s, %s (--host-model; off: the device schedule alone)\n",
                host_model_name(&*o.planner.host).c_str(),
                std::string(kHostEraNames.help(o.planner.host->era)).c_str());
  else
    std::printf("  host side: off, the device schedule alone (--host-model)\n");
  std::printf("  %s\n", o.inputs.c_str());
  std::printf("  ranked by %s (--objective %s); steps projected with overlap %s\n",
              o.view.objective == Objective::step
                  ? "projected step time: the step program of each plan's engine timed as lins simulate times it"
                  : "the paper's summed communication time T_p + T_g + T_os0 + T_os1",
              objective_name(o.view.objective), overlap_name(o.view.overlap));
}

// --plan: that plan alone, with its details.
Result<PlanSearch> evaluate_given_plan(const PlanOptions& o) {
  auto plan = parse_run_plan(o.plan, o.topo, o.planner.engine);
  if (!plan) return make_error("--plan: " + plan.error());
  LINS_ASSIGN_OR_RETURN(auto e, evaluate_plan(o.work, o.topo, *plan, *o.cost, o.planner));
  const EngineOptions engine = o.planner.scheduled_engine();
  PlanSearch search = rank_plans({e}, o.view.rank_by, o.view.objective, o.planner.tie, &engine);
  if (search.best < 0 && search.plans[0].feasible) search.best = 0;
  std::printf("\n");
  print_plan_detail("plan", search.plans[0], o.view);
  return search;
}

// Who runs a plan today: its engine's real system, or none for the Lins engine.
std::string runs_in(const Plan& plan) {
  return plan.engine == Engine::lins ? "the Lins engine, which no framework runs today"
                                     : std::string(kEngineNames.help(plan.engine));
}

// The plan to run: within tier 1, one PyTorch or DeepSpeed runs (a baseline) before the fastest 6-tuple, whose
// difference the projection cannot tell from its error.
void print_recommendation(const PlanSearch& search, const View& v) {
  const PlanEvaluation* r = search.recommendation();
  const PlanEvaluation* c = search.chosen();
  if (!r || !c || v.objective != Objective::step) return;
  const double tc = c->step.step_s;
  auto slower = [&](const PlanEvaluation& e) { return fixed(tc > 0 ? 100 * (e.step.step_s - tc) / tc : 0, 1) + "%"; };
  int tier1 = 0;
  for (const auto& e : search.plans) tier1 += e.tier == 1;
  std::printf("recommended: %s on %s (tier 1: %d plans within %g%% of the fastest, --tie; ", r->label().c_str(),
              runs_in(r->plan).c_str(), tier1, 100 * search.tie);
  if (r != c) {
    std::printf("%s slower than the fastest, %s on %s)\n", slower(*r).c_str(), c->label().c_str(),
                runs_in(c->plan).c_str());
  } else if (r->baseline) {
    std::printf("the fastest)\n");
  } else {
    // No plan a framework runs is in tier 1: say how far the best of them is.
    std::printf("the fastest; no plan a framework runs is in tier 1)\n");
    for (const auto& e : search.plans)
      if (e.feasible && e.baseline) {
        std::printf("  the fastest plan a framework runs: %s on %s (tier %d, %s slower)\n", e.label().c_str(),
                    runs_in(e.plan).c_str(), e.tier, slower(e).c_str());
        break;
      }
  }
}

// Every legal plan (and the baselines): the chosen one's details, the top of the ranking, the baselines' places.
Result<PlanSearch> search_every_plan(const PlanOptions& o) {
  LINS_ASSIGN_OR_RETURN(PlanSearch search, search_plans(o.work, o.topo, *o.cost, o.planner));
  int fit = 0;
  for (const auto& e : search.plans) fit += e.feasible;
  std::printf("  searched %d legal plans%s: %d fit, %d do not\n\n", search.legal_count,
              o.planner.include_baselines
                  ? (" and " + std::to_string(baseline_plans(o.topo).size()) + " baselines").c_str()
                  : "",
              fit, int(search.plans.size()) - fit);
  if (search.chosen()) {
    print_plan_detail("chosen plan", *search.chosen(), o.view);
    print_recommendation(search, o.view);
  } else {
    std::printf("no legal plan fits in %s per GPU\n", format_bytes(o.planner.gpu_mem_bytes).c_str());
  }
  std::vector<const PlanEvaluation*> rows, baselines;
  int shown = 0;
  const bool step = o.view.objective == Objective::step;
  for (const auto& e : search.plans) {
    // Under the step objective the baselines are ranked with the 6-tuples; they are listed again below either way.
    if (e.baseline && !step) {
      baselines.push_back(&e);
    } else if (shown < o.top) {
      rows.push_back(&e);
      ++shown;
    }
    if (e.baseline && step) baselines.push_back(&e);
  }
  const auto table = [&](const std::vector<const PlanEvaluation*>& r) {
    step ? print_step_table(r, o.view) : print_table(r, o.view);
  };
  std::printf("\nranked plans (top %d of %zu; times in seconds per step, memory in GiB per GPU, need = total + reserve",
              shown, search.plans.size());
  if (step)
    std::printf(
        ";\nexposed time compute waited for each kind of collective, inside a node (in) or across nodes (x): "
        "%s; most exposed = the purpose compute waited for longest; comm = the paper's objective",
        collective_legend().c_str());
  std::printf("):\n");
  table(rows);
  if (!baselines.empty()) {
    std::printf("\nbaselines on their own engines (rank among all plans):\n");
    table(baselines);
  }
  return search;
}

// --explain: where the chosen (or given) plan's projected step goes beside the runner-up's, then its schedule.
Status explain_schedule(const PlanOptions& o, const PlanSearch& search) {
  const PlanEvaluation* e = search.best >= 0 ? &search.plans[search.best] : &search.plans[0];
  const EngineOptions engine = o.planner.scheduled_engine();
  if (e->projected)
    print_step_breakdown(*e, search.runner_up(), o.view, o.plan.empty() ? "chosen" : "plan", engine);
  LINS_ASSIGN_OR_RETURN(auto s,
                        build_schedule(o.work.model, e->plan, o.topo,
                                       schedule_options(e->micro_batches, o.planner.bucket_bytes, o.planner.dtype,
                                                        o.planner.engine, o.planner.overlap, /*expand=*/false)));
  print_explain(s, *o.cost, o.view);
  return Status::ok_status();
}

// One row of the plan CSV, filled by column name (plan_csv_columns() has the order).
std::vector<std::string> plan_csv_row(const PlanOptions& o, const PlanSearch& search, const PlanEvaluation& e) {
  const Workload& w = o.work;
  const CostModel& cost = *o.cost;
  const auto& m = e.memory;
  PlanRow row;
  row.set("model", w.model.name).set("params", w.model.param_count());
  row.set("gpus_per_node", o.topo.gpus_per_node).set("nodes", o.topo.nodes);
  row.set("seq", w.seq).set("micro_batch_size", e.micro_batch_size).set("micro_batches", e.micro_batches);
  row.set("recompute", std::string(recompute_column(e.recompute))).set("network", cost.network().name);
  row.set("profile", cost.profile() ? cost.profile()->source() : "");
  row.set("gpu_mem_bytes", (o.planner.gpu_mem_bytes)).set("bucket_bytes", o.planner.bucket_bytes);
  row.set("name", e.label()).set("plan", e.plan.to_string()).set("engine", engine_name(e.plan.engine));
  row.set("baseline", e.baseline);
  row.set("s0_p", e.plan.p.intra).set("s1_p", e.plan.p.inter).set("s0_g", e.plan.g.intra);
  row.set("s1_g", e.plan.g.inter).set("s0_os", e.plan.os.intra).set("s1_os", e.plan.os.inter);
  row.set("os_layout", os_layout_name(e.plan.os_layout));
  row.set("p_bytes", (m.p_bytes)).set("g_bytes", (m.g_bytes)).set("os_bytes", (m.os_bytes));
  row.set("state_bytes", (m.state_bytes)).set("closed_form_state_bytes", (m.closed_form_state_bytes));
  row.set("activation_bytes", (m.activation_bytes)).set("buffer_bytes", (m.buffer_bytes));
  row.set("total_bytes", (m.total_bytes)).set("reserve_bytes", (m.reserve_bytes));
  row.set("intra_bytes", (e.intra_message_bytes)).set("inter_bytes", (e.inter_message_bytes));
  // The summed communication under each pricing: "comm_*" the paper's, "shared_comm_*" with shared links.
  for (const auto& [prefix, c] : {std::pair{"comm_", &e.isolated}, std::pair{"shared_comm_", &e.shared}}) {
    const std::string p = prefix;
    row.set(p + "param_s", (c->param_s)).set(p + "grad_s", (c->grad_s));
    row.set(p + "os_sync_s", (c->os_sync_s)).set(p + "os_bcast_s", (c->os_bcast_s));
    row.set(p.substr(0, p.size() - 1) + "_s", (c->total_s()));
  }
  row.set("fallback_ops", e.isolated.fallback_ops).set("ranked_by", pricing_name(search.rank_by));
  row.set("rank", e.rank).set("feasible", e.feasible).set("why", e.why);
  row.set("network_model", network_model_name(cost.model()));
  row.set("objective", objective_name(search.objective)).set("other_rank", e.other_rank);
  row.set("tier", e.tier).set("recommended", &e == search.recommendation());
  // The projection (empty when the plan was not projected).
  if (e.projected) {
    const StepProjection& p = e.step;
    row.set("projected_step_s", (p.step_s)).set("projected_mfu", (mfu(e, o.view)));
    row.set("forward_s", (p.forward_s)).set("backward_s", (p.backward_s));
    row.set("optimizer_s", (p.optimizer_s)).set("host_s", (p.fixed_s));
    row.set("exposed_comm_s", (p.exposed_comm_s));
    row.set("contention_compute_s", p.contention_compute_s).set("host_stall_s", p.host_stall_s);
    for (CollKind k : kCollKindNames.values())
      for (Axis x : kAxisNames.values())
        row.set("exposed_" + std::string(coll_kind_name(k)) + "_" + axis_name(x) + "_s",
                (p.exposed_kind_axis_s[int(k)][int(x)]));
    for (int u = 0; u < kPurposeCount; ++u)
      for (Axis x : kAxisNames.values())
        row.set("exposed_" + std::string(purpose_name(Purpose(u))) + "_" + axis_name(x) + "_s",
                (p.exposed_purpose_axis_s[u][int(x)]));
  }
  return row.ordered();
}

int fail(const std::string& msg) {
  std::fprintf(stderr, "lins plan: %s\n", msg.c_str());
  return 2;
}

// --csv: one row per plan; the finished file appears only when every row is in. The exit code: 0 written, 2 the
// file cannot be opened, 1 a write failed.
int write_plan_csv(const PlanOptions& o, const PlanSearch& search) {
  auto csv = CsvWriter::open(o.csv, plan_csv_columns());
  if (!csv) return fail("--csv: " + csv.error());
  Status st;
  for (const auto& e : search.plans)
    if (st) st = csv->write_row(plan_csv_row(o, search, e));
  if (st) st = csv->finish();
  if (!st) {
    std::fprintf(stderr, "lins plan: %s\n", st.error().c_str());
    return 1;
  }
  std::printf("\nwrote %zu plans to %s\n", search.plans.size(), o.csv.c_str());
  return 0;
}

// Exit 1, saying what the smallest plan needs, when no plan fits.
int fit_verdict(const PlanOptions& o, const PlanSearch& search) {
  if (search.best >= 0 || (search.plans.size() == 1 && search.plans[0].feasible)) return 0;
  // What could make a plan fit: only the levers this workload still has.
  std::string levers = "raise --gpu-mem";
  if (o.work.recompute_fixed && o.work.recompute != Recompute::full)
    levers += ", use --recompute-mode full (or selective)";
  if (o.work.micro_batch_fixed && o.work.micro_batch_size > 1) levers += ", or shrink --micro-batch";
  std::fprintf(stderr, "lins plan: no plan fits in %s per GPU; the smallest needs %s (%s)\n",
               format_bytes(o.planner.gpu_mem_bytes).c_str(),
               search.plans.empty() ? "?" : format_bytes(search.plans[0].memory.required_bytes()).c_str(),
               levers.c_str());
  return 1;
}

}  // namespace

int run_plan(const Args& argv) {
  const CommandSpec spec = plan_spec();
  auto args = parse_args(spec, argv);
  if (!args) return fail(args.error());
  if (args->flag("help")) {
    std::printf("%s", help_text(spec).c_str());
    return 0;
  }
  if (!args->positional().empty())
    return fail("unexpected argument '" + args->positional()[0] + "'; see lins plan --help");
  auto opt = read_plan_options(*args);
  if (!opt) return fail(opt.error());
  if (!opt->csv.empty())
    if (auto s = check_output_file("--csv", opt->csv); !s) return fail(s.error());

  print_plan_header(*opt);
  auto search = opt->plan.empty() ? search_every_plan(*opt) : evaluate_given_plan(*opt);
  if (!search) return fail(search.error());
  if (opt->explain)
    if (auto s = explain_schedule(*opt, *search); !s) return fail(s.error());
  if (!opt->csv.empty())
    if (int code = write_plan_csv(*opt, *search); code != 0) return code;
  return fit_verdict(*opt, *search);
}

}  // namespace lins
