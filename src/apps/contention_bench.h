// `lins comm --contention FILE`: what work running side by side costs on this machine's backend, measured with the
// Communicator and ComputeBackend the training step uses (B0 alone, B1 kappa, B2 lambda, B3 eta, B4 sum or max;
// docs/cost-model.md, "Measuring contention"), fitted (core/cost/contention_fit.h) and written as a [contention] table.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "comm/mesh_comms.h"
#include "comm/mpi_communicator.h"
#include "core/model/topology.h"
#include "core/model/vocabulary.h"
#include "core/util/result.h"

namespace lins {

struct ContentionOptions {
  std::string path;  // the TOML file rank 0 writes
  Backend backend = Backend::mpi;
  MpiProgress progress = MpiProgress::thread;
  Topology topo;
  DType dtype = DType::fp32;  // the collectives' elements
  // B0's sweep: every kind over each fabric from min to max bytes, times step_factor.
  std::vector<CollKind> sweep_kinds;
  uint64_t sweep_min_bytes = 256 << 10, sweep_max_bytes = 4 << 20;
  int step_factor = 4;
  CollKind kind = CollKind::all_reduce;  // B1-B4's collective
  uint64_t bytes = 4 << 20;              // and its message, large enough for bandwidth to dominate latency
  int repeats = 5;                       // samples of every measurement (median and range kept)
  double compute_s = 0.1;                // one compute sample alone
  // An emulated device (CPU backend; 0: off): each GEMM pass is paced to its 2 n^3 FLOPs at device_tflops, each
  // memory pass to its 12 bytes per element at device_gbps, as the executor paces a task (train/pacing.h).
  double device_tflops = 0, device_gbps = 0;
  std::string device_source;  // where the rates came from
  std::vector<std::string> argv;         // the command line, for the file's header
};

// The buffers the benchmark allocates per rank, for the memory check before it starts: host bytes (CPU backend) or
// device bytes (GPU backend).
double contention_buffer_bytes(const ContentionOptions& o);

// Collective over MPI_COMM_WORLD (whose size is o.topo.world()): measures, prints the tables on rank 0 and writes
// o.path there. An error is the same on every rank.
Status run_contention(const ContentionOptions& o, int rank);

}  // namespace lins
