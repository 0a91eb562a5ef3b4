// The one place that defines the columns of every table lins writes: the step CSV (`lins step` measures, `lins
// simulate` projects), the plan CSV (`lins plan --csv`), the collective CSV (`lins comm --csv`) and the bandwidth
// profile (`lins comm --profile`). `lins schema` prints them with their units as JSON; the Python packages load that
// output (analysis/lins_schema/schema.json) instead of keeping lists of their own.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace lins {

struct Column {
  std::string name;  // units in the name: _s, _bytes, _gbps, _tflops
  std::string help;
  bool text = false;  // read as text; every other column is a number
};

// Column order of a step CSV row. The per-collective columns (<kind>_bytes, pred_<kind>_bytes) come from the
// collective table (core/collectives.h), one of each per row.
const std::vector<Column>& step_csv_columns();

namespace detail {
// The step columns before the measured per-collective bytes, between them and the predicted ones, and after.
inline std::vector<Column> step_columns_head() {
  return {
      {"source", "measured or projected", true},
      {"strategy", "name given on the command line (a preset such as ddp, zero3, mics, fsdp, hsdp; lins; a 6-tuple)",
       true},
      {"engine", "the engine that scheduled it: lins, ddp, zero, mics, zeropp, fsdp (docs/engines.md)", true},
      {"plan", "the plan as text p=AxB,g=CxD,os=ExF[,hpz=K]", true},
      {"s0_p", "P sharding inside a node"},
      {"s1_p", "P sharding across nodes"},
      {"s0_g", "G sharding inside a node"},
      {"s1_g", "G sharding across nodes"},
      {"s0_os", "OS sharding inside a node"},
      {"s1_os", "OS sharding across nodes"},
      {"os_layout", "inter_tensor or intra_tensor", true},
      {"model", "model preset or custom", true},
      {"params", "parameter count Phi"},
      {"backend", "cpu (host compute, MPI collectives) or gpu (CUDA compute, NCCL collectives)", true},
      {"precision", "storage of P and G (and every collective): fp32, or bf16 = mixed precision with fp32 OS", true},
      {"compute", "dtype of activations and kernel inputs: fp32 or bf16 (weight gradients are fp32)", true},
      {"world_size", "ranks"},
      {"gpus_per_node", "R"},
      {"nodes", "N"},
      {"seq", "sequence length"},
      {"micro_batch_size", "sequences per micro-batch"},
      {"micro_batches", "M, gradient accumulation steps"},
      {"tokens", "tokens per step over all ranks"},
      {"recompute", "1 with full activation recomputation, 0 without, selective with selective", true},
      {"overlap", "all, no_bcast, no_allreduce or none (Table V)", true},
      {"step", "timed step index (warm-up steps are not written)"},
      {"step_time_s", "step wall time, max over ranks"},
      {"step_time_min_s", "step wall time, min over ranks"},
      {"step_time_mean_s", "step wall time, mean over ranks"},
      {"forward_s", "forward compute time, max over ranks"},
      {"backward_s", "backward compute time, max over ranks"},
      {"optimizer_s", "optimizer time, max over ranks"},
      {"exposed_comm_s", "communication time not hidden behind compute, max over ranks"},
  };
}
inline std::vector<Column> step_columns_middle() {
  return {
      {"intra_bytes", "message bytes of collectives inside one node, counted"},
      {"inter_bytes", "message bytes of collectives spanning nodes, counted"},
  };
}
inline std::vector<Column> step_columns_tail() {
  return {
      {"pred_intra_bytes", "message bytes inside one node, from the schedule"},
      {"pred_inter_bytes", "message bytes spanning nodes, from the schedule"},
      {"pred_comm_s", "cost model's communication seconds per step (T_p + T_g + T_os0 + T_os1)"},
      {"pred_comm_param_s", "T_p"},
      {"pred_comm_grad_s", "T_g"},
      {"pred_comm_os_sync_s", "T_os0"},
      {"pred_comm_os_bcast_s", "T_os1"},
      {"peak_mem_bytes",
       "peak memory per rank, max over ranks (measured: the high-water mark of the tensors the executor allocated; "
       "projected: the memory model's total)"},
      {"state_bytes", "P + G + OS bytes allocated per rank, max over ranks"},
      {"model_mem_bytes", "memory model's total per rank"},
      {"model_state_bytes", "memory model's states per rank"},
      {"loss", "mean training loss of the step over all ranks"},
      {"tgs", "tokens per GPU per second"},
      {"mfu", "model FLOPs utilisation against peak_tflops, a fraction (Megatron formula, docs/method.md)"},
      {"peak_tflops", "peak rate per GPU used for MFU"},
      {"feasible", "1 when the plan fits in memory; projected rows may be 0 (drawn as oom)"},
      {"fabric",
       "what carried the collectives: shared-memory (every rank on one host), emulated:NxR:RATE,DELAY,LOSS (the "
       "namespace cluster of scripts/cluster.sh), hosts:N (real hosts); projected rows: the network model; a run "
       "paced to an emulated device adds ' device=RATETFLOPS' (and ',GBPSGB/s' with --device-gbps)",
       true},
      {"mfu_causal",
       "MFU with causal attention's FLOPs (half the score and value products: 72 L h^2 (1 + s/(12h) + V/(12 L h))), "
       "against peak_tflops"},
      {"peak_source",
       "where peak_tflops comes from: given (--peak-tflops), datasheet (the GPU's dense bf16 peak), gemm (the "
       "GEMM rate measured by this run) or device (the emulated device's rate, lins step --device-rate)",
       true},
      {"gemm_tflops",
       "the backend's GEMM rate on the step's largest GEMM, measured by this run on every rank (mean); empty in "
       "projected rows"},
      {"host_model",
       "projected rows: the host side of the real systems, off (the device schedule only) or paper / today (their "
       "Python work around each collective and host synchronisations, DeepSpeed 0.13 or 0.14 on; docs/engines.md); "
       "empty in measured rows",
       true},
      {"label",
       "projected rows: which projection made it (lins simulate --label; by default its host model and DeepSpeed's "
       "overlap_comm when given: device, host=paper, host=paper overlap_comm=off); figures drawn from it say so; "
       "empty in measured rows",
       true},
      {"host_work_s", "projected rows with a host model: the host's own work in the step (it runs ahead of the GPU)"},
      {"host_stall_s",
       "projected rows with a host model: time the GPU's compute stood idle for the host (included in step_time_s)"},
      {"overrun_tasks",
       "measured rows paced to an emulated device (lins step --device-rate): the compute tasks, summed over the "
       "ranks, whose real compute took longer than their device time (their FLOPs at the device rate), so that "
       "they were not paced; 0 when every task was; empty without a device rate and in projected rows"},
      {"contention_compute_s",
       "projected rows: compute time lost beside running collectives (the network's [contention] or --contention; "
       "included in step_time_s, on top of forward_s, backward_s and optimizer_s); 0 when overlap is free"},
      {"contention_comm_s",
       "projected rows: time the collectives lost beside compute and each other (it reaches step_time_s only where "
       "compute waits for them: exposed_comm_s); 0 when overlap is free"},
      {"reserve_bytes",
       "projected rows: what a GPU run needs per rank beyond the memory model's tensors (CUDA context, cuBLAS "
       "workspace, NCCL buffers per communicator, fragmentation; --reserve-*); model_mem_bytes + reserve_bytes is "
       "the need the console shows, which feasible compares with the memory limit; empty in measured rows"},
      {"tier",
       "projected rows of lins simulate: 1 when the row's step is within --tie (0.2, the projection's validated "
       "error) of the fastest strategy that fits on its cluster (model, GPUs, overlap mode), 2 when within it of the "
       "fastest outside tier 1, and so on; 0 = does not fit; strategies of one tier are a tie as far as the "
       "projection can tell; empty in measured rows"},
  };
}
}  // namespace detail

// `lins plan --csv` and `lins comm --csv`, in column order.
std::vector<std::string> plan_csv_columns();
std::vector<std::string> comm_csv_columns();
// A column's unit, read from its name's suffix (_bytes, _s, _gbps, _tflops, _elems) or its known meaning; "" when it
// has none (counts, flags, text).
std::string column_unit(const std::string& name);
// Every table above as JSON: {"step": {"columns": [{"name", "unit", "type", "help"}...]}, "plan": ..., "comm": ...,
// "profile": ...}, the collective table, and the model presets and FLOPs formula (model_schema.h). Written by
// `lins schema`.
std::string output_schemas_json();

// One row of a CSV table, filled by column name (an unknown name is a programming error and aborts with its name),
// written in the table's order; columns never set stay empty (for example measured bytes in a projected row).
class CsvRow {
 public:
  CsvRow(std::string table, std::vector<std::string> columns);
  CsvRow& set(const std::string& column, std::string value);
  CsvRow& set(const std::string& column, const char* value) { return set(column, std::string(value)); }
  CsvRow& set(const std::string& column, double value);
  CsvRow& set(const std::string& column, int64_t value);
  CsvRow& set(const std::string& column, int value) { return set(column, int64_t(value)); }
  CsvRow& set(const std::string& column, std::size_t value) { return set(column, int64_t(value)); }
  CsvRow& set(const std::string& column, bool value) { return set(column, int64_t(value ? 1 : 0)); }
  const std::string& get(const std::string& column) const;
  std::vector<std::string> ordered() const;
  const std::vector<std::string>& header() const { return columns_; }

 private:
  std::string table_;
  std::vector<std::string> columns_;
  std::map<std::string, std::string> values_;
};

// A row of the step CSV (`lins step`, `lins simulate`).
class StepRow : public CsvRow {
 public:
  StepRow();
  static std::vector<std::string> header();
};
// A row of the plan CSV (`lins plan --csv`).
class PlanRow : public CsvRow {
 public:
  PlanRow() : CsvRow("plan", plan_csv_columns()) {}
};

}  // namespace lins
