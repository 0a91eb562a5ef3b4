// A LLaMA-style decoder as a list of named tensors grouped into modules, the unit of parameter gathering:
// embed | per layer: attn (attention_norm, wq, wk, wv, wo), mlp (ffn_norm, w1 gate, w3 up, w2 down) | head
// (norm, output). Tensor names follow Meta's LLaMA checkpoints; tensors are found by name, never by index.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/util/result.h"

namespace lins {

struct ModelDims {
  int hidden = 0;  // h
  int layers = 0;  // L
  int heads = 0;
  int ffn = 0;    // SwiGLU inner size
  int vocab = 0;  // V
};

struct TensorSpec {
  std::string name;            // "layers.3.attention.wq.weight"
  std::vector<int64_t> shape;  // PyTorch order: Linear weights are [out, in]
  int layer = -1;              // transformer layer 0..L-1; -1 for the embedding, L for the head
  int module = -1;             // index into ModelSpec::modules
  int64_t elems = 0;
};

struct ModuleSpec {
  std::string name;          // "embed", "layers.3.attn", "layers.3.mlp", "head"
  std::string kind;          // "embed", "attn", "mlp", "head"
  int layer = -1;            // as TensorSpec::layer
  std::vector<int> tensors;  // indices into ModelSpec::tensors, in forward order
  int64_t elems = 0;         // sum of its tensors' elements (unpadded)
};

struct ModelSpec {
  std::string name;  // preset name or "custom"
  ModelDims dims;
  std::vector<TensorSpec> tensors;  // forward order
  std::vector<ModuleSpec> modules;  // forward order: embed, layers..., head

  int64_t param_count() const;  // Phi
  const TensorSpec* find_tensor(std::string_view name) const;
  const ModuleSpec* find_module(std::string_view name) const;
  // Megatron-LM FLOPs per token for forward+backward, the paper's MFU numerator (docs/method.md, "The experiments"):
  // 72*L*h^2*(1 + s/(6h) + V/(12*L*h)); causal attention is not halved and recomputation is not counted.
  double flops_per_token(int seq) const;
  // The same with causal attention's FLOPs: the score and value products of a causal mask touch half the matrix,
  // 72*L*h^2*(1 + s/(12h) + V/(12*L*h)) (about 6% less than flops_per_token for LLaMA-7B at seq 4096).
  double causal_flops_per_token(int seq) const;
};

// One monomial of a FLOPs-per-token formula: coefficient * L^layers * h^hidden * s^seq * V^vocab (the numbers are the
// powers). `lins schema` prints the two formulas above as lists of these, so that other programs evaluate the same
// formula from data instead of keeping a copy of the code.
struct FlopsTerm {
  int coefficient = 0;
  int layers = 0;  // L
  int hidden = 0;  // h
  int seq = 0;     // s
  int vocab = 0;   // V
};
// ModelSpec::flops_per_token (causal = false) or causal_flops_per_token (causal = true) multiplied out:
// 72 L h^2 + 12 L h s + 6 h V, and 72 L h^2 + 6 L h s + 6 h V. model_schema_test holds them equal to the functions.
const std::vector<FlopsTerm>& flops_per_token_terms(bool causal);

// Validates the dimensions (positive, hidden divisible by heads, parameter count fits 64 bits).
Result<ModelSpec> make_model(const ModelDims& dims, std::string name = "custom");
// Presets: tiny (tests), small (demo), llama-7b, llama-13b, llama-30b (LLaMA-1 shapes: the paper gives none;
// docs/method.md, "The experiments").
Result<ModelSpec> make_model_preset(std::string_view preset);
std::vector<std::string> model_preset_names();

}  // namespace lins
