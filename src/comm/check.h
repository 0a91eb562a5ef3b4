// Error checks for MPI calls (and the fatal-error path they share with CUDA_CHECK/NCCL_CHECK): print host, rank,
// file:line, the call and the error text, then MPI_Abort, because the other ranks would otherwise hang.
#pragma once

#include <mpi.h>

#include <string>

namespace lins {

// Prints "lins: fatal on HOST rank R at FILE:LINE: CALL: WHAT" to stderr and aborts every rank.
[[noreturn]] void comm_fatal(const char* file, int line, const char* call, const std::string& what);
// MPI's text for an error code.
std::string mpi_error_string(int code);

}  // namespace lins

#define MPI_CHECK(call)                                                                      \
  do {                                                                                       \
    const int lins_mpi_rc_ = (call);                                                         \
    if (lins_mpi_rc_ != MPI_SUCCESS)                                                         \
      ::lins::comm_fatal(__FILE__, __LINE__, #call, ::lins::mpi_error_string(lins_mpi_rc_)); \
  } while (0)
