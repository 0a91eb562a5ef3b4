// libFuzzer target: the CSV reader that `lins step --resume` and `lins simulate --calibrate` use. Any text parses or
// is rejected with a message; a parsed record re-joins (csv_join) into text that parses back to the same fields.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/util/csv.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return 0;
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto records = lins::parse_csv(text, "fuzz.csv");
  if (!records) {
    if (records.error().empty()) __builtin_trap();
    return 0;
  }
  for (const auto& r : *records) {
    const std::string line = lins::csv_join(r.fields) + "\n";
    auto again = lins::parse_csv(line, "again.csv");
    if (!again) __builtin_trap();
    // A record of one empty field is an empty line, which the reader skips.
    if (r.fields.size() == 1 && r.fields[0].empty()) continue;
    if (again->size() != 1 || (*again)[0].fields != r.fields) __builtin_trap();
  }
  return 0;
}
