// The layout checks that the CPU (kernels/quantize.h) and CUDA (kernels/cuda/quantize_cuda.h) ZeRO++ quantizers share:
// each returns "" when the arguments are valid, else what is wrong. Inline and C++17, so the CUDA library (built as
// C++17, not linked with the CPU kernels) uses the very same checks.
#pragma once

#include <cstdint>
#include <string>

namespace lins::kernels::quant {

// n values in `groups` blocks of n / groups, b-bit (int4 blocks need an even size: two values a byte).
inline std::string block_layout_error(int64_t n, int64_t groups, int bits) {
  if (groups <= 0 || n <= 0) return "n and groups must be positive";
  if (n % groups != 0)
    return "n (" + std::to_string(n) + ") is not a multiple of groups (" + std::to_string(groups) + ")";
  if (bits == 4 && (n / groups) % 2 != 0)
    return "int4 needs an even group size (two values a byte), got " + std::to_string(n / groups);
  return "";
}
// As block_layout_error for int4, and every block inside one of the W = nodes * gpus_per_node slices.
inline std::string swizzle_layout_error(int64_t n, int64_t groups, int nodes, int gpus_per_node) {
  if (nodes <= 0 || gpus_per_node <= 0) return "nodes and gpus_per_node must be positive";
  const std::string block = block_layout_error(n, groups, 4);
  if (!block.empty()) return block;
  const int64_t world = static_cast<int64_t>(nodes) * gpus_per_node;
  if (groups % world != 0)
    return "groups (" + std::to_string(groups) + ") is not a multiple of the world size (" + std::to_string(world) +
           "): a block would straddle two ranks' slices";
  return "";
}
// `peers` int4 tensors of elems_per_peer values, each in groups_per_peer blocks.
inline std::string reduction_layout_error(int64_t elems_per_peer, int64_t groups_per_peer, int peers) {
  if (peers <= 0) return "peers must be positive";
  return block_layout_error(elems_per_peer, groups_per_peer, 4);
}

}  // namespace lins::kernels::quant
