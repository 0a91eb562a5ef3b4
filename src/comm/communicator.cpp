// Out-of-line parts of the Communicator interface; see communicator.h.
#include "comm/communicator.h"

namespace lins {

double CommCounters::total_message_bytes() const {
  double s = 0;
  for (double b : message_bytes) s += b;
  return s;
}

Request Communicator::run(CollKind kind, const void* send, void* recv, int64_t count, DType dtype, int root) {
  switch (kind) {
    case CollKind::all_gather:
      return all_gather(send, recv, count, dtype);
    case CollKind::reduce_scatter:
      return reduce_scatter(send, recv, count, dtype);
    case CollKind::all_reduce:
      return all_reduce(send, recv, count, dtype);
    case CollKind::broadcast:
      return broadcast(recv, count, dtype, root);
    case CollKind::all_to_all:
      return all_to_all(send, recv, count, dtype);
  }
  return Request();
}

}  // namespace lins
