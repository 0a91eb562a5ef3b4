// Rotary position embedding in place on x[batch, seq, heads, head_dim] (bf16 or fp32), Meta LLaMA pairing as
// cpu::rope: consecutive pairs (2i, 2i+1) of a head rotate by pos * theta^(-2i / head_dim). Memory-bound: 8 elements
// (4 pairs) per 16-byte access; the angles are computed in registers (no table in memory).
#include <cmath>

#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/ops_cuda.h"

namespace lins::kernels::cuda {
namespace {

constexpr int kThreads = 256;

template <class T, int N>  // elements per access: 8 (vector path) or 2 (one pair)
__global__ void __launch_bounds__(kThreads) rope_kernel(T* __restrict__ x, int64_t chunks, int seq, int heads,
                                                        int head_dim, float neg_log2_theta_over_half, float sign) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t row_elems = static_cast<int64_t>(heads) * head_dim;  // one token
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < chunks; c += stride) {
    const int64_t e = c * N;
    const int d = static_cast<int>(e % head_dim);
    const float pos = static_cast<float>((e / row_elems) % seq);
    float v[N];
    detail::load<N>(x + e, v);
#pragma unroll
    for (int j = 0; j < N; j += 2) {
      const int i = (d + j) / 2;  // pair index inside the head
      // theta^(-2i/head_dim) = 2^(-log2(theta) * i / (head_dim/2))
      const float freq = exp2f(neg_log2_theta_over_half * static_cast<float>(i));
      float s, co;
      sincosf(pos * freq, &s, &co);
      s *= sign;
      const float a = v[j], b = v[j + 1];
      v[j] = a * co - b * s;
      v[j + 1] = a * s + b * co;
    }
    detail::store<N>(x + e, v);
  }
}

template <class T>
cudaError_t rope_impl(T* x, int batch, int seq, int heads, int head_dim, float theta, bool inverse,
                      cudaStream_t stream) {
  if (head_dim % 2 != 0 || theta <= 0.f) return cudaErrorInvalidValue;
  const int64_t n = static_cast<int64_t>(batch) * seq * heads * head_dim;
  if (n <= 0) return cudaSuccess;
  const float k = -std::log2(theta) / static_cast<float>(head_dim / 2);
  const float sign = inverse ? -1.f : 1.f;
  if (head_dim % 8 == 0 && detail::aligned16(x)) {
    rope_kernel<T, 8>
        <<<detail::grid_size(n / 8, kThreads), kThreads, 0, stream>>>(x, n / 8, seq, heads, head_dim, k, sign);
  } else {
    rope_kernel<T, 2>
        <<<detail::grid_size(n / 2, kThreads), kThreads, 0, stream>>>(x, n / 2, seq, heads, head_dim, k, sign);
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t rope(bf16* x, int batch, int seq, int heads, int head_dim, float theta, bool inverse, cudaStream_t stream) {
  return rope_impl(x, batch, seq, heads, head_dim, theta, inverse, stream);
}

cudaError_t rope(float* x, int batch, int seq, int heads, int head_dim, float theta, bool inverse,
                 cudaStream_t stream) {
  return rope_impl(x, batch, seq, heads, head_dim, theta, inverse, stream);
}

}  // namespace lins::kernels::cuda
