// One option table per subcommand: the parser and the --help text both come from it, so they cannot disagree.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/result.h"

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
  Result<int> get_positive_int(const std::string& name) const;
  Result<double> get_double(const std::string& name) const;
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

}  // namespace lins
