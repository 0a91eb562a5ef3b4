// A small MPI job that injects a fault into one rank while the others run collectives through the MPI backend with
// the watchdog on: `stall` (the rank sleeps forever), `kill` (the rank dies by SIGKILL) or `none`. The tests check
// that the job then ends with a non-zero exit within a bounded time and names the rank and operation.
// usage: fault_main MODE FAULTY_RANK TIMEOUT_S
#include <mpi.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "comm/mesh_comms.h"
#include "comm/watchdog.h"

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const std::string mode = argc > 1 ? argv[1] : "none";
  const int faulty = argc > 2 ? std::atoi(argv[2]) : 1;
  const double timeout_s = argc > 3 ? std::atof(argv[3]) : 5.0;
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  lins::start_watchdog(timeout_s, rank, host);
  {
    auto world = lins::make_communicator(lins::Backend::mpi, MPI_COMM_WORLD, "world");
    if (!world) {
      std::fprintf(stderr, "%s\n", world.error().c_str());
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
    std::vector<float> buf(1 << 16, 1.0f);
    for (int step = 0; step < 10; ++step) {
      if (step == 3 && rank == faulty) {
        if (mode == "stall") {
          while (true) pause();  // hangs without using the CPU, as a deadlocked rank would
        }
        if (mode == "kill") std::raise(SIGKILL);
      }
      (*world)->all_reduce(buf.data(), buf.data(), static_cast<int64_t>(buf.size()), lins::DType::fp32).wait();
    }
    (*world)->barrier();
  }
  lins::stop_watchdog();
  if (rank == 0) std::printf("fault_main: completed 10 steps\n");
  MPI_Finalize();
  return 0;
}
