// HostMemoryBackend: a TEST DOUBLE for memory only (alloc / upload / download / copy / fill_synthetic
// on host memory). It exists so the checkpoint loader and synthesize_weights can be tested without
// depending on the CPU reference backend; every compute op returns kUnsupported and must never be
// used as a reference. fill_synthetic is core/synthetic.h's host fill, the same as every backend.
#pragma once

#include <cstring>

#include "backend/backend.h"
#include "core/synthetic.h"

namespace vortex::testing {

class HostMemoryBackend final : public Backend {
 public:
  std::string_view name() const override { return "host-memory-test-double"; }
  Device device() const override { return Device::kCpu; }
  Result<Tensor> alloc(const Shape& shape, DType dtype) override {
    Tensor t = Tensor::empty(shape, dtype);
    std::memset(t.raw_data(), 0xA5, t.nbytes());  // poison: a missing fill shows up
    return t;
  }
  Result<Tensor> upload(const Tensor& host) override {
    Tensor t = Tensor::empty(host.shape(), host.dtype());
    Tensor dst = t;
    VORTEX_RETURN_IF_ERROR(copy(host, dst));
    return t;
  }
  Status download(const Tensor& src, Tensor& host_dst) override { return copy(src, host_dst); }
  Status copy(const Tensor& src, Tensor& dst) override {
    if (src.shape() != dst.shape() || src.dtype() != dst.dtype())
      return invalid_argument("copy: " + src.describe() + " -> " + dst.describe());
    if (!src.is_contiguous() || !dst.is_contiguous()) return unsupported("test double copies contiguous tensors only");
    if (src.nbytes()) std::memcpy(dst.raw_data(), src.raw_data(), src.nbytes());
    return Status::Ok();
  }
  Status synchronize() override { return Status::Ok(); }
  Status fill_synthetic(Tensor& dst, uint64_t seed, float scale, float offset) override {
    return fill_synthetic_host(dst, seed, scale, offset);
  }
  Status linear(const Tensor&, const LinearWeight&, const Tensor*, Tensor&) override { return no(); }
  Status rms_norm(const Tensor&, const Tensor&, float, Tensor&) override { return no(); }
  Status modulate(Tensor&, const Tensor&, int, int, const SegmentTable&) override { return no(); }
  Status rms_norm_modulate(const Tensor&, const Tensor&, float, const Tensor&, int, int, const SegmentTable&,
                           Tensor&) override {
    return no();
  }
  Status qk_norm_rope(Tensor&, Tensor&, const Tensor&, const Tensor&, float, const RopeTables*, int, int) override {
    return no();
  }
  Status attention(const Tensor&, const Tensor&, const Tensor&, int, int, Tensor&, const ExecOptions&) override {
    return no();
  }
  Status gate_add(Tensor&, const Tensor&, const Tensor*, int, const SegmentTable&) override { return no(); }
  Status swiglu(const Tensor&, Tensor&) override { return no(); }
  Status cast(const Tensor&, Tensor&) override { return no(); }

 private:
  static Status no() { return unsupported("HostMemoryBackend is a memory-only test double"); }
};

}  // namespace vortex::testing
