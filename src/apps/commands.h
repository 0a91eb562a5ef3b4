// The subcommands of `lins`. Each takes the words after its name and returns the process exit code; each owns its
// option table (core/cli.h) so its parser and its --help cannot disagree.
#pragma once

#include <string>
#include <vector>

namespace lins {

using Args = std::vector<std::string>;

int run_plan(const Args& args);      // cmd_plan.cpp: the planner (no MPI)
int run_comm(const Args& args);      // cmd_comm.cpp: the collective benchmark and profiler (MPI, NCCL)
int run_step(const Args& args);      // cmd_step.cpp: the training step under every strategy (MPI, NCCL)
int run_simulate(const Args& args);  // cmd_simulate.cpp: projection of a step to clusters we do not have
int run_replay(const Args& args);    // cmd_replay.cpp: a measured step re-timed through the simulator's timeline
int run_schema(const Args& args);    // cmd_schema.cpp: the columns and units of every table lins writes
int run_rate(const Args& args);      // cmd_rate.cpp: the compute rate every rank sustains while all compute at once

struct CommandEntry {
  const char* name;
  const char* summary;
  int (*run)(const Args&);
};

const std::vector<CommandEntry>& commands();

}  // namespace lins
