// The decoder's backward against finite differences on the tiny model (fp32 forward, the loss summed in fp64):
// for every tensor, the derivative of the loss along a random direction on that tensor, by central differences,
// matches the analytic gradient dotted with the direction within 2% (plus 1e-5 absolute), with and without
// activation recomputation (which must give the same gradient to the last bit of fp32 noise).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "train/data.h"
#include "train/llama.h"

namespace lins {
namespace {

struct Harness {
  ModelSpec spec;
  std::unique_ptr<ComputeBackend> be = make_cpu_backend();
  std::vector<DeviceBuffer> params, grads;  // per module, [module elems]
  std::vector<int32_t> ids, targets;
  ModelOptions opt;

  explicit Harness(Recompute recompute, int seq = 6, int batch = 2) {
    spec = *make_model_preset("tiny");
    opt.seq = seq;
    opt.micro_batch_size = batch;
    opt.recompute = recompute;
    opt.init_std = 0.3f;  // large enough that attention is far from uniform and every path has a gradient
    auto model = LlamaModel::create(spec, *be, opt);
    EXPECT_TRUE(model.ok()) << model.error();
    for (size_t m = 0; m < spec.modules.size(); ++m) {
      params.push_back(be->allocate(spec.modules[m].elems * 4, MemCategory::param).value());
      grads.push_back(be->allocate(spec.modules[m].elems * 4, MemCategory::grad).value());
      model->init_module_range(int(m), 0, spec.modules[m].elems, params[m].f32(), 7);
    }
    SyntheticTask task{3, spec.dims.vocab, seq};
    micro_batch_tokens(task, 0, 0, 0, 1, batch, &ids, &targets);
  }

  // Mean loss; with grads = true also the gradient (into grads).
  double run(bool with_grads) {
    auto model = LlamaModel::create(spec, *be, opt);
    const int64_t T = int64_t(opt.seq) * opt.micro_batch_size;
    EXPECT_TRUE(model->begin_micro_batch(ids.data(), targets.data(), float(1.0 / T)).ok());
    for (size_t m = 0; m < spec.modules.size(); ++m) EXPECT_TRUE(model->forward(int(m), params[m].f32()).ok());
    if (with_grads) {
      for (auto& g : grads) be->zero(g.data(), g.bytes());
      for (int m = int(spec.modules.size()) - 1; m >= 0; --m)
        EXPECT_TRUE(model->backward(m, params[m].f32(), grads[m].f32()).ok());
    }
    model->end_micro_batch();
    return model->take_loss_sum() / double(T);
  }
};

void check_gradients(Recompute recompute) {
  Harness h(recompute);
  const double loss = h.run(true);
  EXPECT_GT(loss, 0.5);
  std::mt19937 rng(11);
  std::normal_distribution<float> nd;
  int checked = 0;
  for (size_t m = 0; m < h.spec.modules.size(); ++m) {
    int64_t off = 0;
    for (int t : h.spec.modules[m].tensors) {
      const int64_t n = h.spec.tensors[t].elems;
      std::vector<float> dir(n);
      for (auto& d : dir) d = nd(rng);
      double analytic = 0;
      for (int64_t i = 0; i < n; ++i) analytic += double(h.grads[m].f32()[off + i]) * dir[i];
      const double eps = 1e-2 / std::sqrt(double(n));  // a step of 1e-2 in parameter space
      std::vector<float> keep(h.params[m].f32() + off, h.params[m].f32() + off + n);
      for (int64_t i = 0; i < n; ++i) h.params[m].f32()[off + i] = keep[i] + float(eps) * dir[i];
      const double lp = h.run(false);
      for (int64_t i = 0; i < n; ++i) h.params[m].f32()[off + i] = keep[i] - float(eps) * dir[i];
      const double lm = h.run(false);
      for (int64_t i = 0; i < n; ++i) h.params[m].f32()[off + i] = keep[i];
      const double numeric = (lp - lm) / (2 * eps);
      EXPECT_NEAR(analytic, numeric, 0.02 * std::fabs(numeric) + 1e-5)
          << h.spec.tensors[t].name << " (recompute " << recompute_name(recompute) << ")";
      EXPECT_GT(std::fabs(analytic), 1e-4) << h.spec.tensors[t].name << " has no gradient to check";
      ++checked;
      off += n;
    }
  }
  EXPECT_EQ(checked, int(h.spec.tensors.size()));
}

TEST(LlamaModel, BackwardMatchesFiniteDifferences) { check_gradients(Recompute::none); }
TEST(LlamaModel, BackwardMatchesFiniteDifferencesWithRecomputation) { check_gradients(Recompute::full); }
TEST(LlamaModel, BackwardMatchesFiniteDifferencesWithSelectiveRecomputation) { check_gradients(Recompute::selective); }

TEST(LlamaModel, RecomputationGivesTheSameGradient) {
  for (Recompute r : {Recompute::selective, Recompute::full}) {
    SCOPED_TRACE(recompute_name(r));
    Harness a(Recompute::none), b(r);
    const double la = a.run(true), lb = b.run(true);
    EXPECT_DOUBLE_EQ(la, lb);
    for (size_t m = 0; m < a.spec.modules.size(); ++m)
      for (int64_t i = 0; i < a.spec.modules[m].elems; ++i)
        ASSERT_EQ(a.grads[m].f32()[i], b.grads[m].f32()[i]) << a.spec.modules[m].name << " element " << i;
  }
}

// The activations a micro-batch holds at its peak: selective drops every attention layer's o ([T, H]) and logsumexp
// ([batch, heads, seq] fp32) after forward and brings back one layer's at a time in backward, so its peak is lower
// than none's by those of all layers but at most one; full keeps only the layer inputs and is lower still.
TEST(LlamaModel, SelectiveRecomputationHoldsLessActivationMemory) {
  const int seq = 32, batch = 2;
  int64_t peak[3] = {};
  for (Recompute r : kRecomputeNames.values()) {
    Harness h(r, seq, batch);
    h.be->reset_peak_memory();
    const int64_t before = h.be->memory().current_bytes[int(MemCategory::activation)];
    h.run(true);
    peak[int(r)] = h.be->memory().peak_bytes[int(MemCategory::activation)] - before;
  }
  const int64_t T = int64_t(seq) * batch, H = 16, heads = 2, L = 2;   // the tiny model
  const int64_t core = T * H * 4 + int64_t(batch) * heads * seq * 4;  // o and lse of one layer, fp32
  const int64_t saved = peak[int(Recompute::none)] - peak[int(Recompute::selective)];
  EXPECT_GE(saved, (L - 1) * core) << "none " << peak[0] << ", selective " << peak[1];
  EXPECT_LE(saved, L * core) << "none " << peak[0] << ", selective " << peak[1];
  EXPECT_LT(peak[int(Recompute::full)], peak[int(Recompute::selective)]);
}

TEST(LlamaModel, InitialisationDependsOnlyOnTensorNameAndIndex) {
  Harness h(Recompute::none);
  auto model = LlamaModel::create(h.spec, *h.be, h.opt);
  const int m = 1;  // layers.0.attn
  const int64_t n = h.spec.modules[m].elems;
  std::vector<float> part(n);
  // Two arbitrary slices initialised on their own equal the same elements of the whole module.
  model->init_module_range(m, 5, 40, part.data(), 7);
  for (int64_t i = 0; i < 40; ++i) ASSERT_EQ(part[i], h.params[m].f32()[5 + i]);
  model->init_module_range(m, n - 3, 10, part.data(), 7);  // runs past the module: padding is zero
  for (int64_t i = 0; i < 3; ++i) ASSERT_EQ(part[i], h.params[m].f32()[n - 3 + i]);
  for (int64_t i = 3; i < 10; ++i) ASSERT_EQ(part[i], 0.0f);
  // Norm weights start at one; another seed gives other weights.
  EXPECT_EQ(h.params[m].f32()[model->slot(m, "attention_norm.weight")->offset], 1.0f);
  model->init_module_range(m, 100, 1, part.data(), 8);
  EXPECT_NE(part[0], h.params[m].f32()[100]);
}

TEST(SyntheticTask, IsDeterministicAndFollowsTheRule) {
  SyntheticTask task{5, 24, 8};
  std::vector<int32_t> i1, t1, i2, t2;
  micro_batch_tokens(task, 3, 1, 2, 4, 2, &i1, &t1);
  micro_batch_tokens(task, 3, 1, 2, 4, 2, &i2, &t2);
  EXPECT_EQ(i1, i2);
  EXPECT_EQ(t1, t2);
  for (size_t k = 0; k < i1.size(); ++k) {
    EXPECT_EQ(t1[k], (task.multiplier() * i1[k] + task.increment()) % 24);
    if (k % 8 != 7) {
      EXPECT_EQ(i1[k + 1], t1[k]);
    }
  }
  // Rank 1, micro-batch 2 of 4 is global micro-batch 6 of a one-rank run with 8.
  micro_batch_tokens(task, 3, 0, 6, 8, 2, &i2, &t2);
  EXPECT_EQ(i1, i2);
  micro_batch_tokens(task, 4, 1, 2, 4, 2, &i2, &t2);
  EXPECT_NE(i1, i2);
}

}  // namespace
}  // namespace lins

namespace lins {
namespace {

// The step's loss stays on the device, one slot per micro-batch, and is read once: over more micro-batches than there
// are slots it still equals the per-micro-batch sums added on the host in order, to the bit.
TEST(LlamaModel, LossOfManyMicroBatchesIsTheirSumInOrder) {
  Harness h(Recompute::none);
  auto model = LlamaModel::create(h.spec, *h.be, h.opt);
  ASSERT_TRUE(model.ok()) << model.error();
  SyntheticTask task{3, h.spec.dims.vocab, h.opt.seq};
  const int micro_batches = 150;  // more than two rounds of the device's slots
  double each_in_order = 0, first = 0, step = 0;
  for (int round = 0; round < 2; ++round) {
    for (int mb = 0; mb < micro_batches; ++mb) {
      micro_batch_tokens(task, 0, 0, mb, micro_batches, h.opt.micro_batch_size, &h.ids, &h.targets);
      ASSERT_TRUE(model->begin_micro_batch(h.ids.data(), h.targets.data(), 1.0f).ok());
      for (size_t m = 0; m < h.spec.modules.size(); ++m) ASSERT_TRUE(model->forward(int(m), h.params[m].f32()).ok());
      model->end_micro_batch();
      if (round == 1) {
        const double one = model->take_loss_sum();  // read after every micro-batch
        if (mb == 0) first = one;
        each_in_order += one;
      }
    }
    if (round == 0) {
      step = model->take_loss_sum();  // read once, at the end
      EXPECT_EQ(model->take_loss_sum(), 0.0) << "a second read finds nothing left";
    }
  }
  EXPECT_GT(first, 0);
  EXPECT_GT(step, first);
  EXPECT_EQ(step, each_in_order) << "the step's sum differs from the per-micro-batch sums added in order";
}

}  // namespace
}  // namespace lins
