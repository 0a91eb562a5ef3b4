// Shared model/topology/workload options and their parsing; see workload.h.
#include "core/schedule/workload.h"

#include "core/util/units.h"

namespace lins {

std::vector<OptionSpec> model_options(const std::string& default_model) {
  std::string presets;
  for (const auto& n : model_preset_names()) presets += (presets.empty() ? "" : ", ") + n;
  return {
      {"model", 0, "NAME", default_model, "model preset: " + presets},
      {"hidden", 0, "H", "", "hidden size (overrides the preset's)"},
      {"layers", 0, "L", "", "transformer layers (overrides the preset's)"},
      {"heads", 0, "N", "", "attention heads, dividing the hidden size (overrides the preset's)"},
      {"ffn", 0, "F", "", "SwiGLU inner size (overrides the preset's)"},
      {"vocab", 0, "V", "", "vocabulary size (overrides the preset's)"},
  };
}

std::vector<OptionSpec> topology_options(const std::string& default_gpus_per_node, const std::string& default_nodes) {
  return {
      {"gpus-per-node", 0, "R", default_gpus_per_node, "GPUs (ranks) per node"},
      {"nodes", 0, "N", default_nodes, "nodes (a launched job derives it from the world size)"},
  };
}

std::vector<OptionSpec> workload_options(const std::string& default_seq, const std::string& default_micro_batch,
                                         const std::string& default_global_batch_tokens) {
  return {
      {"seq", 0, "TOKENS", default_seq, "sequence length"},
      {"micro-batch", 0, "SEQS", default_micro_batch, "sequences per micro-batch per GPU"},
      {"micro-batches", 0, "M", "",
       "micro-batches (gradient accumulation steps) per step; or give "
       "--global-batch-tokens"},
      {"global-batch-tokens", 0, "TOKENS", default_global_batch_tokens,
       "tokens per step over all GPUs; M = TOKENS / (seq x micro-batch x GPUs), a whole number"},
      {"recompute", 0, "", "", "full activation recomputation (the same as --recompute-mode full)"},
      {"recompute-mode", 0, "none|selective|full", "",
       "activation recomputation: " + kRecomputeNames.described() +
           " (absent: none, or what the planner chooses where it searches)"},
  };
}

Result<Workload> workload_variant(const Workload& w, const Topology& topo, int b, Recompute r) {
  const int64_t per_micro_step = int64_t(w.seq) * b * topo.world();
  if (b < 1 || w.global_batch_tokens % per_micro_step != 0 || w.global_batch_tokens / per_micro_step < 1)
    return make_error("micro-batch " + std::to_string(b) + " does not divide the global batch of " +
                      std::to_string(w.global_batch_tokens) + " tokens into whole micro-batches of seq " +
                      std::to_string(w.seq) + " x " + std::to_string(topo.world()) + " GPUs");
  Workload out = w;
  out.micro_batch_size = b;
  out.micro_batches = static_cast<int>(w.global_batch_tokens / per_micro_step);
  out.recompute = r;
  return out;
}

std::vector<OptionSpec> engine_options() {
  const EngineOptions d;
  return {
      {"ddp-first-bucket", 0, "SIZE", std::to_string(d.ddp_first_bucket_bytes),
       "ddp: the first gradient bucket (PyTorch DDP's 1 MiB; the others are --bucket)"},
      {"ds-reduce-bucket", 0, "ELEMS", std::to_string(d.ds_reduce_bucket_elems),
       "zero1/2/3, mics, zeropp: gradient elements per reduction (DeepSpeed reduce_bucket_size)"},
      {"ds-prefetch-bucket", 0, "ELEMS", std::to_string(d.ds_prefetch_bucket_elems),
       "zero3, mics, zeropp: parameter elements gathered ahead (stage3_prefetch_bucket_size)"},
      {"ds-max-reuse-distance", 0, "ELEMS", std::to_string(d.ds_max_reuse_distance_elems),
       "zero3, mics, zeropp: a module used again within this many elements stays gathered (stage3_max_reuse_distance)"},
      {"ds-persistence-threshold", 0, "ELEMS", std::to_string(d.ds_param_persistence_threshold_elems),
       "zero3, mics, zeropp: modules this small are never gathered in the step (stage3_param_persistence_threshold)"},
      {"ds-overlap-comm", 0, "on|off", "",
       "zero1/2/3, mics, zeropp: reduce gradients on a communication stream (on) or on the compute stream, waited "
       "where issued (off); DeepSpeed overlap_comm, whose default is off for zero1/2 and on for stage 3"},
      {"ds-quantized-weights", 0, "on|off", "off",
       "zero3, zeropp: int8 parameter gathers, two all-gathers of values and block scales (ZeRO++ qwZ, DeepSpeed "
       "zero_quantized_weights); a plan spelled zeropp+qwz has it whatever this says"},
      {"ds-quantized-gradients", 0, "on|off", "off",
       "zero3, zeropp: int4 gradients by all-to-all inside the node, then across nodes, instead of the "
       "reduce-scatter (ZeRO++ qgZ, zero_quantized_gradients; one node reduce-scatters); also spelled zeropp+qgz"},
      {"ds-qgz-average", 0, "mean|deepspeed", "mean",
       "what qgZ leaves each rank: mean, the average over all ranks as the reduce-scatter leaves it; deepspeed, "
       "DeepSpeed's sum divided by the node count (GPUs-per-node times the mean)"},
  };
}

Result<EngineOptions> parse_engine_options(const ParsedArgs& args) {
  EngineOptions e;
  struct Field {
    const char* name;
    int64_t* value;
    bool positive;
  };
  const Field fields[] = {{"ddp-first-bucket", &e.ddp_first_bucket_bytes, true},
                          {"ds-reduce-bucket", &e.ds_reduce_bucket_elems, true},
                          {"ds-prefetch-bucket", &e.ds_prefetch_bucket_elems, false},
                          {"ds-max-reuse-distance", &e.ds_max_reuse_distance_elems, false},
                          {"ds-persistence-threshold", &e.ds_param_persistence_threshold_elems, false}};
  for (const Field& f : fields) {
    auto v = args.get_size(f.name);
    if (!v) return make_error(v.error());
    if (f.positive && *v == 0) return make_error(std::string("--") + f.name + " must be at least 1");
    *f.value = static_cast<int64_t>(*v);
  }
  // An on|off option: nullopt when absent; `absent` says what that means, in the error.
  auto on_off = [&](const char* name, const std::string& absent) -> Result<std::optional<bool>> {
    const std::string v = args.get(name);
    if (v.empty()) return std::optional<bool>();
    if (v != "on" && v != "off")
      return make_error(std::string("--") + name + " " + v + ": valid values are on and off" + absent);
    return std::optional<bool>(v == "on");
  };
  LINS_ASSIGN_OR_RETURN(e.ds_overlap_comm,
                        on_off("ds-overlap-comm", " (absent: DeepSpeed's default, off for zero1/2 and on for zero3, "
                                                  "mics and zeropp)"));
  LINS_ASSIGN_OR_RETURN(auto weights, on_off("ds-quantized-weights", ""));
  LINS_ASSIGN_OR_RETURN(auto gradients, on_off("ds-quantized-gradients", ""));
  e.ds_quantized_weights = weights.value_or(false);
  e.ds_quantized_gradients = gradients.value_or(false);
  if (const std::string v = args.get("ds-qgz-average"); !v.empty()) {
    if (v != "mean" && v != "deepspeed")
      return make_error("--ds-qgz-average " + v +
                        ": valid values are mean (the average over all ranks) and deepspeed (DeepSpeed's sum "
                        "divided by the node count)");
    e.ds_qgz_divide_by_nodes = v == "deepspeed";
  }
  return e;
}

Status apply_engine_quantization(Plan& plan, const EngineOptions& engine) {
  if (!accepts_quantization(plan)) return {};
  return set_quantization(plan, engine.ds_quantized_weights, engine.ds_quantized_gradients);
}

Result<Plan> parse_run_plan(std::string_view text, const Topology& topo, const EngineOptions& engine) {
  LINS_ASSIGN_OR_RETURN(Plan plan, parse_plan(text, topo));
  LINS_TRY(apply_engine_quantization(plan, engine));
  return plan;
}

OptionSpec bucket_option(const std::string& extra_help) {
  return {"bucket", 0, "SIZE", std::to_string(kDefaultBucketBytes >> 20) + "MiB",
          "gradient bucket U of the Lins and DDP engines (DDP's bucket_cap_mb)" + extra_help};
}

Result<int64_t> parse_bucket(const ParsedArgs& args) {
  LINS_ASSIGN_OR_RETURN(auto bucket, args.get_size("bucket"));
  if (bucket == 0 || bucket > kMaxBucketBytes)
    return make_error("--bucket " + args.get("bucket") + " must be between 1 byte and 1TiB (default " +
                      std::to_string(kDefaultBucketBytes >> 20) + "MiB)");
  return static_cast<int64_t>(bucket);
}

std::vector<OptionSpec> concat_options(std::vector<OptionSpec> base, const std::vector<OptionSpec>& extra) {
  base.insert(base.end(), extra.begin(), extra.end());
  return base;
}

Result<ModelSpec> parse_model(const ParsedArgs& args) {
  const std::string name = args.get("model");
  if (name.empty()) {
    std::string presets;
    for (const auto& n : model_preset_names()) presets += (presets.empty() ? "" : ", ") + n;
    return make_error("--model is empty; valid models: " + presets);
  }
  auto preset = make_model_preset(name);
  if (!preset) return make_error(preset.error());
  ModelDims dims = preset->dims;
  bool custom = false;
  struct Field {
    const char* flag;
    int* dim;
  };
  const Field fields[] = {{"hidden", &dims.hidden},
                          {"layers", &dims.layers},
                          {"heads", &dims.heads},
                          {"ffn", &dims.ffn},
                          {"vocab", &dims.vocab}};
  for (const auto& f : fields) {
    if (!args.has(f.flag)) continue;
    auto v = args.get_positive_int(f.flag);
    if (!v) return make_error(v.error());
    *f.dim = *v;
    custom = true;
  }
  if (!custom) return preset;
  auto m = make_model(dims, "custom");
  if (!m) return make_error(m.error());
  return m;
}

Result<Topology> parse_topology(const ParsedArgs& args, int world) {
  if (args.get("gpus-per-node").empty()) return make_error("--gpus-per-node is required (for example 8)");
  auto gpn = args.get_positive_int("gpus-per-node");
  if (!gpn) return make_error(gpn.error());
  if (world > 0) {
    if (!args.has("nodes")) return topology_for_world(world, *gpn);
    auto nodes = args.get_positive_int("nodes");
    if (!nodes) return make_error(nodes.error());
    if (static_cast<long long>(*gpn) * *nodes != world)
      return make_error("--gpus-per-node " + std::to_string(*gpn) + " x --nodes " + std::to_string(*nodes) + " = " +
                        std::to_string(static_cast<long long>(*gpn) * *nodes) + " ranks, but the job has " +
                        std::to_string(world) + "; leave --nodes out to derive it, or launch that many ranks");
    return make_topology(*gpn, *nodes);
  }
  if (args.get("nodes").empty()) return make_error("--nodes is required (for example 1)");
  auto nodes = args.get_positive_int("nodes");
  if (!nodes) return make_error(nodes.error());
  return make_topology(*gpn, *nodes);
}

Result<Workload> parse_workload(const ParsedArgs& args, const ModelSpec& model, const Topology& topo) {
  Workload w;
  w.model = model;
  auto seq = args.get_positive_int("seq");
  if (!seq) return make_error(seq.error());
  auto mbs = args.get_positive_int("micro-batch");
  if (!mbs) return make_error(mbs.error());
  w.seq = *seq;
  w.micro_batch_size = *mbs;
  // A given M fixes the global batch through the micro-batch size, so it fixes that size too.
  w.micro_batch_fixed = args.has("micro-batch") || args.has("micro-batches");
  w.recompute_fixed = args.flag("recompute") || args.has("recompute-mode");
  if (args.flag("recompute")) w.recompute = Recompute::full;
  if (args.has("recompute-mode")) {
    LINS_ASSIGN_OR_RETURN(const Recompute r, args.get_enum("recompute-mode", kRecomputeNames));
    if (args.flag("recompute") && r != Recompute::full)
      return make_error("--recompute is --recompute-mode full, but --recompute-mode " + args.get("recompute-mode") +
                        " was given too; give one of them");
    w.recompute = r;
  }
  const int64_t per_micro_step = int64_t(w.seq) * w.micro_batch_size * topo.world();  // tokens of one micro-batch
  if (args.has("micro-batches") && args.has("global-batch-tokens"))
    return make_error(
        "give either --micro-batches or --global-batch-tokens, not both (M = tokens / (seq x "
        "micro-batch x GPUs) = tokens / " +
        std::to_string(per_micro_step) + ")");
  if (args.has("micro-batches") || args.get("global-batch-tokens").empty()) {
    if (args.get("micro-batches").empty()) {
      w.micro_batches = 1;
    } else {
      auto m = args.get_positive_int("micro-batches");
      if (!m) return make_error(m.error());
      w.micro_batches = *m;
    }
  } else {
    auto tokens = args.get_size("global-batch-tokens");
    if (!tokens) return make_error(tokens.error());
    const uint64_t t = *tokens;
    if (t == 0 || t % static_cast<uint64_t>(per_micro_step) != 0 ||
        t / static_cast<uint64_t>(per_micro_step) > 1000000000ull) {
      const uint64_t lower = t / per_micro_step * per_micro_step;
      std::string hint = "; valid values are multiples of " + std::to_string(per_micro_step) + " such as ";
      if (lower > 0) hint += std::to_string(lower) + " or ";
      hint += std::to_string(lower + per_micro_step) + " (or give --micro-batches M instead)";
      return make_error("--global-batch-tokens " + args.get("global-batch-tokens") + " = " + std::to_string(t) +
                        " tokens is not a whole positive number of micro-batches of seq " + std::to_string(w.seq) +
                        " x micro-batch " + std::to_string(w.micro_batch_size) + " x " + std::to_string(topo.world()) +
                        " GPUs = " + std::to_string(per_micro_step) + " tokens" + hint);
    }
    w.micro_batches = static_cast<int>(t / per_micro_step);
  }
  w.global_batch_tokens = per_micro_step * w.micro_batches;
  return w;
}

}  // namespace lins
