// JSON printing and atomic file writes; see json.h.
#include "core/util/json.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

namespace lins {

std::string json_dump(const Json& j, int indent) {
  return j.dump(indent > 0 ? indent : -1, ' ', false, Json::error_handler_t::replace);
}

Status write_file_atomic(const std::string& path, std::string_view content) {
  namespace fs = std::filesystem;
  if (path.empty()) return make_error("cannot write a file with an empty name");
  std::error_code ec;
  if (auto parent = fs::path(path).parent_path(); !parent.empty() && !fs::is_directory(parent, ec))
    return make_error("cannot write '" + path + "': folder '" + parent.string() + "' does not exist");
  // Same folder as the target, so the rename stays on one file system; the pid keeps concurrent writers apart.
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return make_error("cannot create '" + tmp + "': " + std::strerror(errno));
  const bool written = std::fwrite(content.data(), 1, content.size(), f) == content.size() && std::fflush(f) == 0 &&
                       ::fsync(fileno(f)) == 0;
  const int saved = errno;
  if (std::fclose(f) != 0 || !written) {
    fs::remove(tmp, ec);
    return make_error("cannot write '" + tmp + "': " + std::strerror(written ? errno : saved));
  }
  fs::rename(tmp, path, ec);
  if (ec) {
    std::error_code ignore;
    fs::remove(tmp, ignore);
    return make_error("cannot rename '" + tmp + "' to '" + path + "': " + ec.message());
  }
  return {};
}

}  // namespace lins
