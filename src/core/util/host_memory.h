// What memory this machine can give a job now, from the kernel's own accounting: MemAvailable of /proc/meminfo and
// the limit of the process's memory cgroup (v2 memory.max, v1 memory.limit_in_bytes) less what the cgroup holds that
// it cannot reclaim. lins step and lins comm compare it with what they are about to allocate, before they allocate.
#pragma once

#include <string>

#include "core/util/result.h"

namespace lins {

struct HostMemory {
  double available_bytes = 0;           // the smaller of the two figures below that exist
  double meminfo_available_bytes = -1;  // MemAvailable; -1 when /proc/meminfo has none
  double cgroup_limit_bytes = -1;       // the tightest limit of the cgroup or an ancestor; -1 when none applies
  double cgroup_available_bytes = -1;   // that limit less the cgroup's usage (page cache it may drop not counted)
  std::string cgroup;                   // the limiting cgroup's folder

  // "21.5 GiB (MemAvailable 21.5 GiB; cgroup /sys/fs/cgroup/x limit 30.0 GiB, 8.5 GiB of it free)".
  std::string describe() const;
};

// Reads the files under `root` ("" = the real ones: /proc/meminfo, /proc/self/cgroup, /sys/fs/cgroup). A cgroup
// folder the process cannot see (a container's namespace) is skipped, its nearest visible ancestor read instead;
// limits of 2^62 bytes and more mean "no limit". An error only when neither figure can be read.
Result<HostMemory> read_host_memory(const std::string& root = "");

}  // namespace lins
