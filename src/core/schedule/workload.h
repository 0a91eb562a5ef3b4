// What one training step computes (model, sequence, micro-batch size and count, recomputation) and the option
// tables shared by `lins plan`, `lins step` and `lins simulate`, so every command spells the same thing the same way.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/model/model_spec.h"
#include "core/model/topology.h"
#include "core/schedule/schedule.h"
#include "core/util/cli.h"
#include "core/util/result.h"

namespace lins {

struct Workload {
  ModelSpec model;
  int seq = 0;                      // tokens per sequence
  int micro_batch_size = 1;         // sequences per micro-batch (b)
  int micro_batches = 1;            // M, gradient accumulation steps per optimizer step
  int64_t global_batch_tokens = 0;  // seq * micro_batch_size * micro_batches * world
  Recompute recompute = Recompute::none;  // activation recomputation
  // Whether the user fixed the micro-batch size (--micro-batch, or --micro-batches: M and the size make the batch) and
  // the recomputation (--recompute,
  // --recompute-mode); the planner searches what is not fixed (PlannerOptions::search_workload).
  bool micro_batch_fixed = true;
  bool recompute_fixed = true;

  int64_t tokens_per_micro_batch() const { return int64_t(seq) * micro_batch_size; }  // per rank
};

// --model NAME, --hidden, --layers, --heads, --ffn, --vocab. `default_model` is shown in help and used when --model
// is absent.
std::vector<OptionSpec> model_options(const std::string& default_model = "llama-7b");
// --gpus-per-node R, --nodes N. An empty default means "no default" (the option must be given, or comes from the
// world size).
std::vector<OptionSpec> topology_options(const std::string& default_gpus_per_node = "8",
                                         const std::string& default_nodes = "128");
// --seq, --micro-batch, --micro-batches, --global-batch-tokens, --recompute, --recompute-mode. When neither count
// flag is given the default of --global-batch-tokens is used if it has one, else M = 1. --recompute alone is
// --recompute-mode full, as it always was.
std::vector<OptionSpec> workload_options(const std::string& default_seq = "4096",
                                         const std::string& default_micro_batch = "1",
                                         const std::string& default_global_batch_tokens = "4M");

// The preset of --model with every shape flag given overriding its field (the name becomes "custom" when any does).
Result<ModelSpec> parse_model(const ParsedArgs& args);
// world = 0: R and N from the flags. world > 0 (a launched job): N = world / R unless --nodes is given, in which case
// R x N must equal world.
Result<Topology> parse_topology(const ParsedArgs& args, int world = 0);
// M from --micro-batches, or from --global-batch-tokens = seq * micro-batch * M * world (a whole M >= 1 or an error);
// giving both is an error. micro_batch_fixed and recompute_fixed say whether those options were given.
Result<Workload> parse_workload(const ParsedArgs& args, const ModelSpec& model, const Topology& topo);
// The same workload with micro-batch size `b` and recomputation `r`, keeping its global batch: M = tokens / (seq x b x
// world). An error when that is not a whole number of at least 1.
Result<Workload> workload_variant(const Workload& w, const Topology& topo, int b, Recompute r);

// The engines' settings (core/schedule.h EngineOptions), with their real systems' defaults: --ddp-first-bucket,
// --ds-reduce-bucket, --ds-prefetch-bucket, --ds-max-reuse-distance, --ds-persistence-threshold, --ds-overlap-comm.
// (--bucket, the Lins and DDP bucket, is bucket_option() below.)
std::vector<OptionSpec> engine_options();
Result<EngineOptions> parse_engine_options(const ParsedArgs& args);
// --ds-quantized-weights / --ds-quantized-gradients on `plan` when its engine takes them (zero3, zeropp); other plans
// are left as they are, as the other DeepSpeed options leave them.
Status apply_engine_quantization(Plan& plan, const EngineOptions& engine);
// parse_plan, then apply_engine_quantization: a plan as a command runs it.
Result<Plan> parse_run_plan(std::string_view text, const Topology& topo, const EngineOptions& engine);

// The gradient bucket U of the Lins and DDP engines that every command (plan, simulate, step) takes by default:
// PyTorch DDP's bucket_cap_mb = 25 (MiB), which docs/engines.md gives the Lins engine's U too. The schedule's own
// defaults (EngineOptions, ScheduleOptions) are the same value.
inline constexpr int64_t kDefaultBucketBytes = int64_t(25) << 20;
static_assert(EngineOptions{}.bucket_bytes == kDefaultBucketBytes &&
                  ScheduleOptions{}.bucket_bytes == kDefaultBucketBytes,
              "the schedule's default bucket and the commands' --bucket default must be one value");
// The largest --bucket: 1 TiB, far above any model's gradient bytes per rank.
inline constexpr uint64_t kMaxBucketBytes = uint64_t(1) << 40;
// --bucket SIZE with the default kDefaultBucketBytes; `extra_help` adds what one command says about it.
OptionSpec bucket_option(const std::string& extra_help = "");
// --bucket in bytes, 1 byte to kMaxBucketBytes.
Result<int64_t> parse_bucket(const ParsedArgs& args);

// Appends `extra` to `base` (to build one command's table from the shared pieces).
std::vector<OptionSpec> concat_options(std::vector<OptionSpec> base, const std::vector<OptionSpec>& extra);

}  // namespace lins
