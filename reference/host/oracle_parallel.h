// Splitting oracle work over std::thread. Each work item is owned by exactly one thread and
// computed the same way whatever the split, so the thread count changes speed, never bits.
#pragma once

#include <algorithm>
#include <cstdint>
#include <system_error>
#include <thread>
#include <vector>

namespace detmoe::oracle_detail {

// Threads to use for an `threads` option: 0 = hardware concurrency (at least 1).
inline int resolve_threads(int threads) {
  if (threads > 0) return threads;
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

// Calls fn(worker, begin, end) on contiguous, near-equal ranges of [0, count), one per worker,
// worker = 0..workers-1; the calling thread runs worker 0. fn must not throw. If the OS refuses
// a thread, its range runs on the calling thread instead: slower, same result.
template <class Fn>
void parallel_ranges(int64_t count, int workers, Fn&& fn) {
  if (count <= 0) return;
  workers = static_cast<int>(std::clamp<int64_t>(workers, 1, count));
  auto range = [&](int w, int64_t& b, int64_t& e) {
    b = count * w / workers;
    e = count * (w + 1) / workers;
  };
  std::vector<std::thread> pool;
  std::vector<int> not_started;
  for (int w = 1; w < workers; ++w) {
    int64_t b, e;
    range(w, b, e);
    try {
      pool.emplace_back([&fn, w, b, e] { fn(w, b, e); });
    } catch (const std::system_error&) {
      not_started.push_back(w);
    }
  }
  int64_t b, e;
  range(0, b, e);
  fn(0, b, e);
  for (int w : not_started) {
    range(w, b, e);
    fn(w, b, e);
  }
  for (auto& t : pool) t.join();
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
