// An aligned text table for the terminal: columns with a header, an alignment, a least width and a number format;
// rows of cells; printed with each column as wide as its widest cell (header included), or, for a table printed as its
// rows come, at the columns' least widths.
//
//   TextTable t({{.header = "strategy", .width = 12}, {.header = "step_s", .align = Align::right, .format = "%.3f"}});
//   t.row().add("ddp").add(1.25);
//   t.print(std::cout);
#pragma once

#include <cstddef>
#include <ostream>
#include <string>
#include <vector>

namespace lins {

class TextTable {
 public:
  enum class Align { left, right };

  struct Column {
    std::string header;
    Align align = Align::left;
    std::size_t width = 0;      // the least width; a wider header or cell widens the column
    std::string format = "%g";  // printf format of the one double that add(double) prints in this column
    std::string gap = " ";      // what separates the column from the one before it (not printed before the first)
  };

  explicit TextTable(std::vector<Column> columns, std::string indent = "");

  // Starts a row; its cells follow, one add per column, in order.
  TextTable& row();
  TextTable& add(std::string text);
  TextTable& add(const char* text);
  TextTable& add(double number);  // printed with its column's format
  // Text printed after the row's last cell, outside the columns (it widens none).
  TextTable& note(std::string text);
  // Text printed after the header's last cell, as a row's note.
  TextTable& header_note(std::string text);

  // The header line, then every row, each column as wide as its widest cell.
  void print(std::ostream& out) const;

  // A table printed as its rows come, whose cells are not known ahead: the header line and a row, at the columns'
  // least widths (a wider cell pushes the rest of its line to the right, as printf's widths do).
  void print_header(std::ostream& out) const;
  void print_row(std::ostream& out, std::size_t row) const;

  std::size_t row_count() const { return rows_.size(); }

 private:
  struct Row {
    std::vector<std::string> cells;
    std::string note;
  };
  std::vector<std::size_t> least_widths() const;
  std::vector<std::size_t> content_widths() const;
  std::vector<std::string> headers() const;
  std::string line(const std::vector<std::string>& cells, const std::vector<std::size_t>& widths,
                   const std::string& note) const;

  std::vector<Column> columns_;
  std::string indent_;
  std::string header_note_;
  std::vector<Row> rows_;
};

}  // namespace lins
