// The synthetic token task; see data.h.
#include "train/data.h"

#include <cstddef>
#include <numeric>

#include "core/util/hash.h"

namespace lins {

int64_t SyntheticTask::multiplier() const {
  if (vocab <= 2) return 1;
  // The first a >= 2 coprime to V at or after a seeded start: a permutation that is not the identity shift.
  int64_t a = 2 + int64_t(splitmix64(seed ^ 0xa11ce) % uint64_t(vocab - 1));
  while (std::gcd(a % vocab, int64_t(vocab)) != 1 || a % vocab < 2) ++a;
  return a % vocab;
}

int64_t SyntheticTask::increment() const { return 1 + int64_t(splitmix64(seed ^ 0xc0ffee) % uint64_t(vocab)); }

void SyntheticTask::sequence(int64_t step, int64_t g, int32_t* ids, int32_t* targets) const {
  const int64_t a = multiplier(), c = increment();
  int64_t x = int64_t(splitmix64(splitmix64(seed) ^ splitmix64(uint64_t(step) * 0x100000001b3ull + uint64_t(g))) %
                      uint64_t(vocab));
  for (int t = 0; t < seq; ++t) {
    ids[t] = int32_t(x);
    x = (a * x + c) % vocab;
    targets[t] = int32_t(x);
  }
}

int64_t global_sequence(int rank, int micro_batch, int micro_batches, int micro_batch_size, int i) {
  return (int64_t(rank) * micro_batches + micro_batch) * micro_batch_size + i;
}

void micro_batch_tokens(const SyntheticTask& task, int64_t step, int rank, int micro_batch, int micro_batches,
                        int micro_batch_size, std::vector<int32_t>* ids, std::vector<int32_t>* targets) {
  ids->resize(std::size_t(micro_batch_size) * task.seq);
  targets->resize(std::size_t(micro_batch_size) * task.seq);
  for (int i = 0; i < micro_batch_size; ++i)
    task.sequence(step, global_sequence(rank, micro_batch, micro_batches, micro_batch_size, i),
                  ids->data() + std::size_t(i) * task.seq, targets->data() + std::size_t(i) * task.seq);
}

}  // namespace lins
