// The rules of ZeRO++'s quantized communication that lins plans with (core/model/quantization.h): the flat block
// count with a target size, the module layout qgZ takes on lins's flat module shards, the spelling of quantized plans,
// and the schedule's quantized ops (bytes = values + scales; qgZ's two exchanges where the reduce-scatter was).
#include "core/model/quantization.h"

#include <gtest/gtest.h>

#include "core/model/model_spec.h"
#include "core/model/plan.h"
#include "core/schedule/schedule.h"

namespace lins {
namespace {

TEST(Quantization, FlatGroupCountIsTheSmallestCountAtLeastTheTargetsThatKeepsBlocksOfEight) {
  EXPECT_EQ(flat_group_count(8000, 8000), 1);
  EXPECT_EQ(flat_group_count(16000, 8000), 2);
  EXPECT_EQ(flat_group_count(4096, 1024), 4);
  // 8 x 3 x 5 = 120 elements at a target of 50: ceil(120 / 50) = 3 blocks of 40 (a multiple of 8).
  EXPECT_EQ(flat_group_count(120, 50), 3);
  // 8 x 7 = 56 at a target of 20: 3 does not divide 7, nor 4..6; 7 blocks of 8.
  EXPECT_EQ(flat_group_count(56, 20), 7);
  EXPECT_EQ(flat_group_count(100, 50), 0);  // not a multiple of 8
  EXPECT_EQ(flat_group_count(0, 50), 0);
  // qwZ's rule is the same search at DeepSpeed's target of 8000.
  for (int64_t s : {8, 800, 8008, 64000, 123456})
    EXPECT_EQ(qwz_group_count(s), flat_group_count(s, kQwzTargetGroupSize)) << s;
}

TEST(Quantization, QgzModuleLayoutTakesTheLargestTensorsBlockSizeAndRefusesWhatDeepSpeedSendsPlain) {
  const ModelSpec model = *make_model_preset("small");
  const int attn = 1;  // layers.0.attn (embed is module 0)
  ASSERT_EQ(model.modules[attn].name, "layers.0.attn");
  const int64_t padded = model.modules[attn].elems + (-model.modules[attn].elems % 64 + 64) % 64;  // 8 x W, W = 8
  const QgzModuleLayout q = qgz_module_layout(model, attn, padded, 2, 4);
  ASSERT_TRUE(q.quantized()) << q.refusal;
  EXPECT_EQ(q.slice_elems * 8, padded);
  EXPECT_EQ(q.slice_elems % (8 * q.groups_per_rank), 0);
  // The block size is at most the largest weight's DeepSpeed block (hidden x hidden: G = max(h, h, W) = h, E = h).
  EXPECT_LE(q.group_size(), model.dims.hidden);
  // One node: DeepSpeed reduce-scatters.
  const QgzModuleLayout one = qgz_module_layout(model, attn, padded, 1, 8);
  EXPECT_FALSE(one.quantized());
  EXPECT_NE(one.refusal.find("one node"), std::string::npos) << one.refusal;
  // A slice that is no multiple of 8 has no block count.
  const QgzModuleLayout odd = qgz_module_layout(model, attn, 8 * 13, 2, 4);
  EXPECT_FALSE(odd.quantized());
  EXPECT_NE(odd.refusal.find("multiple of 8"), std::string::npos) << odd.refusal;
}

TEST(Quantization, PlansSpellQuantizationAfterZero3AndZeropp) {
  const Topology topo{4, 2};
  auto p = parse_plan("zeropp+qgz+qwz", topo);
  ASSERT_TRUE(p) << p.error();
  EXPECT_TRUE(p->quantized_weights);
  EXPECT_TRUE(p->quantized_gradients);
  EXPECT_EQ(p->name, "zeropp+qwz+qgz");  // one spelling, whatever the order
  auto z = parse_plan("zero3+qwz", topo);
  ASSERT_TRUE(z) << z.error();
  EXPECT_TRUE(z->quantized_weights);
  EXPECT_FALSE(z->quantized_gradients);
  EXPECT_FALSE(parse_plan("zero2+qwz", topo));  // no parameter gathers to quantize
  EXPECT_FALSE(parse_plan("mics+qgz", topo));
  EXPECT_FALSE(parse_plan("p=4x2,g=4x2,os=4x2+qwz", topo));
  Plan plain = *parse_plan("zeropp:2", topo);
  ASSERT_TRUE(set_quantization(plain, true, false));
  EXPECT_EQ(plain.name, "zeropp:2+qwz");
  ASSERT_TRUE(set_quantization(plain, true, true));  // already quantized weights: said once
  EXPECT_EQ(plain.name, "zeropp:2+qwz+qgz");
}

TEST(Quantization, QuantizedOpsMoveValuesAndScalesAndQgzExchangesReplaceTheReduceScatter) {
  const ModelSpec model = *make_model_preset("small");
  const Topology topo{2, 2};
  ScheduleOptions o;
  o.micro_batches = 2;
  o.expand_micro_batches = true;
  o.engine.ds_param_persistence_threshold_elems = 0;
  auto plain = build_schedule(model, *parse_plan("zeropp", topo), topo, o);
  auto quant = build_schedule(model, *parse_plan("zeropp+qwz+qgz", topo), topo, o);
  ASSERT_TRUE(plain) << plain.error();
  ASSERT_TRUE(quant) << quant.error();
  int gathers = 0, node = 0, peers = 0, reduce_scatters = 0;
  for (const CommOp& op : quant->ops) {
    if (op.kind == CollKind::all_gather && op.purpose != Purpose::update_gather) {
      ++gathers;
      ASSERT_EQ(op.quant, Quant::int8_blocks) << op.label;
      const int n = op.group.size();
      EXPECT_EQ(op.bytes(), op.elems + 4 * op.quant_blocks);  // int8 values, one fp32 scale a block
      EXPECT_EQ((op.elems / n) % (8 * (op.quant_blocks / n)), 0) << op.label;
    }
    if (op.purpose == Purpose::qgz_node_exchange) {
      ++node;
      EXPECT_EQ(op.bytes(), op.elems / 2 + 4 * op.quant_blocks);  // int4 values
      EXPECT_EQ(op.mesh, (Mesh{2, 1}));
    }
    if (op.purpose == Purpose::qgz_peer_exchange) {
      ++peers;
      EXPECT_EQ(op.mesh, (Mesh{1, 2}));
    }
    if (op.kind == CollKind::reduce_scatter) ++reduce_scatters;
  }
  EXPECT_GT(gathers, 0);
  EXPECT_EQ(node, peers);
  EXPECT_EQ(node, 2 * int(model.modules.size()));  // every module, each micro-batch (the norms ride with their layer)
  EXPECT_EQ(reduce_scatters, 0);
  // Across nodes: int4 sums of 1/R of each module instead of its bf16 reduce-scatter.
  EXPECT_LT(quant->message_bytes(CollKind::all_to_all, Axis::inter),
            plain->message_bytes(CollKind::reduce_scatter, Axis::inter) / 6);
}

}  // namespace
}  // namespace lins
