// Deterministic fills and expected results of collectives; see collective_check.h.
#include "comm/collective_check.h"

#include <cmath>
#include <cstring>

#include "core/util/bf16.h"

namespace lins {
namespace {

void put(void* buf, DType dtype, int64_t i, double v) {
  switch (dtype) {
    case DType::fp32:
      static_cast<float*>(buf)[i] = float(v);
      return;
    case DType::bf16:
      static_cast<uint16_t*>(buf)[i] = float_to_bf16(float(v));
      return;
  }
}
double get(const void* buf, DType dtype, int64_t i) {
  switch (dtype) {
    case DType::fp32:
      return static_cast<const float*>(buf)[i];
    case DType::bf16:
      return bf16_to_float(static_cast<const uint16_t*>(buf)[i]);
  }
  return NAN;  // not reached: the switch names every dtype
}
// Relative rounding error of one addition in `dtype`.
double unit_roundoff(DType dtype) {
  switch (dtype) {
    case DType::fp32:
      return kFp32UnitRoundoff;
    case DType::bf16:
      return kBf16UnitRoundoff;
  }
  return 1.0;
}

}  // namespace

double check_fill_value(int world_rank, int64_t index) {
  return double(int((int64_t(world_rank) * 131 + index * 71 + 7) % 255) - 31) / 16.0;
}

void check_fill(void* buf, DType dtype, int64_t count, int world_rank, int64_t offset) {
  for (int64_t i = 0; i < count; ++i) put(buf, dtype, i, check_fill_value(world_rank, offset + i));
}

void check_fill_constant(void* buf, DType dtype, int64_t count, double value) {
  for (int64_t i = 0; i < count; ++i) put(buf, dtype, i, value);
}

int64_t count_wrong(CollKind kind, const void* result, DType dtype, int64_t count, const std::vector<int>& members,
                    int me, int root) {
  const int n = static_cast<int>(members.size());
  const double u = unit_roundoff(dtype);
  int64_t wrong = 0;
  auto sum_ok = [&](double got, int64_t index) {
    double s = 0, a = 0;
    for (int m : members) {
      const double x = check_fill_value(m, index);
      s += x;
      a += std::fabs(x);
    }
    return std::fabs(got - s) <= (n - 1) * u * a;  // NaN fails
  };
  // Each element of the result against where the collective's row says it comes from (core/collectives.h).
  const Collective& c = collective(kind);
  const int64_t out = c.recv_elems(count, n);
  for (int64_t i = 0; i < out; ++i) {
    const ResultSource from = c.result(i, count, n, me, root);
    const double got = get(result, dtype, i);
    wrong += from.sum ? !sum_ok(got, from.index) : got != check_fill_value(members[from.member], from.index);
  }
  return wrong;
}

}  // namespace lins
