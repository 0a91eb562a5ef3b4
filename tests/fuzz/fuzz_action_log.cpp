// libFuzzer target: the action-log reader and the trace replay (`lins replay`). Any text is replayed or rejected (by
// the reader with a message naming the file); nothing may index or size memory by a number the log gives unchecked,
// and dispatch delays are never negative.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/projection/replay.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 16384) return 0;
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto log = lins::parse_action_log(text, "fuzz.csv");
  if (!log) {
    if (log.error().find("fuzz.csv") == std::string::npos) __builtin_trap();  // errors name the file
    return 0;
  }
  auto r = lins::replay(*log);
  if (!r) return 0;
  if (r->dispatch_delay_s < 0 || r->largest_dispatch_delay_s < 0) __builtin_trap();
  return 0;
}
