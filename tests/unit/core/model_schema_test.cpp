// `lins schema`'s models and flops_per_token (core/output/model_schema.h): every preset as make_model_preset builds it,
// and the formula's terms, evaluated the way a reader of the JSON evaluates them, equal to ModelSpec::flops_per_token
// and causal_flops_per_token.
#include "core/output/model_schema.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "core/model/model_spec.h"
#include "core/output/results_schema.h"

namespace lins {
namespace {

// The printed schema, parsed back: what the Python packages read.
Json printed_schema() { return Json::parse(output_schemas_json()); }

// A term list as the JSON gives it, evaluated for one model and sequence length: the sum over the terms of the
// coefficient times each symbol's value (looked up through "symbols") to its power.
double evaluate(const Json& formula, const Json& terms, const Json& model, int seq) {
  double total = 0;
  for (const Json& term : terms) {
    double product = term.at("coefficient").get<double>();
    for (const auto& [symbol, power] : term.at("powers").items()) {
      const std::string field = formula.at("symbols").at(symbol).get<std::string>();
      const double value = field == "seq" ? double(seq) : model.at(field).get<double>();
      product *= std::pow(value, power.get<int>());
    }
    total += product;
  }
  return total;
}

TEST(ModelSchema, ListsEveryPresetWithItsShape) {
  const Json models = printed_schema().at("models");
  ASSERT_EQ(models.size(), model_preset_names().size());
  std::size_t i = 0;
  for (const auto& [name, m] : models.items()) {
    EXPECT_EQ(name, model_preset_names()[i++]);  // in the binary's order
    auto spec = make_model_preset(name);
    ASSERT_TRUE(spec) << spec.error();
    EXPECT_EQ(m.at("hidden").get<int>(), spec->dims.hidden) << name;
    EXPECT_EQ(m.at("layers").get<int>(), spec->dims.layers) << name;
    EXPECT_EQ(m.at("heads").get<int>(), spec->dims.heads) << name;
    EXPECT_EQ(m.at("ffn").get<int>(), spec->dims.ffn) << name;
    EXPECT_EQ(m.at("vocab").get<int>(), spec->dims.vocab) << name;
    EXPECT_EQ(m.at("params").get<int64_t>(), spec->param_count()) << name;
  }
  EXPECT_EQ(models.at("llama-7b").at("params").get<int64_t>(), 6'738'415'616);
}

TEST(ModelSchema, FlopsTermsEvaluateToTheModelsFormula) {
  const Json schema = printed_schema();
  const Json& flops = schema.at("flops_per_token");
  for (const auto& [name, m] : schema.at("models").items()) {
    auto spec = make_model_preset(name);
    ASSERT_TRUE(spec) << spec.error();
    for (int seq : {1, 7, 128, 2048, 4096, 32768}) {
      const double full = spec->flops_per_token(seq), causal = spec->causal_flops_per_token(seq);
      // The closed form and the sum of terms round differently; both are within a few ulps of the exact value.
      EXPECT_NEAR(evaluate(flops, flops.at("terms"), m, seq), full, 1e-12 * full) << name << " seq " << seq;
      EXPECT_NEAR(evaluate(flops, flops.at("causal").at("terms"), m, seq), causal, 1e-12 * causal)
          << name << " seq " << seq;
    }
  }
}

TEST(ModelSchema, FlopsTermsAreTheMegatronMonomials) {
  // 72 L h^2 + 12 L h s + 6 h V, and the causal 6 L h s, as a reader of the JSON sees them.
  const Json flops = printed_schema().at("flops_per_token");
  EXPECT_EQ(flops.at("terms"), Json::parse(R"([{"coefficient": 72, "powers": {"L": 1, "h": 2}},
                                               {"coefficient": 12, "powers": {"L": 1, "h": 1, "s": 1}},
                                               {"coefficient": 6, "powers": {"h": 1, "V": 1}}])"));
  EXPECT_EQ(flops.at("causal").at("terms").at(1),
            Json::parse(R"({"coefficient": 6, "powers": {"L": 1, "h": 1, "s": 1}})"));
  EXPECT_EQ(flops.at("symbols"), Json::parse(R"({"L": "layers", "h": "hidden", "s": "seq", "V": "vocab"})"));
}

}  // namespace
}  // namespace lins
