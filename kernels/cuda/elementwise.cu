// Memory-bound element-wise kernels: casts, mixed-precision accumulation, fills, residual add, SwiGLU
// forward/backward, AdamW and the CPU backend's normal initialiser. Each thread moves 8 elements per grid-stride
// iteration with 128-bit accesses. Pointers need only their element's natural alignment: the executor passes
// sub-ranges at any element offset, so the launcher first runs up to 7 leading elements one at a time until every
// pointer sits on a 16-byte boundary (possible when their misalignments agree), runs the vector body from there, and
// finishes the ragged tail one element at a time. Pointers that no common head length aligns (say an fp32 source
// 1 element past a boundary and a bf16 destination on one) take the one-element path throughout: correct, slower.
#include <cmath>
#include <cstdint>

#include "gpu/cuda_devices.h"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/ops_cuda.h"

namespace lins::kernels::cuda {

namespace detail {

int sm_count() {
  constexpr int kMaxDevices = 64;
  static thread_local int cached[kMaxDevices] = {0};
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= kMaxDevices) return 132;
  if (cached[dev] == 0) {
    int n = 0;
    cached[dev] = cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) == cudaSuccess && n > 0 ? n : 132;
  }
  return cached[dev];
}

int grid_size(int64_t items, int threads, int blocks_per_sm) {
  const int64_t need = (items + threads - 1) / threads;
  const int64_t cap = static_cast<int64_t>(sm_count()) * blocks_per_sm;
  return static_cast<int>(need < 1 ? 1 : (need < cap ? need : cap));
}

namespace {

constexpr int kThreads = 256;
constexpr int kVec = 8;

// Vector body: chunk c covers elements [first + c * N, first + c * N + N).
template <int N, class Op>
__global__ void __launch_bounds__(kThreads) elementwise_kernel(Op op, int64_t chunks, int64_t first) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < chunks; c += stride)
    op.template apply<N>(first + c * N);
}

// One element at a time over [0, head) followed by [tail_first, tail_first + count - head): the head and tail left
// around a vector body, or (head = count) a whole range.
template <class Op>
__global__ void __launch_bounds__(kThreads)
    elementwise_edges_kernel(Op op, int64_t count, int64_t head, int64_t tail_first) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < count; c += stride)
    op.template apply<1>(c < head ? c : tail_first + (c - head));
}

// Leading elements to run one at a time so that every (non-null) pointer is 16-byte aligned where the vector body
// starts: the smallest h in [0, kVec) with p + h 16-byte aligned for each p, or -1 when there is none. A vector chunk
// spans kVec elements (16 bytes of bf16, 32 of fp32), so alignment at the body's start holds for every chunk.
inline bool aligned_after(int64_t) { return true; }
template <class T, class... Rest>
bool aligned_after(int64_t h, const T* p, const Rest*... rest) {
  const uintptr_t at = reinterpret_cast<uintptr_t>(p) + static_cast<uintptr_t>(h) * sizeof(T);
  return (p == nullptr || at % kVecBytes == 0) && aligned_after(h, rest...);
}
template <class... T>
int vector_head(const T*... p) {
  for (int h = 0; h < kVec; ++h)
    if (aligned_after(h, p...)) return h;
  return -1;
}

// Runs op over [0, n): `head` elements one at a time (vector_head(); -1 = all of them), then N-element chunks, then
// the remainder one at a time (the head and the remainder share one launch). N is 8 (a 16-byte access of bf16) unless
// the op writes fp32 it has not read: there N = 4, so that each thread's store is one 16-byte access and a warp's
// stores cover whole 32-byte sectors. With 8 fp32 per thread each store instruction writes every other 16 bytes, and
// an output never read first then runs at about 0.6 of a device copy on an H200 (cast bf16 to fp32, fill fp32),
// against about 1.0 for the outputs that are read first (accumulate). Every chunk start stays aligned for its access:
// the body starts 16-byte aligned and 4 elements are 16 bytes of fp32, 8 of bf16.
template <int N = kVec, class Op>
cudaError_t launch_elementwise(const Op& op, int64_t n, int head, cudaStream_t stream) {
  static_assert(N == 4 || N == 8, "chunks of 4 or 8 elements");
  if (n <= 0) return cudaSuccess;
  const int64_t h = head < 0 || head >= n ? n : head;  // elements before the body
  const int64_t body = (n - h) / N * N;
  if (body > 0) elementwise_kernel<N><<<grid_size(body / N, kThreads), kThreads, 0, stream>>>(op, body / N, h);
  const int64_t edges = n - body;  // h leading + (n - h - body) trailing
  if (edges > 0) {
    elementwise_edges_kernel<<<grid_size(edges, kThreads), kThreads, 0, stream>>>(op, edges, h, h + body);
  }
  return cudaGetLastError();
}

template <class TIn, class TOut>
struct CastOp {
  const TIn* in;
  TOut* out;
  template <int N>
  __device__ void apply(int64_t i) const {
    float x[N];
    load<N>(in + i, x);
    store<N>(out + i, x);
  }
};

template <class T>
struct FillOp {
  T* x;
  float value;
  template <int N>
  __device__ void apply(int64_t i) const {
    float v[N];
#pragma unroll
    for (int j = 0; j < N; ++j) v[j] = value;
    store<N>(x + i, v);
  }
};

template <class T>
struct FillUniformOp {
  T* x;
  uint64_t seed;
  float lo, span;
  template <int N>
  __device__ void apply(int64_t i) const {
    float v[N];
#pragma unroll
    for (int j = 0; j < N; ++j) v[j] = lo + span * hash_uniform(seed, static_cast<uint64_t>(i + j));
    store<N>(x + i, v);
  }
};

// The CPU backend's init_normal, bit for bit in its integer part: h = splitmix64(seed ^ splitmix64(first + i)),
// Box-Muller in fp64 on the two 32-bit halves, rounded once to fp32. CUDA's fp64 log/cos are within 1-2 ulp of
// glibc's, so an element can differ from the CPU value (by one fp32 ulp) only when the fp64 result lies that close to
// an fp32 rounding boundary.
__device__ __forceinline__ uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

struct NormalOp {
  float* x;
  uint64_t seed;
  int64_t first;
  double std_dev;
  template <int N>
  __device__ void apply(int64_t i) const {
    float v[N];
#pragma unroll
    for (int j = 0; j < N; ++j) {
      const uint64_t h = splitmix64(seed ^ splitmix64(static_cast<uint64_t>(first + i + j)));
      const double u1 = (static_cast<double>((h >> 32) & 0xffffffffu) + 1.0) / 4294967297.0;  // (0, 1)
      const double u2 = static_cast<double>(h & 0xffffffffu) / 4294967296.0;                  // [0, 1)
      const double r = __dmul_rn(std_dev, sqrt(__dmul_rn(-2.0, log(u1))));
      v[j] = static_cast<float>(__dmul_rn(r, cos(__dmul_rn(2.0 * 3.14159265358979323846, u2))));
    }
    store<N>(x + i, v);
  }
};

// out[i] = round(a[i] + b[i]): both widened to fp32, summed once, rounded once to out's dtype. out may be a (an
// accumulation: each element is loaded before it is stored).
template <class TA, class TB, class TOut>
struct AddOp {
  const TA* a;
  const TB* b;
  TOut* out;
  template <int N>
  __device__ void apply(int64_t i) const {
    float x[N], y[N];
    load<N>(a + i, x);
    load<N>(b + i, y);
#pragma unroll
    for (int j = 0; j < N; ++j) x[j] += y[j];
    store<N>(out + i, x);
  }
};

__device__ __forceinline__ float sigmoid(float x) { return 1.f / (1.f + __expf(-x)); }

template <class T>
struct SwigluForwardOp {
  const T* gate;
  const T* up;
  T* out;
  template <int N>
  __device__ void apply(int64_t i) const {
    float g[N], u[N];
    load<N>(gate + i, g);
    load<N>(up + i, u);
#pragma unroll
    for (int j = 0; j < N; ++j) g[j] = g[j] * sigmoid(g[j]) * u[j];
    store<N>(out + i, g);
  }
};

template <class T>
struct SwigluBackwardOp {
  const T* dout;
  const T* gate;
  const T* up;
  T* dgate;
  T* dup;
  template <int N>
  __device__ void apply(int64_t i) const {
    float d[N], g[N], u[N];
    load<N>(dout + i, d);
    load<N>(gate + i, g);
    load<N>(up + i, u);
#pragma unroll
    for (int j = 0; j < N; ++j) {
      const float s = sigmoid(g[j]);
      const float silu = g[j] * s;
      const float dsilu = s * (1.f + g[j] * (1.f - s));  // d/dg [g * sigmoid(g)]
      g[j] = d[j] * u[j] * dsilu;                        // dgate
      u[j] = d[j] * silu;                                // dup
    }
    store<N>(dgate + i, g);
    store<N>(dup + i, u);
  }
};

// AdamW (decoupled weight decay, bias-corrected moments), as cpu::adamw:
//   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;  w -= lr * (m/bc1 / (sqrt(v/bc2) + eps) + wd * w).
template <class TGrad, class TParam>
struct AdamWOp {
  float* master;
  const TGrad* grad;
  float* m;
  float* v;
  TParam* param_out;  // may be null
  float lr, beta1, beta2, eps, weight_decay, inv_bc1, inv_bc2, grad_scale;
  template <int N>
  __device__ void apply(int64_t i) const {
    float w[N], g[N], mm[N], vv[N];
    load<N>(grad + i, g);
    load<N>(master + i, w);
    load<N>(m + i, mm);
    load<N>(v + i, vv);
#pragma unroll
    for (int j = 0; j < N; ++j) {
      const float gj = g[j] * grad_scale;
      mm[j] = beta1 * mm[j] + (1.f - beta1) * gj;
      vv[j] = beta2 * vv[j] + (1.f - beta2) * gj * gj;
      const float update = (mm[j] * inv_bc1) / (sqrtf(vv[j] * inv_bc2) + eps);
      w[j] -= lr * (update + weight_decay * w[j]);
    }
    store<N>(master + i, w);
    store<N>(m + i, mm);
    store<N>(v + i, vv);
    if (param_out != nullptr) store<N>(param_out + i, w);
  }
};

template <class TGrad, class TParam>
cudaError_t adamw_impl(float* master, const TGrad* grad, float* m, float* v, TParam* param_out, int64_t n,
                       const AdamWConfig& cfg, int step, float grad_scale, cudaStream_t stream) {
  if (step < 1) return cudaErrorInvalidValue;
  AdamWOp<TGrad, TParam> op{master,           grad, m,   v,         param_out, cfg.lr, cfg.beta1, cfg.beta2, cfg.eps,
                            cfg.weight_decay, 0.f,  0.f, grad_scale};
  op.inv_bc1 = static_cast<float>(1.0 / (1.0 - std::pow(static_cast<double>(cfg.beta1), step)));
  op.inv_bc2 = static_cast<float>(1.0 / (1.0 - std::pow(static_cast<double>(cfg.beta2), step)));
  return launch_elementwise(op, n, vector_head(master, grad, m, v, param_out), stream);
}

template <bool kAccumulate>
__global__ void __launch_bounds__(1024) sum_kernel(const float* x, int64_t n, double* out) {
  __shared__ double partial[32];
  double acc = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) acc += x[i];
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = acc;
  __syncthreads();
  if (threadIdx.x < 32) {
    acc = threadIdx.x < (blockDim.x >> 5) ? partial[threadIdx.x] : 0.0;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if (threadIdx.x == 0) *out = kAccumulate ? *out + acc : acc;
  }
}

}  // namespace
}  // namespace detail

using detail::launch_elementwise;
using detail::vector_head;

int device_count() { return cuda_device_count_or_exit(); }

cudaError_t cast_fp32_to_bf16(const float* in, bf16* out, int64_t n, cudaStream_t stream) {
  return launch_elementwise(detail::CastOp<float, bf16>{in, out}, n, vector_head(in, out), stream);
}

cudaError_t cast_bf16_to_fp32(const bf16* in, float* out, int64_t n, cudaStream_t stream) {
  return launch_elementwise<4>(detail::CastOp<bf16, float>{in, out}, n, vector_head(in, out), stream);
}

cudaError_t accumulate(const float* x, bf16* y, int64_t n, cudaStream_t stream) {
  return launch_elementwise(detail::AddOp<bf16, float, bf16>{y, x, y}, n, vector_head(x, y), stream);
}

cudaError_t accumulate(const bf16* x, bf16* y, int64_t n, cudaStream_t stream) {
  return launch_elementwise(detail::AddOp<bf16, bf16, bf16>{y, x, y}, n, vector_head(x, y), stream);
}

cudaError_t accumulate(const bf16* x, float* y, int64_t n, cudaStream_t stream) {
  return launch_elementwise(detail::AddOp<float, bf16, float>{y, x, y}, n, vector_head(x, y), stream);
}

cudaError_t accumulate(const float* x, float* y, int64_t n, cudaStream_t stream) {
  return launch_elementwise(detail::AddOp<float, float, float>{y, x, y}, n, vector_head(x, y), stream);
}

cudaError_t fill(float* x, float value, int64_t n, cudaStream_t stream) {
  return launch_elementwise<4>(detail::FillOp<float>{x, value}, n, vector_head(x), stream);
}

cudaError_t fill(bf16* x, float value, int64_t n, cudaStream_t stream) {
  return launch_elementwise(detail::FillOp<bf16>{x, value}, n, vector_head(x), stream);
}

cudaError_t fill_uniform(float* x, int64_t n, uint64_t seed, float lo, float hi, cudaStream_t stream) {
  return launch_elementwise(detail::FillUniformOp<float>{x, seed, lo, hi - lo}, n, vector_head(x), stream);
}

cudaError_t fill_uniform(bf16* x, int64_t n, uint64_t seed, float lo, float hi, cudaStream_t stream) {
  return launch_elementwise(detail::FillUniformOp<bf16>{x, seed, lo, hi - lo}, n, vector_head(x), stream);
}

cudaError_t init_normal(float* x, int64_t n, uint64_t seed, int64_t first, float std_dev, cudaStream_t stream) {
  return launch_elementwise(detail::NormalOp{x, seed, first, static_cast<double>(std_dev)}, n, vector_head(x), stream);
}

cudaError_t add(const bf16* a, const bf16* b, bf16* out, int64_t n, cudaStream_t stream) {
  return launch_elementwise(detail::AddOp<bf16, bf16, bf16>{a, b, out}, n, vector_head(a, b, out), stream);
}

cudaError_t add(const float* a, const float* b, float* out, int64_t n, cudaStream_t stream) {
  return launch_elementwise(detail::AddOp<float, float, float>{a, b, out}, n, vector_head(a, b, out), stream);
}

cudaError_t sum(const float* x, int64_t n, double* out, cudaStream_t stream) {
  detail::sum_kernel<false><<<1, 1024, 0, stream>>>(x, n, out);
  return cudaGetLastError();
}

cudaError_t sum_accumulate(const float* x, int64_t n, double* out, cudaStream_t stream) {
  detail::sum_kernel<true><<<1, 1024, 0, stream>>>(x, n, out);
  return cudaGetLastError();
}

template <class T>
static cudaError_t swiglu_forward_impl(const T* gate, const T* up, T* out, int64_t n, cudaStream_t stream) {
  return launch_elementwise(detail::SwigluForwardOp<T>{gate, up, out}, n, vector_head(gate, up, out), stream);
}

template <class T>
static cudaError_t swiglu_backward_impl(const T* dout, const T* gate, const T* up, T* dgate, T* dup, int64_t n,
                                        cudaStream_t stream) {
  return launch_elementwise(detail::SwigluBackwardOp<T>{dout, gate, up, dgate, dup}, n,
                            vector_head(dout, gate, up, dgate, dup), stream);
}

cudaError_t swiglu_forward(const bf16* gate, const bf16* up, bf16* out, int64_t n, cudaStream_t stream) {
  return swiglu_forward_impl(gate, up, out, n, stream);
}

cudaError_t swiglu_forward(const float* gate, const float* up, float* out, int64_t n, cudaStream_t stream) {
  return swiglu_forward_impl(gate, up, out, n, stream);
}

cudaError_t swiglu_backward(const bf16* dout, const bf16* gate, const bf16* up, bf16* dgate, bf16* dup, int64_t n,
                            cudaStream_t stream) {
  return swiglu_backward_impl(dout, gate, up, dgate, dup, n, stream);
}

cudaError_t swiglu_backward(const float* dout, const float* gate, const float* up, float* dgate, float* dup, int64_t n,
                            cudaStream_t stream) {
  return swiglu_backward_impl(dout, gate, up, dgate, dup, n, stream);
}

cudaError_t adamw(float* master, const bf16* grad, float* m, float* v, bf16* param_out, int64_t n,
                  const AdamWConfig& cfg, int step, float grad_scale, cudaStream_t stream) {
  return detail::adamw_impl(master, grad, m, v, param_out, n, cfg, step, grad_scale, stream);
}

cudaError_t adamw(float* master, const float* grad, float* m, float* v, bf16* param_out, int64_t n,
                  const AdamWConfig& cfg, int step, float grad_scale, cudaStream_t stream) {
  return detail::adamw_impl(master, grad, m, v, param_out, n, cfg, step, grad_scale, stream);
}

cudaError_t adamw(float* master, const bf16* grad, float* m, float* v, float* param_out, int64_t n,
                  const AdamWConfig& cfg, int step, float grad_scale, cudaStream_t stream) {
  return detail::adamw_impl(master, grad, m, v, param_out, n, cfg, step, grad_scale, stream);
}

cudaError_t adamw(float* master, const float* grad, float* m, float* v, float* param_out, int64_t n,
                  const AdamWConfig& cfg, int step, float grad_scale, cudaStream_t stream) {
  return detail::adamw_impl(master, grad, m, v, param_out, n, cfg, step, grad_scale, stream);
}

}  // namespace lins::kernels::cuda
