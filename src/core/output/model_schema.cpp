// The model presets and the FLOPs formula as JSON; see model_schema.h.
#include "core/output/model_schema.h"

#include <cstdio>
#include <cstdlib>

#include "core/model/model_spec.h"

namespace lins {

Json model_presets_json() {
  Json out = Json::object();
  for (const std::string& name : model_preset_names()) {
    auto m = make_model_preset(name);
    if (!m) {  // every listed name is a preset; a mismatch is a programming error
      std::fprintf(stderr, "lins: internal error: model preset '%s': %s\n", name.c_str(), m.error().c_str());
      std::abort();
    }
    const ModelDims& d = m->dims;
    out[name] = {{"hidden", d.hidden}, {"layers", d.layers}, {"heads", d.heads},
                 {"ffn", d.ffn},       {"vocab", d.vocab},   {"params", m->param_count()}};
  }
  return out;
}

namespace {
Json terms_json(bool causal) {
  Json terms = Json::array();
  for (const FlopsTerm& t : flops_per_token_terms(causal)) {
    Json powers = Json::object();
    // Only the symbols the term holds, in the order the formula is written in (L, h, s, V).
    if (t.layers) powers["L"] = t.layers;
    if (t.hidden) powers["h"] = t.hidden;
    if (t.seq) powers["s"] = t.seq;
    if (t.vocab) powers["V"] = t.vocab;
    terms.push_back({{"coefficient", t.coefficient}, {"powers", powers}});
  }
  return terms;
}
}  // namespace

Json flops_per_token_json() {
  return {
      {"convention",
       "Megatron-LM: forward and backward FLOPs per token, 72 L h^2 (1 + s/(6h) + V/(12 L h)) = the sum of the terms "
       "(coefficient times each symbol to its power); attention is not halved for the causal mask and recomputation "
       "is not counted; the mfu column's numerator (docs/method.md)"},
      {"symbols", {{"L", "layers"}, {"h", "hidden"}, {"s", "seq"}, {"V", "vocab"}}},
      {"terms", terms_json(false)},
      {"causal",
       {{"convention",
         "the same with causal attention's FLOPs: the score and value products touch half the matrix, "
         "72 L h^2 (1 + s/(12h) + V/(12 L h)); the mfu_causal column's numerator"},
        {"terms", terms_json(true)}}},
  };
}

}  // namespace lins
