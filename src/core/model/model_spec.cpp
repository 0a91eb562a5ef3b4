// LLaMA-style model specs; see model_spec.h.
#include "core/model/model_spec.h"

#include <limits>

namespace lins {

int64_t ModelSpec::param_count() const {
  int64_t n = 0;
  for (const auto& t : tensors) n += t.elems;
  return n;
}

const TensorSpec* ModelSpec::find_tensor(std::string_view name) const {
  for (const auto& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

const ModuleSpec* ModelSpec::find_module(std::string_view name) const {
  for (const auto& m : modules)
    if (m.name == name) return &m;
  return nullptr;
}

double ModelSpec::flops_per_token(int seq) const {
  const double L = dims.layers, h = dims.hidden, V = dims.vocab, s = seq;
  return 72.0 * L * h * h * (1.0 + s / (6.0 * h) + V / (12.0 * L * h));
}

double ModelSpec::causal_flops_per_token(int seq) const {
  const double L = dims.layers, h = dims.hidden, V = dims.vocab, s = seq;
  return 72.0 * L * h * h * (1.0 + s / (12.0 * h) + V / (12.0 * L * h));
}

double ModelSpec::recompute_flops_per_token(int seq, Recompute r) const {
  const double L = dims.layers, h = dims.hidden, s = seq;
  switch (r) {
    case Recompute::none:
      return 0.0;
    case Recompute::selective:
      return 4.0 * L * h * s;
    case Recompute::full:
      return 24.0 * L * h * h + 4.0 * L * h * s;
  }
  return 0.0;
}

// 72 L h^2 (1 + s/(6h) + V/(12 L h)) = 72 L h^2 + 12 L h s + 6 h V; the causal s/(12h) gives 6 L h s instead.
const std::vector<FlopsTerm>& flops_per_token_terms(bool causal) {
  static const std::vector<FlopsTerm> full = {
      {.coefficient = 72, .layers = 1, .hidden = 2},
      {.coefficient = 12, .layers = 1, .hidden = 1, .seq = 1},
      {.coefficient = 6, .hidden = 1, .vocab = 1},
  };
  static const std::vector<FlopsTerm> causal_terms = {
      {.coefficient = 72, .layers = 1, .hidden = 2},
      {.coefficient = 6, .layers = 1, .hidden = 1, .seq = 1},
      {.coefficient = 6, .hidden = 1, .vocab = 1},
  };
  return causal ? causal_terms : full;
}

Result<ModelSpec> make_model(const ModelDims& d, std::string name) {
  auto positive = [](int v) { return v >= 1; };
  if (!positive(d.hidden) || !positive(d.layers) || !positive(d.heads) || !positive(d.ffn) || !positive(d.vocab))
    return make_error(
        "model: hidden, layers, heads, ffn and vocab must all be at least 1 (got hidden=" + std::to_string(d.hidden) +
        " layers=" + std::to_string(d.layers) + " heads=" + std::to_string(d.heads) + " ffn=" + std::to_string(d.ffn) +
        " vocab=" + std::to_string(d.vocab) + ")");
  // Bounds far beyond any real model keep a mistyped flag from building hundreds of millions of tensors.
  struct Bound {
    const char* name;
    int value, max;
  };
  for (const Bound& b :
       {Bound{"layers", d.layers, 10'000}, Bound{"hidden", d.hidden, 1 << 20}, Bound{"heads", d.heads, 1 << 16},
        Bound{"ffn", d.ffn, 1 << 22}, Bound{"vocab", d.vocab, 1 << 24}})
    if (b.value > b.max)
      return make_error("model: " + std::string(b.name) + " " + std::to_string(b.value) +
                        " is beyond what lins models (at most " + std::to_string(b.max) + ")");
  if (d.hidden % d.heads != 0)
    return make_error("model: hidden " + std::to_string(d.hidden) + " must be divisible by heads " +
                      std::to_string(d.heads));
  // Parameter count in long double first, so absurd shapes are rejected instead of overflowing.
  const long double h = d.hidden, f = d.ffn, V = d.vocab, L = d.layers;
  const long double phi = L * (4 * h * h + 3 * h * f + 2 * h) + 2 * V * h + h;
  if (phi > static_cast<long double>(std::numeric_limits<int64_t>::max() / 16))
    return make_error("model: " + std::to_string(static_cast<double>(phi)) +
                      " parameters is too many to index (at most 5.7e17)");

  ModelSpec m;
  m.name = std::move(name);
  m.dims = d;
  const int64_t H = d.hidden, F = d.ffn;
  auto add_module = [&](std::string mname, std::string kind, int layer) {
    m.modules.push_back(ModuleSpec{std::move(mname), std::move(kind), layer, {}, 0});
  };
  auto add_tensor = [&](std::string tname, std::vector<int64_t> shape, int layer) {
    TensorSpec t;
    t.name = std::move(tname);
    t.shape = std::move(shape);
    t.layer = layer;
    t.module = static_cast<int>(m.modules.size()) - 1;
    t.elems = 1;
    for (auto s : t.shape) t.elems *= s;
    m.modules.back().tensors.push_back(static_cast<int>(m.tensors.size()));
    m.modules.back().elems += t.elems;
    m.tensors.push_back(std::move(t));
  };
  add_module("embed", "embed", -1);
  add_tensor("tok_embeddings.weight", {d.vocab, H}, -1);
  for (int l = 0; l < d.layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    add_module(p + "attn", "attn", l);
    add_tensor(p + "attention_norm.weight", {H}, l);
    add_tensor(p + "attention.wq.weight", {H, H}, l);
    add_tensor(p + "attention.wk.weight", {H, H}, l);
    add_tensor(p + "attention.wv.weight", {H, H}, l);
    add_tensor(p + "attention.wo.weight", {H, H}, l);
    add_module(p + "mlp", "mlp", l);
    add_tensor(p + "ffn_norm.weight", {H}, l);
    add_tensor(p + "feed_forward.w1.weight", {F, H}, l);  // gate
    add_tensor(p + "feed_forward.w3.weight", {F, H}, l);  // up
    add_tensor(p + "feed_forward.w2.weight", {H, F}, l);  // down
  }
  add_module("head", "head", d.layers);
  add_tensor("norm.weight", {H}, d.layers);
  add_tensor("output.weight", {d.vocab, H}, d.layers);
  return m;
}

std::vector<std::string> model_preset_names() { return {"tiny", "small", "llama-7b", "llama-13b", "llama-30b"}; }

Result<ModelSpec> make_model_preset(std::string_view preset) {
  if (preset == "tiny") return make_model({16, 2, 2, 32, 24}, "tiny");
  if (preset == "small") return make_model({128, 4, 4, 352, 512}, "small");
  if (preset == "llama-7b") return make_model({4096, 32, 32, 11008, 32000}, "llama-7b");
  if (preset == "llama-13b") return make_model({5120, 40, 40, 13824, 32000}, "llama-13b");
  if (preset == "llama-30b") return make_model({6656, 60, 52, 17920, 32000}, "llama-30b");
  std::string names;
  for (const auto& n : model_preset_names()) names += (names.empty() ? "" : ", ") + n;
  return make_error("unknown model '" + std::string(preset) + "'; valid models: " + names +
                    " (or give --hidden, --layers, --heads, --ffn, --vocab)");
}

}  // namespace lins
