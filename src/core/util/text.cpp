// Text helpers; see text.h.
#include "core/util/text.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>

namespace lins {

std::string trim(std::string_view s) {
  std::size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

std::vector<std::string> split_ws(std::string_view s) {
  std::vector<std::string> out;
  std::size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
    std::size_t j = i;
    while (j < s.size() && !std::isspace(static_cast<unsigned char>(s[j]))) ++j;
    if (j > i) out.emplace_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

std::vector<std::string> split(std::string_view s, char sep, bool keep_empty) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (true) {
    const std::size_t pos = s.find(sep, start);
    std::string field = trim(s.substr(start, pos == std::string_view::npos ? std::string_view::npos : pos - start));
    if (keep_empty || !field.empty()) out.push_back(std::move(field));
    if (pos == std::string_view::npos) break;
    start = pos + 1;
  }
  return out;
}

std::vector<TextLine> text_lines(std::string_view text) {
  std::vector<TextLine> lines;
  std::size_t pos = 0;
  int number = 0;
  while (pos < text.size()) {
    std::size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    lines.push_back(TextLine{++number, text.substr(pos, nl - pos)});
    pos = nl + 1;
  }
  return lines;
}

bool has_control_chars(std::string_view line) {
  for (char c : line)
    if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\r') return true;
  return false;
}

std::optional<double> parse_finite(std::string_view s) {
  // from_chars reads the C locale's decimal point whatever the process's locale, with no copy; the leading white
  // space and '+' that strtod took are skipped here, so that what was read before still is.
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  if (!s.empty() && s.front() == '+') {
    s.remove_prefix(1);
    if (!s.empty() && s.front() == '-') return std::nullopt;
  }
  if (s.empty()) return std::nullopt;
  double v = 0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::optional<std::uint64_t> parse_whole(std::string_view s) {
  if (s.empty()) return std::nullopt;
  std::uint64_t v = 0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

}  // namespace lins
