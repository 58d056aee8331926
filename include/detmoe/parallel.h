// Splitting host work over std::thread in contiguous, near-equal ranges. Callers give each
// range work whose result does not depend on the split (independent elements, tokens, rows),
// so the thread count changes speed, never bits. One helper for the data generator, the
// routing generator and the CPU oracle.
#pragma once

#include <algorithm>
#include <cstdint>
#include <system_error>
#include <thread>
#include <vector>

namespace detmoe {

// Workers for `count` items of `cost_per_item` each: one per `min_work_per_worker` of work, at
// least 1, at most the hardware's concurrency.
inline int workers_for(int64_t count, int64_t cost_per_item, int64_t min_work_per_worker) {
  const int64_t hw = std::max(1u, std::thread::hardware_concurrency());
  return static_cast<int>(std::clamp<int64_t>(count * cost_per_item / min_work_per_worker, 1, hw));
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

}  // namespace detmoe
