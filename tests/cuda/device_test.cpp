// Tests of the CUDA device runtime that also run without a GPU: the policy table (defaults stay
// eager/exact without evidence), the selectors (own and forced policy), allocator bucket sizes, the
// VORTEX_CUDA_CHECK message, arch facts and the build's targets,
// and make_cuda_backend's kUnsupported answer when no device is present. Allocator behaviour on a real
// device (cache reuse, current/peak bytes) runs when a GPU is present and skips visibly otherwise.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include <cstdlib>

#include "core/arch.h"
#include "cuda/check.h"
#include "cuda/cuda_backend.h"
#include "cuda/device.h"
#include "cuda/policy.h"
#include "gpu_test.h"

namespace vortex {
namespace {

TEST(CudaPolicy, EveryArchHasARowAndEveryNonEagerDefaultNamesCommittedEvidence) {
  for (GpuArch a : {GpuArch::kSm90, GpuArch::kSm100, GpuArch::kSm120, GpuArch::kSm121})
    EXPECT_EQ(arch_policy(a).arch, a) << gpu_arch_name(a);
  for (const ArchPolicy& p : policy_table()) {
    SCOPED_TRACE(gpu_arch_name(p.arch));
    // The BF16 program is the default everywhere (sage2 / fp8 / nvfp4 are E2 and opt-in): through cuDNN SDPA, or
    // on sm90 through the owned kernel, which needs evidence like any other non-vendor default.
    EXPECT_NE(p.attention, AttentionKind::kSage2);
    if (p.attention == AttentionKind::kBf16Owned) {
      EXPECT_EQ(p.arch, GpuArch::kSm90);
      EXPECT_NE(std::string(p.evidence).find("attention-lora-graphs/bench-ab.jsonl"), std::string::npos);
    }
    EXPECT_EQ(p.precision, Precision::kBf16);
    EXPECT_EQ(p.nvfp4_fc2, Nvfp4Fc2::kW4A4);
    const bool eager = !p.fused_norm_modulate && !p.fused_gate_add && !p.fused_nvfp4_producers;
    if (std::string(p.evidence).empty()) {
      EXPECT_TRUE(eager) << "a fused default without evidence";
    } else {
      std::stringstream files(p.evidence);
      std::string f;
      while (std::getline(files, f, ',')) {
        f.erase(0, f.find_first_not_of(' '));
        EXPECT_TRUE(std::filesystem::exists(std::string(VORTEX_SOURCE_DIR) + "/" + f)) << "missing evidence " << f;
      }
    }
  }
  // sm90: gated on the H200 (the row's evidence); the other architectures stay eager until gated there.
  const ExecOptions o = policy_exec_options(GpuArch::kSm90);
  EXPECT_TRUE(o.fused_norm_modulate);
  EXPECT_TRUE(o.fused_gate_add);
  EXPECT_TRUE(o.fused_nvfp4_producers);
  for (GpuArch a : {GpuArch::kSm100, GpuArch::kSm120, GpuArch::kSm121}) {
    const ExecOptions b = policy_exec_options(a);
    EXPECT_FALSE(b.fused_norm_modulate || b.fused_gate_add || b.fused_nvfp4_producers) << gpu_arch_name(a);
  }
}

TEST(CudaPolicy, DebugSyncFromEnvironment) {
  ::setenv("VORTEX_DEBUG_SYNC", "1", 1);
  EXPECT_TRUE(debug_sync_from_env());
  ::setenv("VORTEX_DEBUG_SYNC", "0", 1);
  EXPECT_FALSE(debug_sync_from_env());
  ::unsetenv("VORTEX_DEBUG_SYNC");
  EXPECT_FALSE(debug_sync_from_env());
}

TEST(CudaPolicy, ForcedPolicyFromEnvironment) {
  const char* before = std::getenv("VORTEX_POLICY");
  const std::string saved = before ? before : "";
  ::setenv("VORTEX_POLICY", "sm120", 1);
  ASSERT_TRUE(policy_from_env().ok());
  EXPECT_EQ(*policy_from_env(), GpuArch::kSm120);
  ::setenv("VORTEX_POLICY", "sm_120", 1);
  EXPECT_EQ(policy_from_env().status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(policy_from_env().status().message().find("sm90, sm100, sm120, sm121"), std::string::npos);
  ::unsetenv("VORTEX_POLICY");
  EXPECT_EQ(*policy_from_env(), GpuArch::kUnknown);
  if (before) ::setenv("VORTEX_POLICY", saved.c_str(), 1);
}

TEST(CudaPolicy, SelectorsAnswerKernelAndSupport) {
  const AttentionShape canonical{37810, 56, 128};
  ExecOptions sdpa, sage2;
  sage2.attention = AttentionKind::kSage2;
  // H200 under its own policy.
  const DevicePolicy h200 = make_device_policy("NVIDIA H200", 9, 0);
  EXPECT_FALSE(h200.forced);
  EXPECT_EQ(h200.policy_arch, GpuArch::kSm90);
  EXPECT_EQ(*select_attention(h200, sdpa, canonical), AttentionKernel::kCudnnSdpa);
  Result<AttentionKernel> s = select_attention(h200, sage2, canonical);
  if (build_has_sm90_kernels()) {
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    EXPECT_EQ(*s, AttentionKernel::kSage2Wgmma);
  } else {
    EXPECT_EQ(s.status().code(), ErrorCode::kUnsupported);
  }
  Result<AttentionKernel> hd64 = select_attention(h200, sage2, AttentionShape{1024, 8, 64});
  EXPECT_EQ(hd64.status().code(), ErrorCode::kUnsupported);
  EXPECT_NE(hd64.status().message().find("head_dim 64"), std::string::npos) << hd64.status().message();
  EXPECT_EQ(select_attention(h200, sdpa, AttentionShape{16, 0, 128}).status().code(), ErrorCode::kInvalidArgument);
  // The BF16 program through the owned kernel: sm_90 devices of builds with 90a, head_dim 128, 72 and 64; the same
  // program through cuDNN SDPA everywhere else. It is the sm90 row's default, no other row's.
  ExecOptions owned;
  owned.attention = AttentionKind::kBf16Owned;
  Result<AttentionKernel> o = select_attention(h200, owned, canonical);
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  EXPECT_EQ(*o, build_has_sm90_kernels() ? AttentionKernel::kBf16Wgmma : AttentionKernel::kCudnnSdpa);
  EXPECT_STREQ(attention_kernel_name(AttentionKernel::kBf16Wgmma), "bf16_wgmma");
  for (int d : {72, 64})  // the vision tower's and the video VAE decoder's head sizes
    EXPECT_EQ(*select_attention(h200, owned, AttentionShape{1797, 32, d}),
              build_has_sm90_kernels() ? AttentionKernel::kBf16Wgmma : AttentionKernel::kCudnnSdpa);
  EXPECT_EQ(*select_attention(h200, owned, AttentionShape{1024, 8, 80}), AttentionKernel::kCudnnSdpa);
  EXPECT_EQ(*select_attention(make_device_policy("NVIDIA B200", 10, 0), owned, canonical), AttentionKernel::kCudnnSdpa);
  EXPECT_EQ(policy_exec_options(GpuArch::kSm90).attention, AttentionKind::kBf16Owned);
  for (GpuArch arch : {GpuArch::kSm100, GpuArch::kSm120, GpuArch::kSm121})
    EXPECT_EQ(policy_exec_options(arch).attention, AttentionKind::kSdpa);
  EXPECT_EQ(*select_nvfp4(h200), Nvfp4GemmPath::kEmulatedBf16);
  EXPECT_EQ(*select_gemm(h200, Precision::kFp8), GemmPath::kCublasLtFp8);
  EXPECT_EQ(*select_gemm(h200, Precision::kBf16), GemmPath::kCublasLtBf16);
  // The sm120 policy forced on the H200: the portable mainloop, and cuBLASLt FP4 refused (compiled, not run).
  const DevicePolicy forced = make_device_policy("NVIDIA H200", 9, 0, GpuArch::kSm120);
  EXPECT_TRUE(forced.forced);
  EXPECT_EQ(forced.policy_arch, GpuArch::kSm120);
  EXPECT_EQ(*select_attention(forced, sage2, canonical), AttentionKernel::kSage2MmaSync);
  EXPECT_EQ(*select_attention(forced, sdpa, canonical), AttentionKernel::kCudnnSdpa);
  Result<Nvfp4GemmPath> fp4 = select_nvfp4(forced);
  EXPECT_EQ(fp4.status().code(), ErrorCode::kUnsupported);
  EXPECT_NE(fp4.status().message().find("compiled, not run here"), std::string::npos) << fp4.status().message();
  EXPECT_NE(fp4.status().message().find("forced on NVIDIA H200"), std::string::npos) << fp4.status().message();
  EXPECT_TRUE(select_gemm(forced, Precision::kFp8).ok());
  // The seeds' GPUs under their own rows.
  const DevicePolicy gb10 = make_device_policy("NVIDIA GB10", 12, 1);
  EXPECT_EQ(gb10.policy_arch, GpuArch::kSm121);
  EXPECT_EQ(*select_attention(gb10, sage2, canonical), AttentionKernel::kSage2MmaSync);
  const DevicePolicy b200 = make_device_policy("NVIDIA B200", 10, 0);
  EXPECT_EQ(select_attention(b200, sage2, canonical).status().code(), ErrorCode::kUnsupported);
  if (nvfp4_native_compiled()) {
    EXPECT_EQ(*select_nvfp4(b200), Nvfp4GemmPath::kNativeFp4);
    EXPECT_EQ(*select_nvfp4(gb10), Nvfp4GemmPath::kNativeFp4);
  }
  // A GPU newer than the table (sm_103 running the PTX) follows the nearest row below it.
  EXPECT_EQ(make_device_policy("NVIDIA B300", 10, 3).policy_arch, GpuArch::kSm100);
  // Fusions are portable: the options decide; nvfp4 producers only in precision nvfp4.
  ExecOptions f = policy_exec_options(GpuArch::kSm90);
  EXPECT_FALSE(select_fusion(forced, f).fused_nvfp4_producers);
  f.precision = Precision::kNvfp4;
  EXPECT_TRUE(select_fusion(forced, f).fused_nvfp4_producers);
  EXPECT_TRUE(select_fusion(forced, f).fused_gate_add);
}

TEST(CudaArch, FactsAndBuildTargets) {
  EXPECT_EQ(arch_facts(9, 0).arch, GpuArch::kSm90);
  EXPECT_TRUE(arch_facts(9, 0).has_wgmma);
  EXPECT_EQ(arch_facts(10, 0).arch, GpuArch::kSm100);
  EXPECT_EQ(arch_facts(12, 1).arch, GpuArch::kSm121);
  EXPECT_EQ(arch_facts(8, 0).arch, GpuArch::kUnknown);
  EXPECT_EQ(*parse_gpu_arch("sm121"), GpuArch::kSm121);
  EXPECT_EQ(parse_gpu_arch("hopper").status().code(), ErrorCode::kInvalidArgument);
  // This build runs on the H200 (sm_90a SASS or the PTX), and never on a GPU older than its PTX.
  EXPECT_TRUE(build_has_sass_for(9, 0) || build_can_jit_for(9, 0)) << build_cuda_targets();
  EXPECT_FALSE(build_has_sass_for(8, 0));
  EXPECT_FALSE(build_can_jit_for(8, 9));
  DeviceInfo ampere;
  ampere.name = "A100";
  ampere.cc_major = 8;
  ampere.cc_minor = 0;
  Status st = check_device_supported(ampere);
  EXPECT_EQ(st.code(), ErrorCode::kUnsupported);
  EXPECT_NE(st.message().find("sm_80"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find(build_cuda_targets()), std::string::npos) << st.message();
  DeviceInfo hopper = ampere;
  hopper.cc_major = 9;
  EXPECT_TRUE(check_device_supported(hopper).ok());
  // Each seed GPU runs the build exactly when its SASS or a PTX at or below it is there.
  for (auto [major, minor] : {std::pair{10, 0}, std::pair{12, 0}, std::pair{12, 1}, std::pair{10, 3}}) {
    DeviceInfo d = ampere;
    d.cc_major = major;
    d.cc_minor = minor;
    EXPECT_EQ(check_device_supported(d).ok(), build_has_sass_for(major, minor) || build_can_jit_for(major, minor))
        << major << "." << minor;
  }
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

TEST(CudaDeviceBuffer, CountsInTheAllocatorAndReleasesOnDestructionAndGrowth) {
  if (!query_device(0).ok()) GTEST_SKIP() << query_device(0).status().message();
  auto a = std::make_shared<CachingAllocator>();
  {
    Result<DeviceBuffer> b = DeviceBuffer::allocate(a, 3000);
    ASSERT_TRUE(b.ok()) << b.status().to_string();
    EXPECT_EQ(b->size(), 3000u);
    EXPECT_EQ(a->stats().current_bytes, CachingAllocator::bucket_bytes(3000));
    DeviceBuffer moved = std::move(*b);  // ownership moves; one release
    EXPECT_TRUE(b->empty());
    ASSERT_TRUE(moved.reserve(a, 1000).ok());  // large enough: kept
    EXPECT_EQ(moved.size(), 3000u);
    ASSERT_TRUE(moved.reserve(a, size_t{3} << 20).ok());  // grown: the old block goes back to the cache
    EXPECT_EQ(moved.size(), size_t{3} << 20);
    EXPECT_EQ(a->stats().current_bytes, CachingAllocator::bucket_bytes(size_t{3} << 20));
    EXPECT_EQ(a->stats().cached_bytes, CachingAllocator::bucket_bytes(3000));
    // reserve releases the small block before taking the large one.
    EXPECT_EQ(a->stats().peak_bytes, CachingAllocator::bucket_bytes(size_t{3} << 20));
  }
  EXPECT_EQ(a->stats().current_bytes, 0u);
  EXPECT_EQ(a->stats().allocations, 2u);
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
