// The per-architecture policy of the CUDA backend: one table keyed by architecture (which kernel each op
// runs by default, what may be switched on, and the evidence file behind every non-eager default), and one
// selector per op that answers both "which kernel" and "supported?" for a device, the run's ExecOptions and
// the op's shape. The backend calls the selectors; nothing else picks kernels.
//
// Forced policy (`--policy sm120`, VORTEX_POLICY=sm120): the table row of another architecture runs on this
// device, so the portable paths of that architecture (cuDNN SDPA, the mma.sync Sage2 mainloop, the non-FP4
// GEMMs) are exercised on an H200. A kernel the device cannot execute (cuBLASLt FP4 on sm_90) is refused by
// its selector with kUnsupported, never launched. Tested in tests/cuda/device_test.cpp (table, selectors,
// forced policy; no GPU needed).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backend/exec_options.h"
#include "core/arch.h"
#include "gemm/nvfp4_gemm.h"
#include "vortex/status.h"

namespace vortex {

// The device the backend runs on and the architecture whose policy row it follows.
struct DevicePolicy {
  std::string device_name;  // "NVIDIA H200"
  int cc_major = 0, cc_minor = 0;
  GpuArch device_arch = GpuArch::kUnknown;  // arch_facts(cc).arch
  GpuArch policy_arch = GpuArch::kUnknown;  // == device_arch unless forced
  bool forced = false;                      // --policy / VORTEX_POLICY named another architecture
};
// The policy of a device: its own row, or `forced` (kUnknown = not forced). Unknown devices (sm_103, a future
// GPU running the PTX) follow the nearest known row below them (sm_100 for 10.x, sm_120 for 12.x, sm_90 else).
DevicePolicy make_device_policy(const std::string& device_name, int cc_major, int cc_minor,
                                GpuArch forced = GpuArch::kUnknown);
// VORTEX_POLICY from the environment ("" / unset: kUnknown = not forced); kInvalidArgument for a bad name.
Result<GpuArch> policy_from_env();

// ---- the table ---------------------------------------------------------------------------------
enum class Sage2Kernel : uint8_t { kNone, kWgmma, kMmaSync };  // which Sage2 mainloop an arch offers
struct ArchPolicy {
  GpuArch arch;
  // Defaults (the ExecOptions a run starts from).
  bool fused_norm_modulate;
  bool fused_gate_add;
  bool fused_nvfp4_producers;
  AttentionKind attention;
  Precision precision;
  Nvfp4Fc2 nvfp4_fc2;
  // What the arch offers when switched on.
  Sage2Kernel sage2;         // attention = sage2 (opt-in everywhere: E2)
  bool fp8_gemm;             // precision fp8 through cuBLASLt FP8
  Nvfp4GemmPath nvfp4_gemm;  // precision nvfp4: cuBLASLt FP4 or the exact BF16 emulation
  const char* evidence;      // comma-separated files under benchmarks/ behind the non-eager defaults ("" = none)
  const char* note;
};
const std::vector<ArchPolicy>& policy_table();
const ArchPolicy& arch_policy(GpuArch arch);  // kUnknown: the sm90 row
// ExecOptions with every switch at the policy default (debug_sync from VORTEX_DEBUG_SYNC).
ExecOptions policy_exec_options(GpuArch arch);

// VORTEX_DEBUG_SYNC=1 in the environment: synchronize and check after every op.
bool debug_sync_from_env();

// ---- selectors ---------------------------------------------------------------------------------
enum class AttentionKernel : uint8_t { kCudnnSdpa, kSage2Wgmma, kSage2MmaSync, kBf16Wgmma };
// "cudnn_sdpa" | "sage2_wgmma" | "sage2_mma_sync" | "bf16_wgmma"
const char* attention_kernel_name(AttentionKernel k);
struct AttentionShape {
  int64_t seq = 0;
  int heads = 0;
  int head_dim = 0;
};
Result<AttentionKernel> select_attention(const DevicePolicy& device, const ExecOptions& options,
                                         const AttentionShape& shape);

// GEMM precision path for linear layers of BF16 / FP8 weights.
enum class GemmPath : uint8_t { kCublasLtBf16, kCublasLtFp8 };
Result<GemmPath> select_gemm(const DevicePolicy& device, Precision precision);
// NVFP4 (W4A4) GEMM path: cuBLASLt FP4 (Blackwell) or the exact BF16 emulation (Hopper).
Result<Nvfp4GemmPath> select_nvfp4(const DevicePolicy& device);

// Norm / gate fusions: the kernels rms_norm_modulate and gate_add run (E0 either way; always supported).
struct FusionChoice {
  bool fused_norm_modulate = false;
  bool fused_gate_add = false;
  bool fused_nvfp4_producers = false;
};
FusionChoice select_fusion(const DevicePolicy& device, const ExecOptions& options);

}  // namespace vortex
