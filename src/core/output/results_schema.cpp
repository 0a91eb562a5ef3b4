// The output tables' columns, and rows filled by column name; see results_schema.h.
#include "core/output/results_schema.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "core/cost/cost_model.h"  // kProfileHeader
#include "core/model/plan.h"       // kPresets
#include "core/output/model_schema.h"
#include "core/schedule/schedule.h"  // kPurposeNames
#include "core/util/json.h"
#include "core/util/text.h"

namespace lins {
const std::vector<Column>& step_csv_columns() {
  static const std::vector<Column> cols = [] {
    std::vector<Column> c = detail::step_columns_head();
    for (CollKind k : kCollKindNames.values())
      c.push_back(
          {std::string(coll_kind_name(k)) + "_bytes",
           std::string(kCollKindNames.prose(k)) + " message bytes per rank per step, counted by the communicator"});
    for (Column& m : detail::step_columns_middle()) c.push_back(std::move(m));
    for (CollKind k : kCollKindNames.values())
      c.push_back({"pred_" + std::string(coll_kind_name(k)) + "_bytes",
                   std::string(kCollKindNames.prose(k)) + " message bytes per rank per step, from the schedule"});
    for (Column& t : detail::step_columns_tail()) c.push_back(std::move(t));
    return c;
  }();
  return cols;
}

CsvRow::CsvRow(std::string table, std::vector<std::string> columns)
    : table_(std::move(table)), columns_(std::move(columns)) {}

CsvRow& CsvRow::set(const std::string& column, std::string value) {
  if (std::find(columns_.begin(), columns_.end(), column) == columns_.end()) {
    std::fprintf(stderr, "lins: internal error: the %s CSV has no column '%s' (see core/output/results_schema.h)\n",
                 table_.c_str(), column.c_str());
    std::abort();
  }
  values_[column] = std::move(value);
  return *this;
}

CsvRow& CsvRow::set(const std::string& column, double value) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", value);
  return set(column, std::string(buf));
}

CsvRow& CsvRow::set(const std::string& column, int64_t value) { return set(column, std::to_string(value)); }

const std::string& CsvRow::get(const std::string& column) const {
  static const std::string empty;
  auto it = values_.find(column);
  return it == values_.end() ? empty : it->second;
}

std::vector<std::string> CsvRow::ordered() const {
  std::vector<std::string> out;
  for (const auto& c : columns_) out.push_back(get(c));
  return out;
}

StepRow::StepRow() : CsvRow("step", header()) {}

std::vector<std::string> StepRow::header() {
  std::vector<std::string> out;
  for (const auto& c : step_csv_columns()) out.push_back(c.name);
  return out;
}

std::vector<std::string> plan_csv_columns() {
  std::vector<std::string> cols = {
      "model",
      "params",
      "gpus_per_node",
      "nodes",
      "seq",
      "micro_batch_size",
      "micro_batches",
      "recompute",
      "network",
      "profile",
      "gpu_mem_bytes",
      "bucket_bytes",
      "name",
      "plan",
      "engine",
      "baseline",
      "s0_p",
      "s1_p",
      "s0_g",
      "s1_g",
      "s0_os",
      "s1_os",
      "os_layout",
      "p_bytes",
      "g_bytes",
      "os_bytes",
      "state_bytes",
      "closed_form_state_bytes",
      "activation_bytes",
      "buffer_bytes",
      "total_bytes",
      "intra_bytes",
      "inter_bytes",
      "comm_param_s",
      "comm_grad_s",
      "comm_os_sync_s",
      "comm_os_bcast_s",
      "comm_s",
      "shared_comm_param_s",
      "shared_comm_grad_s",
      "shared_comm_os_sync_s",
      "shared_comm_os_bcast_s",
      "shared_comm_s",
      "fallback_ops",
      "ranked_by",
      "rank",
      "feasible",
      "why",
      "network_model",
      "reserve_bytes",
      "objective",
      "other_rank",
      "tier",
      "recommended",
      "projected_step_s",
      "projected_mfu",
      "forward_s",
      "backward_s",
      "optimizer_s",
      "host_s",
      "exposed_comm_s",
      "contention_compute_s",
      "host_stall_s",
  };
  // The projection's exposed seconds by collective kind and mesh axis, then by op purpose and axis (the order
  // cmd_plan.cpp writes them in).
  for (CollKind k : kCollKindNames.values())
    for (Axis x : kAxisNames.values())
      cols.push_back("exposed_" + std::string(coll_kind_name(k)) + "_" + axis_name(x) + "_s");
  for (int u = 0; u < kPurposeCount; ++u)
    for (Axis x : kAxisNames.values())
      cols.push_back("exposed_" + std::string(purpose_name(Purpose(u))) + "_" + axis_name(x) + "_s");
  return cols;
}

std::vector<std::string> comm_csv_columns() {
  return {"op",         "backend",       "dtype",         "group",       "mesh_intra", "mesh_inter",
          "group_size", "world_size",    "message_bytes", "count_elems", "iters",      "warmup_iters",
          "time_min_s", "time_median_s", "time_max_s",    "algbw_gbps",  "busbw_gbps", "wrong_elems"};
}

std::string column_unit(const std::string& name) {
  auto ends = [&](const char* suffix) {
    const std::string s = suffix;
    return name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
  };
  if (ends("_bytes")) return "bytes";
  if (ends("_gbps")) return "GB/s";
  if (ends("_tflops")) return "TFLOP/s";
  if (ends("_elems")) return "elements";
  if (ends("_s")) return "s";
  if (name == "mfu" || name == "mfu_causal" || name == "projected_mfu") return "fraction";
  if (name == "tgs") return "tokens/GPU/s";
  return "";
}

namespace {
// The collective table's names (core/collectives.h), as the `op` columns spell them and as figures label them.
Json collectives_json() {
  Json a = Json::array();
  for (CollKind k : kCollKindNames.values()) {
    Json spellings = Json::array();
    for (std::string_view w : kCollKindNames.spellings(k)) spellings.push_back(std::string(w));
    const Collective& c = collective(k);
    a.push_back({{"name", coll_kind_name(k)},
                 {"spellings", spellings},
                 {"short", c.short_name},
                 {"label", c.label},
                 {"count", c.count_unit}});
  }
  return a;
}
// The preset table (core/model/plan.h), which the Python side reads instead of keeping its own list: each preset's
// engine, its factors as rules on R GPUs per node x N nodes (one: 1x1, all: R x N, group: the preset's group), its
// ':' argument and how figures name it.
Json presets_json() {
  Json a = Json::array();
  for (const PresetRow& row : kPresets) {
    a.push_back({{"name", std::string(row.name)},
                 {"spelling", std::string(row.spelling)},
                 {"label", std::string(row.label)},
                 {"engine", engine_name(row.engine)},
                 {"p", preset_factor_name(row.p)},
                 {"g", preset_factor_name(row.g)},
                 {"os", preset_factor_name(row.os)},
                 {"argument", preset_arg_name(row.arg)},
                 {"help", std::string(row.help)}});
  }
  return a;
}
}  // namespace

std::string output_schemas_json() {
  const std::vector<std::string> profile = split(kProfileHeader, ',');
  auto column = [&](const std::string& name, const char* help, bool is_text) {
    Json o = {{"name", name}, {"unit", column_unit(name)}, {"type", is_text ? "text" : "number"}};
    if (help) o["help"] = help;
    return o;
  };
  Json step = Json::array();
  for (const Column& c : step_csv_columns()) step.push_back(column(c.name, c.help.c_str(), c.text));
  auto plain = [&](const std::vector<std::string>& names, const std::vector<std::string>& texts) {
    Json a = Json::array();
    for (const std::string& n : names)
      a.push_back(column(n, nullptr, std::find(texts.begin(), texts.end(), n) != texts.end()));
    return a;
  };
  const Json all = {
      {"lins_schema_version", 1},
      {"step", {{"writer", "lins step --out DIR (step.csv); lins simulate --out FILE"}, {"columns", step}}},
      {"plan",
       {{"writer", "lins plan --csv FILE"},
        {"columns", plain(plan_csv_columns(), {"model", "network", "profile", "name", "plan", "engine", "baseline",
                                               "os_layout", "ranked_by", "why", "network_model", "objective"})}}},
      {"comm",
       {{"writer", "lins comm --csv FILE"},
        {"columns", plain(comm_csv_columns(), {"op", "backend", "dtype", "group"})}}},
      {"profile", {{"writer", "lins comm --profile FILE"}, {"columns", plain(profile, {"op"})}}},
      {"collectives", collectives_json()},
      {"presets", presets_json()},
      {"models", model_presets_json()},
      {"flops_per_token", flops_per_token_json()},
  };
  return json_dump(all, 2) + "\n";
}

}  // namespace lins
