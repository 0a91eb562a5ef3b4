// Network files (TOML, read with toml++): checks, derived alpha-beta terms and the compiled-in presets; see
// network_spec.h.
#include "core/cost/network_spec.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <sstream>

#include "core/cost/gpu_peaks.h"
#include "core/util/text.h"

// Header-only, without exceptions: a parse error comes back as a value with its position.
#define TOML_HEADER_ONLY 1
#define TOML_EXCEPTIONS 0
#include <toml++/toml.h>

namespace lins {
namespace {

// {file name stem, file text} of every data/networks/*.toml, generated at configure time.
struct PresetText {
  const char* stem;
  const char* text;
};
#include "network_presets.inc"

// The former format (`key = value` lines with bare words, data/networks/*.network) is refused with this advice.
constexpr const char* kOldFormatAdvice =
    "network files are TOML since December 2026; convert it: quote text values (name = \"my-cluster\", gpu_arch = "
    "\"sm80\"), write yes/no as true/false, keep numbers as they are, and name the file .toml (as "
    "data/networks/*.toml; "
    "docs/cost-model.md)";

// What a key's value must be in TOML; a value of another type is named in the error ("\"fast\" is text").
enum class Kind { text, whole, number, boolean };

// One key of a table whose values fill a T (the network's top-level keys: NetworkSpec; [contention]: Contention): what
// it accepts (for the error) and how it sets the T from a value of its kind.
template <class T>
struct KeyOf {
  const char* name;
  Kind kind;
  std::string valid;
  std::function<bool(const toml::node&, T&)> set;
};
using Key = KeyOf<NetworkSpec>;

template <class T>
std::function<bool(const toml::node&, T&)> number_in(double lo, double hi, bool lo_open,
                                                     std::function<void(T&, double)> put) {
  return [=](const toml::node& v, T& s) {
    const auto x = v.value<double>();  // an integer or a floating-point value
    if (!x || !std::isfinite(*x) || *x > hi || *x < lo || (lo_open && *x == lo)) return false;
    put(s, *x);
    return true;
  };
}

std::function<bool(const toml::node&, NetworkSpec&)> whole_in(int lo, int hi,
                                                              std::function<void(NetworkSpec&, int)> put) {
  return [=](const toml::node& v, NetworkSpec& s) {
    const auto x = v.value<int64_t>();
    if (!x || *x < lo || *x > hi) return false;
    put(s, static_cast<int>(*x));
    return true;
  };
}

template <class T>
std::function<bool(const toml::node&, T&)> flag(std::function<void(T&, bool)> put) {
  return [=](const toml::node& v, T& s) {
    put(s, v.as_boolean()->get());
    return true;
  };
}

// A text key whose value must be one of `names`; `put` gets the index of the one given.
std::function<bool(const toml::node&, NetworkSpec&)> one_of(std::vector<std::string> names,
                                                            std::function<void(NetworkSpec&, std::size_t)> put) {
  return [=](const toml::node& v, NetworkSpec& s) {
    const std::string& x = v.as_string()->get();
    for (std::size_t i = 0; i < names.size(); ++i)
      if (x == names[i]) {
        put(s, i);
        return true;
      }
    return false;
  };
}

// The GPU keys' upper bound: far above any GPU (a B200 has 2250 TFLOP/s, 8000 GB/s, 180 GiB), low enough to catch
// a value in the wrong unit (TFLOP/s written in FLOP/s, GiB in bytes).
constexpr double kMaxGpuNumber = 100000;

// "\"a800-sxm\", \"a100-sxm\", ...": the values the gpu key takes, as a file writes them.
std::string quoted_gpu_presets() {
  std::string out;
  for (const GpuPreset& p : gpu_presets()) out += (out.empty() ? "\"" : ", \"") + std::string(p.name) + "\"";
  return out;
}

// The newest generation gpu_arch takes (sm90): NCCL 2.21.5's tuning tables, which the nccl model follows, end there.
constexpr int kNewestGpuArch = 90;

const std::vector<Key>& keys() {
  static const std::vector<Key> k = {
      {"name", Kind::text, "a name of letters, digits, '.', '_' or '-'",
       [](const toml::node& n, NetworkSpec& s) {
         const std::string& v = n.as_string()->get();
         if (v.empty()) return false;
         for (char c : v)
           if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') return false;
         s.name = v;
         return true;
       }},
      {"description", Kind::text, "any text on one line",
       [](const toml::node& n, NetworkSpec& s) {
         const std::string& v = n.as_string()->get();
         if (v.find('\n') != std::string::npos || has_control_chars(v)) return false;
         s.description = v;
         return true;
       }},
      {"gpus_per_node", Kind::whole, "a whole number from 1 to 1024",
       whole_in(1, 1024, [](NetworkSpec& s, int v) { s.gpus_per_node = v; })},
      {"gpu_arch", Kind::text, "\"sm70\", \"sm80\", \"sm90\" or \"none\"",
       one_of({"sm70", "sm80", "sm90", "none"},
              [](NetworkSpec& s, std::size_t i) {
                s.compute_capability = i == 0 ? 70 : i == 1 ? 80 : i == 2 ? 90 : 0;
              })},
      {"gpu", Kind::text, "a GPU preset: " + quoted_gpu_presets() + " (or give peak_tflops, hbm_gbps and gpu_mem_gib)",
       [](const toml::node& n, NetworkSpec& s) {
         const GpuPreset* p = find_gpu_preset(n.as_string()->get());
         if (p) s.gpu.preset = p->name;
         return p != nullptr;
       }},
      {"peak_tflops", Kind::number, "the GPU's dense bf16 peak, a positive rate in TFLOP/s up to 100000",
       number_in<NetworkSpec>(0, kMaxGpuNumber, true, [](NetworkSpec& s, double v) { s.gpu.peak_tflops = v; })},
      {"hbm_gbps", Kind::number, "the GPU's HBM bandwidth, a positive rate in GB/s up to 100000",
       number_in<NetworkSpec>(0, kMaxGpuNumber, true, [](NetworkSpec& s, double v) { s.gpu.hbm_gbps = v; })},
      {"gpu_mem_gib", Kind::number, "the GPU's memory, a positive size in GiB (2^30 bytes) up to 100000",
       number_in<NetworkSpec>(0, kMaxGpuNumber, true, [](NetworkSpec& s, double v) { s.gpu.mem_gib = v; })},
      {"nvlink_links", Kind::whole, "a whole number from 0 to 64",
       whole_in(0, 64, [](NetworkSpec& s, int v) { s.nvlink_links = v; })},
      {"nvlink_gbps", Kind::number, "a positive rate in GB/s up to 1000",
       number_in<NetworkSpec>(0, 1000, true, [](NetworkSpec& s, double v) { s.nvlink_gbps = v; })},
      {"nvswitch", Kind::boolean, "true or false", flag<NetworkSpec>([](NetworkSpec& s, bool v) { s.nvswitch = v; })},
      {"pcie_gen", Kind::whole, "3, 4 or 5", whole_in(3, 5, [](NetworkSpec& s, int v) { s.pcie_gen = v; })},
      {"nics_per_node", Kind::whole, "a whole number from 1 to 64",
       whole_in(1, 64, [](NetworkSpec& s, int v) { s.nics_per_node = v; })},
      {"nic_gbit_per_s", Kind::number, "a positive rate in Gb/s up to 10000",
       number_in<NetworkSpec>(0, 10000, true, [](NetworkSpec& s, double v) { s.nic_gbit_per_s = v; })},
      {"nic_path", Kind::text, "\"pix\", \"pxb\", \"phb\" or \"sys\"",
       [](const toml::node& n, NetworkSpec& s) {
         auto p = kNicPathNames.parse(n.as_string()->get());
         if (p) s.nic_path = *p;
         return p.ok();
       }},
      {"cpu_vendor", Kind::text, "\"intel\" or \"amd\"",
       one_of({"intel", "amd"}, [](NetworkSpec& s, std::size_t i) { s.amd_cpu = i == 1; })},
      {"sharp", Kind::boolean, "true or false", flag<NetworkSpec>([](NetworkSpec& s, bool v) { s.sharp = v; })},
      {"nvls", Kind::boolean, "true or false", flag<NetworkSpec>([](NetworkSpec& s, bool v) { s.nvls = v; })},
      {"intra_gpu_gbps", Kind::number, "a positive rate in GB/s up to 10000",
       number_in<NetworkSpec>(0, 10000, true, [](NetworkSpec& s, double v) { s.intra_gpu_gbps = v; })},
      {"inter_node_gbps", Kind::number, "a positive rate in GB/s up to 10000",
       number_in<NetworkSpec>(0, 10000, true, [](NetworkSpec& s, double v) { s.inter_node_gbps = v; })},
      {"inter_gpu_gbps", Kind::number, "a positive rate in GB/s up to 10000",
       number_in<NetworkSpec>(0, 10000, true, [](NetworkSpec& s, double v) { s.inter_gpu_gbps = v; })},
      {"intra_latency_us", Kind::number, "a latency in microseconds from 0 to 1000000",
       number_in<NetworkSpec>(0, 1e6, false, [](NetworkSpec& s, double v) { s.intra_latency_s = v * 1e-6; })},
      {"inter_latency_us", Kind::number, "a latency in microseconds from 0 to 1000000",
       number_in<NetworkSpec>(0, 1e6, false, [](NetworkSpec& s, double v) { s.inter_latency_s = v * 1e-6; })},
      {"bw_factor_per_node_doubling", Kind::number, "a factor in (0, 1]",
       number_in<NetworkSpec>(0, 1, true, [](NetworkSpec& s, double v) { s.bw_factor_per_node_doubling = v; })},
      {"latency_factor_per_node_doubling", Kind::number, "a factor from 1 to 100",
       number_in<NetworkSpec>(1, 100, false, [](NetworkSpec& s, double v) { s.latency_factor_per_node_doubling = v; })},
  };
  return k;
}

const Key* find_key(std::string_view name) {
  const auto it = std::find_if(keys().begin(), keys().end(), [&](const Key& k) { return name == k.name; });
  return it == keys().end() ? nullptr : &*it;
}

std::string key_names() {
  std::string out;
  for (const auto& k : keys()) out += (out.empty() ? "" : ", ") + std::string(k.name);
  return out;
}

bool is_kind(const toml::node& v, Kind k) {
  switch (k) {
    case Kind::text:
      return v.is_string();
    case Kind::whole:
      return v.is_integer();
    case Kind::number:
      return v.is_integer() || v.is_floating_point();
    case Kind::boolean:
      return v.is_boolean();
  }
  return false;
}

// A value as the file wrote it (text quoted), or what it is when it is not a single value.
std::string shown(const toml::node& v) {
  if (auto s = v.as_string()) return "\"" + s->get() + "\"";
  if (auto i = v.as_integer()) return std::to_string(i->get());
  if (auto d = v.as_floating_point()) {
    std::ostringstream o;
    o << d->get();
    return o.str();
  }
  if (auto b = v.as_boolean()) return b->get() ? "true" : "false";
  if (v.is_table()) return "a table";
  if (v.is_array()) return "an array";
  return "a date or time";
}

std::string type_of(const toml::node& v) {
  if (v.is_string()) return "text";
  if (v.is_integer()) return "a whole number";
  if (v.is_floating_point()) return "a fractional number";
  if (v.is_boolean()) return "a boolean";
  return "not a single value";
}

// The first line of `text` in the former format that TOML cannot read: a text key with a bare word
// (`name = cpu-local`) or a yes/no flag (`nvswitch = yes`). 0 when there is none.
int old_format_line(std::string_view text, std::string* line_text) {
  for (auto [line_no, raw] : text_lines(text)) {
    if (auto hash = raw.find('#'); hash != std::string_view::npos) raw = raw.substr(0, hash);
    const std::string line = trim(raw);
    const auto eq = line.find('=');
    if (eq == std::string::npos) continue;
    const Key* k = find_key(trim(line.substr(0, eq)));
    const std::string value = trim(line.substr(eq + 1));
    if (!k || value.empty()) continue;
    const bool bare_text = k->kind == Kind::text && value[0] != '"' && value[0] != '\'';
    const bool yes_no =
        k->kind == Kind::boolean && (value == "yes" || value == "no" || value == "on" || value == "off");
    if (bare_text || yes_no) {
      *line_text = line;
      return line_no;
    }
  }
  return 0;
}

// toml++'s "Error while parsing value: could not determine value type" as "could not determine value type (while
// parsing a value)".
std::string toml_problem(std::string_view description) {
  constexpr std::string_view kPrefix = "Error while parsing ";
  const std::string d(description);
  if (d.rfind(kPrefix, 0) != 0) return d;
  const auto colon = d.find(": ", kPrefix.size());
  if (colon == std::string::npos) return d;
  return d.substr(colon + 2) + " (while parsing " + d.substr(kPrefix.size(), colon - kPrefix.size()) + ")";
}

// ---- the [contention] table
// ------------------------------------------------------------------------------------------

using ContentionKey = KeyOf<Contention>;

const std::vector<ContentionKey>& contention_keys() {
  static const std::string kSlowdown = "a slowdown from 0 (none) to " + std::to_string(int(kMaxSlowdown));
  static const std::vector<ContentionKey> k = {
      {"source", Kind::text, "any text on one line: measured (how, where) or prior (the published measurement)",
       [](const toml::node& n, Contention& c) {
         const std::string& v = n.as_string()->get();
         if (v.find('\n') != std::string::npos || has_control_chars(v)) return false;
         c.source = v;
         return true;
       }},
      {"kappa_gemm_intra", Kind::number, kSlowdown,
       number_in<Contention>(0, kMaxSlowdown, false,
                             [](Contention& c, double v) { c.kappa[int(TaskClass::gemm)][0] = v; })},
      {"kappa_gemm_inter", Kind::number, kSlowdown,
       number_in<Contention>(0, kMaxSlowdown, false,
                             [](Contention& c, double v) { c.kappa[int(TaskClass::gemm)][1] = v; })},
      {"kappa_memory_intra", Kind::number, kSlowdown,
       number_in<Contention>(0, kMaxSlowdown, false,
                             [](Contention& c, double v) { c.kappa[int(TaskClass::memory)][0] = v; })},
      {"kappa_memory_inter", Kind::number, kSlowdown,
       number_in<Contention>(0, kMaxSlowdown, false,
                             [](Contention& c, double v) { c.kappa[int(TaskClass::memory)][1] = v; })},
      {"kappa_combine", Kind::text, "\"sum\" or \"max\"",
       [](const toml::node& n, Contention& c) {
         auto m = kKappaCombineNames.parse(n.as_string()->get());
         if (m) c.combine = *m;
         return m.ok();
       }},
      {"lambda_intra", Kind::number, kSlowdown,
       number_in<Contention>(0, kMaxSlowdown, false, [](Contention& c, double v) { c.lambda[0] = v; })},
      {"lambda_inter", Kind::number, kSlowdown,
       number_in<Contention>(0, kMaxSlowdown, false, [](Contention& c, double v) { c.lambda[1] = v; })},
      {"links_shared", Kind::boolean, "true or false",
       flag<Contention>([](Contention& c, bool v) { c.links_shared = v; })},
      {"eta", Kind::number, "an efficiency in (0, 1]",
       number_in<Contention>(0, 1, true, [](Contention& c, double v) { c.eta = v; })},
  };
  return k;
}

// The keys of a [contention] table, checked one by one in the file's order; `where` is the file.
Result<Contention> parse_contention_table(const toml::table& t, const std::string& where) {
  Contention c;
  c.source = "";
  std::vector<std::pair<int, std::string>> order;
  for (auto&& [key, value] : t) order.emplace_back(static_cast<int>(key.source().begin.line), std::string(key.str()));
  std::sort(order.begin(), order.end());
  for (const auto& entry : order) {
    const int line_no = entry.first;
    const std::string& key = entry.second;  // named, not a structured binding: lambdas below capture it
    const toml::node& value = *t.get(key);
    const std::string at = where + ":" + std::to_string(line_no) + ": [contention] ";
    const auto it = std::find_if(contention_keys().begin(), contention_keys().end(),
                                 [&](const ContentionKey& k) { return key == k.name; });
    if (it == contention_keys().end()) {
      std::string names;
      for (const auto& k : contention_keys()) names += (names.empty() ? "" : ", ") + std::string(k.name);
      return make_error(at + "unknown key '" + key + "'; valid keys: " + names);
    }
    if (!is_kind(value, it->kind))
      return make_error(at + key + ": " + shown(value) + " is " + type_of(value) + "; valid: " + it->valid);
    if (!it->set(value, c)) return make_error(at + key + ": " + shown(value) + " is not valid; valid: " + it->valid);
  }
  if (c.source.empty())
    return make_error(where +
                      ": [contention] missing 'source' (say where the values come from: measured, how and "
                      "where, or prior, and the published measurement)");
  return c;
}

// The GPU: a preset's numbers under the file's own, or the three numbers alone; a gpu_arch that disagrees with the
// preset's generation is a warning (a file may describe an unlisted variant), a GPU on a network without GPUs an error.
Status finish_gpu(NetworkSpec& s, const std::map<std::string, int>& seen, const std::string& where) {
  NetworkGpu& g = s.gpu;
  const char* const number_keys[] = {"peak_tflops", "hbm_gbps", "gpu_mem_gib"};
  // The GPU key the file gives first, if any.
  const char* first = nullptr;
  for (const char* k : {"gpu", "peak_tflops", "hbm_gbps", "gpu_mem_gib"})
    if (seen.count(k) && (!first || seen.at(k) < seen.at(first))) first = k;
  if (!first) return {};
  if (!s.has_gpu())
    return make_error(where + ":" + std::to_string(seen.at(first)) + ": " + first +
                      ": the network has gpu_arch = \"none\" (no GPU); valid: leave the GPU keys out, or give "
                      "gpu_arch");
  const GpuPreset* preset = g.preset.empty() ? nullptr : find_gpu_preset(g.preset);
  auto take = [&](const char* key, double& value, std::string& from, double preset_value) {
    if (seen.count(key)) {
      from = key;
    } else if (preset) {
      value = preset_value, from = "gpu preset " + g.preset;
    }
  };
  if (!preset)
    for (const char* k : number_keys)
      if (!seen.count(k))
        return make_error(where + ": missing '" + k + "' (a GPU is a preset, gpu = " + quoted_gpu_presets() +
                          ", or its three numbers: peak_tflops, hbm_gbps and gpu_mem_gib)");
  take("peak_tflops", g.peak_tflops, g.peak_from, preset ? preset->peak_tflops : 0);
  take("hbm_gbps", g.hbm_gbps, g.hbm_from, preset ? preset->hbm_gbps : 0);
  take("gpu_mem_gib", g.mem_gib, g.mem_from, preset ? preset->mem_gib : 0);
  if (preset) {
    g.compute_capability = preset->compute_capability;
    if (preset->compute_capability != s.compute_capability) {
      std::string w = "network " + s.name + " (" + where + "): gpu_arch = \"sm" + std::to_string(s.compute_capability) +
                      "\" but gpu = \"" + g.preset + "\" is an sm" + std::to_string(preset->compute_capability) +
                      " GPU (" + preset->product + ")";
      w += preset->compute_capability > kNewestGpuArch
               ? "; gpu_arch goes up to sm90 (NCCL 2.21.5, whose model prices the collectives, knows no newer "
                 "generation), so its collectives are priced as on sm" +
                     std::to_string(s.compute_capability)
               : "; the collectives are priced for sm" + std::to_string(s.compute_capability) +
                     ", the compute and memory for " + g.preset;
      s.warnings.push_back(w);
    }
  }
  return {};
}

// What a file must say, and the defaults derived from it; `where` is the file.
Status finish(NetworkSpec& s, const std::map<std::string, int>& seen, const std::string& where) {
  auto missing = [&](const char* key, const std::string& why) {
    return make_error(where + ": missing '" + key + "' (" + why + ")");
  };
  auto has = [&](const char* key) { return seen.count(key) > 0; };
  if (!has("name")) return missing("name", "the name commands print");
  if (!has("gpu_arch")) return missing("gpu_arch", "sm70, sm80, sm90, or none for a network without GPUs");
  if (s.has_gpu()) {
    if (!has("nvlink_links")) return missing("nvlink_links", "NVLink links per GPU; 0 when GPUs talk over PCIe");
    if (s.nvlink_links > 0 && !has("nvlink_gbps")) return missing("nvlink_gbps", "one link's rate per direction");
    if (s.nvlink_links > 0 && !has("nvswitch")) return missing("nvswitch", "yes when the links go to NVSwitches");
    if (!has("pcie_gen")) return missing("pcie_gen", "PCIe generation of the GPUs' and NICs' x16 links");
  }
  LINS_TRY(finish_gpu(s, seen, where));
  if (!has("inter_node_gbps") || s.has_gpu()) {
    if (!has("nics_per_node")) return missing("nics_per_node", "network ports per node");
    if (!has("nic_gbit_per_s")) return missing("nic_gbit_per_s", "one port's rate in Gb/s");
  }
  if (!has("intra_latency_us")) return missing("intra_latency_us", "the alpha-beta model's latency per ring step");
  if (!has("inter_latency_us")) return missing("inter_latency_us", "the alpha-beta model's latency per ring step");
  if (s.intra_gpu_gbps == 0) {
    if (s.nvlink_links == 0)
      return missing("intra_gpu_gbps", "one GPU's rate to the rest of its node; needed when nvlink_links = 0");
    s.intra_gpu_gbps = s.nvlink_links * s.nvlink_gbps;
  }
  if (s.inter_node_gbps == 0) s.inter_node_gbps = s.nics_per_node * s.nic_gbps();
  if (s.inter_gpu_gbps == 0)
    s.inter_gpu_gbps = s.nic_gbit_per_s > 0 ? std::min(s.nic_gbps(), s.inter_node_gbps) : s.inter_node_gbps;
  if (s.inter_gpu_gbps > s.inter_node_gbps) {
    const int line = seen.count("inter_gpu_gbps") ? seen.at("inter_gpu_gbps") : 0;
    return make_error(where + ":" + std::to_string(line) +
                      ": inter_gpu_gbps: one GPU cannot drive more than its node's " +
                      "inter_node_gbps; valid: at most the node's rate");
  }
  return {};
}

}  // namespace

const char* nic_path_name(NicPath p) { return kNicPathNames.name(p); }

double NetworkSpec::pcie_gbps() const {
  // src/graph/topo.cc (ncclTopoAddPci): bw = width x speed / 80 with speed per lane in 100 Mb/s units, 60 for
  // "8.0 GT/s" (Gen3), 120 for Gen4, 240 for Gen5 (kvDictPciGen); x16 gives 12, 24 and 48 GB/s.
  const double per_lane = pcie_gen == 3 ? 60 : pcie_gen == 4 ? 120 : pcie_gen == 5 ? 240 : 0;
  return 16 * per_lane / 80.0;
}

double NetworkSpec::bw_scale(int nodes) const {
  return nodes > 1 ? std::pow(bw_factor_per_node_doubling, std::log2(double(nodes))) : 1.0;
}

double NetworkSpec::latency_scale(int nodes) const {
  return nodes > 1 ? std::pow(latency_factor_per_node_doubling, std::log2(double(nodes))) : 1.0;
}

std::string NetworkSpec::summary() const {
  std::ostringstream o;
  if (gpus_per_node > 0) o << gpus_per_node << " GPUs per node";
  if (has_gpu()) {
    o << (o.tellp() > 0 ? ", " : "") << "sm" << compute_capability;
    if (nvlink_links > 0)
      o << ", " << nvlink_links << " NVLink x " << nvlink_gbps << " GB/s" << (nvswitch ? " via NVSwitch" : "");
    else
      o << ", PCIe Gen" << pcie_gen << " between GPUs";
  }
  if (nics_per_node > 0) o << (o.tellp() > 0 ? ", " : "") << nics_per_node << " x " << nic_gbit_per_s << " Gb/s NICs";
  o << (sharp ? ", SHARP" : ", no SHARP");
  return o.str();
}

Result<NetworkSpec> parse_network_spec(std::string_view text, const std::string& where) {
  NetworkSpec s;
  s.source = where;
  const toml::parse_result doc = toml::parse(text, std::string_view(where));
  if (!doc) {
    const auto& e = doc.error();
    const int line = static_cast<int>(e.source().begin.line);
    std::string old_line;
    if (const int old = old_format_line(text, &old_line))
      return make_error(where + ":" + std::to_string(old) + ": '" + old_line +
                        "' is in the former key = value format: " + kOldFormatAdvice);
    std::string hint;
    for (auto [line_no, raw] : text_lines(text))
      if (line_no == line) {
        const auto eq = raw.find('=');
        if (const Key* k = eq == std::string_view::npos ? nullptr : find_key(trim(raw.substr(0, eq))))
          hint = "; " + std::string(k->name) + " takes " + k->valid;
      }
    return make_error(where + ":" + std::to_string(line) + ":" + std::to_string(e.source().begin.column) +
                      ": not valid TOML: " + toml_problem(e.description()) + hint +
                      " (network files are TOML: text in quotes, true/false, numbers bare; docs/cost-model.md)");
  }
  // The keys in the order of the file, so the first wrong line is the one reported.
  struct Entry {
    int line;
    std::string key;
    const toml::node* value;
  };
  std::vector<Entry> entries;
  for (auto&& [key, value] : doc.table())
    entries.push_back(Entry{static_cast<int>(key.source().begin.line), std::string(key.str()), &value});
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.line < b.line; });
  std::map<std::string, int> seen;  // key -> line
  for (const auto& [line_no, key, value] : entries) {
    const std::string at = where + ":" + std::to_string(line_no) + ": ";
    if (key == "contention" && value->is_table()) {
      LINS_ASSIGN_OR_RETURN(s.contention, parse_contention_table(*value->as_table(), where));
      continue;
    }
    const Key* k = find_key(key);
    if (!k) {
      const std::string what = value->is_table()
                                   ? "table [" + key + "] (the one table a network file may have is [contention])"
                                   : "key '" + key + "'";
      return make_error(at + "unknown " + what + "; valid keys: " + key_names());
    }
    if (!is_kind(*value, k->kind))
      return make_error(at + key + ": " + shown(*value) + " is " + type_of(*value) + "; valid: " + k->valid);
    if (!k->set(*value, s)) return make_error(at + key + ": " + shown(*value) + " is not valid; valid: " + k->valid);
    seen[key] = line_no;
  }
  LINS_TRY(finish(s, seen, where));
  return s;
}

namespace {

std::string preset_list() {
  std::string n;
  for (const auto& p : network_preset_names()) n += (n.empty() ? "" : ", ") + p;
  return n;
}

std::string preset_where(const char* stem) { return std::string("data/networks/") + stem + ".toml"; }

}  // namespace

Result<NetworkSpec> load_network_spec(const std::string& path) {
  namespace fs = std::filesystem;
  if (fs::path(path).extension() == ".network") {
    std::error_code ec;
    const std::string toml_path = fs::path(path).replace_extension(".toml").string();
    const bool renamed = fs::exists(toml_path, ec);
    return make_error("'" + path + "' is a former .network file: " + kOldFormatAdvice +
                      (renamed ? "; " + toml_path + " is there already: give that" : std::string()));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return make_error("cannot open network file '" + path + "' (expected a preset name (" + preset_list() +
                      ") or a TOML file as in data/networks/)");
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse_network_spec(ss.str(), path);
}

Result<Contention> load_contention(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return make_error("cannot open contention file '" + path +
                      "' (expected a TOML file with a [contention] table, as `lins comm --contention FILE` writes)");
  std::ostringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  const toml::parse_result doc = toml::parse(text, std::string_view(path));
  if (!doc)
    return make_error(path + ":" + std::to_string(doc.error().source().begin.line) +
                      ": not valid TOML: " + toml_problem(doc.error().description()));
  const toml::node* table = doc.table().get("contention");
  if (!table || !table->is_table())
    return make_error(path +
                      ": no [contention] table (write one with `lins comm --contention FILE`; its keys are in "
                      "docs/cost-model.md)");
  if (doc.table().size() > 1) {  // a network file: read whole, so that its other keys are checked too
    LINS_ASSIGN_OR_RETURN(auto net, parse_network_spec(text, path));
    return net.contention;
  }
  return parse_contention_table(*table->as_table(), path);
}

std::vector<NetworkSpec> network_spec_presets() {
  std::vector<NetworkSpec> out;
  for (const auto& p : kNetworkPresetTexts) {
    // The shipped files are checked by the unit tests; a broken one would be a build defect, not user input.
    auto s = parse_network_spec(p.text, preset_where(p.stem));
    if (!s) continue;
    s->source = "preset";
    out.push_back(std::move(*s));
  }
  return out;
}

std::vector<std::string> network_preset_names() {
  std::vector<std::string> out;
  for (const auto& p : kNetworkPresetTexts) out.push_back(p.stem);
  return out;
}

Result<NetworkSpec> resolve_network_spec(std::string_view name_or_path) {
  const std::string text(name_or_path);
  for (const auto& p : kNetworkPresetTexts)
    if (text == p.stem) {
      auto s = parse_network_spec(p.text, preset_where(p.stem));
      if (s) s->source = "preset";
      return s;
    }
  std::error_code ec;
  if (text.find('/') != std::string::npos || text.find('.') != std::string::npos || std::filesystem::exists(text, ec))
    return load_network_spec(text);
  return make_error("unknown network '" + text + "'; valid networks: " + preset_list() +
                    ", or the path of a network file (see docs/cost-model.md)");
}

}  // namespace lins
