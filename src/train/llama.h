// The LLaMA-style decoder of a ModelSpec, module by module, on flat per-module parameter buffers (a module's
// gathered buffer holds its tensors in ModelSpec order; tensors are found by name). Real forward and backward:
//   embed: x = E[ids]
//   attn:  x += wo(attention(rope(wq n), rope(wk n), wv n)),  n = rmsnorm(x) * attention_norm
//   mlp:   x += w2(silu(w1 n) * w3 n),                          n = rmsnorm(x) * ffn_norm
//   head:  loss = cross_entropy(output(rmsnorm(x) * norm), targets)
// The executor decides where each module's parameters come from (local shard or gathered buffer) and where its
// gradients go; this class only computes. Activations of one micro-batch live here between forward and backward.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/model/model_spec.h"
#include "core/util/result.h"
#include "train/backend.h"

namespace lins {

struct ModelOptions {
  int seq = 0;               // tokens per sequence
  int micro_batch_size = 1;  // sequences per micro-batch
  // full: keep only each layer module's input and recompute its intermediates in backward; selective: drop the
  // attention core's output o and logsumexp after forward and recompute them from the kept q, k, v in backward.
  Recompute recompute = Recompute::none;
  float norm_eps = 1e-5f;
  float rope_theta = 10000.0f;
  float init_std = 0.02f;  // linear and embedding weights; wo and w2 use init_std / sqrt(2 L)
};

// Where a tensor sits inside its module's flat buffer.
struct TensorSlot {
  int tensor = -1;  // index into ModelSpec::tensors
  int64_t offset = 0;
  int64_t elems = 0;
};

class LlamaModel {
 public:
  static Result<LlamaModel> create(const ModelSpec& spec, ComputeBackend& backend, const ModelOptions& options);
  LlamaModel(LlamaModel&&) noexcept;
  LlamaModel& operator=(LlamaModel&&) noexcept;
  ~LlamaModel();

  const ModelSpec& spec() const { return *spec_; }
  const ModelOptions& options() const { return options_; }
  int64_t tokens() const { return int64_t(options_.seq) * options_.micro_batch_size; }  // T per micro-batch

  // The slot of tensor `name` inside its module, found by name (nullptr when the module has no such tensor).
  const TensorSlot* slot(int module, const std::string& name) const;

  // Initial values of elements [first, first + n) of module `module`'s flat buffer (padding beyond the module's
  // tensors is zero), written to dst (device). Depends only on (seed, tensor name, element index).
  void init_module_range(int module, int64_t first, int64_t n, float* dst, uint64_t seed) const;

  // Starts a micro-batch: ids and targets are T host integers each; grad_scale multiplies dloss/dlogits (1 / global
  // tokens, so every strategy sums the same gradient). Allocates the activations.
  Status begin_micro_batch(const int32_t* host_ids, const int32_t* host_targets, float grad_scale);
  // Forward of one module with its full flat parameters in the backend's compute dtype (device, the module's padded
  // buffer or longer).
  Status forward(int module, const void* params);
  // Backward of one module: accumulates into grads (the module's flat buffer, fp32 whatever the compute dtype) and
  // propagates the activation gradient. Must run in reverse forward order after every forward of the micro-batch.
  Status backward(int module, const void* params, float* grads);
  // Frees the micro-batch's activations. Its summed token loss stays on the device (one slot per micro-batch): reading
  // it per micro-batch would stop the host from queueing ahead of the device.
  void end_micro_batch();
  // The summed token loss of the micro-batches ended since the last call, added on the host in micro-batch order (as
  // the per-micro-batch sums always were); one download, at the end of a step.
  double take_loss_sum();

 private:
  LlamaModel() = default;
  struct Saved;  // per module activations
  Status forward_attn(int module, const void* p, Saved& s, bool keep);
  Status forward_mlp(int module, const void* p, Saved& s, bool keep);
  Status backward_attn(int module, const void* p, float* g, Saved& s);
  Status backward_mlp(int module, const void* p, float* g, Saved& s);
  // Selective recomputation: the attention core's o and logsumexp again from the q, k, v kept in s.
  Status recompute_attention_core(Saved& s);
  // Activations and scratch are written before they are read: no zero-fill.
  Result<DeviceBuffer> alloc(int64_t elems, MemCategory c, int elem_bytes);
  // The tensor at `s` of a module's parameters (compute dtype).
  const void* P(const void* p, const TensorSlot* s) const { return static_cast<const char*>(p) + s->offset * ab_; }

  const ModelSpec* spec_ = nullptr;
  ComputeBackend* be_ = nullptr;
  ModelOptions options_;
  std::vector<std::vector<TensorSlot>> slots_;  // per module, in module tensor order
  std::vector<std::string> slot_names_;         // short names per tensor index ("attention.wq.weight")
  float grad_scale_ = 1.0f;
  DType cd_ = DType::fp32;  // the backend's compute dtype: activations and the parameters the kernels read
  int64_t ab_ = 4;          // its bytes per element

  // Micro-batch state (device).
  DeviceBuffer ids_, targets_;  // [T] int32
  DeviceBuffer loss_slots_;     // [kLossSlots] fp64: micro-batch i of the step in slot i % kLossSlots
  static constexpr int kLossSlots = 64;
  int loss_pending_ = 0;   // slots written since the last download
  double loss_host_ = 0;   // sums downloaded when the slots filled up (steps of more than kLossSlots micro-batches)
  void download_losses();
  void* loss_slot() { return static_cast<char*>(loss_slots_.data()) + 8 * loss_pending_; }  // this micro-batch's
  DeviceBuffer dx_;             // [T, H] gradient of the residual stream at the current backward position
  std::vector<std::unique_ptr<Saved>> saved_;  // per module
};

}  // namespace lins
