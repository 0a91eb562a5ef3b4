// A LLaMA-style decoder as a list of named tensors grouped into modules, the unit of parameter gathering:
// embed | per layer: attn (attention_norm, wq, wk, wv, wo), mlp (ffn_norm, w1 gate, w3 up, w2 down) | head
// (norm, output). Tensor names follow Meta's LLaMA checkpoints; tensors are found by name, never by index.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/util/names.h"
#include "core/util/result.h"

namespace lins {

// Activation recomputation (docs/method.md, "Activation recomputation"), from least to most memory saved:
//   none       every activation a module's backward reads is kept from its forward;
//   selective  Megatron-LM's --recompute-granularity selective: the attention core (softmax(QK^T)V) is recomputed in
//              backward from the q, k, v it keeps; lins's core is fused, so what is dropped is its output o and its
//              logsumexp, and what is re-run is one attention-core forward per layer;
//   full       only each layer module's input is kept; its whole forward is re-run inside its backward.
enum class Recompute { none, selective, full };
inline constexpr NameTable<Recompute, 3> kRecomputeNames{
    "recompute mode",
    {{
        {Recompute::none, "none", "off", "every activation kept for backward"},
        {Recompute::selective, "selective", "",
         "the attention core's output and logsumexp dropped and recomputed from q, k, v in backward (Megatron-LM's "
         "selective)"},
        {Recompute::full, "full", "on", "only each layer module's input kept; its forward re-run in backward"},
    }}};
static_assert(kRecomputeNames.complete(Recompute::full));
inline const char* recompute_name(Recompute r) { return kRecomputeNames.name(r); }
// The `recompute` column of the step and plan CSVs: "0" none and "1" full, as the column has always read (a flag of
// full recomputation), and "selective" for selective (docs/results-schema.md).
inline const char* recompute_column(Recompute r) {
  return r == Recompute::none ? "0" : r == Recompute::full ? "1" : kRecomputeNames.name(r);
}

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
  // The FLOPs per token recomputation adds in backward, beyond flops_per_token (which never counts it): full re-runs
  // every layer's forward, 24 L h^2 + 4 L h s (a third of flops_per_token's layer terms, 72 L h^2 + 12 L h s);
  // selective re-runs the attention core's forward alone, the score and value products, 4 L h s (a third of the
  // 12 L h s term); none adds nothing. The head is never recomputed.
  double recompute_flops_per_token(int seq, Recompute r) const;
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
