// Splitting oracle work over std::thread. Each work item is owned by exactly one thread and
// computed the same way whatever the split, so the thread count changes speed, never bits.
#pragma once

#include <algorithm>
#include <cstdint>
#include <thread>

#include "detmoe/parallel.h"

namespace detmoe::oracle_detail {

using detmoe::parallel_ranges;

// Threads to use for an `threads` option: 0 = hardware concurrency (at least 1).
inline int resolve_threads(int threads) {
  if (threads > 0) return threads;
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

// Row-parallel loop for elementwise work: fn(begin, end) over [0, count), split only when the
// work (count · cost_per_item) is big enough to pay for starting threads.
template <class Fn>
void parallel_rows(int64_t count, int64_t cost_per_item, int threads, Fn&& fn) {
  constexpr int64_t kMinWorkPerThread = int64_t{1} << 16;
  const int64_t useful = std::max<int64_t>(1, count * cost_per_item / kMinWorkPerThread);
  const int workers = static_cast<int>(std::min<int64_t>(resolve_threads(threads), useful));
  parallel_ranges(count, workers, [&](int, int64_t b, int64_t e) { fn(b, e); });
}

}  // namespace detmoe::oracle_detail
