// NVFP4 activation producers on CUDA (Vortex issue "NVFP4" items 1-2): global amax -> g, E2M1 + tiled
// E4M3 packing, and the two fused producers that recompute their BF16 input instead of reading it
// (modulation -> NVFP4 for QKV/FC1, SwiGLU -> NVFP4 for FC2). Allocation-free: every buffer is the
// caller's. Bytes are E0 against src/ref/nvfp4_quantize.h (approximate instructions pinned with inline
// PTX, nvfp4_encode.cuh). Entry points and validation in nvfp4_quantize.cpp, kernels in nvfp4_quantize_kernels.cu.
// Tested in tests/cuda/nvfp4_quantize_test.cu; timed by bench/nvfp4_bench.cpp.
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

// Which passes run (the bench times each alone; production runs both: the default).
struct Nvfp4RunOptions {
  bool amax_pass = true;  // dynamic g: zero the workspace and reduce amax into it
  bool pack_pass = true;  // the packing kernel (dynamic g: reads the workspace as the amax pass left it)
  // Timing one pass alone (bench): g.g is final only when both passes run (the pack writes g).
};

// (a)+(b): x [rows, cols] bf16 (row stride ld elements) -> NVFP4.
Status nvfp4_quantize(const uint16_t* x, int64_t rows, int64_t cols, int64_t ld, const Nvfp4GlobalScale& g,
                      const Nvfp4Buffers& out, cudaStream_t stream, const Nvfp4RunOptions& options = {});

// (c) Modulation producer: quantizes R(R(n * R(1 + scale)) + shift) (the modulate kernel's values,
// scale/shift = table[map[row], chunk * cols : +cols]) without writing them: one pass for amax, one to pack.
// n [rows, cols] bf16 (the RMSNorm output), table [table_rows, C * cols] bf16 (row stride table_ld).
Status nvfp4_quantize_modulated(const uint16_t* n, int64_t rows, int64_t cols, int64_t ld, const uint16_t* table,
                                int64_t table_ld, int shift_chunk, int scale_chunk, const DeviceRowMap& map,
                                const Nvfp4GlobalScale& g, const Nvfp4Buffers& out, cudaStream_t stream,
                                const Nvfp4RunOptions& options = {});

// (d) SwiGLU -> FC2 producer: quantizes m = R(R(silu(u[:, :F])) * u[:, F:]) (the swiglu kernel's values,
// SiLU from the same host-built table) without writing m. u [rows, 2F] bf16 (row stride ld), silu_table
// device [65536] from silu_bf16_table_host(). The NVFP4 tensor is [rows, F].
Status nvfp4_quantize_swiglu(const uint16_t* u, int64_t rows, int64_t f, int64_t ld, const uint16_t* silu_table,
                             const Nvfp4GlobalScale& g, const Nvfp4Buffers& out, cudaStream_t stream,
                             const Nvfp4RunOptions& options = {});

// ---- the backend's tensors -------------------------------------------------------------------------------
// The [rows, cols] of the NVFP4 tensor a producer writes from these inputs, or kInvalidArgument (checked before
// the backend reserves the activation slot; the raw entry points above check the rest).
struct Nvfp4ProducerShape {
  int64_t rows = 0, cols = 0;
};
// x: device bf16 [M, K], unit column stride -> [M, K].
Result<Nvfp4ProducerShape> nvfp4_quantize_input_shape(const Tensor& x);
// n: device bf16 [S, D], unit column stride; table: device bf16 [rows, C * D], dense rows, holding chunks
// shift_chunk and scale_chunk -> [S, D].
Result<Nvfp4ProducerShape> nvfp4_modulated_input_shape(const Tensor& n, const Tensor& table, int shift_chunk,
                                                       int scale_chunk);
// u: device bf16 [S, 2F], unit column stride -> [S, F].
Result<Nvfp4ProducerShape> nvfp4_swiglu_input_shape(const Tensor& u);

}  // namespace vortex::cuda_ops
