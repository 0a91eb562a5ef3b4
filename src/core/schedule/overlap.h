// The overlap switches of the paper's Table V, shared by the executor (which obeys them) and the simulator (which
// projects them): all overlaps; no broadcast overlap; also no all-reduce overlap; no overlap at all.
#pragma once

#include <string>
#include <string_view>

#include "core/util/names.h"
#include "core/util/result.h"

namespace lins {

enum class Overlap {
  all,           // prefetch gathers, decoupled reduce-scatters, async bucket all-reduce, broadcast under next forward
  no_bcast,      // as all, but the next forward starts only after every broadcast finished
  no_allreduce,  // as no_bcast, and each bucket all-reduce is waited for as soon as it is issued
  none,          // every collective is issued where it is needed and waited for at once
};
// The step CSV's overlap column and the --overlap option of `lins step` and `lins simulate`.
inline constexpr NameTable<Overlap, 4> kOverlapNames{
    "overlap mode",
    {{
        {Overlap::all, "all", "", "every overlap"},
        {Overlap::no_bcast, "no_bcast", "", "the next forward waits for the update broadcasts"},
        {Overlap::no_allreduce, "no_allreduce", "", "as no_bcast, and every bucket all-reduce is waited for at once"},
        {Overlap::none, "none", "", "every collective issued where needed and waited for at once"},
    }}};
static_assert(kOverlapNames.complete(Overlap::none));

inline const char* overlap_name(Overlap o) { return kOverlapNames.name(o); }
inline Result<Overlap> parse_overlap(std::string_view text) { return kOverlapNames.parse(text, "--overlap"); }

// What each mode turns off.
inline bool overlaps_broadcast(Overlap o) { return o == Overlap::all; }
inline bool overlaps_all_reduce(Overlap o) { return o == Overlap::all || o == Overlap::no_bcast; }
inline bool overlaps_gathers(Overlap o) { return o != Overlap::none; }

}  // namespace lins
