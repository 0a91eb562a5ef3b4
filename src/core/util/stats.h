// Small statistics over measured samples, shared by the readers and fits that summarise them.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace lins {

// The median (the mean of the middle two for an even count); 0 for no samples.
inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace lins
