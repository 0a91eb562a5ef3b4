// Network files: parsing, checks, derived alpha-beta terms and the compiled-in presets; see network_spec.h.
#include "core/network_spec.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <sstream>

#include "core/text.h"

namespace lins {
namespace {

// {file name stem, file text} of every data/networks/*.network, generated at configure time.
struct PresetText {
  const char* stem;
  const char* text;
};
#include "network_presets.inc"

std::optional<double> parse_number(const std::string& s) { return parse_finite(s); }

std::optional<bool> parse_yes_no(const std::string& s) {
  if (s == "yes" || s == "true" || s == "on") return true;
  if (s == "no" || s == "false" || s == "off") return false;
  return std::nullopt;
}

// One key of the file: what it accepts (for the error) and how it sets the spec.
struct Key {
  const char* name;
  const char* valid;
  std::function<bool(const std::string&, NetworkSpec&)> set;
};

std::function<bool(const std::string&, NetworkSpec&)> number_in(double lo, double hi, bool lo_open,
                                                                std::function<void(NetworkSpec&, double)> put) {
  return [=](const std::string& v, NetworkSpec& s) {
    auto x = parse_number(v);
    if (!x || *x > hi || *x < lo || (lo_open && *x == lo)) return false;
    put(s, *x);
    return true;
  };
}

std::function<bool(const std::string&, NetworkSpec&)> whole_in(int lo, int hi,
                                                               std::function<void(NetworkSpec&, int)> put) {
  return [=](const std::string& v, NetworkSpec& s) {
    auto x = parse_number(v);
    if (!x || *x != std::floor(*x) || *x < lo || *x > hi) return false;
    put(s, static_cast<int>(*x));
    return true;
  };
}

std::function<bool(const std::string&, NetworkSpec&)> yes_no(std::function<void(NetworkSpec&, bool)> put) {
  return [=](const std::string& v, NetworkSpec& s) {
    auto x = parse_yes_no(v);
    if (!x) return false;
    put(s, *x);
    return true;
  };
}

const std::vector<Key>& keys() {
  static const std::vector<Key> k = {
      {"name", "a name of letters, digits, '.', '_' or '-'",
       [](const std::string& v, NetworkSpec& s) {
         if (v.empty()) return false;
         for (char c : v)
           if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') return false;
         s.name = v;
         return true;
       }},
      {"description", "any text on one line",
       [](const std::string& v, NetworkSpec& s) {
         s.description = v;
         return true;
       }},
      {"gpus_per_node", "a whole number from 1 to 1024",
       whole_in(1, 1024, [](NetworkSpec& s, int v) { s.gpus_per_node = v; })},
      {"gpu_arch", "sm70, sm80, sm90 or none",
       [](const std::string& v, NetworkSpec& s) {
         if (v == "sm70")
           s.compute_capability = 70;
         else if (v == "sm80")
           s.compute_capability = 80;
         else if (v == "sm90")
           s.compute_capability = 90;
         else if (v == "none")
           s.compute_capability = 0;
         else
           return false;
         return true;
       }},
      {"nvlink_links", "a whole number from 0 to 64",
       whole_in(0, 64, [](NetworkSpec& s, int v) { s.nvlink_links = v; })},
      {"nvlink_gbps", "a positive rate in GB/s up to 1000",
       number_in(0, 1000, true, [](NetworkSpec& s, double v) { s.nvlink_gbps = v; })},
      {"nvswitch", "yes or no", yes_no([](NetworkSpec& s, bool v) { s.nvswitch = v; })},
      {"pcie_gen", "3, 4 or 5", whole_in(3, 5, [](NetworkSpec& s, int v) { s.pcie_gen = v; })},
      {"nics_per_node", "a whole number from 1 to 64",
       whole_in(1, 64, [](NetworkSpec& s, int v) { s.nics_per_node = v; })},
      {"nic_gbit_per_s", "a positive rate in Gb/s up to 10000",
       number_in(0, 10000, true, [](NetworkSpec& s, double v) { s.nic_gbit_per_s = v; })},
      {"nic_path", "pix, pxb, phb or sys",
       [](const std::string& v, NetworkSpec& s) {
         auto p = kNicPathNames.parse(v);
         if (p) s.nic_path = *p;
         return p.ok();
       }},
      {"cpu_vendor", "intel or amd",
       [](const std::string& v, NetworkSpec& s) {
         if (v != "intel" && v != "amd") return false;
         s.amd_cpu = v == "amd";
         return true;
       }},
      {"sharp", "yes or no", yes_no([](NetworkSpec& s, bool v) { s.sharp = v; })},
      {"nvls", "yes or no", yes_no([](NetworkSpec& s, bool v) { s.nvls = v; })},
      {"intra_gpu_gbps", "a positive rate in GB/s up to 10000",
       number_in(0, 10000, true, [](NetworkSpec& s, double v) { s.intra_gpu_gbps = v; })},
      {"inter_node_gbps", "a positive rate in GB/s up to 10000",
       number_in(0, 10000, true, [](NetworkSpec& s, double v) { s.inter_node_gbps = v; })},
      {"inter_gpu_gbps", "a positive rate in GB/s up to 10000",
       number_in(0, 10000, true, [](NetworkSpec& s, double v) { s.inter_gpu_gbps = v; })},
      {"intra_latency_us", "a latency in microseconds from 0 to 1000000",
       number_in(0, 1e6, false, [](NetworkSpec& s, double v) { s.intra_latency_s = v * 1e-6; })},
      {"inter_latency_us", "a latency in microseconds from 0 to 1000000",
       number_in(0, 1e6, false, [](NetworkSpec& s, double v) { s.inter_latency_s = v * 1e-6; })},
      {"bw_factor_per_node_doubling", "a factor in (0, 1]",
       number_in(0, 1, true, [](NetworkSpec& s, double v) { s.bw_factor_per_node_doubling = v; })},
      {"latency_factor_per_node_doubling", "a factor from 1 to 100",
       number_in(1, 100, false, [](NetworkSpec& s, double v) { s.latency_factor_per_node_doubling = v; })},
  };
  return k;
}

std::string key_names() {
  std::string out;
  for (const auto& k : keys()) out += (out.empty() ? "" : ", ") + std::string(k.name);
  return out;
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
  std::map<std::string, int> seen;  // key -> line
  for (auto [line_no, raw] : text_lines(text)) {
    const std::string at = where + ":" + std::to_string(line_no) + ": ";
    if (has_control_chars(raw))
      return make_error(at + "unreadable (control characters); expected a line 'key = value'");
    if (auto hash = raw.find('#'); hash != std::string_view::npos) raw = raw.substr(0, hash);
    const std::string line = trim(raw);
    if (line.empty()) continue;
    const auto eq = line.find('=');
    if (eq == std::string::npos)
      return make_error(at + "'" + line + "' is not 'key = value'; valid keys: " + key_names());
    const std::string key = trim(line.substr(0, eq)), value = trim(line.substr(eq + 1));
    const auto it = std::find_if(keys().begin(), keys().end(), [&](const Key& k) { return key == k.name; });
    if (it == keys().end()) return make_error(at + "unknown key '" + key + "'; valid keys: " + key_names());
    if (seen.count(key))
      return make_error(at + key + ": given twice (first on line " + std::to_string(seen[key]) + "); give it once");
    if (!it->set(value, s)) return make_error(at + key + ": '" + value + "' is not valid; valid: " + it->valid);
    seen[key] = line_no;
  }
  LINS_TRY(finish(s, seen, where));
  return s;
}

Result<NetworkSpec> load_network_spec(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return make_error("cannot open network file '" + path + "' (expected a preset name (" + [] {
      std::string n;
      for (const auto& p : network_preset_names()) n += (n.empty() ? "" : ", ") + p;
      return n;
    }() + ") or a 'key = value' file as in data/networks/)");
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse_network_spec(ss.str(), path);
}

std::vector<NetworkSpec> network_spec_presets() {
  std::vector<NetworkSpec> out;
  for (const auto& p : kNetworkPresetTexts) {
    // The shipped files are checked by the unit tests; a broken one would be a build defect, not user input.
    auto s = parse_network_spec(p.text, std::string("data/networks/") + p.stem + ".network");
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
      auto s = parse_network_spec(p.text, std::string("data/networks/") + p.stem + ".network");
      if (s) s->source = "preset";
      return s;
    }
  std::error_code ec;
  if (text.find('/') != std::string::npos || text.find('.') != std::string::npos || std::filesystem::exists(text, ec))
    return load_network_spec(text);
  std::string names;
  for (const auto& n : network_preset_names()) names += (names.empty() ? "" : ", ") + n;
  return make_error("unknown network '" + text + "'; valid networks: " + names +
                    ", or the path of a network file (see docs/cost-model.md)");
}

}  // namespace lins
