// DeepSpeed ZeRO++'s qwZ and qgZ quantizers on the GPU (kernels/cuda/quantize_cuda.h), equal bit for bit to the CPU
// versions in kernels/cpu/quantize.cpp. Every rounding is explicit: __fmul_rn, __fdiv_rn and __frcp_rn (IEEE fp32,
// never contracted or approximated whatever the compiler flags), __float2half_rn, __float2int_rn, and __hadd for the
// fp16 sums (a correctly rounded fp16 add, as the CPU's fp32 add rounded to fp16). A block's max |h| is a fmaxf
// reduction, whose result does not depend on the order. Simple kernels, one thread block per quantization block for
// the quantizers and a grid-stride loop per element for the dequantizers: these run once per collective, on buffers
// the network then takes far longer to move.
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/quantize_cuda.h"
#include "kernels/quantize_layout.h"

namespace lins::kernels::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxBlocks = 1 << 16;  // block kernels loop over quantization blocks beyond this

__device__ __forceinline__ float round_fp16(float x) { return __half2float(__float2half_rn(x)); }

// max over the block, returned to every thread; `scratch` is __shared__ float[33]. Safe to call repeatedly.
__device__ float block_max(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  v = detail::warp_max(v);
  __syncthreads();  // the previous call's readers are done with scratch
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < warps ? scratch[lane] : -INFINITY;
    v = detail::warp_max(v);
    if (lane == 0) scratch[32] = v;
  }
  __syncthreads();
  return scratch[32];
}

struct BlockScale {
  float scale;
  float inv_scale;
};

// quantization_utils.h Params<Symmetric>(max): scale = 2^b / (2 max), 1 when max == 0; inv_scale = 1 / scale.
template <int kBits>
__device__ __forceinline__ BlockScale block_scale(float amax) {
  const float scale = amax == 0.0f ? 1.0f : __fdiv_rn(static_cast<float>(1 << kBits), __fmul_rn(2.0f, amax));
  return {scale, __frcp_rn(scale)};
}

// round-half-even(h * scale) clamped to the b-bit range (a NaN product converts to 0).
template <int kBits>
__device__ __forceinline__ int quantize_value(float h, float scale) {
  constexpr int kMin = -(1 << (kBits - 1));
  constexpr int kMax = (1 << (kBits - 1)) - 1;
  const int q = __float2int_rn(__fmul_rn(h, scale));
  return min(max(q, kMin), kMax);
}

__device__ __forceinline__ __half dequantize_value(int q, float inv_scale) {
  return __float2half_rn(__fmul_rn(static_cast<float>(q), inv_scale));
}

__device__ __forceinline__ uint8_t pack_int4(int even, int odd) {
  return static_cast<uint8_t>(((static_cast<unsigned>(even) & 0xfu) << 4) | (static_cast<unsigned>(odd) & 0xfu));
}
__device__ __forceinline__ int int4_high(uint8_t byte) {  // the even element
  const int v = byte >> 4;
  return v >= 8 ? v - 16 : v;
}
__device__ __forceinline__ int int4_low(uint8_t byte) {  // the odd element
  const int v = byte & 0xf;
  return v >= 8 ? v - 16 : v;
}

// The output block of input block g: itself, or with swizzle its slot (swizzled_quantize.cu: slice p = node *
// gpus_per_node + local goes to slot local * nodes + node).
struct BlockOrder {
  bool swizzle = false;
  int nodes = 1, gpus_per_node = 1;
  int64_t groups_per_slice = 1;
  __device__ __forceinline__ int64_t out_group(int64_t g) const {
    if (!swizzle) return g;
    const int64_t slice = g / groups_per_slice;
    const int64_t slot = (slice % gpus_per_node) * nodes + slice / gpus_per_node;
    return slot * groups_per_slice + g % groups_per_slice;
  }
};

// One thread block per quantization block (looping when there are more than the grid): int8 output.
__global__ void quantize_int8_kernel(const float* __restrict__ x, int64_t size, int64_t groups, int8_t* __restrict__ q,
                                     float* __restrict__ inv_scales) {
  __shared__ float scratch[33];
  for (int64_t g = blockIdx.x; g < groups; g += gridDim.x) {
    const float* in = x + g * size;
    float amax = -INFINITY;
    for (int64_t i = threadIdx.x; i < size; i += blockDim.x) amax = fmaxf(amax, fabsf(round_fp16(in[i])));
    const BlockScale s = block_scale<8>(block_max(amax, scratch));
    if (threadIdx.x == 0) inv_scales[g] = s.inv_scale;
    for (int64_t i = threadIdx.x; i < size; i += blockDim.x)
      q[g * size + i] = static_cast<int8_t>(quantize_value<8>(round_fp16(in[i]), s.scale));
  }
}

// int4 output, blocks written in `order`.
__global__ void quantize_int4_kernel(const float* __restrict__ x, int64_t size, int64_t groups, BlockOrder order,
                                     uint8_t* __restrict__ packed, float* __restrict__ inv_scales) {
  __shared__ float scratch[33];
  for (int64_t g = blockIdx.x; g < groups; g += gridDim.x) {
    const float* in = x + g * size;
    float amax = -INFINITY;
    for (int64_t i = threadIdx.x; i < size; i += blockDim.x) amax = fmaxf(amax, fabsf(round_fp16(in[i])));
    const BlockScale s = block_scale<4>(block_max(amax, scratch));
    const int64_t out_group = order.out_group(g);
    if (threadIdx.x == 0) inv_scales[out_group] = s.inv_scale;
    uint8_t* out = packed + out_group * size / 2;
    for (int64_t k = threadIdx.x; k < size / 2; k += blockDim.x)
      out[k] = pack_int4(quantize_value<4>(round_fp16(in[2 * k]), s.scale),
                         quantize_value<4>(round_fp16(in[2 * k + 1]), s.scale));
  }
}

__global__ void dequantize_int8_kernel(const int8_t* __restrict__ q, const float* __restrict__ inv_scales, int64_t n,
                                       int64_t size, float* __restrict__ out) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = __half2float(dequantize_value(q[i], inv_scales[i / size]));
}

__global__ void dequantize_int4_kernel(const uint8_t* __restrict__ packed, const float* __restrict__ inv_scales,
                                       int64_t n, int64_t size, float* __restrict__ out) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint8_t byte = packed[i / 2];
    out[i] = __half2float(dequantize_value(i % 2 == 0 ? int4_high(byte) : int4_low(byte), inv_scales[i / size]));
  }
}

// The fp16 sum over peers of element i, each term dequantized to fp16, summed from +0 in peer order
// (quant_reduce.cu dequant_reduce; coalesced_collectives.py's sum over the node chunks).
__device__ __forceinline__ __half peer_sum(const uint8_t* in, const float* scales, int64_t elems_per_peer,
                                           int64_t groups_per_peer, int64_t size, int peers, int64_t i) {
  __half sum = __float2half_rn(0.0f);
  for (int j = 0; j < peers; ++j) {
    const uint8_t byte = in[(j * elems_per_peer + i) / 2];
    const int q = i % 2 == 0 ? int4_high(byte) : int4_low(byte);
    sum = __hadd(sum, dequantize_value(q, scales[j * groups_per_peer + i / size]));
  }
  return sum;
}

// One thread block per output block: the block's max |sum| from a first pass, the sums again to quantize them.
__global__ void quantized_reduction_int4_kernel(const uint8_t* __restrict__ in, const float* __restrict__ in_scales,
                                                int64_t elems_per_peer, int64_t groups_per_peer, int64_t size,
                                                int peers, uint8_t* __restrict__ out, float* __restrict__ out_scales) {
  __shared__ float scratch[33];
  for (int64_t g = blockIdx.x; g < groups_per_peer; g += gridDim.x) {
    const int64_t first = g * size;
    float amax = -INFINITY;
    for (int64_t i = threadIdx.x; i < size; i += blockDim.x)
      amax = fmaxf(
          amax, fabsf(__half2float(peer_sum(in, in_scales, elems_per_peer, groups_per_peer, size, peers, first + i))));
    const BlockScale s = block_scale<4>(block_max(amax, scratch));
    if (threadIdx.x == 0) out_scales[g] = s.inv_scale;
    for (int64_t k = threadIdx.x; k < size / 2; k += blockDim.x) {
      const int64_t i = first + 2 * k;
      const float even = __half2float(peer_sum(in, in_scales, elems_per_peer, groups_per_peer, size, peers, i));
      const float odd = __half2float(peer_sum(in, in_scales, elems_per_peer, groups_per_peer, size, peers, i + 1));
      out[i / 2] = pack_int4(quantize_value<4>(even, s.scale), quantize_value<4>(odd, s.scale));
    }
  }
}

__global__ void dequantize_reduce_int4_kernel(const uint8_t* __restrict__ in, const float* __restrict__ in_scales,
                                              int64_t elems_per_peer, int64_t groups_per_peer, int64_t size, int peers,
                                              float reciprocal, float* __restrict__ out) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < elems_per_peer;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const __half sum = peer_sum(in, in_scales, elems_per_peer, groups_per_peer, size, peers, i);
    out[i] = round_fp16(__fmul_rn(__half2float(sum), reciprocal));
  }
}

int block_grid(int64_t groups) { return static_cast<int>(std::min<int64_t>(groups, kMaxBlocks)); }

}  // namespace

cudaError_t quantize_int8(const float* x, int64_t n, int64_t groups, int8_t* q, float* inv_scales,
                          cudaStream_t stream) {
  if (!quant::block_layout_error(n, groups, 8).empty()) return cudaErrorInvalidValue;
  quantize_int8_kernel<<<block_grid(groups), kThreads, 0, stream>>>(x, n / groups, groups, q, inv_scales);
  return cudaGetLastError();
}

cudaError_t dequantize_int8(const int8_t* q, const float* inv_scales, int64_t n, int64_t groups, float* out,
                            cudaStream_t stream) {
  if (!quant::block_layout_error(n, groups, 8).empty()) return cudaErrorInvalidValue;
  dequantize_int8_kernel<<<detail::grid_size(n, kThreads), kThreads, 0, stream>>>(q, inv_scales, n, n / groups, out);
  return cudaGetLastError();
}

cudaError_t quantize_int4(const float* x, int64_t n, int64_t groups, uint8_t* packed, float* inv_scales,
                          cudaStream_t stream) {
  if (!quant::block_layout_error(n, groups, 4).empty()) return cudaErrorInvalidValue;
  quantize_int4_kernel<<<block_grid(groups), kThreads, 0, stream>>>(x, n / groups, groups, BlockOrder{}, packed,
                                                                    inv_scales);
  return cudaGetLastError();
}

cudaError_t dequantize_int4(const uint8_t* packed, const float* inv_scales, int64_t n, int64_t groups, float* out,
                            cudaStream_t stream) {
  if (!quant::block_layout_error(n, groups, 4).empty()) return cudaErrorInvalidValue;
  dequantize_int4_kernel<<<detail::grid_size(n, kThreads), kThreads, 0, stream>>>(packed, inv_scales, n, n / groups,
                                                                                  out);
  return cudaGetLastError();
}

cudaError_t swizzle_quantize_int4(const float* x, int64_t n, int64_t groups, int nodes, int gpus_per_node,
                                  uint8_t* packed, float* inv_scales, cudaStream_t stream) {
  if (!quant::swizzle_layout_error(n, groups, nodes, gpus_per_node).empty()) return cudaErrorInvalidValue;
  BlockOrder order;
  order.swizzle = true;
  order.nodes = nodes;
  order.gpus_per_node = gpus_per_node;
  order.groups_per_slice = groups / (static_cast<int64_t>(nodes) * gpus_per_node);
  quantize_int4_kernel<<<block_grid(groups), kThreads, 0, stream>>>(x, n / groups, groups, order, packed, inv_scales);
  return cudaGetLastError();
}

cudaError_t quantized_reduction_int4(const uint8_t* in, const float* in_scales, int64_t elems_per_peer,
                                     int64_t groups_per_peer, int peers, uint8_t* out, float* out_scales,
                                     cudaStream_t stream) {
  if (!quant::reduction_layout_error(elems_per_peer, groups_per_peer, peers).empty()) return cudaErrorInvalidValue;
  quantized_reduction_int4_kernel<<<block_grid(groups_per_peer), kThreads, 0, stream>>>(
      in, in_scales, elems_per_peer, groups_per_peer, elems_per_peer / groups_per_peer, peers, out, out_scales);
  return cudaGetLastError();
}

cudaError_t dequantize_reduce_int4(const uint8_t* in, const float* in_scales, int64_t elems_per_peer,
                                   int64_t groups_per_peer, int peers, float divisor, float* out, cudaStream_t stream) {
  if (!quant::reduction_layout_error(elems_per_peer, groups_per_peer, peers).empty() || !(divisor != 0.0f))
    return cudaErrorInvalidValue;
  const float reciprocal = 1.0f / divisor;  // host IEEE division, as the CPU version and PyTorch's scalar divide
  dequantize_reduce_int4_kernel<<<detail::grid_size(elems_per_peer, kThreads), kThreads, 0, stream>>>(
      in, in_scales, elems_per_peer, groups_per_peer, elems_per_peer / groups_per_peer, peers, reciprocal, out);
  return cudaGetLastError();
}

}  // namespace lins::kernels::cuda
