// Overlapped loading (docs/memory.md "Overlapped loading"): a one-shot generate loads the transformer on a thread of
// its own while the caller encodes the prompt, prepares the request and runs step 1. The loader publishes each group
// of weights (the weights before the blocks, each block, the final layer) once its bytes are in place; H3Model waits
// for a group before its first use (WeightArrivals). Weights bound for host memory (the AdaLN projections) arrive
// apart, from a fill on its own thread (engine/host_weight_fill.h): a block is in place once both have. A failed load
// wakes every waiter with its error; destroying the BackgroundLoad stops the loader at its next tensor and joins it.
// Tested in tests/engine/load_overlap_test.cpp.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/request.h"
#include "engine/residency.h"
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

// Whether a load reads the blocks' AdaLN projections into host memory on a thread of their own beside the rest
// (HostWeightFill), leaving them out of the device load: the projections live in host memory (--adaln-weights
// auto|host on a GPU backend, or an explicit --adaln-weights host on the cpu backend, whose device is the host: the
// same load path, run by the CPU tests), no load-time --lora merges into them, and the plan does not read them from
// disk.
bool adaln_projections_beside_load(const PipelineOptions& options, const ResidencyPlan& residency);

// Why a one-shot generate cannot load the transformer beside the run ("" when it can): the decision of
// Pipeline::begin_load (docs/memory.md "Overlapped loading"). `switch_on`: --switches load_overlap; `ranks`: the run
// has ranks. Reads the checkpoint's index when the projections load beside the rest (their bytes must be stored as
// the model reads them).
std::string load_overlap_refusal(const PipelineOptions& options, const ModelConfig& cfg, const ResidencyPlan& residency,
                                 bool switch_on, bool ranks);

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
    // Weights that arrive through place_host() instead of publish() (h3_tensor_specs names: a checkpoint's AdaLN
    // projections read into host memory beside the load). A group is in place once publish() has reached it and
    // each of its host weights has arrived; until then publish() leaves their slots empty.
    std::vector<std::string> host_weights;
    // Test hook: runs on the loader thread before group `group` is published (a test delays a block with it).
    std::function<void(int group)> before_publish;
    // Test hook: runs on the placing thread before host weight `name` is placed.
    std::function<void(const std::string& name)> before_place_host;
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
  // Another thread's side (the host-memory fill): host weight `name` (one of Options::host_weights) is in place.
  void place_host(const std::string& name, Tensor host);
  // Another thread's error (the fill failed): every waiter wakes with it (the first error is kept).
  void fail(const Status& error);
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
  H3Weights published_;  // groups [-1, published_up_to_] are in place (their host weights apart)
  int published_up_to_ = -2;
  std::map<int, int> host_expected_;       // group -> host weights still to come
  std::map<std::string, Tensor> host_in_;  // host weights placed so far
  bool host_ready(int group) const;        // every host weight of `group` placed (mu_ held)
  bool done_ = false;                      // the body returned
  Status status_;                          // its status
  double seconds_ = 0.0;
  Progress progress_;
  std::vector<std::string> notes_;
  std::function<void(const Progress&)> reporter_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  bool joined_ = false;
};

}  // namespace vortex
