// NVFP4 activation producers on CUDA (Vortex issue "NVFP4" items 1-2): global amax -> g, E2M1 + tiled
// E4M3 packing, and the two fused producers that recompute their BF16 input instead of reading it
// (modulation -> NVFP4 for QKV/FC1, SwiGLU -> NVFP4 for FC2). Allocation-free: every buffer is the
// caller's. Bytes are E0 against src/ref/nvfp4_quantize.h (approximate instructions pinned with inline
// PTX). Tested in tests/cuda/nvfp4_quantize_test.cu; timed by bench/nvfp4_bench.cpp.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/ops/ops.h"
#include "ref/nvfp4_quantize.h"
#include "vortex/status.h"

namespace vortex::cuda_ops {

// Caller-owned outputs, sized by ref::nvfp4_layout(rows, cols): data [data_bytes()] and scales
// [scale_bytes()], both 16-byte aligned. Every byte is written (padding rows/columns included).
struct Nvfp4Buffers {
  uint8_t* data = nullptr;
  uint8_t* scales = nullptr;
};

// The global decode scale g (one fp32 in device memory).
//   dynamic = true : the producer computes amax over its (recomputed) input into *amax_workspace (one u32)
//                    and writes g = float(bf16_RNE(fp32(amax) * RN(1/2688))) to *g (§1.2; NaN propagates).
//   dynamic = false: *g already holds the checkpoint's static input_scale; nothing else is read.
struct Nvfp4GlobalScale {
  bool dynamic = true;
  float* g = nullptr;                  // device fp32 [1]
  uint32_t* amax_workspace = nullptr;  // device u32 [1], dynamic only
};

// (a)+(b): x [rows, cols] bf16 (row stride ld elements) -> NVFP4.
Status nvfp4_quantize(const uint16_t* x, int64_t rows, int64_t cols, int64_t ld, const Nvfp4GlobalScale& g,
                      const Nvfp4Buffers& out, cudaStream_t stream);

// (c) Modulation producer: quantizes R(R(n * R(1 + scale)) + shift) (the modulate kernel's values,
// scale/shift = table[map[row], chunk * cols : +cols]) without writing them: one pass for amax, one to pack.
// n [rows, cols] bf16 (the RMSNorm output), table [table_rows, C * cols] bf16 (row stride table_ld).
Status nvfp4_quantize_modulated(const uint16_t* n, int64_t rows, int64_t cols, int64_t ld, const uint16_t* table,
                                int64_t table_ld, int shift_chunk, int scale_chunk, const DeviceRowMap& map,
                                const Nvfp4GlobalScale& g, const Nvfp4Buffers& out, cudaStream_t stream);

// (d) SwiGLU -> FC2 producer: quantizes m = R(R(silu(u[:, :F])) * u[:, F:]) (the swiglu kernel's values,
// SiLU from the same host-built table) without writing m. u [rows, 2F] bf16 (row stride ld), silu_table
// device [65536] from silu_bf16_table_host(). The NVFP4 tensor is [rows, F].
Status nvfp4_quantize_swiglu(const uint16_t* u, int64_t rows, int64_t f, int64_t ld, const uint16_t* silu_table,
                             const Nvfp4GlobalScale& g, const Nvfp4Buffers& out, cudaStream_t stream);

// ---- main-path kernel variants (benchmarks and tests) -----------------------------------------------
// The main path (cols % 16 == 0, 16-byte aligned rows) has kernel variants that write the same bytes; the entry
// points above run the default one. Variant i < nvfp4_variant_count() is named nvfp4_variant_name(i):
// "warp_chunks" (0, the measured baseline), "fma_rev" (1; ~1.6x faster on H200) and
// "fma_rev_smem" (2, the default): fma_rev with the modulated producer's AdaLN table slice staged in shared memory
// (plain / SwiGLU run fma_rev's kernels under that name; modulate 0.276 vs 0.340 ms on H200).
struct Nvfp4RunOptions {
  int variant = -1;       // -1: nvfp4_default_variant(); ignored by the element-wise path (ragged / unaligned K)
  bool amax_pass = true;  // dynamic g: zero the workspace and reduce amax into it
  bool pack_pass = true;  // the packing kernel (dynamic g: reads the workspace as the amax pass left it)
  // Timing one pass alone (bench): g.g is final only when both passes run (some variants write g in the pack).
};
int nvfp4_variant_count();
const char* nvfp4_variant_name(int variant);  // "?" outside [0, count)
int nvfp4_default_variant();
Status nvfp4_quantize(const uint16_t* x, int64_t rows, int64_t cols, int64_t ld, const Nvfp4GlobalScale& g,
                      const Nvfp4Buffers& out, cudaStream_t stream, const Nvfp4RunOptions& options);
Status nvfp4_quantize_modulated(const uint16_t* n, int64_t rows, int64_t cols, int64_t ld, const uint16_t* table,
                                int64_t table_ld, int shift_chunk, int scale_chunk, const DeviceRowMap& map,
                                const Nvfp4GlobalScale& g, const Nvfp4Buffers& out, cudaStream_t stream,
                                const Nvfp4RunOptions& options);
Status nvfp4_quantize_swiglu(const uint16_t* u, int64_t rows, int64_t f, int64_t ld, const uint16_t* silu_table,
                             const Nvfp4GlobalScale& g, const Nvfp4Buffers& out, cudaStream_t stream,
                             const Nvfp4RunOptions& options);

// ---- instruction probes (tests and tools/approx_probe.cu) ---------------------------------------------
// out[m] = bits of rcp.approx.ftz.f32(1 + m * 2^-23), m < 2^23.
Status nvfp4_probe_rcp_binade(uint32_t* out, cudaStream_t stream);
// Exhaustive check of ref::rcp_approx_ftz_model_bits over all 2^32 inputs against the instruction.
// counters (device u64 [2]): [0] += mismatches (NaN == NaN), [1] = one mismatching input + 1 (0: none).
Status nvfp4_check_rcp_model(const uint32_t* binade, unsigned long long* counters, cudaStream_t stream);
// div.approx.ftz.f32(a, b) vs mul_ftz model(a, rcp model(b)) on `pairs` Philox pairs (seed) plus edge
// patterns; mul.rn.ftz.f32 vs the ref::mul_ftz model (flush inputs; tiny after 24-bit rounding -> signed zero)
// on pairs whose products straddle FLT_MIN; the device E2M1 encoders (comparison table and arithmetic on all
// 2^32 inputs, the FP32-pipe encoder of "fma_rev" on every non-NaN |v| < 7: its domain) vs cuda_fp4.h's
// __nv_cvt_float_to_fp4, both device E4M3 scale decoders on all 256 codes, and the fast packed-word encoder vs
// the exact one on `pairs` random in-domain chunks (counted with the e2m1 checks; their input field is then
// 2^32 + code or 2^33 + chunk index). counters (device u64 [6]): div mismatches, one div pair index + 1,
// mul mismatches, one mul pair index + 1, e2m1 mismatches, one e2m1 input + 1 (the index/input fields are 0
// when there is no mismatch).
Status nvfp4_check_div_mul_e2m1(const uint32_t* binade, uint64_t seed, uint64_t pairs, unsigned long long* counters,
                                cudaStream_t stream);

}  // namespace vortex::cuda_ops
