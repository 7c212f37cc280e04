// The GPU test helper. Every GPU test skips through one macro, VORTEX_SKIP_NO_GPU, and only for want of a
// device: its message starts with "no CUDA device: ", which scripts/gpu-check.sh counts as a failure on a GPU
// machine. Any other reason a GPU test cannot run (an unsupported GPU, a build without the kernels) is a
// failure, never a skip. Also: fresh random seeds, device buffers with a sentinel tail (out-of-bounds writes are
// caught), and the two-reference error summary of docs/numerics.md (kernel vs FP64 <= 2x CPU-same-program vs FP64).
// Header-only; used by the GPU tests under tests/ (gemm, attention, cuda, engine, core, io, parity, cli).
#pragma once

#if __has_include(<cuda_runtime.h>)
#include <cuda_runtime.h>
#define VORTEX_GPU_TEST_HAS_CUDA_RUNTIME 1
#endif
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "seed.h"
#include "vortex/status.h"
#include "vortex/tensor.h"

namespace vortex::testing {

constexpr const char* kNoGpuPrefix = "no CUDA device: ";

// `why` with the prefix exactly once (device queries already start their message with it).
inline std::string no_gpu_reason(const std::string& why) {
  return why.rfind(kNoGpuPrefix, 0) == 0 ? why : kNoGpuPrefix + why;
}

// True when `s` says this machine has no CUDA device or this build has no CUDA backend: the only failures a
// GPU test turns into a skip.
inline bool is_no_device(const Status& s) {
  const std::string& m = s.message();
  return s.code() == ErrorCode::kUnsupported &&
         (m.find("no CUDA device") != std::string::npos || m.find("no CUDA backend") != std::string::npos);
}

}  // namespace vortex::testing

// The one skip of the GPU tests: no usable CUDA device here, and why.
#define VORTEX_SKIP_NO_GPU(why) GTEST_SKIP() << ::vortex::testing::no_gpu_reason(why)

// Skips when `status` (of creating a backend, querying a device) means "no device"; fails on any other error.
#define VORTEX_SKIP_NO_GPU_OR_FAIL(status)                                                       \
  do {                                                                                           \
    const ::vortex::Status vortex_st_ = (status);                                                \
    if (!vortex_st_.ok()) {                                                                      \
      if (::vortex::testing::is_no_device(vortex_st_)) VORTEX_SKIP_NO_GPU(vortex_st_.message()); \
      GTEST_FAIL() << "GPU test cannot run: " << vortex_st_.to_string();                         \
    }                                                                                            \
  } while (0)

namespace vortex::testing {

#ifdef VORTEX_GPU_TEST_HAS_CUDA_RUNTIME
inline bool have_cuda_device(std::string* why) {
  int n = 0;
  cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess || n == 0) {
    *why = err != cudaSuccess ? cudaGetErrorString(err) : "cudaGetDeviceCount returned 0";
    cudaGetLastError();
    return false;
  }
  return true;
}

#define VORTEX_REQUIRE_GPU()                                                                 \
  do {                                                                                       \
    std::string vortex_why_;                                                                 \
    if (!::vortex::testing::have_cuda_device(&vortex_why_)) VORTEX_SKIP_NO_GPU(vortex_why_); \
  } while (0)
#endif

#ifdef VORTEX_GPU_TEST_HAS_CUDA_RUNTIME
// Device allocation of `bytes` plus a 4 KiB sentinel tail (0xA5) checked by sentinel_intact().
class DeviceBuffer {
 public:
  static constexpr size_t kTail = 4096;
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    EXPECT_EQ(cudaMalloc(&ptr_, bytes + kTail), cudaSuccess);
    std::vector<uint8_t> tail(kTail, 0xA5);
    EXPECT_EQ(cudaMemcpy(static_cast<char*>(ptr_) + bytes, tail.data(), kTail, cudaMemcpyHostToDevice), cudaSuccess);
  }
  ~DeviceBuffer() { cudaFree(ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  bool sentinel_intact() const {
    std::vector<uint8_t> tail(kTail);
    if (cudaMemcpy(tail.data(), static_cast<char*>(ptr_) + bytes_, kTail, cudaMemcpyDeviceToHost) != cudaSuccess)
      return false;
    for (uint8_t b : tail)
      if (b != 0xA5) return false;
    return true;
  }
  void upload(const void* src, size_t n) {
    ASSERT_LE(n, bytes_);
    ASSERT_EQ(cudaMemcpy(ptr_, src, n, cudaMemcpyHostToDevice), cudaSuccess);
  }
  void download(void* dst, size_t n) const {
    ASSERT_LE(n, bytes_);
    ASSERT_EQ(cudaMemcpy(dst, ptr_, n, cudaMemcpyDeviceToHost), cudaSuccess);
  }
  void poison(uint8_t byte) { ASSERT_EQ(cudaMemset(ptr_, byte, bytes_), cudaSuccess); }
  // A device tensor over this buffer (not owning it: the buffer must outlive the view).
  Tensor view(Shape shape, DType dtype, Shape strides = {}, size_t byte_offset = 0) const {
    auto storage = std::make_shared<Storage>();
    storage->ptr = ptr_;
    storage->bytes = bytes_;
    storage->device = Device::kCuda;
    return Tensor::from_storage(storage, byte_offset, std::move(shape), dtype, std::move(strides));
  }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

#endif

// Accumulates |kernel - ref64| and |cpu - ref64| over checked elements.
struct TwoReference {
  double sum_ref2 = 0, sum_gpu2 = 0, sum_cpu2 = 0, max_gpu = 0, max_cpu = 0, max_ref = 0;
  int64_t count = 0, nonfinite = 0;
  void add(double gpu, double cpu, double ref) {
    if (!std::isfinite(gpu)) {
      ++nonfinite;
      return;
    }
    const double eg = std::fabs(gpu - ref), ec = std::fabs(cpu - ref);
    sum_ref2 += ref * ref;
    sum_gpu2 += eg * eg;
    sum_cpu2 += ec * ec;
    max_gpu = std::max(max_gpu, eg);
    max_cpu = std::max(max_cpu, ec);
    max_ref = std::max(max_ref, std::fabs(ref));
    ++count;
  }
  double rel_l2_gpu() const { return std::sqrt(sum_gpu2 / std::max(sum_ref2, 1e-300)); }
  double rel_l2_cpu() const { return std::sqrt(sum_cpu2 / std::max(sum_ref2, 1e-300)); }
  std::string summary() const {
    char buf[320];
    std::snprintf(buf, sizeof(buf),
                  "n=%lld rel-L2 gpu %.3e cpu %.3e | max-abs gpu %.3e cpu %.3e | max|ref| %.3e | nonfinite %lld",
                  static_cast<long long>(count), rel_l2_gpu(), rel_l2_cpu(), max_gpu, max_cpu, max_ref,
                  static_cast<long long>(nonfinite));
    return buf;
  }
  // docs/numerics.md two-reference rule with floors relative to the reference scale.
  bool passes(double rel_floor, double abs_floor_rel) const {
    return nonfinite == 0 && count > 0 && rel_l2_gpu() <= 2.0 * rel_l2_cpu() + rel_floor &&
           max_gpu <= 2.0 * max_cpu + abs_floor_rel * max_ref;
  }
};

}  // namespace vortex::testing
