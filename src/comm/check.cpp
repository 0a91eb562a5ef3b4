// The shared fatal-error path of MPI_CHECK, CUDA_CHECK and NCCL_CHECK; see check.h.
#include "comm/check.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace lins {

std::string mpi_error_string(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, len);
}

void comm_fatal(const char* file, int line, const char* call, const std::string& what) {
  char host[256] = "?";
  gethostname(host, sizeof host - 1);
  int initialized = 0, finalized = 0, rank = -1;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  const bool mpi_up = initialized && !finalized;
  if (mpi_up) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::fprintf(stderr, "lins: fatal on %s rank %d at %s:%d: %s: %s\n", host, rank, file, line, call, what.c_str());
  std::fflush(stderr);
  if (mpi_up) MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();
}

}  // namespace lins
