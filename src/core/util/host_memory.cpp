// MemAvailable and the memory cgroup's headroom; see host_memory.h.
#include "core/util/host_memory.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/util/text.h"
#include "core/util/units.h"

namespace lins {
namespace {

namespace fs = std::filesystem;

constexpr double kNoLimitBytes = 4611686018427387904.0;  // 2^62: what the kernels write for "max", less page rounding

bool read_text(const fs::path& path, std::string* out) {
  std::ifstream f(path);
  if (!f) return false;
  std::stringstream ss;
  ss << f.rdbuf();
  *out = ss.str();
  return true;
}

// One number of a file that holds one ("max" is no limit); -1 when missing or not a number.
double read_number(const fs::path& path) {
  std::string text;
  if (!read_text(path, &text)) return -1;
  text = trim(text);
  if (text == "max") return kNoLimitBytes;
  const auto v = parse_finite(text);
  return v && *v >= 0 ? *v : -1;
}

// The value of `key` in a "key value" file (memory.stat), 0 when absent.
double stat_value(const fs::path& path, const std::string& key) {
  std::string text;
  if (!read_text(path, &text)) return 0;
  for (const auto& line : text_lines(text)) {
    const auto w = split_ws(line.text);
    if (w.size() == 2 && w[0] == key) return parse_finite(w[1]).value_or(0);
  }
  return 0;
}

// MemAvailable in bytes, -1 when not found.
double meminfo_available(const fs::path& meminfo) {
  std::string text;
  if (!read_text(meminfo, &text)) return -1;
  for (const auto& line : text_lines(text)) {
    const auto w = split_ws(line.text);
    if (w.size() >= 2 && w[0] == "MemAvailable:") {
      const auto kib = parse_finite(w[1]);
      return kib ? *kib * 1024.0 : -1;
    }
  }
  return -1;
}

struct CgroupFiles {
  const char* limit;
  const char* usage;
  const char* reclaimable;  // memory.stat key of page cache the cgroup can drop
};
constexpr CgroupFiles kV2{"memory.max", "memory.current", "inactive_file"};
constexpr CgroupFiles kV1{"memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file"};

// The tightest (limit, headroom) of `dir` and its ancestors up to `mount`.
void tightest_limit(const fs::path& mount, const fs::path& dir, const CgroupFiles& files, HostMemory& m) {
  for (fs::path d = dir;; d = d.parent_path()) {
    std::error_code ec;
    if (fs::is_directory(d, ec)) {
      const double limit = read_number(d / files.limit);
      if (limit >= 0 && limit < kNoLimitBytes) {
        const double usage = std::max(0.0, read_number(d / files.usage));
        const double held = std::max(0.0, usage - stat_value(d / "memory.stat", files.reclaimable));
        const double headroom = std::max(0.0, limit - held);
        if (m.cgroup_available_bytes < 0 || headroom < m.cgroup_available_bytes) {
          m.cgroup_available_bytes = headroom;
          m.cgroup_limit_bytes = limit;
          m.cgroup = d.string();
        }
      }
    }
    if (d == mount || d.string().size() <= mount.string().size()) break;
  }
}

// The memory cgroups of /proc/self/cgroup: "0::/path" (v2, mounted at /sys/fs/cgroup or its unified folder) and
// "N:memory:/path" (v1, mounted at /sys/fs/cgroup/memory).
void read_cgroups(const fs::path& root, HostMemory& m) {
  std::string text;
  if (!read_text(root / "proc/self/cgroup", &text)) return;
  const fs::path base = root / "sys/fs/cgroup";
  for (const auto& line : text_lines(text)) {
    const std::string_view l = line.text;
    const auto a = l.find(':'), b = a == std::string_view::npos ? a : l.find(':', a + 1);
    if (b == std::string_view::npos) continue;
    const std::string controllers(l.substr(a + 1, b - a - 1));
    const std::string path(l.substr(b + 1));
    const fs::path rel = fs::path(path).relative_path();
    if (controllers.empty()) {
      for (const fs::path& mount : {base, base / "unified"}) tightest_limit(mount, mount / rel, kV2, m);
    } else if (("," + controllers + ",").find(",memory,") != std::string::npos) {
      const fs::path mount = base / "memory";
      tightest_limit(mount, mount / rel, kV1, m);
    }
  }
}

}  // namespace

std::string HostMemory::describe() const {
  std::string s = format_bytes(available_bytes) + " (";
  if (meminfo_available_bytes >= 0) s += "MemAvailable " + format_bytes(meminfo_available_bytes);
  if (cgroup_available_bytes >= 0)
    s += std::string(meminfo_available_bytes >= 0 ? "; " : "") + "cgroup " + cgroup + " limit " +
         format_bytes(cgroup_limit_bytes) + ", " + format_bytes(cgroup_available_bytes) + " of it free";
  else
    s += "; no cgroup memory limit";
  return s + ")";
}

Result<HostMemory> read_host_memory(const std::string& root) {
  const fs::path r = root.empty() ? fs::path("/") : fs::path(root);
  HostMemory m;
  m.meminfo_available_bytes = meminfo_available(r / "proc/meminfo");
  read_cgroups(r, m);
  if (m.meminfo_available_bytes < 0 && m.cgroup_available_bytes < 0)
    return make_error("cannot tell how much memory this machine has: " + (r / "proc/meminfo").string() +
                      " has no MemAvailable and no memory cgroup limit is readable");
  m.available_bytes = m.meminfo_available_bytes < 0  ? m.cgroup_available_bytes
                      : m.cgroup_available_bytes < 0 ? m.meminfo_available_bytes
                                                     : std::min(m.meminfo_available_bytes, m.cgroup_available_bytes);
  return m;
}

}  // namespace lins
