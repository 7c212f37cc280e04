// Device runtime implementation: device queries, caching allocator, pinned buffers.
// See device.h for the contracts. Tested in tests/cuda/device_test.cpp.
#include "cuda/device.h"

#include <cstdlib>
#include <cstring>
#include <sstream>

#include "cuda/check.h"

namespace vortex {

// ---- device context ----------------------------------------------------------------------------
std::string DeviceInfo::describe() const {
  std::ostringstream s;
  s << name << " (sm_" << cc_major << cc_minor << ", " << sm_count << " SMs, "
    << static_cast<double>(total_global_bytes) / (1024.0 * 1024.0 * 1024.0) << " GiB, L2 " << l2_bytes / (1024 * 1024)
    << " MiB, driver " << driver_version << ", runtime " << runtime_version << ")";
  return s.str();
}

Result<DeviceInfo> query_device(int ordinal) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return unsupported(std::string("no CUDA device: cudaGetDeviceCount returned ") + cudaGetErrorName(err) + " (" +
                       cudaGetErrorString(err) + "); use --backend cpu or run on a machine with an NVIDIA GPU");
  }
  if (count <= ordinal)
    return unsupported("no CUDA device: " + std::to_string(count) + " device(s) visible, ordinal " +
                       std::to_string(ordinal) + " requested; check CUDA_VISIBLE_DEVICES or use --backend cpu");
  cudaDeviceProp prop{};
  VORTEX_CUDA_CHECK(cudaGetDeviceProperties(&prop, ordinal));
  DeviceInfo info;
  info.ordinal = ordinal;
  info.name = prop.name;
  info.cc_major = prop.major;
  info.cc_minor = prop.minor;
  info.facts = arch_facts(prop.major, prop.minor);
  info.sm_count = prop.multiProcessorCount;
  info.total_global_bytes = prop.totalGlobalMem;
  info.l2_bytes = static_cast<size_t>(prop.l2CacheSize);
  info.smem_per_block_optin = prop.sharedMemPerBlockOptin;
  VORTEX_CUDA_CHECK(cudaDriverGetVersion(&info.driver_version));
  VORTEX_CUDA_CHECK(cudaRuntimeGetVersion(&info.runtime_version));
  return info;
}

Status check_device_supported(const DeviceInfo& info) {
  return check_build_runs_on(info.name, info.cc_major, info.cc_minor);
}

// ---- caching allocator -------------------------------------------------------------------------
CachingAllocator::~CachingAllocator() { (void)empty_cache(); }

size_t CachingAllocator::bucket_bytes(size_t bytes) {
  constexpr size_t kSmallGranule = 512;
  constexpr size_t kLargeGranule = size_t{2} << 20;
  constexpr size_t kSmallLimit = size_t{1} << 20;
  if (bytes == 0) bytes = 1;
  if (bytes <= kSmallLimit) return (bytes + kSmallGranule - 1) / kSmallGranule * kSmallGranule;
  return (bytes + kLargeGranule - 1) / kLargeGranule * kLargeGranule;
}

Result<void*> CachingAllocator::allocate(size_t bytes) {
  const size_t bucket = bucket_bytes(bytes);
  std::lock_guard<std::mutex> lock(mu_);
  if (capture_guard_)
    return internal_error("allocation of " + std::to_string(bytes) +
                          " bytes during a CUDA graph capture: the captured step is not allocation-free");
  ++stats_.allocations;
  auto it = free_.find(bucket);
  void* ptr = nullptr;
  if (it != free_.end() && !it->second.empty()) {
    ptr = it->second.back();
    it->second.pop_back();
    stats_.cached_bytes -= bucket;
    ++stats_.cache_hits;
  } else {
    if (limit_ != 0 && stats_.reserved_bytes + bucket > limit_) {
      free_cache_locked();  // cached blocks of other sizes count against the budget too
      if (stats_.current_bytes + bucket > limit_)
        return Status(ErrorCode::kOutOfMemory, "device memory budget exceeded: " + std::to_string(bucket) +
                                                   " more bytes with " + std::to_string(stats_.current_bytes) +
                                                   " in use would pass the budget of " + std::to_string(limit_) +
                                                   " bytes (--max-vram); raise the budget or make the request smaller");
    }
    cudaError_t err = cudaMalloc(&ptr, bucket);
    if (err == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      free_cache_locked();  // give the cache back to the driver and retry once
      err = cudaMalloc(&ptr, bucket);
    }
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      return Status(err == cudaErrorMemoryAllocation ? ErrorCode::kOutOfMemory : ErrorCode::kCuda,
                    "cudaMalloc(" + std::to_string(bucket) + " bytes) failed: " + cudaGetErrorString(err) +
                        "; in use " + std::to_string(stats_.current_bytes) + " bytes (peak " +
                        std::to_string(stats_.peak_bytes) + "); reduce the resolution/frame count or free GPU memory");
    }
    ++stats_.device_mallocs;
    stats_.reserved_bytes += bucket;
  }
  stats_.current_bytes += bucket;
  if (stats_.current_bytes > stats_.peak_bytes) stats_.peak_bytes = stats_.current_bytes;
  return ptr;
}

void CachingAllocator::release(void* ptr, size_t bytes) {
  if (ptr == nullptr) return;
  const size_t bucket = bucket_bytes(bytes);
  std::lock_guard<std::mutex> lock(mu_);
  free_[bucket].push_back(ptr);
  stats_.current_bytes -= bucket;
  stats_.cached_bytes += bucket;
  ++stats_.releases;
}

void CachingAllocator::free_cache_locked() {
  for (auto& [b, list] : free_)
    for (void* p : list) (void)cudaFree(p);
  stats_.reserved_bytes -= stats_.cached_bytes;
  stats_.cached_bytes = 0;
  free_.clear();
}

void CachingAllocator::set_limit(size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  limit_ = bytes;
}

size_t CachingAllocator::limit() const {
  std::lock_guard<std::mutex> lock(mu_);
  return limit_;
}

void CachingAllocator::set_capture_guard(bool on) {
  std::lock_guard<std::mutex> lock(mu_);
  capture_guard_ = on;
}

Status CachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mu_);
  Status first;
  for (auto& [bucket, list] : free_)
    for (void* p : list) {
      cudaError_t err = cudaFree(p);
      if (err != cudaSuccess && first.ok()) first = cuda_status(err, "cudaFree(cached block)", __FILE__, __LINE__);
    }
  stats_.reserved_bytes -= stats_.cached_bytes;
  stats_.cached_bytes = 0;
  free_.clear();
  return first;
}

AllocatorStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void CachingAllocator::reset_peak() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.peak_bytes = stats_.current_bytes;
}

// ---- pinned staging ----------------------------------------------------------------------------
PinnedBuffer::~PinnedBuffer() {
  if (ptr_) (void)cudaFreeHost(ptr_);
}

bool is_page_locked(const void* p) {
  if (p == nullptr) return false;
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    (void)cudaGetLastError();  // pageable memory unknown to CUDA: not an error
    return false;
  }
  return a.type == cudaMemoryTypeHost;
}

Status PinnedBuffer::reserve(size_t bytes) {
  if (bytes <= bytes_) return Status::Ok();
  if (ptr_) {
    VORTEX_CUDA_CHECK(cudaFreeHost(ptr_));
    ptr_ = nullptr;
    bytes_ = 0;
  }
  VORTEX_CUDA_CHECK(cudaMallocHost(&ptr_, bytes));
  bytes_ = bytes;
  return Status::Ok();
}

}  // namespace vortex
