// The elementwise steps of CudaBackend::linear_lora (src/cuda/lora_linear.cpp), the run-time LoRA program of
// ref::linear_lora (docs/lora.md "Run-time path"): the scale-and-round of the down-projection, the FP32
// accumulator add for a part whose rows cuBLASLt cannot accumulate in place, and the one rounding of the output.
// Raw device pointers (the validating entry point is CudaBackend::linear_lora). Tested through
// tests/cuda/lora_linear_test.cpp.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "vortex/status.h"

namespace vortex::cuda_ops {

// t16[i, q] = R(scale * t32[i, q]): FP64 multiply, one rounding to BF16. t32 [m, r] f32 at row stride ld_t32, t16
// [m, r] bf16 at row stride ld_t16 (the t columns of the concatenated activation, or its own buffer).
Status lora_scale_round(const float* t32, int64_t ld_t32, int64_t m, int64_t r, double scale, uint16_t* t16,
                        int64_t ld_t16, cudaStream_t stream);
// acc[i, j] += u[i, j] in FP32 for [m, cols]: acc at row stride ld_acc, u dense.
Status lora_add_columns(float* acc, int64_t ld_acc, const float* u, int64_t m, int64_t cols, cudaStream_t stream);
// out[i, j] = R(acc[i, j] + bias[j]) (the add in FP64, one rounding; bias may be null): acc dense [m, n] f32,
// out [m, n] bf16 at row stride ldo.
Status lora_round_output(const float* acc, int64_t m, int64_t n, const uint16_t* bias, uint16_t* out, int64_t ldo,
                         cudaStream_t stream);

}  // namespace vortex::cuda_ops
