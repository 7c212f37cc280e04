// Overlapped loading (docs/memory.md "Overlapped loading"): a one-shot generate loads the transformer on a thread of
// its own while the caller encodes the prompt, prepares the request and runs step 1. The loader publishes each group
// of weights (the weights before the blocks, each block, the final layer) once its bytes are in place; H3Model waits
// for a group before its first use (WeightArrivals). A failed load wakes every waiter with its error; destroying the
// BackgroundLoad stops the loader at its next tensor and joins it. Tested in tests/engine/load_overlap_test.cpp.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "model/h3_model.h"
#include "vortex/config.h"
#include "vortex/status.h"

namespace vortex {

// Copies group `group` of `from` into `to` (-1: the weights before the main blocks; i in [0, num_layers): block i;
// num_layers: the final layer), leaving the other groups of `to` as they are.
void copy_weight_group(int group, const H3Weights& from, H3Weights& to);

// The group of a weight named as in h3_tensor_specs: -1 before the main blocks, i for "blocks.i.*", num_layers after.
int weight_group_of(const std::string& name, int num_layers);

// `--switches` item load_overlap=0|1 (off: the sequential load order, for A/B runs; default on), removed from
// `switches` (the rest are ExecOptions switches). kInvalidArgument for another value.
Result<bool> take_load_overlap_switch(std::string& switches);

class BackgroundLoad final : public WeightArrivals {
 public:
  // What the loader reports while it runs (read by the waiting thread: the ProgressSink is not shared across threads).
  struct Progress {
    uint64_t done = 0, total = 0;  // bytes placed, bytes to place
    int groups = 0;                // groups published
    double seconds = 0.0;          // since start
  };
  struct Options {
    int num_layers = 0;
    // Test hook: runs on the loader thread before group `group` is published (a test delays a block with it).
    std::function<void(int group)> before_publish;
  };
  // The loader: places the weights, calling publish() as groups complete and report() with its progress, and returns
  // the finished weights (every group is published from them when it returns OK) or its error.
  using Body = std::function<Result<H3Weights>(BackgroundLoad& load)>;

  // Starts `body` on a thread of its own.
  static std::shared_ptr<BackgroundLoad> start(Options options, Body body);
  ~BackgroundLoad() override;  // asks the body to stop (stopping()) and joins its thread
  BackgroundLoad(const BackgroundLoad&) = delete;
  BackgroundLoad& operator=(const BackgroundLoad&) = delete;

  // Loader side. Groups up to `group` of `placed` are in place: publishes them (in order, once each).
  void publish(int group, const H3Weights& placed);
  void report(uint64_t done, uint64_t total);
  void note(std::string line);  // a line for the log, printed by finish()'s caller
  bool stopping() const { return stop_.load(std::memory_order_relaxed); }

  // Waiter side (WeightArrivals): blocks until `group` is published (the final layer's: until the loader has returned),
  // then copies it into `weights`; the load's error (with context) when it failed first. While waiting, `reporter`
  // (when set) gets the loader's progress about every quarter second, on the waiting thread.
  Status await(int group, H3Weights& weights) override;
  void set_reporter(std::function<void(const Progress&)> reporter);
  // Joins the loader: its status, the seconds from start to the last group, and its notes.
  Status finish();
  bool finished() const { return joined_; }
  double seconds() const;
  std::vector<std::string> take_notes();
  Progress progress() const;

 private:
  explicit BackgroundLoad(Options options);
  void run(Body body);
  Options options_;
  std::chrono::steady_clock::time_point t_start_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  H3Weights published_;  // groups [-1, published_up_to_] are in place
  int published_up_to_ = -2;
  bool done_ = false;  // the body returned
  Status status_;      // its status
  double seconds_ = 0.0;
  Progress progress_;
  std::vector<std::string> notes_;
  std::function<void(const Progress&)> reporter_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  bool joined_ = false;
};

}  // namespace vortex
