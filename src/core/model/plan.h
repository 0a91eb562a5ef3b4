// A sharding plan: the 6-tuple (s0_p, s1_p, s0_g, s1_g, s0_os, s1_os) of the sharding space (docs/method.md, "The
// sharding space"), the optimizer-state layout, and the engine (whose collective pattern runs it). Presets name the
// systems of the paper; a 6-tuple written as text ("p=4x1,g=4x1,os=8x1") runs on the Lins engine.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/model/topology.h"
#include "core/util/names.h"
#include "core/util/result.h"

namespace lins {

// Sharding factor of one component: `intra` GPUs inside a node x `inter` nodes.
struct ShardFactor {
  int intra = 1;  // s0_x
  int inter = 1;  // s1_x
  int total() const { return intra * inter; }
  std::string to_string() const { return std::to_string(intra) + "x" + std::to_string(inter); }
  bool operator==(const ShardFactor&) const = default;
};

// Whose collective pattern executes the plan: the engine is part of the plan, so that one 6-tuple can run both on
// its real system's engine and on the Lins engine (the paper's Fig. 16/17). docs/engines.md describes each.
enum class Engine {
  lins,    // per-module gathers and reduce-scatters over s_p, bucketed all-reduce + select & drop, broadcasts
  ddp,     // PyTorch DDP: bucketed all-reduce of gradients over all ranks in the last micro-batch
  zero,    // DeepSpeed ZeRO-1/2/3 (stage from the factors)
  mics,    // DeepSpeed MiCS: ZeRO-3 inside a group, all-reduce of gradient shards across groups at the boundary
  zeropp,  // DeepSpeed ZeRO++ hpZ: ZeRO-3 whose later gathers read a secondary copy of P sharded inside the node
  fsdp,    // PyTorch FSDP2: full shard, or HSDP (shard inside a group, all-reduce across groups)
};
constexpr int kEngineCount = 6;
// The engine column of the step and plan CSVs.
inline constexpr NameTable<Engine, kEngineCount> kEngineNames{
    "engine",
    {{
        {Engine::lins, "lins", "", "Lins"},
        {Engine::ddp, "ddp", "", "PyTorch DDP"},
        {Engine::zero, "zero", "", "DeepSpeed ZeRO-1/2/3"},
        {Engine::mics, "mics", "", "DeepSpeed MiCS"},
        {Engine::zeropp, "zeropp", "", "DeepSpeed ZeRO++ hpZ"},
        {Engine::fsdp, "fsdp", "", "PyTorch FSDP2 / HSDP"},
    }}};
static_assert(kEngineNames.complete(Engine::fsdp));

// How optimizer states are split over the OS group.
enum class OsLayout {
  inter_tensor,  // whole tensors (or whole local slices) per rank, largest first to the least loaded (Lins)
  intra_tensor,  // every module split evenly (DeepSpeed, FSDP)
};
// The os_layout column of the CSVs; a 6-tuple's ",layout=" reads the short aliases too.
inline constexpr NameTable<OsLayout, 2> kOsLayoutNames{
    "optimizer-state layout",
    {{
        {OsLayout::inter_tensor, "inter_tensor", "inter", "whole tensors per rank, as Lins"},
        {OsLayout::intra_tensor, "intra_tensor", "intra", "every module split evenly"},
    }}};
static_assert(kOsLayoutNames.complete(OsLayout::intra_tensor));

struct Plan {
  std::string name;  // preset name ("zero3", "mics:16") or "custom"
  Engine engine = Engine::lins;
  ShardFactor p, g, os;
  OsLayout os_layout = OsLayout::inter_tensor;
  // ZeRO++: the secondary partition of P inside the node (GPUs). FSDP2: reshard_after_forward=k, the group that keeps
  // a 1/k copy of P from forward to backward. 0 = none.
  int hpz_intra = 0;
  bool keep_after_forward = false;  // FSDP2 reshard_after_forward=False: gathered P kept from forward to backward
  // DeepSpeed ZeRO++'s quantized communication (zero3 and zeropp; core/model/quantization.h): qwZ, int8 parameter
  // gathers (zero_quantized_weights), and qgZ, int4 gradients by all-to-all (zero_quantized_gradients). Spelled
  // "+qwz" and "+qgz" after the preset ("zeropp+qwz+qgz"), or set for every such plan by --ds-quantized-weights and
  // --ds-quantized-gradients.
  bool quantized_weights = false;
  bool quantized_gradients = false;

  // "p=4x1,g=4x1,os=8x1" (plus ",hpz=8" for ZeRO++); parse_plan reads it back on the Lins engine.
  std::string to_string() const;
  // "(4,1 | 4,1 | 8,1)", the paper's notation.
  std::string tuple_string() const;
  bool same_factors(const Plan& o) const { return p == o.p && g == o.g && os == o.os; }
};

const char* engine_name(Engine e);
const char* os_layout_name(OsLayout l);
// The zero engine's stage implied by the factors: 3 when P is sharded, 2 when only G and OS are, 1 when only OS, 0
// when nothing is.
int zero_stage(const Plan& plan);

// The presets: one row per system the paper compares (and PyTorch FSDP2's two), read by parse_plan, the help text,
// `lins schema` (which the Python side reads) and the tests that build every preset. A preset's factors follow the
// topology of R GPUs per node x N nodes: `one` is 1x1, `all` is R x N, `group` the preset's group of S GPUs (S x 1
// inside a node, R x S/R across nodes; S is its ':' argument, one node by default).
enum class PresetFactor { one, all, group };
inline constexpr NameTable<PresetFactor, 3> kPresetFactorNames{
    "preset factor",
    {{
        {PresetFactor::one, "one", "", "1x1"},
        {PresetFactor::all, "all", "", "R x N: every GPU"},
        {PresetFactor::group, "group", "", "the preset's group of S GPUs"},
    }}};
static_assert(kPresetFactorNames.complete(PresetFactor::group));
// What a preset's ':' argument is.
enum class PresetArg {
  none,          // takes none
  group_size,    // mics:S, hsdp:S: the group of S GPUs that shards P, G and OS (default: one node)
  secondary,     // zeropp:K: ZeRO++'s secondary partition of P over K GPUs of a node (default: the node)
  fsdp_reshard,  // fsdp:noreshard (keep gathered P from forward to backward) or fsdp:K (keep a 1/K copy)
};
inline constexpr NameTable<PresetArg, 4> kPresetArgNames{
    "preset argument",
    {{
        {PresetArg::none, "none", "", "takes none"},
        {PresetArg::group_size, "group_size", "", "the group of S GPUs"},
        {PresetArg::secondary, "secondary", "", "ZeRO++'s secondary partition of K GPUs"},
        {PresetArg::fsdp_reshard, "fsdp_reshard", "", "noreshard or K"},
    }}};
static_assert(kPresetArgNames.complete(PresetArg::fsdp_reshard));
struct PresetRow {
  std::string_view name;      // what parse_plan reads before any ':'
  std::string_view spelling;  // with its argument, for help text: "mics[:S]"
  std::string_view label;     // how figures and tables name it: "MiCS"
  Engine engine;
  PresetFactor p, g, os;
  PresetArg arg;
  std::string_view arg_what;  // how an error names a bad argument: "plan mics group size"
  std::string_view help;
};
inline constexpr PresetRow kPresets[] = {
    {"ddp", "ddp", "DDP", Engine::ddp, PresetFactor::one, PresetFactor::one, PresetFactor::one, PresetArg::none, "",
     "DDP: everything replicated, gradients all-reduced once per step"},
    {"zero1", "zero1", "ZeRO-1", Engine::zero, PresetFactor::one, PresetFactor::one, PresetFactor::all, PresetArg::none,
     "", "ZeRO-1: optimizer states sharded over all ranks"},
    {"zero2", "zero2", "ZeRO-2", Engine::zero, PresetFactor::one, PresetFactor::all, PresetFactor::all, PresetArg::none,
     "", "ZeRO-2: gradients and optimizer states sharded over all ranks"},
    {"zero3", "zero3", "ZeRO-3", Engine::zero, PresetFactor::all, PresetFactor::all, PresetFactor::all, PresetArg::none,
     "", "ZeRO-3 / FSDP full shard: everything sharded over all ranks"},
    {"mics", "mics[:S]", "MiCS", Engine::mics, PresetFactor::group, PresetFactor::group, PresetFactor::group,
     PresetArg::group_size, "plan mics group size",
     "MiCS: ZeRO-3 inside groups of S GPUs (default one node), all-reduce across groups"},
    {"zeropp", "zeropp[:K]", "ZeRO++", Engine::zeropp, PresetFactor::all, PresetFactor::all, PresetFactor::all,
     PresetArg::secondary, "plan zeropp secondary partition",
     "ZeRO++ hpZ: ZeRO-3 plus a secondary P shard over K GPUs of a node (default all of them)"},
    {"fsdp", "fsdp[:noreshard|:K]", "FSDP2", Engine::fsdp, PresetFactor::all, PresetFactor::all, PresetFactor::all,
     PresetArg::fsdp_reshard, "plan fsdp reshard_after_forward group",
     "PyTorch FSDP2 full shard; noreshard keeps gathered P from forward to backward, K keeps a 1/K copy"},
    {"hsdp", "hsdp[:S]", "HSDP", Engine::fsdp, PresetFactor::group, PresetFactor::group, PresetFactor::group,
     PresetArg::group_size, "plan hsdp shard group size",
     "PyTorch FSDP2 HSDP: shard inside groups of S GPUs (default one node), all-reduce across them"},
};
// The row named `name` (before any ':'), or nullptr.
const PresetRow* find_preset(std::string_view name);
const char* preset_factor_name(PresetFactor f);  // "one", "all", "group"
const char* preset_arg_name(PresetArg a);        // "none", "group_size", "secondary", "fsdp_reshard"

// Preset names accepted by parse_plan, with a one-line description each (for help text): the rows above, then the
// planner's "lins" and the 6-tuple.
std::vector<std::pair<std::string, std::string>> plan_presets();

// Whether a plan's engine runs ZeRO-3's gathers and reduce-scatters, where DeepSpeed accepts qwZ and qgZ (zero3,
// zeropp).
bool accepts_quantization(const Plan& plan);
// Turns qwZ / qgZ on for `plan` (when `weights` / `gradients`), appending "+qwz" / "+qgz" to its name; an error naming
// the presets that accept them when the plan's engine does not.
Status set_quantization(Plan& plan, bool weights, bool gradients);

// Parses a preset ("ddp", "zero1", "zero2", "zero3", "mics", "mics:16", "hsdp", "zeropp", "zeropp:4") or a 6-tuple
// ("p=4x1,g=4x1,os=8x1"; "p=4,g=4,os=8" means intra-node factors; ",layout=intra" selects the even split), then
// validates it on `topo`. A zero3 or zeropp preset may end in "+qwz", "+qgz" or both (ZeRO++'s quantized
// communication). "lins" is not parsed here: the planner chooses it.
Result<Plan> parse_plan(std::string_view text, const Topology& topo);

// Splits a comma-separated list of plans ("ddp,p=4x1,g=4x1,os=8x1,mics:16") into plans: the commas inside a
// 6-tuple (before g=, os=, layout=, hpz=) stay with it.
std::vector<std::string> split_plan_list(std::string_view text);

// Checks every rule of the sharding space (nesting, s_g equal to s_p or s_os, divisibility, fill the node first;
// docs/method.md, "The sharding space") and the limits of the plan's engine. The error names the violated rule and
// the nearest legal plan.
Status validate_plan(const Plan& plan, const Topology& topo);

// Every legal (s0, s1) pair of one component on `topo`: s0 | R, s1 | N, and s1 > 1 implies s0 = R.
std::vector<ShardFactor> legal_factors(const Topology& topo);
// Every legal 6-tuple on the Lins engine (nesting, s_g in {s_p, s_os}, divisibility, node first).
std::vector<Plan> enumerate_legal_plans(const Topology& topo);

}  // namespace lins
