// Tests of the CUDA device runtime that also run without a GPU: the policy table (defaults stay
// eager/exact without evidence), allocator bucket sizes, the VORTEX_CUDA_CHECK message, arch facts,
// and make_cuda_backend's kUnsupported answer when no device is present. Allocator behaviour on a real
// device (cache reuse, current/peak bytes) runs when a GPU is present and skips visibly otherwise.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include <cstdlib>

#include "cuda/arch.h"
#include "cuda/check.h"
#include "cuda/cuda_backend.h"
#include "cuda/device.h"
#include "gpu_test.h"

namespace vortex {
namespace {

TEST(CudaPolicy, EverySwitchHasAnEagerDefaultUntilEvidenceExists) {
  ASSERT_FALSE(policy_table().empty());
  for (const PolicySwitch& s : policy_table()) {
    SCOPED_TRACE(s.name);
    if (std::string(s.evidence).empty()) {
      for (const char* v : {s.sm90, s.sm100, s.sm120, s.sm121})
        EXPECT_TRUE(std::string(v) == "off" || std::string(v) == "sdpa") << "default '" << v << "' without evidence";
    } else {
      // Every evidence file named by a non-eager default is committed in the repository.
      std::stringstream files(s.evidence);
      std::string f;
      while (std::getline(files, f, ',')) {
        f.erase(0, f.find_first_not_of(' '));
        EXPECT_TRUE(std::filesystem::exists(std::string(VORTEX_SOURCE_DIR) + "/" + f)) << "missing evidence " << f;
      }
    }
    // Architectures without evidence stay eager.
    for (const char* v : {s.sm100, s.sm120, s.sm121})
      EXPECT_TRUE(std::string(v) == "off" || std::string(v) == "sdpa") << "default '" << v << "' on an ungated arch";
  }
  for (const char* name : {"fused_norm_modulate", "fused_gate_add", "attention", "fp8_gemm", "fused_nvfp4_producers"})
    EXPECT_TRUE(policy_default(name, GpuArch::kSm90).ok()) << name;
  EXPECT_EQ(policy_default("no_such_switch", GpuArch::kSm90).status().code(), ErrorCode::kNotFound);
  const ExecOptions o = policy_exec_options(GpuArch::kSm90);
  EXPECT_TRUE(o.fused_norm_modulate);  // gated on the H200 (see the table's evidence)
  EXPECT_TRUE(o.fused_gate_add);
  const ExecOptions b = policy_exec_options(GpuArch::kSm100);
  EXPECT_FALSE(b.fused_norm_modulate);
  EXPECT_FALSE(b.fused_gate_add);
  EXPECT_EQ(o.attention, "sdpa");
  EXPECT_EQ(o.precision, "bf16");
  EXPECT_TRUE(o.fused_nvfp4_producers);  // gated on the H200 (gate.jsonl row 3, bench-ab.jsonl)
  EXPECT_FALSE(b.fused_nvfp4_producers);
}

TEST(CudaPolicy, DebugSyncFromEnvironment) {
  ::setenv("VORTEX_DEBUG_SYNC", "1", 1);
  EXPECT_TRUE(debug_sync_from_env());
  ::setenv("VORTEX_DEBUG_SYNC", "0", 1);
  EXPECT_FALSE(debug_sync_from_env());
  ::unsetenv("VORTEX_DEBUG_SYNC");
  EXPECT_FALSE(debug_sync_from_env());
}

TEST(CudaArch, Facts) {
  EXPECT_EQ(arch_facts(9, 0).arch, GpuArch::kSm90);
  EXPECT_TRUE(arch_facts(9, 0).has_wgmma);
  EXPECT_EQ(arch_facts(10, 0).arch, GpuArch::kSm100);
  EXPECT_EQ(arch_facts(12, 1).arch, GpuArch::kSm121);
  EXPECT_EQ(arch_facts(8, 0).arch, GpuArch::kUnknown);
  DeviceInfo ampere;
  ampere.name = "A100";
  ampere.cc_major = 8;
  ampere.cc_minor = 0;
  Status st = check_device_supported(ampere);
  EXPECT_EQ(st.code(), ErrorCode::kUnsupported);
  EXPECT_NE(st.message().find("sm_80"), std::string::npos) << st.message();
  DeviceInfo hopper = ampere;
  hopper.cc_major = 9;
  EXPECT_TRUE(check_device_supported(hopper).ok());
}

Status failing_call() {
  VORTEX_CUDA_CHECK(cudaErrorInvalidValue);
  return Status::Ok();
}

TEST(CudaCheck, MessageNamesCallFileAndError) {
  Status st = failing_call();
  EXPECT_EQ(st.code(), ErrorCode::kCuda);
  EXPECT_NE(st.message().find("cudaErrorInvalidValue"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("device_test.cpp"), std::string::npos) << st.message();
}

TEST(CudaAllocator, BucketSizes) {
  EXPECT_EQ(CachingAllocator::bucket_bytes(0), 512u);
  EXPECT_EQ(CachingAllocator::bucket_bytes(1), 512u);
  EXPECT_EQ(CachingAllocator::bucket_bytes(513), 1024u);
  EXPECT_EQ(CachingAllocator::bucket_bytes(1 << 20), size_t{1} << 20);
  EXPECT_EQ(CachingAllocator::bucket_bytes((1 << 20) + 1), size_t{2} << 20);
  EXPECT_EQ(CachingAllocator::bucket_bytes(size_t{5} << 20), size_t{6} << 20);
}

TEST(CudaBackendCreate, UnsupportedWithoutDeviceOtherwiseWorks) {
  Result<std::unique_ptr<Backend>> b = make_cuda_backend();
  Result<DeviceInfo> dev = query_device(0);
  if (!dev.ok()) {
    EXPECT_FALSE(b.ok());
    EXPECT_EQ(b.status().code(), ErrorCode::kUnsupported);
    EXPECT_NE(b.status().message().find("no CUDA device"), std::string::npos) << b.status().message();
    return;
  }
  if (!check_device_supported(dev.value()).ok()) {
    // An unsupported GPU: the refusal must name the device's architecture, and this test must not pass
    // as if the backend had been exercised.
    ASSERT_FALSE(b.ok());
    EXPECT_EQ(b.status().code(), ErrorCode::kUnsupported);
    const std::string arch = "sm_" + std::to_string(dev->cc_major) + std::to_string(dev->cc_minor);
    EXPECT_NE(b.status().message().find(arch), std::string::npos) << b.status().message();
    ADD_FAILURE() << "this GPU (" << dev->describe() << ") is not supported by this build: " << b.status().message();
    return;
  }
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  EXPECT_EQ(b.value()->name(), "cuda");
}

TEST(CudaAllocator, CachesAndTracksPeak) {
  VORTEX_SKIP_NO_GPU_OR_FAIL(query_device(0).status());
  CachingAllocator a;
  Result<void*> p1 = a.allocate(1000);
  ASSERT_TRUE(p1.ok()) << p1.status().to_string();
  Result<void*> p2 = a.allocate(size_t{3} << 20);
  ASSERT_TRUE(p2.ok());
  EXPECT_EQ(a.stats().current_bytes, 1024u + (size_t{4} << 20));
  a.release(p2.value(), size_t{3} << 20);
  EXPECT_EQ(a.stats().cached_bytes, size_t{4} << 20);
  Result<void*> p3 = a.allocate((size_t{3} << 20) + 5);  // same bucket: reused
  ASSERT_TRUE(p3.ok());
  EXPECT_EQ(p3.value(), p2.value());
  EXPECT_EQ(a.stats().cache_hits, 1u);
  EXPECT_EQ(a.stats().device_mallocs, 2u);
  EXPECT_EQ(a.stats().peak_bytes, 1024u + (size_t{4} << 20));
  a.release(p1.value(), 1000);
  a.release(p3.value(), (size_t{3} << 20) + 5);
  EXPECT_EQ(a.stats().current_bytes, 0u);
  EXPECT_TRUE(a.empty_cache().ok());
  EXPECT_EQ(a.stats().reserved_bytes, 0u);
}

}  // namespace
}  // namespace vortex
