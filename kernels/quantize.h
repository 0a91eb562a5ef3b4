// DeepSpeed ZeRO++'s quantizers on the CPU: qwZ (int8 weights for the quantized all-gather) and qgZ (int4 gradients
// for the two-stage all-to-all reduce), written to give the bits DeepSpeed's CUDA kernels give. docs/engines.md
// ("ZeRO++ quantized communication") cites each rule in DeepSpeed's source; kernels/cuda/quantize_cuda.h has the same
// functions on the GPU, equal to these bit for bit.
//
// Number formats. DeepSpeed quantizes fp16 tensors. Inputs here are floats that every function first rounds to fp16
// (round to nearest even; a bf16 value, exact as a float, so gets the single fp16 rounding PyTorch's bf16 -> fp16 cast
// gives; magnitudes from 65520 up become inf, up to 2^-25 zero). Dequantized outputs are floats holding fp16 values.
//
// Symmetric quantization of one block (a "group") of b-bit values, b = 8 or 4:
//   amax      = max |h| over the block's fp16 values h (exact, an fp16 value)
//   scale     = amax == 0 ? 1 : 2^b / (2 * amax)                      (fp32)
//   q         = clamp(round_half_even(h * scale), -2^(b-1), 2^(b-1)-1)  (h * scale rounded to fp32 first)
//   inv_scale = 1 / scale                                              (fp32; the one value sent per block)
//   dequant   = fp16(fp32(q * inv_scale))                              (two roundings, as DeepSpeed's kernels)
// So +amax becomes 127/128 (int8) or 7/8 (int4) of amax, and -amax comes back exactly. int4 values are packed two to a
// byte, the even element in the high nibble (bits 4-7) and the odd one in the low nibble (bits 0-3).
//
// IEEE arithmetic here and in the CUDA versions. DeepSpeed builds its kernels with --use_fast_math, so its two
// divisions (scale = 2^b / (2 * amax), inv_scale = 1 / scale) are approximate and can differ from ours by an fp32 ulp
// or two. A different scale moves a value lying within that distance of a rounding tie (h * scale = k + 1/2) by one
// quantization level; a different inv_scale moves each dequantized value by about an fp32 ulp before its fp16
// rounding, which changes the fp16 result only next to an fp16 tie. With a power-of-two amax both quotients are powers
// of two, which the approximations are expected to return exactly, and the results to agree.
// (Fast math's flush-to-zero changes nothing: no fp32 subnormal arises from fp16 inputs and these scales.)
// Non-finite inputs follow the same arithmetic (an inf or NaN in a block makes every value of it NaN on the way back);
// they are not meant to be sent.
//
// Layout preconditions (checked: the CPU functions throw std::invalid_argument, the CUDA ones return
// cudaErrorInvalidValue): groups > 0, n > 0, n % groups == 0, and for int4 an even group size. DeepSpeed's kernels need
// more (group sizes a multiple of 8, below 16384 for quantize and 40960 for the swizzled quantize, or they silently
// skip elements); the qwZ and qgZ rules (core/model/quantization.h) only choose layouts DeepSpeed's kernels handle.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "core/model/quantization.h"  // the block-count and shape rules, the bytes
#include "kernels/quantize_layout.h"   // block_layout_error, swizzle_layout_error, reduction_layout_error

namespace lins::kernels::quant {

// --- fp16 (IEEE binary16) -----------------------------------------------------------------------------------------
// x rounded to fp16 (nearest even; overflow to inf; NaN stays NaN), as bits and as the float holding it.
uint16_t fp16_bits(float x);
float fp16_value(uint16_t bits);  // exact
float round_fp16(float x);        // fp16_value(fp16_bits(x))

// --- The rules: block counts, which tensors take the quantized path, bytes (core/model/quantization.h) ----------------
using lins::flat_group_count;
using lins::kQgzMaxGroupSize;
using lins::kQwzTargetGroupSize;
using lins::qgz_deepspeed_quantizes;
using lins::qgz_group_count;
using lins::qgz_inter_all_to_all_bytes;
using lins::qgz_intra_all_to_all_bytes;
using lins::qgz_refusal;
using lins::QuantizedBytes;
using lins::qwz_all_gather_bytes;
using lins::qwz_group_count;
using lins::qwz_refusal;

// --- Block quantization (both) --------------------------------------------------------------------------------------
// x[n] in `groups` consecutive blocks of n / groups elements; inv_scales[groups]. int8: q[n]. int4: packed[n / 2].
void quantize_int8(const float* x, int64_t n, int64_t groups, int8_t* q, float* inv_scales);
void dequantize_int8(const int8_t* q, const float* inv_scales, int64_t n, int64_t groups, float* out);
void quantize_int4(const float* x, int64_t n, int64_t groups, uint8_t* packed, float* inv_scales);
void dequantize_int4(const uint8_t* packed, const float* inv_scales, int64_t n, int64_t groups, float* out);

// --- qgZ: int4 gradients, all-to-all inside the node, reduce, all-to-all across nodes, reduce ----------------------
// W = nodes * gpus_per_node ranks, rank = node * gpus_per_node + local. A gradient of shape [d0, d1, ...] with M
// elements is quantized in G = max(d0, d1, W) blocks of E = M / G elements; after the exchange rank p holds elements
// [p * M / W, (p + 1) * M / W) of the reduced gradient.

// Step 1, each rank: quantize x[n] (the whole gradient) to int4 in `groups` blocks and write the blocks in swizzled
// order, so that the intra-node all-to-all's chunk k is what local rank k needs. The W slices of n / W elements (slice
// p = node * gpus_per_node + local) go to slot local * nodes + node (2 nodes x 4 GPUs: slices 0,4,1,5,2,6,3,7 in slot
// order); each slice's groups / W blocks and their inv_scales move with it. packed[n / 2], inv_scales[groups].
// Requires groups % W == 0.
void swizzle_quantize_int4(const float* x, int64_t n, int64_t groups, int nodes, int gpus_per_node, uint8_t* packed,
                           float* inv_scales);

// Step 2, after the intra-node all-to-all: `in` holds one int4 tensor of elems_per_peer values from each of the `peers`
// GPUs of the node, in local-rank order (packed[peers * elems_per_peer / 2], in_scales[peers * groups_per_peer]).
// out[i] = the int4 requantization, in groups_per_peer blocks of the same size, of the fp16 sum over peers (from +0,
// in peer order, each term dequantized to fp16) of element i. out[elems_per_peer / 2], out_scales[groups_per_peer].
// DeepSpeed: elems_per_peer = M / R, groups_per_peer = G / R, peers = R.
void quantized_reduction_int4(const uint8_t* in, const float* in_scales, int64_t elems_per_peer,
                              int64_t groups_per_peer, int peers, uint8_t* out, float* out_scales);

// Step 3, after the inter-node all-to-all: out[i] = fp16(fp32(s_i * fp32(1 / divisor))), s_i the fp16 sum over peers
// (from +0, in peer order) of element i dequantized to fp16. The division is PyTorch's for an fp16 tensor divided by a
// Python number on the GPU: a multiply by the fp32 reciprocal (equal to a correctly rounded division when the divisor
// is a power of two). DeepSpeed: elems_per_peer = M / W, groups_per_peer = G / W, peers = N, divisor = N, which leaves
// R times the mean (its unquantized fallback leaves the mean); divisor = W gives the mean. out[elems_per_peer].
void dequantize_reduce_int4(const uint8_t* in, const float* in_scales, int64_t elems_per_peer, int64_t groups_per_peer,
                            int peers, float divisor, float* out);

}  // namespace lins::kernels::quant
