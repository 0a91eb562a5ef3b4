// Loading the GPU plugin (liblins_gpu.so) on first use; see gpu_plugin.h.
#include "comm/gpu_plugin.h"

#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <cstdlib>
#include <mutex>
#include <vector>

#include "lins_git_commit.h"  // generated at build time

// Weak: resolved only in a program that links the module's objects itself (the GPU tests); null in `lins`.
extern "C" const lins::GpuPlugin* lins_gpu_plugin_v1() __attribute__((weak));

namespace lins {
namespace {

std::string executable_dir() {
  char buf[PATH_MAX + 1] = {0};
  const ssize_t n = readlink("/proc/self/exe", buf, PATH_MAX);
  if (n <= 0) return "";
  std::string path(buf, size_t(n));
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

bool file_exists(const std::string& path) { return !path.empty() && access(path.c_str(), R_OK) == 0; }

// Where the module may be, in the order tried: LINS_GPU_PLUGIN (then only there), beside the executable, ../lib.
std::vector<std::string> candidate_paths() {
  if (const char* env = std::getenv("LINS_GPU_PLUGIN"); env && *env) return {env};
  const std::string dir = executable_dir();
  if (dir.empty()) return {};
  return {dir + "/" + kGpuPluginFileName, dir + "/../lib/" + kGpuPluginFileName};
}

Status check_table(const GpuPlugin* p, const std::string& where) {
  if (!p) return make_error(where + ": " + kGpuPluginEntryPoint + "() returned no table");
  if (p->abi_version != kGpuPluginAbiVersion || p->table_bytes != sizeof(GpuPlugin))
    return make_error(where + " has plugin ABI " + std::to_string(p->abi_version) + " (table of " +
                      std::to_string(p->table_bytes) + " bytes) but this lins needs ABI " +
                      std::to_string(kGpuPluginAbiVersion) + " (" + std::to_string(sizeof(GpuPlugin)) +
                      " bytes): rebuild the target lins_gpu beside this lins");
  const std::string want = gpu_plugin_build_id();
  if (!p->build || want != p->build)
    return make_error(where + " was built from lins " + (p->build ? p->build : "(unknown)") + " but this lins is " +
                      want + ": a module from another build may disagree on the types it shares with lins; rebuild "
                      "the target lins_gpu beside this lins");
  return Status::ok_status();
}

struct Loaded {
  const GpuPlugin* plugin = nullptr;
  std::string error;
};

Loaded load() {
  if (lins_gpu_plugin_v1) {  // linked in
    const GpuPlugin* p = lins_gpu_plugin_v1();
    if (auto s = check_table(p, "the GPU module linked into this program"); !s) return {nullptr, s.error()};
    return {p, ""};
  }
  const std::vector<std::string> paths = candidate_paths();
  std::string tried;
  for (const std::string& path : paths) {
    if (!file_exists(path)) {
      tried += "\n  " + path + ": not found";
      continue;
    }
    // RTLD_LOCAL: the module's CUDA and NCCL symbols stay its own; RTLD_NOW: a missing symbol fails here, not later.
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      const char* why = dlerror();
      return {nullptr, "cannot load the GPU plugin " + path + ": " + (why ? why : "dlopen failed") +
                           " (the CUDA runtime, cuBLAS, cuDNN and NCCL libraries it was built against must be on "
                           "the library path, e.g. LD_LIBRARY_PATH)"};
    }
    using Entry = const GpuPlugin* (*)();
    auto entry = reinterpret_cast<Entry>(dlsym(h, kGpuPluginEntryPoint));
    if (!entry) return {nullptr, path + " is not a lins GPU plugin: it exports no " + kGpuPluginEntryPoint};
    const GpuPlugin* p = entry();
    if (auto s = check_table(p, path); !s) return {nullptr, s.error()};
    return {p, ""};  // never unloaded: CUDA and NCCL keep threads and handlers in it until exit
  }
  return {nullptr, std::string("the GPU plugin ") + kGpuPluginFileName +
                       " was not found; this lins runs on the CPU only (build lins with a CUDA toolkit and NCCL, "
                       "which also builds the plugin beside it, or set LINS_GPU_PLUGIN to its path). Tried:" +
                       (tried.empty() ? std::string(" nowhere (the executable's folder is unknown)") : tried)};
}

std::once_flag g_once;
Loaded g_loaded;                                // written once, inside call_once
std::atomic<const GpuPlugin*> g_plugin{nullptr};  // g_loaded.plugin, for readers that must not load

}  // namespace

std::string gpu_plugin_build_id() { return LINS_VERSION " " LINS_GIT_COMMIT; }

Result<const GpuPlugin*> gpu_plugin() {
  std::call_once(g_once, [] {
    g_loaded = load();
    g_plugin.store(g_loaded.plugin);
  });
  if (!g_loaded.plugin) return make_error(g_loaded.error);
  return g_loaded.plugin;
}

const GpuPlugin* loaded_gpu_plugin() { return g_plugin.load(); }

std::string gpu_plugin_location() {
  if (lins_gpu_plugin_v1) return "linked in";
  const std::vector<std::string> paths = candidate_paths();
  const char* env = std::getenv("LINS_GPU_PLUGIN");
  for (size_t i = 0; i < paths.size(); ++i)
    if (file_exists(paths[i])) return env && *env ? "LINS_GPU_PLUGIN" : i == 0 ? "beside lins" : "../lib beside lins";
  return "";
}

}  // namespace lins
