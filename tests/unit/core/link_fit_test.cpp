// The link terms fitted to measured collectives (core/cost/link_fit.h): the linear forms are the alpha-beta model of
// every collective on every mesh; points the model made with known terms give those terms back, with noise nearly
// so; a link class without points keeps the network file's terms and says so; the fit stays non-negative; a cost
// model built from a profile prices every mesh with the fitted terms, measured pairs still from the measurement.
#include "core/cost/link_fit.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "core/cost/cost_options.h"

namespace lins {
namespace {

AlphaBeta network(double ai_us, double an_us, double bi_gbps, double bn_gbps, double gpu_share = 0.5) {
  AlphaBeta n;
  n.name = "test";
  n.intra_latency_s = ai_us * 1e-6;
  n.inter_latency_s = an_us * 1e-6;
  n.intra_gpu_gbps = bi_gbps;
  n.inter_node_gbps = bn_gbps;
  n.inter_gpu_gbps = bn_gbps * gpu_share;
  return n;
}

const CollKind kAll[] = {CollKind::all_gather, CollKind::reduce_scatter, CollKind::all_reduce, CollKind::broadcast,
                         CollKind::all_to_all};

// What `lins comm --profile` sweeps on 4 nodes of 4 GPUs: every mesh of divisors, 4 KiB to 64 MiB by 4.
std::vector<LinkFitPoint> synthetic(const AlphaBeta& truth, std::vector<Mesh> meshes = {}) {
  if (meshes.empty())
    for (int b : {1, 2, 4})
      for (int a : {1, 2, 4})
        if (a * b > 1) meshes.push_back(Mesh{a, b});
  std::vector<LinkFitPoint> out;
  for (CollKind op : kAll)
    for (const Mesh& m : meshes)
      for (double v = 4096; v <= 64.0 * (1 << 20); v *= 4)
        out.push_back({op, m, v, alpha_beta_time_s(truth, op, v, m)});
  return out;
}

double form_max(const std::vector<LinkForm>& forms, const AlphaBeta& n) {
  const LinkForm x = {n.intra_latency_s, n.inter_latency_s, 1 / (n.intra_gpu_gbps * 1e9),
                      1 / (n.inter_node_gbps * 1e9)};
  double best = -1;
  for (const auto& f : forms) {
    double t = 0;
    for (int j = 0; j < kLinkTermCount; ++j) t += f[j] * x[j];
    best = std::max(best, t);
  }
  return best;
}

TEST(LinkFit, FormsAreTheAlphaBetaModelOfEveryCollective) {
  // Every collective's alpha_beta_s is linear in (a_i, a_n, 1/b_i, 1/b_n), or the larger of two such forms: checked
  // on meshes inside a node, across nodes with one or several GPUs per node, with a per-GPU cap that binds on some
  // meshes and not others, and with per-doubling factors.
  for (AlphaBeta n : {network(2, 6, 150, 50, 0.25), network(20, 20, 3, 3, 1), network(0.5, 30, 900, 12, 0.125)}) {
    for (double bw_factor : {1.0, 0.9}) {
      n.bw_factor_per_node_doubling = bw_factor;
      n.latency_factor_per_node_doubling = bw_factor == 1 ? 1.0 : 1.3;
      for (CollKind op : kAll)
        for (Mesh m : {Mesh{2, 1}, Mesh{8, 1}, Mesh{1, 2}, Mesh{1, 16}, Mesh{2, 2}, Mesh{8, 4}, Mesh{4, 16}, Mesh{3, 5}})
          for (double v : {1.0, 4096.0, 1048576.0, 268435456.0}) {
            const double want = alpha_beta_time_s(n, op, v, m);
            EXPECT_NEAR(form_max(alpha_beta_forms(n, op, v, m), n), want, 1e-12 * want)
                << coll_kind_name(op) << " " << m.to_string() << " " << v;
          }
    }
  }
}

TEST(LinkFit, RecoversTheTermsThatMadeThePoints) {
  const AlphaBeta file = network(1, 5, 100, 25);
  const AlphaBeta truth = network(3, 12, 150, 40);  // the same per-GPU share as the file: the fit keeps that ratio
  const LinkFit fit = fit_link_terms(file, synthetic(truth));
  EXPECT_EQ(fit.points, 5 * 8 * 8);  // 5 collectives x 8 meshes x 8 sizes
  const double want[] = {truth.intra_latency_s, truth.inter_latency_s, truth.intra_gpu_gbps, truth.inter_node_gbps};
  for (int j = 0; j < kLinkTermCount; ++j) {
    EXPECT_EQ(fit.terms[j].from, TermFrom::fitted) << link_term_name(LinkTerm(j));
    EXPECT_NEAR(fit.terms[j].fitted, want[j], 1e-6 * want[j]) << link_term_name(LinkTerm(j));
  }
  EXPECT_NEAR(fit.fitted.inter_gpu_gbps, truth.inter_gpu_gbps, 1e-6 * truth.inter_gpu_gbps);
  EXPECT_LT(fit.worst_error, 1e-6);
  EXPECT_TRUE(fit.notes.empty());
  EXPECT_EQ(fit.series.size(), 5u * 8u);
}

TEST(LinkFit, NoisyPointsGiveTheTermsNearly) {
  const AlphaBeta truth = network(3, 12, 150, 40);
  auto points = synthetic(truth);
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> noise(-0.05, 0.05);  // +-5% on every time
  for (auto& p : points) p.time_s *= 1 + noise(rng);
  const LinkFit fit = fit_link_terms(network(1, 5, 100, 25), points);
  const double want[] = {truth.intra_latency_s, truth.inter_latency_s, truth.intra_gpu_gbps, truth.inter_node_gbps};
  for (int j = 0; j < kLinkTermCount; ++j)
    EXPECT_NEAR(fit.terms[j].fitted, want[j], 0.05 * want[j]) << link_term_name(LinkTerm(j));
  EXPECT_LT(fit.median_error, 0.05);
  EXPECT_LT(fit.worst_error, 0.12);
}

TEST(LinkFit, AClassWithoutPointsKeepsTheNetworkFilesTerms) {
  const AlphaBeta file = network(1, 5, 100, 25);
  const AlphaBeta truth = network(3, 12, 150, 40);
  // Inside a node only: the inter-node terms are the file's, and the notes say so.
  LinkFit intra = fit_link_terms(file, synthetic(truth, {Mesh{2, 1}, Mesh{4, 1}}));
  EXPECT_NEAR(intra.fitted.intra_latency_s, truth.intra_latency_s, 1e-6 * truth.intra_latency_s);
  EXPECT_NEAR(intra.fitted.intra_gpu_gbps, truth.intra_gpu_gbps, 1e-6 * truth.intra_gpu_gbps);
  EXPECT_EQ(intra.terms[1].from, TermFrom::no_points);
  EXPECT_EQ(intra.terms[3].from, TermFrom::no_points);
  EXPECT_EQ(intra.fitted.inter_latency_s, file.inter_latency_s);
  EXPECT_EQ(intra.fitted.inter_node_gbps, file.inter_node_gbps);
  EXPECT_EQ(intra.fitted.inter_gpu_gbps, file.inter_gpu_gbps);
  ASSERT_EQ(intra.notes.size(), 1u);
  EXPECT_NE(intra.notes[0].find("no measured collective spans nodes: the inter-node terms are the network file's"),
            std::string::npos)
      << intra.notes[0];
  // One GPU per node only: the intra-node terms are the file's.
  LinkFit inter = fit_link_terms(file, synthetic(truth, {Mesh{1, 2}, Mesh{1, 4}}));
  EXPECT_EQ(inter.terms[0].from, TermFrom::no_points);
  EXPECT_EQ(inter.terms[2].from, TermFrom::no_points);
  EXPECT_EQ(inter.fitted.intra_gpu_gbps, file.intra_gpu_gbps);
  EXPECT_NEAR(inter.fitted.inter_latency_s, truth.inter_latency_s, 1e-6 * truth.inter_latency_s);
  EXPECT_NEAR(inter.fitted.inter_node_gbps, truth.inter_node_gbps, 1e-6 * truth.inter_node_gbps);
  ASSERT_EQ(inter.notes.size(), 1u);
  EXPECT_NE(inter.notes[0].find("the intra-node terms are the network file's"), std::string::npos) << inter.notes[0];
}

TEST(LinkFit, OneMeshScalesBothClassesTogether) {
  // An all-reduce over 8 x 2 alone: its intra and inter latencies (14 and 2 steps at every size) move together, and
  // so do its two rates. Each pair is fitted as one scale of the file's pair, which reproduces the mesh exactly.
  const AlphaBeta file = network(1, 5, 100, 25, 0.125);
  std::vector<LinkFitPoint> points;
  for (double v = 4096; v <= 1 << 30; v *= 4)
    points.push_back({CollKind::all_reduce, Mesh{8, 2}, v, alpha_beta_time_s(network(3, 12, 150, 40, 0.125),
                                                                              CollKind::all_reduce, v, Mesh{8, 2})});
  const LinkFit fit = fit_link_terms(file, points);
  for (const auto& t : fit.terms) EXPECT_EQ(t.from, TermFrom::tied);
  // 2 (7 a_i + a_n) = 66 us with a_n = 5 a_i.
  EXPECT_NEAR(fit.fitted.intra_latency_s, 66e-6 / 24, 1e-12);
  EXPECT_NEAR(fit.fitted.inter_latency_s / fit.fitted.intra_latency_s, 5, 1e-9);
  EXPECT_NEAR(fit.fitted.inter_node_gbps / fit.fitted.intra_gpu_gbps, 0.25, 1e-9);
  EXPECT_LT(fit.worst_error, 1e-6);
  ASSERT_EQ(fit.notes.size(), 2u);
  EXPECT_NE(fit.notes[0].find("do not tell the intra-node and inter-node latencies apart"), std::string::npos)
      << fit.notes[0];
}

TEST(LinkFit, OneSizeKeepsTheFilesTermsItCannotSeparate) {
  // One size inside a node: latency and rate move together; the latency is fitted, the rate kept.
  const AlphaBeta file = network(1, 5, 100, 25);
  const std::vector<LinkFitPoint> points = {{CollKind::all_gather, Mesh{4, 1}, 1 << 20, 1e-4}};
  const LinkFit fit = fit_link_terms(file, points);
  EXPECT_EQ(fit.terms[0].from, TermFrom::fitted);
  EXPECT_EQ(fit.terms[2].from, TermFrom::not_separable);
  EXPECT_EQ(fit.fitted.intra_gpu_gbps, file.intra_gpu_gbps);
  EXPECT_LT(fit.worst_error, 1e-9);
}

TEST(LinkFit, LatencyIsHeldAtZeroNotBelow) {
  // Small sizes faster than the rate alone allows: the unconstrained fit would give a negative latency.
  std::vector<LinkFitPoint> points;
  for (double v = 1 << 20; v <= 64 << 20; v *= 2)
    points.push_back({CollKind::all_gather, Mesh{2, 1}, v, v / 2 / 10e9 - 5e-6});
  const LinkFit fit = fit_link_terms(network(1, 5, 100, 25), points);
  EXPECT_EQ(fit.terms[0].fitted, 0.0);
  EXPECT_TRUE(fit.terms[0].at_bound);
  EXPECT_GT(fit.terms[2].fitted, 0.0);
  bool said = false;
  for (const auto& n : fit.notes) said = said || n.find("intra-node latency held at 0") != std::string::npos;
  EXPECT_TRUE(said);
}

TEST(LinkFit, ACostModelPricesEveryMeshWithTheFittedTerms) {
  const std::string profile = std::string(LINS_CLUSTER_PROFILE_DIR) + "/cluster-2x2.csv";
  auto p = BandwidthProfile::load(profile);
  ASSERT_TRUE(p) << p.error();
  auto net = resolve_network_spec("cpu-local");
  ASSERT_TRUE(net) << net.error();
  const auto cost = CostModel::make(*net, NetworkModel::alpha_beta, *p).value();
  ASSERT_NE(cost.link_fit(), nullptr);
  EXPECT_TRUE(cost.priced_by_fit());
  EXPECT_NE(cost.model_description().find("fitted"), std::string::npos);
  const LinkFit& fit = *cost.link_fit();
  for (const auto& t : fit.terms) EXPECT_EQ(t.from, TermFrom::fitted);
  // A mesh never measured (2 x 4): the fitted alpha-beta model.
  const Topology topo{2, 4};
  CommOp op;
  op.kind = CollKind::all_gather;
  op.mesh = Mesh{2, 4};
  op.elems = 1 << 20;
  bool fell_back = false;
  EXPECT_DOUBLE_EQ(cost.op_time_s(op, topo, Pricing::paper_isolated, &fell_back),
                   alpha_beta_time_s(fit.fitted, CollKind::all_gather, double(op.bytes()), Mesh{2, 4}));
  EXPECT_TRUE(fell_back);
  // A measured one: the measurement.
  op.mesh = Mesh{2, 1};
  EXPECT_DOUBLE_EQ(cost.op_time_s(op, topo, Pricing::paper_isolated, &fell_back),
                   *p->time_s(CollKind::all_gather, Mesh{2, 1}, double(op.bytes())));
  EXPECT_FALSE(fell_back);
  // The nccl model keeps its own prices; the fit is there to compare.
  const auto nccl = CostModel::make(resolve_network_spec("paper-a800").value(), NetworkModel::nccl, *p).value();
  ASSERT_NE(nccl.link_fit(), nullptr);
  EXPECT_FALSE(nccl.priced_by_fit());
  EXPECT_EQ(nccl.model_description().find("fitted"), std::string::npos);
}

}  // namespace
}  // namespace lins
