// Small text helpers the parsers of files (network files, bandwidth profiles, nccl-tests output, plans) share.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lins {

// s without leading and trailing white space.
std::string trim(std::string_view s);

// The white-space-separated words of s.
std::vector<std::string> split_ws(std::string_view s);

// The one splitter of lists: the fields of s between `sep`s, each without the white space around it; empty fields
// are kept ("4x" -> "4", "") unless `keep_empty` is false (",a, b,," -> "a", "b").
std::vector<std::string> split(std::string_view s, char sep, bool keep_empty = true);

// One line of a text, numbered from 1, without its '\n'.
struct TextLine {
  int number = 0;
  std::string_view text;
};
// The lines of a text (a last line without '\n' included; no empty line after a final '\n').
std::vector<TextLine> text_lines(std::string_view text);

// True when the line holds a control character other than tab and carriage return: a binary file, not text.
bool has_control_chars(std::string_view line);

// The one number parser of the file readers: the whole of `s` (leading white space and '+' allowed) is
// a finite number ("1048576", "1.5e9", "-2"); nullopt for "", "nan", "inf", "12abc", "1 ". The readers add their own
// range checks and messages.
std::optional<double> parse_finite(std::string_view s);
// Its counterpart for whole numbers: the whole of `s` is decimal digits that fit 64 bits ("0", "16"); nullopt for
// "", "-1", "+2", "1.0", "1e3", " 7".
std::optional<std::uint64_t> parse_whole(std::string_view s);

}  // namespace lins
