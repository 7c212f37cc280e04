// The CUDA backend's NVFP4 activation scratch: one slot per producer role, each [data | scales | g | amax]
// from the backend's caching allocator (counted in memory_in_use / memory_peak), sized at first use and grown
// only for a larger shape. Role kLinearInput holds linear()'s own quantization and the QKV/FC1 producer
// (modulate_quantize); kFfnHidden the FC2 producer (swiglu_quantize), so both can be alive at once. Views
// handed out (QuantizedActivation) carry the backend-wide producer count, and a view whose slot was written
// again since is rejected. Tested through tests/engine/nvfp4_mode_test.cpp (GPU).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>

#include "backend/backend.h"
#include "cuda/device.h"
#include "cuda/ops/nvfp4_quantize.h"

namespace vortex {

class Nvfp4ActivationSlots {
 public:
  enum class Role : uint8_t { kLinearInput, kFfnHidden };
  // Where one producer call writes (pointers into its slot).
  struct Target {
    cuda_ops::Nvfp4Buffers buffers;
    cuda_ops::Nvfp4GlobalScale g;
  };

  explicit Nvfp4ActivationSlots(std::shared_ptr<CachingAllocator> allocator) : allocator_(std::move(allocator)) {}
  ~Nvfp4ActivationSlots();
  Nvfp4ActivationSlots(const Nvfp4ActivationSlots&) = delete;
  Nvfp4ActivationSlots& operator=(const Nvfp4ActivationSlots&) = delete;

  // Grows the role's slot for [rows, cols], points `target` and `out` at it (a new generation) and, for a
  // consumer with a static input_scale, copies it into the slot's g on `stream` (the producers then read it).
  // kInvalidArgument when the consumer is not NVFP4 or its K differs from cols.
  Status prepare(Role role, int64_t rows, int64_t cols, const LinearWeight& consumer, const char* op,
                 cudaStream_t stream, Target& target, QuantizedActivation& out);
  // OK when `x` is the latest output of the slot it points into.
  Status check_current(const QuantizedActivation& x, const char* op) const;

 private:
  struct Slot {
    void* scratch = nullptr;
    size_t bytes = 0;
    uint64_t generation = 0;  // the producer count when last written
  };
  static constexpr int kRoles = 2;
  std::shared_ptr<CachingAllocator> allocator_;
  Slot slots_[kRoles];
  uint64_t producer_calls_ = 0;
};

}  // namespace vortex
