#include "core/output/text_table.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <utility>

namespace lins {

TextTable::TextTable(std::vector<Column> columns, std::string indent)
    : columns_(std::move(columns)), indent_(std::move(indent)) {}

TextTable& TextTable::row() {
  rows_.emplace_back();
  return *this;
}

TextTable& TextTable::add(std::string text) {
  if (rows_.empty()) throw std::logic_error("TextTable::add before TextTable::row");
  Row& r = rows_.back();
  if (r.cells.size() >= columns_.size())
    throw std::logic_error("TextTable::add: a row has at most " + std::to_string(columns_.size()) + " cells");
  r.cells.push_back(std::move(text));
  return *this;
}

TextTable& TextTable::add(const char* text) { return add(std::string(text)); }

TextTable& TextTable::add(double number) {
  if (rows_.empty()) throw std::logic_error("TextTable::add before TextTable::row");
  const std::size_t column = rows_.back().cells.size();
  if (column >= columns_.size())
    throw std::logic_error("TextTable::add: a row has at most " + std::to_string(columns_.size()) + " cells");
  const char* format = columns_[column].format.c_str();
  const int n = std::snprintf(nullptr, 0, format, number);
  std::string text(static_cast<std::size_t>(std::max(n, 0)), '\0');
  std::snprintf(text.data(), text.size() + 1, format, number);
  return add(std::move(text));
}

TextTable& TextTable::note(std::string text) {
  if (rows_.empty()) throw std::logic_error("TextTable::note before TextTable::row");
  rows_.back().note = std::move(text);
  return *this;
}

TextTable& TextTable::header_note(std::string text) {
  header_note_ = std::move(text);
  return *this;
}

std::vector<std::string> TextTable::headers() const {
  std::vector<std::string> out;
  for (const Column& c : columns_) out.push_back(c.header);
  return out;
}

std::vector<std::size_t> TextTable::least_widths() const {
  std::vector<std::size_t> widths(columns_.size());
  for (std::size_t i = 0; i < columns_.size(); ++i) widths[i] = std::max(columns_[i].width, columns_[i].header.size());
  return widths;
}

std::vector<std::size_t> TextTable::content_widths() const {
  std::vector<std::size_t> widths = least_widths();
  for (const Row& r : rows_)
    for (std::size_t i = 0; i < r.cells.size(); ++i) widths[i] = std::max(widths[i], r.cells[i].size());
  return widths;
}

// A left-aligned cell that ends its line (no note after it) is not padded, so that no line ends in spaces it does not
// need.
std::string TextTable::line(const std::vector<std::string>& cells, const std::vector<std::size_t>& widths,
                            const std::string& note) const {
  std::string out = indent_;
  for (std::size_t i = 0; i < cells.size(); ++i) {
    if (i > 0) out += columns_[i].gap;
    const std::string& cell = cells[i];
    const std::size_t fill = cell.size() < widths[i] ? widths[i] - cell.size() : 0;
    if (columns_[i].align == Align::right) {
      out.append(fill, ' ');
      out += cell;
    } else {
      out += cell;
      if (i + 1 < cells.size() || !note.empty()) out.append(fill, ' ');
    }
  }
  return out + note;
}

void TextTable::print(std::ostream& out) const {
  const std::vector<std::size_t> widths = content_widths();
  out << line(headers(), widths, header_note_) << '\n';
  for (const Row& r : rows_) out << line(r.cells, widths, r.note) << '\n';
}

void TextTable::print_header(std::ostream& out) const { out << line(headers(), least_widths(), header_note_) << '\n'; }

void TextTable::print_row(std::ostream& out, std::size_t row) const {
  const Row& r = rows_.at(row);
  out << line(r.cells, least_widths(), r.note) << '\n';
}

}  // namespace lins
