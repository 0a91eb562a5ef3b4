// A tiny JSON writer for provenance files (argv, versions, hosts, settings): objects keep insertion order, strings
// are escaped, non-finite numbers become null. Plus write_file_atomic, so a reader never sees half a file.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "core/result.h"

namespace lins {

class JsonValue;

class JsonArray {
 public:
  JsonArray() = default;
  JsonArray& push(JsonValue v);
  std::size_t size() const;
  const std::vector<JsonValue>& items() const { return items_; }

 private:
  std::vector<JsonValue> items_;
};

class JsonObject {
 public:
  JsonObject() = default;
  // Adds a member; a key given again replaces the earlier value in place.
  JsonObject& set(std::string key, JsonValue v);
  std::size_t size() const;
  const std::vector<std::pair<std::string, JsonValue>>& members() const { return members_; }
  // Pretty-printed with `indent` spaces per level (0 = one line), ending without a newline.
  std::string dump(int indent = 2) const;

 private:
  std::vector<std::pair<std::string, JsonValue>> members_;
};

class JsonValue {
 public:
  JsonValue() = default;                                           // null
  JsonValue(std::nullptr_t) {}                                     // NOLINT(google-explicit-constructor)
  JsonValue(bool b) : v_(b) {}                                     // NOLINT
  JsonValue(int i) : v_(static_cast<int64_t>(i)) {}                // NOLINT
  JsonValue(long i) : v_(static_cast<int64_t>(i)) {}               // NOLINT
  JsonValue(long long i) : v_(static_cast<int64_t>(i)) {}          // NOLINT
  JsonValue(unsigned i) : v_(static_cast<int64_t>(i)) {}           // NOLINT
  JsonValue(unsigned long i) : v_(static_cast<double>(i)) {}       // NOLINT: may exceed int64
  JsonValue(unsigned long long i) : v_(static_cast<double>(i)) {}  // NOLINT
  JsonValue(double d) : v_(d) {}                                   // NOLINT
  JsonValue(const char* s) : v_(std::string(s)) {}                 // NOLINT
  JsonValue(std::string s) : v_(std::move(s)) {}                   // NOLINT
  JsonValue(std::string_view s) : v_(std::string(s)) {}            // NOLINT
  JsonValue(JsonArray a) : v_(std::move(a)) {}                     // NOLINT
  JsonValue(JsonObject o) : v_(std::move(o)) {}                    // NOLINT
  JsonValue(const std::vector<std::string>& xs);                   // NOLINT: array of strings
  JsonValue(const std::vector<double>& xs);                        // NOLINT: array of numbers
  JsonValue(const std::vector<int64_t>& xs);                       // NOLINT: array of integers

  std::string dump(int indent = 2) const;

 private:
  friend class JsonObject;
  void write(std::string& out, int indent, int depth) const;
  std::variant<std::monostate, bool, int64_t, double, std::string, JsonArray, JsonObject> v_;
};

// A JSON string literal with quotes: escapes ", \, and control characters (\n, \t, \u00XX); UTF-8 passes through.
std::string json_quote(std::string_view s);
// Shortest text that reads back as the same double; "null" for NaN and infinities.
std::string json_number(double d);

// Writes `content` to `path` through a temporary file in the same folder and a rename, so `path` is either the old
// file or the whole new one.
Status write_file_atomic(const std::string& path, std::string_view content);

}  // namespace lins
