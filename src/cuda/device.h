// CUDA device runtime: device context (properties, arch facts, stream), a caching device allocator (size-bucketed free
// lists, current/peak bytes) and pinned host staging buffers for uploads/downloads. Everything returns Status; nothing
// exits. Single-stream model: memory returned to the cache is reused by later work on the same stream, so no
// cross-stream events are needed. Tested in tests/cuda/device_test.cpp (GPU label, skips visibly).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "core/arch.h"
#include "core/device_buffer.h"
#include "vortex/status.h"

namespace vortex {

// ---- device context ----------------------------------------------------------------------------
struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  int cc_major = 0, cc_minor = 0;
  ArchFacts facts;
  int sm_count = 0;
  size_t total_global_bytes = 0;
  size_t l2_bytes = 0;
  size_t smem_per_block_optin = 0;
  int driver_version = 0, runtime_version = 0;
  std::string describe() const;  // "NVIDIA H200 (sm_90, 132 SMs, 139.8 GiB, L2 60 MiB)"
};

// Queries device `ordinal`; kUnsupported (with the reason) when there is no usable CUDA device.
Result<DeviceInfo> query_device(int ordinal = 0);
// kUnsupported unless the device runs this build's kernels: exact SASS for its capability, or the embedded PTX
// (JIT-compiled by the driver) at or below it (core/arch.h check_build_runs_on).
Status check_device_supported(const DeviceInfo& info);

// ---- caching allocator -------------------------------------------------------------------------
struct AllocatorStats {
  size_t current_bytes = 0;   // handed out to tensors now (bucket-rounded)
  size_t peak_bytes = 0;      // max of current_bytes since creation / reset_peak()
  size_t cached_bytes = 0;    // free blocks held in the cache
  size_t reserved_bytes = 0;  // current + cached = what cudaMalloc returned and we still hold
  uint64_t allocations = 0;   // allocate() calls
  uint64_t cache_hits = 0;
  uint64_t device_mallocs = 0;  // cudaMalloc calls
  uint64_t releases = 0;        // release() calls: a captured CUDA graph is valid while this is unchanged
};

class CachingAllocator final : public DeviceMemoryResource {
 public:
  CachingAllocator() = default;
  ~CachingAllocator() override;
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // Bucket size for a request: 512-byte granularity up to 1 MiB, 2 MiB granularity above.
  static size_t bucket_bytes(size_t bytes);
  // A block of at least `bytes` (256-byte aligned). On cudaMalloc failure frees the cache and retries;
  // then kOutOfMemory with the sizes involved.
  Result<void*> allocate(size_t bytes) override;
  void release(void* ptr, size_t bytes) override;  // back to the free list of its bucket
  Status empty_cache();                            // cudaFree every cached block
  AllocatorStats stats() const;
  void reset_peak();
  // While set (a CUDA graph capture on the owner's stream), allocate() fails with kInternal naming the size:
  // a captured step must allocate nothing (its blocks would be baked into the graph).
  void set_capture_guard(bool on);
  // A ceiling on the device memory this allocator holds (in use + cached; 0: none). An allocation that would pass it
  // first returns the cache to the driver, then fails with kOutOfMemory naming the budget: never a silent spill.
  void set_limit(size_t bytes);
  size_t limit() const;

 private:
  mutable std::mutex mu_;
  bool capture_guard_ = false;
  size_t limit_ = 0;
  void free_cache_locked();
  std::map<size_t, std::vector<void*>> free_;  // bucket bytes -> free blocks
  AllocatorStats stats_;
};

// True when `p` points into page-locked host memory (cudaHostAlloc / cudaMallocHost), which the copy engines read
// directly; false for pageable or device memory.
bool is_page_locked(const void* p);

// ---- pinned staging ----------------------------------------------------------------------------
// A growable page-locked host buffer used to stage uploads/downloads (chunked for large tensors).
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  ~PinnedBuffer();
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  Status reserve(size_t bytes);
  void* data() const { return ptr_; }
  size_t capacity() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace vortex
