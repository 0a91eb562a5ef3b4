// This process's rank and the world size in MPI_COMM_WORLD, for the tests that run under mpiexec (or as a singleton).
#pragma once

#include <mpi.h>

namespace lins::test {

inline int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

inline int world_size() {
  int s = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

}  // namespace lins::test
