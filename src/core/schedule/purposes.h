// The rules of each op purpose, written once: which gradients or parameter buffers an op reads, which range of the
// local buffer it covers, what it holds from its issue until it is released, and what happens at its issue and at its
// completion, in terms of the step's buffers. The executor (src/train/executor_ops.cpp) maps these terms onto the
// buffers it allocates; the memory model (memory_model.cpp) sizes and frees the same buffers at the same actions.
// Adding a purpose is one case of purpose_rule (purposes.cpp), plus a block of the executor's buffer mechanics when
// it does something no purpose did before.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/schedule/schedule.h"

namespace lins {

// What a schedule decides that some purposes' rules depend on.
struct PurposeContext {
  bool g_owned = false;          // G kept only for the owned elements (s_g > s_p: ZeRO-2, Lins with s_g > s_p)
  bool transient_grads = false;  // Schedule::transient_grads: each micro-batch's gradient lands in a transient buffer
};
PurposeContext purpose_context(const Schedule& s);

// The range of the local buffer an op covers. An op of one module (op.module >= 0) covers the module's shard; an op
// of a bucket (op.module < 0) covers what its purpose says.
enum class BucketRange {
  none,         // every op of the purpose names a module
  elems,        // op.elems elements from op.local_offset (an all-reduced bucket)
  part,         // this rank's part of a reduce-scatter's input: op.elems / group size from op.local_offset
  whole_local,  // the whole local buffer (the all-gather of every rank's updated partition)
};

// The buffer an op allocates at its issue, beyond P, G, the transient gradient and the whole-module gradients the
// backward wrote. Its elements are op.elems.
enum class HeldBuffer {
  none,                // the op works in place
  module_params,       // the module's full padded parameters, gathered; freed by the tasks that read them
                       // (TaskParams), not at the wait
  send_buffer,         // the module gradients of its range packed into one buffer; freed at the wait
  bucket_send_buffer,  // the same, only when the range covers several modules (one module's whole gradient already is
                       // the reduce-scatter's input)
  payload,             // a broadcast's packed (root) or received (others) slices, unless op.in_place; freed at the wait
};
// Whose storage dtype the held buffer is in (the executor's is one for both; the memory model's StateBytes has each).
enum class HeldState { p, g };

// What the op does when it is issued: its stream's work before the collective, and the collective.
enum class AtIssue {
  gather_shard,             // all-gathers the module's P shards into a new full-module buffer
  gather_hpz_part,          // all-gathers the parts of the module's secondary copy of P into a new full-module buffer
  reduce_scatter_grads,     // reduce-scatters the whole-module gradients of its range (packed first when several)
  all_reduce_g,             // all-reduces its range of G in place
  all_reduce_packed_grads,  // packs the module gradients of its range into a send buffer, all-reduces it there
  all_reduce_transient,     // all-reduces its range of the transient gradient in place
  all_reduce_transient_with_g,  // adds G's owned part into its range of the transient gradient, then all-reduces it
  gather_update,                // all-gathers the updated partitions in place into P (a persistent module: its buffer)
  broadcast_update,             // the root owner broadcasts its updated slices of the module's shard of P
  exchange_quantized_grads,     // qgZ: quantizes the module's whole gradient to int4 blocks in swizzled order,
                                // all-to-alls values and scales inside the node, and reduces what arrived into the
                                // node's int4 sums (held by the op after it, the exchange across nodes)
  exchange_reduced_slices,      // qgZ: all-to-alls the node's int4 sums across nodes and reduces them to this rank's
                                // slice of the module's gradient
};

// What the op's stream does once the collective is in, before compute's wait for it returns.
enum class AtCompletion {
  nothing,               // the result is where it is read: the gathered buffer, G, P
  slice_into_g,          // this rank's slice of the result is added into G
  slice_into_transient,  // this rank's slice of the result is copied into the transient gradient
  owned_added_into_g,    // the owned elements of the result are added into G
  owned_copied_into_g,   // the owned elements of the result are copied into G (they already hold G's earlier part)
  unpack_payload,        // the ranks other than the root unpack the payload into P (nothing when in place)
};

// One purpose's rules under one context.
struct PurposeRule {
  Purpose purpose = Purpose::forward_gather;
  CollKind kind = CollKind::all_gather;  // the collective every op of the purpose is
  BucketRange bucket_range = BucketRange::none;
  // Reads the whole-module gradients of the modules its range covers (the backward writes each into a buffer of its
  // own while some op of the micro-batch reads it; the wait of its last reader frees it).
  bool reads_module_grads = false;
  HeldBuffer held = HeldBuffer::none;
  HeldState held_state = HeldState::p;
  AtIssue at_issue = AtIssue::gather_shard;
  AtCompletion at_completion = AtCompletion::nothing;
  const char* summary = nullptr;  // what it does, in one line
};

// The rules of purpose `p` under context `c` (an exhaustive switch: purposes.cpp).
PurposeRule purpose_rule(Purpose p, const PurposeContext& c);

// The bytes a quantized op (CommOp::quant) holds from its issue to its wait beyond its rule's buffer, with P and G
// stored in `storage` (0 for an op that is not quantized): its values and scales to send and received, and the fp32
// copies the quantizers read and write (kernels/quantize.h works on fp32 holding fp16 values).
//   qwZ gather of S values a rank over n ranks, g blocks a rank: (S + 4g) sent, n (S + 4g) received; with storage
//     other than fp32, 4S read and 4nS written.
//   qgZ exchange inside the node (M values, G blocks): M/2 + 4G sent and received; with storage other than fp32,
//     4M read. The exchange across nodes (M/R values, G/R blocks) holds its own M/2R + 4G/R twice (the node's sums,
//     which the exchange inside the node writes, and what arrives) and the 4M/W of the rank's slice it writes.
int64_t quantization_buffer_bytes(const CommOp& op, DType storage);
// Where each array of that buffer lies, in bytes from its start (the fp32 arrays first, so 4-byte aligned), and its
// size: the one layout the memory model counts (quantization_buffer_bytes) and the executor carves into pointers.
// An array the op does not have is 0 bytes long at its offset.
struct QuantBufferLayout {
  int64_t fp32_in = 0;          // the fp32 copy the quantizer reads (storage other than fp32)
  int64_t fp32_out = 0;         // the fp32 result the dequantizer writes (qwZ with storage other than fp32; qgZ
                                // across nodes, always)
  int64_t scales = 0;           // this rank's scales (fp32)
  int64_t received_scales = 0;  // the scales the collective brings
  int64_t values = 0;           // this rank's int8 or int4 values
  int64_t received_values = 0;  // the values the collective brings
  int64_t bytes = 0;            // the whole buffer
};
QuantBufferLayout quantization_buffer_layout(const CommOp& op, DType storage);
// The bytes a quantized op's quantize and dequantize passes read and write (0 for an op that is not quantized), for
// pricing them as memory-bound kernels:
//   qwZ gather: quantize reads S values in `storage` and writes S + 4g; dequantize reads n (S + 4g), writes nS.
//   qgZ inside the node: the swizzled quantize reads M and writes M/2 + 4G; the reduction reads that and writes
//     M/2R + 4G/R. Across nodes: the reduction reads M/2R + 4G/R and adds the rank's M/W values into G.
int64_t quantization_pass_bytes(const CommOp& op, DType storage);

// A range of the local buffer, in elements.
struct LocalRange {
  int64_t offset = 0, elems = 0;
  int64_t end() const { return offset + elems; }
};
// The range of layout `L`'s local buffer op `op` (of rule `r`) covers.
LocalRange op_local_range(const CommOp& op, const ShardLayout& L, const PurposeRule& r);

// What one op holds from its issue: which buffer, how many elements, in whose dtype, and whether the tasks reading
// it release it (gathers) rather than its wait.
struct OpHold {
  HeldBuffer buffer = HeldBuffer::none;
  int64_t elems = 0;
  HeldState state = HeldState::p;
  bool until_task = false;
  bool in_place() const { return buffer == HeldBuffer::none; }
};
// `modules_read`: how many modules' whole gradients the op reads (GradientReaders::op_modules).
OpHold op_hold(const CommOp& op, const PurposeRule& r, std::size_t modules_read);

// Which ops read each module's whole gradient (expanded schedules: one copy of each op per micro-batch).
struct GradientReaders {
  std::vector<std::vector<int>> per_module;  // [micro-batch][module]: how many ops read its whole gradient
  std::vector<std::vector<int>> op_modules;  // [op]: the modules whose whole gradient it reads, local order
};
GradientReaders gradient_readers(const Schedule& s, const PurposeContext& c);

}  // namespace lins
