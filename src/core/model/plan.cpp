// Plans: presets, the text syntax, the rules of the sharding space (docs/method.md), and the legal space; see plan.h.
#include "core/model/plan.h"

#include <cmath>
#include <limits>
#include <sstream>

#include "core/util/text.h"
#include "core/util/units.h"

namespace lins {
namespace {

bool divides(int a, int b) { return a > 0 && b % a == 0; }

// "4x1" or "4" (intra only).
Result<ShardFactor> parse_factor(const std::string& text, const std::string& key) {
  auto parts = split(text, 'x');
  if (parts.size() > 2 || parts[0].empty())
    return make_error("plan: '" + key + "=" + text + "' is not a factor; write INTRAxINTER such as 4x1 or 8x16");
  auto intra = parse_positive_int(parts[0], "plan: " + key + " intra-node factor");
  if (!intra) return make_error(intra.error());
  int inter = 1;
  if (parts.size() == 2) {
    auto v = parse_positive_int(parts[1], "plan: " + key + " inter-node factor");
    if (!v) return make_error(v.error());
    inter = *v;
  }
  return ShardFactor{*intra, inter};
}

double distance(const Plan& a, const Plan& b) {
  auto d = [](int x, int y) { return std::fabs(std::log2(double(x)) - std::log2(double(y))); };
  return d(a.p.intra, b.p.intra) + d(a.p.inter, b.p.inter) + d(a.g.intra, b.g.intra) + d(a.g.inter, b.g.inter) +
         d(a.os.intra, b.os.intra) + d(a.os.inter, b.os.inter);
}

std::string nearest_legal(const Plan& plan, const Topology& topo) {
  const Plan* best = nullptr;
  double best_d = std::numeric_limits<double>::max();
  auto legal = enumerate_legal_plans(topo);
  for (const auto& c : legal) {
    double d = distance(plan, c);
    if (d < best_d) best_d = d, best = &c;
  }
  return best ? "; nearest legal plan: " + best->to_string() : "";
}

Plan make_preset(std::string name, Engine engine, ShardFactor p, ShardFactor g, ShardFactor os) {
  Plan plan;
  plan.name = std::move(name);
  plan.engine = engine;
  plan.p = p;
  plan.g = g;
  plan.os = os;
  plan.os_layout = OsLayout::intra_tensor;
  return plan;
}

// MiCS group of `size` GPUs on `topo`: inside a node when size <= R, else whole nodes.
Result<ShardFactor> group_factor(int size, const Topology& topo, const std::string& preset) {
  const int R = topo.gpus_per_node, N = topo.nodes;
  if (size <= R) {
    if (!divides(size, R))
      return make_error(preset + ": group size " + std::to_string(size) + " must divide the " + std::to_string(R) +
                        " GPUs per node (or be a multiple of them)");
    return ShardFactor{size, 1};
  }
  if (size % R != 0 || !divides(size / R, N))
    return make_error(preset + ": group size " + std::to_string(size) + " must be a multiple of the " +
                      std::to_string(R) + " GPUs per node that divides the world of " + std::to_string(R * N));
  return ShardFactor{R, size / R};
}

}  // namespace

const char* engine_name(Engine e) { return kEngineNames.name(e); }
const char* os_layout_name(OsLayout l) { return kOsLayoutNames.name(l); }

int zero_stage(const Plan& plan) {
  if (plan.p.total() > 1) return 3;
  if (plan.g.total() > 1) return 2;
  if (plan.os.total() > 1) return 1;
  return 0;
}

std::string Plan::to_string() const {
  std::string s = "p=" + p.to_string() + ",g=" + g.to_string() + ",os=" + os.to_string();
  if (hpz_intra > 0) s += ",hpz=" + std::to_string(hpz_intra);
  return s;
}

std::string Plan::tuple_string() const {
  std::ostringstream os_;
  os_ << "(" << p.intra << "," << p.inter << " | " << g.intra << "," << g.inter << " | " << os.intra << "," << os.inter
      << ")";
  return os_.str();
}

const PresetRow* find_preset(std::string_view name) {
  for (const auto& row : kPresets)
    if (row.name == name) return &row;
  return nullptr;
}

const char* preset_factor_name(PresetFactor f) { return kPresetFactorNames.name(f); }
const char* preset_arg_name(PresetArg a) { return kPresetArgNames.name(a); }

std::vector<std::pair<std::string, std::string>> plan_presets() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& row : kPresets) out.emplace_back(std::string(row.spelling), std::string(row.help));
  out.emplace_back("lins", "the planner's choice: the legal 6-tuple with the least communication that fits in memory");
  out.emplace_back("p=AxB,g=CxD,os=ExF", "any 6-tuple, run on the Lins engine");
  return out;
}

bool accepts_quantization(const Plan& plan) {
  return plan.engine == Engine::zeropp || (plan.engine == Engine::zero && zero_stage(plan) == 3);
}

Status set_quantization(Plan& plan, bool weights, bool gradients) {
  if (!weights && !gradients) return {};
  if (!accepts_quantization(plan))
    return make_error("plan " + plan.name + ": quantized communication (" +
                      std::string(weights ? "+qwz / --ds-quantized-weights" : "+qgz / --ds-quantized-gradients") +
                      ") is ZeRO-3's (DeepSpeed zero_quantized_weights and zero_quantized_gradients): use it with "
                      "zero3 or zeropp");
  if (weights && !plan.quantized_weights) plan.name += "+qwz";
  if (gradients && !plan.quantized_gradients) plan.name += "+qgz";
  plan.quantized_weights = plan.quantized_weights || weights;
  plan.quantized_gradients = plan.quantized_gradients || gradients;
  return {};
}

Result<Plan> parse_plan(std::string_view text_in, const Topology& topo) {
  // "+qwz" and "+qgz" after a preset: ZeRO++'s quantized communication.
  std::string spelled = trim(text_in);
  bool qwz = false, qgz = false;
  while (true) {
    const auto plus = spelled.rfind('+');
    if (plus == std::string::npos) break;
    const std::string suffix = spelled.substr(plus + 1);
    if (suffix == "qwz" && !qwz)
      qwz = true;
    else if (suffix == "qgz" && !qgz)
      qgz = true;
    else
      return make_error("plan '" + trim(text_in) + "': '+" + suffix +
                        "' is not a quantization; valid: +qwz (int8 weights) and +qgz (int4 gradients), each once, "
                        "after zero3 or zeropp");
    spelled = spelled.substr(0, plus);
  }
  const std::string text = spelled;
  const int R = topo.gpus_per_node, N = topo.nodes;
  std::string base = text, arg;
  if (auto colon = text.find(':'); colon != std::string::npos) {
    base = text.substr(0, colon);
    arg = text.substr(colon + 1);
  }
  Plan plan;
  if (const PresetRow* row = find_preset(base)) {
    // The argument: a group size or a secondary partition (default one node), or FSDP2's reshard choice.
    int size = R;
    bool keep_after_forward = false;
    int reshard_k = 0;
    switch (row->arg) {
      case PresetArg::none:
        if (!arg.empty()) return make_error("plan preset '" + base + "' takes no ':' argument, got '" + text + "'");
        break;
      case PresetArg::group_size:
      case PresetArg::secondary:
        if (!arg.empty()) {
          auto v = parse_positive_int(arg, std::string(row->arg_what));
          if (!v) return make_error(v.error());
          size = *v;
        }
        break;
      case PresetArg::fsdp_reshard:
        if (arg == "noreshard") {
          keep_after_forward = true;
        } else if (!arg.empty()) {
          auto v = parse_positive_int(arg, std::string(row->arg_what));
          if (!v) return make_error(v.error() + " (write fsdp, fsdp:noreshard or fsdp:K with K dividing the world)");
          if (*v < 2)
            return make_error("plan fsdp:" + arg + ": K must be at least 2 (use fsdp:noreshard to keep all of P)");
          reshard_k = *v;
        }
        break;
    }
    ShardFactor group{1, 1};
    if (row->p == PresetFactor::group || row->g == PresetFactor::group || row->os == PresetFactor::group) {
      auto f = group_factor(size, topo, base + ":" + std::to_string(size));
      if (!f) return make_error(f.error());
      group = *f;
    }
    auto factor = [&](PresetFactor kind) {
      return kind == PresetFactor::one ? ShardFactor{1, 1} : kind == PresetFactor::all ? ShardFactor{R, N} : group;
    };
    // The name keeps what was written: the argument when one was given (fsdp's whole text, as before).
    const std::string name = row->arg == PresetArg::fsdp_reshard ? text : arg.empty() ? base : base + ":" + arg;
    plan = make_preset(name, row->engine, factor(row->p), factor(row->g), factor(row->os));
    plan.keep_after_forward = keep_after_forward;
    if (row->arg == PresetArg::secondary) plan.hpz_intra = size;
    if (row->arg == PresetArg::fsdp_reshard) plan.hpz_intra = reshard_k;
  } else if (base == "lins") {
    return make_error(
        "plan 'lins' is chosen by the planner; this command needs an explicit plan (a preset or "
        "p=AxB,g=CxD,os=ExF)");
  } else if (text.find('=') != std::string::npos) {
    plan.name = "custom";
    plan.engine = Engine::lins;
    plan.os_layout = OsLayout::inter_tensor;
    bool seen_p = false, seen_g = false, seen_os = false;
    for (const auto& item : split(text, ',')) {
      auto eq = item.find('=');
      if (eq == std::string::npos)
        return make_error("plan: '" + item +
                          "' is not KEY=VALUE; write p=AxB,g=CxD,os=ExF (for example "
                          "p=4x1,g=4x1,os=8x1)");
      std::string key = trim(item.substr(0, eq)), value = trim(item.substr(eq + 1));
      if (key == "p" || key == "g" || key == "os") {
        bool& seen = key == "p" ? seen_p : key == "g" ? seen_g : seen_os;
        if (seen) return make_error("plan: '" + key + "' given twice in '" + text + "'");
        seen = true;
        auto f = parse_factor(value, key);
        if (!f) return make_error(f.error());
        (key == "p" ? plan.p : key == "g" ? plan.g : plan.os) = *f;
      } else if (key == "layout") {
        auto layout = kOsLayoutNames.find(value);
        if (!layout)
          return make_error("plan: layout must be one of " + kOsLayoutNames.described() +
                            " (or its short form inter, intra); got '" + value + "'");
        plan.os_layout = *layout;
      } else {
        return make_error("plan: unknown key '" + key + "' in '" + text + "'; valid keys: p, g, os, layout");
      }
    }
    if (!seen_p || !seen_g || !seen_os)
      return make_error("plan: '" + text + "' must give all of p, g and os (for example p=4x1,g=4x1,os=8x1)");
  } else {
    std::string names;
    for (auto& [n, d] : plan_presets()) names += (names.empty() ? "" : ", ") + n;
    return make_error("unknown plan '" + text + "'; valid plans: " + names);
  }
  LINS_TRY(validate_plan(plan, topo));
  LINS_TRY(set_quantization(plan, qwz, qgz));
  return plan;
}

std::vector<std::string> split_plan_list(std::string_view text) {
  std::vector<std::string> out;
  for (const auto& word : split(text, ',')) {
    if (word.empty()) continue;
    const bool continues_tuple = !out.empty() && out.back().rfind("p=", 0) == 0 &&
                                 (word.rfind("g=", 0) == 0 || word.rfind("os=", 0) == 0 ||
                                  word.rfind("layout=", 0) == 0 || word.rfind("hpz=", 0) == 0);
    if (continues_tuple)
      out.back() += "," + word;
    else
      out.push_back(word);
  }
  return out;
}

Status validate_plan(const Plan& plan, const Topology& topo) {
  const int R = topo.gpus_per_node, N = topo.nodes;
  const std::string where =
      "plan " + plan.to_string() + " on " + std::to_string(R) + " GPUs/node x " + std::to_string(N) + " nodes";
  struct Named {
    const char* name;
    ShardFactor f;
  };
  const Named comps[] = {{"p", plan.p}, {"g", plan.g}, {"os", plan.os}};
  for (const auto& c : comps) {
    if (c.f.intra < 1 || c.f.inter < 1) return make_error(where + ": factor " + c.name + " must be at least 1x1");
  }
  for (const auto& c : comps) {
    if (!divides(c.f.intra, R) || !divides(c.f.inter, N))
      return make_error(where + " breaks the divisibility rule: s0_" + std::string(c.name) + "=" +
                        std::to_string(c.f.intra) + " must divide " + std::to_string(R) + " and s1_" + c.name + "=" +
                        std::to_string(c.f.inter) + " must divide " + std::to_string(N) + nearest_legal(plan, topo));
  }
  for (const auto& c : comps) {
    if (c.f.inter > 1 && c.f.intra != R)
      return make_error(where + " breaks the fill-the-node-first rule: s1_" + std::string(c.name) + "=" +
                        std::to_string(c.f.inter) + " > 1 needs s0_" + c.name + "=" + std::to_string(R) + ", got " +
                        std::to_string(c.f.intra) + nearest_legal(plan, topo));
  }
  auto nested = [](ShardFactor a, ShardFactor b) { return divides(a.intra, b.intra) && divides(a.inter, b.inter); };
  if (!nested(plan.p, plan.g) || !nested(plan.g, plan.os))
    return make_error(where +
                      " breaks the nesting rule: s_p <= s_g <= s_os on each axis, each dividing the next "
                      "(groups are blocks of consecutive ranks)" +
                      nearest_legal(plan, topo));
  if (!(plan.g == plan.p) && !(plan.g == plan.os))
    return make_error(where + " breaks the dependency rule: s_g must equal s_p or s_os" + nearest_legal(plan, topo));
  if (plan.engine == Engine::zeropp) {
    if (plan.hpz_intra < 1 || !divides(plan.hpz_intra, R))
      return make_error(where + ": the ZeRO++ secondary partition (hpz=" + std::to_string(plan.hpz_intra) +
                        ") must divide the " + std::to_string(R) + " GPUs per node");
  } else if (plan.engine == Engine::fsdp) {
    if (plan.hpz_intra != 0 &&
        (plan.hpz_intra < 2 || !divides(plan.hpz_intra, plan.p.total()) || !divides(plan.hpz_intra, R)))
      return make_error(where + ": FSDP2's reshard_after_forward=" + std::to_string(plan.hpz_intra) +
                        " must be a divisor of the shard group of " + std::to_string(plan.p.total()) + " and of the " +
                        std::to_string(R) + " GPUs per node, at least 2");
    if (plan.hpz_intra != 0 && plan.keep_after_forward)
      return make_error(where + ": FSDP2 keeps either all of P (noreshard) or a 1/K copy, not both");
  } else if (plan.hpz_intra != 0) {
    return make_error(where + ": a secondary partition (hpz) exists only on the zeropp and fsdp engines");
  }
  if ((plan.engine == Engine::mics || plan.engine == Engine::fsdp) && !(plan.p == plan.g && plan.g == plan.os))
    return make_error(where + ": the " + engine_name(plan.engine) + " engine shards P, G and OS with one group size");
  if (plan.engine == Engine::zero && !(plan.p == plan.g || plan.p.total() == 1))
    return make_error(where + ": DeepSpeed ZeRO shards P only together with G and OS (stage 3)");
  return {};
}

std::vector<ShardFactor> legal_factors(const Topology& topo) {
  std::vector<ShardFactor> out;
  for (int s0 = 1; s0 <= topo.gpus_per_node; ++s0)
    if (divides(s0, topo.gpus_per_node)) out.push_back({s0, 1});
  // The divisors of the node count in ascending order, by trial division up to its square root (a walk over every
  // count would cost as much as the cluster is large).
  std::vector<int> small, large;
  for (int64_t d = 1; d * d <= topo.nodes; ++d) {
    if (topo.nodes % d) continue;
    small.push_back(int(d));
    if (d * d != topo.nodes) large.push_back(int(topo.nodes / d));
  }
  small.insert(small.end(), large.rbegin(), large.rend());
  for (int s1 : small)
    if (s1 >= 2) out.push_back({topo.gpus_per_node, s1});
  return out;
}

std::vector<Plan> enumerate_legal_plans(const Topology& topo) {
  std::vector<Plan> out;
  const auto pairs = legal_factors(topo);
  auto nested = [](ShardFactor a, ShardFactor b) { return divides(a.intra, b.intra) && divides(a.inter, b.inter); };
  for (const auto& os : pairs) {
    for (const auto& p : pairs) {
      if (!nested(p, os)) continue;
      for (int choice = 0; choice < 2; ++choice) {
        const ShardFactor g = choice == 0 ? p : os;
        if (choice == 1 && os == p) continue;  // g = p = os counted once
        Plan plan;
        plan.name = "custom";
        plan.engine = Engine::lins;
        plan.p = p;
        plan.g = g;
        plan.os = os;
        plan.os_layout = OsLayout::inter_tensor;
        out.push_back(plan);
      }
    }
  }
  return out;
}

}  // namespace lins
