// Tensor: a shared owning buffer (host memory, an mmap'd file region, or device memory) plus a strided
// view (shape, strides in elements, dtype, byte offset). Views never copy; ownership is shared so a
// view keeps its buffer alive. Backends allocate device tensors through Storage with their own release.
// Tested in tests/core/tensor_test.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "vortex/dtype.h"
#include "vortex/status.h"

namespace vortex {

enum class Device : uint8_t { kCpu, kCuda };
const char* device_name(Device device);

using Shape = std::vector<int64_t>;

// One contiguous allocation. `release` frees it (free, munmap, cudaFree via an allocator, ...).
struct Storage {
  void* ptr = nullptr;
  size_t bytes = 0;
  Device device = Device::kCpu;
  std::function<void(void*, size_t)> release;

  Storage() = default;
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  ~Storage() {
    if (release && ptr) release(ptr, bytes);
  }
};

class Tensor {
 public:
  Tensor() = default;

  // Host tensor, 64-byte aligned, contents uninitialised.
  static Tensor empty(Shape shape, DType dtype);
  // Host tensor filled with zero bytes.
  static Tensor zeros(Shape shape, DType dtype);
  // View over an existing storage. Empty strides mean contiguous row-major.
  static Tensor from_storage(std::shared_ptr<Storage> storage, size_t byte_offset, Shape shape, DType dtype,
                             Shape strides = {});

  bool defined() const { return storage_ != nullptr; }
  DType dtype() const { return dtype_; }
  Device device() const { return storage_ ? storage_->device : Device::kCpu; }
  const Shape& shape() const { return shape_; }
  const Shape& strides() const { return strides_; }
  int ndim() const { return static_cast<int>(shape_.size()); }
  // Size of dimension i; negative i counts from the end.
  int64_t dim(int i) const { return shape_[static_cast<size_t>(i < 0 ? i + ndim() : i)]; }
  int64_t stride(int i) const { return strides_[static_cast<size_t>(i < 0 ? i + ndim() : i)]; }
  int64_t numel() const;
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  bool is_contiguous() const;
  size_t byte_offset() const { return offset_; }
  const std::shared_ptr<Storage>& storage() const { return storage_; }

  void* raw_data() const { return static_cast<char*>(storage_->ptr) + offset_; }
  template <typename T>
  T* data() const {
    assert(sizeof(T) == dtype_size(dtype_));
    return static_cast<T*>(raw_data());
  }

  // Views (no copy). Preconditions are checked by the Result-returning forms.
  Result<Tensor> narrow(int dim, int64_t start, int64_t length) const;
  Result<Tensor> reshape(Shape shape) const;  // contiguous tensors only
  // A view with another shape/strides over the same bytes, e.g. a strided Q view of a QKV buffer.
  Result<Tensor> as_strided(Shape shape, Shape strides, int64_t element_offset = 0) const;

  // "[37810, 5376] bf16"
  std::string describe() const;

 private:
  std::shared_ptr<Storage> storage_;
  size_t offset_ = 0;
  DType dtype_ = DType::kF32;
  Shape shape_;
  Shape strides_;
};

Shape contiguous_strides(const Shape& shape);
int64_t shape_numel(const Shape& shape);
std::string shape_to_string(const Shape& shape);

}  // namespace vortex
