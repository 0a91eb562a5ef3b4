// CSV files that survive being killed: rows go to <path>.partial, each row appended whole and flushed, and only
// finish() renames the file to <path>. A sweep can resume from a .partial (or a finished file) and skip the rows it
// already has. Fields with commas, quotes or line breaks are quoted (RFC 4180).
#pragma once

#include <cstdio>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/util/result.h"

namespace lins {

// One field as it appears in a CSV line: quoted (with doubled quotes) only when it needs to be.
std::string csv_escape(std::string_view field);
// One CSV line of fields, without the trailing newline.
std::string csv_join(const std::vector<std::string>& fields);

// A CSV record with the line it starts on (1-based), as read back.
struct CsvRecord {
  std::vector<std::string> fields;
  int line = 0;
};

// Parses CSV text (RFC 4180: quoted fields may hold commas, doubled quotes and line breaks; CRLF accepted).
// `where` names the source in errors ("file.csv"). A record cut off inside quotes is an error. Empty lines are
// skipped.
Result<std::vector<CsvRecord>> parse_csv(std::string_view text, const std::string& where);
// Reads and parses a whole file.
Result<std::vector<CsvRecord>> read_csv_file(const std::string& path);
// The whole file as text; the error names the file and the system's reason.
Result<std::string> read_text_file(const std::string& path);

// A CSV file read by its header: columns found by name, each row's fields read as text or as numbers, and every
// error naming "file:line" and the column. Every CSV reader of lins uses it: step CSVs (calibration), action logs
// (replay), bandwidth profiles, host costs.
class CsvTable {
 public:
  // The first record is the header. `expected` says what the file should be, for errors ("a `lins step` CSV").
  // Fields are read without the white space around them. A line with control characters (other than tab and
  // carriage return) is an error: a binary file, not CSV. With `comments`, lines that start with '#' (provenance)
  // are skipped; line numbers still count them.
  static Result<CsvTable> parse(std::string_view text, const std::string& where, std::string expected,
                                bool comments = false);
  // An error naming the first of `names` the header lacks ("file:line: no column 'x' (expected ...)").
  Status require(const std::vector<const char*>& names) const;
  int column(std::string_view name) const;  // -1 when the header lacks it
  std::size_t rows() const { return rows_.size(); }
  std::size_t columns() const { return header_.size(); }
  // "file:line" of row r (0 = the first row after the header).
  std::string at(std::size_t r) const;
  // An error unless row r has as many fields as the header.
  Status check_width(std::size_t r) const;
  // The field of row r under `name` (which require() has checked); "" for a short row.
  const std::string& text(std::size_t r, std::string_view name) const;
  // The same as a finite number; the error says "file:line: column 'name': 'v' is not a finite number".
  Result<double> number(std::size_t r, std::string_view name) const;

 private:
  std::string where_, expected_;
  std::vector<std::string> header_;
  int header_line_ = 1;
  std::vector<CsvRecord> rows_;
};

// Joins key values with a separator that cannot appear in ordinary fields (unit separator, 0x1f).
std::string csv_key(const std::vector<std::string>& values);

class CsvWriter {
 public:
  // Opens <path>.partial for writing. resume = false: starts a new file with the header (an existing <path> is
  // replaced only by finish()). resume = true: re-opens <path>.partial, else the finished <path> (moved back to
  // .partial), keeping their rows when the header equals `columns`; a last line cut off by a kill is dropped; with
  // neither file present it starts a new one. Errors: empty or duplicate columns, a header that does not match, a
  // row whose field count differs from the header, I/O failures.
  static Result<CsvWriter> open(const std::string& path, std::vector<std::string> columns, bool resume = false);

  CsvWriter(CsvWriter&&) noexcept = default;
  CsvWriter& operator=(CsvWriter&&) noexcept = default;
  ~CsvWriter();  // closes the .partial without renaming it (an unfinished run stays visibly unfinished)

  // Appends one whole row (one value per column, in column order) and flushes it to the file.
  Status write_row(const std::vector<std::string>& values);
  // Closes the file and renames <path>.partial to <path>. No rows can be written afterwards.
  Status finish();

  // Index of a column, or -1.
  int column_index(std::string_view name) const;
  // Keys (csv_key of the values of `key_columns`, in that order) of every row in the file: the rows kept on resume
  // plus the rows written since. An unknown key column is an error.
  Result<std::set<std::string>> existing_keys(const std::vector<std::string>& key_columns) const;
  // Whether a row with these key values exists (same key columns as the values, in order).
  bool has_row(const std::vector<std::string>& key_columns, const std::vector<std::string>& key_values) const;

  const std::vector<std::string>& columns() const { return columns_; }
  std::size_t row_count() const { return rows_.size(); }
  std::size_t resumed_row_count() const { return resumed_rows_; }
  const std::string& path() const { return path_; }
  std::string partial_path() const { return path_ + ".partial"; }

 private:
  CsvWriter() = default;
  struct FileCloser {
    void operator()(std::FILE* f) const {
      if (f) std::fclose(f);
    }
  };
  std::string path_;
  std::vector<std::string> columns_;
  std::vector<std::vector<std::string>> rows_;  // every row in the file, for existing_keys
  std::size_t resumed_rows_ = 0;
  std::unique_ptr<std::FILE, FileCloser> file_;
};

}  // namespace lins
