// bf16 conversion (round to nearest even, NaN, infinity, overflow) and the once-rounded sum, against a reference
// that rounds through double.
#include "core/util/bf16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

namespace lins {
namespace {

// The bf16 nearest to x (a normal number), computed in double: neighbours at 8 significant bits, ties to an even
// significand. Independent of the bit trick under test.
uint16_t reference_round(double x) {
  const double a = std::fabs(x);
  const double ulp = std::ldexp(1.0, int(std::floor(std::log2(a))) - 7);
  const double k = std::floor(a / ulp);
  const double lo = k * ulp, hi = lo + ulp;
  double r = (a - lo < hi - a) ? lo : (hi - a < a - lo) ? hi : (std::fmod(k, 2.0) == 0 ? lo : hi);
  return float_to_bf16(float(x < 0 ? -r : r));  // r has 8 significant bits: exact
}

TEST(Bf16, ExactValuesRoundTrip) {
  for (float f : {0.0f, -0.0f, 1.0f, -2.5f, 3.140625f, 65536.0f, 1.0f / 1024})
    EXPECT_EQ(bf16_to_float(float_to_bf16(f)), f) << f;
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bf16(-2.0f), 0xc000);
}

TEST(Bf16, TiesGoToEven) {
  EXPECT_EQ(float_to_bf16(1.0f + 1.0f / 256), 0x3f80);                 // tie, 0x3f80 even
  EXPECT_EQ(float_to_bf16(1.0f + 3.0f / 256), 0x3f82);                 // tie between 0x3f81 and 0x3f82
  EXPECT_EQ(float_to_bf16(1.0f + 1.0f / 256 + 1.0f / 65536), 0x3f81);  // above the tie
  EXPECT_EQ(float_to_bf16(-(1.0f + 1.0f / 256)), 0xbf80);
}

TEST(Bf16, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(float_to_bf16(inf), 0x7f80);
  EXPECT_EQ(float_to_bf16(-inf), 0xff80);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::nanf("")))));
  // A NaN whose payload sits only in the low 16 bits must not become infinity.
  uint32_t nan_bits = 0x7f800001u;
  float nan_low;
  std::memcpy(&nan_low, &nan_bits, 4);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(nan_low))));
  EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::max()), 0x7f80);  // rounds up past the largest bf16
  EXPECT_EQ(float_to_bf16(1e-45f), 0x0000);                             // the smallest subnormal rounds to zero
}

TEST(Bf16, RandomFloatsMatchTheReference) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> bits(0, 0xffffffffu);
  for (int i = 0; i < 200000; ++i) {
    uint32_t b = bits(rng);
    float f;
    std::memcpy(&f, &b, 4);
    if (!std::isfinite(f) || std::fabs(f) > 3.0e38f || std::fabs(f) < 1e-37f) continue;  // normal range
    ASSERT_EQ(float_to_bf16(f), reference_round(f)) << std::hexfloat << f;
  }
}

TEST(Bf16, SumsAreRoundedOnce) {
  // Random bf16 pairs of nearby and distant magnitude: bf16_add equals the correctly rounded exact sum.
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> mant(0, 127), expo(-20, 20), sign(0, 1);
  for (int i = 0; i < 100000; ++i) {
    auto make = [&] {
      return float_to_bf16(float((sign(rng) ? -1 : 1) * std::ldexp(1.0 + mant(rng) / 128.0, expo(rng))));
    };
    const uint16_t a = make(), b = make();
    const double exact = double(bf16_to_float(a)) + double(bf16_to_float(b));  // exact in double
    if (exact == 0) {
      EXPECT_EQ(bf16_to_float(bf16_add(a, b)), 0.0f);
      continue;
    }
    ASSERT_EQ(bf16_add(a, b), reference_round(exact)) << bf16_to_float(a) << " + " << bf16_to_float(b);
  }
}

}  // namespace
}  // namespace lins
