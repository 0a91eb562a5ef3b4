// `lins comm`: placeholder until its issue lands; it says so instead of pretending to run.
#include <cstdio>

#include "apps/commands.h"

namespace lins {

int run_comm(const Args&) {
  std::fprintf(stderr, "lins comm: not built yet in this version\n");
  return 2;
}

}  // namespace lins
