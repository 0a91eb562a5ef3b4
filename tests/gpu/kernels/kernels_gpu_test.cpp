// Every CUDA kernel of kernels/cuda/ops_cuda.h against its CPU reference (kernels/ops.h) on the same bf16-rounded
// inputs. One case per run (`kernels_gpu_test <case>`, or `all`); exit 0 pass, 1 fail, 77 skipped (no device).
// Tolerances: |gpu - ref| <= atol + rtol * |ref| per element, with atol often a fraction of max|ref|; each case
// states its own and why (bf16 output rounding is 2^-9 relative; fp32 reductions differ only in summation order).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "host_check.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/ops_cuda.h"
#include "kernels/ops.h"

namespace {

namespace gpu = lins::kernels::cuda;
namespace cpu = lins::kernels::cpu;
using gpu::bf16;
using lins::kernel_test::bf16_bits;
using lins::kernel_test::bf16_value;
using lins::kernel_test::close;
using lins::kernel_test::max_abs;
using lins::kernel_test::random_vec;
using lins::kernel_test::round_bf16;

// --- device memory with guards -------------------------------------------------------------------------------
// Every test allocation is framed by kGuardBytes of a known pattern before and after its elements (no slack: the tail
// guard starts at the first byte past the last element). After every kernel call (KERNEL_CHECK, BLAS_KERNEL_CHECK)
// and when a buffer is released, the guards of every live buffer are read back; a changed byte fails the case, naming
// the buffer, the side, how far from the buffer it lies and the call after which it was found (the guard is then
// restored, so a later report is the later call's). A write past either end by up to kGuardBytes is caught whether or
// not it would fault. LINS_KERNEL_TEST_GUARDS=0 allocates the elements alone, for compute-sanitizer memcheck, which
// then flags any access (read or write) outside them.
constexpr size_t kGuardBytes = 256;  // a multiple of cudaMalloc's 256-byte alignment: the elements keep it
constexpr unsigned char kGuardByte = 0xa5;
bool g_guard_failed = false;  // read (and cleared) by main() after each case

bool guards_enabled() {
  static const bool on = [] {
    const char* e = std::getenv("LINS_KERNEL_TEST_GUARDS");
    return !(e && std::string(e) == "0");
  }();
  return on;
}

// The function a call's text names: "gpu::attention_backward(dout_d.get(), ...)" -> "gpu::attention_backward".
std::string call_name(const char* call) {
  std::string c(call);
  const size_t open = c.find('(');
  c = c.substr(0, open);
  c.erase(0, c.find_first_not_of(" \t\n"));
  return c;
}

class GuardedAlloc {
 public:
  GuardedAlloc(size_t bytes, std::string name)
      : bytes_(bytes), guard_(guards_enabled() ? kGuardBytes : 0), name_(std::move(name)) {
    CUDA_CHECK(cudaMalloc(&base_, std::max<size_t>(bytes_ + 2 * guard_, 1)));
    restore();
    live().push_back(this);
  }
  GuardedAlloc(const GuardedAlloc&) = delete;
  GuardedAlloc& operator=(const GuardedAlloc&) = delete;
  ~GuardedAlloc() {
    check("the release of the buffer");
    live().erase(std::find(live().begin(), live().end(), this));
    cudaFree(base_);
  }
  void* data() { return base_ + guard_; }
  size_t bytes() const { return bytes_; }

  // Whether both guards still hold the pattern; reports and restores them otherwise.
  bool check(const std::string& after) {
    if (guard_ == 0) return true;
    std::vector<unsigned char> front(guard_), back(guard_);
    const cudaError_t e1 = cudaMemcpy(front.data(), base_, guard_, cudaMemcpyDeviceToHost);
    const cudaError_t e2 = cudaMemcpy(back.data(), base_ + guard_ + bytes_, guard_, cudaMemcpyDeviceToHost);
    if (e1 != cudaSuccess || e2 != cudaSuccess) {
      printf("  FAIL guards of buffer '%s': cannot read them back after %s: %s\n", name_.c_str(), after.c_str(),
             cudaGetErrorString(e1 != cudaSuccess ? e1 : e2));
      g_guard_failed = true;
      return false;
    }
    bool ok = true;
    for (int side = 0; side < 2; ++side) {
      const std::vector<unsigned char>& g = side == 0 ? front : back;
      size_t changed = 0, nearest = 0;
      for (size_t i = 0; i < guard_; ++i) {
        if (g[i] == kGuardByte) continue;
        // Distance from the elements: the front guard's last byte is 1 byte before them, the back guard's first
        // byte 0 bytes past their end.
        const size_t d = side == 0 ? guard_ - i : i;
        if (changed++ == 0 || d < nearest) nearest = d;
      }
      if (changed == 0) continue;
      ok = false;
      if (side == 0)
        printf(
            "  FAIL guard of buffer '%s' (%zu bytes): %zu of the %zu guard bytes before it changed (found after "
            "%s), the nearest %zu byte%s before its first element\n",
            name_.c_str(), bytes_, changed, guard_, after.c_str(), nearest, nearest == 1 ? "" : "s");
      else
        printf(
            "  FAIL guard of buffer '%s' (%zu bytes): %zu of the %zu guard bytes after it changed (found after "
            "%s), the nearest at byte %zu past its end (0: the first byte after its last element)\n",
            name_.c_str(), bytes_, changed, guard_, after.c_str(), nearest);
    }
    if (!ok) {
      g_guard_failed = true;
      restore();
    }
    return ok;
  }

  // Every live buffer's guards, after `call`.
  static bool check_all(const char* call) {
    bool ok = true;
    const std::string after = call_name(call);
    for (GuardedAlloc* a : live()) ok &= a->check(after);
    return ok;
  }

 private:
  static std::vector<GuardedAlloc*>& live() {
    static std::vector<GuardedAlloc*> all;
    return all;
  }
  void restore() {
    if (guard_ == 0) return;
    CUDA_CHECK(cudaMemset(base_, kGuardByte, guard_));
    CUDA_CHECK(cudaMemset(base_ + guard_ + bytes_, kGuardByte, guard_));
    CUDA_CHECK(cudaDeviceSynchronize());
  }

  unsigned char* base_ = nullptr;
  size_t bytes_, guard_;
  std::string name_;
};

// A kernel (or cuBLAS) call: its status, then the guards of every live buffer.
#define KERNEL_CHECK(call)          \
  do {                              \
    CUDA_CHECK(call);               \
    GuardedAlloc::check_all(#call); \
  } while (0)
#define BLAS_KERNEL_CHECK(call)     \
  do {                              \
    CUBLAS_CHECK(call);             \
    GuardedAlloc::check_all(#call); \
  } while (0)

// Device buffer of n elements of T with host transfers in fp32 terms (bf16 buffers are converted on the host).
template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer(size_t n, const char* name) : n_(n), mem_(n * sizeof(T), name) {}
  T* get() { return static_cast<T*>(mem_.data()); }
  size_t size() const { return n_; }
  void upload(const std::vector<float>& v) {
    fits(v.size());
    if constexpr (std::is_same_v<T, bf16>) {
      std::vector<uint16_t> bits(v.size());
      for (size_t i = 0; i < v.size(); ++i) bits[i] = bf16_bits(v[i]);
      CUDA_CHECK(cudaMemcpy(get(), bits.data(), bits.size() * 2, cudaMemcpyHostToDevice));
    } else if constexpr (std::is_same_v<T, float>) {
      CUDA_CHECK(cudaMemcpy(get(), v.data(), v.size() * 4, cudaMemcpyHostToDevice));
    }
  }
  void upload_raw(const std::vector<T>& v) {
    fits(v.size());
    CUDA_CHECK(cudaMemcpy(get(), v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  std::vector<float> download() {
    CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<float> out(n_);
    if constexpr (std::is_same_v<T, bf16>) {
      std::vector<uint16_t> bits(n_);
      CUDA_CHECK(cudaMemcpy(bits.data(), get(), n_ * 2, cudaMemcpyDeviceToHost));
      for (size_t i = 0; i < n_; ++i) out[i] = bf16_value(bits[i]);
    } else {
      CUDA_CHECK(cudaMemcpy(out.data(), get(), n_ * sizeof(T), cudaMemcpyDeviceToHost));
    }
    return out;
  }

 private:
  void fits(size_t m) const {  // a test that uploads more than it allocated is wrong itself
    if (m <= n_) return;
    fprintf(stderr, "test bug: %zu elements uploaded into a buffer of %zu\n", m, n_);
    std::abort();
  }
  size_t n_;
  GuardedAlloc mem_;
};

const cudaStream_t kStream = nullptr;  // legacy default stream: the checks synchronise through cudaMemcpy

// --- cases ----------------------------------------------------------------------------------------------------

bool test_cast() {
  bool ok = true;
  for (size_t n : {size_t{1} << 20, size_t{1000003}}) {
    std::mt19937 gen(1);
    std::normal_distribution<float> dist(0.f, 100.f);
    std::vector<float> x(n);
    for (auto& v : x) v = dist(gen);
    DeviceBuffer<float> xf(n, "xf");
    DeviceBuffer<bf16> xb(n, "xb");
    xf.upload(x);
    KERNEL_CHECK(gpu::cast_fp32_to_bf16(xf.get(), xb.get(), n, kStream));
    std::vector<float> ref(n);
    for (size_t i = 0; i < n; ++i) ref[i] = round_bf16(x[i]);
    ok &= close("fp32->bf16 (exact RNE)", xb.download(), ref, 0, 0);
    KERNEL_CHECK(gpu::cast_bf16_to_fp32(xb.get(), xf.get(), n, kStream));
    ok &= close("bf16->fp32 (exact)", xf.download(), ref, 0, 0);
  }
  // Pointers one element past a 16-byte boundary: a 7-element head one at a time, then the vector body (the convert
  // case covers disagreeing offsets, which take the element-wise path throughout).
  const size_t n = 4099;
  std::vector<float> x = random_vec(n + 1, -3, 3, 2);
  DeviceBuffer<float> xf(n + 1, "xf");
  DeviceBuffer<bf16> xb(n + 1, "xb");
  xf.upload(x);
  KERNEL_CHECK(gpu::cast_fp32_to_bf16(xf.get() + 1, xb.get() + 1, n, kStream));
  std::vector<float> got = xb.download();
  ok &= close("fp32->bf16 unaligned", std::vector<float>(got.begin() + 1, got.end()),
              std::vector<float>(x.begin() + 1, x.end()), 0, 0);
  return ok;
}

bool test_fill() {
  bool ok = true;
  const size_t n = 100005;
  DeviceBuffer<float> f(n, "f");
  DeviceBuffer<bf16> b(n, "b");
  KERNEL_CHECK(gpu::fill(f.get(), 1.25f, n, kStream));
  KERNEL_CHECK(gpu::fill(b.get(), -3.5f, n, kStream));
  ok &= close("fill fp32", f.download(), std::vector<float>(n, 1.25f), 0, 0);
  ok &= close("fill bf16", b.download(), std::vector<float>(n, -3.5f), 0, 0);
  KERNEL_CHECK(gpu::fill_uniform(f.get(), n, 7, -2.f, 2.f, kStream));
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
  KERNEL_CHECK(gpu::fill_uniform(b.get(), n, 7, -2.f, 2.f, kStream));
  std::vector<float> ub = b.download(), ref(n);
  for (size_t i = 0; i < n; ++i) ref[i] = round_bf16(u[i]);
  ok &= close("fill_uniform bf16 = rounded fp32", ub, ref, 0, 0);
  return ok;
}

bool test_add_sum() {
  bool ok = true;
  const size_t n = 65541;
  auto a = random_vec(n, -4, 4, 3), b = random_vec(n, -4, 4, 4);
  DeviceBuffer<bf16> da(n, "da"), db(n, "db"), dc(n, "dc");
  da.upload(a);
  db.upload(b);
  KERNEL_CHECK(gpu::add(da.get(), db.get(), dc.get(), n, kStream));
  std::vector<float> ref(n);
  for (size_t i = 0; i < n; ++i) ref[i] = round_bf16(a[i] + b[i]);
  ok &= close("add bf16 (exact RNE of fp32 sum)", dc.download(), ref, 0, 0);
  DeviceBuffer<float> x(n, "x");
  x.upload(a);
  DeviceBuffer<double> out(1, "out");
  KERNEL_CHECK(gpu::sum(x.get(), n, out.get(), kStream));
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
    DeviceBuffer<bf16> dg(n, "dg"), du(n, "du"), dout(n, "dout"), out(n, "out"), dgate(n, "dgate"), dup(n, "dup");
    dg.upload(g);
    du.upload(u);
    dout.upload(d);
    KERNEL_CHECK(gpu::swiglu_forward(dg.get(), du.get(), out.get(), n, kStream));
    KERNEL_CHECK(gpu::swiglu_backward(dout.get(), dg.get(), du.get(), dgate.get(), dup.get(), n, kStream));
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
  // dim 12288: the backward's dweight partials (48 KB) plus its static scratch need the shared-memory opt-in too.
  for (Shape s : {Shape{37, 4096}, Shape{19, 100}, Shape{300, 13312}, Shape{5, 12288}}) {
    const size_t n = s.rows * s.dim;
    auto x = random_vec(n, -2, 2, 8), w = random_vec(s.dim, 0.5f, 1.5f, 9), dy = random_vec(n, -1, 1, 10);
    DeviceBuffer<bf16> dx_in(n, "dx_in"), dw(s.dim, "dw"), dy_d(n, "dy_d"), y(n, "y"), dx(n, "dx");
    DeviceBuffer<float> rstd(s.rows, "rstd"), dweight(s.dim, "dweight");
    dx_in.upload(x);
    dw.upload(w);
    dy_d.upload(dy);
    const float eps = 1e-5f;
    std::vector<float> dweight0 = random_vec(s.dim, -1, 1, 11);  // backward accumulates into dweight
    dweight.upload(dweight0);
    KERNEL_CHECK(gpu::rmsnorm_forward(dx_in.get(), dw.get(), y.get(), rstd.get(), s.rows, s.dim, eps, kStream));
    KERNEL_CHECK(gpu::rmsnorm_backward(dy_d.get(), dx_in.get(), dw.get(), rstd.get(), dx.get(), dweight.get(), s.rows,
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
    DeviceBuffer<bf16> d(n, "d");
    d.upload(x);
    KERNEL_CHECK(gpu::rope(d.get(), s.batch, s.seq, s.heads, s.head_dim, 10000.f, false, kStream));
    std::vector<float> ref = x;
    cpu::rope(ref.data(), s.batch, s.seq, s.heads, s.head_dim, 10000.f, false);
    printf("  shape batch=%d seq=%d heads=%d head_dim=%d\n", s.batch, s.seq, s.heads, s.head_dim);
    // Angles in fp32 on the GPU (pos * freq up to 4096 rad: ~5e-4 rad absolute) and bf16 rounding of the result.
    ok &= close("rope forward", d.download(), ref, 1e-2, 1e-2);
    KERNEL_CHECK(gpu::rope(d.get(), s.batch, s.seq, s.heads, s.head_dim, 10000.f, true, kStream));
    ok &= close("rope inverse(forward(x)) = x", d.download(), x, 2e-2, 2e-2);
  }
  return ok;
}

struct AttentionShape {
  int batch, seq, heads, head_dim;
};

// The bf16 flash attention forward and backward on one shape against cpu::attention_* on every row of every head.
bool attention_case(AttentionShape s) {
  const size_t n = static_cast<size_t>(s.batch) * s.seq * s.heads * s.head_dim;
  const size_t nl = static_cast<size_t>(s.batch) * s.heads * s.seq;
  auto q = random_vec(n, -1.5f, 1.5f, 13), k = random_vec(n, -1.5f, 1.5f, 14), v = random_vec(n, -1, 1, 15);
  auto dout = random_vec(n, -1, 1, 16);
  DeviceBuffer<bf16> dq_in(n, "q"), dk_in(n, "k"), dv_in(n, "v"), dout_d(n, "dout"), out(n, "out"), dq(n, "dq"),
      dk(n, "dk"), dv(n, "dv");
  DeviceBuffer<float> lse(nl, "lse");
  dq_in.upload(q);
  dk_in.upload(k);
  dv_in.upload(v);
  dout_d.upload(dout);
  KERNEL_CHECK(gpu::attention_forward(dq_in.get(), dk_in.get(), dv_in.get(), out.get(), lse.get(), s.batch, s.seq,
                                      s.heads, s.head_dim, kStream));
  const size_t ws_bytes = gpu::attention_backward_workspace_bytes(s.batch, s.seq, s.heads, s.head_dim);
  DeviceBuffer<unsigned char> ws(ws_bytes, "workspace");
  KERNEL_CHECK(gpu::attention_backward(dout_d.get(), dq_in.get(), dk_in.get(), dv_in.get(), out.get(), lse.get(),
                                       dq.get(), dk.get(), dv.get(), s.batch, s.seq, s.heads, s.head_dim, ws.get(),
                                       ws_bytes, kStream));
  std::vector<float> rout(n), rlse(nl), rdq(n), rdk(n), rdv(n);
  cpu::attention_forward(q.data(), k.data(), v.data(), rout.data(), rlse.data(), s.batch, s.seq, s.heads, s.head_dim);
  cpu::attention_backward(dout.data(), q.data(), k.data(), v.data(), rout.data(), rlse.data(), rdq.data(), rdk.data(),
                          rdv.data(), s.batch, s.seq, s.heads, s.head_dim);
  printf("  shape batch=%d seq=%d heads=%d head_dim=%d\n", s.batch, s.seq, s.heads, s.head_dim);
  // Probabilities are rounded to bf16 before the P V and dS products (as flash attention does): a few bf16 ulps
  // on outputs that average many terms, so tolerances scale with max|ref|.
  bool ok = true;
  ok &= close("attention out", out.download(), rout, 1e-2 * max_abs(rout), 2e-2);
  ok &= close("attention lse (fp32)", lse.download(), rlse, 1e-3, 1e-4);
  ok &= close("attention dq", dq.download(), rdq, 3e-2 * max_abs(rdq), 3e-2);
  ok &= close("attention dk", dk.download(), rdk, 3e-2 * max_abs(rdk), 3e-2);
  ok &= close("attention dv", dv.download(), rdv, 3e-2 * max_abs(rdv), 3e-2);
  return ok;
}

bool test_attention() {
  bool ok = true;
  // head_dim 32/64/128 take the tensor-core path (seq not a multiple of the 64-row tile on purpose); 8 and 48 take
  // the per-row CUDA-core path.
  for (AttentionShape s : {AttentionShape{2, 200, 2, 64}, AttentionShape{1, 130, 2, 128}, AttentionShape{1, 96, 3, 32},
                           AttentionShape{1, 256, 1, 128}, AttentionShape{2, 50, 2, 8}, AttentionShape{1, 70, 2, 48}})
    ok &= attention_case(s);
  return ok;
}

// The sequence lengths of the step (LLaMA-7B's 4096, and 2048) at head_dim 128, where the short shapes above leave
// untested what only long rows do: many key tiles per query tile (64 at seq 4096) in the online softmax, the causal
// mask on the last tile of a long row, dK and dV summed over thousands of query rows, and the workspace of a long
// sequence. Batch 1, 4 heads; every row of every head is checked, the same tolerances as the short shapes. The CPU
// reference is blocked sgemm over the causal lower triangle: under 1 s for both shapes on one core.
bool test_attention_long() {
  bool ok = true;
  for (AttentionShape s : {AttentionShape{1, 2048, 4, 128}, AttentionShape{1, 4096, 4, 128}}) ok &= attention_case(s);
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
    DeviceBuffer<bf16> dl(n, "dl"), dgrad(n, "dgrad");
    DeviceBuffer<int32_t> dt(s.rows, "dt");
    DeviceBuffer<float> loss_rows(s.rows, "loss_rows");
    DeviceBuffer<double> total(1, "total");
    dl.upload(logits);
    dt.upload_raw(targets);
    KERNEL_CHECK(
        gpu::cross_entropy(dl.get(), dt.get(), dgrad.get(), loss_rows.get(), s.rows, s.vocab, grad_scale, kStream));
    KERNEL_CHECK(gpu::sum(loss_rows.get(), s.rows, total.get(), kStream));
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
    KERNEL_CHECK(gpu::cross_entropy(dl.get(), dt.get(), dl.get(), nullptr, s.rows, s.vocab, grad_scale, kStream));
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
  DeviceBuffer<bf16> dtab(vocab * dim, "dtab"), dout_d(n * dim, "dout_d"), out(n * dim, "out");
  DeviceBuffer<int32_t> did(n, "did");
  DeviceBuffer<float> dtable(vocab * dim, "dtable");
  dtab.upload(table);
  dout_d.upload(dout);
  did.upload_raw(ids);
  KERNEL_CHECK(gpu::fill(dtable.get(), 0.f, vocab * dim, kStream));
  KERNEL_CHECK(gpu::embedding_forward(dtab.get(), did.get(), out.get(), n, dim, kStream));
  KERNEL_CHECK(gpu::embedding_backward(dout_d.get(), did.get(), dtable.get(), n, dim, kStream));
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
    DeviceBuffer<float> dmaster(n, "dmaster"), dm(n, "dm"), dv(n, "dv"), dgf(n, "dgf");
    DeviceBuffer<bf16> dgb(n, "dgb"), param(n, "param");
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
        KERNEL_CHECK(
            gpu::adamw(dmaster.get(), dgf.get(), dm.get(), dv.get(), param.get(), n, cfg, step, grad_scale, kStream));
      } else {
        dgb.upload(g);
        KERNEL_CHECK(
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

// --- mixed precision: conversions and AdamW on sub-ranges at any element offset ---------------------------------

// Raw device memory for the sub-range cases (its start keeps cudaMalloc's 256-byte alignment; the cases add their
// offsets), guarded as DeviceBuffer is.
class RawBuffer {
 public:
  RawBuffer(size_t bytes, const char* name) : mem_(bytes, name) {}
  template <class T>
  T* as() {
    return static_cast<T*>(mem_.data());
  }

 private:
  GuardedAlloc mem_;
};

template <class T>
void to_device(void* dst, const std::vector<T>& v) {
  CUDA_CHECK(cudaMemcpy(dst, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
}
template <class T>
std::vector<T> from_device(const void* src, size_t n) {
  CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<T> v(n);
  CUDA_CHECK(cudaMemcpy(v.data(), src, n * sizeof(T), cudaMemcpyDeviceToHost));
  return v;
}

// fp32 values over many binades (2^-20 .. 2^20), with exact bf16 ties (low 16 bits 0x8000), near ties (0x7fff,
// 0x8001) and signed zeros mixed in, so every branch of round-to-nearest-even is exercised. Finite, no NaN.
std::vector<float> mixed_fp32(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::uniform_int_distribution<int> binade(-20, 20);
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) {
    float x = std::ldexp(normal(gen), binade(gen));
    uint32_t u;
    std::memcpy(&u, &x, 4);
    const size_t kind = i % 11;
    if (kind == 2) u = (u & 0xffff0000u) | 0x8000u;  // tie: even and odd bf16 neighbours both occur
    if (kind == 5) u = (u & 0xffff0000u) | 0x7fffu;  // just below a tie
    if (kind == 7) u = (u & 0xffff0000u) | 0x8001u;  // just above
    if (kind == 9) u = i % 2 ? 0x80000000u : 0u;     // -0, +0
    std::memcpy(&x, &u, 4);
    v[i] = x;
  }
  return v;
}
// bf16 bit patterns of the same kind (bf16 + bf16 sums of close exponents land on ties often).
std::vector<uint16_t> mixed_bf16(size_t n, uint32_t seed) {
  std::vector<float> f = mixed_fp32(n, seed);
  std::vector<uint16_t> b(n);
  for (size_t i = 0; i < n; ++i) b[i] = bf16_bits(f[i]);
  return b;
}

// One conversion on device sub-ranges src + os, dst + od of n elements against its CPU reference, bit for bit over
// the whole written region [0, od + n + kGuard) of dst: the elements before od and after od + n must keep their
// values (no write outside the range). S, D: host element types (float, or uint16_t for bf16 bits). Returns the
// number of mismatching elements.
constexpr size_t kGuard = 9;
template <class S, class D, class Launch, class Ref>
size_t conversion_mismatches(RawBuffer& dsrc, RawBuffer& ddst, const std::vector<S>& src_all,
                             const std::vector<D>& dst_all, size_t n, size_t os, size_t od, Launch launch, Ref ref,
                             size_t* first_bad) {
  const std::vector<S> src(src_all.begin(), src_all.begin() + os + n);
  std::vector<D> want(dst_all.begin(), dst_all.begin() + od + n + kGuard);
  to_device(dsrc.as<void>(), src);
  to_device(ddst.as<void>(), want);
  KERNEL_CHECK(launch(dsrc.as<S>() + os, ddst.as<D>() + od, static_cast<int64_t>(n)));
  ref(src.data() + os, want.data() + od, static_cast<int64_t>(n));
  const std::vector<D> got = from_device<D>(ddst.as<void>(), want.size());
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(D)) == 0) continue;
    if (bad++ == 0) *first_bad = i;
  }
  return bad;
}

// The casts and the accumulating conversions (accumulate()) of the mixed-precision executor against the kernels/cpu
// references, bit for bit: both sides widen to fp32, sum once in fp32 (IEEE, no FTZ on either side) and round once to
// nearest even, so any difference is a bug. Lengths 1..9 (all head/tail, or one vector chunk), 23, 4099 and
// 1000003; source and destination offsets 0..3 elements each, so pointers are misaligned in agreeing ways (a head
// aligns both: vector body) and disagreeing ones (no common head: the one-element path throughout).
bool test_convert() {
  bool ok = true;
  const size_t kMaxN = 1000003, kMaxOff = 3;
  const size_t cap = kMaxN + kMaxOff + kGuard;
  const std::vector<float> f_src = mixed_fp32(cap, 31), f_dst = mixed_fp32(cap, 32);
  const std::vector<uint16_t> b_src = mixed_bf16(cap, 33), b_dst = mixed_bf16(cap, 34);
  RawBuffer dsrc(cap * 4, "dsrc"), ddst(cap * 4, "ddst");
  auto as_bf16 = [](auto* p) {
    using P = std::remove_pointer_t<decltype(p)>;
    if constexpr (std::is_const_v<P>)
      return reinterpret_cast<const bf16*>(p);
    else
      return reinterpret_cast<bf16*>(p);
  };
  for (size_t n : {size_t{1}, size_t{2}, size_t{7}, size_t{8}, size_t{9}, size_t{23}, size_t{4099}, kMaxN}) {
    struct Tally {
      const char* name;
      size_t bad = 0, first_bad = 0, os = 0, od = 0;
    };
    Tally t[6] = {{"cast fp32->bf16"},           {"cast bf16->fp32"},           {"accumulate fp32 into bf16"},
                  {"accumulate bf16 into bf16"}, {"accumulate bf16 into fp32"}, {"accumulate fp32 into fp32"}};
    auto tally = [&](Tally& x, size_t bad, size_t first_bad, size_t os, size_t od) {
      if (bad > 0 && x.bad == 0) {
        x.first_bad = first_bad;
        x.os = os;
        x.od = od;
      }
      x.bad += bad;
    };
    for (size_t os = 0; os <= kMaxOff; ++os) {
      for (size_t od = 0; od <= kMaxOff; ++od) {
        size_t fb = 0, bad = 0;
        bad = conversion_mismatches(
            dsrc, ddst, f_src, b_dst, n, os, od,
            [&](const float* x, uint16_t* y, int64_t m) { return gpu::cast_fp32_to_bf16(x, as_bf16(y), m, kStream); },
            [](const float* x, uint16_t* y, int64_t m) { cpu::cast_fp32_to_bf16(x, y, m); }, &fb);
        tally(t[0], bad, fb, os, od);
        bad = conversion_mismatches(
            dsrc, ddst, b_src, f_dst, n, os, od,
            [&](const uint16_t* x, float* y, int64_t m) { return gpu::cast_bf16_to_fp32(as_bf16(x), y, m, kStream); },
            [](const uint16_t* x, float* y, int64_t m) { cpu::cast_bf16_to_fp32(x, y, m); }, &fb);
        tally(t[1], bad, fb, os, od);
        bad = conversion_mismatches(
            dsrc, ddst, f_src, b_dst, n, os, od,
            [&](const float* x, uint16_t* y, int64_t m) { return gpu::accumulate(x, as_bf16(y), m, kStream); },
            [](const float* x, uint16_t* y, int64_t m) { cpu::accumulate_fp32_into_bf16(y, x, m); }, &fb);
        tally(t[2], bad, fb, os, od);
        bad = conversion_mismatches(
            dsrc, ddst, b_src, b_dst, n, os, od,
            [&](const uint16_t* x, uint16_t* y, int64_t m) {
              return gpu::accumulate(as_bf16(x), as_bf16(y), m, kStream);
            },
            [](const uint16_t* x, uint16_t* y, int64_t m) { cpu::accumulate_bf16_into_bf16(y, x, m); }, &fb);
        tally(t[3], bad, fb, os, od);
        bad = conversion_mismatches(
            dsrc, ddst, b_src, f_dst, n, os, od,
            [&](const uint16_t* x, float* y, int64_t m) { return gpu::accumulate(as_bf16(x), y, m, kStream); },
            [](const uint16_t* x, float* y, int64_t m) { cpu::accumulate_bf16_into_fp32(y, x, m); }, &fb);
        tally(t[4], bad, fb, os, od);
        bad = conversion_mismatches(
            dsrc, ddst, f_src, f_dst, n, os, od,
            [&](const float* x, float* y, int64_t m) { return gpu::accumulate(x, y, m, kStream); },
            [](const float* x, float* y, int64_t m) { cpu::add(y, x, m); }, &fb);
        tally(t[5], bad, fb, os, od);
      }
    }
    for (const Tally& x : t) {
      printf("  %s %-26s n=%-7zu offsets src, dst in 0..%zu: %zu elements differ bitwise", x.bad ? "FAIL" : "ok  ",
             x.name, n, kMaxOff, x.bad);
      if (x.bad) printf(" (first at dst element %zu with offsets %zu, %zu)", x.first_bad, x.os, x.od);
      printf("\n");
      ok &= x.bad == 0;
    }
  }
  return ok;
}

// Index arithmetic past 2^31 elements: accumulate bf16 into bf16 over n = 2^31 + 13 elements starting 9 elements into
// the buffers (a 7-element head, a vector body of 2^31 elements, a 6-element tail), every element checked against the
// host's round(x + y) of the values the device holds, and guard elements on both sides unchanged. Needs 8 GiB of device
// memory; reports itself skipped (and passes) where cudaMalloc cannot provide it.
bool test_convert_large() {
  const size_t n = (size_t{1} << 31) + 13, guard = 9, total = n + 2 * guard;
  void *px = nullptr, *py = nullptr;
  if (cudaMalloc(&px, total * 2) != cudaSuccess || cudaMalloc(&py, total * 2) != cudaSuccess) {
    (void)cudaGetLastError();
    cudaFree(px);
    printf("  ok   skipped: cannot allocate 2 x %zu bytes\n", total * 2);
    return true;
  }
  bf16* x = static_cast<bf16*>(px);
  bf16* y = static_cast<bf16*>(py);
  // x varies per index (a misplaced read shows); y = 0.5 inside, -7 in the guards.
  KERNEL_CHECK(gpu::fill_uniform(x, static_cast<int64_t>(total), 77, -4.f, 4.f, kStream));
  KERNEL_CHECK(gpu::fill(y, -7.f, static_cast<int64_t>(total), kStream));
  KERNEL_CHECK(gpu::fill(y + guard, 0.5f, static_cast<int64_t>(n), kStream));
  KERNEL_CHECK(gpu::accumulate(x + guard, y + guard, static_cast<int64_t>(n), kStream));
  CUDA_CHECK(cudaDeviceSynchronize());
  const size_t chunk = size_t{1} << 26;
  std::vector<uint16_t> hx(chunk), hy(chunk);
  size_t bad = 0, first_bad = 0;
  for (size_t at = 0; at < total; at += chunk) {
    const size_t m = std::min(chunk, total - at);
    CUDA_CHECK(cudaMemcpy(hx.data(), x + at, m * 2, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(hy.data(), y + at, m * 2, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < m; ++i) {
      const size_t e = at + i;
      const bool inside = e >= guard && e < guard + n;
      const uint16_t want = inside ? bf16_bits(bf16_value(hx[i]) + 0.5f) : bf16_bits(-7.f);
      if (hy[i] != want && bad++ == 0) first_bad = e;
    }
  }
  cudaFree(px);
  cudaFree(py);
  printf("  %s accumulate bf16 into bf16 n=%zu at offset %zu: %zu elements wrong", bad ? "FAIL" : "ok  ", n, guard,
         bad);
  if (bad) printf(" (first at buffer element %zu)", first_bad);
  printf("\n");
  return bad == 0;
}

// The AdamW overloads the backend's adamw() uses, on sub-ranges: master, m, v and param_out at one element offset,
// the gradient at another (agreeing and disagreeing misalignments), n odd. Against cpu::adamw_mixed (bf16
// gradient) or cpu::adamw (fp32 gradient) over 3 steps with the test_adamw tolerances (fp32 arithmetic in another
// order); the bf16 parameters must be the round-to-nearest-even of the GPU's own master weights exactly, the fp32
// ones a bit-for-bit copy of them.
bool test_adamw_mixed() {
  bool ok = true;
  const size_t n = 100003, pad = 8;
  cpu::AdamWConfig cfg;
  cfg.lr = 1e-2f;
  cfg.weight_decay = 0.1f;
  struct Offsets {
    size_t state, grad;
  };
  for (int variant = 0; variant < 3; ++variant) {  // gradient/parameter dtypes: bf16/bf16, bf16/fp32, fp32/fp32
    const bool grad16 = variant < 2, param16 = variant == 0;
    for (Offsets o : {Offsets{0, 0}, Offsets{1, 1}, Offsets{3, 1}, Offsets{2, 5}}) {
      std::vector<float> master = random_vec(n, -1, 1, 200), m(n, 0.f), v(n, 0.f);
      RawBuffer dmaster((n + pad) * 4, "dmaster"), dm((n + pad) * 4, "dm"), dv((n + pad) * 4, "dv"),
          dgrad((n + pad) * 4, "dgrad"), dparam((n + pad) * 4, "dparam");
      float* pm = dmaster.as<float>() + o.state;
      float* pmom = dm.as<float>() + o.state;
      float* pvar = dv.as<float>() + o.state;
      to_device(pm, master);
      to_device(pmom, m);
      to_device(pvar, v);
      for (int step = 1; step <= 3; ++step) {
        const std::vector<float> g = random_vec(n, -1, 1, 210 + step);  // bf16-representable: same for both dtypes
        if (grad16) {
          std::vector<uint16_t> gb(n);
          for (size_t i = 0; i < n; ++i) gb[i] = bf16_bits(g[i]);
          const bf16* pg = dgrad.as<bf16>() + o.grad;
          to_device(dgrad.as<uint16_t>() + o.grad, gb);
          if (param16)
            KERNEL_CHECK(gpu::adamw(pm, pg, pmom, pvar, dparam.as<bf16>() + o.state, n, cfg, step, 1.f, kStream));
          else
            KERNEL_CHECK(gpu::adamw(pm, pg, pmom, pvar, dparam.as<float>() + o.state, n, cfg, step, 1.f, kStream));
          cpu::adamw_mixed(master.data(), gb.data(), m.data(), v.data(), nullptr, n, cfg, step);
        } else {
          const float* pg = dgrad.as<float>() + o.grad;
          to_device(dgrad.as<float>() + o.grad, g);
          KERNEL_CHECK(gpu::adamw(pm, pg, pmom, pvar, dparam.as<float>() + o.state, n, cfg, step, 1.f, kStream));
          cpu::adamw(master.data(), g.data(), m.data(), v.data(), n, cfg, step);
        }
      }
      printf("  grad %s, param_out %s, state offset %zu, grad offset %zu, n=%zu, 3 steps\n", grad16 ? "bf16" : "fp32",
             param16 ? "bf16" : "fp32", o.state, o.grad, n);
      const std::vector<float> got_master = from_device<float>(pm, n);
      ok &= close("adamw master", got_master, master, 1e-6, 1e-5);
      ok &= close("adamw m", from_device<float>(pmom, n), m, 1e-7, 1e-5);
      ok &= close("adamw v", from_device<float>(pvar, n), v, 1e-9, 1e-5);
      size_t bad = 0;
      if (param16) {
        const std::vector<uint16_t> got = from_device<uint16_t>(dparam.as<uint16_t>() + o.state, n);
        for (size_t i = 0; i < n; ++i) bad += got[i] != bf16_bits(got_master[i]);
      } else {
        const std::vector<float> got = from_device<float>(dparam.as<float>() + o.state, n);
        for (size_t i = 0; i < n; ++i) bad += std::memcmp(&got[i], &got_master[i], 4) != 0;
      }
      printf("  %s param_out = %s of the updated master: %zu elements differ\n", bad ? "FAIL" : "ok  ",
             param16 ? "bf16 RNE" : "bit-for-bit copy", bad);
      ok &= bad == 0;
    }
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
    DeviceBuffer<bf16> da(m * k, "da"), db(k * n, "db"), dc(m * n, "dc");
    DeviceBuffer<float> dcf(m * n, "dcf");
    da.upload(a);
    db.upload(b);
    dc.upload(c0);
    dcf.upload(c0);
    BLAS_KERNEL_CHECK(gpu::gemm(blas, ta, tb, m, n, k, 0.5f, da.get(), db.get(), 1.0f, dc.get(), kStream));
    BLAS_KERNEL_CHECK(gpu::gemm(blas, ta, tb, m, n, k, 0.5f, da.get(), db.get(), 1.0f, dcf.get(), kStream));
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
      DeviceBuffer<float> da(m * k, "da"), db(k * n, "db"), dc(m * n, "dc");
      da.upload(a);
      db.upload(b);
      dc.upload(c0);
      BLAS_KERNEL_CHECK(gpu::gemm(blas, ta, tb, m, n, k, 0.5f, da.get(), db.get(), 1.0f, dc.get(), kStream));
      std::vector<float> ref = c0;
      cpu::gemm(ta, tb, m, n, k, 0.5f, a.data(), b.data(), 1.0f, ref.data());
      ok &= close("gemm fp32 (bf16 multiplies)", dc.download(), ref, 1e-4 * max_abs(ref), 1e-4);
    }
    gpu::blas_destroy(&blas);
  }
  {  // rmsnorm, swiglu, add
    const int64_t rows = 37, dim = 264, n = rows * dim;
    auto x = random_vec(n, -2, 2, 90), w = random_vec(dim, 0.5f, 1.5f, 91), dy = random_vec(n, -1, 1, 92);
    DeviceBuffer<float> dx_in(n, "dx_in"), dw(dim, "dw"), y(n, "y"), rstd(rows, "rstd"), ddy(n, "ddy"), dx(n, "dx"),
        dwg(dim, "dwg");
    dx_in.upload(x);
    dw.upload(w);
    ddy.upload(dy);
    dwg.upload(std::vector<float>(dim, 0.f));
    KERNEL_CHECK(gpu::rmsnorm_forward(dx_in.get(), dw.get(), y.get(), rstd.get(), rows, dim, 1e-5f, kStream));
    KERNEL_CHECK(
        gpu::rmsnorm_backward(ddy.get(), dx_in.get(), dw.get(), rstd.get(), dx.get(), dwg.get(), rows, dim, kStream));
    std::vector<float> ry(n), rr(rows), rdx(n), rdw(dim, 0.f);
    cpu::rmsnorm_forward(x.data(), w.data(), ry.data(), rr.data(), rows, dim, 1e-5f);
    cpu::rmsnorm_backward(dy.data(), x.data(), w.data(), rr.data(), rdx.data(), rdw.data(), rows, dim);
    ok &= close("rmsnorm fp32 y", y.download(), ry, 1e-5, 1e-5);
    ok &= close("rmsnorm fp32 dx", dx.download(), rdx, 1e-5 * max_abs(rdx), 1e-4);
    ok &= close("rmsnorm fp32 dweight", dwg.download(), rdw, 1e-5 * max_abs(rdw), 1e-4);
    DeviceBuffer<float> out(n, "out"), dg(n, "dg"), du(n, "du");
    KERNEL_CHECK(gpu::swiglu_forward(dx_in.get(), ddy.get(), out.get(), n, kStream));
    KERNEL_CHECK(gpu::swiglu_backward(ddy.get(), dx_in.get(), ddy.get(), dg.get(), du.get(), n, kStream));
    std::vector<float> ro(n), rg(n), ru(n);
    cpu::swiglu_forward(x.data(), dy.data(), ro.data(), n);
    cpu::swiglu_backward(dy.data(), x.data(), dy.data(), rg.data(), ru.data(), n);
    ok &= close("swiglu fp32 out", out.download(), ro, 1e-5, 1e-4);  // __expf against exp_poly
    ok &= close("swiglu fp32 dgate", dg.download(), rg, 1e-5, 1e-4);
    ok &= close("swiglu fp32 dup", du.download(), ru, 1e-5, 1e-4);
    KERNEL_CHECK(gpu::add(dx_in.get(), ddy.get(), dx_in.get(), n, kStream));
    std::vector<float> rs(n);
    for (int64_t i = 0; i < n; ++i) rs[i] = x[i] + dy[i];
    ok &= close("add fp32", dx_in.download(), rs, 0, 0);
  }
  {  // rope (fp32 angles on the GPU, fp64 tables on the CPU: positions up to 300 rad lose ~3e-5 rad)
    const int b = 2, sq = 300, h = 2, hd = 16;
    const int64_t n = int64_t(b) * sq * h * hd;
    auto x = random_vec(n, -1, 1, 93);
    DeviceBuffer<float> dx(n, "dx");
    dx.upload(x);
    KERNEL_CHECK(gpu::rope(dx.get(), b, sq, h, hd, 10000.f, false, kStream));
    std::vector<float> r = x;
    cpu::rope(r.data(), b, sq, h, hd, 10000.f, false);
    ok &= close("rope fp32", dx.download(), r, 2e-4, 1e-4);
  }
  {  // cross-entropy and embedding
    const int64_t rows = 19, vocab = 1003, dim = 40;
    auto logits = random_vec(rows * vocab, -4, 4, 94);
    std::vector<int32_t> targets(rows);
    for (int64_t r = 0; r < rows; ++r) targets[r] = int32_t((r * 131) % vocab);
    DeviceBuffer<float> dl(rows * vocab, "dl"), loss_rows(rows, "loss_rows");
    DeviceBuffer<int32_t> dt(rows, "dt");
    DeviceBuffer<double> total(1, "total");
    dl.upload(logits);
    dt.upload_raw(targets);
    CUDA_CHECK(cudaMemset(total.get(), 0, sizeof(double)));
    KERNEL_CHECK(gpu::cross_entropy(dl.get(), dt.get(), dl.get(), loss_rows.get(), rows, vocab, 0.5f, kStream));
    KERNEL_CHECK(gpu::sum_accumulate(loss_rows.get(), rows, total.get(), kStream));
    KERNEL_CHECK(gpu::sum_accumulate(loss_rows.get(), rows, total.get(), kStream));  // accumulates: twice the sum
    std::vector<float> rd(rows * vocab);
    const double rloss = cpu::cross_entropy(logits.data(), targets.data(), rd.data(), rows, vocab, 0.5f);
    ok &= close("cross_entropy fp32 dlogits", dl.download(), rd, 1e-6, 1e-4);
    double got = 0;
    CUDA_CHECK(cudaMemcpy(&got, total.get(), sizeof(double), cudaMemcpyDeviceToHost));
    ok &= close("cross_entropy fp32 2x loss", {float(got)}, {float(2 * rloss)}, 1e-4, 1e-5);
    auto table = random_vec(vocab * dim, -1, 1, 95), dout = random_vec(rows * dim, -1, 1, 96);
    DeviceBuffer<float> dtab(vocab * dim, "dtab"), out(rows * dim, "out"), ddo(rows * dim, "ddo"),
        dgrad(vocab * dim, "dgrad");
    dtab.upload(table);
    ddo.upload(dout);
    dgrad.upload(std::vector<float>(vocab * dim, 0.f));
    KERNEL_CHECK(gpu::embedding_forward(dtab.get(), dt.get(), out.get(), rows, dim, kStream));
    KERNEL_CHECK(gpu::embedding_backward(ddo.get(), dt.get(), dgrad.get(), rows, dim, kStream));
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
      DeviceBuffer<float> dq_in(n, "dq_in"), dk_in(n, "dk_in"), dv_in(n, "dv_in"), dd(n, "dd"), out(n, "out"),
          lse(nl, "lse"), dq(n, "dq"), dk(n, "dk"), dv(n, "dv");
      dq_in.upload(q);
      dk_in.upload(k);
      dv_in.upload(v);
      dd.upload(dout);
      const size_t fw = gpu::attention_forward_fp32_workspace_bytes(s.batch, s.seq, s.heads, s.head_dim);
      const size_t bw = gpu::attention_backward_fp32_workspace_bytes(s.batch, s.seq, s.heads, s.head_dim);
      DeviceBuffer<unsigned char> wsf(fw, "forward workspace"), wsb(bw, "backward workspace");
      KERNEL_CHECK(gpu::attention_forward(dq_in.get(), dk_in.get(), dv_in.get(), out.get(), lse.get(), s.batch, s.seq,
                                          s.heads, s.head_dim, wsf.get(), fw, kStream));
      KERNEL_CHECK(gpu::attention_backward(dd.get(), dq_in.get(), dk_in.get(), dv_in.get(), out.get(), lse.get(),
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
      {"cast", test_cast},
      {"fill", test_fill},
      {"add_sum", test_add_sum},
      {"swiglu", test_swiglu},
      {"rmsnorm", test_rmsnorm},
      {"rope", test_rope},
      {"attention", test_attention},
      {"attention_long", test_attention_long},
      {"cross_entropy", test_cross_entropy},
      {"embedding", test_embedding},
      {"adamw", test_adamw},
      {"gemm", test_gemm},
      {"fp32_storage", test_fp32_storage},
      {"convert", test_convert},
      {"convert_large", test_convert_large},
      {"adamw_mixed", test_adamw_mixed},
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
    g_guard_failed = false;
    bool pass = c.run();
    if (g_guard_failed) {
      printf("  FAIL a buffer's guard was overwritten (above): a kernel wrote outside its buffer\n");
      pass = false;
    }
    printf("[%s] %s\n", c.name, pass ? "PASS" : "FAIL");
    ok &= pass;
  }
  if (!found) {
    fprintf(stderr, "unknown case '%s' (try --list)\n", which.c_str());
    return 2;
  }
  return ok ? 0 : 1;
}
