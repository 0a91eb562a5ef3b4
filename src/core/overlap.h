// The overlap switches of the paper's Table V, shared by the executor (which obeys them) and the simulator (which
// projects them): all overlaps; no broadcast overlap; also no all-reduce overlap; no overlap at all.
#pragma once

#include <string>
#include <string_view>

#include "core/result.h"

namespace lins {

enum class Overlap {
  all,           // prefetch gathers, decoupled reduce-scatters, async bucket all-reduce, broadcast under next forward
  no_bcast,      // as all, but the next forward starts only after every broadcast finished
  no_allreduce,  // as no_bcast, and each bucket all-reduce is waited for as soon as it is issued
  none,          // every collective is issued where it is needed and waited for at once
};

inline const char* overlap_name(Overlap o) {
  switch (o) {
    case Overlap::all:
      return "all";
    case Overlap::no_bcast:
      return "no_bcast";
    case Overlap::no_allreduce:
      return "no_allreduce";
    case Overlap::none:
      return "none";
  }
  return "?";
}

inline Result<Overlap> parse_overlap(std::string_view text) {
  if (text == "all") return Overlap::all;
  if (text == "no_bcast") return Overlap::no_bcast;
  if (text == "no_allreduce") return Overlap::no_allreduce;
  if (text == "none") return Overlap::none;
  return make_error("--overlap: unknown mode '" + std::string(text) +
                    "'; valid modes: all, no_bcast, no_allreduce, none");
}

// What each mode turns off.
inline bool overlaps_broadcast(Overlap o) { return o == Overlap::all; }
inline bool overlaps_all_reduce(Overlap o) { return o == Overlap::all || o == Overlap::no_bcast; }
inline bool overlaps_gathers(Overlap o) { return o != Overlap::none; }

}  // namespace lins
