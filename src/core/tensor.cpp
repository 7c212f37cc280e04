// Tensor views over shared storage. See include/vortex/tensor.h.
#include "vortex/tensor.h"

#include <cstdlib>
#include <cstring>
#include <new>
#include <sstream>

namespace vortex {

const char* device_name(Device device) { return device == Device::kCpu ? "cpu" : "cuda"; }

Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size());
  int64_t s = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = s;
    s *= shape[i];
  }
  return strides;
}

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string shape_to_string(const Shape& shape) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  os << "]";
  return os.str();
}

Tensor Tensor::empty(Shape shape, DType dtype) {
  size_t bytes = static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype);
  size_t alloc = (bytes + 63) / 64 * 64;
  if (alloc == 0) alloc = 64;
  void* p = std::aligned_alloc(64, alloc);
  if (!p) throw std::bad_alloc();
  auto storage = std::make_shared<Storage>();
  storage->ptr = p;
  storage->bytes = bytes;
  storage->device = Device::kCpu;
  storage->release = [](void* q, size_t) { std::free(q); };
  return from_storage(std::move(storage), 0, std::move(shape), dtype);
}

Tensor Tensor::zeros(Shape shape, DType dtype) {
  Tensor t = empty(std::move(shape), dtype);
  std::memset(t.raw_data(), 0, t.nbytes());
  return t;
}

Tensor Tensor::from_storage(std::shared_ptr<Storage> storage, size_t byte_offset, Shape shape, DType dtype,
                            Shape strides) {
  Tensor t;
  t.storage_ = std::move(storage);
  t.offset_ = byte_offset;
  t.dtype_ = dtype;
  t.strides_ = strides.empty() ? contiguous_strides(shape) : std::move(strides);
  t.shape_ = std::move(shape);
  return t;
}

int64_t Tensor::numel() const { return shape_numel(shape_); }

bool Tensor::is_contiguous() const { return strides_ == contiguous_strides(shape_); }

Result<Tensor> Tensor::narrow(int d, int64_t start, int64_t length) const {
  if (d < 0) d += ndim();
  if (d < 0 || d >= ndim()) return invalid_argument("narrow: dim out of range for " + describe());
  if (start < 0 || length < 0 || start + length > shape_[static_cast<size_t>(d)])
    return invalid_argument("narrow: [" + std::to_string(start) + ", " + std::to_string(start + length) +
                            ") outside dim " + std::to_string(d) + " of " + describe());
  Tensor t = *this;
  t.offset_ += static_cast<size_t>(start * strides_[static_cast<size_t>(d)]) * dtype_size(dtype_);
  t.shape_[static_cast<size_t>(d)] = length;
  return t;
}

Result<Tensor> Tensor::reshape(Shape shape) const {
  if (!is_contiguous()) return invalid_argument("reshape: tensor is not contiguous: " + describe());
  if (shape_numel(shape) != numel())
    return invalid_argument("reshape: " + shape_to_string(shape) + " does not match " + describe());
  Tensor t = *this;
  t.strides_ = contiguous_strides(shape);
  t.shape_ = std::move(shape);
  return t;
}

Result<Tensor> Tensor::as_strided(Shape shape, Shape strides, int64_t element_offset) const {
  if (shape.size() != strides.size()) return invalid_argument("as_strided: shape/stride rank mismatch");
  // Bounds: the furthest element must stay inside the storage.
  int64_t last = element_offset;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] <= 0) return invalid_argument("as_strided: non-positive dimension");
    if (strides[i] < 0) return invalid_argument("as_strided: negative stride");
    last += (shape[i] - 1) * strides[i];
  }
  size_t end = offset_ + static_cast<size_t>(last + 1) * dtype_size(dtype_);
  if (!storage_ || end > storage_->bytes)
    return invalid_argument("as_strided: view " + shape_to_string(shape) + " runs past the buffer of " + describe());
  Tensor t = *this;
  t.offset_ += static_cast<size_t>(element_offset) * dtype_size(dtype_);
  t.shape_ = std::move(shape);
  t.strides_ = std::move(strides);
  return t;
}

std::string Tensor::describe() const {
  return shape_to_string(shape_) + " " + dtype_short_name(dtype_) + (device() == Device::kCuda ? " (cuda)" : "");
}

}  // namespace vortex
