// The host side of a real system's step, for projections: the Python work a framework does on the host around each
// collective, and the points where its host waits for the device. On a GPU the host runs ahead of the device (it
// only launches work), so host time is free while the host stays ahead; it adds to the step once the host falls
// behind, and a host synchronisation (a `.item()`, a stream synchronize) throws its lead away. The timeline
// (timeline.h, TimelineCosts::host_ahead_s, host_sync and host_wait_op) walks the host as a thread of its own; this
// file says what it spends where, per engine. docs/engines.md ("The host side") gives each cost's source function and
// how the defaults were measured (python -m lins_peers.host_costs).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/schedule/schedule.h"
#include "core/schedule/timeline.h"
#include "core/util/cli.h"
#include "core/util/names.h"
#include "core/util/result.h"

namespace lins {

// Seconds a + b * group: host work that walks the ranks of the collective's group once.
struct HostLine {
  double a_s = 0, b_s = 0;
  double at(int group) const { return a_s + b_s * group; }
};

// The measured host costs (defaults: default_host_costs()).
struct HostCosts {
  // Any collective issued through torch.distributed (c10d's dispatch of one asynchronous collective).
  double collective_issue_s = 0;
  // DeepSpeed ZeRO-3 (partition_parameters.py): issuing one coalesced all-gather (_all_gather_dtype: a flat buffer,
  // one narrow per rank, the local shards copied in), per call.
  HostLine ds_gather_issue;
  // AllGatherCoalescedHandle.wait: per parameter, a narrow per rank, a torch.cat and the view (and on a GPU a
  // record_stream per piece, which the CPU measurement cannot include).
  HostLine ds_gather_wait;
  // reduce_scatter_coalesced (runtime/comm/coalesced_collectives.py): per tensor, a slice per rank, the interleave
  // over ranks x tensors into one torch.cat, and the narrow of the result.
  HostLine ds_reduce_scatter;
  // ZeRO-3's module hooks (parameter_offload.py: pre_ and post_sub_module_forward_function in forward, pre_ and
  // post_sub_module_backward_function in backward: the trace, fetch_sub_module's bookkeeping, release_sub_module),
  // per module hooked and pass, besides the gathers' own costs above.
  double ds_module_hooks_s = 0;
  // PyTorch FSDP2's hooks (_fsdp_state.py, _fsdp_param_group.py: pre_ and post_forward, pre_ and post_backward with
  // the foreach copy-in and copy-out and the reduce-scatter's chunk_cat), per parameter group (a lins module) and
  // pass, besides the collective calls.
  double fsdp2_hooks_s = 0;
  // PyTorch DDP's reducer (C++: the gradient hooks filling a bucket, the bucket's views and its all-reduce), per
  // bucket, besides the collective's issue.
  double ddp_bucket_s = 0;
  // The Lins engine's own issue of one collective (lins's executor, C++), in place of collective_issue_s.
  double lins_issue_s = 0;
};
// The defaults: measured on a two-core x86 host with PyTorch 2.15 (CPU dispatcher) and DeepSpeed 0.19.8; the
// functions timed are the same in DeepSpeed 0.13.2 (docs/engines.md).
HostCosts default_host_costs();

// The host costs a `python -m lins_peers.host_costs` CSV holds (columns kind, a_s, b_s; kinds collective_issue,
// ds_gather_issue, ds_gather_wait, ds_reduce_scatter, ds_module_hooks, fsdp2_hooks, ddp_bucket, lins_issue); kinds the
// file lacks keep their defaults.
Result<HostCosts> read_host_costs(const std::string& path);

// Which host synchronisations DeepSpeed's step has (docs/engines.md).
enum class HostEra {
  paper,  // DeepSpeed 0.10.1 to 0.13.2 (the paper's, with PyTorch 2.1): engine.backward starts with
          // loss.mean().item(), a host wait for the forward of every micro-batch
  today,  // DeepSpeed 0.14 on (the .item() removed, its PR 5135)
};
inline constexpr NameTable<HostEra, 2> kHostEraNames{
    "host model",
    {{
        {HostEra::paper, "paper", "", "DeepSpeed 0.10.1-0.13.2: a loss.item() before every backward"},
        {HostEra::today, "today", "", "DeepSpeed 0.14 and later: no host wait before backward"},
    }}};
static_assert(kHostEraNames.complete(HostEra::today));

struct HostModel {
  HostCosts costs;
  HostEra era = HostEra::paper;
  // The device's work runs in the host's own thread (DeepSpeed and PyTorch on a CPU): the host never runs ahead, its
  // work adds to every step (--host-device cpu). Default: a GPU, which the host only launches work on.
  bool device_in_host_thread = false;
  // DeepSpeed's ZeRO-3 fetches parameters per leaf module: fetch_sub_module (partitioned_param_coordinator.py, run by
  // the pre-forward and pre-backward hook of every module) all-gathers the module's own parameters
  // (parameters(recurse=False)) in one call, so a lins module of several Linear and RMSNorm layers is that many
  // all-gathers in the real system. On (the default of every host model): the projection prices each DeepSpeed
  // ZeRO-3 gather as ds_gather_calls() collectives of those layers' sizes, and the host issues each one.
  bool ds_gather_per_submodule = true;
};

// The collectives the real system issues for `op`: with a host model whose ds_gather_per_submodule is on, a
// DeepSpeed ZeRO-3 engine's (zero3, mics, zeropp) all-gather of a module is one per submodule with parameters (the
// tensors of the module grouped by the name before their last component: "layers.0.attention.wq.weight" is
// submodule "layers.0.attention.wq"); otherwise 1.
int ds_gather_calls(const Schedule& s, const ModelSpec& model, const CommOp& op, const HostModel* host);
// Per lins module, the torch modules whose hooks DeepSpeed's ZeRO-3 runs in that module's forward (and again in its
// backward): every module path that prefixes one of its tensors' names ("layers.0", "layers.0.attention",
// "layers.0.attention.wq"), each counted at the first lins module that has it, the root model with the first; the
// list that holds the layers ("layers", an nn.ModuleList) is hooked but never called, so it is not counted. LLaMA
// as lins_torch builds it: embed 2 (the root, tok_embeddings), attn 7, mlp 5, head 2.
std::vector<int> ds_hooked_modules(const ModelSpec& model);
// The elements of each of those calls, in forward order: per submodule the sum of its tensors, each padded to a
// multiple of the op's group as DeepSpeed partitions a parameter (ceil(numel / group) x group). One element (the
// op's own) when ds_gather_calls is 1.
std::vector<int64_t> ds_gather_call_elems(const Schedule& s, const ModelSpec& model, const CommOp& op,
                                          const HostModel* host);

// The host's program of one step: per program position, the host seconds spent before the action and whether the
// host first waits for the compute stream or for an op. Every engine pays collective_issue_s per issue (the Lins
// engine its own lins_issue_s instead), DDP ddp_bucket_s more per bucket all-reduce, FSDP2 fsdp2_hooks_s before each
// forward and backward task of a module; DeepSpeed's
// ZeRO-3 engines (zero3, mics, zeropp) add their per-rank costs per gather call, per gathered parameter at its wait
// and per reduce-scattered tensor, their module hooks before each forward and backward task
// (ds_module_hooks_s x ds_hooked_modules), and at a gather's wait the host waits for the gather waited before it
// (fetch_sub_module synchronises on the event of the parameter three back, __max_ongoing_fetch_events = 2, which on
// modules of three or more parameters lies in the previous module's gather); every DeepSpeed engine of the paper's
// era waits for the loss before each backward.
struct HostProgram {
  std::vector<double> ahead_s;
  std::vector<char> sync;
  std::vector<int> wait_op;  // the op the host waits to end before the action (-1: none)
  double ahead_total_s() const;
};
HostProgram host_program(const Schedule& s, const ModelSpec& model, const std::vector<Action>& program,
                         const HostModel& host);

// --host-model today|paper|off, --host-costs FILE and --host-device gpu|cpu (lins simulate, lins plan); today (the
// default): the real systems as they run today; off: no host model, the device schedule alone.
std::vector<OptionSpec> host_options();
Result<std::optional<HostModel>> parse_host_model(const ParsedArgs& args);
// The host_model column of a projected row: "off", "paper" or "today".
std::string host_model_name(const HostModel* host);

// Fills costs.host_ahead_s, host_sync and host_wait_op from `hp` (which must outlive `costs`).
void attach_host(TimelineCosts& costs, const HostProgram& hp);

}  // namespace lins
