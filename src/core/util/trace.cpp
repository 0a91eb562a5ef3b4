// Chrome trace JSON; see trace.h.
#include "core/util/trace.h"

#include <cstdio>
#include <sstream>

namespace lins {

std::string chrome_trace_json(const std::vector<TraceEvent>& events, int rank,
                              const std::vector<std::string>& streams) {
  std::ostringstream o;
  o << "{\"traceEvents\":[\n";
  std::vector<std::string> lanes = {"compute", "waits"};
  for (const auto& s : streams) lanes.push_back("stream " + s);
  if (streams.empty()) lanes.push_back("collectives");
  const int host_tid = static_cast<int>(lanes.size());
  for (const auto& e : events)
    if (e.lane == kHostLane) {
      lanes.push_back("host");
      break;
    }
  for (std::size_t l = 0; l < lanes.size(); ++l)
    o << "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" << rank << ",\"tid\":" << l << ",\"args\":{\"name\":\""
      << lanes[l] << "\"}},\n";
  for (size_t i = 0; i < events.size(); ++i) {
    const auto& e = events[i];
    std::string name;
    for (char c : e.name) name += (c == '"' || c == '\\') ? '_' : c;
    char buf[128];
    std::snprintf(buf, sizeof buf, "\"ts\":%.3f,\"dur\":%.3f", e.start_s * 1e6, e.dur_s * 1e6);
    o << "{\"name\":\"" << name << "\",\"cat\":\"" << e.cat << "\",\"ph\":\"X\",\"pid\":" << rank
      << ",\"tid\":" << (e.lane == kHostLane ? host_tid : e.lane) << "," << buf << "}"
      << (i + 1 < events.size() ? ",\n" : "\n");
  }
  o << "]}\n";
  return o.str();
}

}  // namespace lins
