// Adding up every rank's memory need per host or device before allocating; see memory_check.h.
#include "apps/memory_check.h"

#include <mpi.h>
#include <unistd.h>

#include <cstdio>

#include "apps/mpi_app.h"
#include "comm/gpu_plugin.h"
#include "comm/mesh_comms.h"
#include "comm/watchdog.h"
#include "core/util/host_memory.h"
#include "core/util/units.h"

namespace lins {
namespace {

std::string host_name() {
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  return host;
}

// The ranks sharing this rank's memory: its host, or its device on the host (the device NCCL and the GPU backend
// pick: local rank modulo the visible devices). *device is set to that device (-1 for host memory).
Result<MPI_Comm> memory_domain(bool device, int* device_index) {
  MPI_Comm host;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &host);
  *device_index = -1;
  if (!device) return host;
  // A failed probe counts as no device here (every rank must reach the split below); the GPU backend's own start
  // has already refused such a machine with the probe's message.
  auto probed = cuda_device_count_probed();
  const int devices = probed ? *probed : 0;
  if (devices > 0) *device_index = node_place(MPI_COMM_WORLD).local_rank % devices;
  MPI_Comm by_device;
  MPI_Comm_split(host, *device_index < 0 ? 0 : *device_index, 0, &by_device);
  MPI_Comm_free(&host);
  return by_device;
}

// What this host or device can give: the given limit, else the measured figure. nullopt when it cannot be read.
std::optional<NodeBudget> read_budget(const MemoryCheckOptions& o, int device, std::string* why_not) {
  NodeBudget b;
  b.where = device >= 0 ? "GPU " + std::to_string(device) + " of host " + host_name() : "host " + host_name();
  if (o.limit_bytes) {
    b.available_bytes = *o.limit_bytes;
    b.source = format_bytes(*o.limit_bytes) + " (given by " + o.limit_option + ")";
    return b;
  }
  if (o.device) {
    if (const GpuPlugin* gpu = loaded_gpu_plugin(); gpu && device >= 0) {
      auto m = gpu->device_memory(device);
      if (!m) {
        *why_not = m.error();
        return std::nullopt;
      }
      b.available_bytes = m->free_bytes;
      b.source = format_bytes(m->free_bytes) + " free of " + format_bytes(m->total_bytes) + " (cudaMemGetInfo)";
      return b;
    }
    *why_not = "no CUDA device to read the free memory of";
    return std::nullopt;
  }
  auto h = read_host_memory();
  if (!h) {
    *why_not = h.error();
    return std::nullopt;
  }
  b.available_bytes = h->available_bytes;
  b.source = h->describe();
  return b;
}

}  // namespace

Status check_memory_on_every_node(const std::vector<RankDemand>& mine, const MemoryCheckOptions& options) {
  WatchdogScope watched("the memory check's MPI calls");
  int device = -1;
  LINS_ASSIGN_OR_RETURN(MPI_Comm comm, memory_domain(options.device, &device));
  int local = 0, ranks = 1;
  MPI_Comm_rank(comm, &local);
  MPI_Comm_size(comm, &ranks);
  std::vector<NodeDemand> demands;
  for (const auto& d : mine) {
    NodeDemand n;
    n.what = d.what;
    n.ranks = ranks;
    MPI_Allreduce(&d.bytes, &n.node_bytes, 1, MPI_DOUBLE, MPI_SUM, comm);
    struct {
      double bytes;
      int rank;
    } in{d.bytes, local}, out{0, 0};
    MPI_Allreduce(&in, &out, 1, MPI_DOUBLE_INT, MPI_MAXLOC, comm);
    n.rank_max_bytes = out.bytes;
    n.detail = broadcast_text(local == out.rank ? d.detail : "", out.rank, comm);
    demands.push_back(n);
  }
  Status verdict;
  std::string why_not;
  if (local == 0) {
    if (auto budget = read_budget(options, device, &why_not)) {
      verdict = check_node_memory(*budget, demands, {}, "");
      if (!verdict) {
        const auto alternatives =
            options.would_fit ? options.would_fit(budget->available_bytes, ranks) : std::vector<std::string>{};
        verdict = check_node_memory(*budget, demands, alternatives, options.override_hint);
      }
    }
  }
  MPI_Comm_free(&comm);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0 && !why_not.empty()) std::fprintf(stderr, "memory check skipped on this host: %s\n", why_not.c_str());
  return agree_any(verdict, false);
}

}  // namespace lins
