// libFuzzer target: size and number parsing (K/M/G suffixes, overflow). Accepted values must print back to the
// same number; rejections must say why.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/util/units.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 64) return 0;
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto v = lins::parse_size(text, "--size");
  if (v) {
    auto back = lins::parse_size(std::to_string(*v), "--size");
    if (!back || *back != *v) __builtin_trap();
  } else if (v.error().empty()) {
    __builtin_trap();
  }
  auto i = lins::parse_positive_int(text, "--n");
  if (i && *i < 1) __builtin_trap();
  auto d = lins::parse_nonnegative_double(text, "--x");
  if (d && !(*d >= 0)) __builtin_trap();
  return 0;
}
