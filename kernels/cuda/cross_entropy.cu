// Cross-entropy over logits[rows, vocab] in bf16 or fp32 (one block per row: online max/sum in one pass, gradient
// in a second pass that re-reads the row from L2) and the token embedding gather/scatter.
#include <cmath>

#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/ops_cuda.h"

namespace lins::kernels::cuda {
namespace {

using detail::load;
using detail::store;

constexpr int kThreads = 256;

// Merges two online-softmax states (max m, sum of exp(x - m)); an empty state is (-inf, 0).
__device__ __forceinline__ void merge(float& m, float& s, float m2, float s2) {
  const float mx = fmaxf(m, m2);
  if (mx == -INFINITY) return;
  s = s * __expf(m - mx) + s2 * __expf(m2 - mx);
  m = mx;
}

// logits and dlogits may alias: no __restrict__, and every element is read before this thread overwrites it.
template <class T, int N>
__global__ void __launch_bounds__(kThreads)
    cross_entropy_kernel(const T* logits, const int32_t* targets, T* dlogits, float* loss_rows, int64_t rows,
                         int64_t vocab, float grad_scale) {
  __shared__ float sm[32], ss[32];
  __shared__ float row_lse, target_logit;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* lr = logits + row * vocab;  // [vocab]
    T* dr = dlogits + row * vocab;       // [vocab]
    const int32_t target = targets[row];
    if (threadIdx.x == 0) target_logit = static_cast<float>(lr[target]);
    float m = -INFINITY, s = 0.f;
    for (int64_t c = static_cast<int64_t>(threadIdx.x) * N; c < vocab; c += static_cast<int64_t>(blockDim.x) * N) {
      float v[N];
      load<N>(lr + c, v);
      float mx = v[0];
#pragma unroll
      for (int j = 1; j < N; ++j) mx = fmaxf(mx, v[j]);
      float part = 0.f;
#pragma unroll
      for (int j = 0; j < N; ++j) part += __expf(v[j] - mx);
      merge(m, s, mx, part);
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
      merge(m, s, m2, s2);
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) {
      sm[warp] = m;
      ss[warp] = s;
    }
    __syncthreads();  // also orders thread 0's read of the target logit before any overwrite below
    if (warp == 0) {
      const int warps = blockDim.x >> 5;
      m = lane < warps ? sm[lane] : -INFINITY;
      s = lane < warps ? ss[lane] : 0.f;
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) {
        const float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
        merge(m, s, m2, s2);
      }
      if (lane == 0) {
        row_lse = m + logf(s);
        if (loss_rows != nullptr) loss_rows[row] = row_lse - target_logit;
      }
    }
    __syncthreads();
    const float lse = row_lse;
    for (int64_t c = static_cast<int64_t>(threadIdx.x) * N; c < vocab; c += static_cast<int64_t>(blockDim.x) * N) {
      float v[N];
      load<N>(lr + c, v);
#pragma unroll
      for (int j = 0; j < N; ++j) v[j] = grad_scale * (__expf(v[j] - lse) - (c + j == target ? 1.f : 0.f));
      store<N>(dr + c, v);
    }
    __syncthreads();  // row_lse and target_logit are rewritten for the next row
  }
}

template <class T, int N>
__global__ void __launch_bounds__(kThreads)
    embedding_forward_kernel(const T* __restrict__ table, const int32_t* __restrict__ ids, T* __restrict__ out,
                             int64_t n, int64_t dim) {
  const int64_t per_row = dim / N;
  const int64_t total = n * per_row;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < total; c += stride) {
    const int64_t i = c / per_row, col = (c % per_row) * N;
    float v[N];
    load<N>(table + static_cast<int64_t>(ids[i]) * dim + col, v);
    store<N>(out + i * dim + col, v);
  }
}

template <class T>
__global__ void __launch_bounds__(kThreads)
    embedding_backward_kernel(const T* __restrict__ dout, const int32_t* __restrict__ ids, float* __restrict__ dtable,
                              int64_t n, int64_t dim) {
  const int64_t total = n * dim;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += stride) {
    const int64_t i = e / dim, col = e % dim;
    atomicAdd(dtable + static_cast<int64_t>(ids[i]) * dim + col, static_cast<float>(dout[e]));
  }
}

template <class T>
cudaError_t cross_entropy_impl(const T* logits, const int32_t* targets, T* dlogits, float* loss_rows, int64_t rows,
                               int64_t vocab, float grad_scale, cudaStream_t stream) {
  if (rows <= 0 || vocab <= 0) return cudaSuccess;
  const int blocks = static_cast<int>(rows < 65535 * 8 ? rows : 65535 * 8);
  if (vocab % 8 == 0 && detail::aligned16(logits) && detail::aligned16(dlogits)) {
    cross_entropy_kernel<T, 8>
        <<<blocks, kThreads, 0, stream>>>(logits, targets, dlogits, loss_rows, rows, vocab, grad_scale);
  } else {
    cross_entropy_kernel<T, 1>
        <<<blocks, kThreads, 0, stream>>>(logits, targets, dlogits, loss_rows, rows, vocab, grad_scale);
  }
  return cudaGetLastError();
}

template <class T>
cudaError_t embedding_forward_impl(const T* table, const int32_t* ids, T* out, int64_t n, int64_t dim,
                                   cudaStream_t stream) {
  if (n <= 0 || dim <= 0) return cudaSuccess;
  if (dim % 8 == 0 && detail::aligned16(table) && detail::aligned16(out)) {
    embedding_forward_kernel<T, 8>
        <<<detail::grid_size(n * dim / 8, kThreads), kThreads, 0, stream>>>(table, ids, out, n, dim);
  } else {
    embedding_forward_kernel<T, 1>
        <<<detail::grid_size(n * dim, kThreads), kThreads, 0, stream>>>(table, ids, out, n, dim);
  }
  return cudaGetLastError();
}

template <class T>
cudaError_t embedding_backward_impl(const T* dout, const int32_t* ids, float* dtable, int64_t n, int64_t dim,
                                    cudaStream_t stream) {
  if (n <= 0 || dim <= 0) return cudaSuccess;
  embedding_backward_kernel<T>
      <<<detail::grid_size(n * dim, kThreads), kThreads, 0, stream>>>(dout, ids, dtable, n, dim);
  return cudaGetLastError();
}

}  // namespace

cudaError_t cross_entropy(const bf16* logits, const int32_t* targets, bf16* dlogits, float* loss_rows, int64_t rows,
                          int64_t vocab, float grad_scale, cudaStream_t stream) {
  return cross_entropy_impl(logits, targets, dlogits, loss_rows, rows, vocab, grad_scale, stream);
}

cudaError_t cross_entropy(const float* logits, const int32_t* targets, float* dlogits, float* loss_rows, int64_t rows,
                          int64_t vocab, float grad_scale, cudaStream_t stream) {
  return cross_entropy_impl(logits, targets, dlogits, loss_rows, rows, vocab, grad_scale, stream);
}

cudaError_t embedding_forward(const bf16* table, const int32_t* ids, bf16* out, int64_t n, int64_t dim,
                              cudaStream_t stream) {
  return embedding_forward_impl(table, ids, out, n, dim, stream);
}

cudaError_t embedding_forward(const float* table, const int32_t* ids, float* out, int64_t n, int64_t dim,
                              cudaStream_t stream) {
  return embedding_forward_impl(table, ids, out, n, dim, stream);
}

cudaError_t embedding_backward(const bf16* dout, const int32_t* ids, float* dtable, int64_t n, int64_t dim,
                               cudaStream_t stream) {
  return embedding_backward_impl(dout, ids, dtable, n, dim, stream);
}

cudaError_t embedding_backward(const float* dout, const int32_t* ids, float* dtable, int64_t n, int64_t dim,
                               cudaStream_t stream) {
  return embedding_backward_impl(dout, ids, dtable, n, dim, stream);
}

}  // namespace lins::kernels::cuda
