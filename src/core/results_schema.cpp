// StepRow: the step CSV's columns filled by name; see results_schema.h.
#include "core/results_schema.h"

#include <cstdio>
#include <cstdlib>

namespace lins {
namespace {

bool known(const std::string& column) {
  for (const auto& c : step_csv_columns())
    if (column == c.name) return true;
  return false;
}

void require_known(const std::string& column) {
  if (known(column)) return;
  std::fprintf(stderr, "lins: internal error: step CSV has no column '%s' (see core/results_schema.h)\n",
               column.c_str());
  std::abort();
}

}  // namespace

StepRow& StepRow::set(const std::string& column, std::string value) {
  require_known(column);
  values_[column] = std::move(value);
  return *this;
}

StepRow& StepRow::set(const std::string& column, double value) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", value);
  return set(column, std::string(buf));
}

StepRow& StepRow::set(const std::string& column, int64_t value) { return set(column, std::to_string(value)); }

const std::string& StepRow::get(const std::string& column) const {
  static const std::string empty;
  auto it = values_.find(column);
  return it == values_.end() ? empty : it->second;
}

std::vector<std::string> StepRow::ordered() const {
  std::vector<std::string> out;
  for (const auto& c : step_csv_columns()) out.push_back(get(c.name));
  return out;
}

std::vector<std::string> StepRow::header() {
  std::vector<std::string> out;
  for (const auto& c : step_csv_columns()) out.push_back(c.name);
  return out;
}

}  // namespace lins
