// `lins`: one binary, subcommands plan | comm | step | simulate. Prints usage, the version, or runs a subcommand.
#include <mpi.h>

#include <cstdio>
#include <cstring>
#include <exception>
#include <new>
#include <string>

#include "apps/commands.h"
#include "lins_git_commit.h"  // generated at build time

namespace lins {

const std::vector<CommandEntry>& commands() {
  static const std::vector<CommandEntry> table = {
      {"plan", "rank the legal sharding plans of a model on a cluster by projected step time, or by the paper's summed "
       "communication (no GPU needed)",
       run_plan},
      {"comm", "benchmark collectives (nccl-tests style) and write the bandwidth profile the planner reads", run_comm},
      {"step", "run the synthetic LLaMA training step under each strategy and write CSV timings", run_step},
      {"simulate", "project a step's time to clusters you do not have (cost model; rows say 'projected')",
       run_simulate},
      {"replay", "re-time the steps `lins step --trace` recorded through the simulator's timeline (no model)",
       run_replay},
      {"schema", "print the columns and units of every table lins writes, the model presets and FLOPs, as JSON",
       run_schema},
      {"rate", "measure the compute rate each rank sustains while every rank computes (for step --device-rate)",
       run_rate},
  };
  return table;
}

}  // namespace lins

namespace {

void print_usage(std::FILE* out) {
  std::fprintf(out,
               "lins %s: a benchmark and reproduction suite for \"Lins: Reducing Communication Overhead of ZeRO\"\n\n"
               "usage: lins <command> [options]\n       lins <command> --help\n       lins --version\n\n"
               "commands:\n",
               LINS_VERSION);
  for (const auto& c : lins::commands()) std::fprintf(out, "  %-10s %s\n", c.name, c.summary);
}

// An allocation (or anything else) that threw past a command: one message and exit 1, never an abort. Under MPI the
// other ranks would wait for this one forever, so the job is ended with MPI_Abort.
int fail_uncaught(const char* cmd, const std::string& what) {
  std::fprintf(stderr, "lins %s: %s\n", cmd, what.c_str());
  std::fflush(stderr);
  int initialized = 0, finalized = 0, world = 1;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) {
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    if (world > 1) MPI_Abort(MPI_COMM_WORLD, 1);
    MPI_Finalize();
  }
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    print_usage(stderr);
    return 2;
  }
  const char* cmd = argv[1];
  if (!std::strcmp(cmd, "--help") || !std::strcmp(cmd, "-h") || !std::strcmp(cmd, "help")) {
    print_usage(stdout);
    return 0;
  }
  if (!std::strcmp(cmd, "--version") || !std::strcmp(cmd, "version")) {
    std::printf("lins %s (commit %s)\n", LINS_VERSION, LINS_GIT_COMMIT);
    return 0;
  }
  for (const auto& c : lins::commands())
    if (!std::strcmp(cmd, c.name)) {
      try {
        return c.run(lins::Args(argv + 2, argv + argc));
      } catch (const std::bad_alloc&) {
        return fail_uncaught(cmd, "out of memory: an allocation failed (std::bad_alloc)");
      } catch (const std::exception& e) {
        return fail_uncaught(cmd, std::string("failed: ") + e.what());
      }
    }
  std::fprintf(stderr, "lins: unknown command '%s'; valid commands:", cmd);
  for (const auto& c : lins::commands()) std::fprintf(stderr, " %s", c.name);
  std::fprintf(stderr, " (see lins --help)\n");
  return 2;
}
