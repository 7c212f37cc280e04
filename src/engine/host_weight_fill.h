// Weights that live in page-locked host memory (the AdaLN projections, docs/memory.md "Loading a checkpoint"), read
// from a checkpoint's files straight into it on a thread of their own while the loader uploads the rest: the
// page-locking (cudaHostAlloc, about 1.9 GB/s on the H200 machine) and the reads overlap the resident weights'
// load, and the projections never make the trip to the device and back. The weights are filled in the spec's order
// (blocks ascending), and a caller may hear of each as it lands (overlapped loading hands each block's projection to
// the run: engine/load_overlap.h). Tested in tests/io/disk_stream_test.cpp and tests/engine/load_overlap_test.cpp.
#pragma once

#include <atomic>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <string>

#include "backend/backend.h"
#include "io/direct_reader.h"
#include "vortex/config.h"
#include "vortex/status.h"

namespace vortex {

class HostWeightFill {
 public:
  // Who hears of the fill as it runs (on the fill's thread).
  struct Hooks {
    // After each weight is in host memory, in spec order: its name and tensor. A non-OK status stops the fill and
    // is its result.
    std::function<Status(const std::string& name, const Tensor& host)> filled;
    // When the fill fails (a read, an allocation, `filled`'s error): its status, before finish() returns it.
    std::function<void(const Status& error)> failed;
  };

  // The checkpoint's weights `wanted` accepts (h3_tensor_specs names of `cfg`; each stored as the model reads it,
  // else kUnsupported naming it): each gets backend.alloc_host() memory and its bytes by a direct read, in the spec's
  // order. On its own thread when `threaded`, else before start() returns.
  static Result<std::unique_ptr<HostWeightFill>> start(Backend& backend, const std::string& checkpoint_path,
                                                       const ModelConfig& cfg,
                                                       const std::function<bool(const std::string&)>& wanted,
                                                       bool threaded, Hooks hooks = {});
  ~HostWeightFill();  // stops the fill at its next weight and waits for its thread
  HostWeightFill(const HostWeightFill&) = delete;
  HostWeightFill& operator=(const HostWeightFill&) = delete;

  // Waits for the fill; name -> host tensor. Call once.
  Result<std::map<std::string, Tensor>> finish();
  // Seconds the fill took (after finish()).
  double seconds() const { return seconds_; }

 private:
  HostWeightFill() = default;
  std::future<Result<std::map<std::string, Tensor>>> pending_;
  double seconds_ = 0.0;
  std::atomic<bool> stop_{false};
};

}  // namespace vortex
