// The model presets and the FLOPs-per-token formula as data, for `lins schema` (output_schemas_json): programs that
// need a preset's shape or the mfu column's FLOPs (the Python packages, the figures) read them from there instead of
// keeping copies of core/model/model_spec.*.
#pragma once

#include "core/util/json.h"

namespace lins {

// {"tiny": {"hidden", "layers", "heads", "ffn", "vocab", "params"}, ...}: every preset of make_model_preset, in the
// order of model_preset_names.
Json model_presets_json();

// ModelSpec::flops_per_token and causal_flops_per_token as sums of monomials (flops_per_token_terms):
// {"convention", "symbols": {"L": "layers", ...}, "terms": [{"coefficient", "powers": {"L": 1, "h": 2}}, ...],
//  "causal": {"convention", "terms"}}. A symbol names a field of a model above, or "seq" (the step CSV's column).
Json flops_per_token_json();

}  // namespace lins
