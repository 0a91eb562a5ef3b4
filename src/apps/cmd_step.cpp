// `lins step`: placeholder until its issue lands; it says so instead of pretending to run.
#include <cstdio>

#include "apps/commands.h"

namespace lins {

int run_step(const Args&) {
  std::fprintf(stderr, "lins step: not built yet in this version\n");
  return 2;
}

}  // namespace lins
