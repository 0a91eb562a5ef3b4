// The synthetic but learnable token task: every sequence starts at a random token and continues by a fixed
// permutation of the vocabulary, next = (a * prev + c) mod V, with a and c drawn from the seed (a coprime to V), so
// a model that learns the bigram map drives the loss from ln V towards zero. Sequence g of step s depends only on
// (seed, s, g): the global batch is the same whatever the world size, the split across ranks or into micro-batches.
#pragma once

#include <cstdint>
#include <vector>

namespace lins {

struct SyntheticTask {
  uint64_t seed = 1;
  int vocab = 2;
  int seq = 1;

  // ids[seq] and targets[seq] (targets[t] = ids[t + 1] of the underlying seq + 1 tokens) of global sequence g.
  void sequence(int64_t step, int64_t g, int32_t* ids, int32_t* targets) const;
  int64_t multiplier() const;  // a
  int64_t increment() const;   // c
};

// Which global sequences a rank's micro-batch holds: rank r, micro-batch j of M, b sequences each, get
// g = (r * M + j) * b + i, i < b. A one-rank run with M * world micro-batches covers the same global batch.
int64_t global_sequence(int rank, int micro_batch, int micro_batches, int micro_batch_size, int i);

// The micro-batch's ids and targets ([b * seq] each, sequence-major) on the host.
void micro_batch_tokens(const SyntheticTask& task, int64_t step, int rank, int micro_batch, int micro_batches,
                        int micro_batch_size, std::vector<int32_t>* ids, std::vector<int32_t>* targets);

}  // namespace lins
