// GPU architecture facts in one place (CONVENTIONS.md "Arch"): which compute capabilities Vortex knows,
// what each offers, and which one this build carries kernels for. Host and device code share it.
// The per-arch POLICY TABLE of optimization switches lives in device.h (it needs evidence paths).
// Tested in tests/cuda/device_test.cpp (classification of capabilities, build arch reported).
#pragma once

#include <string>

namespace vortex {

enum class GpuArch { kSm90, kSm100, kSm120, kSm121, kUnknown };

struct ArchFacts {
  GpuArch arch = GpuArch::kUnknown;
  const char* name = "unknown";   // "sm90"
  bool has_wgmma = false;         // Hopper warpgroup MMA (sm_90a)
  bool has_tcgen05 = false;       // Blackwell datacenter tensor cores
  bool has_fp8_mma = false;
  bool has_nvfp4_mma = false;     // native E2M1 block-scaled MMA
  int max_smem_per_block_optin = 0;  // bytes, from the architecture (device props give the exact value)
};

constexpr ArchFacts arch_facts(int major, int minor) {
  if (major == 9 && minor == 0) return {GpuArch::kSm90, "sm90", true, false, true, false, 227 * 1024};
  if (major == 10 && minor == 0) return {GpuArch::kSm100, "sm100", false, true, true, true, 227 * 1024};
  if (major == 12 && minor == 0) return {GpuArch::kSm120, "sm120", false, false, true, true, 99 * 1024};
  if (major == 12 && minor == 1) return {GpuArch::kSm121, "sm121", false, false, true, true, 99 * 1024};
  return {};
}

// The compute capability whose kernels this build contains (CMAKE_CUDA_ARCHITECTURES = 90a).
constexpr int kBuiltSmMajor = 9;
constexpr int kBuiltSmMinor = 0;
constexpr const char* kBuiltArchName = "sm_90a";

}  // namespace vortex
