// JSON writer and atomic file writes; see json.h.
#include "core/json.h"

#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>

namespace lins {

JsonArray& JsonArray::push(JsonValue v) {
  items_.push_back(std::move(v));
  return *this;
}

std::size_t JsonArray::size() const { return items_.size(); }
std::size_t JsonObject::size() const { return members_.size(); }

JsonObject& JsonObject::set(std::string key, JsonValue v) {
  for (auto& m : members_)
    if (m.first == key) {
      m.second = std::move(v);
      return *this;
    }
  members_.emplace_back(std::move(key), std::move(v));
  return *this;
}

std::string JsonObject::dump(int indent) const { return JsonValue(*this).dump(indent); }

JsonValue::JsonValue(const std::vector<std::string>& xs) {
  JsonArray a;
  for (const auto& x : xs) a.push(x);
  v_ = std::move(a);
}
JsonValue::JsonValue(const std::vector<double>& xs) {
  JsonArray a;
  for (double x : xs) a.push(x);
  v_ = std::move(a);
}
JsonValue::JsonValue(const std::vector<int64_t>& xs) {
  JsonArray a;
  for (int64_t x : xs) a.push(static_cast<long long>(x));
  v_ = std::move(a);
}

std::string json_quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  out += '"';
  return out;
}

std::string json_number(double d) {
  if (!std::isfinite(d)) return "null";
  char buf[64];
  auto [ptr, ec] = std::to_chars(buf, buf + sizeof buf, d);
  if (ec != std::errc()) return "null";
  return std::string(buf, ptr);
}

std::string JsonValue::dump(int indent) const {
  std::string out;
  write(out, indent, 0);
  return out;
}

void JsonValue::write(std::string& out, int indent, int depth) const {
  auto newline = [&](int d) {
    if (indent <= 0) return;
    out += '\n';
    out.append(static_cast<std::size_t>(indent) * d, ' ');
  };
  if (std::holds_alternative<std::monostate>(v_)) {
    out += "null";
  } else if (auto b = std::get_if<bool>(&v_)) {
    out += *b ? "true" : "false";
  } else if (auto i = std::get_if<int64_t>(&v_)) {
    out += std::to_string(*i);
  } else if (auto d = std::get_if<double>(&v_)) {
    out += json_number(*d);
  } else if (auto s = std::get_if<std::string>(&v_)) {
    out += json_quote(*s);
  } else if (auto a = std::get_if<JsonArray>(&v_)) {
    if (a->items().empty()) {
      out += "[]";
      return;
    }
    // Arrays of scalars stay on one line; arrays holding objects or arrays get one item per line.
    bool flat = true;
    for (const auto& x : a->items())
      if (std::holds_alternative<JsonArray>(x.v_) || std::holds_alternative<JsonObject>(x.v_)) flat = false;
    out += '[';
    for (std::size_t k = 0; k < a->items().size(); ++k) {
      if (k) out += flat && indent > 0 ? ", " : ",";
      if (!flat) newline(depth + 1);
      a->items()[k].write(out, indent, depth + 1);
    }
    if (!flat) newline(depth);
    out += ']';
  } else if (auto o = std::get_if<JsonObject>(&v_)) {
    if (o->members().empty()) {
      out += "{}";
      return;
    }
    out += '{';
    for (std::size_t k = 0; k < o->members().size(); ++k) {
      if (k) out += ',';
      newline(depth + 1);
      out += json_quote(o->members()[k].first);
      out += indent > 0 ? ": " : ":";
      o->members()[k].second.write(out, indent, depth + 1);
    }
    newline(depth);
    out += '}';
  }
}

Status write_file_atomic(const std::string& path, std::string_view content) {
  namespace fs = std::filesystem;
  if (path.empty()) return make_error("cannot write a file with an empty name");
  std::error_code ec;
  if (auto parent = fs::path(path).parent_path(); !parent.empty() && !fs::is_directory(parent, ec))
    return make_error("cannot write '" + path + "': folder '" + parent.string() + "' does not exist");
  // Same folder as the target, so the rename stays on one file system; the pid keeps concurrent writers apart.
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return make_error("cannot create '" + tmp + "': " + std::strerror(errno));
  const bool written = std::fwrite(content.data(), 1, content.size(), f) == content.size() && std::fflush(f) == 0 &&
                       ::fsync(fileno(f)) == 0;
  const int saved = errno;
  if (std::fclose(f) != 0 || !written) {
    fs::remove(tmp, ec);
    return make_error("cannot write '" + tmp + "': " + std::strerror(written ? errno : saved));
  }
  fs::rename(tmp, path, ec);
  if (ec) {
    std::error_code ignore;
    fs::remove(tmp, ignore);
    return make_error("cannot rename '" + tmp + "' to '" + path + "': " + ec.message());
  }
  return {};
}

}  // namespace lins
