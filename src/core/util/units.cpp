// Size and duration parsing/printing; see units.h.
#include "core/util/units.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>

#include "core/util/text.h"

namespace lins {
namespace {

std::string quoted(std::string_view s) {
  std::string q;  // built by appends: GCC 12 at -O3 warns falsely (-Wrestrict) on "'" + std::string(s) + "'"
  q.reserve(s.size() + 2);
  q += '\'';
  q += s;
  q += '\'';
  return q;
}

}  // namespace

namespace {

// The one parser behind parse_size and parse_memory_size; `unit_required`: a bare number is refused.
Result<std::uint64_t> parse_size_with(std::string_view text, std::string_view what, bool unit_required) {
  const std::string hint =
      unit_required
          ? " (expected a whole number with a unit: B; KiB, MiB, GiB, TiB or K, M, G, T, powers of 1024; KB, MB, GB, "
            "TB, powers of 1000; for example 80GiB or 80GB)"
          : " (expected a positive whole number with an optional suffix: K, M, G, T or KiB, MiB, GiB, TiB, powers of "
            "1024; KB, MB, GB, TB, powers of 1000; for example 64M or 80GiB)";
  if (text.empty()) return make_error(std::string(what) + ": empty size" + hint);
  std::size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  if (digits == 0) return make_error(std::string(what) + ": " + quoted(text) + " is not a size" + hint);
  const auto whole = parse_whole(text.substr(0, digits));
  if (!whole) return make_error(std::string(what) + ": " + quoted(text) + " is too large" + hint);
  const std::uint64_t number = *whole;
  std::string suffix;
  for (char c : text.substr(digits)) suffix += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (suffix.empty() && unit_required)
    return make_error(std::string(what) + ": " + quoted(text) + " has no unit, and a bare number of bytes is rarely " +
                      "meant; write " + std::string(text) + "GiB (" + std::string(text) + " x 2^30 bytes), " +
                      std::string(text) + "GB (" + std::string(text) + " x 10^9) or " + std::string(text) + "B");
  std::uint64_t scale = 1;
  if (suffix.empty() || suffix == "B") {
    scale = 1;
  } else if (suffix == "K" || suffix == "KIB") {
    scale = 1ull << 10;
  } else if (suffix == "M" || suffix == "MIB") {
    scale = 1ull << 20;
  } else if (suffix == "G" || suffix == "GIB") {
    scale = 1ull << 30;
  } else if (suffix == "T" || suffix == "TIB") {
    scale = 1ull << 40;
  } else if (suffix == "KB") {
    scale = 1000ull;
  } else if (suffix == "MB") {
    scale = 1000ull * 1000;
  } else if (suffix == "GB") {
    scale = 1000ull * 1000 * 1000;
  } else if (suffix == "TB") {
    scale = 1000ull * 1000 * 1000 * 1000;
  } else {
    return make_error(std::string(what) + ": unknown suffix in " + quoted(text) + hint);
  }
  if (number > std::numeric_limits<std::uint64_t>::max() / scale)
    return make_error(std::string(what) + ": " + quoted(text) + " overflows 64 bits" + hint);
  return number * scale;
}

}  // namespace

Result<std::uint64_t> parse_size(std::string_view text, std::string_view what) {
  return parse_size_with(text, what, false);
}

Result<std::uint64_t> parse_memory_size(std::string_view text, std::string_view what) {
  return parse_size_with(text, what, true);
}

Result<int> parse_positive_int(std::string_view text, std::string_view what) {
  LINS_ASSIGN_OR_RETURN(auto size, parse_size(text, what));
  if (size == 0) return make_error(std::string(what) + " must be at least 1, got " + quoted(text));
  if (size > static_cast<std::uint64_t>(std::numeric_limits<int>::max()))
    return make_error(std::string(what) + ": " + quoted(text) + " is too large (at most 2147483647)");
  return static_cast<int>(size);
}

Result<double> parse_nonnegative_double(std::string_view text, std::string_view what) {
  if (text.empty()) return make_error(std::string(what) + ": empty value (expected a non-negative number such as 0.5)");
  const auto v = parse_finite(text);
  if (!v || *v < 0) return make_error(std::string(what) + ": " + quoted(text) + " is not a non-negative finite number");
  return *v;
}

std::string format_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (std::fabs(bytes) >= 1024.0 && u < 4) {
    bytes /= 1024.0;
    ++u;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.2f %s", bytes, units[u]);
  return buf;
}

std::string format_seconds(double seconds) {
  char buf[64];
  if (seconds >= 1.0) {
    std::snprintf(buf, sizeof buf, "%.3f s", seconds);
  } else if (seconds >= 1e-3) {
    std::snprintf(buf, sizeof buf, "%.3f ms", seconds * 1e3);
  } else {
    std::snprintf(buf, sizeof buf, "%.1f us", seconds * 1e6);
  }
  return buf;
}

}  // namespace lins
