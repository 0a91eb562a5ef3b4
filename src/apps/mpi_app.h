// What every MPI subcommand of `lins` (comm, step) does the same way: start MPI with thread support, agree on one
// verdict across ranks (so every rank takes the same branch and only rank 0 speaks), start the watchdog, finish.
#pragma once

#include <mpi.h>

#include <optional>
#include <string>
#include <vector>

#include "comm/gpu_plugin.h"
#include "core/util/cli.h"
#include "core/util/result.h"

namespace lins {

struct MpiRun {
  int rank = 0;
  int world = 1;
};

// MPI_Init_thread(MPI_THREAD_MULTIPLE) unless MPI is up already; this rank and the world size.
MpiRun init_mpi();
// Stops the watchdog and finalizes MPI; returns `code` (the process exit code).
int finish_mpi(int code);
// Bad input or setup, seen alike by every rank: rank 0 prints "<command>: <message>", every rank finishes with 2.
int fail_mpi(int rank, const char* command, const std::string& message);
// Parses `args` against `spec` on every rank (every rank reaches the same verdict). Returns the exit code when the
// command ends here (--help printed by rank 0: 0; bad options or a stray argument: 2, said once by rank 0), else
// nullopt with *out set.
std::optional<int> parse_mpi_args(const CommandSpec& spec, const std::vector<std::string>& args, int rank,
                                  ParsedArgs* out);
// The watchdog of comm/watchdog.h for this rank, named by its host (timeout_s <= 0: off).
void start_rank_watchdog(double timeout_s, int rank);
// Rank 0's status, given to every rank.
Status agree(const Status& rank0_status, int rank);
// Any rank's failure, given to every rank (the lowest failing rank's message, prefixed with its rank unless
// name_rank is false: a message that names its node itself).
Status agree_any(const Status& mine, bool name_rank = true);
// This rank's GPU for a GPU run, once every rank has learned whether every rank has the GPU plugin, a working device
// and a device of its own: the plugin, and the device (local rank % devices). `one_per_gpu_hint` follows the error
// when ranks outnumber a node's GPUs; `hint` every other error.
struct RankGpu {
  const GpuPlugin* plugin = nullptr;
  int device = 0;
};
Result<RankGpu> rank_gpu(const std::string& hint, const std::string& one_per_gpu_hint);

// `text` of rank `root` of `comm`, on every rank of it.
std::string broadcast_text(std::string text, int root, MPI_Comm comm = MPI_COMM_WORLD);

}  // namespace lins
