// Every CUDA kernel of kernels/cuda/ops_cuda.h against its CPU reference (kernels/ops.h) on the same bf16-rounded
// inputs. One case per run (`kernels_gpu_test <case>`, or `all`); exit 0 pass, 1 fail, 77 skipped (no device).
// Tolerances: |gpu - ref| <= atol + rtol * |ref| per element, with atol often a fraction of max|ref|; each case
// states its own and why (bf16 output rounding is 2^-9 relative; fp32 reductions differ only in summation order).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/ops_cuda.h"
#include "kernels/ops.h"

namespace {

namespace gpu = lins::kernels::cuda;
namespace cpu = lins::kernels::cpu;
using gpu::bf16;

// Host bf16 conversions (round to nearest even), independent of the device library.
uint16_t bf16_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
float bf16_value(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
float round_bf16(float f) { return bf16_value(bf16_bits(f)); }

std::vector<float> random_vec(size_t n, float lo, float hi, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = round_bf16(dist(gen));  // representable in bf16, so both sides see the same inputs
  return v;
}

// Device buffer of T with host transfers in fp32 terms (bf16 buffers are converted on the host).
template <class T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t n) : n_(n) { CUDA_CHECK(cudaMalloc(&p_, std::max<size_t>(n, 1) * sizeof(T) + 64)); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { cudaFree(p_); }
  T* get() { return p_; }
  size_t size() const { return n_; }
  void upload(const std::vector<float>& v) {
    if constexpr (std::is_same_v<T, bf16>) {
      std::vector<uint16_t> bits(v.size());
      for (size_t i = 0; i < v.size(); ++i) bits[i] = bf16_bits(v[i]);
      CUDA_CHECK(cudaMemcpy(p_, bits.data(), bits.size() * 2, cudaMemcpyHostToDevice));
    } else if constexpr (std::is_same_v<T, float>) {
      CUDA_CHECK(cudaMemcpy(p_, v.data(), v.size() * 4, cudaMemcpyHostToDevice));
    }
  }
  void upload_raw(const std::vector<T>& v) {
    CUDA_CHECK(cudaMemcpy(p_, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  std::vector<float> download() {
    CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<float> out(n_);
    if constexpr (std::is_same_v<T, bf16>) {
      std::vector<uint16_t> bits(n_);
      CUDA_CHECK(cudaMemcpy(bits.data(), p_, n_ * 2, cudaMemcpyDeviceToHost));
      for (size_t i = 0; i < n_; ++i) out[i] = bf16_value(bits[i]);
    } else {
      CUDA_CHECK(cudaMemcpy(out.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost));
    }
    return out;
  }

 private:
  T* p_ = nullptr;
  size_t n_;
};

double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, static_cast<double>(std::fabs(x)));
  return m;
}

// Prints the worst element and returns whether every element is within atol + rtol * |ref|.
bool close(const char* what, const std::vector<float>& got, const std::vector<float>& ref, double atol, double rtol) {
  if (got.size() != ref.size()) {
    printf("  FAIL %-28s size %zu != %zu\n", what, got.size(), ref.size());
    return false;
  }
  size_t bad = 0, worst = 0;
  double worst_excess = -1e300, max_err = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(static_cast<double>(got[i]) - ref[i]);
    const double allowed = atol + rtol * std::fabs(ref[i]);
    if (!(err <= allowed)) ++bad;  // NaN counts as bad
    if (err - allowed > worst_excess || std::isnan(err)) {
      worst_excess = std::isnan(err) ? 1e300 : err - allowed;
      worst = i;
    }
    if (err > max_err || std::isnan(err)) max_err = err;
  }
  printf("  %s %-28s n=%zu max_err=%.3g (atol %.3g, rtol %.3g) worst[%zu]: got %.6g ref %.6g, %zu out of tolerance\n",
         bad ? "FAIL" : "ok  ", what, got.size(), max_err, atol, rtol, worst, got.empty() ? 0.0 : got[worst],
         ref.empty() ? 0.0 : ref[worst], bad);
  return bad == 0;
}

const cudaStream_t kStream = nullptr;  // legacy default stream: the checks synchronise through cudaMemcpy

// --- cases ----------------------------------------------------------------------------------------------------

bool test_cast() {
  bool ok = true;
  for (size_t n : {size_t{1} << 20, size_t{1000003}}) {
    std::mt19937 gen(1);
    std::normal_distribution<float> dist(0.f, 100.f);
    std::vector<float> x(n);
    for (auto& v : x) v = dist(gen);
    DeviceBuffer<float> xf(n);
    DeviceBuffer<bf16> xb(n);
    xf.upload(x);
    CUDA_CHECK(gpu::cast_fp32_to_bf16(xf.get(), xb.get(), n, kStream));
    std::vector<float> ref(n);
    for (size_t i = 0; i < n; ++i) ref[i] = round_bf16(x[i]);
    ok &= close("fp32->bf16 (exact RNE)", xb.download(), ref, 0, 0);
    CUDA_CHECK(gpu::cast_bf16_to_fp32(xb.get(), xf.get(), n, kStream));
    ok &= close("bf16->fp32 (exact)", xf.download(), ref, 0, 0);
  }
  // Unaligned pointers take the element-wise path.
  const size_t n = 4099;
  std::vector<float> x = random_vec(n + 1, -3, 3, 2);
  DeviceBuffer<float> xf(n + 1);
  DeviceBuffer<bf16> xb(n + 1);
  xf.upload(x);
  CUDA_CHECK(gpu::cast_fp32_to_bf16(xf.get() + 1, xb.get() + 1, n, kStream));
  std::vector<float> got = xb.download();
  ok &= close("fp32->bf16 unaligned", std::vector<float>(got.begin() + 1, got.end()),
              std::vector<float>(x.begin() + 1, x.end()), 0, 0);
  return ok;
}

bool test_fill() {
  bool ok = true;
  const size_t n = 100005;
  DeviceBuffer<float> f(n);
  DeviceBuffer<bf16> b(n);
  CUDA_CHECK(gpu::fill(f.get(), 1.25f, n, kStream));
  CUDA_CHECK(gpu::fill(b.get(), -3.5f, n, kStream));
  ok &= close("fill fp32", f.download(), std::vector<float>(n, 1.25f), 0, 0);
  ok &= close("fill bf16", b.download(), std::vector<float>(n, -3.5f), 0, 0);
  CUDA_CHECK(gpu::fill_uniform(f.get(), n, 7, -2.f, 2.f, kStream));
  std::vector<float> u = f.download();
  const auto [lo, hi] = std::minmax_element(u.begin(), u.end());
  double mean = 0;
  for (float x : u) mean += x;
  mean /= n;
  const bool range_ok = *lo >= -2.f && *hi < 2.f && std::fabs(mean) < 0.05;
  printf("  %s fill_uniform fp32 range [%g, %g) mean %.4g (want within [-2, 2), |mean| < 0.05)\n",
         range_ok ? "ok  " : "FAIL", *lo, *hi, mean);
  ok &= range_ok;
  // Same values for bf16 (rounded) with the same seed.
  CUDA_CHECK(gpu::fill_uniform(b.get(), n, 7, -2.f, 2.f, kStream));
  std::vector<float> ub = b.download(), ref(n);
  for (size_t i = 0; i < n; ++i) ref[i] = round_bf16(u[i]);
  ok &= close("fill_uniform bf16 = rounded fp32", ub, ref, 0, 0);
  return ok;
}

bool test_add_sum() {
  bool ok = true;
  const size_t n = 65541;
  auto a = random_vec(n, -4, 4, 3), b = random_vec(n, -4, 4, 4);
  DeviceBuffer<bf16> da(n), db(n), dc(n);
  da.upload(a);
  db.upload(b);
  CUDA_CHECK(gpu::add(da.get(), db.get(), dc.get(), n, kStream));
  std::vector<float> ref(n);
  for (size_t i = 0; i < n; ++i) ref[i] = round_bf16(a[i] + b[i]);
  ok &= close("add bf16 (exact RNE of fp32 sum)", dc.download(), ref, 0, 0);
  DeviceBuffer<float> x(n);
  x.upload(a);
  DeviceBuffer<double> out(1);
  CUDA_CHECK(gpu::sum(x.get(), n, out.get(), kStream));
  double got = 0, want = 0;
  CUDA_CHECK(cudaMemcpy(&got, out.get(), sizeof(double), cudaMemcpyDeviceToHost));
  for (float v : a) want += v;
  const bool sum_ok = std::fabs(got - want) <= 1e-9 * n;
  printf("  %s sum fp64: got %.12g want %.12g\n", sum_ok ? "ok  " : "FAIL", got, want);
  return ok && sum_ok;
}

bool test_swiglu() {
  bool ok = true;
  for (size_t n : {size_t{1} << 18, size_t{12347}}) {
    auto g = random_vec(n, -6, 6, 5), u = random_vec(n, -3, 3, 6), d = random_vec(n, -2, 2, 7);
    DeviceBuffer<bf16> dg(n), du(n), dout(n), out(n), dgate(n), dup(n);
    dg.upload(g);
    du.upload(u);
    dout.upload(d);
    CUDA_CHECK(gpu::swiglu_forward(dg.get(), du.get(), out.get(), n, kStream));
    CUDA_CHECK(gpu::swiglu_backward(dout.get(), dg.get(), du.get(), dgate.get(), dup.get(), n, kStream));
    std::vector<float> ref(n), rdg(n), rdu(n);
    cpu::swiglu_forward(g.data(), u.data(), ref.data(), n);
    cpu::swiglu_backward(d.data(), g.data(), u.data(), rdg.data(), rdu.data(), n);
    // bf16 output rounding (2^-9) plus __expf: rtol 1e-2; atol for values near zero.
    ok &= close("swiglu forward", out.download(), ref, 1e-3, 1e-2);
    ok &= close("swiglu backward dgate", dgate.download(), rdg, 1e-3, 1e-2);
    ok &= close("swiglu backward dup", dup.download(), rdu, 1e-3, 1e-2);
  }
  return ok;
}

bool test_rmsnorm() {
  bool ok = true;
  struct Shape {
    int64_t rows, dim;
  };
  for (Shape s : {Shape{37, 4096}, Shape{19, 100}, Shape{300, 13312}}) {
    const size_t n = s.rows * s.dim;
    auto x = random_vec(n, -2, 2, 8), w = random_vec(s.dim, 0.5f, 1.5f, 9), dy = random_vec(n, -1, 1, 10);
    DeviceBuffer<bf16> dx_in(n), dw(s.dim), dy_d(n), y(n), dx(n);
    DeviceBuffer<float> rstd(s.rows), dweight(s.dim);
    dx_in.upload(x);
    dw.upload(w);
    dy_d.upload(dy);
    const float eps = 1e-5f;
    std::vector<float> dweight0 = random_vec(s.dim, -1, 1, 11);  // backward accumulates into dweight
    dweight.upload(dweight0);
    CUDA_CHECK(gpu::rmsnorm_forward(dx_in.get(), dw.get(), y.get(), rstd.get(), s.rows, s.dim, eps, kStream));
    CUDA_CHECK(gpu::rmsnorm_backward(dy_d.get(), dx_in.get(), dw.get(), rstd.get(), dx.get(), dweight.get(), s.rows,
                                     s.dim, kStream));
    std::vector<float> ry(n), rr(s.rows), rdx(n), rdw = dweight0;
    cpu::rmsnorm_forward(x.data(), w.data(), ry.data(), rr.data(), s.rows, s.dim, eps);
    cpu::rmsnorm_backward(dy.data(), x.data(), w.data(), rr.data(), rdx.data(), rdw.data(), s.rows, s.dim);
    printf("  shape rows=%lld dim=%lld\n", static_cast<long long>(s.rows), static_cast<long long>(s.dim));
    ok &= close("rmsnorm y (bf16)", y.download(), ry, 1e-3, 1e-2);
    ok &= close("rmsnorm rstd (fp32)", rstd.download(), rr, 0, 1e-5);
    ok &= close("rmsnorm dx (bf16)", dx.download(), rdx, 1e-2 * max_abs(rdx), 1e-2);
    // fp32 sums over rows in another order: 1e-4 of the largest partial.
    ok &= close("rmsnorm dweight (fp32, +=)", dweight.download(), rdw, 1e-4 * max_abs(rdw), 1e-4);
  }
  return ok;
}

bool test_rope() {
  bool ok = true;
  struct Shape {
    int batch, seq, heads, head_dim;
  };
  for (Shape s : {Shape{2, 300, 4, 128}, Shape{1, 4096, 1, 64}, Shape{2, 17, 3, 6}}) {
    const size_t n = static_cast<size_t>(s.batch) * s.seq * s.heads * s.head_dim;
    auto x = random_vec(n, -2, 2, 12);
    DeviceBuffer<bf16> d(n);
    d.upload(x);
    CUDA_CHECK(gpu::rope(d.get(), s.batch, s.seq, s.heads, s.head_dim, 10000.f, false, kStream));
    std::vector<float> ref = x;
    cpu::rope(ref.data(), s.batch, s.seq, s.heads, s.head_dim, 10000.f, false);
    printf("  shape batch=%d seq=%d heads=%d head_dim=%d\n", s.batch, s.seq, s.heads, s.head_dim);
    // Angles in fp32 on the GPU (pos * freq up to 4096 rad: ~5e-4 rad absolute) and bf16 rounding of the result.
    ok &= close("rope forward", d.download(), ref, 1e-2, 1e-2);
    CUDA_CHECK(gpu::rope(d.get(), s.batch, s.seq, s.heads, s.head_dim, 10000.f, true, kStream));
    ok &= close("rope inverse(forward(x)) = x", d.download(), x, 2e-2, 2e-2);
  }
  return ok;
}

bool test_attention() {
  bool ok = true;
  struct Shape {
    int batch, seq, heads, head_dim;
  };
  // head_dim 32/64/128 take the tensor-core path (seq not a multiple of the 64-row tile on purpose); 8 and 48 take
  // the per-row CUDA-core path.
  for (Shape s : {Shape{2, 200, 2, 64}, Shape{1, 130, 2, 128}, Shape{1, 96, 3, 32}, Shape{1, 256, 1, 128},
                  Shape{2, 50, 2, 8}, Shape{1, 70, 2, 48}}) {
    const size_t n = static_cast<size_t>(s.batch) * s.seq * s.heads * s.head_dim;
    const size_t nl = static_cast<size_t>(s.batch) * s.heads * s.seq;
    auto q = random_vec(n, -1.5f, 1.5f, 13), k = random_vec(n, -1.5f, 1.5f, 14), v = random_vec(n, -1, 1, 15);
    auto dout = random_vec(n, -1, 1, 16);
    DeviceBuffer<bf16> dq_in(n), dk_in(n), dv_in(n), dout_d(n), out(n), dq(n), dk(n), dv(n);
    DeviceBuffer<float> lse(nl);
    dq_in.upload(q);
    dk_in.upload(k);
    dv_in.upload(v);
    dout_d.upload(dout);
    CUDA_CHECK(gpu::attention_forward(dq_in.get(), dk_in.get(), dv_in.get(), out.get(), lse.get(), s.batch, s.seq,
                                      s.heads, s.head_dim, kStream));
    const size_t ws_bytes = gpu::attention_backward_workspace_bytes(s.batch, s.seq, s.heads, s.head_dim);
    DeviceBuffer<unsigned char> ws(ws_bytes);
    CUDA_CHECK(gpu::attention_backward(dout_d.get(), dq_in.get(), dk_in.get(), dv_in.get(), out.get(), lse.get(),
                                       dq.get(), dk.get(), dv.get(), s.batch, s.seq, s.heads, s.head_dim, ws.get(),
                                       ws_bytes, kStream));
    std::vector<float> rout(n), rlse(nl), rdq(n), rdk(n), rdv(n);
    cpu::attention_forward(q.data(), k.data(), v.data(), rout.data(), rlse.data(), s.batch, s.seq, s.heads, s.head_dim);
    cpu::attention_backward(dout.data(), q.data(), k.data(), v.data(), rout.data(), rlse.data(), rdq.data(), rdk.data(),
                            rdv.data(), s.batch, s.seq, s.heads, s.head_dim);
    printf("  shape batch=%d seq=%d heads=%d head_dim=%d\n", s.batch, s.seq, s.heads, s.head_dim);
    // Probabilities are rounded to bf16 before the P V and dS products (as flash attention does): a few bf16 ulps
    // on outputs that average many terms, so tolerances scale with max|ref|.
    ok &= close("attention out", out.download(), rout, 1e-2 * max_abs(rout), 2e-2);
    ok &= close("attention lse (fp32)", lse.download(), rlse, 1e-3, 1e-4);
    ok &= close("attention dq", dq.download(), rdq, 3e-2 * max_abs(rdq), 3e-2);
    ok &= close("attention dk", dk.download(), rdk, 3e-2 * max_abs(rdk), 3e-2);
    ok &= close("attention dv", dv.download(), rdv, 3e-2 * max_abs(rdv), 3e-2);
  }
  return ok;
}

bool test_cross_entropy() {
  bool ok = true;
  struct Shape {
    int64_t rows, vocab;
  };
  for (Shape s : {Shape{33, 32000}, Shape{17, 1001}}) {
    const size_t n = s.rows * s.vocab;
    auto logits = random_vec(n, -8, 8, 17);
    std::vector<int32_t> targets(s.rows);
    for (int64_t r = 0; r < s.rows; ++r) targets[r] = static_cast<int32_t>((r * 7919) % s.vocab);
    const float grad_scale = 1.f / static_cast<float>(s.rows);
    DeviceBuffer<bf16> dl(n), dgrad(n);
    DeviceBuffer<int32_t> dt(s.rows);
    DeviceBuffer<float> loss_rows(s.rows);
    DeviceBuffer<double> total(1);
    dl.upload(logits);
    dt.upload_raw(targets);
    CUDA_CHECK(
        gpu::cross_entropy(dl.get(), dt.get(), dgrad.get(), loss_rows.get(), s.rows, s.vocab, grad_scale, kStream));
    CUDA_CHECK(gpu::sum(loss_rows.get(), s.rows, total.get(), kStream));
    std::vector<float> rgrad(n);
    const double want = cpu::cross_entropy(logits.data(), targets.data(), rgrad.data(), s.rows, s.vocab, grad_scale);
    double got = 0;
    CUDA_CHECK(cudaMemcpy(&got, total.get(), sizeof(double), cudaMemcpyDeviceToHost));
    // fp32 online sums with __expf against fp64 on the CPU.
    const bool loss_ok = std::fabs(got - want) <= 1e-4 * std::fabs(want) + 1e-4;
    printf("  %s cross_entropy loss rows=%lld vocab=%lld: got %.9g want %.9g (rtol 1e-4)\n", loss_ok ? "ok  " : "FAIL",
           static_cast<long long>(s.rows), static_cast<long long>(s.vocab), got, want);
    ok &= loss_ok;
    ok &= close("cross_entropy dlogits", dgrad.download(), rgrad, 1e-3 * grad_scale / s.vocab, 1e-2);
    // In place: dlogits aliases logits.
    CUDA_CHECK(gpu::cross_entropy(dl.get(), dt.get(), dl.get(), nullptr, s.rows, s.vocab, grad_scale, kStream));
    ok &= close("cross_entropy dlogits in place", dl.download(), rgrad, 1e-3 * grad_scale / s.vocab, 1e-2);
  }
  return ok;
}

bool test_embedding() {
  bool ok = true;
  const int64_t vocab = 1000, dim = 256, n = 777;
  auto table = random_vec(vocab * dim, -1, 1, 18), dout = random_vec(n * dim, -1, 1, 19);
  std::vector<int32_t> ids(n);
  for (int64_t i = 0; i < n; ++i) ids[i] = static_cast<int32_t>((i * i + 3) % vocab);  // repeats on purpose
  DeviceBuffer<bf16> dtab(vocab * dim), dout_d(n * dim), out(n * dim);
  DeviceBuffer<int32_t> did(n);
  DeviceBuffer<float> dtable(vocab * dim);
  dtab.upload(table);
  dout_d.upload(dout);
  did.upload_raw(ids);
  CUDA_CHECK(gpu::fill(dtable.get(), 0.f, vocab * dim, kStream));
  CUDA_CHECK(gpu::embedding_forward(dtab.get(), did.get(), out.get(), n, dim, kStream));
  CUDA_CHECK(gpu::embedding_backward(dout_d.get(), did.get(), dtable.get(), n, dim, kStream));
  std::vector<float> rout(n * dim), rdt(vocab * dim, 0.f);
  cpu::embedding_forward(table.data(), ids.data(), rout.data(), n, dim);
  cpu::embedding_backward(dout.data(), ids.data(), rdt.data(), n, dim);
  ok &= close("embedding forward (exact)", out.download(), rout, 0, 0);
  ok &= close("embedding backward (fp32 atomics)", dtable.download(), rdt, 1e-6, 1e-6);
  return ok;
}

bool test_adamw() {
  bool ok = true;
  const size_t n = 100003;
  cpu::AdamWConfig cfg;
  cfg.lr = 1e-2f;
  auto master0 = random_vec(n, -1, 1, 20);
  for (int variant = 0; variant < 2; ++variant) {  // 0: fp32 gradients, 1: bf16 gradients with grad_scale
    std::vector<float> master = master0, m(n, 0.f), v(n, 0.f);
    DeviceBuffer<float> dmaster(n), dm(n), dv(n), dgf(n);
    DeviceBuffer<bf16> dgb(n), param(n);
    dmaster.upload(master);
    dm.upload(m);
    dv.upload(v);
    const float grad_scale = variant == 0 ? 1.f : 0.25f;
    for (int step = 1; step <= 3; ++step) {
      auto g = random_vec(n, -1, 1, 100 + step);
      std::vector<float> scaled(n);
      for (size_t i = 0; i < n; ++i) scaled[i] = g[i] * grad_scale;
      if (variant == 0) {
        dgf.upload(g);
        CUDA_CHECK(
            gpu::adamw(dmaster.get(), dgf.get(), dm.get(), dv.get(), param.get(), n, cfg, step, grad_scale, kStream));
      } else {
        dgb.upload(g);
        CUDA_CHECK(
            gpu::adamw(dmaster.get(), dgb.get(), dm.get(), dv.get(), param.get(), n, cfg, step, grad_scale, kStream));
      }
      cpu::adamw(master.data(), scaled.data(), m.data(), v.data(), n, cfg, step);
    }
    printf("  variant %s gradients, 3 steps\n", variant == 0 ? "fp32" : "bf16 (grad_scale 0.25)");
    std::vector<float> got_master = dmaster.download();
    // fp32 arithmetic on both sides; bias corrections computed in fp64 on the GPU side, fp32 on the CPU side.
    ok &= close("adamw master", got_master, master, 1e-6, 1e-5);
    ok &= close("adamw m", dm.download(), m, 1e-7, 1e-5);
    ok &= close("adamw v", dv.download(), v, 1e-9, 1e-5);
    std::vector<float> want_param(n);
    for (size_t i = 0; i < n; ++i) want_param[i] = round_bf16(got_master[i]);
    ok &= close("adamw param = bf16(master) exact", param.download(), want_param, 0, 0);
  }
  return ok;
}

bool test_gemm() {
  bool ok = true;
  gpu::BlasHandle blas;
  CUBLAS_CHECK(gpu::blas_create(&blas));
  const int64_t m = 65, n = 47, k = 130;
  for (int t = 0; t < 4; ++t) {
    const bool ta = t & 1, tb = t & 2;
    auto a = random_vec(m * k, -1, 1, 30 + t), b = random_vec(k * n, -1, 1, 40 + t), c0 = random_vec(m * n, -1, 1, 50);
    DeviceBuffer<bf16> da(m * k), db(k * n), dc(m * n);
    DeviceBuffer<float> dcf(m * n);
    da.upload(a);
    db.upload(b);
    dc.upload(c0);
    dcf.upload(c0);
    CUBLAS_CHECK(gpu::gemm(blas, ta, tb, m, n, k, 0.5f, da.get(), db.get(), 1.0f, dc.get(), kStream));
    CUBLAS_CHECK(gpu::gemm(blas, ta, tb, m, n, k, 0.5f, da.get(), db.get(), 1.0f, dcf.get(), kStream));
    std::vector<float> ref = c0;
    cpu::gemm(ta, tb, m, n, k, 0.5f, a.data(), b.data(), 1.0f, ref.data());
    printf("  trans_a=%d trans_b=%d m=%lld n=%lld k=%lld, alpha 0.5, beta 1\n", ta, tb, static_cast<long long>(m),
           static_cast<long long>(n), static_cast<long long>(k));
    ok &= close("gemm bf16 out", dc.download(), ref, 1e-2 * max_abs(ref), 1e-2);
    ok &= close("gemm fp32 out", dcf.download(), ref, 1e-4 * max_abs(ref), 1e-4);
  }
  gpu::blas_destroy(&blas);
  return ok;
}

// The fp32 overloads the GPU backend's fp32-storage step uses, on bf16-representable inputs. Element-wise and row-wise
// kernels compute in fp32 as the CPU does (fp32 tolerances: summation order, __expf and sincosf); the GEMM rounds its
// inputs to bf16 inside cuBLAS (exact here) and accumulates in fp32; attention runs the bf16 kernels on rounded
// copies, so it keeps the bf16 attention case's tolerances.
bool test_fp32_storage() {
  bool ok = true;
  {  // gemm, CUBLAS_COMPUTE_32F_FAST_16BF
    gpu::BlasHandle blas;
    CUBLAS_CHECK(gpu::blas_create(&blas));
    const int64_t m = 65, n = 47, k = 130;
    for (int t = 0; t < 4; ++t) {
      const bool ta = t & 1, tb = t & 2;
      auto a = random_vec(m * k, -1, 1, 60 + t), b = random_vec(k * n, -1, 1, 70 + t);
      auto c0 = random_vec(m * n, -1, 1, 80);
      DeviceBuffer<float> da(m * k), db(k * n), dc(m * n);
      da.upload(a);
      db.upload(b);
      dc.upload(c0);
      CUBLAS_CHECK(gpu::gemm(blas, ta, tb, m, n, k, 0.5f, da.get(), db.get(), 1.0f, dc.get(), kStream));
      std::vector<float> ref = c0;
      cpu::gemm(ta, tb, m, n, k, 0.5f, a.data(), b.data(), 1.0f, ref.data());
      ok &= close("gemm fp32 (bf16 multiplies)", dc.download(), ref, 1e-4 * max_abs(ref), 1e-4);
    }
    gpu::blas_destroy(&blas);
  }
  {  // rmsnorm, swiglu, add
    const int64_t rows = 37, dim = 264, n = rows * dim;
    auto x = random_vec(n, -2, 2, 90), w = random_vec(dim, 0.5f, 1.5f, 91), dy = random_vec(n, -1, 1, 92);
    DeviceBuffer<float> dx_in(n), dw(dim), y(n), rstd(rows), ddy(n), dx(n), dwg(dim);
    dx_in.upload(x);
    dw.upload(w);
    ddy.upload(dy);
    dwg.upload(std::vector<float>(dim, 0.f));
    CUDA_CHECK(gpu::rmsnorm_forward(dx_in.get(), dw.get(), y.get(), rstd.get(), rows, dim, 1e-5f, kStream));
    CUDA_CHECK(
        gpu::rmsnorm_backward(ddy.get(), dx_in.get(), dw.get(), rstd.get(), dx.get(), dwg.get(), rows, dim, kStream));
    std::vector<float> ry(n), rr(rows), rdx(n), rdw(dim, 0.f);
    cpu::rmsnorm_forward(x.data(), w.data(), ry.data(), rr.data(), rows, dim, 1e-5f);
    cpu::rmsnorm_backward(dy.data(), x.data(), w.data(), rr.data(), rdx.data(), rdw.data(), rows, dim);
    ok &= close("rmsnorm fp32 y", y.download(), ry, 1e-5, 1e-5);
    ok &= close("rmsnorm fp32 dx", dx.download(), rdx, 1e-5 * max_abs(rdx), 1e-4);
    ok &= close("rmsnorm fp32 dweight", dwg.download(), rdw, 1e-5 * max_abs(rdw), 1e-4);
    DeviceBuffer<float> out(n), dg(n), du(n);
    CUDA_CHECK(gpu::swiglu_forward(dx_in.get(), ddy.get(), out.get(), n, kStream));
    CUDA_CHECK(gpu::swiglu_backward(ddy.get(), dx_in.get(), ddy.get(), dg.get(), du.get(), n, kStream));
    std::vector<float> ro(n), rg(n), ru(n);
    cpu::swiglu_forward(x.data(), dy.data(), ro.data(), n);
    cpu::swiglu_backward(dy.data(), x.data(), dy.data(), rg.data(), ru.data(), n);
    ok &= close("swiglu fp32 out", out.download(), ro, 1e-5, 1e-4);  // __expf against exp_poly
    ok &= close("swiglu fp32 dgate", dg.download(), rg, 1e-5, 1e-4);
    ok &= close("swiglu fp32 dup", du.download(), ru, 1e-5, 1e-4);
    CUDA_CHECK(gpu::add(dx_in.get(), ddy.get(), dx_in.get(), n, kStream));
    std::vector<float> rs(n);
    for (int64_t i = 0; i < n; ++i) rs[i] = x[i] + dy[i];
    ok &= close("add fp32", dx_in.download(), rs, 0, 0);
  }
  {  // rope (fp32 angles on the GPU, fp64 tables on the CPU: positions up to 300 rad lose ~3e-5 rad)
    const int b = 2, sq = 300, h = 2, hd = 16;
    const int64_t n = int64_t(b) * sq * h * hd;
    auto x = random_vec(n, -1, 1, 93);
    DeviceBuffer<float> dx(n);
    dx.upload(x);
    CUDA_CHECK(gpu::rope(dx.get(), b, sq, h, hd, 10000.f, false, kStream));
    std::vector<float> r = x;
    cpu::rope(r.data(), b, sq, h, hd, 10000.f, false);
    ok &= close("rope fp32", dx.download(), r, 2e-4, 1e-4);
  }
  {  // cross-entropy and embedding
    const int64_t rows = 19, vocab = 1003, dim = 40;
    auto logits = random_vec(rows * vocab, -4, 4, 94);
    std::vector<int32_t> targets(rows);
    for (int64_t r = 0; r < rows; ++r) targets[r] = int32_t((r * 131) % vocab);
    DeviceBuffer<float> dl(rows * vocab), loss_rows(rows);
    DeviceBuffer<int32_t> dt(rows);
    DeviceBuffer<double> total(1);
    dl.upload(logits);
    dt.upload_raw(targets);
    CUDA_CHECK(cudaMemset(total.get(), 0, sizeof(double)));
    CUDA_CHECK(gpu::cross_entropy(dl.get(), dt.get(), dl.get(), loss_rows.get(), rows, vocab, 0.5f, kStream));
    CUDA_CHECK(gpu::sum_accumulate(loss_rows.get(), rows, total.get(), kStream));
    CUDA_CHECK(gpu::sum_accumulate(loss_rows.get(), rows, total.get(), kStream));  // accumulates: twice the sum
    std::vector<float> rd(rows * vocab);
    const double rloss = cpu::cross_entropy(logits.data(), targets.data(), rd.data(), rows, vocab, 0.5f);
    ok &= close("cross_entropy fp32 dlogits", dl.download(), rd, 1e-6, 1e-4);
    double got = 0;
    CUDA_CHECK(cudaMemcpy(&got, total.get(), sizeof(double), cudaMemcpyDeviceToHost));
    ok &= close("cross_entropy fp32 2x loss", {float(got)}, {float(2 * rloss)}, 1e-4, 1e-5);
    auto table = random_vec(vocab * dim, -1, 1, 95), dout = random_vec(rows * dim, -1, 1, 96);
    DeviceBuffer<float> dtab(vocab * dim), out(rows * dim), ddo(rows * dim), dgrad(vocab * dim);
    dtab.upload(table);
    ddo.upload(dout);
    dgrad.upload(std::vector<float>(vocab * dim, 0.f));
    CUDA_CHECK(gpu::embedding_forward(dtab.get(), dt.get(), out.get(), rows, dim, kStream));
    CUDA_CHECK(gpu::embedding_backward(ddo.get(), dt.get(), dgrad.get(), rows, dim, kStream));
    std::vector<float> ro(rows * dim), rg(vocab * dim, 0.f);
    cpu::embedding_forward(table.data(), targets.data(), ro.data(), rows, dim);
    cpu::embedding_backward(dout.data(), targets.data(), rg.data(), rows, dim);
    ok &= close("embedding fp32 out", out.download(), ro, 0, 0);
    ok &= close("embedding fp32 dtable", dgrad.download(), rg, 1e-6, 1e-6);
  }
  {  // attention through the fp32 entry points (tensor-core head_dim 64 and the per-row path)
    struct Shape {
      int batch, seq, heads, head_dim;
    };
    for (Shape s : {Shape{1, 130, 2, 64}, Shape{2, 50, 2, 8}}) {
      const size_t n = size_t(s.batch) * s.seq * s.heads * s.head_dim, nl = size_t(s.batch) * s.heads * s.seq;
      auto q = random_vec(n, -1.5f, 1.5f, 97), k = random_vec(n, -1.5f, 1.5f, 98), v = random_vec(n, -1, 1, 99);
      auto dout = random_vec(n, -1, 1, 100);
      DeviceBuffer<float> dq_in(n), dk_in(n), dv_in(n), dd(n), out(n), lse(nl), dq(n), dk(n), dv(n);
      dq_in.upload(q);
      dk_in.upload(k);
      dv_in.upload(v);
      dd.upload(dout);
      const size_t fw = gpu::attention_forward_fp32_workspace_bytes(s.batch, s.seq, s.heads, s.head_dim);
      const size_t bw = gpu::attention_backward_fp32_workspace_bytes(s.batch, s.seq, s.heads, s.head_dim);
      DeviceBuffer<unsigned char> wsf(fw), wsb(bw);
      CUDA_CHECK(gpu::attention_forward(dq_in.get(), dk_in.get(), dv_in.get(), out.get(), lse.get(), s.batch, s.seq,
                                        s.heads, s.head_dim, wsf.get(), fw, kStream));
      CUDA_CHECK(gpu::attention_backward(dd.get(), dq_in.get(), dk_in.get(), dv_in.get(), out.get(), lse.get(),
                                         dq.get(), dk.get(), dv.get(), s.batch, s.seq, s.heads, s.head_dim, wsb.get(),
                                         bw, kStream));
      std::vector<float> rout(n), rlse(nl), rdq(n), rdk(n), rdv(n);
      cpu::attention_forward(q.data(), k.data(), v.data(), rout.data(), rlse.data(), s.batch, s.seq, s.heads,
                             s.head_dim);
      cpu::attention_backward(dout.data(), q.data(), k.data(), v.data(), rout.data(), rlse.data(), rdq.data(),
                              rdk.data(), rdv.data(), s.batch, s.seq, s.heads, s.head_dim);
      printf("  attention fp32 shape batch=%d seq=%d heads=%d head_dim=%d\n", s.batch, s.seq, s.heads, s.head_dim);
      ok &= close("attention fp32 out", out.download(), rout, 1e-2 * max_abs(rout), 2e-2);
      ok &= close("attention fp32 lse", lse.download(), rlse, 1e-3, 1e-4);
      ok &= close("attention fp32 dq", dq.download(), rdq, 3e-2 * max_abs(rdq), 3e-2);
      ok &= close("attention fp32 dk", dk.download(), rdk, 3e-2 * max_abs(rdk), 3e-2);
      ok &= close("attention fp32 dv", dv.download(), rdv, 3e-2 * max_abs(rdv), 3e-2);
    }
  }
  return ok;
}

struct Case {
  const char* name;
  std::function<bool()> run;
};

const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      {"cast", test_cast},           {"fill", test_fill},
      {"add_sum", test_add_sum},     {"swiglu", test_swiglu},
      {"rmsnorm", test_rmsnorm},     {"rope", test_rope},
      {"attention", test_attention}, {"cross_entropy", test_cross_entropy},
      {"embedding", test_embedding}, {"adamw", test_adamw},
      {"gemm", test_gemm},           {"fp32_storage", test_fp32_storage},
  };
  return all;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string which = argc > 1 ? argv[1] : "all";
  if (which == "--list") {
    for (const auto& c : cases()) printf("%s\n", c.name);
    return 0;
  }
  if (gpu::device_count() == 0) {
    printf("SKIPPED: no CUDA device (cudaGetDeviceCount reports none or no driver); GPU kernel tests need one\n");
    return 77;
  }
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  printf("device 0: %s, compute capability %d.%d\n", prop.name, prop.major, prop.minor);
  bool ok = true, found = false;
  for (const auto& c : cases()) {
    if (which != "all" && which != c.name) continue;
    found = true;
    printf("[%s]\n", c.name);
    const bool pass = c.run();
    printf("[%s] %s\n", c.name, pass ? "PASS" : "FAIL");
    ok &= pass;
  }
  if (!found) {
    fprintf(stderr, "unknown case '%s' (try --list)\n", which.c_str());
    return 2;
  }
  return ok ? 0 : 1;
}
