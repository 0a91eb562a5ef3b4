// Reads the standard output of NVIDIA's nccl-tests (all_gather_perf, reduce_scatter_perf, all_reduce_perf,
// broadcast_perf) into a BandwidthProfile, so measured NCCL bandwidths price the collectives of a Schedule. The format
// followed is that of nccl-tests' src/common.cu (util.cu in newer versions): '#' header lines, the '#  Rank N Group
// G Pid P on HOST device D' list, a column header 'size count type redop root time algbw busbw #wrong ...' with an
// out-of-place and an in-place group, rows of numbers, 'N/A' where validation was off. Older outputs with an 'error'
// column and no Group are read too, and so is the JSON file nccl-tests writes with -J (src/util.cu), read with
// nlohmann-json. docs/cost-model.md describes what is kept and what is left out.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/cost/cost_model.h"
#include "core/util/result.h"

namespace lins {

struct NcclTestsImport {
  std::string path;
  CollKind op = CollKind::all_reduce;
  Mesh mesh;
  bool mesh_from_header = false;  // derived from the Rank lines (else given with @INTRAxINTER)
  int rows_used = 0;              // rows with at least one half kept
  int halves_used = 0;            // out-of-place and in-place results kept (each row has two)
  int halves_unchecked = 0;       // of those, with '#wrong' N/A (nccl-tests ran without validation, -c 0)
  int zero_size_rows = 0;         // rows of 0 bytes (nothing to time), skipped
  // One line per half left out because nccl-tests found wrong results in it ('#wrong' or 'error' above 0):
  // "all_reduce_perf.txt:31: 2097152 B out-of-place: #wrong = 1.04858e+06, left out".
  std::vector<std::string> rejected;
};

// Parses the text of one run, or its -J JSON (text starting with '{'). `where` names it in errors (file:line: ...;
// file: results[3].in_place.time: ... for JSON). `mesh` (GPUs per node x nodes), when
// given, is checked against the header's rank list; without it the rank list must say which host each rank is on.
// `op`, when not given, comes from the '# Collective test starting: X_perf' line or from `where`'s file name.
// Every kept measurement is added to `into`: per row, message bytes = the size column (the full buffer of an
// all-gather or reduce-scatter) and algbw = size / the mean time of the kept halves.
Result<NcclTestsImport> import_nccl_tests(std::string_view text, const std::string& where, std::optional<Mesh> mesh,
                                          std::optional<CollKind> op, BandwidthProfile* into);
Result<NcclTestsImport> load_nccl_tests(const std::string& path, std::optional<Mesh> mesh, BandwidthProfile* into);

// One argument of --nccl-tests: "FILE" or "FILE@INTRAxINTER" (e.g. all_gather_perf.txt@8x16).
struct NcclTestsArg {
  std::string path;
  std::optional<Mesh> mesh;
};
Result<NcclTestsArg> parse_nccl_tests_arg(std::string_view text);

// The collective an nccl-tests binary or file name measures ("all_gather_perf", "nccl_allgather.log", ...).
std::optional<CollKind> nccl_tests_op_from_name(std::string_view name);

}  // namespace lins
