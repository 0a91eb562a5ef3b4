// CPU kernels against naive fp64 references; backward kernels against central finite differences of those
// references (fp64, step 1e-6), so only the fp32 kernel contributes error. Tolerances: 1e-4 relative-ish.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "core/util/bf16.h"
#include "kernels/cpu/exp_poly.h"
#include "kernels/ops.h"

namespace lins::kernels::cpu {
namespace {

using Vec = std::vector<float>;
using DVec = std::vector<double>;

Vec random_vec(size_t n, unsigned seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  Vec v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

DVec to_d(const Vec& v) { return DVec(v.begin(), v.end()); }

// Central differences of f at x (fp64).
DVec numeric_grad(const std::function<double(const DVec&)>& f, DVec x, double h = 1e-6) {
  DVec g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double keep = x[i];
    x[i] = keep + h;
    const double fp = f(x);
    x[i] = keep - h;
    const double fm = f(x);
    x[i] = keep;
    g[i] = (fp - fm) / (2 * h);
  }
  return g;
}

// |got - want| <= tol * max(|want|, min_scale) element-wise; min_scale stands in for the size of the terms summed
// where the exact result cancels to (near) zero.
void expect_close(const Vec& got, const DVec& want, double tol, const char* what, double min_scale = 1e-6) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double scale = min_scale;
  for (double w : want) scale = std::max(scale, std::fabs(w));
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], tol * scale) << what << " at " << i << " (max |ref| " << scale << ")";
}

TEST(CpuExpPoly, MatchesExpWithinAFewUlp) {
  double worst = 0;
  for (float x = -87.0f; x <= 88.0f; x += 0.00731f) {
    const double want = std::exp(double(x));
    worst = std::max(worst, std::fabs(exp_poly(x) - want) / want);
  }
  EXPECT_LT(worst, 3e-7);  // 2.5 fp32 ulp
  EXPECT_EQ(exp_poly(0.0f), 1.0f);
  EXPECT_LT(exp_poly(-1000.0f), 1e-37f);  // clamped, not NaN
  EXPECT_GE(exp_poly(-1000.0f), 0.0f);
}

TEST(CpuGemm, MatchesNaiveForEveryTransposition) {
  const int m = 7, n = 5, k = 9;
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      Vec a = random_vec(m * k, 1), b = random_vec(k * n, 2), c = random_vec(m * n, 3);
      DVec want(m * n);
      for (int i = 0; i < m; ++i)
        for (int j = 0; j < n; ++j) {
          double s = 0;
          for (int p = 0; p < k; ++p) {
            const double av = ta ? a[p * m + i] : a[i * k + p];
            const double bv = tb ? b[j * k + p] : b[p * n + j];
            s += av * bv;
          }
          want[i * n + j] = 0.5 * s + 2.0 * c[i * n + j];
        }
      gemm(ta, tb, m, n, k, 0.5f, a.data(), b.data(), 2.0f, c.data());
      expect_close(c, want, 1e-5, "gemm");
    }
}

TEST(CpuGemm, CountsFlopsAndShapesWhenTimed) {
  reset_gemm_stats();
  set_gemm_timing(true);
  static GemmShape seen;
  seen = GemmShape{};
  set_gemm_observer([](const GemmShape& s, double) { seen = s; });
  Vec a(6, 1.0f), b(6, 1.0f), c(4, 1.0f);
  gemm(false, true, 2, 2, 3, 0.5f, a.data(), b.data(), 2.0f, c.data());
  set_gemm_timing(false);
  EXPECT_EQ(gemm_stats().calls, 1);
  EXPECT_DOUBLE_EQ(gemm_stats().flops, 24.0);
  EXPECT_EQ(seen.m * seen.n * seen.k, 12);
  EXPECT_FALSE(seen.trans_a);
  EXPECT_TRUE(seen.trans_b);
  EXPECT_EQ(seen.lda, 3);
  EXPECT_EQ(seen.ldb, 3);
  EXPECT_EQ(seen.ldc, 2);
  EXPECT_EQ(seen.alpha, 0.5f);
  EXPECT_EQ(seen.beta, 2.0f);
  EXPECT_FLOAT_EQ(c[0], 0.5f * 3.0f + 2.0f);
  reset_gemm_stats();
}

// fp64 RMSNorm reference.
DVec rmsnorm_ref(const DVec& x, const DVec& w, int rows, int dim, double eps) {
  DVec y(x.size());
  for (int r = 0; r < rows; ++r) {
    double ss = 0;
    for (int i = 0; i < dim; ++i) ss += x[r * dim + i] * x[r * dim + i];
    const double s = 1.0 / std::sqrt(ss / dim + eps);
    for (int i = 0; i < dim; ++i) y[r * dim + i] = x[r * dim + i] * s * w[i];
  }
  return y;
}

double dot(const DVec& a, const DVec& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

TEST(CpuRmsNorm, ForwardAndBackwardMatchReference) {
  const int rows = 3, dim = 8;
  const float eps = 1e-5f;
  Vec x = random_vec(rows * dim, 4), w = random_vec(dim, 5), dy = random_vec(rows * dim, 6);
  Vec y(rows * dim), rstd(rows), dx(rows * dim), dw(dim, 0.0f);
  rmsnorm_forward(x.data(), w.data(), y.data(), rstd.data(), rows, dim, eps);
  expect_close(y, rmsnorm_ref(to_d(x), to_d(w), rows, dim, eps), 1e-5, "rmsnorm y");
  rmsnorm_backward(dy.data(), x.data(), w.data(), rstd.data(), dx.data(), dw.data(), rows, dim);
  const DVec dyd = to_d(dy), wd = to_d(w), xd = to_d(x);
  expect_close(dx, numeric_grad([&](const DVec& xv) { return dot(rmsnorm_ref(xv, wd, rows, dim, eps), dyd); }, xd),
               1e-4, "rmsnorm dx");
  expect_close(dw, numeric_grad([&](const DVec& wv) { return dot(rmsnorm_ref(xd, wv, rows, dim, eps), dyd); }, wd),
               1e-4, "rmsnorm dweight");
}

TEST(CpuRmsNorm, BackwardAccumulatesWeightGradient) {
  const int rows = 2, dim = 4;
  Vec x = random_vec(rows * dim, 7), w = random_vec(dim, 8), dy = random_vec(rows * dim, 9);
  Vec y(rows * dim), rstd(rows), dx(rows * dim), dw1(dim, 0.0f), dw2(dim, 1.0f);
  rmsnorm_forward(x.data(), w.data(), y.data(), rstd.data(), rows, dim, 1e-5f);
  rmsnorm_backward(dy.data(), x.data(), w.data(), rstd.data(), dx.data(), dw1.data(), rows, dim);
  rmsnorm_backward(dy.data(), x.data(), w.data(), rstd.data(), dx.data(), dw2.data(), rows, dim);
  for (int i = 0; i < dim; ++i) EXPECT_NEAR(dw2[i], dw1[i] + 1.0f, 1e-6);
}

DVec swiglu_ref(const DVec& g, const DVec& u) {
  DVec o(g.size());
  for (size_t i = 0; i < g.size(); ++i) o[i] = g[i] / (1 + std::exp(-g[i])) * u[i];
  return o;
}

TEST(CpuSwiGlu, ForwardAndBackwardMatchReference) {
  const int n = 16;
  Vec g = random_vec(n, 10, 2.0f), u = random_vec(n, 11), d = random_vec(n, 12);
  Vec o(n), dg(n), du(n);
  swiglu_forward(g.data(), u.data(), o.data(), n);
  expect_close(o, swiglu_ref(to_d(g), to_d(u)), 1e-5, "swiglu");
  swiglu_backward(d.data(), g.data(), u.data(), dg.data(), du.data(), n);
  const DVec gd = to_d(g), ud = to_d(u), dd = to_d(d);
  expect_close(dg, numeric_grad([&](const DVec& x) { return dot(swiglu_ref(x, ud), dd); }, gd), 1e-4, "dgate");
  expect_close(du, numeric_grad([&](const DVec& x) { return dot(swiglu_ref(gd, x), dd); }, ud), 1e-4, "dup");
}

TEST(CpuRope, RotatesPairsAndInverseUndoes) {
  const int batch = 2, seq = 5, heads = 3, hd = 4;
  Vec x = random_vec(batch * seq * heads * hd, 13), y = x;
  rope(y.data(), batch, seq, heads, hd, 10000.0f, false);
  for (int b = 0; b < batch; ++b)
    for (int p = 0; p < seq; ++p)
      for (int h = 0; h < heads; ++h)
        for (int i = 0; i < hd / 2; ++i) {
          const size_t o = ((size_t(b) * seq + p) * heads + h) * hd + 2 * i;
          const double ang = p * std::pow(10000.0, -2.0 * i / hd);
          const double re = x[o] * std::cos(ang) - x[o + 1] * std::sin(ang);
          const double im = x[o] * std::sin(ang) + x[o + 1] * std::cos(ang);
          ASSERT_NEAR(y[o], re, 1e-5);
          ASSERT_NEAR(y[o + 1], im, 1e-5);
        }
  // Position 0 is untouched; the inverse rotation restores the input.
  for (int i = 0; i < heads * hd; ++i) EXPECT_FLOAT_EQ(y[i], x[i]);
  rope(y.data(), batch, seq, heads, hd, 10000.0f, true);
  for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(y[i], x[i], 1e-5);
}

// fp64 causal attention reference, layout [batch, seq, heads, hd].
DVec attention_ref(const DVec& q, const DVec& k, const DVec& v, int batch, int seq, int heads, int hd) {
  const int H = heads * hd;
  DVec out(q.size(), 0.0);
  for (int b = 0; b < batch; ++b)
    for (int h = 0; h < heads; ++h)
      for (int i = 0; i < seq; ++i) {
        std::vector<double> s(i + 1);
        double mx = -1e300;
        for (int j = 0; j <= i; ++j) {
          double d = 0;
          for (int e = 0; e < hd; ++e) d += q[(b * seq + i) * H + h * hd + e] * k[(b * seq + j) * H + h * hd + e];
          s[j] = d / std::sqrt(double(hd));
          mx = std::max(mx, s[j]);
        }
        double z = 0;
        for (int j = 0; j <= i; ++j) z += std::exp(s[j] - mx);
        for (int j = 0; j <= i; ++j)
          for (int e = 0; e < hd; ++e)
            out[(b * seq + i) * H + h * hd + e] += std::exp(s[j] - mx) / z * v[(b * seq + j) * H + h * hd + e];
      }
  return out;
}

TEST(CpuAttention, ForwardAndBackwardMatchReference) {
  const int batch = 2, seq = 5, heads = 2, hd = 4, n = batch * seq * heads * hd;
  Vec q = random_vec(n, 14), k = random_vec(n, 15), v = random_vec(n, 16), d = random_vec(n, 17);
  Vec out(n), lse(batch * heads * seq), dq(n), dk(n), dv(n);
  attention_forward(q.data(), k.data(), v.data(), out.data(), lse.data(), batch, seq, heads, hd);
  const DVec qd = to_d(q), kd = to_d(k), vd = to_d(v), dd = to_d(d);
  expect_close(out, attention_ref(qd, kd, vd, batch, seq, heads, hd), 1e-5, "attention out");
  // The first query sees only the first key: its lse is that one scaled score.
  double s00 = 0;
  for (int e = 0; e < hd; ++e) s00 += q[e] * k[e];
  EXPECT_NEAR(lse[0], s00 / 2.0, 1e-5);
  attention_backward(d.data(), q.data(), k.data(), v.data(), out.data(), lse.data(), dq.data(), dk.data(), dv.data(),
                     batch, seq, heads, hd);
  auto f = [&](const DVec& qq, const DVec& kk, const DVec& vv) {
    return dot(attention_ref(qq, kk, vv, batch, seq, heads, hd), dd);
  };
  expect_close(dq, numeric_grad([&](const DVec& x) { return f(x, kd, vd); }, qd), 1e-4, "dq");
  expect_close(dk, numeric_grad([&](const DVec& x) { return f(qd, x, vd); }, kd), 1e-4, "dk");
  expect_close(dv, numeric_grad([&](const DVec& x) { return f(qd, kd, x); }, vd), 1e-4, "dv");
}

TEST(CpuAttention, IsCausal) {
  const int batch = 1, seq = 4, heads = 1, hd = 2, n = seq * hd;
  Vec q = random_vec(n, 18), k = random_vec(n, 19), v = random_vec(n, 20), out1(n), out2(n), lse(seq);
  attention_forward(q.data(), k.data(), v.data(), out1.data(), lse.data(), batch, seq, heads, hd);
  k[n - 1] += 3.0f;  // changing the last key and value must not change earlier outputs
  v[n - 2] -= 5.0f;
  attention_forward(q.data(), k.data(), v.data(), out2.data(), lse.data(), batch, seq, heads, hd);
  for (int i = 0; i < (seq - 1) * hd; ++i) EXPECT_FLOAT_EQ(out1[i], out2[i]);
  EXPECT_NE(out1[n - 1], out2[n - 1]);
}

// Full-matrix fp64 attention, forward and backward, layout [batch, seq, heads, hd]: the whole [seq, seq] score
// matrix per head with the upper triangle masked, no row blocks. Gradients are the analytic ones: dV = P^T dO,
// dS = P * (dO V^T - rowsum(dO * O)), dQ = dS K / sqrt(hd), dK = dS^T Q / sqrt(hd).
struct AttentionRef {
  DVec out, lse, dq, dk, dv;
};
AttentionRef attention_full_ref(const DVec& q, const DVec& k, const DVec& v, const DVec& dout, int batch, int seq,
                                int heads, int hd) {
  const int H = heads * hd;
  const double scale = 1.0 / std::sqrt(double(hd));
  AttentionRef r{DVec(q.size(), 0.0), DVec(size_t(batch) * heads * seq), DVec(q.size(), 0.0), DVec(q.size(), 0.0),
                 DVec(q.size(), 0.0)};
  auto at = [&](int b, int i, int h) { return (size_t(b) * seq + i) * H + size_t(h) * hd; };
  DVec p(size_t(seq) * seq), ds(size_t(seq) * seq);
  for (int b = 0; b < batch; ++b)
    for (int h = 0; h < heads; ++h) {
      for (int i = 0; i < seq; ++i) {
        double mx = -1e300;
        for (int j = 0; j < seq; ++j) {
          double d = 0;
          for (int e = 0; e < hd; ++e) d += q[at(b, i, h) + e] * k[at(b, j, h) + e];
          p[size_t(i) * seq + j] = d * scale;
          if (j <= i) mx = std::max(mx, d * scale);
        }
        double z = 0;
        for (int j = 0; j < seq; ++j) {
          double& x = p[size_t(i) * seq + j];
          x = j <= i ? std::exp(x - mx) : 0.0;
          z += x;
        }
        for (int j = 0; j < seq; ++j) p[size_t(i) * seq + j] /= z;
        r.lse[(size_t(b) * heads + h) * seq + i] = mx + std::log(z);
        for (int j = 0; j < seq; ++j)
          for (int e = 0; e < hd; ++e) r.out[at(b, i, h) + e] += p[size_t(i) * seq + j] * v[at(b, j, h) + e];
      }
      for (int i = 0; i < seq; ++i) {
        double di = 0;
        for (int e = 0; e < hd; ++e) di += dout[at(b, i, h) + e] * r.out[at(b, i, h) + e];
        for (int j = 0; j < seq; ++j) {
          double dp = 0;
          for (int e = 0; e < hd; ++e) dp += dout[at(b, i, h) + e] * v[at(b, j, h) + e];
          ds[size_t(i) * seq + j] = p[size_t(i) * seq + j] * (dp - di);
        }
      }
      for (int i = 0; i < seq; ++i)
        for (int j = 0; j < seq; ++j)
          for (int e = 0; e < hd; ++e) {
            const double pij = p[size_t(i) * seq + j], dsij = ds[size_t(i) * seq + j];
            r.dv[at(b, j, h) + e] += pij * dout[at(b, i, h) + e];
            r.dq[at(b, i, h) + e] += scale * dsij * k[at(b, j, h) + e];
            r.dk[at(b, j, h) + e] += scale * dsij * q[at(b, i, h) + e];
          }
    }
  return r;
}

// The row-blocked kernels against the full matrix at lengths below, at and around the block size (a partial last
// block, a single row, several blocks with a remainder).
TEST(CpuAttention, RowBlocksMatchTheFullScoreMatrix) {
  const int B = kAttentionBlockRows;
  for (int seq : {1, B - 1, B, B + 1, 3 * B + 8}) {
    const int batch = 2, heads = 2, hd = 8, n = batch * seq * heads * hd;
    const unsigned seed = 50 + unsigned(seq);
    Vec q = random_vec(n, seed), k = random_vec(n, seed + 1), v = random_vec(n, seed + 2), d = random_vec(n, seed + 3);
    Vec out(n), lse(size_t(batch) * heads * seq), dq(n), dk(n, 7.0f), dv(n, 7.0f);  // dk, dv: overwritten, not added
    attention_forward(q.data(), k.data(), v.data(), out.data(), lse.data(), batch, seq, heads, hd);
    attention_backward(d.data(), q.data(), k.data(), v.data(), out.data(), lse.data(), dq.data(), dk.data(), dv.data(),
                       batch, seq, heads, hd);
    const AttentionRef want = attention_full_ref(to_d(q), to_d(k), to_d(v), to_d(d), batch, seq, heads, hd);
    SCOPED_TRACE("seq " + std::to_string(seq));
    expect_close(out, want.out, 1e-5, "out");
    expect_close(lse, want.lse, 1e-5, "lse");
    // At seq 1 dQ and dK are exactly zero (dS = P (dP - dO.O) with P = 1 and O = V): fp32 leaves the rounding of the
    // unit-sized products that cancel.
    expect_close(dq, want.dq, 1e-4, "dq", 1.0);
    expect_close(dk, want.dk, 1e-4, "dk", 1.0);
    expect_close(dv, want.dv, 1e-4, "dv");
  }
}

double ce_ref(const DVec& logits, const std::vector<int32_t>& t, int rows, int vocab) {
  double total = 0;
  for (int r = 0; r < rows; ++r) {
    double mx = -1e300, z = 0;
    for (int i = 0; i < vocab; ++i) mx = std::max(mx, logits[r * vocab + i]);
    for (int i = 0; i < vocab; ++i) z += std::exp(logits[r * vocab + i] - mx);
    total += mx + std::log(z) - logits[r * vocab + t[r]];
  }
  return total;
}

TEST(CpuCrossEntropy, LossAndGradientMatchReference) {
  const int rows = 4, vocab = 7;
  Vec logits = random_vec(rows * vocab, 21, 3.0f), dl(rows * vocab);
  std::vector<int32_t> t = {0, 6, 3, 3};
  const double loss = cross_entropy(logits.data(), t.data(), dl.data(), rows, vocab, 0.25f);
  const DVec ld = to_d(logits);
  EXPECT_NEAR(loss, ce_ref(ld, t, rows, vocab), 1e-5);
  DVec want = numeric_grad([&](const DVec& x) { return 0.25 * ce_ref(x, t, rows, vocab); }, ld);
  expect_close(dl, want, 1e-4, "dlogits");
  // In place (dlogits == logits) gives the same.
  Vec inplace = logits;
  EXPECT_NEAR(cross_entropy(inplace.data(), t.data(), inplace.data(), rows, vocab, 0.25f), loss, 1e-9);
  for (size_t i = 0; i < dl.size(); ++i) EXPECT_FLOAT_EQ(inplace[i], dl[i]);
}

TEST(CpuEmbedding, GathersRowsAndAccumulatesGradient) {
  const int rows = 5, dim = 3;
  Vec table = random_vec(rows * dim, 22), out(4 * dim), dtable(rows * dim, 0.0f);
  std::vector<int32_t> ids = {4, 1, 4, 0};
  embedding_forward(table.data(), ids.data(), out.data(), 4, dim);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < dim; ++j) EXPECT_EQ(out[i * dim + j], table[ids[i] * dim + j]);
  Vec d(4 * dim, 1.0f);
  embedding_backward(d.data(), ids.data(), dtable.data(), 4, dim);
  for (int j = 0; j < dim; ++j) {
    EXPECT_EQ(dtable[4 * dim + j], 2.0f);
    EXPECT_EQ(dtable[1 * dim + j], 1.0f);
    EXPECT_EQ(dtable[0 * dim + j], 1.0f);
    EXPECT_EQ(dtable[2 * dim + j], 0.0f);
  }
}

TEST(CpuAdamW, MatchesTheFormulaWithBiasCorrection) {
  const int n = 6;
  AdamWConfig cfg;
  cfg.lr = 1e-2f;
  cfg.weight_decay = 0.1f;
  Vec p = random_vec(n, 23), m(n, 0.0f), v(n, 0.0f);
  DVec pd = to_d(p), md(n, 0.0), vd(n, 0.0);
  for (int step = 1; step <= 3; ++step) {
    Vec g = random_vec(n, 100 + step);
    adamw(p.data(), g.data(), m.data(), v.data(), n, cfg, step);
    for (int i = 0; i < n; ++i) {
      md[i] = 0.9 * md[i] + 0.1 * g[i];
      vd[i] = 0.95 * vd[i] + 0.05 * double(g[i]) * g[i];
      const double mh = md[i] / (1 - std::pow(0.9, step)), vh = vd[i] / (1 - std::pow(0.95, step));
      pd[i] -= 1e-2 * (mh / (std::sqrt(vh) + 1e-8) + 0.1 * pd[i]);
    }
  }
  expect_close(p, pd, 1e-5, "adamw params");
  // The first step moves each parameter by about lr (Adam's normalised step), not by lr * grad.
}

// bf16 rounding written out on the bits: keep the top 16, round the dropped 16 to nearest, ties to the even result.
uint16_t round_bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  const uint32_t hi = b >> 16, lo = b & 0xffffu;
  return uint16_t(lo > 0x8000u || (lo == 0x8000u && (hi & 1u)) ? hi + 1 : hi);
}

TEST(CpuMixedPrecision, CastsRoundToNearestEvenAndWidenExactly) {
  // Ties both ways, values next to ties, a power of two, negatives, zero; then random values.
  Vec x = {1.0f, 1.00390625f, 1.01171875f, 1.0039063f, 1.0039062f, -2.5f, 0.0f, -0.0f, 3.0e-3f, 65504.0f};
  const Vec r = random_vec(1000, 7);
  x.insert(x.end(), r.begin(), r.end());
  const int64_t n = int64_t(x.size());
  std::vector<uint16_t> h(static_cast<size_t>(n));
  cast_fp32_to_bf16(x.data(), h.data(), n);
  Vec back(static_cast<size_t>(n));
  cast_bf16_to_fp32(h.data(), back.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(h[i], round_bits(x[i])) << "element " << i << " = " << x[i];
    uint32_t bits;
    std::memcpy(&bits, &back[i], 4);
    ASSERT_EQ(bits, uint32_t(h[i]) << 16) << "widening is the top half";
    ASSERT_LE(std::fabs(back[i] - x[i]), std::fabs(x[i]) / 256) << "half an ulp of 8 bits at most";
  }
  EXPECT_EQ(h[1], round_bits(1.0f)) << "1 + 2^-8 is a tie and rounds to the even 1";
  EXPECT_EQ(h[2], round_bits(1.015625f)) << "1 + 3 * 2^-8 is a tie and rounds up to the even 1 + 2^-6";
}

TEST(CpuMixedPrecision, AccumulationsRoundTheFp32SumOnce) {
  const int64_t n = 777;
  const Vec a = random_vec(n, 11), b = random_vec(n, 12);
  std::vector<uint16_t> ya(static_cast<size_t>(n)), yb(static_cast<size_t>(n));
  cast_fp32_to_bf16(a.data(), ya.data(), n);
  cast_fp32_to_bf16(b.data(), yb.data(), n);
  std::vector<uint16_t> y = ya;
  accumulate_fp32_into_bf16(y.data(), b.data(), n);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y[i], round_bits(bf16_to_float(ya[i]) + b[i]));
  y = ya;
  accumulate_bf16_into_bf16(y.data(), yb.data(), n);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y[i], round_bits(bf16_to_float(ya[i]) + bf16_to_float(yb[i])));
  Vec f = a;
  accumulate_bf16_into_fp32(f.data(), yb.data(), n);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(f[i], a[i] + bf16_to_float(yb[i]));
}

TEST(CpuMixedPrecision, AdamWOnABf16GradientIsAdamWOnItsFp32Value) {
  const int64_t n = 5000;  // more than one internal chunk
  AdamWConfig cfg;
  Vec master = random_vec(n, 31), m(static_cast<size_t>(n), 0.0f), v(static_cast<size_t>(n), 0.0f);
  Vec master2 = master, m2 = m, v2 = v;
  std::vector<uint16_t> out(static_cast<size_t>(n));
  for (int step = 1; step <= 2; ++step) {
    const Vec g = random_vec(n, 40 + step);
    std::vector<uint16_t> gh(static_cast<size_t>(n));
    cast_fp32_to_bf16(g.data(), gh.data(), n);
    Vec gw(static_cast<size_t>(n));
    cast_bf16_to_fp32(gh.data(), gw.data(), n);
    adamw_mixed(master.data(), gh.data(), m.data(), v.data(), out.data(), n, cfg, step);
    adamw(master2.data(), gw.data(), m2.data(), v2.data(), n, cfg, step);
  }
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(master[i], master2[i]);
    ASSERT_EQ(m[i], m2[i]);
    ASSERT_EQ(v[i], v2[i]);
    ASSERT_EQ(out[i], round_bits(master2[i])) << "the bf16 parameter is the rounded master weight";
  }
}

}  // namespace
}  // namespace lins::kernels::cpu
