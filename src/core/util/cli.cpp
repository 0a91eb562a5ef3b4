// Option-table parser and help printer; see cli.h.
#include "core/util/cli.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "core/util/units.h"

namespace lins {
namespace {

const OptionSpec* find_long(const CommandSpec& spec, const std::string& name) {
  for (const auto& o : spec.options)
    if (o.name == name) return &o;
  return nullptr;
}

const OptionSpec* find_short(const CommandSpec& spec, char c) {
  for (const auto& o : spec.options)
    if (o.short_name != 0 && o.short_name == c) return &o;
  return nullptr;
}

std::string valid_list(const CommandSpec& spec) {
  std::string s;
  for (const auto& o : spec.options) s += (s.empty() ? "--" : ", --") + o.name;
  return s.empty() ? "--help" : s + ", --help";
}

namespace fs = std::filesystem;

// The first folder on the way to `dir` (itself included) that exists but is not a folder, or empty.
fs::path blocking_file(const fs::path& dir) {
  fs::path prefix;
  std::error_code ec;
  for (const auto& part : dir) {
    prefix /= part;
    if (fs::exists(prefix, ec) && !fs::is_directory(prefix, ec)) return prefix;
  }
  return {};
}

// Creates `dir` (and its parents) when missing and checks that a new file can be created in it.
Status prepare_folder(const fs::path& dir) {
  if (auto file = blocking_file(dir); !file.empty()) return make_error(file.string() + " is a file, not a folder");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return make_error("cannot create the folder " + dir.string() + ": " + ec.message());
  const auto stamp = std::chrono::steady_clock::now().time_since_epoch().count();
  std::string name = ".lins-write-check.";
  name.append(std::to_string(::getpid())).append(".").append(std::to_string(static_cast<long long>(stamp)));
  const fs::path probe = dir / name;
  std::FILE* f = std::fopen(probe.c_str(), "wb");
  if (!f) return make_error("cannot write into the folder " + dir.string() + ": " + std::strerror(errno));
  std::fclose(f);
  fs::remove(probe, ec);
  return Status::ok_status();
}

}  // namespace

Status check_output_file(const std::string& option, const std::string& path) {
  if (path.empty()) return make_error(option + " is empty; give a file name");
  std::error_code ec;
  if (fs::is_directory(path, ec)) return make_error(option + " " + path + ": is a folder; give a file name inside it");
  const fs::path dir = fs::path(path).parent_path();
  if (auto s = prepare_folder(dir.empty() ? fs::path(".") : dir); !s)
    return make_error(option + " " + path + ": " + s.error());
  return Status::ok_status();
}

Status check_output_folder(const std::string& option, const std::string& dir) {
  if (dir.empty()) return make_error(option + " is empty; give a folder");
  if (auto s = prepare_folder(dir); !s) return make_error(option + " " + dir + ": " + s.error());
  return Status::ok_status();
}

std::string ParsedArgs::get(const std::string& name) const {
  if (auto it = values_.find(name); it != values_.end()) return it->second;
  if (auto it = defaults_.find(name); it != defaults_.end()) return it->second;
  return "";
}

Result<std::uint64_t> ParsedArgs::get_size(const std::string& name) const { return parse_size(get(name), "--" + name); }
Result<std::uint64_t> ParsedArgs::get_memory_size(const std::string& name) const {
  return parse_memory_size(get(name), "--" + name);
}
Result<int> ParsedArgs::get_positive_int(const std::string& name) const {
  return parse_positive_int(get(name), "--" + name);
}
Result<double> ParsedArgs::get_double(const std::string& name) const {
  return parse_nonnegative_double(get(name), "--" + name);
}

Result<ParsedArgs> parse_args(const CommandSpec& spec, const std::vector<std::string>& args) {
  ParsedArgs out;
  for (const auto& o : spec.options)
    if (!o.default_value.empty()) out.defaults_[o.name] = o.default_value;
  const std::string cmd = "lins " + spec.name;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      out.values_["help"] = "";
      continue;
    }
    const OptionSpec* opt = nullptr;
    std::string value;
    bool has_inline_value = false;
    if (a.rfind("--", 0) == 0 && a.size() > 2) {
      std::string name = a.substr(2);
      if (auto eq = name.find('='); eq != std::string::npos) {
        value = name.substr(eq + 1);
        name = name.substr(0, eq);
        has_inline_value = true;
      }
      opt = find_long(spec, name);
      if (!opt)
        return make_error("unknown option '--" + name + "' for '" + cmd + "'; valid options: " + valid_list(spec));
    } else if (a.size() == 2 && a[0] == '-' && a[1] != '-') {
      opt = find_short(spec, a[1]);
      if (!opt) return make_error("unknown option '" + a + "' for '" + cmd + "'; valid options: " + valid_list(spec));
    } else {
      out.positional_.push_back(a);
      continue;
    }
    if (opt->value_name.empty()) {
      if (has_inline_value) return make_error("option '--" + opt->name + "' of '" + cmd + "' takes no value");
      out.values_[opt->name] = "1";
      continue;
    }
    if (!has_inline_value) {
      if (i + 1 >= args.size())
        return make_error("option '--" + opt->name + "' of '" + cmd + "' needs a value (" + opt->value_name + ")");
      value = args[++i];
    }
    if (out.values_.count(opt->name))
      return make_error("option '--" + opt->name + "' of '" + cmd + "' given twice; give it once");
    out.values_[opt->name] = value;
  }
  return out;
}

std::string help_text(const CommandSpec& spec) {
  std::ostringstream os;
  os << "usage: " << spec.usage << "\n\n" << spec.summary << "\n\noptions:\n";
  std::size_t width = 0;
  std::vector<std::string> heads;
  for (const auto& o : spec.options) {
    std::string head = "  ";
    head += o.short_name ? std::string("-") + o.short_name + ", " : "    ";
    head += "--" + o.name;
    if (!o.value_name.empty()) head += " " + o.value_name;
    heads.push_back(head);
    width = std::max(width, head.size());
  }
  heads.push_back("  -h, --help");
  width = std::max(width, heads.back().size());
  for (std::size_t i = 0; i < spec.options.size(); ++i) {
    const auto& o = spec.options[i];
    os << heads[i] << std::string(width - heads[i].size() + 2, ' ') << o.help;
    if (!o.default_value.empty()) os << " [default: " << o.default_value << "]";
    os << "\n";
  }
  os << heads.back() << std::string(width - heads.back().size() + 2, ' ') << "print this help and exit\n";
  if (!spec.epilog.empty()) os << "\n" << spec.epilog << "\n";
  return os.str();
}

}  // namespace lins
