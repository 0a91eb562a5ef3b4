// libFuzzer target: the option-table parser. The input is split on NUL bytes into argv words.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/util/cli.h"
#include "fuzz_words.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 512) return 0;
  static const lins::CommandSpec spec{"fuzz",
                                      "fuzz target",
                                      "lins fuzz [options]",
                                      {{"minbytes", 'b', "SIZE", "8", "smallest message"},
                                       {"maxbytes", 'e', "SIZE", "64M", "largest message"},
                                       {"check", 0, "", "", "a flag"},
                                       {"plan", 0, "TEXT", "", "a plan"}},
                                      ""};
  std::vector<std::string> args = nul_separated_words(data, size);
  auto parsed = lins::parse_args(spec, args);
  if (parsed) {
    (void)parsed->get_size("minbytes");
    (void)parsed->get_size("maxbytes");
    (void)parsed->get("plan");
  } else if (parsed.error().empty()) {
    __builtin_trap();
  }
  (void)lins::help_text(spec);
  return 0;
}
