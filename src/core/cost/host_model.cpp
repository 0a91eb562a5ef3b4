// The host side of a real system's step; see host_model.h.
#include "core/cost/host_model.h"

#include <algorithm>
#include <set>
#include <string>
#include <string_view>

#include "core/schedule/engine_table.h"
#include "core/util/csv.h"

namespace lins {

HostCosts default_host_costs() {
  // data/host/host_costs.csv: fitted by `python -m lins_peers.host_costs --out data/host --repeats 300` with the
  // peers' Python (scripts/install-peers.sh: PyTorch 2.15, DeepSpeed 0.19.8) on one core of a two-core x86 host;
  // the fits' largest relative errors over groups of 2 to 1024 are 2%, 2% and 6%; ds_module_hooks measured later by
  // `--kinds ds_module_hooks --hook-steps 40` into the same file (the other kinds kept; repeated runs on the
  // two-core host gave 147 to 166 us); fsdp2_hooks, ddp_bucket and lins_issue by `--kinds
  // fsdp2_hooks,ddp_bucket,lins_issue --hook-steps 40 --ddp-steps 400` (repeated runs: 488 to 610 us, 4 to 8 us with
  // outliers to 21 us, 1.0 to 1.8 us). The unit test HostModel.DefaultsAreTheMeasuredFile holds these to that file.
  HostCosts c;
  c.collective_issue_s = 3.976e-05;
  c.ds_gather_issue = {7.506e-06, 1.845e-06};
  c.ds_gather_wait = {7.814e-06, 2.406e-06};
  c.ds_reduce_scatter = {9.117e-06, 1.722e-06};
  c.ds_module_hooks_s = 1.659e-04;
  c.fsdp2_hooks_s = 5.624e-04;
  c.ddp_bucket_s = 8.049e-06;
  c.lins_issue_s = 1.172e-06;
  return c;
}

Result<HostCosts> read_host_costs(const std::string& path) {
  auto text = read_text_file(path);
  if (!text) return make_error(text.error());
  auto table = CsvTable::parse(*text, path, "a host-costs CSV (python -m lins_peers.host_costs)");
  if (!table) return make_error(table.error());
  LINS_TRY(table->require({"kind", "a_s", "b_s"}));
  HostCosts c = default_host_costs();
  for (std::size_t r = 0; r < table->rows(); ++r) {
    LINS_TRY(table->check_width(r));
    const std::string& kind = table->text(r, "kind");
    auto a = table->number(r, "a_s");
    if (!a) return make_error(a.error());
    auto b = table->number(r, "b_s");
    if (!b) return make_error(b.error());
    if (*a < 0 || *b < 0) return make_error(table->at(r) + ": host costs cannot be negative");
    if (kind == "collective_issue")
      c.collective_issue_s = *a + *b;  // issued once, whatever the group (b is 0 in the fit)
    else if (kind == "ds_gather_issue")
      c.ds_gather_issue = {*a, *b};
    else if (kind == "ds_gather_wait")
      c.ds_gather_wait = {*a, *b};
    else if (kind == "ds_reduce_scatter")
      c.ds_reduce_scatter = {*a, *b};
    else if (kind == "ds_module_hooks")
      c.ds_module_hooks_s = *a + *b;  // per module and pass, whatever the group (b is 0)
    else if (kind == "fsdp2_hooks")
      c.fsdp2_hooks_s = *a + *b;  // per parameter group and pass (b is 0)
    else if (kind == "ddp_bucket")
      c.ddp_bucket_s = *a + *b;  // per bucket (b is 0)
    else if (kind == "lins_issue")
      c.lins_issue_s = *a + *b;  // per issue (b is 0)
    else
      return make_error(table->at(r) + ": unknown kind '" + kind +
                        "'; valid: collective_issue, ds_gather_issue, ds_gather_wait, ds_reduce_scatter, "
                        "ds_module_hooks, fsdp2_hooks, ddp_bucket, lins_issue");
  }
  return c;
}

std::vector<OptionSpec> host_options() {
  return {
      {"host-model", 0, "NAME", "today",
       "the real systems' host side: today (the systems as they run today: their Python work around each "
       "collective, DeepSpeed's timed from its own code, DeepSpeed 0.14 on), paper (the same with DeepSpeed "
       "0.10-0.13's loss.item() before every backward) or off (the device schedule alone, as data/ was projected)"},
      {"host-costs", 0, "FILE", "",
       "host costs measured by python -m lins_peers.host_costs (host_costs.csv) instead of the built-in ones"},
      {"host-device", 0, "gpu|cpu", "gpu",
       "with a host model: gpu (the host launches work and runs ahead of the device) or cpu (the work runs in the "
       "host's thread, as PyTorch on a CPU: every host cost adds to the step)"},
  };
}

Result<std::optional<HostModel>> parse_host_model(const ParsedArgs& args) {
  const std::string name = args.get("host-model");
  const std::string device = args.get("host-device");
  if (device != "gpu" && device != "cpu")
    return make_error("--host-device " + device + ": valid values are gpu and cpu");
  if (name == "off") {
    if (!args.get("host-costs").empty())
      return make_error("--host-costs needs a host model: give --host-model paper or --host-model today");
    if (args.has("host-device"))
      return make_error("--host-device needs a host model: give --host-model paper or --host-model today");
    return std::optional<HostModel>();
  }
  auto era = kHostEraNames.parse(name, "--host-model", {"off"});
  if (!era) return make_error(era.error());
  HostModel h;
  h.era = *era;
  h.costs = default_host_costs();
  h.device_in_host_thread = device == "cpu";
  if (const std::string path = args.get("host-costs"); !path.empty()) {
    auto c = read_host_costs(path);
    if (!c) return make_error("--host-costs: " + c.error());
    h.costs = *c;
  }
  return std::optional<HostModel>(h);
}

std::string host_model_name(const HostModel* host) { return host ? kHostEraNames.name(host->era) : "off"; }

double HostProgram::ahead_total_s() const {
  double t = 0;
  for (double a : ahead_s) t += a;
  return t;
}

namespace {

bool is_deepspeed(Engine e) { return engine_row(e).host == HostFamily::deepspeed; }

// The parameters (tensors) one op moves: a module's, or, for a reduce-scatter bucket of whole modules (the only
// bucket ops the host model prices), those of the modules whose shards start inside its local range.
int tensors_of(const Schedule& s, const ModelSpec& model, const CommOp& op) {
  if (op.module >= 0) return static_cast<int>(model.modules[static_cast<std::size_t>(op.module)].tensors.size());
  const int64_t begin = op.local_offset;
  const int64_t end = op.local_offset + op.elems / std::max(1, op.group.size());  // the local part of the input
  int n = 0;
  for (std::size_t m = 0; m < s.layout.modules.size(); ++m) {
    const int64_t at = s.layout.modules[m].local_offset;
    if (at >= begin && at < end) n += static_cast<int>(model.modules[m].tensors.size());
  }
  return std::max(n, 1);
}

// The submodule a tensor belongs to: its name without the last component ("layers.0.attention.wq.weight" ->
// "layers.0.attention.wq").
std::string_view submodule_of(std::string_view tensor) {
  const auto dot = tensor.rfind('.');
  return dot == std::string_view::npos ? tensor.substr(0, 0) : tensor.substr(0, dot);
}

bool gathers_per_submodule(const Schedule& s, const CommOp& op, const HostModel* host) {
  return host && host->ds_gather_per_submodule && is_deepspeed(s.plan.engine) && zero_stage(s.plan) == 3 &&
         op.kind == CollKind::all_gather && op.module >= 0;
}

}  // namespace

std::vector<int64_t> ds_gather_call_elems(const Schedule& s, const ModelSpec& model, const CommOp& op,
                                          const HostModel* host) {
  if (!gathers_per_submodule(s, op, host)) return {op.elems};
  const int64_t g = std::max(1, op.group.size());
  std::vector<int64_t> out;
  std::string_view current;
  for (int t : model.modules[static_cast<std::size_t>(op.module)].tensors) {
    const TensorSpec& ts = model.tensors[static_cast<std::size_t>(t)];
    const std::string_view sub = submodule_of(ts.name);
    if (out.empty() || sub != current) {
      out.push_back(0);
      current = sub;
    }
    out.back() += (ts.elems + g - 1) / g * g;
  }
  if (out.empty()) out.push_back(op.elems);
  return out;
}

int ds_gather_calls(const Schedule& s, const ModelSpec& model, const CommOp& op, const HostModel* host) {
  return static_cast<int>(ds_gather_call_elems(s, model, op, host).size());
}

std::vector<int> ds_hooked_modules(const ModelSpec& model) {
  std::vector<int> out(model.modules.size(), 0);
  std::set<std::string, std::less<>> seen;
  for (std::size_t m = 0; m < model.modules.size(); ++m) {
    if (m == 0) out[m] = 1;  // the root model
    for (int t : model.modules[m].tensors) {
      const std::string& name = model.tensors[static_cast<std::size_t>(t)].name;
      for (std::size_t dot = name.find('.'); dot != std::string::npos; dot = name.find('.', dot + 1)) {
        const std::string_view path(name.data(), dot);
        const bool list = dot + 1 < name.size() && name[dot + 1] >= '0' && name[dot + 1] <= '9';
        if (!list && seen.emplace(path).second) ++out[m];
      }
    }
  }
  return out;
}

HostProgram host_program(const Schedule& s, const ModelSpec& model, const std::vector<Action>& program,
                         const HostModel& host) {
  HostProgram hp;
  hp.ahead_s.assign(program.size(), 0.0);
  hp.sync.assign(program.size(), 0);
  hp.wait_op.assign(program.size(), -1);
  int last_gather_waited = -1;
  const HostCosts& c = host.costs;
  const HostFamily family = engine_row(s.plan.engine).host;
  const bool ds = family == HostFamily::deepspeed;
  const bool stage3 = ds && zero_stage(s.plan) == 3;
  const std::vector<int> hooked = stage3 ? ds_hooked_modules(model) : std::vector<int>();
  const double issue_s = family == HostFamily::lins ? c.lins_issue_s : c.collective_issue_s;
  for (std::size_t pos = 0; pos < program.size(); ++pos) {
    const Action& a = program[pos];
    if (host.device_in_host_thread) hp.sync[pos] = 1;  // nothing runs ahead of the host's own thread
    if (a.kind == Action::Kind::compute) {
      const ComputeTask t = s.shape.task(a.index);
      // ZeRO-3's hooks of the module's torch modules run before (and after) its forward and its backward.
      if (stage3 && t.kind != TaskKind::optimizer && t.module >= 0 &&
          static_cast<std::size_t>(t.module) < hooked.size())
        hp.ahead_s[pos] += c.ds_module_hooks_s * hooked[static_cast<std::size_t>(t.module)];
      // FSDP2's hooks of the module's parameter group run around its forward and its backward.
      if (family == HostFamily::fsdp && t.kind != TaskKind::optimizer && t.module >= 0)
        hp.ahead_s[pos] += c.fsdp2_hooks_s;
      // engine.backward() of the paper's DeepSpeed starts with loss.mean().item(): the host waits for the loss,
      // which the last forward task produced, before it launches anything of the backward.
      if (ds && host.era == HostEra::paper && t.kind == TaskKind::forward && t.module == s.shape.modules - 1 &&
          pos + 1 < program.size())
        hp.sync[pos + 1] = 1;
      continue;
    }
    const CommOp& op = s.ops[static_cast<std::size_t>(a.index)];
    const int group = op.group.size();
    if (a.kind == Action::Kind::issue) {
      const int calls = ds_gather_calls(s, model, op, &host);  // 1 but for DeepSpeed's per-submodule gathers
      double w = issue_s * calls;
      if (family == HostFamily::ddp && op.kind == CollKind::all_reduce) w += c.ddp_bucket_s;
      if (stage3 && op.kind == CollKind::all_gather) w += c.ds_gather_issue.at(group) * calls;
      if (stage3 && op.kind == CollKind::reduce_scatter) w += c.ds_reduce_scatter.at(group) * tensors_of(s, model, op);
      hp.ahead_s[pos] = w;
    } else if (a.kind == Action::Kind::wait && !a.carried && stage3 && op.kind == CollKind::all_gather &&
               op.purpose != Purpose::update_gather) {
      hp.ahead_s[pos] = c.ds_gather_wait.at(group) * tensors_of(s, model, op);
      hp.wait_op[pos] = last_gather_waited;
      last_gather_waited = a.index;
    }
  }
  return hp;
}

void attach_host(TimelineCosts& costs, const HostProgram& hp) {
  costs.host_ahead_s = [&hp](int pos) { return hp.ahead_s[static_cast<std::size_t>(pos)]; };
  costs.host_sync = [&hp](int pos) { return hp.sync[static_cast<std::size_t>(pos)] != 0; };
  costs.host_wait_op = [&hp](int pos) { return hp.wait_op[static_cast<std::size_t>(pos)]; };
}

}  // namespace lins
