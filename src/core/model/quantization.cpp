// The rules of DeepSpeed ZeRO++'s quantized communication; see quantization.h.
#include "core/model/quantization.h"

#include <algorithm>

#include "core/model/model_spec.h"

namespace lins {

// --- qwZ block count (partition_parameters.py CUDAQuantizer.quantize) ------------------------------------------------

namespace {
// DeepSpeed's loops. The first one (g += 1 until S % (8g) == 0, stopping at g = S) is found through the divisors of
// S / 8 instead of one step at a time, which for S = 8p, p prime, would take S / 8 steps; the result is the same: the
// smallest g >= ceil(S / 8000) dividing S / 8, or S when there is none (S % 8 != 0). The doubling loop is kept as
// written, although it cannot run after the first (S / g <= 8000 already).
// The first loop alone, for a target block size.
int64_t first_loop(int64_t elems, int64_t target) {
  int64_t groups = (elems + target - 1) / target;
  if (groups < elems) {
    int64_t found = elems;
    if (elems % 8 == 0) {
      const int64_t k = elems / 8;  // S % (8g) == 0 exactly when g divides S / 8
      for (int64_t d = 1; d <= k / d; ++d) {
        if (k % d != 0) continue;
        for (const int64_t c : {d, k / d})
          if (c >= groups && c < found) found = c;
      }
    }
    groups = found;
  }
  return groups;
}

int64_t qwz_loops(int64_t elems) {
  int64_t groups = first_loop(elems, kQwzTargetGroupSize);
  while (elems % (8 * groups * 2) == 0 && elems > kQwzTargetGroupSize * groups) groups *= 2;
  return groups;
}
}  // namespace

std::string qwz_refusal(int64_t elems) {
  if (elems <= 0)
    return "an empty buffer (" + std::to_string(elems) +
           " elements): DeepSpeed's block search starts at 0 blocks and divides by zero";
  const int64_t g = qwz_loops(elems);
  const std::string size = std::to_string(elems);
  if (elems % (8 * g) != 0)
    return size + " elements: no block count g with " + size + " % (8 g) == 0 (the size is not a multiple of 8)";
  if (elems >= 16000 * g) return size + " / " + std::to_string(g) + " blocks is not below 16000";
  if (elems <= g) return size + " elements are not more than the " + std::to_string(g) + " blocks";
  return "";
}

int64_t qwz_group_count(int64_t elems) { return qwz_refusal(elems).empty() ? qwz_loops(elems) : 0; }

int64_t flat_group_count(int64_t elems, int64_t target_group_size) {
  if (elems <= 0 || elems % 8 != 0 || target_group_size <= 0) return 0;
  return first_loop(elems, target_group_size);
}

// --- qgZ ------------------------------------------------------------------------------------------------------------

int64_t qgz_group_count(int64_t d0, int64_t d1, int world) { return std::max({d0, d1, static_cast<int64_t>(world)}); }

namespace {
int64_t element_count(std::span<const int64_t> shape) {
  int64_t m = 1;
  for (int64_t d : shape) m *= d;
  return m;
}
}  // namespace

bool qgz_deepspeed_quantizes(std::span<const int64_t> shape, int nodes, int gpus_per_node) {
  const int64_t world = static_cast<int64_t>(nodes) * gpus_per_node;
  if (nodes <= 1) return false;                               // stage3.py: num_nodes > 1
  if (shape.size() == 1) return false;                        // tensor.dim() == 1
  if (element_count(shape) % (2 * world) != 0) return false;  // numel % (2 W) != 0 (a 0-d tensor lands here)
  return true;
}

std::string qgz_refusal(std::span<const int64_t> shape, int nodes, int gpus_per_node) {
  if (nodes <= 0 || gpus_per_node <= 0) return "nodes and gpus_per_node must be positive";
  const int64_t world = static_cast<int64_t>(nodes) * gpus_per_node;
  const int64_t m = element_count(shape);
  if (nodes == 1) return "one node: DeepSpeed reduce-scatters unquantized (stage3.py needs num_nodes > 1)";
  if (shape.size() == 1) return "a 1-D tensor: DeepSpeed reduce-scatters it unquantized";
  if (m % (2 * world) != 0)
    return std::to_string(m) + " elements are not a multiple of 2W = " + std::to_string(2 * world) +
           ": DeepSpeed reduce-scatters unquantized";
  if (m == 0) return "an empty tensor";
  const int64_t groups = qgz_group_count(shape[0], shape[1], static_cast<int>(world));
  if (m % groups != 0)
    return std::to_string(m) + " elements are not a multiple of G = " + std::to_string(groups) +
           " blocks (lins: DeepSpeed would leave the remainder unquantized)";
  if (groups % world != 0)
    return "G = " + std::to_string(groups) + " blocks are not a multiple of W = " + std::to_string(world) +
           " (lins: DeepSpeed's swizzle would leave blocks unquantized)";
  const int64_t size = m / groups;
  if (size % 8 != 0)
    return "block size E = " + std::to_string(size) +
           " is not a multiple of 8 (lins: DeepSpeed's kernels move 8 values at a time and would mix blocks)";
  if (size > kQgzMaxGroupSize)
    return "block size E = " + std::to_string(size) + " is above " + std::to_string(kQgzMaxGroupSize) +
           " (lins: DeepSpeed's swizzled quantize launches no kernel)";
  return "";
}

QgzModuleLayout qgz_module_layout(const ModelSpec& model, int module, int64_t padded_elems, int nodes,
                                  int gpus_per_node) {
  QgzModuleLayout out;
  const int64_t world = static_cast<int64_t>(nodes) * gpus_per_node;
  if (world <= 0 || padded_elems % world != 0) {
    out.refusal = "the padded module does not split into W slices";
    return out;
  }
  out.slice_elems = padded_elems / world;
  // The block size DeepSpeed would give the module's largest tensor that it quantizes.
  int64_t largest = 0, target = 0;
  std::string why = "no 2-D tensor";
  for (int t : model.modules[static_cast<std::size_t>(module)].tensors) {
    const TensorSpec& ts = model.tensors[static_cast<std::size_t>(t)];
    if (!qgz_deepspeed_quantizes(ts.shape, nodes, gpus_per_node)) {
      if (largest == 0) why = qgz_refusal(ts.shape, nodes, gpus_per_node);
      continue;
    }
    if (ts.elems <= largest) continue;
    largest = ts.elems;
    const int64_t groups = qgz_group_count(ts.shape[0], ts.shape[1], static_cast<int>(world));
    target = std::clamp<int64_t>(ts.elems / groups, 8, kQgzMaxGroupSize);
  }
  if (largest == 0) {
    out.refusal = "DeepSpeed would reduce-scatter every tensor of it unquantized (" + why + ")";
    return out;
  }
  out.groups_per_rank = flat_group_count(out.slice_elems, target);
  if (out.groups_per_rank == 0)
    out.refusal = "its slice of " + std::to_string(out.slice_elems) + " elements is not a multiple of 8";
  return out;
}

// --- Bytes --------------------------------------------------------------------------------------------------------

QuantizedBytes qwz_all_gather_bytes(int64_t partition_elems) {
  const int64_t groups = qwz_group_count(partition_elems);
  if (groups == 0) return {};
  return {partition_elems, 4 * groups};
}

QuantizedBytes qgz_intra_all_to_all_bytes(int64_t elems, int64_t groups) { return {elems / 2, 4 * groups}; }

QuantizedBytes qgz_inter_all_to_all_bytes(int64_t elems, int64_t groups, int gpus_per_node) {
  return {elems / (2 * gpus_per_node), 4 * groups / gpus_per_node};
}

}  // namespace lins
