// DeepSpeed ZeRO++'s quantized communication, the rules that decide it (no arithmetic: kernels/quantize.h quantizes):
// how many blocks a buffer is quantized in, which tensors take the quantized path, and the bytes each collective
// moves. The schedule, the cost and memory models and the kernels all read these. docs/engines.md ("ZeRO++ quantized
// communication") cites each rule in DeepSpeed's source.
//   qwZ (zero_quantized_weights): every parameter all-gather sends int8 values in blocks with one fp32 scale each.
//   qgZ (zero_quantized_gradients): the gradient reduce-scatter becomes an int4 all-to-all inside the node, a
//   reduction, an int4 all-to-all across nodes and a reduction.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace lins {

struct ModelSpec;

// --- qwZ: int8 weights for the quantized all-gather -----------------------------------------------------------------
// DeepSpeed's CUDAQuantizer picks the block count for the S elements each rank quantizes (its partition of the
// parameter, or the concatenated partitions of a coalesced bucket): g = ceil(S / 8000), then g += 1 until S % (8g)
// == 0 (stopping at g = S), then g doubles while S % (16g) == 0 and S / g > 8000, which never happens after the first
// loop (S / g <= 8000 already). It asserts S % (8g) == 0, S / g < 16000 and S > g. So a size is refused exactly when
// S % 8 != 0 (or S <= 0).
constexpr int64_t kQwzTargetGroupSize = 8000;
int64_t qwz_group_count(int64_t elems);  // 0 when DeepSpeed's asserts refuse the size
std::string qwz_refusal(int64_t elems);  // "" when accepted, else which assertion fails and why
// The first loop of that rule with another target block size: the smallest g >= ceil(S / target) with S % (8g) == 0;
// 0 when S % 8 != 0 or S <= 0.
int64_t flat_group_count(int64_t elems, int64_t target_group_size);

// --- qgZ: int4 gradients, all-to-all inside the node, reduce, all-to-all across nodes, reduce ----------------------
// W = nodes * gpus_per_node ranks. DeepSpeed quantizes a gradient of shape [d0, d1, ...] with M elements in
// G = max(d0, d1, W) blocks of E = M / G elements.
int64_t qgz_group_count(int64_t d0, int64_t d1, int world);
constexpr int64_t kQgzMaxGroupSize = 40960;  // DeepSpeed's swizzled quantize launches nothing for larger blocks

// Whether DeepSpeed takes the quantized path for a tensor of this shape: it reduce-scatters 1-D tensors and tensors
// with M % (2W) != 0 unquantized (averaged over W), and all tensors when there is one node.
bool qgz_deepspeed_quantizes(std::span<const int64_t> shape, int nodes, int gpus_per_node);
// "" when lins takes the quantized path for a tensor, else why it reduce-scatters unquantized instead. lins quantizes
// exactly the shapes DeepSpeed quantizes that its kernels handle: beyond DeepSpeed's checks it requires G % W == 0
// (every block inside one rank's slice; DeepSpeed's swizzle leaves the remainder unquantized), E % 8 == 0 (DeepSpeed's
// kernels move 8 values at a time and would mix blocks) and E <= 40960 (its swizzled quantize launches nothing
// above). On the other shapes DeepSpeed's result is undefined, so lins falls back as DeepSpeed does for its own.
std::string qgz_refusal(std::span<const int64_t> shape, int nodes, int gpus_per_node);

// lins shards a module's parameters as one flat buffer (layout.h), so qgZ runs on each module's flat gradient, padded
// to W slices of S elements, rather than on each tensor: each slice is quantized in g blocks, g = flat_group_count(S,
// E_t) with E_t the block size DeepSpeed gives the module's largest 2-D tensor (M_t / max(d0, d1, W), at most
// kQgzMaxGroupSize). The module goes the plain way (a reduce-scatter) where DeepSpeed sends all its tensors the plain
// way (one node; no 2-D tensor DeepSpeed would quantize) or where no such g exists (S % 8 != 0).
struct QgzModuleLayout {
  int64_t slice_elems = 0;      // S: each rank's slice of the padded module
  int64_t groups_per_rank = 0;  // g (0: the plain way)
  std::string refusal;          // why the plain way ("" when quantized)
  bool quantized() const { return groups_per_rank > 0; }
  int64_t group_size() const { return quantized() ? slice_elems / groups_per_rank : 0; }
};
QgzModuleLayout qgz_module_layout(const ModelSpec& model, int module, int64_t padded_elems, int nodes,
                                  int gpus_per_node);

// --- Bytes per rank -------------------------------------------------------------------------------------------------
// What one rank puts into each quantized collective: its payload buffer and its fp32 scales buffer (two collectives
// each in DeepSpeed). qwZ all-gather: S int8 values and g scales (a rank receives W times both). qgZ intra-node
// all-to-all: M / 2 bytes and G scales, of which (R-1)/R leave the GPU; inter-node all-to-all: M / (2R) bytes and G / R
// scales, of which (N-1)/N leave the node.
struct QuantizedBytes {
  int64_t payload = 0;
  int64_t scales = 0;
  int64_t total() const { return payload + scales; }
};
QuantizedBytes qwz_all_gather_bytes(int64_t partition_elems);  // zero when qwz_group_count refuses the size
QuantizedBytes qgz_intra_all_to_all_bytes(int64_t elems, int64_t groups);
QuantizedBytes qgz_inter_all_to_all_bytes(int64_t elems, int64_t groups, int gpus_per_node);

}  // namespace lins
