// DeepSpeed ZeRO++'s qwZ and qgZ quantizers on the CPU (kernels/quantize.h). Every operation is one IEEE fp32 or fp16
// operation rounded to nearest even, written so that each rounding happens where DeepSpeed's kernels round: nothing
// here may be contracted into an FMA or kept in a wider format (CMake builds this file with -ffp-contract=off).
#include "kernels/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

namespace lins::kernels::quant {

uint16_t fp16_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));  // NaN, kept quiet
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520 (incl. inf): rounds to inf
  if (a >= 0x38800000u) {                                              // normal in fp16 (>= 2^-14)
    const uint32_t exponent = (a >> 23) - 127 + 15;
    const uint32_t mantissa = a & 0x7fffffu;
    uint32_t h = (exponent << 10) | (mantissa >> 13);
    const uint32_t rest = mantissa & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // a carry into the exponent is the right result
    return static_cast<uint16_t>(sign | h);
  }
  if (a <= 0x33000000u) return sign;  // <= 2^-25: zero (2^-25 itself is the tie, to the even 0)
  // Subnormal in fp16: the value in units of 2^-24, rounded.
  const uint32_t exponent = a >> 23;  // 102..112
  const uint32_t mantissa = (a & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126 - exponent;  // value / 2^-24 = mantissa * 2^(exponent - 126)
  uint32_t h = mantissa >> shift;
  const uint32_t rest = mantissa & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1);
  if (rest > half || (rest == half && (h & 1u))) ++h;  // may reach 0x400, the smallest normal: still right
  return static_cast<uint16_t>(sign | h);
}

float fp16_value(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1fu;
  const uint32_t mantissa = bits & 0x3ffu;
  uint32_t u;
  if (exponent == 0x1fu) {
    u = sign | 0x7f800000u | (mantissa << 13);
  } else if (exponent != 0) {
    u = sign | ((exponent - 15 + 127) << 23) | (mantissa << 13);
  } else {  // zero or subnormal: mantissa * 2^-24, exact in fp32
    float v = static_cast<float>(mantissa) * 0x1p-24f;
    std::memcpy(&u, &v, 4);
    u |= sign;
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

float round_fp16(float x) { return fp16_value(fp16_bits(x)); }

namespace {

void require(const std::string& error, const char* function) {
  if (!error.empty()) throw std::invalid_argument(std::string(function) + ": " + error);
}

// The sum of two fp16 values rounded to fp16, as the GPU's fp16 add. The fp32 sum is rounded once more, to fp16;
// with 24 >= 2 * 11 + 2 bits the double rounding never differs from rounding the exact sum.
float add_fp16(float a, float b) { return round_fp16(a + b); }

// One block's quantization parameters (quantization_utils.h Params<Symmetric>): max |h| starts at -inf and ignores
// NaN (fmaxf), as the GPU's block reduction does.
struct BlockScale {
  float scale;
  float inv_scale;
};

template <int kBits>
BlockScale block_scale(float amax) {
  const float scale = amax == 0.0f ? 1.0f : static_cast<float>(1 << kBits) / (2.0f * amax);
  return {scale, 1.0f / scale};
}

// round-half-even(h * scale) clamped to the b-bit range; a NaN product becomes 0 (the GPU's cvt.rni.s32.f32).
template <int kBits>
int quantize_value(float h, float scale) {
  constexpr int kMin = -(1 << (kBits - 1));
  constexpr int kMax = (1 << (kBits - 1)) - 1;
  const float v = h * scale;
  if (std::isnan(v)) return 0;
  const float r = std::nearbyint(v);  // the default rounding mode: nearest even
  if (r <= static_cast<float>(kMin)) return kMin;
  if (r >= static_cast<float>(kMax)) return kMax;
  return static_cast<int>(r);
}

float dequantize_value(int q, float inv_scale) { return round_fp16(static_cast<float>(q) * inv_scale); }

uint8_t pack_int4(int even, int odd) {
  return static_cast<uint8_t>(((static_cast<unsigned>(even) & 0xfu) << 4) | (static_cast<unsigned>(odd) & 0xfu));
}
int int4_high(uint8_t byte) {  // the even element
  const int v = byte >> 4;
  return v >= 8 ? v - 16 : v;
}
int int4_low(uint8_t byte) {  // the odd element
  const int v = byte & 0xf;
  return v >= 8 ? v - 16 : v;
}

float block_amax(const float* h, int64_t count) {
  float amax = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < count; ++i) amax = std::fmax(amax, std::fabs(h[i]));
  return amax;
}

// Quantizes one block of fp16 values h[count] to int4 at packed[count / 2]; returns inv_scale.
float quantize_block_int4(const float* h, int64_t count, uint8_t* packed) {
  const BlockScale s = block_scale<4>(block_amax(h, count));
  for (int64_t i = 0; i < count; i += 2)
    packed[i / 2] = pack_int4(quantize_value<4>(h[i], s.scale), quantize_value<4>(h[i + 1], s.scale));
  return s.inv_scale;
}

// x rounded to fp16, `count` elements from `first`.
std::vector<float> fp16_copy(const float* x, int64_t count) {
  std::vector<float> h(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) h[static_cast<size_t>(i)] = round_fp16(x[i]);
  return h;
}

// The fp16 sum over `peers` int4 tensors of element i, each term dequantized to fp16, summed from +0 in peer order.
float peer_sum_fp16(const uint8_t* in, const float* scales, int64_t elems_per_peer, int64_t groups_per_peer,
                    int64_t group_size, int peers, int64_t i) {
  float sum = 0.0f;
  for (int j = 0; j < peers; ++j) {
    const uint8_t byte = in[(static_cast<int64_t>(j) * elems_per_peer + i) / 2];
    const int q = (i % 2 == 0) ? int4_high(byte) : int4_low(byte);
    const float inv_scale = scales[static_cast<int64_t>(j) * groups_per_peer + i / group_size];
    sum = add_fp16(sum, dequantize_value(q, inv_scale));
  }
  return sum;
}

}  // namespace

// --- Block quantization ---------------------------------------------------------------------------------------------

void quantize_int8(const float* x, int64_t n, int64_t groups, int8_t* q, float* inv_scales) {
  require(block_layout_error(n, groups, 8), "quantize_int8");
  const int64_t size = n / groups;
  std::vector<float> h;
  for (int64_t g = 0; g < groups; ++g) {
    h = fp16_copy(x + g * size, size);
    const BlockScale s = block_scale<8>(block_amax(h.data(), size));
    for (int64_t i = 0; i < size; ++i) q[g * size + i] = static_cast<int8_t>(quantize_value<8>(h[i], s.scale));
    inv_scales[g] = s.inv_scale;
  }
}

void dequantize_int8(const int8_t* q, const float* inv_scales, int64_t n, int64_t groups, float* out) {
  require(block_layout_error(n, groups, 8), "dequantize_int8");
  const int64_t size = n / groups;
  for (int64_t i = 0; i < n; ++i) out[i] = dequantize_value(q[i], inv_scales[i / size]);
}

void quantize_int4(const float* x, int64_t n, int64_t groups, uint8_t* packed, float* inv_scales) {
  require(block_layout_error(n, groups, 4), "quantize_int4");
  const int64_t size = n / groups;
  for (int64_t g = 0; g < groups; ++g) {
    const std::vector<float> h = fp16_copy(x + g * size, size);
    inv_scales[g] = quantize_block_int4(h.data(), size, packed + g * size / 2);
  }
}

void dequantize_int4(const uint8_t* packed, const float* inv_scales, int64_t n, int64_t groups, float* out) {
  require(block_layout_error(n, groups, 4), "dequantize_int4");
  const int64_t size = n / groups;
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t byte = packed[i / 2];
    out[i] = dequantize_value(i % 2 == 0 ? int4_high(byte) : int4_low(byte), inv_scales[i / size]);
  }
}

void swizzle_quantize_int4(const float* x, int64_t n, int64_t groups, int nodes, int gpus_per_node, uint8_t* packed,
                           float* inv_scales) {
  require(swizzle_layout_error(n, groups, nodes, gpus_per_node), "swizzle_quantize_int4");
  const int64_t world = static_cast<int64_t>(nodes) * gpus_per_node;
  const int64_t size = n / groups;
  const int64_t groups_per_slice = groups / world;
  for (int64_t g = 0; g < groups; ++g) {
    // swizzled_quantize.cu: slice p = node * gpus_per_node + local goes to slot local * nodes + node.
    const int64_t slice = g / groups_per_slice;
    const int64_t slot = (slice % gpus_per_node) * nodes + slice / gpus_per_node;
    const int64_t out_group = slot * groups_per_slice + g % groups_per_slice;
    const std::vector<float> h = fp16_copy(x + g * size, size);
    inv_scales[out_group] = quantize_block_int4(h.data(), size, packed + out_group * size / 2);
  }
}

void quantized_reduction_int4(const uint8_t* in, const float* in_scales, int64_t elems_per_peer,
                              int64_t groups_per_peer, int peers, uint8_t* out, float* out_scales) {
  require(reduction_layout_error(elems_per_peer, groups_per_peer, peers), "quantized_reduction_int4");
  const int64_t size = elems_per_peer / groups_per_peer;
  std::vector<float> sums(static_cast<size_t>(size));
  for (int64_t g = 0; g < groups_per_peer; ++g) {
    for (int64_t i = 0; i < size; ++i)
      sums[static_cast<size_t>(i)] =
          peer_sum_fp16(in, in_scales, elems_per_peer, groups_per_peer, size, peers, g * size + i);
    out_scales[g] = quantize_block_int4(sums.data(), size, out + g * size / 2);
  }
}

void dequantize_reduce_int4(const uint8_t* in, const float* in_scales, int64_t elems_per_peer, int64_t groups_per_peer,
                            int peers, float divisor, float* out) {
  require(reduction_layout_error(elems_per_peer, groups_per_peer, peers), "dequantize_reduce_int4");
  if (!(divisor != 0.0f)) throw std::invalid_argument("dequantize_reduce_int4: the divisor must be nonzero");
  const int64_t size = elems_per_peer / groups_per_peer;
  const float reciprocal = 1.0f / divisor;  // PyTorch: opmath_t(1.0) / b, then a * inv_b per element
  for (int64_t i = 0; i < elems_per_peer; ++i) {
    const float sum = peer_sum_fp16(in, in_scales, elems_per_peer, groups_per_peer, size, peers, i);
    out[i] = round_fp16(sum * reciprocal);
  }
}

}  // namespace lins::kernels::quant
