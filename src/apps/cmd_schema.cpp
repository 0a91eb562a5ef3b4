// `lins schema`: the columns and units of every table lins writes, the model presets and the FLOPs formula, as JSON
// (core/output/results_schema.h, model_schema.h). The Python packages load the copy of this output kept in
// analysis/lins_schema/schema.json (the package lins_schema); a test holds the two equal.
#include <cstdio>

#include "apps/commands.h"
#include "core/output/results_schema.h"
#include "core/util/cli.h"

namespace lins {
namespace {

const CommandSpec& schema_spec() {
  static const CommandSpec spec = {
      "schema",
      "print the columns and units of every table lins writes (step, plan, comm, profile), the model presets and the "
      "FLOPs per token formula as JSON",
      "lins schema [--json]",
      {
          {"json", 0, "", "", "JSON (the only format; accepted for scripts that say so)"},
      },
      "Regenerate the Python packages' copy with: build/lins schema > analysis/lins_schema/schema.json\n",
  };
  return spec;
}

}  // namespace

int run_schema(const Args& args) {
  auto a = parse_args(schema_spec(), args);
  if (!a) {
    std::fprintf(stderr, "lins schema: %s\n", a.error().c_str());
    return 2;
  }
  if (a->flag("help")) {
    std::fputs(help_text(schema_spec()).c_str(), stdout);
    return 0;
  }
  std::fputs(output_schemas_json().c_str(), stdout);
  return 0;
}

}  // namespace lins
