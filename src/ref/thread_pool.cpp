// RowThreadPool implementation: workers sleep on a condition variable, wake per parallel_for generation,
// run their fixed row range and report back. See thread_pool.h; tested via tests/ref/cpu_backend_test.cpp.
#include "ref/thread_pool.h"

#include <algorithm>

namespace vortex::ref {

RowThreadPool::RowThreadPool(int threads) {
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  threads_ = threads;
  try {
    for (int i = 1; i < threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
  } catch (...) {
    // std::thread throws std::system_error when the OS refuses a thread; join the ones already running
    // (destroying a joinable std::thread would terminate) and let make_backend turn it into a Status.
    stop_workers();
    throw;
  }
}

RowThreadPool::~RowThreadPool() { stop_workers(); }

void RowThreadPool::stop_workers() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (auto& t : workers_) t.join();
  workers_.clear();
}

void RowThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    const RowBody* body;
    int64_t begin, end;
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      body = body_;
      begin = std::min(rows_, index * per_);
      end = std::min(rows_, begin + per_);
    }
    if (begin < end) (*body)(begin, end);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (--pending_ == 0) done_cv_.notify_one();
    }
  }
}

void RowThreadPool::parallel_for(int64_t rows, const RowBody& body) {
  if (rows <= 0) return;
  if (threads_ == 1 || rows == 1) {
    body(0, rows);
    return;
  }
  std::lock_guard<std::mutex> call_lock(call_mu_);
  const int64_t per = (rows + threads_ - 1) / threads_;
  {
    std::lock_guard<std::mutex> lock(mu_);
    body_ = &body;
    rows_ = rows;
    per_ = per;
    pending_ = threads_ - 1;
    ++generation_;
  }
  work_cv_.notify_all();
  body(0, std::min(rows, per));
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [&] { return pending_ == 0; });
}

RowRunner RowThreadPool::runner() {
  return [this](int64_t rows, const RowBody& body) { parallel_for(rows, body); };
}

}  // namespace vortex::ref
