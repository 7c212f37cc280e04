// The CUDA policy table and the per-op selectors; see policy.h. Tested in tests/cuda/device_test.cpp.
#include "cuda/policy.h"

#include <cstdlib>
#include <cstring>

namespace vortex {

// ---- the table ---------------------------------------------------------------------------------
const std::vector<ArchPolicy>& policy_table() {
  // Fusion defaults stay eager until a gate (docs/numerics.md "Levels") and a benchmark on that architecture produce
  // evidence; attention and precision stay on the BF16 program everywhere (sage2 / fp8 / nvfp4 are E2, opt-in);
  // which kernel runs the BF16 attention (cuDNN SDPA or the owned sm_90a kernel) follows the same rule.
  static const std::vector<ArchPolicy> kTable = {
      // sm90 (H100/H200): gate PASS (blocks 0/24/49, 1-, 2- and 12-step identical), block-24 A/B 0.9966 (fused
      // faster); fused NVFP4 producers: gate PASS (gate.jsonl row 3), bench ab p50 1.0006 (speed-neutral, identical);
      // the BF16 program's attention through the owned kernel: block-24 A/B vs cuDNN SDPA p50 0.929
      // (2026-12-01-h200-attention-lora-graphs/bench-ab.jsonl), same FP64 error as cuDNN (bf16_attention_test).
      {GpuArch::kSm90, true, true, true, AttentionKind::kBf16Owned, Precision::kBf16, Nvfp4Fc2::kW4A4,
       Sage2Kernel::kWgmma, true, Nvfp4GemmPath::kEmulatedBf16,
       "benchmarks/2026-11-29-h200-gate.jsonl, benchmarks/2026-11-29-h200-bench-ab.jsonl, "
       "benchmarks/2026-12-01-h200-attention-lora-graphs/bench-ab.jsonl",
       "sage2 runs the wgmma mainloop (bench/sage2_bench.cpp: both mainloops, cuDNN in the same run); NVFP4 through "
       "the exact BF16 emulation (no FP4 tensor cores)"},
      // sm100 (B200): vendor kernels only until a gate runs there.
      {GpuArch::kSm100, false, false, false, AttentionKind::kSdpa, Precision::kBf16, Nvfp4Fc2::kW4A4,
       Sage2Kernel::kNone, true, Nvfp4GemmPath::kNativeFp4, "",
       "cuDNN SDPA, cuBLASLt FP8 and FP4; no Sage2 mainloop is offered (none measured on tcgen05 hardware)"},
      // sm120 (RTX PRO 6000) and sm121 (GB10): no wgmma; the mma.sync Sage2 mainloop is the sibling for them.
      {GpuArch::kSm120, false, false, false, AttentionKind::kSdpa, Precision::kBf16, Nvfp4Fc2::kW4A4,
       Sage2Kernel::kMmaSync, true, Nvfp4GemmPath::kNativeFp4, "",
       "cuDNN SDPA; sage2 opt-in on the mma.sync mainloop; NVFP4 through cuBLASLt FP4. The portable paths run on "
       "the H200 under --policy sm120 (scripts/gpu-check.sh); cuBLASLt FP4 is compiled, not run there"},
      {GpuArch::kSm121, false, false, false, AttentionKind::kSdpa, Precision::kBf16, Nvfp4Fc2::kW4A4,
       Sage2Kernel::kMmaSync, true, Nvfp4GemmPath::kNativeFp4, "", "as sm120"},
  };
  return kTable;
}

const ArchPolicy& arch_policy(GpuArch arch) {
  for (const ArchPolicy& p : policy_table())
    if (p.arch == arch) return p;
  return policy_table().front();
}

ExecOptions policy_exec_options(GpuArch arch) {
  const ArchPolicy& p = arch_policy(arch);
  ExecOptions o;
  o.fused_norm_modulate = p.fused_norm_modulate;
  o.fused_gate_add = p.fused_gate_add;
  o.fused_nvfp4_producers = p.fused_nvfp4_producers;
  o.attention = p.attention;
  o.precision = p.precision;
  o.nvfp4_fc2 = p.nvfp4_fc2;
  o.debug_sync = debug_sync_from_env();
  return o;
}

bool debug_sync_from_env() {
  const char* v = std::getenv("VORTEX_DEBUG_SYNC");
  return v != nullptr && std::strcmp(v, "") != 0 && std::strcmp(v, "0") != 0;
}

DevicePolicy make_device_policy(const std::string& device_name, int cc_major, int cc_minor, GpuArch forced) {
  DevicePolicy d;
  d.device_name = device_name;
  d.cc_major = cc_major;
  d.cc_minor = cc_minor;
  d.device_arch = arch_facts(cc_major, cc_minor).arch;
  GpuArch own = d.device_arch;
  if (own == GpuArch::kUnknown)
    own = cc_major == 10 ? GpuArch::kSm100 : cc_major >= 12 ? GpuArch::kSm120 : GpuArch::kSm90;
  d.forced = forced != GpuArch::kUnknown && forced != d.device_arch;
  d.policy_arch = forced != GpuArch::kUnknown ? forced : own;
  return d;
}

Result<GpuArch> policy_from_env() {
  const char* v = std::getenv("VORTEX_POLICY");
  if (v == nullptr || *v == '\0') return GpuArch::kUnknown;
  Result<GpuArch> a = parse_gpu_arch(v);
  if (!a.ok()) return a.status().with_context("VORTEX_POLICY");
  return a;
}

// ---- selectors ---------------------------------------------------------------------------------
namespace {
std::string policy_label(const DevicePolicy& d) {
  std::string s = std::string(gpu_arch_name(d.policy_arch)) + " policy";
  if (d.forced)
    s += " (forced on " + d.device_name + ", sm_" + std::to_string(d.cc_major) + std::to_string(d.cc_minor) + ")";
  return s;
}
}  // namespace

const char* attention_kernel_name(AttentionKernel k) {
  switch (k) {
    case AttentionKernel::kCudnnSdpa:
      return "cudnn_sdpa";
    case AttentionKernel::kSage2Wgmma:
      return "sage2_wgmma";
    case AttentionKernel::kSage2MmaSync:
      return "sage2_mma_sync";
    case AttentionKernel::kBf16Wgmma:
      return "bf16_wgmma";
  }
  return "?";
}

Result<AttentionKernel> select_attention(const DevicePolicy& device, const ExecOptions& options,
                                         const AttentionShape& shape) {
  if (shape.heads <= 0 || shape.head_dim <= 0 || shape.seq < 0)
    return invalid_argument(
        "attention: heads and head_dim must be positive and seq >= 0, got heads=" + std::to_string(shape.heads) +
        " head_dim=" + std::to_string(shape.head_dim) + " seq=" + std::to_string(shape.seq));
  if (options.attention == AttentionKind::kSdpa) return AttentionKernel::kCudnnSdpa;
  if (options.attention == AttentionKind::kBf16Owned) {
    // The owned BF16 kernel is sm_90a code (wgmma, TMA) for head_dim 128, 72 and 64: an sm_90 device and a build
    // with 90a. Elsewhere the same BF16 program runs through cuDNN SDPA (both E1 realizations of ref::attention).
    if ((shape.head_dim != 128 && shape.head_dim != 72 && shape.head_dim != 64) ||
        device.device_arch != GpuArch::kSm90 || !build_has_sm90_kernels())
      return AttentionKernel::kCudnnSdpa;
    return AttentionKernel::kBf16Wgmma;
  }
  // kSage2
  if (shape.head_dim != 128)
    return unsupported("attention sage2: head_dim " + std::to_string(shape.head_dim) +
                       " (the Sage2 kernels are written for 128); use --attention sdpa");
  switch (arch_policy(device.policy_arch).sage2) {
    case Sage2Kernel::kWgmma:
      // wgmma is sm_90a code: only on an sm_90 device, and only when the build carries it.
      if (device.device_arch != GpuArch::kSm90 || !build_has_sm90_kernels())
        return unsupported("attention sage2 under the " + policy_label(device) +
                           ": the wgmma mainloop needs an sm_90 device and a build with 90a in VORTEX_CUDA_ARCHS");
      return AttentionKernel::kSage2Wgmma;
    case Sage2Kernel::kMmaSync:
      return AttentionKernel::kSage2MmaSync;
    case Sage2Kernel::kNone:
      break;
  }
  return unsupported("attention sage2 is not offered under the " + policy_label(device) +
                     " (src/cuda/policy.cpp); use --attention sdpa");
}

Result<GemmPath> select_gemm(const DevicePolicy& device, Precision precision) {
  switch (precision) {
    case Precision::kBf16:
    case Precision::kNvfp4WeightOnly:
      return GemmPath::kCublasLtBf16;
    case Precision::kFp8:
      if (!arch_policy(device.policy_arch).fp8_gemm)
        return unsupported("precision fp8 is not offered under the " + policy_label(device));
      return GemmPath::kCublasLtFp8;
    case Precision::kNvfp4:
      return invalid_argument("precision nvfp4 GEMMs are chosen by select_nvfp4 (the NVFP4 weights' own path)");
  }
  return internal_error("select_gemm: unknown precision");
}

Result<Nvfp4GemmPath> select_nvfp4(const DevicePolicy& device) {
  const Nvfp4GemmPath path = arch_policy(device.policy_arch).nvfp4_gemm;
  if (path == Nvfp4GemmPath::kNativeFp4) {
    if (!nvfp4_native_compiled())
      return unsupported("precision nvfp4 under the " + policy_label(device) +
                         " runs cuBLASLt FP4, which needs CUDA >= 12.8 at build time");
    if (select_nvfp4_gemm_path(device.cc_major, device.cc_minor) != Nvfp4GemmPath::kNativeFp4)
      return unsupported("precision nvfp4 under the " + policy_label(device) +
                         " runs cuBLASLt FP4 (Blackwell tensor cores), which this device cannot execute; it is "
                         "compiled, not run here (use the device's own policy for the exact BF16 emulation)");
  }
  return path;
}

FusionChoice select_fusion(const DevicePolicy& device, const ExecOptions& options) {
  (void)device;  // every fusion kernel is portable CUDA (E0 vs its eager program on every architecture)
  FusionChoice f;
  f.fused_norm_modulate = options.fused_norm_modulate;
  f.fused_gate_add = options.fused_gate_add;
  f.fused_nvfp4_producers = options.fused_nvfp4_producers && options.precision == Precision::kNvfp4;
  return f;
}

}  // namespace vortex
