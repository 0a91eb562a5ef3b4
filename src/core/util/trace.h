// Chrome trace events (chrome://tracing, Perfetto) of one step on one rank: what the executor measured or what the
// simulator projected, on the same lanes (compute, waits, one per communication stream).
#pragma once

#include <string>
#include <vector>

namespace lins {

struct TraceEvent {
  std::string name, cat;
  double start_s = 0, dur_s = 0;
  int lane = 0;  // 0 compute, 1 waits, 2 + stream: collectives in flight on that stream; kHostLane: the host
};
// The host's own work and its waits (projections with a host model, core/host_model.h): the lane after the streams.
constexpr int kHostLane = -1;

// Chrome trace JSON ("traceEvents", microseconds) of one rank's events; pid = rank. `streams` names the lanes of the
// collectives (TraceEvent::lane 2 + stream).
std::string chrome_trace_json(const std::vector<TraceEvent>& events, int rank,
                              const std::vector<std::string>& streams = {});

}  // namespace lins
