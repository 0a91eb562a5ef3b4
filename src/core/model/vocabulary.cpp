// The shared vocabulary's names and sizes; see vocabulary.h.
#include "core/model/vocabulary.h"

namespace lins {

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

}  // namespace lins
