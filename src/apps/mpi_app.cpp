// MPI start-up, agreement and shutdown shared by the MPI subcommands; see mpi_app.h.
#include "apps/mpi_app.h"

#include <mpi.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "comm/mesh_comms.h"
#include "comm/watchdog.h"

namespace lins {

MpiRun init_mpi() {
  int initialized = 0, provided = 0;
  MPI_Initialized(&initialized);
  if (!initialized) MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
  MpiRun run;
  MPI_Comm_rank(MPI_COMM_WORLD, &run.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &run.world);
  return run;
}

int finish_mpi(int code) {
  stop_watchdog();
  MPI_Finalize();
  return code;
}

int fail_mpi(int rank, const char* command, const std::string& message) {
  if (rank == 0) std::fprintf(stderr, "%s: %s\n", command, message.c_str());
  return finish_mpi(2);
}

std::optional<int> parse_mpi_args(const CommandSpec& spec, const std::vector<std::string>& args, int rank,
                                  ParsedArgs* out) {
  const std::string command = "lins " + spec.name;
  auto parsed = parse_args(spec, args);
  if (!parsed) return fail_mpi(rank, command.c_str(), parsed.error());
  if (parsed->flag("help")) {
    if (rank == 0) std::printf("%s", help_text(spec).c_str());
    return finish_mpi(0);
  }
  if (!parsed->positional().empty())
    return fail_mpi(rank, command.c_str(),
                    "unexpected argument '" + parsed->positional().front() + "' (see " + command + " --help)");
  *out = std::move(*parsed);
  return std::nullopt;
}

void start_rank_watchdog(double timeout_s, int rank) {
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  start_watchdog(timeout_s, rank, host);
}

std::string broadcast_text(std::string text, int root, MPI_Comm comm) {
  int len = static_cast<int>(text.size());
  MPI_Bcast(&len, 1, MPI_INT, root, comm);
  text.resize(len);
  if (len) MPI_Bcast(text.data(), len, MPI_CHAR, root, comm);
  return text;
}

Status agree(const Status& rank0_status, int rank) {
  WatchdogScope watched("MPI_Bcast of rank 0's verdict on group 'world'");
  const std::string e = broadcast_text(rank == 0 && !rank0_status ? rank0_status.error() : "", 0);
  if (!e.empty()) return make_error(e);
  return Status::ok_status();
}

Status agree_any(const Status& mine, bool name_rank) {
  WatchdogScope watched("MPI_Allreduce agreeing on every rank's status on group 'world'");
  int rank = 0, world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  int first = mine ? world : rank, lowest = world;
  MPI_Allreduce(&first, &lowest, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (lowest == world) return Status::ok_status();
  const std::string e = broadcast_text(rank == lowest ? mine.error() : "", lowest);
  return make_error(name_rank ? "rank " + std::to_string(lowest) + ": " + e : e);
}

Result<RankGpu> rank_gpu(const std::string& hint, const std::string& one_per_gpu_hint) {
  auto plugin = gpu_plugin();
  Result<int> devices = plugin ? cuda_device_count_probed() : Result<int>(make_error(plugin.error()));
  Status seen;
  if (!devices)
    seen = make_error(devices.error());
  else if (*devices == 0)
    seen = make_error("no CUDA device is visible to this rank");
  if (auto s = agree_any(seen); !s) return make_error(s.error() + " " + hint);
  const NodePlace here = node_place(MPI_COMM_WORLD);
  if (auto s = check_one_rank_per_gpu(MPI_COMM_WORLD, here, *devices); !s)
    return make_error(s.error() + " " + one_per_gpu_hint);
  return RankGpu{*plugin, here.local_rank % *devices};
}

}  // namespace lins
