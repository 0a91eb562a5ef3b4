// The ZeRO++ quantizers of kernels/quantize.h: fp16 rounding, blocks worked by hand, the edge values (zero blocks,
// +amax clipped, -amax exact), the int4 nibble order, DeepSpeed's qwZ block-count rule and qgZ's shape rules, the
// swizzle order, the order of the fp16 sums, and qgZ end to end on 2 nodes x 2 GPUs emulated in one process.
// tests/unit/kernels/zeropp_quant_peer_test.py holds the same functions to an independent numpy transcription of
// DeepSpeed's kernels, bit for bit.
#include "kernels/quantize.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <vector>

namespace lins::kernels::quant {
namespace {

using Floats = std::vector<float>;
using Bytes = std::vector<uint8_t>;

// --- fp16
// -------------------------------------------------------------------------------------------------------------

TEST(QuantizeFp16, RoundsToNearestEvenWithSubnormalsAndOverflow) {
  EXPECT_EQ(fp16_bits(1.0f), 0x3c00);
  EXPECT_EQ(fp16_bits(1.0001f), 0x3c00);              // 1 + 2^-10 is the next fp16 value; 1.0001 is below half-way
  EXPECT_EQ(fp16_bits(0.1f), 0x2e66);                 // 0.0999755859375
  EXPECT_EQ(fp16_bits(1.0f + 0x1p-11f), 0x3c00);      // tie: to the even 1.0
  EXPECT_EQ(fp16_bits(1.0f + 3 * 0x1p-11f), 0x3c02);  // tie: to the even 1 + 2^-9
  EXPECT_EQ(fp16_bits(65504.0f), 0x7bff);             // the largest fp16
  EXPECT_EQ(fp16_bits(65519.996f), 0x7bff);           // below the tie with 65536
  EXPECT_EQ(fp16_bits(65520.0f), 0x7c00);             // the tie rounds to "even" 2^16: inf
  EXPECT_EQ(fp16_bits(-1e9f), 0xfc00);
  EXPECT_EQ(fp16_bits(0x1p-14f), 0x0400);  // the smallest normal
  EXPECT_EQ(fp16_bits(0x1p-24f), 0x0001);  // the smallest subnormal
  EXPECT_EQ(fp16_bits(0x1p-25f), 0x0000);  // the tie with 0: to the even 0
  EXPECT_EQ(fp16_bits(0x1.8p-25f), 0x0001);
  EXPECT_EQ(fp16_bits(3 * 0x1p-25f), 0x0002);         // 1.5 units: the tie to the even 2
  EXPECT_EQ(fp16_bits(0x1p-14f - 0x1p-26f), 0x0400);  // rounds up into the normals
  EXPECT_EQ(fp16_bits(-0.0f), 0x8000);
  EXPECT_TRUE(std::isnan(fp16_value(fp16_bits(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(fp16_value(0x0001), 0x1p-24f);
  EXPECT_EQ(fp16_value(0x7bff), 65504.0f);
  EXPECT_EQ(fp16_value(0xfc00), -std::numeric_limits<float>::infinity());
  EXPECT_EQ(round_fp16(3.14159265f), 3.140625f);
}

#if defined(__FLT16_MAX__)
// Against the compiler's own float -> _Float16 conversion, on every fp32 exponent with random mantissas and on every
// fp16 value and the midpoints beside it.
TEST(QuantizeFp16, AgreesWithTheCompilersFloat16) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 300000; ++i) {
    uint32_t u = bits(rng);
    float f;
    std::memcpy(&f, &u, 4);
    if (std::isnan(f)) continue;
    const _Float16 h = static_cast<_Float16>(f);
    uint16_t hb;
    std::memcpy(&hb, &h, 2);
    ASSERT_EQ(fp16_bits(f), hb) << "float bits " << std::hex << u;
  }
  for (uint32_t b = 0; b < 0x7c00; ++b) {
    const float v = fp16_value(static_cast<uint16_t>(b));
    ASSERT_EQ(fp16_bits(v), b);
    const float next = fp16_value(static_cast<uint16_t>(b + 1));
    const float mid = v + (next - v) / 2;  // exact in fp32
    const _Float16 h = static_cast<_Float16>(mid);
    uint16_t hb;
    std::memcpy(&hb, &h, 2);
    ASSERT_EQ(fp16_bits(mid), hb) << "midpoint above fp16 " << std::hex << b;
  }
}
#endif

// --- Blocks worked by hand ----------------------------------------------------------------------------------------

TEST(QuantizeInt8, HandBlockPowerOfTwoAmax) {
  // amax = 4 (the fp16 of 1.0001 is 1.0); scale = 2^8 / (2 * 4) = 32; inv_scale = 1/32 = 0.03125.
  //   1 * 32 = 32;  -2 * 32 = -64;  0.5 * 32 = 16;  4 * 32 = 128 -> clipped to 127;
  //   0.078125 * 32 = 2.5 -> 2 (tie to even);  0.109375 * 32 = 3.5 -> 4 (tie to even);  -2.5 -> -2;  1.0 -> 32.
  // Back: q / 32: 1, -2, 0.5, 127/32 = 3.96875, 0.0625, 0.125, -0.0625, 1 (all exact in fp16).
  const Floats x = {1.0f, -2.0f, 0.5f, 4.0f, 0.078125f, 0.109375f, -0.078125f, 1.0001f};
  std::vector<int8_t> q(8);
  float inv = 0;
  quantize_int8(x.data(), 8, 1, q.data(), &inv);
  EXPECT_EQ(inv, 0.03125f);
  EXPECT_EQ(q, (std::vector<int8_t>{32, -64, 16, 127, 2, 4, -2, 32}));
  Floats back(8);
  dequantize_int8(q.data(), &inv, 8, 1, back.data());
  EXPECT_EQ(back, (Floats{1.0f, -2.0f, 0.5f, 3.96875f, 0.0625f, 0.125f, -0.0625f, 1.0f}));
}

TEST(QuantizeInt8, HandBlockNonPowerOfTwoAmax) {
  // amax = 3; scale = fp32(256 / 6) = 42.66666793823242 (0x422aaaab); inv_scale = fp32(1 / scale) = 0.0234375 = 3/128
  // (1/scale = 0.02343749934..., within half an ulp of 3/128).
  //   3 * scale = 128.0000038 -> fp32 128 -> clipped to 127;  -1 * scale -> -43 (42.67 rounds up);
  //   1.5 * scale = 64.0000019 -> fp32 64 -> 64;  -3 * scale -> -128.
  // Back: 127 * 3/128 = 2.9765625;  -43 * 3/128 = -1.0078125;  64 * 3/128 = 1.5;  -128 * 3/128 = -3.
  const Floats x = {3.0f, -1.0f, 1.5f, -3.0f};
  std::vector<int8_t> q(4);
  float inv = 0;
  quantize_int8(x.data(), 4, 1, q.data(), &inv);
  EXPECT_EQ(inv, 0.0234375f);
  EXPECT_EQ(q, (std::vector<int8_t>{127, -43, 64, -128}));
  Floats back(4);
  dequantize_int8(q.data(), &inv, 4, 1, back.data());
  EXPECT_EQ(back, (Floats{2.9765625f, -1.0078125f, 1.5f, -3.0f}));
}

TEST(QuantizeInt4, HandBlockAndNibbleOrder) {
  // amax = 4; scale = 2^4 / 8 = 2; inv_scale = 0.5.
  //   q = 2, -4, 1, 8 -> 7, -8, 6, 0, -0.5 -> -0 -> 0.
  // Packed, even element in the high nibble: (2, -4) -> 0x2c; (1, 7) -> 0x17; (-8, 6) -> 0x86; (0, 0) -> 0x00.
  // Back: 1, -2, 0.5, 3.5 (= 7/8 of amax), -4 (= -amax exactly), 3, 0, 0.
  const Floats x = {1.0f, -2.0f, 0.5f, 4.0f, -4.0f, 3.0f, 0.0f, -0.25f};
  Bytes packed(4);
  float inv = 0;
  quantize_int4(x.data(), 8, 1, packed.data(), &inv);
  EXPECT_EQ(inv, 0.5f);
  EXPECT_EQ(packed, (Bytes{0x2c, 0x17, 0x86, 0x00}));
  Floats back(8);
  dequantize_int4(packed.data(), &inv, 8, 1, back.data());
  EXPECT_EQ(back, (Floats{1.0f, -2.0f, 0.5f, 3.5f, -4.0f, 3.0f, 0.0f, 0.0f}));

  // The nibble order alone: {+amax, -amax} -> (7, -8) -> 0x78; {-amax, +amax} -> 0x87.
  const Floats pair = {4.0f, -4.0f}, swapped = {-4.0f, 4.0f};
  uint8_t byte = 0;
  quantize_int4(pair.data(), 2, 1, &byte, &inv);
  EXPECT_EQ(byte, 0x78);
  quantize_int4(swapped.data(), 2, 1, &byte, &inv);
  EXPECT_EQ(byte, 0x87);
  Floats two(2);
  const uint8_t low_is_one = 0x01, high_is_minus_one = 0xf0;  // (0, 1) and (-1, 0)
  const float unit = 1.0f;
  dequantize_int4(&low_is_one, &unit, 2, 1, two.data());
  EXPECT_EQ(two, (Floats{0.0f, 1.0f}));
  dequantize_int4(&high_is_minus_one, &unit, 2, 1, two.data());
  EXPECT_EQ(two, (Floats{-1.0f, 0.0f}));
}

TEST(QuantizeBlocks, AllZeroBlockHasScaleOne) {
  const Floats zeros = {0.0f, -0.0f, 0.0f, 0.0f, 0.0f, -0.0f, 0.0f, 0.0f};
  std::vector<int8_t> q(8, 99);
  float inv = 0;
  quantize_int8(zeros.data(), 8, 1, q.data(), &inv);
  EXPECT_EQ(inv, 1.0f);
  EXPECT_EQ(q, std::vector<int8_t>(8, 0));
  Bytes packed(4, 0xff);
  quantize_int4(zeros.data(), 8, 1, packed.data(), &inv);
  EXPECT_EQ(inv, 1.0f);
  EXPECT_EQ(packed, Bytes(4, 0));
  Floats back(8, 5.0f);
  dequantize_int4(packed.data(), &inv, 8, 1, back.data());
  EXPECT_EQ(back, Floats(8, 0.0f));
  // Values below fp16's smallest subnormal are zero once rounded: the block is all zero.
  const Floats tiny = {1e-9f, -1e-9f};
  int8_t q2[2];
  quantize_int8(tiny.data(), 2, 1, q2, &inv);
  EXPECT_EQ(inv, 1.0f);
  EXPECT_EQ(q2[0], 0);
}

TEST(QuantizeBlocks, PlusAmaxClipsMinusAmaxIsExact) {
  for (float amax : {2.0f, 3.0f, 0.7f, 1000.0f, 0x1p-20f}) {
    const float h = round_fp16(amax);
    const Floats x = {h, -h, 0.0f, 0.0f};
    std::vector<int8_t> q(4);
    float inv8 = 0, inv4 = 0;
    quantize_int8(x.data(), 4, 1, q.data(), &inv8);
    EXPECT_EQ(q[0], 127) << amax;
    EXPECT_EQ(q[1], -128) << amax;
    Floats back(4);
    dequantize_int8(q.data(), &inv8, 4, 1, back.data());
    EXPECT_EQ(back[0], round_fp16(127.0f * inv8)) << amax;
    const float fp16_step = h * 0x1p-10f + 0x1p-25f;  // half an fp16 ulp, or of a subnormal step
    EXPECT_NEAR(back[0], h * 127.0f / 128.0f, fp16_step) << amax;
    EXPECT_NEAR(back[1], -h, fp16_step) << amax;
    Bytes packed(2);
    quantize_int4(x.data(), 4, 1, packed.data(), &inv4);
    EXPECT_EQ(packed[0], 0x78) << amax;  // (7, -8)
    dequantize_int4(packed.data(), &inv4, 4, 1, back.data());
    EXPECT_NEAR(back[0], h * 7.0f / 8.0f, fp16_step) << amax;
    EXPECT_NEAR(back[1], -h, fp16_step) << amax;
  }
  // With a power-of-two amax everything is exact: 2 -> 127/128 * 2 = 1.984375 and 7/8 * 2 = 1.75.
  const Floats x = {2.0f, -2.0f};
  int8_t q[2];
  float inv = 0;
  quantize_int8(x.data(), 2, 1, q, &inv);
  float back[2];
  dequantize_int8(q, &inv, 2, 1, back);
  EXPECT_EQ(back[0], 1.984375f);
  EXPECT_EQ(back[1], -2.0f);
  uint8_t byte;
  quantize_int4(x.data(), 2, 1, &byte, &inv);
  dequantize_int4(&byte, &inv, 2, 1, back);
  EXPECT_EQ(back[0], 1.75f);
  EXPECT_EQ(back[1], -2.0f);
}

TEST(QuantizeBlocks, EachGroupHasItsOwnScale) {
  const Floats x = {1.0f, 0.5f, 8.0f, -2.0f, 0.25f, 0.25f};  // groups of 2: amax 1, 8, 0.25
  std::vector<int8_t> q(6);
  Floats inv(3);
  quantize_int8(x.data(), 6, 3, q.data(), inv.data());
  EXPECT_EQ(inv, (Floats{1.0f / 128, 8.0f / 128, 0.25f / 128}));
  EXPECT_EQ(q, (std::vector<int8_t>{127, 64, 127, -32, 127, 127}));
}

TEST(QuantizeBlocks, RoundTripWithinOneLevel) {
  // Random blocks: every value comes back within half a level (inv_scale / 2) plus the fp16 rounding of the result,
  // except values clipped at the top (h * scale > 2^(b-1) - 1/2), which are within one level.
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int bits : {8, 4}) {
    const int64_t groups = 37, size = 64, n = groups * size;
    Floats x(n);
    for (auto& v : x) v = normal(rng) * std::exp(normal(rng));
    Floats inv(groups), back(n);
    if (bits == 8) {
      std::vector<int8_t> q(n);
      quantize_int8(x.data(), n, groups, q.data(), inv.data());
      dequantize_int8(q.data(), inv.data(), n, groups, back.data());
    } else {
      Bytes packed(n / 2);
      quantize_int4(x.data(), n, groups, packed.data(), inv.data());
      dequantize_int4(packed.data(), inv.data(), n, groups, back.data());
    }
    const float top = static_cast<float>(1 << (bits - 1)) - 0.5f;
    for (int64_t i = 0; i < n; ++i) {
      const float h = round_fp16(x[i]);
      const float step = inv[i / size];
      const bool clipped = h / step > top;
      const float allowed = (clipped ? step : step / 2) * 1.0001f + std::fabs(back[i]) * 0x1p-11f;
      ASSERT_LE(std::fabs(back[i] - h), allowed) << "bits " << bits << " element " << i;
    }
  }
}

TEST(QuantizeBlocks, LayoutErrorsThrow) {
  Floats x(8, 1.0f), out(8);
  std::vector<int8_t> q(8);
  Bytes packed(8);
  Floats inv(8);
  EXPECT_THROW(quantize_int8(x.data(), 8, 3, q.data(), inv.data()), std::invalid_argument);
  EXPECT_THROW(quantize_int8(x.data(), 8, 0, q.data(), inv.data()), std::invalid_argument);
  EXPECT_THROW(quantize_int4(x.data(), 6, 2, packed.data(), inv.data()), std::invalid_argument);  // odd group size
  EXPECT_THROW(dequantize_int4(packed.data(), inv.data(), 6, 2, out.data()), std::invalid_argument);
  EXPECT_THROW(swizzle_quantize_int4(x.data(), 8, 2, 2, 2, packed.data(), inv.data()), std::invalid_argument);
  EXPECT_THROW(quantized_reduction_int4(packed.data(), inv.data(), 8, 1, 0, packed.data(), inv.data()),
               std::invalid_argument);
  EXPECT_THROW(dequantize_reduce_int4(packed.data(), inv.data(), 4, 1, 2, 0.0f, out.data()), std::invalid_argument);
}

// --- qwZ's block count
// ------------------------------------------------------------------------------------------------

TEST(QwzGroupCount, DeepSpeedsRule) {
  EXPECT_EQ(qwz_group_count(8000), 1);   // ceil(8000/8000) = 1, 8000 % 8 == 0; no doubling (8000 / 1 is not > 8000)
  EXPECT_EQ(qwz_group_count(8001), 0);   // odd: no g has 8001 % 8g == 0; g runs up to 8001 and the assert fails
  EXPECT_EQ(qwz_group_count(16000), 2);  // ceil = 2, 16000 % 16 == 0
  EXPECT_EQ(qwz_group_count(24), 1);
  EXPECT_EQ(qwz_group_count(8), 1);
  EXPECT_EQ(qwz_group_count(7), 0);
  EXPECT_EQ(qwz_group_count(0), 0);
  EXPECT_EQ(qwz_group_count(16008), 3);  // ceil = 3, 16008 % 24 == 0
  EXPECT_EQ(qwz_group_count(16016), 7);  // ceil = 3; 16016 % 24, % 32, % 40, % 48 != 0; 16016 % 56 == 0: g grows to 7
  EXPECT_EQ(qwz_group_count(1 << 20), 256);       // ceil = 132; the first g >= 132 with 2^20 % 8g == 0 is 256
  EXPECT_EQ(qwz_group_count(4096 * 4096), 4096);  // ceil = 2098; the first g >= 2098 with 2^24 % 8g == 0 is 4096
  EXPECT_NE(qwz_refusal(8001).find("multiple of 8"), std::string::npos);
  EXPECT_NE(qwz_refusal(0).find("empty"), std::string::npos);
  EXPECT_EQ(qwz_refusal(16000), "");
}

TEST(QwzGroupCount, RefusesExactlyTheSizesNotAMultipleOfEightAndNeverDoubles) {
  // After the first loop S / g <= 8000 (g starts at ceil(S / 8000) and only grows), so the doubling loop's
  // "S / g > 8000" never holds and the "S / g < 16000" assert never fails.
  for (int64_t s = 1; s < 200000; s += (s < 20000 ? 1 : 37)) {
    const int64_t g = qwz_group_count(s);
    if (s % 8 != 0) {
      ASSERT_EQ(g, 0) << s;
      continue;
    }
    ASSERT_GT(g, 0) << s;
    ASSERT_EQ(s % (8 * g), 0) << s;
    ASSERT_LE(s, 8000 * g) << s;
    const int64_t g0 = (s + 7999) / 8000;
    for (int64_t smaller = g0; smaller < g; ++smaller) ASSERT_NE(s % (8 * smaller), 0) << s;  // the first such g
  }
}

TEST(QwzBytes, PayloadAndScales) {
  const QuantizedBytes b = qwz_all_gather_bytes(16016);
  EXPECT_EQ(b.payload, 16016);
  EXPECT_EQ(b.scales, 4 * 7);
  EXPECT_EQ(b.total(), 16044);
  EXPECT_EQ(qwz_all_gather_bytes(8001).total(), 0);
  EXPECT_EQ(qgz_intra_all_to_all_bytes(4096 * 4096, 4096).payload, 4096 * 4096 / 2);
  EXPECT_EQ(qgz_intra_all_to_all_bytes(4096 * 4096, 4096).scales, 4 * 4096);
  EXPECT_EQ(qgz_inter_all_to_all_bytes(4096 * 4096, 4096, 8).payload, 4096 * 4096 / 16);
  EXPECT_EQ(qgz_inter_all_to_all_bytes(4096 * 4096, 4096, 8).scales, 4 * 512);
}

// --- qgZ shapes ------------------------------------------------------------------------------------------------------

TEST(QgzShapes, GroupCountAndWhichPathIsTaken) {
  EXPECT_EQ(qgz_group_count(4096, 4096, 16), 4096);
  EXPECT_EQ(qgz_group_count(11008, 4096, 16), 11008);
  EXPECT_EQ(qgz_group_count(8, 4, 16), 16);
  using Shape = std::vector<int64_t>;
  // DeepSpeed's own rule: 2-D or more, M % 2W == 0, more than one node.
  EXPECT_TRUE(qgz_deepspeed_quantizes(Shape{64, 32}, 2, 2));
  EXPECT_FALSE(qgz_deepspeed_quantizes(Shape{2048}, 2, 2));                                  // 1-D
  EXPECT_FALSE(qgz_deepspeed_quantizes(Shape{64, 32}, 1, 8));                                // one node
  EXPECT_FALSE(qgz_deepspeed_quantizes(Shape{3, 6}, 2, 2));                                  // 18 % 8 != 0
  EXPECT_FALSE(qgz_deepspeed_quantizes(Shape{}, 2, 2));                                      // a scalar: 1 % 8 != 0
  EXPECT_TRUE(qgz_deepspeed_quantizes(Shape{6, 4}, 2, 2));                                   // 24 % 8 == 0 ...
  EXPECT_NE(qgz_refusal(Shape{6, 4}, 2, 2).find("not a multiple of W"), std::string::npos);  // ... but G = 6
  EXPECT_NE(qgz_refusal(Shape{64, 4}, 2, 2).find("multiple of 8"), std::string::npos);       // E = 4
  EXPECT_NE(qgz_refusal(Shape{40968, 40968}, 2, 2).find("above"), std::string::npos);        // E = 40968
  EXPECT_NE(qgz_refusal(Shape{2048}, 2, 2).find("1-D"), std::string::npos);
  EXPECT_NE(qgz_refusal(Shape{64, 32}, 1, 8).find("one node"), std::string::npos);
  EXPECT_NE(qgz_refusal(Shape{3, 6}, 2, 2).find("2W"), std::string::npos);
  EXPECT_EQ(qgz_refusal(Shape{64, 32}, 2, 2), "");
  EXPECT_EQ(qgz_refusal(Shape{8, 4, 16}, 2, 2), "");  // 3-D: G = max(8, 4, 4) = 8, E = 64
  EXPECT_EQ(qgz_refusal(Shape{4096, 11008}, 4, 8), "");
  EXPECT_EQ(qgz_refusal(Shape{32000, 4096}, 8, 8), "");
}

// --- qgZ steps
// ---------------------------------------------------------------------------------------------------------

TEST(QgzSwizzle, TwoNodesFourGpusSlotOrder) {
  // 8 slices of 2 values, one block each; slice p holds 2^p, so its inv_scale is 2^p / 8 and names it.
  // Slice p = node * 4 + local goes to slot local * 2 + node: slots hold slices 0, 4, 1, 5, 2, 6, 3, 7.
  const int nodes = 2, gpus = 4;
  Floats x(16);
  for (int i = 0; i < 16; ++i) x[i] = std::ldexp(1.0f, i / 2);
  Bytes packed(8);
  Floats inv(8);
  swizzle_quantize_int4(x.data(), 16, 8, nodes, gpus, packed.data(), inv.data());
  const int expected_slices[8] = {0, 4, 1, 5, 2, 6, 3, 7};
  for (int slot = 0; slot < 8; ++slot) EXPECT_EQ(inv[slot], std::ldexp(1.0f, expected_slices[slot]) / 8) << slot;
  EXPECT_EQ(packed, Bytes(8, 0x77));

  // Two blocks per slice: the blocks of a slice stay together and in order; the payload matches quantize_int4's.
  Floats y(64);
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  for (auto& v : y) v = normal(rng);
  Bytes swizzled(32), plain(32);
  Floats sw_inv(16), plain_inv(16);
  swizzle_quantize_int4(y.data(), 64, 16, nodes, gpus, swizzled.data(), sw_inv.data());
  quantize_int4(y.data(), 64, 16, plain.data(), plain_inv.data());
  for (int slot = 0; slot < 8; ++slot) {
    const int slice = expected_slices[slot];
    for (int b = 0; b < 2; ++b) {
      EXPECT_EQ(sw_inv[slot * 2 + b], plain_inv[slice * 2 + b]);
      for (int k = 0; k < 2; ++k) EXPECT_EQ(swizzled[(slot * 2 + b) * 2 + k], plain[(slice * 2 + b) * 2 + k]);
    }
  }
}

TEST(QgzReduction, HandSumRequantized) {
  // Peer 0: {1, -2, 0.5, 4} -> inv 0.5, q (2, -4, 1, 7) -> 1, -2, 0.5, 3.5.
  // Peer 1: {4, 4, -4, 0}   -> inv 0.5, q (7, 7, -8, 0) -> 3.5, 3.5, -4, 0.
  // fp16 sums: 4.5, 1.5, -3.5, 3.5; amax 4.5; scale = fp32(16 / 9) = 1.77777779; inv_scale = 0.5625 (9/16).
  //   4.5 * scale = 8 + 2^-24 -> fp32 8 -> clipped to 7;  1.5 * scale -> 2.67 -> 3;  -3.5 * scale -> -6.22 -> -6;  6.
  // Packed: (7, 3) -> 0x73, (-6, 6) -> 0xa6. Back: 3.9375, 1.6875, -3.375, 3.375.
  const Floats peer0 = {1.0f, -2.0f, 0.5f, 4.0f}, peer1 = {4.0f, 4.0f, -4.0f, 0.0f};
  Bytes in(4);
  Floats in_inv(2);
  quantize_int4(peer0.data(), 4, 1, in.data(), &in_inv[0]);
  quantize_int4(peer1.data(), 4, 1, in.data() + 2, &in_inv[1]);
  Bytes out(2);
  float out_inv = 0;
  quantized_reduction_int4(in.data(), in_inv.data(), 4, 1, 2, out.data(), &out_inv);
  EXPECT_EQ(out_inv, 0.5625f);
  EXPECT_EQ(out, (Bytes{0x73, 0xa6}));
  Floats back(4);
  dequantize_int4(out.data(), &out_inv, 4, 1, back.data());
  EXPECT_EQ(back, (Floats{3.9375f, 1.6875f, -3.375f, 3.375f}));

  // The last step on the same input: the fp16 sums divided by 2 (exact), and by 3 (times fp32(1/3), rounded).
  Floats mean(4);
  dequantize_reduce_int4(in.data(), in_inv.data(), 4, 1, 2, 2.0f, mean.data());
  EXPECT_EQ(mean, (Floats{2.25f, 0.75f, -1.75f, 1.75f}));
  dequantize_reduce_int4(in.data(), in_inv.data(), 4, 1, 2, 3.0f, mean.data());
  EXPECT_EQ(mean, (Floats{round_fp16(4.5f * (1.0f / 3.0f)), round_fp16(1.5f * (1.0f / 3.0f)),
                          round_fp16(-3.5f * (1.0f / 3.0f)), round_fp16(3.5f * (1.0f / 3.0f))}));
  EXPECT_EQ(mean[0], 1.5f);
}

TEST(QgzReduction, SumsInFp16InPeerOrder) {
  // Three peers whose first elements dequantize to -2048, -1, -1 (each -amax of its block: exact). In peer order
  // 0 + -2048 = -2048; -2048 + -1 = -2049, a tie between the fp16 neighbours -2048 and -2050, to the even -2048;
  // -2048 + -1 = -2048 again. The exact sum is -2050 (and so is the fp16 sum in the reverse order).
  const Floats big = {-2048.0f, 0.0f}, small = {-1.0f, 0.0f};
  Bytes in(3);
  Floats inv(3);
  quantize_int4(big.data(), 2, 1, &in[0], &inv[0]);
  quantize_int4(small.data(), 2, 1, &in[1], &inv[1]);
  quantize_int4(small.data(), 2, 1, &in[2], &inv[2]);
  Floats out(2);
  dequantize_reduce_int4(in.data(), inv.data(), 2, 1, 3, 1.0f, out.data());
  EXPECT_EQ(out[0], -2048.0f);
  EXPECT_EQ(out[1], 0.0f);
  const Bytes reversed = {in[2], in[1], in[0]};
  const Floats reversed_inv = {inv[2], inv[1], inv[0]};
  dequantize_reduce_int4(reversed.data(), reversed_inv.data(), 2, 1, 3, 1.0f, out.data());
  EXPECT_EQ(out[0], -2050.0f);
  // quantized_reduction sums the same way: the block {-2048, 0} requantizes to -8 * 256.
  Bytes red(1);
  float red_inv = 0;
  quantized_reduction_int4(in.data(), inv.data(), 2, 1, 3, red.data(), &red_inv);
  EXPECT_EQ(red_inv, 256.0f);
  EXPECT_EQ(red[0], 0x80);
}

// qgZ on W = 4 ranks (2 nodes x 2 GPUs) in one process: each rank swizzle-quantizes its gradient, the intra-node
// all-to-all and the inter-node all-to-all are copies, and rank p = node * 2 + local must end with slice p of the sum
// over ranks divided by the divisor, within the quantization error the scales allow.
struct QgzRun {
  std::vector<Floats> out;         // per rank, M / W values
  std::vector<Floats> stage1_inv;  // per rank, G inv_scales in block order (unswizzled)
  std::vector<Floats> stage2_inv;  // per rank, G / R inv_scales of its reduced M / R values
};

QgzRun run_qgz(const std::vector<Floats>& grads, int64_t m, int64_t groups, int nodes, int gpus, float divisor) {
  const int world = nodes * gpus;
  const int64_t per_rank_bytes = m / 2;
  QgzRun run;
  run.out.assign(world, Floats(m / world));
  run.stage1_inv.assign(world, Floats(groups));
  run.stage2_inv.assign(world, Floats(groups / gpus));
  std::vector<Bytes> sent(world, Bytes(per_rank_bytes));
  std::vector<Floats> sent_inv(world, Floats(groups));
  for (int r = 0; r < world; ++r) {
    swizzle_quantize_int4(grads[r].data(), m, groups, nodes, gpus, sent[r].data(), sent_inv[r].data());
    Bytes plain(per_rank_bytes);
    quantize_int4(grads[r].data(), m, groups, plain.data(), run.stage1_inv[r].data());
  }
  // Intra-node all-to-all: local rank k of node n receives chunk k (bytes [k, k+1) * M / (2R), scales [k, k+1) *
  // G / R) of every peer j of its node, placed at position j.
  const int64_t chunk_bytes = per_rank_bytes / gpus, chunk_groups = groups / gpus;
  std::vector<Bytes> reduced(world, Bytes(chunk_bytes));
  for (int n = 0; n < nodes; ++n) {
    for (int k = 0; k < gpus; ++k) {
      Bytes recv(per_rank_bytes);
      Floats recv_inv(groups);
      for (int j = 0; j < gpus; ++j) {
        const int peer = n * gpus + j;
        std::memcpy(recv.data() + j * chunk_bytes, sent[peer].data() + k * chunk_bytes, chunk_bytes);
        std::memcpy(recv_inv.data() + j * chunk_groups, sent_inv[peer].data() + k * chunk_groups, chunk_groups * 4);
      }
      const int rank = n * gpus + k;
      quantized_reduction_int4(recv.data(), recv_inv.data(), m / gpus, chunk_groups, gpus, reduced[rank].data(),
                               run.stage2_inv[rank].data());
    }
  }
  // Inter-node all-to-all among the ranks with local index k: node n receives chunk n of every node's reduction.
  const int64_t slice_bytes = chunk_bytes / nodes, slice_groups = chunk_groups / nodes;
  for (int k = 0; k < gpus; ++k) {
    for (int n = 0; n < nodes; ++n) {
      Bytes recv(chunk_bytes);
      Floats recv_inv(chunk_groups);
      for (int src = 0; src < nodes; ++src) {
        const int peer = src * gpus + k;
        std::memcpy(recv.data() + src * slice_bytes, reduced[peer].data() + n * slice_bytes, slice_bytes);
        std::memcpy(recv_inv.data() + src * slice_groups, run.stage2_inv[peer].data() + n * slice_groups,
                    slice_groups * 4);
      }
      const int rank = n * gpus + k;
      dequantize_reduce_int4(recv.data(), recv_inv.data(), m / world, slice_groups, nodes, divisor,
                             run.out[rank].data());
    }
  }
  return run;
}

TEST(QgzEndToEnd, FourRanksEndWithTheirSliceOfTheSum) {
  const int nodes = 2, gpus = 2, world = 4;
  for (const auto& shape : {std::vector<int64_t>{64, 32}, std::vector<int64_t>{16, 256}}) {
    ASSERT_EQ(qgz_refusal(shape, nodes, gpus), "");
    const int64_t m = shape[0] * shape[1];
    const int64_t groups = qgz_group_count(shape[0], shape[1], world), size = m / groups;
    std::vector<Floats> grads(world, Floats(m));
    std::mt19937 rng(static_cast<unsigned>(m));
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (auto& g : grads)
      for (auto& v : g) v = normal(rng) * 0.01f;
    for (float divisor : {static_cast<float>(nodes), static_cast<float>(world)}) {  // DeepSpeed's, the mean
      const QgzRun run = run_qgz(grads, m, groups, nodes, gpus, divisor);
      const int64_t slice = m / world;
      double worst_ratio = 0;
      for (int p = 0; p < world; ++p) {
        const int n = p / gpus, k = p % gpus;
        for (int64_t i = 0; i < slice; ++i) {
          const int64_t e = p * slice + i;  // element of the whole gradient
          double exact = 0, magnitude = 0, step1 = 0;
          for (int r = 0; r < world; ++r) {
            exact += grads[r][e];
            magnitude += std::fabs(grads[r][e]);
            step1 += run.stage1_inv[r][e / size];
          }
          // Stage 2 scales: rank (src, k) reduced the values of slices src' * R + k for every node src'; this
          // element lies in its chunk n, block (i / size) of that chunk.
          double step2 = 0;
          for (int src = 0; src < nodes; ++src) step2 += run.stage2_inv[src * gpus + k][n * (slice / size) + i / size];
          // One level per quantization (clipping included), a few fp16 roundings of sums no larger than magnitude.
          const double allowed = (step1 + step2 + magnitude * 0x1p-8) / divisor;
          const double err = std::fabs(run.out[p][i] - exact / divisor);
          ASSERT_LE(err, allowed) << "rank " << p << " element " << i << " divisor " << divisor;
          worst_ratio = std::max(worst_ratio, err / allowed);
        }
      }
      EXPECT_GT(worst_ratio, 0.0);  // int4 is lossy: the check above is not vacuous
    }
  }
}

TEST(QgzEndToEnd, DeepSpeedsDivisorLeavesGpusPerNodeTimesTheMean) {
  // Every rank holds the same gradient of multiples of 1/8 in [-1, 7/8], every block of 32 containing -1: each
  // quantization is exact (scale 8 for the gradient, 4 for the sum of two, whose blocks contain -2), so the result is
  // exactly the sum over the 4 ranks, 4v, divided: by N = 2 (DeepSpeed) 2v, R = 2 times the mean; by W = 4 the mean v.
  const int nodes = 2, gpus = 2, world = 4;
  const int64_t m = 64 * 32, groups = 64;
  Floats g(m);
  for (int64_t i = 0; i < m; ++i) g[i] = static_cast<float>((i % 16) - 8) * 0.125f;
  const std::vector<Floats> grads(world, g);
  const QgzRun ds = run_qgz(grads, m, groups, nodes, gpus, static_cast<float>(nodes));
  const QgzRun mean = run_qgz(grads, m, groups, nodes, gpus, static_cast<float>(world));
  const int64_t slice = m / world;
  for (int p = 0; p < world; ++p)
    for (int64_t i = 0; i < slice; ++i) {
      const float v = g[p * slice + i];
      ASSERT_EQ(mean.out[p][i], v) << p << " " << i;
      ASSERT_EQ(ds.out[p][i], gpus * v) << p << " " << i;
    }
}

}  // namespace
}  // namespace lins::kernels::quant
