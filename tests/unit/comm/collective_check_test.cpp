// The benchmark's correctness check: right results count zero wrong elements, one corrupted element counts one, and
// bf16 sums are accepted within the rounding bound but not beyond it.
#include "comm/collective_check.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/util/bf16.h"

namespace lins {
namespace {

// The result each collective should produce on member index `me` of `members`, computed serially in double.
std::vector<float> serial(CollKind kind, const std::vector<int>& members, int me, int64_t count, int root = 0) {
  const int n = static_cast<int>(members.size());
  std::vector<float> out;
  auto sum = [&](int64_t i) {
    double s = 0;
    for (int m : members) s += check_fill_value(m, i);
    return float(s);
  };
  switch (kind) {
    case CollKind::all_gather:
      for (int j = 0; j < n; ++j)
        for (int64_t i = 0; i < count; ++i) out.push_back(float(check_fill_value(members[j], i)));
      break;
    case CollKind::reduce_scatter:
      for (int64_t i = 0; i < count; ++i) out.push_back(sum(me * count + i));
      break;
    case CollKind::all_reduce:
      for (int64_t i = 0; i < count; ++i) out.push_back(sum(i));
      break;
    case CollKind::broadcast:
      for (int64_t i = 0; i < count; ++i) out.push_back(float(check_fill_value(members[root], i)));
      break;
    case CollKind::all_to_all:  // block j: member j's elements [me * count, (me + 1) * count)
      for (int j = 0; j < n; ++j)
        for (int64_t i = 0; i < count; ++i) out.push_back(float(check_fill_value(members[j], me * count + i)));
      break;
  }
  return out;
}

TEST(CollectiveCheck, RightResultsPassAndOneCorruptedElementIsCounted) {
  const std::vector<int> members = {4, 5, 6, 7};
  for (int k = 0; k < kCollKindCount; ++k) {
    const auto kind = static_cast<CollKind>(k);
    auto out = serial(kind, members, 2, 33, 3);
    EXPECT_EQ(count_wrong(kind, out.data(), DType::fp32, 33, members, 2, 3), 0) << coll_kind_name(kind);
    out[17] += 0.0625f;
    EXPECT_EQ(count_wrong(kind, out.data(), DType::fp32, 33, members, 2, 3), 1) << coll_kind_name(kind);
    out[17] = std::nanf("");
    EXPECT_EQ(count_wrong(kind, out.data(), DType::fp32, 33, members, 2, 3), 1) << coll_kind_name(kind);
  }
}

TEST(CollectiveCheck, Bf16SumsAreJudgedByTheRoundingBound) {
  const std::vector<int> members = {0, 1, 2, 3, 4, 5, 6, 7};
  const int64_t count = 200;
  std::vector<uint16_t> exact_rounded(count), far(count);
  int64_t rounded_somewhere = 0;
  for (int64_t i = 0; i < count; ++i) {
    double s = 0, a = 0;
    for (int m : members) {
      s += check_fill_value(m, i);
      a += std::fabs(check_fill_value(m, i));
    }
    exact_rounded[i] = float_to_bf16(float(s));
    rounded_somewhere += bf16_to_float(exact_rounded[i]) != s;
    far[i] = float_to_bf16(float(s + 8 * kBf16UnitRoundoff * a + 1));  // beyond (n - 1) u sum|x|
  }
  EXPECT_GT(rounded_somewhere, 0) << "the fill must make bf16 sums round, or this test proves nothing";
  EXPECT_EQ(count_wrong(CollKind::all_reduce, exact_rounded.data(), DType::bf16, count, members, 0), 0);
  EXPECT_EQ(count_wrong(CollKind::all_reduce, far.data(), DType::bf16, count, members, 0), count);
}

}  // namespace
}  // namespace lins
