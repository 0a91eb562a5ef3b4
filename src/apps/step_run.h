// The part of `lins step` that runs one strategy after another: set up its backend, communicator and executor, run
// the warm-up and timed steps, reduce each step's figures over the ranks, write its CSV rows, collective log and
// traces. cmd_step.cpp reads the options, resolves the strategies and calls run_strategy for each.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "comm/gpu_plugin.h"  // AttentionKernel
#include "comm/mpi_communicator.h"
#include "core/cost/cost_model.h"
#include "core/model/plan.h"
#include "core/model/topology.h"
#include "core/projection/memory_model.h"
#include "core/projection/planner.h"
#include "core/schedule/overlap.h"
#include "core/schedule/workload.h"
#include "core/util/csv.h"
#include "core/util/names.h"
#include "core/util/result.h"
#include "train/backend.h"

namespace lins {

// Everything `lins step` takes from its options.
struct StepOptions {
  ModelSpec model;
  Topology topo;
  Workload workload;
  uint64_t warmup = 1, seed = 1, bucket = 0, gpu_mem = 0;
  double hbm_gbps = 0;  // the optimizer's memory rate the planner projects 'lins' with (--hbm-gbps, else the network's)
  int steps = 1;
  double lr = 0, timeout_s = 0;
  Overlap overlap = Overlap::all;
  Pricing pricing = Pricing::paper_isolated;
  Objective objective = Objective::step;  // how the planner chooses 'lins'
  MpiProgress progress = MpiProgress::thread;
  StepBackend backend = StepBackend::cpu;
  DType precision = DType::bf16, compute = DType::fp32;
  std::optional<AttentionKernel> attention;  // --attention (GPU only); unset: cudnn where the plugin has it
  std::optional<CostModel> cost;
  EngineOptions engine;
  MemoryReserve reserve;
  std::vector<std::string> strategies;
  std::string out_dir, csv_path, collective_log, peak_tflops, network, profile;
  bool trace = false, resume = false;
  bool memory_check = true;                  // --no-memory-check turns it off
  std::optional<double> memory_limit_bytes;  // --memory-limit: the budget per host (GPU) instead of the measured one
  std::vector<std::string> argv;             // the command line, for the provenance file
  // An emulated device (--device-rate, --device-gbps, or their defaults from the environment; 0: off): each task is
  // paced to its FLOPs (the optimizer's: its bytes) at these rates (train/executor.h). *_source says which.
  double device_tflops = 0, device_gbps = 0;
  std::string device_source;
  bool paced() const { return device_tflops > 0 || device_gbps > 0; }
};

// Makes this rank's compute backend for one strategy.
using BackendFactory = std::function<Result<std::unique_ptr<ComputeBackend>>()>;

// The peak rate MFU is measured against, and where it comes from.
// The peak MFU is taken against, and the GEMM rate this run measured (reported beside it whatever the peak is).
struct Peak {
  double tflops = 0;
  std::string kind;    // peak_source: given, datasheet or gemm
  std::string source;  // in words, for the header and the provenance
  double gemm_tflops = 0;
  std::string gemm_source;
};

// One row of the table printed at the end: a strategy's means over its timed steps.
struct TableRow {
  std::string strategy, plan;
  double step_s = 0, fwd_s = 0, bwd_s = 0, opt_s = 0, exposed_s = 0, pred_comm_s = 0;
  double intra_bytes = 0, inter_bytes = 0, peak_bytes = 0, state_bytes = 0, model_state_bytes = 0, model_mem_bytes = 0;
  double loss = 0, tgs = 0, mfu = 0;
  bool bytes_match = true;
  int steps = 0;
  long long paced_tasks = 0, overrun_tasks = 0;  // summed over ranks and timed steps (with a device rate)
  double pace_late_s = 0;                        // the host's late wakes per step, max over ranks (StepStats)
};

// What every strategy's run shares: the options, the backend factory, the MFU peak, rank 0's CSV, this rank's
// collective log rows.
struct StepRun {
  const StepOptions& o;
  BackendFactory make_backend;
  Peak peak;
  CsvWriter* writer = nullptr;  // rank 0 only
  int rank = 0, world = 1;
  std::string fabric;  // fabric_label(): what carried the collectives, and the emulated device's rate if paced
  // FLOPs per token MFU counts: Megatron-LM's formula; with a device rate, the FLOPs the device was paced for
  // (module_forward_flops, x3 for forward and backward), so that a paced step's MFU cannot exceed 100%.
  double mfu_flops_per_token = 0, mfu_causal_flops_per_token = 0;
  std::string collective_rows;
};

// One value reduced over every rank (the step's results), under the watchdog.
double all_max(double v);
double all_min(double v);
double all_sum(double v);

// One strategy: set up, run the warm-up and timed steps, write its rows and traces (index of count, for the progress
// line). nullopt when its rows are kept from an earlier run (--resume).
Result<std::optional<TableRow>> run_strategy(StepRun& r, const std::string& strategy, const Plan& plan,
                                             std::size_t index, std::size_t count);
// --collective-log: every rank's rows, written by rank 0.
Status write_collective_log(const StepRun& r);

}  // namespace lins
