// The cuDNN fused attention (kernels/cuda/attention_cudnn.h) against the CPU reference (kernels/ops.h) and the flash
// kernels (ops_cuda.h) on the same bf16-rounded inputs: forward (out, lse), backward (dq, dk, dv), and each backward
// fed with the other forward's out and lse (their lse conventions must agree for that to pass). One case per run
// (`attention_cudnn_test <case>`, or `all`); exit 0 pass, 1 fail, 77 skipped (no device, or built without the cuDNN
// attention, or a cuDNN older than 9). Device buffers are allocated to their exact sizes (no slack past the end).
#include "kernels/cuda/attention_cudnn.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
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

// Device buffer of exactly n elements of T, with host transfers in fp32 terms.
template <class T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t n) : n_(n) { CUDA_CHECK(cudaMalloc(&p_, n * sizeof(T))); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { cudaFree(p_); }
  T* get() { return p_; }
  void upload(const std::vector<float>& v) {
    if constexpr (std::is_same_v<T, bf16>) {
      std::vector<uint16_t> bits(v.size());
      for (size_t i = 0; i < v.size(); ++i) bits[i] = bf16_bits(v[i]);
      CUDA_CHECK(cudaMemcpy(p_, bits.data(), bits.size() * 2, cudaMemcpyHostToDevice));
    } else {
      CUDA_CHECK(cudaMemcpy(p_, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
    }
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

// A cuDNN attention call's status, with cuDNN's own text when it failed.
bool cudnn_ok(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  printf("  FAIL %s: %s (%s): %s\n", what, cudaGetErrorName(e), cudaGetErrorString(e),
         gpu::cudnn_attention_last_error().c_str());
  return false;
}

const cudaStream_t kStream = nullptr;  // legacy default stream: the checks synchronise through cudaMemcpy

struct Shape {
  const char* name;
  int batch, seq, heads, head_dim;
};

// The tolerances of kernels_gpu_test's attention case for the flash kernels against the CPU: bf16 probabilities before
// the P V and dS products, bf16 outputs, so a few bf16 ulps on values that average many terms (scaled by max|ref|).
// Between the two GPU implementations, each within those of the CPU, the sum of both.
struct Tolerance {
  double out_atol_frac = 1e-2, out_rtol = 2e-2;
  double lse_atol = 1e-3, lse_rtol = 1e-4;
  double grad_atol_frac = 3e-2, grad_rtol = 3e-2;
  Tolerance twice() const {
    return {2 * out_atol_frac, 2 * out_rtol, 2 * lse_atol, 2 * lse_rtol, 2 * grad_atol_frac, 2 * grad_rtol};
  }
};

bool check_forward(const std::string& what, const std::vector<float>& out, const std::vector<float>& lse,
                   const std::vector<float>& rout, const std::vector<float>& rlse, const Tolerance& t) {
  bool ok = close(what + " out", out, rout, t.out_atol_frac * max_abs(rout), t.out_rtol);
  ok &= close(what + " lse (fp32)", lse, rlse, t.lse_atol, t.lse_rtol);
  return ok;
}

bool check_backward(const std::string& what, const std::vector<float>& dq, const std::vector<float>& dk,
                    const std::vector<float>& dv, const std::vector<float>& rdq, const std::vector<float>& rdk,
                    const std::vector<float>& rdv, const Tolerance& t) {
  bool ok = close(what + " dq", dq, rdq, t.grad_atol_frac * max_abs(rdq), t.grad_rtol);
  ok &= close(what + " dk", dk, rdk, t.grad_atol_frac * max_abs(rdk), t.grad_rtol);
  ok &= close(what + " dv", dv, rdv, t.grad_atol_frac * max_abs(rdv), t.grad_rtol);
  return ok;
}

// cuDNN forward and backward against the CPU reference and the flash kernels on one shape, then each backward on the
// other forward's out and lse.
bool run_shape(const Shape& s) {
  printf("  shape batch=%d seq=%d heads=%d head_dim=%d\n", s.batch, s.seq, s.heads, s.head_dim);
  const size_t n = static_cast<size_t>(s.batch) * s.seq * s.heads * s.head_dim;
  const size_t nl = static_cast<size_t>(s.batch) * s.heads * s.seq;
  const auto q = random_vec(n, -1.5f, 1.5f, 13), k = random_vec(n, -1.5f, 1.5f, 14), v = random_vec(n, -1, 1, 15);
  const auto dout = random_vec(n, -1, 1, 16);
  DeviceBuffer<bf16> dq_in(n), dk_in(n), dv_in(n), dout_d(n);
  dq_in.upload(q);
  dk_in.upload(k);
  dv_in.upload(v);
  dout_d.upload(dout);

  std::vector<float> rout(n), rlse(nl), rdq(n), rdk(n), rdv(n);
  cpu::attention_forward(q.data(), k.data(), v.data(), rout.data(), rlse.data(), s.batch, s.seq, s.heads, s.head_dim);
  cpu::attention_backward(dout.data(), q.data(), k.data(), v.data(), rout.data(), rlse.data(), rdq.data(), rdk.data(),
                          rdv.data(), s.batch, s.seq, s.heads, s.head_dim);
  const Tolerance cpu_tol, gpu_tol = Tolerance().twice();
  bool ok = true;

  // cuDNN forward, twice: the second call runs the cached graph.
  DeviceBuffer<bf16> c_out(n), c_out2(n);
  DeviceBuffer<float> c_lse(nl), c_lse2(nl);
  for (int call = 0; call < 2; ++call) {
    if (!cudnn_ok(
            gpu::cudnn_attention_forward(dq_in.get(), dk_in.get(), dv_in.get(), (call ? c_out2 : c_out).get(),
                                         (call ? c_lse2 : c_lse).get(), s.batch, s.seq, s.heads, s.head_dim, kStream),
            "cudnn_attention_forward"))
      return false;
  }
  const auto c_out_h = c_out.download(), c_lse_h = c_lse.download();
  ok &= check_forward("cudnn vs cpu", c_out_h, c_lse_h, rout, rlse, cpu_tol);
  ok &= check_forward("cudnn (cached graph) vs cpu", c_out2.download(), c_lse2.download(), rout, rlse, cpu_tol);

  // Flash forward.
  DeviceBuffer<bf16> f_out(n);
  DeviceBuffer<float> f_lse(nl);
  CUDA_CHECK(gpu::attention_forward(dq_in.get(), dk_in.get(), dv_in.get(), f_out.get(), f_lse.get(), s.batch, s.seq,
                                    s.heads, s.head_dim, kStream));
  ok &= check_forward("cudnn vs flash", c_out_h, c_lse_h, f_out.download(), f_lse.download(), gpu_tol);

  // cuDNN backward on its own forward.
  DeviceBuffer<bf16> c_dq(n), c_dk(n), c_dv(n);
  if (!cudnn_ok(gpu::cudnn_attention_backward(dout_d.get(), dq_in.get(), dk_in.get(), dv_in.get(), c_out.get(),
                                              c_lse.get(), c_dq.get(), c_dk.get(), c_dv.get(), s.batch, s.seq, s.heads,
                                              s.head_dim, kStream),
                "cudnn_attention_backward"))
    return false;
  const auto cdq = c_dq.download(), cdk = c_dk.download(), cdv = c_dv.download();
  ok &= check_backward("cudnn vs cpu", cdq, cdk, cdv, rdq, rdk, rdv, cpu_tol);

  // Flash backward on its own forward.
  const size_t ws_bytes = gpu::attention_backward_workspace_bytes(s.batch, s.seq, s.heads, s.head_dim);
  DeviceBuffer<unsigned char> ws(ws_bytes);
  DeviceBuffer<bf16> f_dq(n), f_dk(n), f_dv(n);
  CUDA_CHECK(gpu::attention_backward(dout_d.get(), dq_in.get(), dk_in.get(), dv_in.get(), f_out.get(), f_lse.get(),
                                     f_dq.get(), f_dk.get(), f_dv.get(), s.batch, s.seq, s.heads, s.head_dim, ws.get(),
                                     ws_bytes, kStream));
  ok &= check_backward("cudnn vs flash", cdq, cdk, cdv, f_dq.download(), f_dk.download(), f_dv.download(), gpu_tol);

  // Crossed: cuDNN backward on the flash forward's out and lse, flash backward on cuDNN's. A different lse
  // convention (log2, or unscaled scores) would put every gradient far off.
  if (!cudnn_ok(gpu::cudnn_attention_backward(dout_d.get(), dq_in.get(), dk_in.get(), dv_in.get(), f_out.get(),
                                              f_lse.get(), c_dq.get(), c_dk.get(), c_dv.get(), s.batch, s.seq, s.heads,
                                              s.head_dim, kStream),
                "cudnn_attention_backward (flash out, lse)"))
    return false;
  ok &= check_backward("cudnn on flash (out, lse) vs cpu", c_dq.download(), c_dk.download(), c_dv.download(), rdq, rdk,
                       rdv, cpu_tol);
  CUDA_CHECK(gpu::attention_backward(dout_d.get(), dq_in.get(), dk_in.get(), dv_in.get(), c_out.get(), c_lse.get(),
                                     f_dq.get(), f_dk.get(), f_dv.get(), s.batch, s.seq, s.heads, s.head_dim, ws.get(),
                                     ws_bytes, kStream));
  ok &= check_backward("flash on cudnn (out, lse) vs cpu", f_dq.download(), f_dk.download(), f_dv.download(), rdq, rdk,
                       rdv, cpu_tol);
  return ok;
}

// What the library reports for calls it cannot run, and that an empty problem is a no-op.
bool run_errors() {
  bool ok = true;
  const int batch = 1, seq = 64, heads = 2, head_dim = 12;  // head_dim not a multiple of 8: cuDNN does not support it
  const size_t n = static_cast<size_t>(batch) * seq * heads * head_dim, nl = static_cast<size_t>(batch) * heads * seq;
  DeviceBuffer<bf16> q(n), out(n);
  DeviceBuffer<float> lse(nl);
  for (int call = 0; call < 2; ++call) {  // the second one answers from the cached failure
    const cudaError_t e = gpu::cudnn_attention_forward(q.get(), q.get(), q.get(), out.get(), lse.get(), batch, seq,
                                                       heads, head_dim, kStream);
    const std::string text = gpu::cudnn_attention_last_error();
    const bool pass = e == cudaErrorNotSupported && !text.empty();
    printf("  %s head_dim 12 (call %d): %s, last error: %s\n", pass ? "ok  " : "FAIL", call + 1, cudaGetErrorName(e),
           text.c_str());
    ok &= pass;
  }
  const size_t n64 = static_cast<size_t>(batch) * seq * heads * 64;
  DeviceBuffer<bf16> q64(n64 + 1), out64(n64);  // q64 + 1: a view of n64 elements 2 bytes past an aligned start
  DeviceBuffer<float> lse64(nl);
  {
    const cudaError_t e = gpu::cudnn_attention_forward(q64.get() + 1, q64.get() + 1, q64.get() + 1, out64.get(),
                                                       lse64.get(), batch, seq, heads, 64, kStream);
    const bool pass = e == cudaErrorInvalidValue && !gpu::cudnn_attention_last_error().empty();
    printf("  %s misaligned q: %s, last error: %s\n", pass ? "ok  " : "FAIL", cudaGetErrorName(e),
           gpu::cudnn_attention_last_error().c_str());
    ok &= pass;
  }
  {
    const cudaError_t e =
        gpu::cudnn_attention_forward(nullptr, nullptr, nullptr, nullptr, nullptr, 0, seq, heads, 64, kStream);
    const bool pass = e == cudaSuccess && gpu::cudnn_attention_last_error().empty();
    printf("  %s batch 0: %s (nothing to do)\n", pass ? "ok  " : "FAIL", cudaGetErrorName(e));
    ok &= pass;
  }
  CUDA_CHECK(cudaDeviceSynchronize());
  return ok;
}

// head_dim 32, 64, 128 (the flash kernels' tensor-core path), sequences that are not multiples of 64 or 128, and long
// ones up to seq 2048 with head_dim 128.
const std::vector<Shape>& shapes() {
  static const std::vector<Shape> all = {
      {"s200_d64", 2, 200, 2, 64},   {"s130_d128", 1, 130, 2, 128}, {"s96_d32", 1, 96, 3, 32},
      {"s256_d128", 1, 256, 1, 128}, {"s1024_d64", 2, 1024, 2, 64}, {"s2048_d128", 1, 2048, 4, 128},
  };
  return all;
}

std::vector<std::string> case_names() {
  std::vector<std::string> names;
  for (const auto& s : shapes()) names.push_back(s.name);
  names.push_back("errors");
  return names;
}

bool run_case(const std::string& name) {
  if (name == "errors") return run_errors();
  for (const auto& s : shapes())
    if (name == s.name) return run_shape(s);
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string which = argc > 1 ? argv[1] : "all";
  const std::vector<std::string> names = case_names();
  if (which == "--list") {
    for (const auto& c : names) printf("%s\n", c.c_str());
    return 0;
  }
  if (which != "all" && std::find(names.begin(), names.end(), which) == names.end()) {
    fprintf(stderr, "unknown case '%s' (try --list)\n", which.c_str());
    return 2;
  }
  if (gpu::device_count() == 0) {
    printf("SKIPPED: no CUDA device (cudaGetDeviceCount reports none or no driver); GPU kernel tests need one\n");
    return 77;
  }
  if (!gpu::cudnn_attention_available()) {
    printf("SKIPPED: cuDNN attention not available: %s\n", gpu::cudnn_attention_last_error().c_str());
    return 77;
  }
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  printf("device 0: %s, compute capability %d.%d\n", prop.name, prop.major, prop.minor);
  bool ok = true;
  for (const auto& c : names) {
    if (which != "all" && which != c) continue;
    printf("[%s]\n", c.c_str());
    const bool pass = run_case(c);
    printf("[%s] %s\n", c.c_str(), pass ? "PASS" : "FAIL");
    ok &= pass;
  }
  return ok ? 0 : 1;
}
