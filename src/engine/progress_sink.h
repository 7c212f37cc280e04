// What a run reports while it works (ProgressSink: the CLI draws a bar, the server updates the job's status) and
// how it is stopped (CancelToken, set from any thread). Shared by the planner (notes and warnings while planning)
// and the pipeline's run. Exercised by every generate and serve test (tests/cli/cli_test.cpp,
// tests/serve/server_test.cpp).
#pragma once

#include <atomic>
#include <cstdint>
#include <string_view>

namespace vortex {

// Progress reports from a run; the CLI draws a bar, the server updates the job's status.
class ProgressSink {
 public:
  virtual ~ProgressSink() = default;
  // A phase begins ("loading weights", "preparing text and positions", "sampling", "writing outputs").
  virtual void stage(std::string_view what) { (void)what; }
  // Something the user should know that does not stop the run (e.g. a frame count snapped up).
  virtual void note(std::string_view what) { (void)what; }
  // Something the user should know that does not stop the run (e.g. a CPU run estimated at hours).
  virtual void warning(std::string_view what) { (void)what; }
  // Denoising step `done` of `total` finished (1-based) after `step_seconds`; `elapsed_seconds` since
  // sampling began.
  virtual void step(int done, int total, double step_seconds, double elapsed_seconds) {
    (void)done, (void)total, (void)step_seconds, (void)elapsed_seconds;
  }
  // Weights of `what` ("text encoder") loading: bytes and layers so far, seconds since it began.
  virtual void loading(std::string_view what, uint64_t bytes_done, uint64_t bytes_total, int layers_done,
                       int layers_total, double seconds) {
    (void)what, (void)bytes_done, (void)bytes_total, (void)layers_done, (void)layers_total, (void)seconds;
  }
  // Decode progress: `stage` "video" (tile forwards) or "audio" (stereo channels), `done` of `total`,
  // `elapsed_seconds` since decoding began.
  virtual void decode(std::string_view stage, int64_t done, int64_t total, double elapsed_seconds) {
    (void)stage, (void)done, (void)total, (void)elapsed_seconds;
  }
  // Decoded video frame `index` of `count`: [height, width, 3] 8-bit RGB, valid during the call. Delivered in order
  // once the media is decoded, before the outputs are published (the public API's frame callback).
  virtual void frame(int index, int count, int width, int height, const uint8_t* rgb) {
    (void)index, (void)count, (void)width, (void)height, (void)rgb;
  }
};

// Set from any thread; a run stops at the next transformer-block boundary with kCancelled.
class CancelToken {
 public:
  void cancel() { flag_.store(true); }
  bool cancelled() const { return flag_.load(); }
  const std::atomic<bool>* flag() const { return &flag_; }

 private:
  std::atomic<bool> flag_{false};
};

}  // namespace vortex
