// The words the layers share: the collective kinds, the element dtypes and the mesh axes, with their name tables.
// Small on purpose: the communicators and compute backends include this, not the whole Schedule (core/schedule.h).
#pragma once

#include "core/names.h"

namespace lins {

enum class CollKind { all_gather, reduce_scatter, all_reduce, broadcast };
constexpr int kCollKindCount = 4;
// Written as the profile, step and collective-log CSVs spell them; read also as nccl-tests ("allgather") and NCCL
// ("AllGather") name them.
inline constexpr NameTable<CollKind, kCollKindCount> kCollKindNames{
    "collective",
    {{
        {CollKind::all_gather, "all_gather", "allgather AllGather all-gather", "", "all-gather"},
        {CollKind::reduce_scatter, "reduce_scatter", "reducescatter ReduceScatter reduce-scatter", "",
         "reduce-scatter"},
        {CollKind::all_reduce, "all_reduce", "allreduce AllReduce all-reduce", "", "all-reduce"},
        {CollKind::broadcast, "broadcast", "bcast Broadcast"},
    }}};
static_assert(kCollKindNames.complete(CollKind::broadcast));

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
const char* coll_kind_name(CollKind k);
const char* dtype_name(DType d);
const char* axis_name(Axis a);
int dtype_bytes(DType d);
// nccl-tests' bus-bandwidth factor: all_reduce 2(n-1)/n; all_gather, reduce_scatter (n-1)/n; broadcast 1.
double bus_factor(CollKind kind, int group_size);

}  // namespace lins
