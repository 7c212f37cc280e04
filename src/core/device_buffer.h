// DeviceBuffer: one block of device memory owned by RAII, taken from a DeviceMemoryResource (the CUDA backend's
// caching allocator, so scratch counts in memory_in_use / memory_peak; or plain cudaMalloc where no backend
// exists, gemm/gemm.h cuda_malloc_resource()). No CUDA headers: the resource does the device calls. Reuse of a
// released block follows the allocator's single-stream rule (src/cuda/device.h). Tested in
// tests/cuda/device_test.cpp (GPU: counted in the allocator's stats, released on destruction and growth).
#pragma once

#include <cstddef>
#include <memory>
#include <utility>

#include "vortex/status.h"

namespace vortex {

class DeviceMemoryResource {
 public:
  virtual ~DeviceMemoryResource() = default;
  virtual Result<void*> allocate(size_t bytes) = 0;  // kOutOfMemory (with the sizes) when the device is full
  virtual void release(void* ptr, size_t bytes) = 0;
};

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer() { reset(); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept
      : memory_(std::move(o.memory_)), ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      memory_ = std::move(o.memory_);
      ptr_ = std::exchange(o.ptr_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }

  static Result<DeviceBuffer> allocate(std::shared_ptr<DeviceMemoryResource> memory, size_t bytes) {
    if (!memory) return internal_error("DeviceBuffer::allocate: no memory resource");
    DeviceBuffer b;
    VORTEX_ASSIGN_OR_RETURN(b.ptr_, memory->allocate(bytes));
    b.memory_ = std::move(memory);
    b.bytes_ = bytes;
    return Result<DeviceBuffer>(std::move(b));
  }
  // At least `bytes` (contents not kept): the block is replaced only when it is too small.
  Status reserve(const std::shared_ptr<DeviceMemoryResource>& memory, size_t bytes) {
    if (ptr_ != nullptr && bytes <= bytes_) return Status::Ok();
    reset();
    VORTEX_ASSIGN_OR_RETURN(*this, allocate(memory, bytes));
    return Status::Ok();
  }
  void reset() {
    if (ptr_ != nullptr) memory_->release(ptr_, bytes_);
    ptr_ = nullptr;
    bytes_ = 0;
  }

  void* data() const { return ptr_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  size_t size() const { return bytes_; }
  bool empty() const { return ptr_ == nullptr; }

 private:
  std::shared_ptr<DeviceMemoryResource> memory_;
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace vortex
