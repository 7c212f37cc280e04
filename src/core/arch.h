// GPU architecture facts in one place: which compute capabilities Vortex knows, what
// each offers, and which ones this build carries kernels for (the CMake-configured vortex/cuda_targets.h:
// SASS per VORTEX_CUDA_ARCHS plus the PTX of VORTEX_CUDA_PTX). No CUDA headers: gemm, model and engine
// include it. The per-arch policy table (which kernel each op runs) is src/cuda/policy.h.
// Tested in tests/cuda/device_test.cpp (classification, build targets, run-ability).
#pragma once

#include <string>
#include <string_view>

#include "vortex/status.h"

namespace vortex {

enum class GpuArch { kSm90, kSm100, kSm120, kSm121, kUnknown };

struct ArchFacts {
  GpuArch arch = GpuArch::kUnknown;
  const char* name = "unknown";  // "sm90"
  bool has_wgmma = false;        // Hopper warpgroup MMA (sm_90a)
  bool has_tcgen05 = false;      // Blackwell datacenter tensor cores
  bool has_fp8_mma = false;
  bool has_nvfp4_mma = false;        // native E2M1 block-scaled MMA
  int max_smem_per_block_optin = 0;  // bytes, from the architecture (device props give the exact value)
};

constexpr ArchFacts arch_facts(int major, int minor) {
  if (major == 9 && minor == 0) return {GpuArch::kSm90, "sm90", true, false, true, false, 227 * 1024};
  if (major == 10 && minor == 0) return {GpuArch::kSm100, "sm100", false, true, true, true, 227 * 1024};
  if (major == 12 && minor == 0) return {GpuArch::kSm120, "sm120", false, false, true, true, 99 * 1024};
  if (major == 12 && minor == 1) return {GpuArch::kSm121, "sm121", false, false, true, true, 99 * 1024};
  return {};
}

// The facts of a known architecture (kUnknown: all false).
ArchFacts arch_facts(GpuArch arch);
// "sm90" | "sm100" | "sm120" | "sm121" -> the arch; kInvalidArgument otherwise (the --policy / VORTEX_POLICY edge).
Result<GpuArch> parse_gpu_arch(std::string_view name);
const char* gpu_arch_name(GpuArch arch);  // "sm90", ..., "unknown"

// ---- what this build contains (from CMake: vortex/cuda_targets.h) ----
// True when the build has SASS for exactly this compute capability (an arch-specific "a" target such as
// sm_100a runs only on that capability).
bool build_has_sass_for(int cc_major, int cc_minor);
// True when the embedded PTX can be JIT-compiled by the driver for this capability (PTX of compute_X runs on
// every capability >= X). Kernels that need arch-specific instructions (wgmma) are never in the PTX.
bool build_can_jit_for(int cc_major, int cc_minor);
// True when the sm_90a-only kernels (wgmma Sage2 mainloop) are part of the build.
bool build_has_sm90_kernels();
// "sm_90a, sm_100a, sm_120a, sm_121a SASS + compute_90 PTX"; "no CUDA kernels" in a CPU-only build.
const char* build_cuda_targets();
// OK when a device of this capability runs this build (exact SASS, or PTX it can JIT); otherwise
// kUnsupported naming the device, the build's targets and the fix.
Status check_build_runs_on(const std::string& device_name, int cc_major, int cc_minor);

}  // namespace vortex
