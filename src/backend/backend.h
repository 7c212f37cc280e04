// Backend: the interface the H3 model, the decoders and the samplers are written against. `cpu` (src/ref, the
// reference program and the oracle) and `cuda` (src/cuda) implement it; model code never names a backend. It is
// the device part (device.h) plus one interface per op family: dit_ops.h (the transformer; linear, attention and
// cast shared by all), text_encoder_ops.h, vae_ops.h, encoder_ops.h, lora_ops.h. A new op goes into its family's header
// (a new family: a new header with a `public virtual BackendIdentity` interface, added to Backend's bases below).
#pragma once

#include <memory>
#include <string_view>

#include "backend/device.h"
#include "backend/dit_ops.h"
#include "backend/encoder_ops.h"
#include "backend/lora_ops.h"
#include "backend/text_encoder_ops.h"
#include "backend/vae_ops.h"

namespace vortex {

// A whole backend: the device part and every op family. Model and decoder code take a Backend&.
class Backend : public BackendDevice,
                public DitOps,
                public TextEncoderOps,
                public VaeOps,
                public EncoderOps,
                public LoraOps {
 public:
  ~Backend() override = default;
};

// RAII region: `BackendRegion r(backend, "qkv");` around the ops of one component (level 1), or
// `BackendRegion r(backend, "block", 0);` around a whole block in a benchmark.
class BackendRegion {
 public:
  BackendRegion(Backend& backend, std::string_view name, int level = 1)
      : backend_(backend), active_(backend.region_level() == level) {
    if (active_) backend_.region_begin(name);
  }
  ~BackendRegion() {
    if (active_) backend_.region_end();
  }
  BackendRegion(const BackendRegion&) = delete;
  BackendRegion& operator=(const BackendRegion&) = delete;

 private:
  Backend& backend_;
  bool active_;
};

// "cpu" or "cuda" on CUDA device `device` (--device N; the cpu backend takes only 0). `threads` is the CPU worker count
// (0 = hardware concurrency, at most max_cpu_threads()); results never depend on it. Returns kUnsupported when Vortex
// was built without the requested backend or no device exists, kInvalidArgument for a thread count outside [0,
// max_cpu_threads()].
Result<std::unique_ptr<Backend>> make_backend(std::string_view name, int threads = 0, int device = 0);
// More workers than cores only adds switching; beyond 4x it is a typo (--threads 100000).
constexpr int kMaxThreadsPerCore = 4;
int max_cpu_threads();  // kMaxThreadsPerCore x std::thread::hardware_concurrency() (>= 1)

}  // namespace vortex
