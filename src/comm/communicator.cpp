// Out-of-line parts of the Communicator interface; see communicator.h.
#include "comm/communicator.h"

namespace lins {

double CommCounters::total_message_bytes() const {
  double s = 0;
  for (double b : message_bytes) s += b;
  return s;
}

}  // namespace lins
