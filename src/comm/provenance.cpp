// Gathering and writing provenance; see provenance.h.
#include "comm/provenance.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>

#include "comm/check.h"
#include "lins_git_commit.h"  // generated at build time
#include "comm/gpu_plugin.h"

extern char** environ;

namespace lins {

std::vector<std::string> gather_host_names(MPI_Comm comm) {
  constexpr int kLen = 256;
  char mine[kLen] = {};
  gethostname(mine, kLen - 1);
  int size = 1;
  MPI_CHECK(MPI_Comm_size(comm, &size));
  std::vector<char> all(size_t(size) * kLen);
  MPI_CHECK(MPI_Allgather(mine, kLen, MPI_CHAR, all.data(), kLen, MPI_CHAR, comm));
  std::vector<std::string> out;
  for (int r = 0; r < size; ++r) out.emplace_back(&all[size_t(r) * kLen]);
  return out;
}

std::string mpi_library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  MPI_Get_library_version(text, &len);
  std::string s(text, std::min<int>(len, MPI_MAX_LIBRARY_VERSION_STRING));
  s.erase(std::find(s.begin(), s.end(), '\0'), s.end());
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

Json relevant_environment() {
  static const char* kExact[] = {"OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS",    "CUDA_VISIBLE_DEVICES", "SLURM_JOB_ID",
                                 "SLURM_JOB_NAME",       "SLURM_JOB_NODELIST", "SLURM_JOB_NUM_NODES",  "SLURM_NTASKS",
                                 "SLURM_STEP_ID",        "SLURM_CLUSTER_NAME", "SLURM_JOB_PARTITION", "LINS_FABRIC"};
  // Launcher-internal OMPI_MCA_* variables (URIs, session folders) are left out; these are the ones users set.
  static const char* kPrefixes[] = {"NCCL_", "UCX_", "OMPI_MCA_btl", "OMPI_MCA_pml", "OMPI_MCA_mtl", "OMPI_MCA_coll"};
  std::map<std::string, std::string> found;
  for (char** e = environ; e && *e; ++e) {
    const std::string kv = *e;
    const auto eq = kv.find('=');
    if (eq == std::string::npos) continue;
    const std::string name = kv.substr(0, eq);
    bool keep = std::any_of(std::begin(kExact), std::end(kExact), [&](const char* x) { return name == x; });
    for (const char* p : kPrefixes) keep = keep || name.rfind(p, 0) == 0;
    if (keep) found[name] = kv.substr(eq + 1);
  }
  Json o = Json::object();
  for (auto& [k, v] : found) o[k] = v;
  return o;
}

namespace {

std::string fabric_from_hosts(const std::vector<std::string>& hosts) {
  if (const char* f = std::getenv("LINS_FABRIC"); f && *f) return f;
  std::vector<std::string> unique = hosts;
  std::sort(unique.begin(), unique.end());
  unique.erase(std::unique(unique.begin(), unique.end()), unique.end());
  return unique.size() <= 1 ? "shared-memory" : "hosts:" + std::to_string(unique.size());
}

}  // namespace

std::string fabric_label(MPI_Comm comm) {
  // Rank 0's view, sent to all: every rank then writes the same label even if one rank's environment differs.
  std::string label = fabric_from_hosts(gather_host_names(comm));
  int len = static_cast<int>(label.size());
  MPI_CHECK(MPI_Bcast(&len, 1, MPI_INT, 0, comm));
  label.resize(static_cast<std::size_t>(len));
  MPI_CHECK(MPI_Bcast(label.data(), len, MPI_CHAR, 0, comm));
  return label;
}

namespace {

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

Json gather_provenance(MPI_Comm comm, const std::vector<std::string>& argv, const Json& extra) {
  const auto hosts = gather_host_names(comm);
  std::vector<std::string> unique = hosts;
  std::sort(unique.begin(), unique.end());
  unique.erase(std::unique(unique.begin(), unique.end()), unique.end());
  int size = 1, version = 0, subversion = 0, thread_level = 0;
  MPI_CHECK(MPI_Comm_size(comm, &size));
  MPI_Get_version(&version, &subversion);
  MPI_Query_thread(&thread_level);

  Json o = Json::object();
  o["tool"] = "lins";
  o["lins_version"] = LINS_VERSION;
  o["git_commit"] = LINS_GIT_COMMIT;
  o["argv"] = Json(argv);
  o["date_utc"] = utc_now();
  o["world_size"] = size;
  o["hosts"] = Json(hosts);
  o["host_count"] = static_cast<int>(unique.size());
  o["fabric"] = fabric_from_hosts(hosts);
  o["mpi_library_version"] = mpi_library_version();
  o["mpi_standard"] = std::to_string(version) + "." + std::to_string(subversion);
  o["mpi_thread_multiple"] = thread_level >= MPI_THREAD_MULTIPLE;
  // The GPU plugin is read only where the run loaded it (it used the GPU): a CPU run neither loads CUDA for its
  // provenance nor fails to write it where the GPU is broken.
  const std::string plugin = gpu_plugin_location();
  o["built_with_cuda"] = !plugin.empty();
  o["gpu_plugin"] = plugin.empty() ? Json(nullptr) : Json(plugin);
  if (const GpuPlugin* gpu = loaded_gpu_plugin()) {
    o["nccl_version"] = gpu->nccl_version();
    o["cuda_version"] = gpu->cuda_version();
    const GpuDeviceProbe probe = gpu->probe_devices();
    o["cuda_device_count"] = probe.count;
    if (probe.failed()) o["cuda_device_error"] = probe.error;
    o["gpu_name"] = probe.count > 0 ? Json(gpu->device_name(0)) : Json(nullptr);
  } else {
    o["gpu_name"] = nullptr;
  }
  o["env"] = relevant_environment();
  if (extra.size() > 0) o["run"] = extra;
  return o;
}

Status write_provenance(MPI_Comm comm, const std::string& path, const std::vector<std::string>& argv,
                        const Json& extra) {
  const Json o = gather_provenance(comm, argv, extra);
  int rank = 0;
  MPI_CHECK(MPI_Comm_rank(comm, &rank));
  std::string error;
  if (rank == 0) {
    auto s = write_file_atomic(path, json_dump(o, 2) + "\n");
    if (!s) error = s.error().empty() ? "could not write " + path : s.error();
  }
  int len = static_cast<int>(error.size());
  MPI_CHECK(MPI_Bcast(&len, 1, MPI_INT, 0, comm));
  error.resize(len);
  if (len > 0) MPI_CHECK(MPI_Bcast(error.data(), len, MPI_CHAR, 0, comm));
  if (len > 0) return make_error(error);
  return Status::ok_status();
}

std::string provenance_path_for(const std::string& csv_path) {
  std::string stem = csv_path;
  const auto slash = stem.find_last_of('/');
  const auto dot = stem.find_last_of('.');
  if (dot != std::string::npos && (slash == std::string::npos || dot > slash)) stem.resize(dot);
  return stem + ".provenance.json";
}

}  // namespace lins
