// libFuzzer target: model shapes from the command line (--hidden, --layers, --heads, --ffn, --vocab) and the
// workload options, through the same option table and parsers `lins plan` uses. Accepted models must have a
// positive parameter count equal to the sum of their tensors; everything else is a clear error.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/schedule/workload.h"
#include "fuzz_words.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 256) return 0;
  static const lins::CommandSpec spec{
      "fuzz", "fuzz target", "lins fuzz [options]",
      lins::concat_options(lins::concat_options(lins::model_options("tiny"), lins::topology_options("2", "2")),
                           lins::workload_options("16", "1", "")),
      ""};
  // NUL-separated words; the first few are read as values of the shape flags.
  const std::vector<std::string> words = nul_separated_words(data, size);
  const char* flags[] = {"--hidden", "--layers", "--heads", "--ffn", "--vocab", "--seq", "--micro-batches"};
  std::vector<std::string> args;
  for (size_t i = 0; i < words.size() && i < 7; ++i) {
    args.push_back(flags[i]);
    args.push_back(words[i]);
  }
  auto parsed = lins::parse_args(spec, args);
  if (!parsed) return 0;
  auto model = lins::parse_model(*parsed);
  if (!model) {
    if (model.error().empty()) __builtin_trap();
    return 0;
  }
  int64_t sum = 0;
  for (const auto& t : model->tensors) sum += t.elems;
  if (model->param_count() <= 0 || sum != model->param_count()) __builtin_trap();
  if (model->param_count() > 1'000'000'000'000LL) return 0;  // far too large to lay out quickly; parsing was the point
  auto topo = lins::parse_topology(*parsed);
  if (!topo) return 0;
  auto w = lins::parse_workload(*parsed, *model, *topo);
  if (w && (w->micro_batches < 1 || w->seq < 1)) __builtin_trap();
  return 0;
}
