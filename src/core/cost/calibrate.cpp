// Calibration of compute from measured step rows; see calibrate.h.
#include "core/cost/calibrate.h"

#include <algorithm>
#include <cstdlib>
#include <set>
#include <vector>

#include "core/model/model_spec.h"
#include "core/util/csv.h"

namespace lins {
namespace {

struct Sample {
  double M = 1, flops = 0, compute_s = 0, other_s = 0;  // other: step - compute - exposed - optimizer
};

EngineCalibration fit(const std::vector<Sample>& rows) {
  EngineCalibration c;
  c.rows = static_cast<int>(rows.size());
  std::set<double> ms;
  double flops = 0, compute = 0, other = 0;
  for (const auto& r : rows) ms.insert(r.M), flops += r.flops, compute += r.compute_s, other += r.other_s;
  c.micro_batch_counts = static_cast<int>(ms.size());
  double intercept = 0;
  if (ms.size() >= 2) {
    // Least squares of compute_s = a + b * (flops per step): b is seconds per FLOP, a the per-step part.
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (const auto& r : rows) sx += r.flops, sy += r.compute_s, sxx += r.flops * r.flops, sxy += r.flops * r.compute_s;
    const double n = double(rows.size()), den = n * sxx - sx * sx;
    const double b = den > 0 ? (n * sxy - sx * sy) / den : 0;
    if (b > 0) {
      intercept = std::max(0.0, (sy - b * sx) / n);
      c.flops_per_s = 1.0 / b;
    }
  }
  if (c.flops_per_s <= 0 && compute > 0) c.flops_per_s = flops / compute;
  c.fixed_step_s = std::max(0.0, other / std::max<double>(1, double(rows.size()))) + intercept;
  return c;
}

Json engine_json(const EngineCalibration& c) {
  Json o = Json::object();
  o["sustained_tflops"] = c.flops_per_s / 1e12;
  o["fixed_step_s"] = c.fixed_step_s;
  o["rows"] = c.rows;
  o["micro_batch_counts"] = c.micro_batch_counts;
  return o;
}

}  // namespace

const EngineCalibration& Calibration::of(const std::string& engine_name) const {
  auto it = engine.find(engine_name);
  return it != engine.end() && it->second.flops_per_s > 0 ? it->second : all;
}

Json Calibration::to_json() const {
  Json o = Json::object();
  o["from"] = source;
  o["all_engines"] = engine_json(all);
  Json per = Json::object();
  for (const auto& [name, c] : engine) per[name] = engine_json(c);
  o["per_engine"] = per;
  o["method"] =
      "per engine: forward + backward seconds fitted as a + b x FLOPs over rows at 2+ micro-batch counts (rate = "
      "1/b), else FLOPs / seconds; fixed = mean(step - forward - backward - optimizer - exposed comm) + a";
  return o;
}

Result<Calibration> calibrate_from_step_text(std::string_view text, const std::string& where) {
  LINS_ASSIGN_OR_RETURN(const CsvTable t, CsvTable::parse(text, where, "a `lins step` CSV"));
  LINS_TRY(t.require({"source", "engine", "model", "seq", "tokens", "world_size", "recompute", "forward_s",
                      "backward_s", "optimizer_s", "step_time_s", "exposed_comm_s", "micro_batches"}));
  std::map<std::string, std::vector<Sample>> by_engine;
  std::vector<Sample> every;
  for (std::size_t r = 0; r < t.rows(); ++r) {
    if (!t.check_width(r) || t.text(r, "source") != "measured") continue;
    auto model = make_model_preset(t.text(r, "model"));
    if (!model) continue;  // custom shapes carry no dimensions in the CSV
    // An empty field is a figure the run did not measure (0, as the fit has always read it); anything else must be
    // a number, or the file:line and column are named.
    Status bad;
    auto num = [&](const char* name) {
      if (t.text(r, name).empty()) return 0.0;
      auto v = t.number(r, name);
      if (!v && bad) bad = make_error(v.error());
      return v ? *v : 0.0;
    };
    const double world = num("world_size");
    Sample s;
    s.M = num("micro_batches");
    s.compute_s = num("forward_s") + num("backward_s");
    // Recomputation's forward again: a third more under full (as the simulator prices it), the attention core's
    // forward under selective.
    const int seq = static_cast<int>(num("seq"));
    const std::string rc = t.text(r, "recompute");
    const double extra = rc == "1"           ? 4.0 / 3.0
                         : rc == "selective" ? 1.0 + model->recompute_flops_per_token(seq, Recompute::selective) /
                                                         model->flops_per_token(seq)
                                             : 1.0;
    s.flops = model->flops_per_token(seq) * num("tokens") / std::max(world, 1.0) * extra;
    s.other_s = num("step_time_s") - s.compute_s - num("optimizer_s") - num("exposed_comm_s");
    if (!bad) return make_error(bad.error() + " (expected a `lins step` CSV)");
    if (world < 1 || s.compute_s <= 0) continue;
    by_engine[t.text(r, "engine")].push_back(s);
    every.push_back(s);
  }
  if (every.empty()) return make_error(where + ": no measured row of a preset model with compute time");
  Calibration c;
  c.source = where;
  c.all = fit(every);
  for (const auto& [name, rows] : by_engine) c.engine[name] = fit(rows);
  return c;
}

Result<Calibration> calibrate_from_step_csv(std::string_view paths) {
  std::string text, header, names;
  std::size_t start = 0;
  while (start <= paths.size()) {
    const std::size_t comma = paths.find(',', start);
    const std::string path(
        paths.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
    if (!path.empty()) {
      LINS_ASSIGN_OR_RETURN(auto t, read_text_file(path));
      const std::size_t eol = t.find('\n');
      const std::string h = t.substr(0, eol);
      if (header.empty()) {
        header = h, text = t;
      } else if (h != header) {
        return make_error(path + ": its columns differ from " + names + "'s; calibrate from step CSVs of one version");
      } else if (eol != std::string::npos) {
        text += t.substr(eol + 1);
      }
      names += (names.empty() ? "" : ",") + path;
    }
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  if (names.empty())
    return make_error("--calibrate: no file given (a `lins step` CSV, or several separated by commas)");
  auto c = calibrate_from_step_text(text, names);
  if (!c) return make_error("--calibrate " + c.error());
  return c;
}

}  // namespace lins
