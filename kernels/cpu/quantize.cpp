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

// --- qwZ block count (partition_parameters.py CUDAQuantizer.quantize) ------------------------------------------------

namespace {
// DeepSpeed's loops. The first one (g += 1 until S % (8g) == 0, stopping at g = S) is found through the divisors of
// S / 8 instead of one step at a time, which for S = 8p, p prime, would take S / 8 steps; the result is the same: the
// smallest g >= ceil(S / 8000) dividing S / 8, or S when there is none (S % 8 != 0). The doubling loop is kept as
// written, although it cannot run after the first (S / g <= 8000 already).
int64_t qwz_loops(int64_t elems) {
  int64_t groups = (elems + kQwzTargetGroupSize - 1) / kQwzTargetGroupSize;
  if (groups < elems) {
    int64_t found = elems;
    if (elems % 8 == 0) {
      const int64_t k = elems / 8;  // S % (8g) == 0 exactly when g divides S / 8
      for (int64_t d = 1; d <= k / d; ++d) {
        if (k % d != 0) continue;
        for (const int64_t c : {d, k / d})
          if (c >= groups && c < found) found = c;
      }
    }
    groups = found;
  }
  while (elems % (8 * groups * 2) == 0 && elems > kQwzTargetGroupSize * groups) groups *= 2;
  return groups;
}
}  // namespace

std::string qwz_refusal(int64_t elems) {
  if (elems <= 0)
    return "an empty buffer (" + std::to_string(elems) +
           " elements): DeepSpeed's block search starts at 0 blocks and divides by zero";
  const int64_t g = qwz_loops(elems);
  const std::string size = std::to_string(elems);
  if (elems % (8 * g) != 0)
    return size + " elements: no block count g with " + size + " % (8 g) == 0 (the size is not a multiple of 8)";
  if (elems >= 16000 * g) return size + " / " + std::to_string(g) + " blocks is not below 16000";
  if (elems <= g) return size + " elements are not more than the " + std::to_string(g) + " blocks";
  return "";
}

int64_t qwz_group_count(int64_t elems) { return qwz_refusal(elems).empty() ? qwz_loops(elems) : 0; }

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

// --- qgZ
// --------------------------------------------------------------------------------------------------------------

int64_t qgz_group_count(int64_t d0, int64_t d1, int world) { return std::max({d0, d1, static_cast<int64_t>(world)}); }

namespace {
int64_t element_count(std::span<const int64_t> shape) {
  int64_t m = 1;
  for (int64_t d : shape) m *= d;
  return m;
}
}  // namespace

bool qgz_deepspeed_quantizes(std::span<const int64_t> shape, int nodes, int gpus_per_node) {
  const int64_t world = static_cast<int64_t>(nodes) * gpus_per_node;
  if (nodes <= 1) return false;                               // stage3.py: num_nodes > 1
  if (shape.size() == 1) return false;                        // tensor.dim() == 1
  if (element_count(shape) % (2 * world) != 0) return false;  // numel % (2 W) != 0 (a 0-d tensor lands here)
  return true;
}

std::string qgz_refusal(std::span<const int64_t> shape, int nodes, int gpus_per_node) {
  if (nodes <= 0 || gpus_per_node <= 0) return "nodes and gpus_per_node must be positive";
  const int64_t world = static_cast<int64_t>(nodes) * gpus_per_node;
  const int64_t m = element_count(shape);
  if (nodes == 1) return "one node: DeepSpeed reduce-scatters unquantized (stage3.py needs num_nodes > 1)";
  if (shape.size() == 1) return "a 1-D tensor: DeepSpeed reduce-scatters it unquantized";
  if (m % (2 * world) != 0)
    return std::to_string(m) + " elements are not a multiple of 2W = " + std::to_string(2 * world) +
           ": DeepSpeed reduce-scatters unquantized";
  if (m == 0) return "an empty tensor";
  const int64_t groups = qgz_group_count(shape[0], shape[1], static_cast<int>(world));
  if (m % groups != 0)
    return std::to_string(m) + " elements are not a multiple of G = " + std::to_string(groups) +
           " blocks (lins: DeepSpeed would leave the remainder unquantized)";
  if (groups % world != 0)
    return "G = " + std::to_string(groups) + " blocks are not a multiple of W = " + std::to_string(world) +
           " (lins: DeepSpeed's swizzle would leave blocks unquantized)";
  const int64_t size = m / groups;
  if (size % 8 != 0)
    return "block size E = " + std::to_string(size) +
           " is not a multiple of 8 (lins: DeepSpeed's kernels move 8 values at a time and would mix blocks)";
  if (size > kQgzMaxGroupSize)
    return "block size E = " + std::to_string(size) + " is above " + std::to_string(kQgzMaxGroupSize) +
           " (lins: DeepSpeed's swizzled quantize launches no kernel)";
  return "";
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

// --- Bytes --------------------------------------------------------------------------------------------------------

QuantizedBytes qwz_all_gather_bytes(int64_t partition_elems) {
  const int64_t groups = qwz_group_count(partition_elems);
  if (groups == 0) return {};
  return {partition_elems, 4 * groups};
}

QuantizedBytes qgz_intra_all_to_all_bytes(int64_t elems, int64_t groups) { return {elems / 2, 4 * groups}; }

QuantizedBytes qgz_inter_all_to_all_bytes(int64_t elems, int64_t groups, int gpus_per_node) {
  return {elems / (2 * gpus_per_node), 4 * groups / gpus_per_node};
}

}  // namespace lins::kernels::quant
