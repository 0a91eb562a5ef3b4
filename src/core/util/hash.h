// splitmix64's finaliser: a counter-based 64-bit hash, the root of every seeded stream on the host (initial weights,
// synthetic data). The CUDA initialiser in kernels/cuda/elementwise.cu repeats it bit for bit.
#pragma once

#include <cstdint>

namespace lins {

inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace lins
