// One option table per subcommand: the parser and the --help text both come from it, so they cannot disagree. Also
// the check every subcommand makes of the files and folders it will write, before it starts any long work.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/util/names.h"
#include "core/util/result.h"

namespace lins {

struct OptionSpec {
  std::string name;           // long name without dashes: "gpus-per-node"
  char short_name = 0;        // 'b' for -b, 0 for none
  std::string value_name;     // "N", "SIZE"; empty means a flag that takes no value
  std::string default_value;  // shown in help and returned when the option is absent; empty = no default
  std::string help;
};

struct CommandSpec {
  std::string name;     // "plan"
  std::string summary;  // one line for `lins --help`
  std::string usage;    // "lins plan [options]"
  std::vector<OptionSpec> options;
  std::string epilog;  // examples, shown after the options
};

class ParsedArgs {
 public:
  bool has(const std::string& name) const { return values_.count(name) > 0; }
  bool flag(const std::string& name) const { return has(name); }
  // The value given, else the default of the table (empty string when neither).
  std::string get(const std::string& name) const;
  Result<std::uint64_t> get_size(const std::string& name) const;
  Result<std::uint64_t> get_memory_size(const std::string& name) const;  // parse_memory_size: a unit is required
  Result<int> get_positive_int(const std::string& name) const;
  Result<double> get_double(const std::string& name) const;
  // The value of an option that names an enum value (a name or alias of `table`); the error names the option and
  // lists the valid names, then `extra` (words the command handles itself, such as "auto").
  template <class E, std::size_t N>
  Result<E> get_enum(const std::string& name, const NameTable<E, N>& table,
                     std::initializer_list<std::string_view> extra = {}) const {
    return table.parse(get(name), "--" + name, extra);
  }
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  friend Result<ParsedArgs> parse_args(const CommandSpec&, const std::vector<std::string>&);
  std::map<std::string, std::string> values_;
  std::map<std::string, std::string> defaults_;
  std::vector<std::string> positional_;
};

// args are the words after the subcommand. "--help"/"-h" are always accepted and set the flag "help".
// Accepts --name VALUE, --name=VALUE, -b VALUE. Unknown options and missing values are errors that list the valid
// options.
Result<ParsedArgs> parse_args(const CommandSpec& spec, const std::vector<std::string>& args);
std::string help_text(const CommandSpec& spec);

// Whether the file `path` that option `option` names can be written: its folder exists (or is created now, with
// its parents) and accepts a new file, and `path` is not a folder itself. The error names the option and the path.
Status check_output_file(const std::string& option, const std::string& path);
// The same for a folder the command will write files into (created now when missing).
Status check_output_folder(const std::string& option, const std::string& dir);

}  // namespace lins
