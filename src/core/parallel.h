// parallel_for_ranges: split [0, n) into contiguous ranges and run them on std::threads.
// Used by host fills (noise, synthetic weights) whose per-element results depend only on the
// element index, so the output is identical for any thread count (tested in tests/core/rng_test.cpp
// with 1, 2 and 7 threads). Small inputs run inline.
#pragma once

#include <algorithm>
#include <cstddef>
#include <thread>
#include <vector>

namespace vortex {

// num_threads <= 0: hardware concurrency (at most 32). Ranges are aligned to `align` elements
// (except the last) so callers that work on groups of `align` elements never split a group.
template <typename Fn>
void parallel_for_ranges(size_t n, int num_threads, size_t align, Fn fn) {
  constexpr size_t kMinPerThread = size_t{1} << 15;
  size_t threads = num_threads > 0 ? static_cast<size_t>(num_threads)
                                   : std::min<size_t>(32, std::max(1u, std::thread::hardware_concurrency()));
  if (num_threads <= 0) threads = std::min(threads, std::max<size_t>(1, n / kMinPerThread));
  if (threads <= 1 || n == 0) {
    fn(size_t{0}, n);
    return;
  }
  size_t per = (n + threads - 1) / threads;
  per = (per + align - 1) / align * align;
  std::vector<std::thread> pool;
  for (size_t begin = 0; begin < n; begin += per) {
    size_t end = std::min(n, begin + per);
    pool.emplace_back([=] { fn(begin, end); });
  }
  for (auto& t : pool) t.join();
}

}  // namespace vortex
