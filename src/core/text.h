// Small text helpers the parsers of files (network files, bandwidth profiles, nccl-tests output, plans) share.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace lins {

// s without leading and trailing white space.
std::string trim(std::string_view s);

// The white-space-separated words of s.
std::vector<std::string> split_ws(std::string_view s);

// One line of a text, numbered from 1, without its '\n'.
struct TextLine {
  int number = 0;
  std::string_view text;
};
// The lines of a text (a last line without '\n' included; no empty line after a final '\n').
std::vector<TextLine> text_lines(std::string_view text);

// True when the line holds a control character other than tab and carriage return: a binary file, not text.
bool has_control_chars(std::string_view line);

}  // namespace lins
