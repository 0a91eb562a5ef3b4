// The shared vocabulary's names and sizes; see vocabulary.h.
#include "core/vocabulary.h"

namespace lins {

const char* coll_kind_name(CollKind k) { return kCollKindNames.name(k); }
const char* dtype_name(DType d) { return kDTypeNames.name(d); }
const char* axis_name(Axis a) { return kAxisNames.name(a); }

int dtype_bytes(DType d) {
  switch (d) {
    case DType::fp32:
      return 4;
    case DType::bf16:
      return 2;
  }
  return 0;
}

double bus_factor(CollKind kind, int n) {
  if (n <= 1) return 0.0;
  switch (kind) {
    case CollKind::all_reduce:
      return 2.0 * (n - 1) / n;
    case CollKind::all_gather:
    case CollKind::reduce_scatter:
      return double(n - 1) / n;
    case CollKind::broadcast:
      return 1.0;
  }
  return 0.0;
}

}  // namespace lins
