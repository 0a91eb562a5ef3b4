// nccl-tests output to a bandwidth profile; see nccl_tests_import.h.
#include "core/cost/nccl_tests_import.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include "core/util/json.h"
#include "core/util/text.h"

namespace lins {
namespace {

std::optional<double> number(const std::string& s) { return parse_finite(s); }

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// The columns of one result table, found by name in its header line.
struct Columns {
  int line = 0;
  std::size_t count = 0;
  int size = -1;
  int time[2] = {-1, -1};   // out-of-place, in-place
  int wrong[2] = {-1, -1};  // '#wrong' (or 'error' in older versions)
  std::string wrong_name = "#wrong";
};

// What a run says, whichever way it was written (text or -J JSON), before the mesh and collective are settled.
struct Collected {
  bool json = false;
  std::optional<CollKind> header_op;  // from the text's "Collective test starting" or the JSON's program name
  std::string header_op_name;
  // Rank list: host of each rank in order of appearance, and the groups (NCCL_TESTS_SPLIT runs several at once).
  std::vector<std::string> hosts;
  std::map<std::string, int> ranks_per_host;
  std::map<std::string, int> groups;
  int ranks = 0;
  bool rank_list_truncated = false;
  struct Row {
    double bytes;
    double time_us;
  };
  std::vector<Row> rows;
  int rejected_rows = 0;

  // One size's halves (out-of-place, in-place), as both formats read them: the kept ones' mean time becomes a row;
  // a size with no half kept is a rejected row.
  struct Halves {
    double sum_us = 0;
    int kept = 0;
    void keep(double time_us, bool checked, NcclTestsImport& out) {
      if (!checked) ++out.halves_unchecked;
      sum_us += time_us;
      ++kept;
    }
  };
  void add_size(double bytes, const Halves& h, NcclTestsImport& out) {
    if (h.kept == 0) {
      ++rejected_rows;
      return;
    }
    out.halves_used += h.kept;
    ++out.rows_used;
    rows.push_back(Row{bytes, h.sum_us / h.kept});
  }

  void add_ranks(const std::string& host, const std::string& group, int n) {
    if (!ranks_per_host.count(host)) hosts.push_back(host);
    ranks_per_host[host] += n;
    groups[group] += n;
    ranks += n;
  }
};

// The collective, the mesh and the profile from what a run says; shared by both formats.
Result<NcclTestsImport> finish_import(NcclTestsImport out, Collected& c, const std::string& where,
                                      std::optional<Mesh> mesh, std::optional<CollKind> op, BandwidthProfile* into) {
  const std::string rank_list = c.json ? "config.devices list" : "'#  Rank N ... on HOST device D' lines";
  if (c.rows.empty())
    return make_error(where + ": no usable result row" +
                      (c.rejected_rows > 0
                           ? ": every row failed nccl-tests' check (" + std::string(c.json ? "nwrong" : "#wrong") +
                                 " above 0); a failed run cannot price anything, rerun it"
                           : std::string(" (only rows of 0 bytes)")));
  // The collective.
  if (op) {
    out.op = *op;
  } else if (c.header_op) {
    out.op = *c.header_op;
  } else if (auto k = nccl_tests_op_from_name(where)) {
    out.op = *k;
  } else {
    return make_error(where + ": cannot tell which collective this measured: no " +
                      (c.json ? std::string("nccl-tests program in 'args'") : "'# Collective test starting: X' line") +
                      " and the file name contains none of " + kCollKindNames.list() +
                      "; name the file after its test (e.g. all_gather_perf.txt)");
  }
  if (c.header_op && out.op != *c.header_op)
    return make_error(where + ": the header says " + c.header_op_name + " but " + coll_kind_name(out.op) +
                      " was asked for");
  // The mesh.
  if (c.groups.size() > 1 && !mesh)
    return make_error(where + ": the run has " + std::to_string(c.groups.size()) +
                      " groups of ranks (NCCL_TESTS_SPLIT), so its rank list does not give one group's mesh; give it "
                      "as " +
                      where + "@GPUS_PER_NODExNODES");
  if (mesh) {
    if (c.ranks > 0 && !c.rank_list_truncated && c.groups.size() <= 1 && mesh->size() != c.ranks)
      return make_error(where + ": the mesh " + mesh->to_string() + " has " + std::to_string(mesh->size()) +
                        " ranks but the header lists " + std::to_string(c.ranks) +
                        "; give the GPUs per node x nodes of this run");
    out.mesh = *mesh;
  } else {
    if (c.ranks == 0 || c.rank_list_truncated)
      return make_error(where + ": " +
                        (c.ranks == 0 ? "no " + rank_list : std::string("the rank list is cut short ('...')")) +
                        " to tell GPUs per node and nodes; give the mesh as " + where + "@GPUS_PER_NODExNODES");
    const int per_host = c.ranks_per_host[c.hosts[0]];
    for (const auto& h : c.hosts)
      if (c.ranks_per_host[h] != per_host)
        return make_error(where + ": host " + h + " runs " + std::to_string(c.ranks_per_host[h]) + " ranks but " +
                          c.hosts[0] + " runs " + std::to_string(per_host) +
                          "; a mesh has the same GPUs on every node (give it as " + where + "@INTRAxINTER)");
    out.mesh = Mesh{per_host, static_cast<int>(c.hosts.size())};
    out.mesh_from_header = true;
  }
  if (out.mesh.size() < 2)
    return make_error(where + ": the run has a single rank (mesh " + out.mesh.to_string() +
                      "); a collective over one GPU moves nothing, so it cannot price one");
  if (into)
    for (const auto& r : c.rows) into->add(out.op, out.mesh, r.bytes, r.bytes / (r.time_us * 1e-6) / 1e9);
  return out;
}

// nccl-tests' -J output (src/util.cu): one JSON object whose 'args' start with the program, 'config' holds
// 'nthreads', 'ngpus' and 'devices' (one entry per process, each running nthreads x ngpus ranks), and 'results' one
// object per size: 'size', then 'out_of_place' and 'in_place' (null when not run), each with 'time' (or 'cpu_time',
// microseconds) and 'nwrong' (null when validation was off).
Result<NcclTestsImport> import_nccl_tests_json(std::string_view text, const std::string& where,
                                               std::optional<Mesh> mesh, std::optional<CollKind> op,
                                               BandwidthProfile* into) {
  NcclTestsImport out;
  out.path = where;
  Collected c;
  c.json = true;
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    // nlohmann gives the byte; the message names line and column as an editor shows them.
    const std::size_t upto = std::min<std::size_t>(e.byte > 0 ? e.byte - 1 : 0, text.size());
    const auto line = 1 + std::count(text.begin(), text.begin() + upto, '\n');
    const auto nl = text.rfind('\n', upto > 0 ? upto - 1 : 0);
    const std::size_t column = nl == std::string_view::npos || upto == 0 ? upto + 1 : upto - nl;
    std::string what = e.what();
    if (auto colon = what.find(": ", what.find("column")); colon != std::string::npos) what = what.substr(colon + 2);
    const bool at_end = e.byte >= text.size();  // nlohmann counts the end of the input as one past it
    return make_error(where + ":" + std::to_string(line) + ":" + std::to_string(column) + ": not valid JSON: " + what +
                      (at_end ? "; the file ends before the JSON does (nccl-tests closes it when the run ends: was "
                                "the run stopped?)"
                              : "; expected the file nccl-tests writes with -J FILE.json"));
  }
  const std::string expected = "; expected the file nccl-tests writes with -J FILE.json (an object with 'results')";
  if (!doc.is_object() || !doc.contains("results") || !doc["results"].is_array())
    return make_error(where + ": JSON without a 'results' list" + expected);
  // The program (args[0], "/path/to/all_reduce_perf"): the collective, as the text's "Collective test starting".
  if (doc.contains("args") && doc["args"].is_array() && !doc["args"].empty() && doc["args"][0].is_string()) {
    std::string program = doc["args"][0].get<std::string>();
    if (auto slash = program.find_last_of('/'); slash != std::string::npos) program = program.substr(slash + 1);
    if (auto k = nccl_tests_op_from_name(program)) {
      c.header_op = k;
      c.header_op_name = program;
    } else if (program.size() > 5 && program.compare(program.size() - 5, 5, "_perf") == 0) {
      return make_error(where + ": this run measures " + program +
                        ", which lins has no collective for; valid: " + nccl_tests_programs());
    }
  }
  // The rank list: each device entry is one process, running nthreads x ngpus ranks.
  if (doc.contains("config") && doc["config"].is_object()) {
    const auto& config = doc["config"];
    auto whole = [&](const char* key) {
      return config.contains(key) && config[key].is_number_integer() && config[key].get<int64_t>() >= 1
                 ? std::optional<int>(static_cast<int>(config[key].get<int64_t>()))
                 : std::nullopt;
    };
    const auto threads = whole("nthreads"), gpus = whole("ngpus");
    if (config.contains("devices") && config["devices"].is_array()) {
      if (!threads || !gpus)
        return make_error(where + ": config.nthreads and config.ngpus must be whole numbers from 1 (the ranks of " +
                          "each config.devices entry)" + expected);
      int i = 0;
      for (const auto& d : config["devices"]) {
        const std::string at = where + ": config.devices[" + std::to_string(i++) + "]";
        if (!d.is_object() || !d.contains("hostname") || !d["hostname"].is_string())
          return make_error(at + " has no 'hostname' text" + expected);
        const std::string group =
            d.contains("group") && d["group"].is_number_integer() ? std::to_string(d["group"].get<int64_t>()) : "0";
        c.add_ranks(d["hostname"].get<std::string>(), group, *threads * *gpus);
      }
    }
  }
  int index = 0;
  for (const auto& r : doc["results"]) {
    const std::string at = where + ": results[" + std::to_string(index++) + "]";
    if (!r.is_object() || !r.contains("size") || !r["size"].is_number_unsigned())
      return make_error(at + " has no 'size', a whole number of bytes" + expected);
    const auto size = r["size"].get<uint64_t>();
    if (size == 0) {
      ++out.zero_size_rows;
      continue;
    }
    Collected::Halves halves;
    for (const char* half : {"out_of_place", "in_place"}) {
      const std::string name = std::string(half) == "in_place" ? "in-place" : "out-of-place";
      if (!r.contains(half) || r[half].is_null()) continue;  // not run (trace replay runs in-place only)
      const auto& h = r[half];
      const char* time_key = h.is_object() && h.contains("cpu_time") ? "cpu_time" : "time";
      if (!h.is_object() || !h.contains(time_key) || !h[time_key].is_number() || !(h[time_key].get<double>() > 0))
        return make_error(at + "." + half + "." + time_key + ": " +
                          (h.is_object() && h.contains(time_key) ? h[time_key].dump() : std::string("missing")) +
                          " is not a positive number of microseconds");
      bool checked = false;
      if (h.contains("nwrong") && !h["nwrong"].is_null()) {
        const auto& w = h["nwrong"];
        if (!w.is_number() || w.get<double>() < 0)
          return make_error(at + "." + half + ".nwrong: " + w.dump() +
                            " is neither a count of wrong elements nor null");
        if (w.get<double>() > 0) {
          out.rejected.push_back(at + ": " + std::to_string(size) + " B " + name + ": nwrong = " + w.dump() +
                                 " (nccl-tests found wrong results), left out");
          continue;
        }
        checked = true;
      }
      halves.keep(h[time_key].get<double>(), checked, out);
    }
    c.add_size(static_cast<double>(size), halves, out);
  }
  return finish_import(std::move(out), c, where, mesh, op, into);
}

}  // namespace

std::optional<CollKind> nccl_tests_op_from_name(std::string_view name) {
  std::string n = lower(name);
  if (auto slash = n.find_last_of('/'); slash != std::string::npos) n = n.substr(slash + 1);
  // "all_gather_perf", "allgather": any spelling of the collective tables (lower case) inside the name.
  for (CollKind k : kCollKindNames.values())
    for (auto spelling : kCollKindNames.spellings(k))
      if (n.find(lower(spelling)) != std::string::npos) return k;
  return std::nullopt;
}

Result<NcclTestsArg> parse_nccl_tests_arg(std::string_view text) {
  NcclTestsArg a;
  a.path = std::string(text);
  const auto at = text.rfind('@');
  if (at != std::string_view::npos) {
    const std::string mesh_text(text.substr(at + 1));
    const auto x = mesh_text.find('x');
    const auto intra = number(mesh_text.substr(0, x));
    const auto inter = x == std::string::npos ? std::optional<double>(1.0) : number(mesh_text.substr(x + 1));
    const auto whole = [](std::optional<double> v) { return v && *v >= 1 && *v <= 1e6 && *v == std::floor(*v); };
    if (!whole(intra) || !whole(inter))
      return make_error("--nccl-tests '" + std::string(text) + "': '" + mesh_text +
                        "' after '@' is not a mesh; valid: GPUS_PER_NODExNODES, e.g. all_gather_perf.txt@8x16");
    a.mesh = Mesh{static_cast<int>(*intra), static_cast<int>(*inter)};
    a.path = std::string(text.substr(0, at));
  }
  if (a.path.empty())
    return make_error("--nccl-tests '" + std::string(text) + "' names no file; valid: FILE or FILE@INTRAxINTER");
  return a;
}

Result<NcclTestsImport> import_nccl_tests(std::string_view text, const std::string& where, std::optional<Mesh> mesh,
                                          std::optional<CollKind> op, BandwidthProfile* into) {
  // The JSON nccl-tests writes with -J FILE.json, beside the text it prints.
  if (const auto first = text.find_first_not_of(" \t\r\n"); first != std::string_view::npos && text[first] == '{')
    return import_nccl_tests_json(text, where, mesh, op, into);
  NcclTestsImport out;
  out.path = where;
  Collected c;
  std::optional<Columns> cols;

  for (const auto& [line_no, raw] : text_lines(text)) {
    const std::string at = where + ":" + std::to_string(line_no) + ": ";
    if (has_control_chars(raw))
      return make_error(at + "unreadable (control characters); expected the text nccl-tests prints");
    auto tok = split_ws(raw);
    if (tok.empty()) continue;
    // NCCL_DEBUG output interleaves with the table ("host:pid:tid [0] NCCL INFO ..."); it is not a result.
    if (raw.find(" NCCL INFO ") != std::string_view::npos || raw.find(" NCCL WARN ") != std::string_view::npos)
      continue;
    const bool comment = tok[0] == "#" || tok[0][0] == '#';
    std::vector<std::string> words = tok;
    if (comment) {
      if (words[0] == "#")
        words.erase(words.begin());
      else
        words[0] = words[0].substr(1);
    }
    if (comment && words.size() >= 4 && words[0] == "Collective" && words[1] == "test" && words[2] == "starting:") {
      auto k = nccl_tests_op_from_name(words[3]);
      if (!k)
        return make_error(at + "this run measures " + words[3] +
                          ", which lins has no collective for; valid: " + nccl_tests_programs());
      if (c.header_op && *c.header_op != *k)
        return make_error(at + "a second run of a different collective (" + words[3] + " after " + c.header_op_name +
                          "); give each collective its own file");
      c.header_op = k;
      c.header_op_name = words[3];
      continue;
    }
    if (words.size() > 1 && words[0] == "Rank") {
      // "#  Rank  0 Group  0 Pid   6899 on HOST device  0 [0000:04:00] NVIDIA H100" (older: no Group).
      std::string host, group = "0";
      for (std::size_t i = 0; i + 1 < words.size(); ++i) {
        if (words[i] == "on" && host.empty()) host = words[i + 1];
        if (words[i] == "Group") group = words[i + 1];
      }
      if (host.empty())
        return make_error(at + "a Rank line without 'on HOST'; expected '#  Rank N ... on HOST device D'");
      c.add_ranks(host, group, 1);
      continue;
    }
    if (comment && words.size() == 1 && words[0] == "...") {  // nccl-tests cut a long device list
      c.rank_list_truncated = true;
      continue;
    }
    if (!words.empty() && words[0] == "size") {
      // The column header; the line under it names units. Columns are found by name, in order: the first time and
      // #wrong belong to the out-of-place group, the second to the in-place group.
      Columns h;
      h.line = line_no;
      h.count = words.size();
      int times = 0, wrongs = 0;
      for (std::size_t i = 0; i < words.size(); ++i) {
        const std::string& w = words[i];
        if (w == "size") h.size = static_cast<int>(i);
        if ((w == "time" || w == "cputime") && times < 2) h.time[times++] = static_cast<int>(i);
        if ((w == "#wrong" || w == "error") && wrongs < 2) h.wrong[wrongs++] = static_cast<int>(i), h.wrong_name = w;
      }
      if (times < 1)
        return make_error(at +
                          "a column header without a 'time' column; expected nccl-tests' header '# size count "
                          "type redop root time algbw busbw #wrong time algbw busbw #wrong'");
      cols = h;
      continue;
    }
    if (comment || words[0] == "(B)" || words[0] == "out-of-place") continue;
    if (!cols) continue;  // launcher output before the table (mpirun banners, warnings) is not ours to judge
    // A result row.
    const Columns& k = *cols;
    const std::string hdr = " (the column header is on line " + std::to_string(k.line) + ")";
    if (!number(tok[0])) {
      // The oldest nccl-tests print their summary lines without '#'.
      if (words[0] == "Out" || words[0] == "Avg") continue;
      std::string shown(raw.substr(0, 60));
      return make_error(at + "'" + shown + "' is not an nccl-tests result row; expected SIZE COUNT TYPE ... " +
                        "with the columns of the header" + hdr);
    }
    if (tok.size() < k.count)
      return make_error(at + "has " + std::to_string(tok.size()) + " fields, expected " + std::to_string(k.count) +
                        hdr + "; a truncated row, or text that is not an nccl-tests result");
    auto size = number(tok[k.size]);
    if (!size || *size < 0 || *size != std::floor(*size))
      return make_error(at + "size '" + tok[k.size] + "' is not a whole number of bytes" + hdr);
    if (*size == 0) {
      ++out.zero_size_rows;
      continue;
    }
    Collected::Halves halves;
    for (int h = 0; h < 2; ++h) {
      if (k.time[h] < 0) continue;
      const char* half = h == 0 ? "out-of-place" : "in-place";
      auto t = number(tok[k.time[h]]);
      if (!t || *t <= 0)
        return make_error(at + half + " time '" + tok[k.time[h]] + "' is not a positive number of microseconds" + hdr);
      bool checked = false;
      if (k.wrong[h] >= 0) {
        const std::string& w = tok[k.wrong[h]];
        if (w != "N/A") {
          auto n = number(w);
          if (!n || *n < 0)
            return make_error(at + half + " " + k.wrong_name + " '" + w +
                              "' is neither a count of wrong elements nor N/A" + hdr);
          if (*n > 0) {
            out.rejected.push_back(at + tok[k.size] + " B " + half + ": " + k.wrong_name + " = " + w +
                                   " (nccl-tests found wrong results), left out");
            continue;
          }
          checked = true;
        }
      }
      halves.keep(*t, checked, out);
    }
    c.add_size(*size, halves, out);
  }

  if (!cols)
    return make_error(where +
                      ": no nccl-tests result table (a header line '# size count type ... time algbw busbw "
                      "#wrong ...'); expected the standard output of one of " +
                      nccl_tests_programs());
  return finish_import(std::move(out), c, where, mesh, op, into);
}

Result<NcclTestsImport> load_nccl_tests(const std::string& path, std::optional<Mesh> mesh, BandwidthProfile* into) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return make_error("cannot open nccl-tests output '" + path + "' (expected the standard output of one of " +
                      nccl_tests_programs() + " saved to a file, or the JSON it writes with -J FILE.json)");
  std::ostringstream ss;
  ss << in.rdbuf();
  return import_nccl_tests(ss.str(), path, mesh, std::nullopt, into);
}

}  // namespace lins
