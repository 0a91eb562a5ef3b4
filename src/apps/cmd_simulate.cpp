// `lins simulate`: projects the step of each (model, GPU count, strategy, overlap mode) onto clusters we do not have:
// the same Schedule the executor runs, priced by the cost model, compute from FLOPs at a sustained rate, overlap by
// the executor's rules (core/simulator.h). Writes the step CSV schema with source=projected, plus a provenance file
// stating every assumption.
#include <cctype>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <set>
#include <sstream>

#include "apps/commands.h"
#include "core/cost_options.h"
#include "core/csv.h"
#include "core/json.h"
#include "core/memory_model.h"
#include "core/planner.h"
#include "core/results_schema.h"
#include "core/simulator.h"
#include "core/step_columns.h"
#include "core/units.h"
#include "core/workload.h"
#include "lins_git_commit.h"  // generated at build time

namespace lins {
namespace {

CommandSpec simulate_spec() {
  std::vector<OptionSpec> own = {
      {"gpus", 0, "LIST", "8,32,128,512,1024", "GPU counts to project (multiples of --gpus-per-node)"},
      {"strategies", 0, "LIST", "zero1,zero3,zeropp,mics,lins",
       "presets, 6-tuples (p=AxB,g=CxD,os=ExF) or lins (the planner's choice), comma-separated"},
      {"overlap", 0, "LIST", "all", "overlap modes (all, no_bcast, no_allreduce, none), comma-separated"},
      {"gpu-mem", 0, "SIZE", "80GiB", "memory per GPU; plans that do not fit are written with feasible=0 (oom)"},
      {"peak-tflops", 0, "X", "312", "peak bf16 dense TFLOP/s per GPU, for MFU (A800/A100: 312)"},
      {"sustained-tflops", 0, "X", "", "compute rate of forward/backward per GPU [default: efficiency x peak]"},
      {"compute-efficiency", 0, "X", "0.6", "sustained / peak when --sustained-tflops and --calibrate are absent"},
      {"calibrate", 0, "FILE", "", "take the sustained rate from the measured rows of a `lins step` CSV"},
      {"hbm-gbps", 0, "X", "1600", "memory rate of the optimizer update, GB/s (A800 80GB: 2039 peak)"},
      {"bucket", 0, "SIZE", "25M", "gradient bucket size U"},
      {"paper-recompute", 0, "", "",
       "recompute activations for llama-30b only, as the paper does (also with "
       "--recompute: every model)"},
      {"out", 'o', "FILE", "results/simulate/projection.csv", "CSV to write (a .json provenance file beside it)"},
      {"trace", 0, "DIR", "",
       "write the projected step of every row as a Chrome trace (compute, waits, each stream's collectives) into DIR"},
  };
  auto opts = concat_options(model_options("llama-7b"), topology_options("8", ""));
  opts = concat_options(opts, workload_options("4096", "1", "4M"));
  opts = concat_options(opts, cost_options("paper-a800", "paper"));
  opts = concat_options(opts, engine_options());
  opts = concat_options(opts, memory_reserve_options());
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

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    while (!item.empty() && item.front() == ' ') item.erase(item.begin());
    while (!item.empty() && item.back() == ' ') item.pop_back();
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

// Sustained FLOP/s per GPU from the measured rows of a step CSV: useful FLOPs (plus the recomputed forward) over
// forward + backward compute time.
Result<double> calibrate_rate(const std::string& path) {
  auto records = read_csv_file(path);
  if (!records) return make_error(records.error());
  if (records->empty()) return make_error("--calibrate " + path + ": empty file (expected a `lins step` CSV)");
  const auto& head = records->front().fields;
  auto col = [&](const std::string& name) -> int {
    for (std::size_t i = 0; i < head.size(); ++i)
      if (head[i] == name) return static_cast<int>(i);
    return -1;
  };
  const char* needed[] = {"source", "model", "seq", "tokens", "world_size", "forward_s", "backward_s", "recompute"};
  for (const char* n : needed)
    if (col(n) < 0) return make_error("--calibrate " + path + ": no column '" + n + "' (expected a `lins step` CSV)");
  double flops = 0, seconds = 0;
  for (std::size_t r = 1; r < records->size(); ++r) {
    const auto& f = (*records)[r].fields;
    if (f.size() != head.size() || f[col("source")] != "measured") continue;
    auto model = make_model_preset(f[col("model")]);
    if (!model) continue;  // custom shapes carry no dimensions in the CSV
    const double seq = std::atof(f[col("seq")].c_str()), tokens = std::atof(f[col("tokens")].c_str());
    const double world = std::atof(f[col("world_size")].c_str());
    const double compute_s = std::atof(f[col("forward_s")].c_str()) + std::atof(f[col("backward_s")].c_str());
    if (world < 1 || compute_s <= 0) continue;
    const double extra = f[col("recompute")] == "1" ? 4.0 / 3.0 : 1.0;
    flops += model->flops_per_token(static_cast<int>(seq)) * tokens / world * extra;
    seconds += compute_s;
  }
  if (seconds <= 0) return make_error("--calibrate " + path + ": no measured row of a preset model with compute time");
  return flops / seconds;
}

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

  // Models: one (custom shapes allowed) or a list of presets.
  std::vector<ModelSpec> models;
  const auto model_names = split_list(args->get("model"));
  if (model_names.size() <= 1) {
    auto m = parse_model(*args);
    if (!m) return fail(m.error());
    models.push_back(*m);
  } else {
    for (const char* shape : {"hidden", "layers", "heads", "ffn", "vocab"})
      if (args->has(shape)) return fail("--" + std::string(shape) + " needs a single --model, not a list");
    for (const auto& n : model_names) {
      auto m = make_model_preset(n);
      if (!m) return fail(m.error());
      models.push_back(*m);
    }
  }
  auto R = args->get_positive_int("gpus-per-node");
  if (!R) return fail(R.error());
  std::vector<int> gpu_counts;
  for (const auto& g : split_list(args->get("gpus"))) {
    auto v = parse_positive_int(g, "--gpus");
    if (!v) return fail(v.error());
    if (*v % *R != 0) return fail("--gpus " + g + " is not a multiple of --gpus-per-node " + std::to_string(*R));
    gpu_counts.push_back(*v);
  }
  if (args->has("nodes")) return fail("--nodes is set by --gpus here; give the GPU counts with --gpus");
  const auto strategies = split_plan_list(args->get("strategies"));
  if (strategies.empty() || gpu_counts.empty()) return fail("--strategies and --gpus must not be empty");
  std::vector<Overlap> overlaps;
  for (const auto& o : split_list(args->get("overlap"))) {
    auto v = parse_overlap(o);
    if (!v) return fail(v.error());
    overlaps.push_back(*v);
  }
  auto cost = parse_cost_model(*args, *R);
  if (!cost) return fail(cost.error());
  if (cost->profile())
    for (const auto& note : cost->profile()->notes()) std::fprintf(stderr, "lins simulate: %s\n", note.c_str());
  auto reserve = parse_memory_reserve(*args);
  if (!reserve) return fail(reserve.error());
  auto pricing = parse_pricing(args->get("pricing"));
  if (!pricing) return fail(pricing.error());
  auto gpu_mem = args->get_size("gpu-mem");
  if (!gpu_mem) return fail(gpu_mem.error());
  if (*gpu_mem == 0) return fail("--gpu-mem must be positive (for example 80GiB)");
  auto bucket = args->get_size("bucket");
  if (!bucket || *bucket == 0) return fail(bucket ? "--bucket must be at least 1 byte" : bucket.error());
  auto peak = args->get_double("peak-tflops");
  auto hbm = args->get_double("hbm-gbps");
  auto eff = args->get_double("compute-efficiency");
  if (!peak || *peak <= 0) return fail(peak ? "--peak-tflops must be positive" : peak.error());
  if (!hbm || *hbm <= 0) return fail(hbm ? "--hbm-gbps must be positive" : hbm.error());
  if (!eff || *eff <= 0 || *eff > 1) return fail(eff ? "--compute-efficiency must be in (0, 1]" : eff.error());
  double sustained = *eff * *peak * 1e12;
  std::string rate_source = "compute-efficiency " + args->get("compute-efficiency") + " x peak";
  if (args->has("sustained-tflops") && args->has("calibrate"))
    return fail("give --sustained-tflops or --calibrate, not both");
  if (args->has("sustained-tflops")) {
    auto v = args->get_double("sustained-tflops");
    if (!v || *v <= 0) return fail(v ? "--sustained-tflops must be positive" : v.error());
    sustained = *v * 1e12;
    rate_source = "given by --sustained-tflops";
  } else if (args->has("calibrate")) {
    auto v = calibrate_rate(args->get("calibrate"));
    if (!v) return fail(v.error());
    sustained = *v;
    rate_source = "calibrated from " + args->get("calibrate");
  }
  const ComputeRates rates{sustained, *hbm * 1e9};
  auto engine = parse_engine_options(*args);
  if (!engine) return fail(engine.error());

  const std::string out_path = args->get("out");
  if (auto dir = std::filesystem::path(out_path).parent_path(); !dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return fail("cannot create the folder of --out " + out_path + ": " + ec.message());
  }
  const std::string trace_dir = args->get("trace");
  if (!trace_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(trace_dir, ec);
    if (ec) return fail("cannot create the --trace folder " + trace_dir + ": " + ec.message());
  }
  auto writer = CsvWriter::open(out_path, StepRow::header());
  if (!writer) return fail(writer.error());

  std::printf("%-10s %6s %-22s %-12s %10s %10s %8s %7s %10s\n", "model", "gpus", "strategy", "overlap", "step_s",
              "exposed_s", "tgs", "mfu", "mem");
  int rows = 0;
  for (const auto& model : models) {
    for (int gpus : gpu_counts) {
      const Topology topo{*R, gpus / *R};
      auto workload = parse_workload(*args, model, topo);
      if (!workload) {
        std::fprintf(stderr, "lins simulate: skipping %s on %d GPUs: %s\n", model.name.c_str(), gpus,
                     workload.error().c_str());
        continue;
      }
      workload->recompute = args->flag("recompute") || (args->flag("paper-recompute") && model.name == "llama-30b");
      PlannerOptions popt;
      popt.gpu_mem_bytes = double(*gpu_mem);
      popt.bucket_bytes = static_cast<int64_t>(*bucket);
      popt.rank_by = *pricing;
      popt.reserve = *reserve;
      for (const auto& strategy : strategies) {
        Plan plan;
        if (strategy == "lins") {
          auto search = search_plans(*workload, topo, *cost, popt);
          if (!search) return fail(search.error());
          if (!search->chosen()) {
            std::fprintf(stderr, "lins simulate: no legal plan of %s fits %s on %d GPUs\n", model.name.c_str(),
                         format_bytes(double(*gpu_mem)).c_str(), gpus);
            continue;
          }
          plan = search->chosen()->plan;
          plan.name = "lins";
        } else {
          auto p = parse_plan(strategy, topo);
          if (!p) return fail("strategy '" + strategy + "' on " + std::to_string(gpus) + " GPUs: " + p.error());
          plan = *p;
        }
        ScheduleOptions so;
        so.micro_batches = workload->micro_batches;
        so.bucket_bytes = popt.bucket_bytes;
        so.expand_micro_batches = true;
        so.engine = *engine;
        for (Overlap ov : overlaps) {
          so.overlap = ov;
          auto sched = build_schedule(model, plan, topo, so);
          if (!sched) return fail(sched.error());
          auto mem = estimate_memory(*sched, *workload, StateBytes{});
          add_memory_reserve(mem, *sched, *reserve);
          const PredictedComm predicted = predict_comm(*sched, *cost, *pricing);
          std::vector<TraceEvent> trace;
          const auto proj = project_step(
              *sched, model, workload->seq, workload->micro_batch_size, workload->recompute, rates,
              [&](const CommOp& op) { return cost->op_time_s(op, topo, *pricing); },
              trace_dir.empty() ? nullptr : &trace);
          if (!trace_dir.empty()) {
            std::string stem = model.name + "." + std::to_string(gpus) + "." + strategy + "." + overlap_name(ov);
            for (char& ch : stem)
              if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '.' && ch != '-') ch = '_';
            const auto path = std::filesystem::path(trace_dir) / ("projected." + stem + ".json");
            if (auto w = write_file_atomic(path.string(), chrome_trace_json(trace, 0, sched->streams)); !w)
              return fail(w.error());
          }
          const double tokens = double(workload->global_batch_tokens);
          const double tgs = tokens / gpus / proj.step_s;
          const double mfu = model.flops_per_token(workload->seq) * tgs / (*peak * 1e12);
          const bool feasible = mem.required_bytes() <= double(*gpu_mem);
          StepRow row;
          set_run_columns(row, "projected", strategy, plan, *workload, topo, "gpu", DType::bf16, DType::bf16, ov);
          row.set("step", 0).set("step_time_s", proj.step_s).set("step_time_min_s", proj.step_s);
          row.set("step_time_mean_s", proj.step_s).set("forward_s", proj.forward_s);
          row.set("backward_s", proj.backward_s).set("optimizer_s", proj.optimizer_s);
          row.set("exposed_comm_s", proj.exposed_comm_s);
          set_predicted_columns(row, predicted);
          row.set("peak_mem_bytes", mem.total_bytes).set("state_bytes", mem.state_bytes);
          row.set("model_mem_bytes", mem.total_bytes).set("model_state_bytes", mem.state_bytes);
          row.set("tgs", tgs).set("mfu", mfu).set("peak_tflops", *peak).set("feasible", feasible ? 1 : 0);
          if (auto s = writer->write_row(row.ordered()); !s) return fail(s.error());
          ++rows;
          std::printf("%-10s %6d %-22s %-12s %10.3f %10.3f %8.0f %6.1f%% %10s%s\n", model.name.c_str(), gpus,
                      strategy == "lins" ? ("lins " + plan.tuple_string()).substr(0, 22).c_str() : strategy.c_str(),
                      overlap_name(ov), proj.step_s, proj.exposed_comm_s, tgs, 100 * mfu,
                      format_bytes(mem.total_bytes).c_str(), feasible ? "" : " oom");
        }
      }
    }
  }
  if (auto s = writer->finish(); !s) return fail(s.error());

  JsonObject prov;
  std::vector<std::string> words(argv.begin(), argv.end());
  words.insert(words.begin(), "simulate");
  words.insert(words.begin(), "lins");
  prov.set("argv", words).set("lins_version", LINS_VERSION).set("git_commit", LINS_GIT_COMMIT);
  prov.set("date_utc", now_utc()).set("source", "projected").set("rows", rows);
  JsonObject assume;
  assume.set("sustained_tflops_per_gpu", sustained / 1e12).set("sustained_rate_from", rate_source);
  assume.set("peak_tflops_per_gpu", *peak).set("optimizer_memory_gbps", *hbm);
  assume.set("optimizer_bytes_per_owned_param",
             "26: fp32 master, m, v read and written; bf16 grad read, param written");
  assume.set("network", cost->network().name).set("network_description", cost->network().description);
  assume.set("network_model", cost->model_description());
  assume.set("memory_reserve", "CUDA context " + args->get("reserve-context") + ", cuBLAS " +
                                   args->get("reserve-cublas") + ", NCCL " + args->get("reserve-nccl") +
                                   " per communicator, fragmentation " + args->get("reserve-fragmentation") +
                                   " of the tensors; feasible = tensors + reserve fit --gpu-mem");
  assume.set("profile", cost->profile() ? cost->profile()->source() : "none (the network model only)");
  assume.set("pricing", pricing_name(*pricing));
  assume.set("communication",
             "each engine's communication streams (collectives of one stream run one at a time in issue order; "
             "streams run concurrently), every op issued and waited for where its engine does (docs/engines.md)");
  assume.set(
      "overlap_rules",
      "the engine's own points for overlap=all; no_bcast waits for the update broadcasts at the end of the step; "
      "no_allreduce also waits for each all-reduce where it is issued; none issues every gather where it is "
      "needed and waits for every op where it is issued");
  assume.set("compute",
             "module FLOPs (2 per weight per token, attention 4*seq*h per token, backward 2x forward, "
             "recomputation +1 forward) at the sustained rate");
  assume.set("memory_limit_bytes", double(*gpu_mem));
  assume.set("mfu_formula", "72*L*h^2*(1 + s/(6h) + V/(12*L*h)) per token (Megatron-LM), no recomputation credit");
  prov.set("assumptions", assume);
  if (auto s = write_file_atomic(out_path + ".json", prov.dump() + "\n"); !s) return fail(s.error());
  std::printf("wrote %d projected rows to %s (assumptions in %s.json)\n", rows, out_path.c_str(), out_path.c_str());
  return 0;
}

}  // namespace lins
