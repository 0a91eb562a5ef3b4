// What work running side by side costs: how much a compute task slows while collectives run on its rank, how much a
// collective's transfer slows while compute runs, and how collectives of different groups share a link. The step
// timeline (core/schedule/timeline.h) advances every task and collective at the rates these give; with every value
// zero (and links not shared) it is the plain event model, where overlap is free.
// Values come from `lins comm --contention FILE` (measured on the fabric it ran on), from a network file's
// [contention] table, or are priors from published measurements; `source` says which (docs/cost-model.md).
#pragma once

#include <functional>
#include <string>

#include "core/schedule/schedule.h"
#include "core/schedule/timeline.h"
#include "core/util/names.h"

namespace lins {

// A compute task's class: bound by its arithmetic (GEMMs, attention) or by memory (norms, element-wise, the optimizer).
enum class TaskClass { gemm, memory };
inline constexpr int kTaskClassCount = 2;
inline constexpr NameTable<TaskClass, 2> kTaskClassNames{
    "task class",
    {{
        {TaskClass::gemm, "gemm", "", "bound by arithmetic"},
        {TaskClass::memory, "memory", "", "bound by memory bandwidth"},
    }}};
static_assert(kTaskClassNames.complete(TaskClass::memory));

// How the slowdowns of several collectives running at once under one compute task combine.
enum class KappaCombine { sum, max };
inline constexpr NameTable<KappaCombine, 2> kKappaCombineNames{
    "kappa combine",
    {{
        {KappaCombine::sum, "sum", "", "the slowdowns of concurrent collectives add"},
        {KappaCombine::max, "max", "", "the largest slowdown of the concurrent collectives applies"},
    }}};
static_assert(kKappaCombineNames.complete(KappaCombine::max));

// The largest slowdown (kappa, lambda) a network file accepts and the fit writes: work 101 times slower beside other
// work is no longer overlap but a starved core (ranks oversubscribed on a busy machine), and the fit says so in a note.
inline constexpr double kMaxSlowdown = 100;

// The fabric a collective crosses: index 0 inside a node, 1 across nodes (Axis's order).
struct Contention {
  // A compute task of class c advances at 1 / (1 + K), K = sum (or max) of kappa[c][fabric of k] over the
  // collectives k running on its rank.
  double kappa[kTaskClassCount][2] = {{0, 0}, {0, 0}};
  KappaCombine combine = KappaCombine::sum;
  // A collective's bandwidth term advances at 1 / (1 + lambda[fabric]) while a compute task runs on its rank.
  double lambda[2] = {0, 0};
  // Collectives of different groups running at once on one fabric share it: n of them each get eta / n of its rate
  // (max-min fair shares of one link, times the efficiency of sharing). Off: each gets the whole link.
  bool links_shared = false;
  double eta = 1.0;
  // Where the values come from: "measured: ...", "prior: ..." or "off".
  std::string source = "off";

  // Whether any value makes overlap cost something (false: the plain event model).
  bool any() const;
  // The rate of a compute task of class `c` with `active[f]` collectives running on fabric f (per fabric, so that
  // `max` can take the largest).
  double compute_rate(TaskClass c, const int active[2]) const;
  // The rate of a collective's bandwidth term on fabric `f` with `sharing` collectives of other groups on that fabric
  // (itself included) and compute running or not.
  double transfer_rate(int fabric, int sharing, bool compute_running) const;
  // One line: the values, for consoles and provenance.
  std::string summary() const;
};

// The timeline's rates (core/schedule/timeline.h) for the ops and tasks of `s` under `c`: a task's class from
// `task_class`, an op's fabric from its group's mesh, the part of an op that does not stretch from `latency_s` (may be
// empty: none). Empty rates when `c` makes overlap free, so the timeline is the plain event model.
TimelineRates timeline_rates(const Contention& c, const Schedule& s, std::function<TaskClass(int task)> task_class,
                             std::function<double(int op)> latency_s);

// The [contention] table of a network file, or a file of its own (`lins comm --contention FILE` writes one): keys
// kappa_gemm_intra, kappa_gemm_inter, kappa_memory_intra, kappa_memory_inter, kappa_combine ("sum"|"max"),
// lambda_intra, lambda_inter, links_shared, eta, source. `comment` lines go above the table as # comments.
std::string contention_toml(const Contention& c, const std::string& comment = "");

}  // namespace lins
