// Kill-safe CSV writing with resume, and a small RFC 4180 reader; see csv.h.
#include "core/util/csv.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "core/util/text.h"

namespace lins {
namespace {

namespace fs = std::filesystem;

std::string errno_text() { return std::strerror(errno); }

}  // namespace

std::string csv_escape(std::string_view field) {
  if (field.find_first_of(",\"\r\n") == std::string_view::npos) return std::string(field);
  std::string out = "\"";
  for (char c : field) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
  return out;
}

std::string csv_join(const std::vector<std::string>& fields) {
  std::string line;
  for (std::size_t i = 0; i < fields.size(); ++i) {
    if (i) line += ',';
    line += csv_escape(fields[i]);
  }
  return line;
}

std::string csv_key(const std::vector<std::string>& values) {
  std::string key;
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i) key += '\x1f';
    key += values[i];
  }
  return key;
}

Result<std::vector<CsvRecord>> parse_csv(std::string_view text, const std::string& where) {
  std::vector<CsvRecord> out;
  std::size_t i = 0;
  int line = 1;
  while (i < text.size()) {
    // Skip empty lines between records.
    if (text[i] == '\n' || text[i] == '\r') {
      if (text[i] == '\n') ++line;
      ++i;
      continue;
    }
    CsvRecord rec;
    rec.line = line;
    std::string field;
    bool done = false;
    while (!done) {
      if (i < text.size() && text[i] == '"') {
        // Quoted field: runs to the closing quote; "" is a literal quote.
        const int start_line = line;
        ++i;
        bool closed = false;
        while (i < text.size()) {
          char c = text[i++];
          if (c == '"') {
            if (i < text.size() && text[i] == '"') {
              field += '"';
              ++i;
            } else {
              closed = true;
              break;
            }
          } else {
            if (c == '\n') ++line;
            field += c;
          }
        }
        if (!closed)
          return make_error(where + ":" + std::to_string(start_line) +
                            ": quoted field is never closed (expected a closing '\"')");
        if (i < text.size() && text[i] != ',' && text[i] != '\n' && text[i] != '\r')
          return make_error(where + ":" + std::to_string(line) +
                            ": unexpected character after a closing quote (expected ',' or the end of the line)");
      } else {
        while (i < text.size() && text[i] != ',' && text[i] != '\n' && text[i] != '\r') {
          if (text[i] == '"')
            return make_error(where + ":" + std::to_string(line) +
                              ": a quote inside an unquoted field (quote the whole field and double the quote)");
          field += text[i++];
        }
      }
      rec.fields.push_back(std::move(field));
      field.clear();
      if (i < text.size() && text[i] == ',') {
        ++i;
        continue;
      }
      // End of record: \n, \r\n or end of text.
      if (i < text.size() && text[i] == '\r') ++i;
      if (i < text.size() && text[i] == '\n') {
        ++i;
        ++line;
      }
      done = true;
    }
    out.push_back(std::move(rec));
  }
  return out;
}

Result<std::string> read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error("cannot open '" + path + "': " + errno_text());
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return make_error("cannot read '" + path + "': " + errno_text());
  return ss.str();
}

Result<std::vector<CsvRecord>> read_csv_file(const std::string& path) {
  LINS_ASSIGN_OR_RETURN(auto text, read_text_file(path));
  return parse_csv(text, path);
}

Result<CsvWriter> CsvWriter::open(const std::string& path, std::vector<std::string> columns, bool resume) {
  if (path.empty()) return make_error("CSV path is empty; give a file name such as results.csv");
  if (columns.empty()) return make_error("CSV '" + path + "': no columns given");
  {
    std::set<std::string> seen;
    for (const auto& c : columns) {
      if (c.empty()) return make_error("CSV '" + path + "': a column name is empty");
      if (!seen.insert(c).second) return make_error("CSV '" + path + "': column '" + c + "' appears twice");
    }
  }
  CsvWriter w;
  w.path_ = path;
  w.columns_ = std::move(columns);
  const std::string partial = w.partial_path();
  std::error_code ec;

  bool append = false;
  if (resume) {
    std::string source;
    if (fs::exists(partial, ec)) {
      source = partial;
    } else if (fs::exists(path, ec)) {
      // A finished file gets more rows: it becomes unfinished again until finish().
      fs::rename(path, partial, ec);
      if (ec) return make_error("cannot reopen '" + path + "' as '" + partial + "': " + ec.message());
      source = partial;
    }
    if (!source.empty()) {
      std::ifstream in(source, std::ios::binary);
      if (!in) return make_error("cannot open '" + source + "' to resume: " + errno_text());
      std::ostringstream ss;
      ss << in.rdbuf();
      std::string text = ss.str();
      in.close();
      // Rows are written whole and end with '\n'; anything after the last '\n' is a row cut off by a kill.
      const std::size_t keep = text.empty() ? 0 : text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
      if (keep != text.size()) {
        text.resize(keep);
        fs::resize_file(source, keep, ec);
        if (ec) return make_error("cannot drop the cut-off last line of '" + source + "': " + ec.message());
      }
      auto records = parse_csv(text, source);
      if (!records) return make_error("cannot resume from a damaged file: " + records.error());
      if (!records->empty()) {
        const auto& header = records->front();
        if (header.fields != w.columns_)
          return make_error("cannot resume '" + source + "': its header '" + csv_join(header.fields) +
                            "' differs from the expected '" + csv_join(w.columns_) +
                            "'; move the old file away or write to another path");
        for (std::size_t r = 1; r < records->size(); ++r) {
          const auto& rec = (*records)[r];
          if (rec.fields.size() != w.columns_.size())
            return make_error(source + ":" + std::to_string(rec.line) + ": row has " +
                              std::to_string(rec.fields.size()) + " fields, expected " +
                              std::to_string(w.columns_.size()) + " (one per header column)");
          w.rows_.push_back(rec.fields);
        }
        w.resumed_rows_ = w.rows_.size();
        append = true;
      }
    }
  }

  if (auto parent = fs::path(partial).parent_path(); !parent.empty() && !fs::is_directory(parent, ec))
    return make_error("cannot write '" + partial + "': folder '" + parent.string() + "' does not exist");
  std::FILE* f = std::fopen(partial.c_str(), append ? "ab" : "wb");
  if (!f) return make_error("cannot open '" + partial + "' for writing: " + errno_text());
  w.file_.reset(f);
  if (!append) {
    const std::string header = csv_join(w.columns_) + "\n";
    if (std::fwrite(header.data(), 1, header.size(), f) != header.size() || std::fflush(f) != 0)
      return make_error("cannot write the header of '" + partial + "': " + errno_text());
  }
  return w;
}

CsvWriter::~CsvWriter() = default;

Status CsvWriter::write_row(const std::vector<std::string>& values) {
  if (!file_) return make_error("CSV '" + path_ + "' is already finished; no more rows can be written");
  if (values.size() != columns_.size())
    return make_error("CSV '" + path_ + "': row has " + std::to_string(values.size()) + " values, expected " +
                      std::to_string(columns_.size()) + " (one per column)");
  const std::string line = csv_join(values) + "\n";
  if (std::fwrite(line.data(), 1, line.size(), file_.get()) != line.size() || std::fflush(file_.get()) != 0)
    return make_error("cannot write a row to '" + partial_path() + "': " + errno_text());
  rows_.push_back(values);
  return {};
}

Status CsvWriter::finish() {
  if (!file_) return make_error("CSV '" + path_ + "' is already finished");
  std::FILE* f = file_.release();
  if (std::fclose(f) != 0) return make_error("cannot close '" + partial_path() + "': " + errno_text());
  std::error_code ec;
  fs::rename(partial_path(), path_, ec);
  if (ec) return make_error("cannot rename '" + partial_path() + "' to '" + path_ + "': " + ec.message());
  return {};
}

int CsvWriter::column_index(std::string_view name) const {
  for (std::size_t i = 0; i < columns_.size(); ++i)
    if (columns_[i] == name) return static_cast<int>(i);
  return -1;
}

Result<std::set<std::string>> CsvWriter::existing_keys(const std::vector<std::string>& key_columns) const {
  std::vector<int> idx;
  for (const auto& k : key_columns) {
    const int i = column_index(k);
    if (i < 0)
      return make_error("CSV '" + path_ + "': no column '" + k + "' to key rows by; columns: " + csv_join(columns_));
    idx.push_back(i);
  }
  std::set<std::string> keys;
  std::vector<std::string> vals(idx.size());
  for (const auto& row : rows_) {
    for (std::size_t j = 0; j < idx.size(); ++j) vals[j] = row[idx[j]];
    keys.insert(csv_key(vals));
  }
  return keys;
}

bool CsvWriter::has_row(const std::vector<std::string>& key_columns, const std::vector<std::string>& key_values) const {
  auto keys = existing_keys(key_columns);
  return keys && keys->count(csv_key(key_values)) > 0;
}

Result<CsvTable> CsvTable::parse(std::string_view text, const std::string& where, std::string expected, bool comments) {
  std::string kept;  // the text with comment lines blanked, so that line numbers stay the file's
  kept.reserve(text.size());
  for (const auto& [number, line] : text_lines(text)) {
    if (has_control_chars(line))
      return make_error(where + ":" + std::to_string(number) + ": unreadable (control characters); expected " +
                        expected);
    const bool comment = comments && !line.empty() && line.front() == '#';
    if (!comment) kept += line;
    kept += '\n';
  }
  LINS_ASSIGN_OR_RETURN(auto records, parse_csv(kept, where));
  if (records.empty()) return make_error(where + ": empty (expected " + expected + ")");
  for (CsvRecord& r : records)
    for (std::string& f : r.fields) f = trim(f);
  CsvTable t;
  t.where_ = where;
  t.expected_ = std::move(expected);
  t.header_line_ = records.front().line;
  t.header_ = std::move(records.front().fields);
  t.rows_.assign(std::make_move_iterator(records.begin() + 1), std::make_move_iterator(records.end()));
  return t;
}

Status CsvTable::require(const std::vector<const char*>& names) const {
  for (const char* n : names)
    if (column(n) < 0)
      return make_error(where_ + ":" + std::to_string(header_line_) + ": no column '" + n + "' (expected " + expected_ +
                        ")");
  return Status::ok_status();
}

int CsvTable::column(std::string_view name) const {
  for (std::size_t i = 0; i < header_.size(); ++i)
    if (header_[i] == name) return static_cast<int>(i);
  return -1;
}

std::string CsvTable::at(std::size_t r) const { return where_ + ":" + std::to_string(rows_[r].line); }

Status CsvTable::check_width(std::size_t r) const {
  const std::size_t n = rows_[r].fields.size();
  if (n != header_.size())
    return make_error(at(r) + ": " + std::to_string(n) + " fields, the header has " + std::to_string(header_.size()));
  return Status::ok_status();
}

const std::string& CsvTable::text(std::size_t r, std::string_view name) const {
  static const std::string empty;
  const int c = column(name);
  const auto& f = rows_[r].fields;
  return c >= 0 && static_cast<std::size_t>(c) < f.size() ? f[static_cast<std::size_t>(c)] : empty;
}

Result<double> CsvTable::number(std::size_t r, std::string_view name) const {
  const std::string& v = text(r, name);
  if (auto x = parse_finite(v)) return *x;
  return make_error(at(r) + ": column '" + std::string(name) + "': '" + v + "' is not a finite number");
}

}  // namespace lins
