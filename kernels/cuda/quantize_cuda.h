// DeepSpeed ZeRO++'s qwZ (int8) and qgZ (int4) quantizers on the GPU: the functions of kernels/quantize.h (same names,
// arguments and layouts, which that header documents) on device pointers, enqueued on `stream`. Each returns
// cudaErrorInvalidValue without launching when the layout checks of kernels/quantize_layout.h refuse the arguments,
// else the launch's status (nothing is synchronised). The results equal the CPU functions' bit for bit: IEEE fp32
// operations with explicit rounding (no fast math, no contraction), fp16 sums with the GPU's fp16 add, and block
// maxima that do not depend on the order of the reduction. The planning functions (qwz_group_count, qgz_refusal, the
// byte counts) are host code and live in core/model/quantization.h.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace lins::kernels::cuda {

cudaError_t quantize_int8(const float* x, int64_t n, int64_t groups, int8_t* q, float* inv_scales, cudaStream_t stream);
cudaError_t dequantize_int8(const int8_t* q, const float* inv_scales, int64_t n, int64_t groups, float* out,
                            cudaStream_t stream);
cudaError_t quantize_int4(const float* x, int64_t n, int64_t groups, uint8_t* packed, float* inv_scales,
                          cudaStream_t stream);
cudaError_t dequantize_int4(const uint8_t* packed, const float* inv_scales, int64_t n, int64_t groups, float* out,
                            cudaStream_t stream);
cudaError_t swizzle_quantize_int4(const float* x, int64_t n, int64_t groups, int nodes, int gpus_per_node,
                                  uint8_t* packed, float* inv_scales, cudaStream_t stream);
cudaError_t quantized_reduction_int4(const uint8_t* in, const float* in_scales, int64_t elems_per_peer,
                                     int64_t groups_per_peer, int peers, uint8_t* out, float* out_scales,
                                     cudaStream_t stream);
cudaError_t dequantize_reduce_int4(const uint8_t* in, const float* in_scales, int64_t elems_per_peer,
                                   int64_t groups_per_peer, int peers, float divisor, float* out, cudaStream_t stream);

}  // namespace lins::kernels::cuda
