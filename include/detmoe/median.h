// The median of a sample — the mean of the middle two for an even count, 0 for none: the statistic
// the benchmarks (perf/), the performance gate and the trace summary report.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace detmoe {

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n == 0 ? 0 : (n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]));
}

}  // namespace detmoe
