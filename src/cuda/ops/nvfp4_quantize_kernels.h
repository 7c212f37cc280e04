// Launchers of the NVFP4 producer kernels (nvfp4_quantize_kernels.cu), one per source of the BF16 input, for
// arguments the entry points in nvfp4_quantize.cpp have validated. Each takes the main path (cols % 16 == 0,
// 16-byte aligned rows) when the shape allows it and the general path otherwise; the bytes are the same
// (E0 vs src/ref/nvfp4_quantize.cpp, tests/cuda/nvfp4_quantize_test.cu). Internal to component `cuda`.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/ops/nvfp4_quantize.h"
#include "vortex/status.h"

namespace vortex::cuda_ops {

Status launch_nvfp4_plain(const uint16_t* x, int64_t rows, int64_t cols, int64_t ld, const Nvfp4GlobalScale& g,
                          const Nvfp4Buffers& out, const Nvfp4RunOptions& opt, cudaStream_t stream);
Status launch_nvfp4_modulated(const uint16_t* n, int64_t rows, int64_t cols, int64_t ld, const uint16_t* table,
                              int64_t table_ld, int shift_chunk, int scale_chunk, const int32_t* row_map,
                              const Nvfp4GlobalScale& g, const Nvfp4Buffers& out, const Nvfp4RunOptions& opt,
                              cudaStream_t stream);
Status launch_nvfp4_swiglu(const uint16_t* u, int64_t rows, int64_t f, int64_t ld, const uint16_t* silu_table,
                           const Nvfp4GlobalScale& g, const Nvfp4Buffers& out, const Nvfp4RunOptions& opt,
                           cudaStream_t stream);

}  // namespace vortex::cuda_ops
