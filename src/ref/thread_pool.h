// RowThreadPool: a small persistent pool that runs one row range per worker. parallel_for(rows, body)
// splits [0, rows) into `threads` contiguous ranges of ceil(rows / threads) rows (range 0 on the caller),
// so every row is computed by exactly one thread with the op's fixed per-row order: results are identical
// for any thread count (tested in tests/ref/cpu_backend_test.cpp, 1 vs 3 threads).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "ref/ref_ops.h"

namespace vortex::ref {

class RowThreadPool {
 public:
  // threads <= 0: hardware concurrency. Throws std::system_error when a worker cannot be started.
  explicit RowThreadPool(int threads);
  ~RowThreadPool();
  RowThreadPool(const RowThreadPool&) = delete;
  RowThreadPool& operator=(const RowThreadPool&) = delete;

  int threads() const { return threads_; }
  // Blocks until every range has run. Concurrent callers are serialized (one parallel_for at a time);
  // a body must not call parallel_for on the same pool.
  void parallel_for(int64_t rows, const RowBody& body);
  // A RowRunner bound to this pool, for the ref:: ops.
  RowRunner runner();

 private:
  void worker_loop(int index);
  void stop_workers();

  int threads_ = 1;
  std::vector<std::thread> workers_;
  std::mutex call_mu_;  // serializes parallel_for callers
  std::mutex mu_;
  std::condition_variable work_cv_, done_cv_;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
  const RowBody* body_ = nullptr;
  int64_t rows_ = 0, per_ = 0;
};

}  // namespace vortex::ref
