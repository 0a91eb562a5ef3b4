// nccl-tests-style correctness check for the collective benchmark: every rank fills its input deterministically from
// (world rank, index), so every rank can compute the expected result of a collective locally and count the elements
// that differ by more than the rounding of the dtype allows.
#pragma once

#include <cstdint>
#include <vector>

#include "core/model/vocabulary.h"

namespace lins {

// Dyadic values k/16 with -31 <= k <= 223: exact in bf16 and fp32; mostly positive, so sums grow past 8 significant
// bits and bf16 sums really round.
double check_fill_value(int world_rank, int64_t index);
// buf[i] = check_fill_value(world_rank, offset + i) in `dtype` (host memory).
void check_fill(void* buf, DType dtype, int64_t count, int world_rank, int64_t offset = 0);
// buf[i] = value in `dtype` (host memory).
void check_fill_constant(void* buf, DType dtype, int64_t count, double value);

// Elements of a collective's result (host copy) that are wrong. `members` are the world ranks of the group in group
// order, `me` this rank's index in it; `count` is the call's count (core/collectives.h: per rank for all_gather and
// reduce_scatter, per peer for all_to_all, the buffer for all_reduce and broadcast); the result holds its row's
// recv_elems. Inputs must have been check_fill(world_rank) (offset 0) on every member,
// except that broadcast's non-root buffers may hold anything. Sums are accepted within (n - 1) * u * sum |x| of the
// exact value (u: unit roundoff of the dtype; each of the n - 1 additions rounds once).
int64_t count_wrong(CollKind kind, const void* result, DType dtype, int64_t count, const std::vector<int>& members,
                    int me, int root = 0);

}  // namespace lins
