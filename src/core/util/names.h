// The vocabulary of lins: every enum it reads or writes as text (command line, CSV columns, profiles, action logs)
// has one NameTable, declared right after the enum, from which parsing, printing, --help and the errors that list the
// valid words all come. This file holds the table type and the step backend's table.
#pragma once

#include <array>
#include <cstddef>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/util/result.h"

namespace lins {

// The tables:
//   core/collectives.h      kCollKindNames
//   core/vocabulary.h       kDTypeNames, kAxisNames
//   core/schedule.h         kPhaseNames, kTermNames, kPurposeNames, kTaskKindNames
//   core/groups.h           kGroupRoleNames
//   core/network_spec.h     kNicPathNames
//   core/nccl_model.h       kNcclAlgoNames, kNcclProtoNames
//   core/timeline.h         kActionKindNames
//   core/overlap.h          kOverlapNames
//   core/plan.h             kEngineNames, kOsLayoutNames
//   core/cost_model.h       kPricingNames, kNetworkModelNames
//   core/planner.h          kObjectiveNames
//   comm/mesh_comms.h       kBackendNames
//   comm/mpi_communicator.h kMpiProgressNames
//   comm/gpu_plugin.h       kAttentionKernelNames
//   below                   kStepBackendNames
// A value's `name` is the one spelling lins prints and writes; `aliases` are further spellings it accepts when it
// reads (nccl-tests' "allgather", NCCL's "AllGather", "float" for fp32), so inputs written by other tools still read.
// tests/unit/core/names_test.cpp and tests/unit/comm/comm_names_test.cpp check that every table round-trips.
template <class E>
struct EnumWord {
  E value;
  const char* name;          // printed, written into CSVs and provenance, listed in --help and errors
  const char* aliases = "";  // other spellings accepted on input, separated by spaces
  const char* help = "";     // what the value means, for --help ("each group priced alone, as the paper does")
  const char* prose = "";    // how a sentence says it ("all-gather"); the name when empty
};

template <class E, std::size_t N>
struct NameTable {
  const char* noun;  // what a value is called in errors: "dtype", "overlap mode"
  std::array<EnumWord<E>, N> words;

  static constexpr std::size_t size() { return N; }

  // True when entry i holds value i with a name, for every value up to `last` (the enum's last enumerator) and no
  // more: every table is checked with a static_assert beside it.
  constexpr bool complete(E last) const {
    if (static_cast<std::size_t>(last) + 1 != N) return false;
    for (std::size_t i = 0; i < N; ++i)
      if (static_cast<std::size_t>(words[i].value) != i || words[i].name == nullptr || words[i].name[0] == '\0')
        return false;
    return true;
  }

  constexpr const char* name(E v) const {
    const auto i = static_cast<std::size_t>(v);
    return i < N ? words[i].name : "?";
  }
  constexpr const char* help(E v) const {
    const auto i = static_cast<std::size_t>(v);
    return i < N ? words[i].help : "";
  }
  constexpr const char* prose(E v) const {
    const auto i = static_cast<std::size_t>(v);
    return i < N && words[i].prose[0] != '\0' ? words[i].prose : name(v);
  }

  std::vector<E> values() const {
    std::vector<E> out;
    for (const auto& w : words) out.push_back(w.value);
    return out;
  }

  // The name of `v`, then its aliases.
  std::vector<std::string_view> spellings(E v) const {
    std::vector<std::string_view> out;
    const auto i = static_cast<std::size_t>(v);
    if (i >= N) return out;
    out.push_back(words[i].name);
    std::string_view rest = words[i].aliases;
    while (!rest.empty()) {
      const auto space = rest.find(' ');
      if (space != 0) out.push_back(rest.substr(0, space));
      rest = space == std::string_view::npos ? std::string_view() : rest.substr(space + 1);
    }
    return out;
  }

  // The value whose name or one of whose aliases is exactly `text`.
  std::optional<E> find(std::string_view text) const {
    for (const auto& w : words)
      for (auto s : spellings(w.value))
        if (s == text) return w.value;
    return std::nullopt;
  }

  // The names, then `extra` (words an option accepts beside the table's, such as "all" or "auto"): "fp32, bf16".
  std::string list(std::initializer_list<std::string_view> extra = {}) const {
    std::string s;
    for (const auto& w : words) s += (s.empty() ? "" : ", ") + std::string(w.name);
    for (auto e : extra) s += ", " + std::string(e);
    return s;
  }

  // The names with what each means: "paper (each group alone, as the paper does), shared (...)".
  std::string described() const {
    std::string s;
    for (const auto& w : words) {
      s += (s.empty() ? "" : ", ") + std::string(w.name);
      if (w.help[0] != '\0') s += " (" + std::string(w.help) + ")";
    }
    return s;
  }

  // The aliases, for help text: "float for fp32, bfloat16 for bf16" (empty when there are none).
  std::string aliases_text() const {
    std::string s;
    for (const auto& w : words)
      if (w.aliases[0] != '\0') {
        std::string a = w.aliases;
        for (auto& c : a)
          if (c == ' ') c = '/';
        s += (s.empty() ? "" : ", ") + a + " for " + w.name;
      }
    return s;
  }

  // "--precision: unknown dtype 'fp16'; valid: fp32, bf16" (no "option: " prefix when `option` is empty).
  std::string unknown(std::string_view text, std::string_view option = {},
                      std::initializer_list<std::string_view> extra = {}) const {
    return (option.empty() ? std::string() : std::string(option) + ": ") + "unknown " + noun + " '" +
           std::string(text) + "'; valid: " + list(extra);
  }

  Result<E> parse(std::string_view text, std::string_view option = {},
                  std::initializer_list<std::string_view> extra = {}) const {
    if (auto v = find(text)) return *v;
    return make_error(unknown(text, option, extra));
  }
};

// Where `lins step` computes (the step CSV's backend column): host memory with MPI collectives, or one CUDA device
// per rank with NCCL. `lins simulate` projects onto gpu.
enum class StepBackend { cpu, gpu };
inline constexpr NameTable<StepBackend, 2> kStepBackendNames{
    "backend",
    {{
        {StepBackend::cpu, "cpu", "", "host memory, MPI collectives"},
        {StepBackend::gpu, "gpu", "",
         "the CUDA device of the local rank, NCCL collectives; bf16 tensor-core GEMMs and attention"},
    }}};
static_assert(kStepBackendNames.complete(StepBackend::gpu));

}  // namespace lins
