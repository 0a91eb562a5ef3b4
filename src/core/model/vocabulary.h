// The words the layers share: the collective kinds (core/collectives.h), the element dtypes and the mesh axes, with
// their name tables.
// Small on purpose: the communicators and compute backends include this, not the whole Schedule (core/schedule.h).
#pragma once

#include "core/model/collectives.h"  // CollKind, its names and its row
#include "core/util/names.h"

namespace lins {

enum class DType { fp32, bf16 };
// Read also as nccl-tests and PyTorch name them (float, bfloat16).
inline constexpr NameTable<DType, 2> kDTypeNames{"dtype",
                                                 {{
                                                     {DType::fp32, "fp32", "float float32", "4 bytes"},
                                                     {DType::bf16, "bf16", "bfloat16", "2 bytes, bfloat16"},
                                                 }}};
static_assert(kDTypeNames.complete(DType::bf16));

enum class Axis { intra, inter };  // intra: the group lies inside one node; inter: it spans nodes
inline constexpr NameTable<Axis, 2> kAxisNames{"axis",
                                               {{
                                                   {Axis::intra, "intra", "", "the group lies inside one node"},
                                                   {Axis::inter, "inter", "", "the group spans nodes"},
                                               }}};
static_assert(kAxisNames.complete(Axis::inter));

// Each value's name in the tables above.
const char* dtype_name(DType d);
const char* axis_name(Axis a);
int dtype_bytes(DType d);

}  // namespace lins
