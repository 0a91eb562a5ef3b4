// `lins simulate`: projects the step of each (model, GPU count, strategy, overlap mode) onto clusters we do not have:
// the same Schedule the executor runs, priced by the cost model, compute from FLOPs at a sustained rate, overlap by
// the executor's rules (core/simulator.h). Writes the step CSV schema with source=projected, plus a provenance file
// stating every assumption.
#include <cctype>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <optional>
#include <set>
#include <sstream>

#include "apps/commands.h"
#include "core/cost/calibrate.h"
#include "core/cost/compute_model.h"
#include "core/cost/cost_options.h"
#include "core/cost/host_model.h"
#include "core/cost/inputs.h"
#include "core/cost/link_fit.h"
#include "core/output/results_schema.h"
#include "core/output/step_columns.h"
#include "core/output/text_table.h"
#include "core/projection/memory_model.h"
#include "core/projection/planner.h"
#include "core/projection/projection.h"
#include "core/projection/simulator.h"
#include "core/schedule/workload.h"
#include "core/util/csv.h"
#include "core/util/json.h"
#include "core/util/text.h"
#include "core/util/units.h"
#include "lins_git_commit.h"  // generated at build time

namespace lins {
namespace {

CommandSpec simulate_spec() {
  std::vector<OptionSpec> own = {
      {"gpus", 0, "LIST", "8,32,128,512,1024", "GPU counts to project (multiples of --gpus-per-node)"},
      {"strategies", 0, "LIST", "zero1,zero3,zeropp,mics,lins",
       "presets, 6-tuples (p=AxB,g=CxD,os=ExF) or lins (the planner's choice), comma-separated"},
      {"overlap", 0, "LIST", "all", "overlap modes (" + kOverlapNames.list() + "), comma-separated"},
      {"objective", 0, "NAME", "step",
       "how the planner chooses the plan of 'lins': " + kObjectiveNames.described() +
           " (step also weighs the baselines' presets on their own engines)"},
      bucket_option(),
      {"paper-recompute", 0, "", "",
       "recompute activations for llama-30b only, as the paper does (also with "
       "--recompute: every model)"},
      {"out", 'o', "FILE", "results/simulate/projection.csv", "CSV to write (a .json provenance file beside it)"},
      tie_option(
          "strategies whose projected steps on one cluster lie within this fraction of a tier's fastest share its "
          "tier (printed after each cluster's rows): the default, 0.2, is the worst error of the projection against "
          "measured steps the project reports (REPRODUCE.md, section 7)"),
      {"label", 0, "TEXT", "",
       "the label column of every row, which the figures show (default: the host model, the contention and "
       "--ds-overlap-comm, e.g. 'device' (overlap free), 'device contention=priors', 'host=paper contention=priors "
       "overlap_comm=off')"},
      {"trace", 0, "DIR", "",
       "write the projected step of every row as a Chrome trace (compute, waits, each stream's collectives) into DIR"},
  };
  auto opts = concat_options(model_options("llama-7b"), topology_options("8", ""));
  opts = concat_options(opts, workload_options("4096", "1", "4M"));
  opts = concat_options(opts, cost_options("paper-a800", "paper"));
  opts = concat_options(opts, gpu_options("plans that do not fit are written with feasible=0 (oom)"));
  opts = concat_options(opts, engine_options());
  opts = concat_options(opts, host_options());
  opts = concat_options(opts, memory_reserve_options());
  opts = concat_options(opts, compute_options());
  opts = concat_options(opts, own);
  for (auto& o : opts)
    if (o.name == "model") o.help = "model preset, or a comma-separated list of presets";
  return CommandSpec{
      "simulate", "Project the step time of each strategy to clusters you do not have (rows say 'projected').",
      "lins simulate [options]", opts,
      "example (the paper's Fig. 11-13 sweep):\n"
      "  lins simulate --model llama-7b,llama-13b,llama-30b --gpus 8,32,128,512,1024 --paper-recompute\n"
      "assumptions: each engine's streams and issue/wait points as the executor runs them, compute at a\n"
      "constant sustained rate, the optimizer memory bound; all of them are written to the provenance file."};
}

std::vector<std::string> split_list(const std::string& s) { return split(s, ',', /*keep_empty=*/false); }

std::string now_utc() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

int fail(const std::string& message) {
  std::fprintf(stderr, "lins simulate: %s\n", message.c_str());
  return 2;
}

// Everything `lins simulate` takes from its options (the workload is read again for each model and GPU count).
struct SimulateOptions {
  std::vector<ModelSpec> models;
  int gpus_per_node = 8;
  std::vector<int> gpu_counts;
  std::vector<std::string> strategies;
  std::vector<Overlap> overlaps;
  std::optional<CostModel> cost;
  MemoryReserve reserve;
  Pricing pricing = Pricing::paper_isolated;
  uint64_t gpu_mem = 0, bucket = 0;
  double peak_tflops = 0;
  GpuAssumption gpu;        // peak, HBM rate and memory, each with where it comes from
  bool peak_given = false;  // --peak-tflops given; else the network's GPU's datasheet peak
  ComputeModel compute;     // forward/backward rate (per engine when calibrated) and the optimizer's memory rate
  Objective objective = Objective::step;  // how the planner ranks plans for "lins"
  EngineOptions engine;
  std::optional<HostModel> host;  // --host-model
  std::string out_path, trace_dir;
  std::string label;  // --label, or made from the host model and overlap_comm
  double tie = kDefaultTie;  // --tie: strategies within it of a tier's fastest share the tier
  std::string inputs;  // which inputs are assumed, given and measured (inputs.h)
};

// --model: one (custom shapes allowed) or a list of presets.
Result<std::vector<ModelSpec>> read_models(const ParsedArgs& args) {
  std::vector<ModelSpec> models;
  const auto names = split_list(args.get("model"));
  if (names.size() <= 1) {
    LINS_ASSIGN_OR_RETURN(auto m, parse_model(args));
    models.push_back(m);
    return models;
  }
  for (const char* shape : {"hidden", "layers", "heads", "ffn", "vocab"})
    if (args.has(shape)) return make_error("--" + std::string(shape) + " needs a single --model, not a list");
  for (const auto& n : names) {
    LINS_ASSIGN_OR_RETURN(auto m, make_model_preset(n));
    models.push_back(m);
  }
  return models;
}

// --gpus-per-node, --gpus, --strategies, --overlap: what is projected.
Status read_sweep(const ParsedArgs& args, SimulateOptions& o) {
  LINS_ASSIGN_OR_RETURN(auto R, args.get_positive_int("gpus-per-node"));
  o.gpus_per_node = R;
  for (const auto& g : split_list(args.get("gpus"))) {
    LINS_ASSIGN_OR_RETURN(auto v, parse_positive_int(g, "--gpus"));
    if (v % R != 0) return make_error("--gpus " + g + " is not a multiple of --gpus-per-node " + std::to_string(R));
    o.gpu_counts.push_back(v);
  }
  if (args.has("nodes")) return make_error("--nodes is set by --gpus here; give the GPU counts with --gpus");
  o.strategies = split_plan_list(args.get("strategies"));
  if (o.strategies.empty() || o.gpu_counts.empty()) return make_error("--strategies and --gpus must not be empty");
  for (const auto& text : split_list(args.get("overlap"))) {
    LINS_ASSIGN_OR_RETURN(auto v, parse_overlap(text));
    o.overlaps.push_back(v);
  }
  return Status::ok_status();
}

// The GPU (the network's, or --gpu-mem, --peak-tflops, --hbm-gbps), --bucket and the compute model.
Status read_machine(const ParsedArgs& args, const NetworkSpec& net, SimulateOptions& o) {
  LINS_ASSIGN_OR_RETURN(o.gpu, parse_gpu_assumption(args, net));
  o.gpu_mem = static_cast<uint64_t>(o.gpu.mem_bytes);
  LINS_ASSIGN_OR_RETURN(auto bucket, parse_bucket(args));
  o.bucket = static_cast<uint64_t>(bucket);
  o.peak_tflops = o.gpu.peak_tflops;
  o.peak_given = args.has("peak-tflops");
  LINS_ASSIGN_OR_RETURN(o.compute, parse_compute_model(args, o.gpu.peak_tflops, o.gpu.hbm_gbps, o.gpu.compute_capability));
  return Status::ok_status();
}

Result<SimulateOptions> read_simulate_options(const ParsedArgs& args) {
  SimulateOptions o;
  LINS_ASSIGN_OR_RETURN(o.models, read_models(args));
  LINS_TRY(read_sweep(args, o));
  LINS_ASSIGN_OR_RETURN(const NetworkSpec net, parse_network(args));
  LINS_ASSIGN_OR_RETURN(o.cost, parse_cost_model(args, net, o.gpus_per_node));
  if (o.cost->profile())
    for (const auto& note : o.cost->profile()->notes()) std::fprintf(stderr, "lins simulate: %s\n", note.c_str());
  for (const auto& w : o.cost->warnings()) std::fprintf(stderr, "lins simulate: warning: %s\n", w.c_str());
  LINS_ASSIGN_OR_RETURN(o.reserve, parse_memory_reserve(args));
  LINS_ASSIGN_OR_RETURN(o.pricing, parse_pricing(args.get("pricing")));
  LINS_TRY(read_machine(args, net, o));
  for (const auto& w : o.gpu.warnings) std::fprintf(stderr, "lins simulate: warning: %s\n", w.c_str());
  LINS_ASSIGN_OR_RETURN(o.engine, parse_engine_options(args));
  LINS_ASSIGN_OR_RETURN(o.host, parse_host_model(args));
  LINS_ASSIGN_OR_RETURN(o.objective, args.get_enum("objective", kObjectiveNames));
  LINS_ASSIGN_OR_RETURN(o.tie, parse_tie(args));
  o.label = args.get("label");
  if (o.label.empty()) {
    o.label = o.host ? "host=" + host_model_name(&*o.host) : "device";
    if (o.host && o.host->device_in_host_thread) o.label += " device=cpu";
    // What overlap costs: priors (a network's published values) or measured (lins comm --contention); none: free.
    if (const Contention& c = o.cost->contention(); c.any())
      o.label += c.source.rfind("prior", 0) == 0 ? " contention=priors" : " contention=measured";
    if (o.engine.ds_overlap_comm) o.label += std::string(" overlap_comm=") + (*o.engine.ds_overlap_comm ? "on" : "off");
  }
  o.out_path = args.get("out");
  o.trace_dir = args.get("trace");
  o.inputs = inputs_line(args, *o.cost, o.compute, o.gpu, o.host ? &*o.host : nullptr);
  return o;
}

// --out (and the provenance file beside it) and --trace, before any projection.
Status check_outputs(const SimulateOptions& o) {
  if (auto s = check_output_file("--out", o.out_path); !s) return s;
  if (!o.trace_dir.empty())
    if (auto s = check_output_folder("--trace", o.trace_dir); !s) return s;
  return Status::ok_status();
}

// What every projection of this run assumes (the overlap mode is set per row).
ProjectionSetup projection_setup(const SimulateOptions& o) {
  ProjectionSetup setup;
  setup.cost = &*o.cost;
  setup.pricing = o.pricing;
  setup.compute = o.compute;
  setup.engine = o.engine;
  setup.bucket_bytes = static_cast<int64_t>(o.bucket);
  setup.reserve = o.reserve;
  setup.host = o.host ? &*o.host : nullptr;
  return setup;
}

// One strategy on one cluster: a preset or 6-tuple as given, or the planner's choice for "lins" (nullopt, said on
// stderr, when no plan fits). `run` receives the workload the strategy runs: the given one, or for "lins" the
// micro-batch size and recomputation the planner chose where the workload leaves them open.
Result<std::optional<Plan>> resolve_strategy(const SimulateOptions& o, const std::string& strategy,
                                             const Workload& workload, const Topology& topo, const PlannerOptions& popt,
                                             Workload& run) {
  run = workload;
  if (strategy != "lins") {
    auto p = parse_run_plan(strategy, topo, o.engine);
    if (!p) return make_error("strategy '" + strategy + "' on " + std::to_string(topo.world()) + " GPUs: " + p.error());
    return std::optional<Plan>(*p);
  }
  LINS_ASSIGN_OR_RETURN(auto search, search_plans(workload, topo, *o.cost, popt));
  if (!search.chosen()) {
    std::fprintf(stderr, "lins simulate: no legal plan of %s fits %s on %d GPUs\n", workload.model.name.c_str(),
                 format_bytes(double(o.gpu_mem)).c_str(), topo.world());
    return std::optional<Plan>();
  }
  Plan plan = search.chosen()->plan;
  plan.name = "lins";
  LINS_ASSIGN_OR_RETURN(
      run, workload_variant(workload, topo, search.chosen()->micro_batch_size, search.chosen()->recompute));
  return std::optional<Plan>(plan);
}

// What a sweep did: rows projected (and how many of them do not fit), rows skipped and why.
struct SweepTally {
  int rows = 0, infeasible = 0, skipped = 0;
  std::vector<std::string> reasons;  // one per skipped (model, GPU count) or strategy
};

// The table `lins simulate` prints, a row as soon as it is projected (so at the columns' least widths).
TextTable sweep_table() {
  using Align = TextTable::Align;
  return TextTable({{.header = "model", .width = 10},
                    {.header = "gpus", .align = Align::right, .width = 6},
                    {.header = "strategy", .width = 34},
                    {.header = "overlap", .width = 12},
                    {.header = "step_s", .align = Align::right, .width = 10, .format = "%.3f"},
                    {.header = "exposed_s", .align = Align::right, .width = 10, .format = "%.3f"},
                    {.header = "tgs", .align = Align::right, .width = 8, .format = "%.0f"},
                    {.header = "mfu", .align = Align::right, .width = 7, .format = "%.1f%%"},
                    {.header = "need", .align = Align::right, .width = 10}});
}

// One projected row of a cluster, kept until the cluster's tiers are known.
struct ClusterRow {
  StepRow row;
  std::string strategy;
  double step_s = 0;
  bool feasible = false;
};

// One projected row: the step of `plan` under overlap mode `ov` (project_plan, as the planner projects it), its trace
// written, printed as a row of `printed` and kept in `rows` for the CSV.
Status project_row(const SimulateOptions& o, const Workload& workload, const Topology& topo,
                   const std::string& strategy, const Plan& plan, Overlap ov, SweepTally& tally, TextTable& printed,
                   std::vector<ClusterRow>* rows) {
  const ModelSpec& model = workload.model;
  const int gpus = topo.world();
  ProjectionSetup setup = projection_setup(o);
  setup.overlap = ov;
  std::vector<TraceEvent> trace;
  LINS_ASSIGN_OR_RETURN(auto projected,
                        project_plan(setup, workload, topo, plan, o.trace_dir.empty() ? nullptr : &trace));
  const Schedule* sched = &projected.schedule;
  const MemoryEstimate& mem = projected.memory;
  const StepProjection& proj = projected.step;
  const PredictedComm predicted = predict_comm(*sched, *o.cost, o.pricing);
  if (!o.trace_dir.empty()) {
    std::string stem = model.name + "." + std::to_string(gpus) + "." + strategy + "." + overlap_name(ov);
    for (char& ch : stem)
      if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '.' && ch != '-') ch = '_';
    const auto path = std::filesystem::path(o.trace_dir) / ("projected." + stem + ".json");
    if (auto w = write_file_atomic(path.string(), chrome_trace_json(trace, 0, sched->streams)); !w) return w;
  }
  const double tokens = double(workload.global_batch_tokens);
  const double tgs = tokens / gpus / proj.step_s;
  const double mfu = model.flops_per_token(workload.seq) * tgs / (o.peak_tflops * 1e12);
  const double mfu_causal = model.causal_flops_per_token(workload.seq) * tgs / (o.peak_tflops * 1e12);
  const bool feasible = mem.required_bytes() <= double(o.gpu_mem);
  StepRow row;
  set_run_columns(row, "projected", strategy, plan, workload, topo, kStepBackendNames.name(StepBackend::gpu),
                  DType::bf16, DType::bf16, ov);
  row.set("step", 0).set("step_time_s", proj.step_s).set("step_time_min_s", proj.step_s);
  row.set("step_time_mean_s", proj.step_s).set("forward_s", proj.forward_s);
  row.set("backward_s", proj.backward_s).set("optimizer_s", proj.optimizer_s);
  row.set("exposed_comm_s", proj.exposed_comm_s);
  set_predicted_columns(row, predicted);
  row.set("peak_mem_bytes", mem.total_bytes).set("state_bytes", mem.state_bytes);
  row.set("model_mem_bytes", mem.total_bytes).set("model_state_bytes", mem.state_bytes);
  row.set("tgs", tgs).set("mfu", mfu).set("peak_tflops", o.peak_tflops).set("feasible", feasible ? 1 : 0);
  row.set("fabric", o.cost->model_description());
  row.set("mfu_causal", mfu_causal).set("peak_source", o.peak_given ? "given" : "datasheet");
  row.set("host_model", host_model_name(setup.host)).set("label", o.label);
  if (setup.host) row.set("host_work_s", proj.host_work_s).set("host_stall_s", proj.host_stall_s);
  row.set("contention_compute_s", proj.contention_compute_s).set("contention_comm_s", proj.contention_comm_s);
  // The reserve beside the tensors: model_mem_bytes + reserve_bytes is the need printed below, which `feasible`
  // compares with the limit.
  row.set("reserve_bytes", mem.reserve_bytes);
  ++tally.rows;
  tally.infeasible += feasible ? 0 : 1;
  printed.row().add(model.name).add(std::to_string(gpus));
  // The planner's choice with its plan, and its engine where that is a baseline's (the step objective weighs the
  // baselines' presets on their own engines too).
  const std::string chosen = plan.engine == Engine::lins
                                 ? "lins " + plan.tuple_string()
                                 : "lins: " + std::string(engine_name(plan.engine)) + " " + plan.tuple_string();
  printed.add(strategy == "lins" ? chosen.substr(0, 34) : strategy).add(overlap_name(ov));
  // The memory a GPU needs, reserve included: what the oom verdict compares with --gpu-mem (the CSV's
  // model_mem_bytes is the tensors alone).
  printed.add(proj.step_s).add(proj.exposed_comm_s).add(tgs).add(100 * mfu).add(format_bytes(mem.required_bytes()));
  if (!feasible) {
    printed.note(" oom");
  } else if (mem.required_bytes() > 0.95 * double(o.gpu_mem)) {
    printed.note(" fits within 5% of --gpu-mem: depends on the reserve's assumptions (docs/cost-model.md)");
  }
  printed.print_row(std::cout, printed.row_count() - 1);
  rows->push_back(ClusterRow{std::move(row), strategy, proj.step_s, feasible});
  return Status::ok_status();
}

// The tiers of one cluster and overlap mode: each row that fits gets one (a tier holds those within `tie` of its
// fastest; differences inside one are not evidence, the projection's error being larger), each that does not 0; the
// `tier` column is set and, with two or more that fit, one line printed.
void set_tiers(std::vector<ClusterRow>& rows, double tie) {
  std::vector<ClusterRow*> fitting;
  for (auto& r : rows) {
    r.row.set("tier", 0);
    if (r.feasible) fitting.push_back(&r);
  }
  std::stable_sort(fitting.begin(), fitting.end(), [](const auto* a, const auto* b) { return a->step_s < b->step_s; });
  std::vector<double> steps;
  for (const ClusterRow* r : fitting) steps.push_back(r->step_s);
  const std::vector<int> tiers = tiers_in_order(steps, tie);
  char pct[32];
  std::snprintf(pct, sizeof pct, "%g%%", 100 * tie);
  std::string line = std::string("  tiers (within ") + pct + " of a tier's fastest, --tie):";
  for (std::size_t i = 0; i < fitting.size(); ++i) {
    const bool opens = i == 0 || tiers[i] != tiers[i - 1];
    line += opens ? (i > 0 ? " |" : "") + std::string(" tier ") + std::to_string(tiers[i]) + ":" : std::string(",");
    line += " " + fitting[i]->strategy;
    fitting[i]->row.set("tier", tiers[i]);
  }
  if (fitting.size() >= 2) std::printf("%s\n", line.c_str());
}

// Every (model, GPU count, strategy, overlap mode) in order; returns what was projected and skipped.
Result<SweepTally> project_all(const SimulateOptions& o, const ParsedArgs& args, CsvWriter& writer) {
  TextTable printed = sweep_table();
  printed.print_header(std::cout);
  SweepTally tally;
  const int per_cluster = int(o.strategies.size() * o.overlaps.size());
  const int cores = available_cores();  // the planner's threads
  for (const auto& model : o.models) {
    for (int gpus : o.gpu_counts) {
      const Topology topo{o.gpus_per_node, gpus / o.gpus_per_node};
      auto workload = parse_workload(args, model, topo);
      if (!workload) {
        std::fprintf(stderr, "lins simulate: skipping %s on %d GPUs: %s\n", model.name.c_str(), gpus,
                     workload.error().c_str());
        tally.skipped += per_cluster;
        tally.reasons.push_back(model.name + " on " + std::to_string(gpus) + " GPUs: " + workload.error());
        continue;
      }
      if (args.flag("paper-recompute") && !workload->recompute_fixed) {  // the paper's choice, for every model
        workload->recompute = model.name == "llama-30b" ? Recompute::full : Recompute::none;
        workload->recompute_fixed = true;
      }
      PlannerOptions popt;
      popt.gpu_mem_bytes = double(o.gpu_mem);
      popt.bucket_bytes = static_cast<int64_t>(o.bucket);
      popt.rank_by = o.pricing;
      popt.reserve = o.reserve;
      popt.include_baselines = o.objective == Objective::step;
      popt.objective = o.objective;
      popt.compute = o.compute;
      popt.engine = o.engine;
      popt.host = o.host;
      popt.threads = cores;
      // Per overlap mode, the cluster's rows, written once their tiers are known.
      std::vector<std::vector<ClusterRow>> rows(o.overlaps.size());
      for (const auto& strategy : o.strategies) {
        Workload run;
        LINS_ASSIGN_OR_RETURN(auto plan, resolve_strategy(o, strategy, *workload, topo, popt, run));
        if (!plan) {
          tally.skipped += int(o.overlaps.size());
          tally.reasons.push_back("lins for " + model.name + " on " + std::to_string(gpus) +
                                  " GPUs: no legal plan fits " + format_bytes(double(o.gpu_mem)));
          continue;
        }
        for (std::size_t k = 0; k < o.overlaps.size(); ++k)
          LINS_TRY(project_row(o, run, topo, strategy, *plan, o.overlaps[k], tally, printed, &rows[k]));
      }
      for (std::size_t k = 0; k < o.overlaps.size(); ++k) {
        if (o.overlaps.size() > 1 && rows[k].size() > 1) std::printf("  overlap %s:\n", overlap_name(o.overlaps[k]));
        set_tiers(rows[k], o.tie);
      }
      // In the order projected: each strategy's row of every overlap mode.
      for (std::size_t i = 0; i < rows[0].size(); ++i)
        for (auto& of_mode : rows) LINS_TRY(writer.write_row(of_mode[i].row.ordered()));
    }
  }
  return tally;
}

// The provenance file beside the CSV: the command, the version, and every assumption of the projection.
Status write_simulate_provenance(const SimulateOptions& o, const ParsedArgs& args, const Args& argv, int rows) {
  Json prov = Json::object();
  std::vector<std::string> words(argv.begin(), argv.end());
  words.insert(words.begin(), "simulate");
  words.insert(words.begin(), "lins");
  prov["argv"] = words;
  prov["lins_version"] = LINS_VERSION;
  prov["git_commit"] = LINS_GIT_COMMIT;
  prov["date_utc"] = now_utc();
  prov["source"] = "projected";
  prov["rows"] = rows;
  Json assume = Json::object();
  assume["sustained_tflops_per_gpu"] = o.compute.sustained_flops_per_s / 1e12;
  assume["sustained_rate_from"] = o.compute.rate_source;
  if (o.compute.calibration) {
    assume["calibration"] = o.compute.calibration->to_json();
    if (!o.compute.calibration_as.empty()) assume["calibration_used_for_every_engine"] = o.compute.calibration_as;
  }
  assume["peak_tflops_per_gpu"] = o.peak_tflops;
  assume["peak_tflops_from"] = o.gpu.peak_from;
  assume["optimizer_memory_gbps"] = o.compute.optimizer_bytes_per_s / 1e9;
  assume["optimizer_memory_gbps_from"] = o.gpu.hbm_from;
  assume["lins_strategy"] =
      std::string("the planner's choice by the ") + objective_name(o.objective) + " objective (--objective)";
  assume["optimizer_bytes_per_owned_param"] = "26: fp32 master, m, v read and written; bf16 grad read, param written";
  assume["network"] = o.cost->network().name;
  assume["network_description"] = o.cost->network().description;
  assume["network_model"] = o.cost->model_description();
  assume["memory_reserve"] = "CUDA context " + args.get("reserve-context") + ", cuBLAS " + args.get("reserve-cublas") +
                             ", NCCL " + args.get("reserve-nccl") + " per communicator, fragmentation " +
                             args.get("reserve-fragmentation") +
                             " of the tensors; feasible = tensors + reserve fit --gpu-mem";
  assume["profile"] = o.cost->profile() ? o.cost->profile()->source() : "none (the network model only)";
  assume["pricing"] = pricing_name(o.pricing);
  assume["contention"] = o.cost->contention().summary();
  assume["communication"] =
      "each engine's communication streams (collectives of one stream run one at a time in issue order; "
      "streams run concurrently), every op issued and waited for where its engine does (docs/engines.md)";
  assume["overlap_rules"] =
      "the engine's own points for overlap=all; no_bcast waits for the update broadcasts at the end of the step; "
      "no_allreduce also waits for each all-reduce where it is issued; none issues every gather where it is "
      "needed and waits for every op where it is issued";
  assume["compute"] =
      o.compute.roofline
          ? "each task by the roofline of its kernels (docs/cost-model.md, Compute): every GEMM at the larger of its "
            "FLOPs over the GEMM rate times its tile fill and its bytes over the memory rate, the attention core at "
            "the fused kernel's rate (causal FLOPs), element-wise kernels at the memory rate; recomputation repeats "
            "its forward kernels"
          : "module FLOPs (2 per weight per token, attention 4*seq*h per token, backward 2x forward, "
            "recomputation +1 forward) at the sustained rate";
  assume["memory_limit_bytes"] = double(o.gpu_mem);
  assume["memory_limit_from"] = o.gpu.mem_from;
  if (o.host) {
    const HostCosts& c = o.host->costs;
    auto line = [](const HostLine& l) { return Json{{"a", l.a_s}, {"b_per_rank", l.b_s}}; };
    assume["host_model"] = std::string(kHostEraNames.name(o.host->era)) + ": " + kHostEraNames.help(o.host->era) +
                           "; the host runs ahead of the GPU, its work per collective (docs/engines.md, \"The host "
                           "side\")";
    assume["host_costs_s"] = Json{{"collective_issue", c.collective_issue_s},
                                  {"ds_gather_issue", line(c.ds_gather_issue)},
                                  {"ds_gather_wait", line(c.ds_gather_wait)},
                                  {"ds_reduce_scatter", line(c.ds_reduce_scatter)}};
    assume["host_costs_from"] =
        args.get("host-costs").empty() ? std::string("built-in (data/host/host_costs.csv)") : args.get("host-costs");
  } else {
    assume["host_model"] = "off: the device schedule only (no host work, no host synchronisation)";
  }
  assume["mfu_formula"] = "72*L*h^2*(1 + s/(6h) + V/(12*L*h)) per token (Megatron-LM), no recomputation credit";
  prov["assumptions"] = assume;
  return write_file_atomic(o.out_path + ".json", json_dump(prov) + "\n");
}

}  // namespace

int run_simulate(const Args& argv) {
  const CommandSpec spec = simulate_spec();
  auto args = parse_args(spec, argv);
  if (!args) return fail(args.error());
  if (args->flag("help")) {
    std::fputs(help_text(spec).c_str(), stdout);
    return 0;
  }
  if (!args->positional().empty()) return fail("unexpected argument '" + args->positional()[0] + "'");
  auto opt = read_simulate_options(*args);
  if (!opt) return fail(opt.error());
  if (auto s = check_outputs(*opt); !s) return fail(s.error());

  auto writer = CsvWriter::open(opt->out_path, StepRow::header());
  if (!writer) return fail(writer.error());
  std::printf("lins simulate: GPU peak %g TFLOP/s for MFU (%s), HBM %g GB/s (%s), %s per GPU (%s)\n",
              opt->peak_tflops, opt->gpu.peak_from.c_str(), opt->gpu.hbm_gbps, opt->gpu.hbm_from.c_str(),
              format_bytes(double(opt->gpu_mem)).c_str(), opt->gpu.mem_from.c_str());
  std::printf("lins simulate: compute %s\n", compute_description(opt->compute, opt->gpu.hbm_from).c_str());
  std::printf("lins simulate: host side %s; %s\n",
              opt->host ? (host_model_name(&*opt->host) + " (--host-model)").c_str()
                        : "off, the device schedule alone (--host-model)",
              opt->inputs.c_str());
  if (const LinkFit* fit = opt->cost->link_fit())
    for (const auto& line : link_fit_lines(*fit, opt->cost->priced_by_fit())) std::printf("%s\n", line.c_str());
  auto tally = project_all(*opt, *args, *writer);
  if (!tally) return fail(tally.error());
  if (tally->rows == 0) {
    std::string why;
    for (const auto& r : tally->reasons) why += (why.empty() ? "" : "; ") + r;
    return fail("nothing was projected: all " + std::to_string(tally->skipped) + " rows were skipped (" + why +
                "); no CSV was written");
  }
  if (auto s = writer->finish(); !s) return fail(s.error());
  if (auto s = write_simulate_provenance(*opt, *args, argv, tally->rows); !s) return fail(s.error());
  std::printf("wrote %d projected rows to %s (assumptions in %s.json)\n", tally->rows, opt->out_path.c_str(),
              opt->out_path.c_str());
  if (tally->skipped > 0)
    std::fprintf(stderr, "lins simulate: skipped %d of %d rows (the reasons are above)\n", tally->skipped,
                 tally->skipped + tally->rows);
  if (tally->infeasible == tally->rows) {
    std::fprintf(stderr,
                 "lins simulate: no projected row fits %s per GPU (every row says feasible = 0); raise --gpu-mem, "
                 "add GPUs or use --recompute\n",
                 format_bytes(double(opt->gpu_mem)).c_str());
    return 1;
  }
  return 0;
}

}  // namespace lins
