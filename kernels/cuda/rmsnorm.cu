// RMSNorm forward and backward on bf16 or fp32 tensors (fp32 math): one block per row (grid-stride over rows),
// 16-byte accesses when dim % 8 == 0 and the pointers are aligned. A row (8 KB at dim 4096 in bf16) is read twice;
// the second read hits L1/L2, not DRAM.
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/ops_cuda.h"

namespace lins::kernels::cuda {
namespace {

using detail::block_sum;
using detail::load;
using detail::store;

constexpr int kMaxThreads = 256;

int row_threads(int64_t dim, int vec) {
  const int64_t lanes = (dim + vec - 1) / vec;
  int t = 32;
  while (t < kMaxThreads && t < lanes) t *= 2;
  return t;
}

template <class T, int N>
__global__ void __launch_bounds__(kMaxThreads)
    rmsnorm_forward_kernel(const T* __restrict__ x, const T* __restrict__ weight, T* __restrict__ y,
                           float* __restrict__ rstd, int64_t rows, int64_t dim, float eps) {
  __shared__ float scratch[33];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* xr = x + row * dim;  // [dim]
    T* yr = y + row * dim;        // [dim]
    float ss = 0.f;
    for (int64_t c = static_cast<int64_t>(threadIdx.x) * N; c < dim; c += static_cast<int64_t>(blockDim.x) * N) {
      float v[N];
      load<N>(xr + c, v);
#pragma unroll
      for (int j = 0; j < N; ++j) ss += v[j] * v[j];
    }
    ss = block_sum(ss, scratch);
    const float r = rsqrtf(ss / static_cast<float>(dim) + eps);
    if (threadIdx.x == 0 && rstd != nullptr) rstd[row] = r;
    for (int64_t c = static_cast<int64_t>(threadIdx.x) * N; c < dim; c += static_cast<int64_t>(blockDim.x) * N) {
      float v[N], w[N];
      load<N>(xr + c, v);
      load<N>(weight + c, w);
#pragma unroll
      for (int j = 0; j < N; ++j) v[j] = v[j] * r * w[j];
      store<N>(yr + c, v);
    }
  }
}

// y_j = x_j r w_j with r = (mean(x^2) + eps)^-1/2 gives
//   dx_j = r w_j dy_j - x_j r^3 / dim * sum_i(dy_i w_i x_i),   dweight_j += dy_j x_j r.
// Each thread owns the same columns in every row, so its dweight partials live in shared memory without races and
// are flushed once per block with atomics.
template <class T, int N>
__global__ void __launch_bounds__(kMaxThreads)
    rmsnorm_backward_kernel(const T* __restrict__ dy, const T* __restrict__ x, const T* __restrict__ weight,
                            const float* __restrict__ rstd, T* __restrict__ dx, float* __restrict__ dweight,
                            int64_t rows, int64_t dim) {
  __shared__ float scratch[33];
  extern __shared__ float dw_partial[];  // [dim]
  for (int64_t c = threadIdx.x; c < dim; c += blockDim.x) dw_partial[c] = 0.f;
  __syncthreads();
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* dyr = dy + row * dim;
    const T* xr = x + row * dim;
    T* dxr = dx + row * dim;
    const float r = rstd[row];
    float dot = 0.f;
    for (int64_t c = static_cast<int64_t>(threadIdx.x) * N; c < dim; c += static_cast<int64_t>(blockDim.x) * N) {
      float g[N], v[N], w[N];
      load<N>(dyr + c, g);
      load<N>(xr + c, v);
      load<N>(weight + c, w);
#pragma unroll
      for (int j = 0; j < N; ++j) dot += g[j] * w[j] * v[j];
    }
    dot = block_sum(dot, scratch);
    const float k = dot * r * r * r / static_cast<float>(dim);
    for (int64_t c = static_cast<int64_t>(threadIdx.x) * N; c < dim; c += static_cast<int64_t>(blockDim.x) * N) {
      float g[N], v[N], w[N];
      load<N>(dyr + c, g);
      load<N>(xr + c, v);
      load<N>(weight + c, w);
#pragma unroll
      for (int j = 0; j < N; ++j) {
        dw_partial[c + j] += g[j] * v[j] * r;
        w[j] = r * w[j] * g[j] - v[j] * k;
      }
      store<N>(dxr + c, w);
    }
  }
  __syncthreads();
  for (int64_t c = threadIdx.x; c < dim; c += blockDim.x) atomicAdd(dweight + c, dw_partial[c]);
}

template <class T>
cudaError_t rmsnorm_forward_impl(const T* x, const T* weight, T* y, float* rstd, int64_t rows, int64_t dim, float eps,
                                 cudaStream_t stream) {
  if (rows <= 0 || dim <= 0) return cudaSuccess;
  const int blocks = static_cast<int>(rows < 65535 * 8 ? rows : 65535 * 8);
  if (dim % 8 == 0 && detail::aligned16(x) && detail::aligned16(weight) && detail::aligned16(y)) {
    rmsnorm_forward_kernel<T, 8><<<blocks, row_threads(dim, 8), 0, stream>>>(x, weight, y, rstd, rows, dim, eps);
  } else {
    rmsnorm_forward_kernel<T, 1><<<blocks, row_threads(dim, 1), 0, stream>>>(x, weight, y, rstd, rows, dim, eps);
  }
  return cudaGetLastError();
}

template <class T, int N>
cudaError_t launch_backward(const T* dy, const T* x, const T* weight, const float* rstd, T* dx, float* dweight,
                            int64_t rows, int64_t dim, int blocks, size_t smem, cudaStream_t stream) {
  // Always opt in: without it static + dynamic must fit in 48 KB, and the kernel's static block_sum scratch makes
  // dynamic sizes just under 48 KB (dim 12253..12288) fail as well as larger ones.
  const cudaError_t e = cudaFuncSetAttribute(rmsnorm_backward_kernel<T, N>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             static_cast<int>(smem));
  if (e != cudaSuccess) return e;
  rmsnorm_backward_kernel<T, N>
      <<<blocks, row_threads(dim, N), smem, stream>>>(dy, x, weight, rstd, dx, dweight, rows, dim);
  return cudaGetLastError();
}

template <class T>
cudaError_t rmsnorm_backward_impl(const T* dy, const T* x, const T* weight, const float* rstd, T* dx, float* dweight,
                                  int64_t rows, int64_t dim, cudaStream_t stream) {
  if (rows <= 0 || dim <= 0) return cudaSuccess;
  const size_t smem = static_cast<size_t>(dim) * sizeof(float);
  // Fewer blocks than rows so that each block's dweight partials cover many rows before the atomic flush.
  const int64_t cap = static_cast<int64_t>(detail::sm_count()) * 2;
  const int blocks = static_cast<int>(rows < cap ? rows : cap);
  const bool vec = dim % 8 == 0 && detail::aligned16(dy) && detail::aligned16(x) && detail::aligned16(weight) &&
                   detail::aligned16(dx);
  if (vec) return launch_backward<T, 8>(dy, x, weight, rstd, dx, dweight, rows, dim, blocks, smem, stream);
  return launch_backward<T, 1>(dy, x, weight, rstd, dx, dweight, rows, dim, blocks, smem, stream);
}

}  // namespace

cudaError_t rmsnorm_forward(const bf16* x, const bf16* weight, bf16* y, float* rstd, int64_t rows, int64_t dim,
                            float eps, cudaStream_t stream) {
  return rmsnorm_forward_impl(x, weight, y, rstd, rows, dim, eps, stream);
}

cudaError_t rmsnorm_forward(const float* x, const float* weight, float* y, float* rstd, int64_t rows, int64_t dim,
                            float eps, cudaStream_t stream) {
  return rmsnorm_forward_impl(x, weight, y, rstd, rows, dim, eps, stream);
}

cudaError_t rmsnorm_backward(const bf16* dy, const bf16* x, const bf16* weight, const float* rstd, bf16* dx,
                             float* dweight, int64_t rows, int64_t dim, cudaStream_t stream) {
  return rmsnorm_backward_impl(dy, x, weight, rstd, dx, dweight, rows, dim, stream);
}

cudaError_t rmsnorm_backward(const float* dy, const float* x, const float* weight, const float* rstd, float* dx,
                             float* dweight, int64_t rows, int64_t dim, cudaStream_t stream) {
  return rmsnorm_backward_impl(dy, x, weight, rstd, dx, dweight, rows, dim, stream);
}

}  // namespace lins::kernels::cuda
