// NVFP4 GEMMs (W4A4, comfy-kitchen numerics): out = R(g_x * g_w * sum_k x'_k w'_k + bias), where x' and w'
// are the dequantized block values e2m1 * e4m3 WITHOUT their global scales.
// Two paths: Hopper exact emulation (each operand dequantized exactly to BF16, then the BF16 cuBLASLt GEMM
// with alpha = g_x * g_w read from device memory) and Blackwell native FP4 (cuBLASLt CUDA_R_4F_E2M1 with
// VEC16_UE4M3 scales; compiled, not run here). Tested in tests/gemm/nvfp4_gemm_test.cpp (E1 vs FP64 dot
// products of the quantized operands; dequant kernel E0 vs ref::nvfp4_dequantized_value; path selection).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>

#include "backend/linear_weight.h"
#include "gemm/gemm.h"
#include "vortex/status.h"

namespace vortex {

// One NVFP4 operand in device memory, laid out as ref::nvfp4_layout(rows, cols): data uint8
// [roundup(rows,16), roundup(cols,16)/2] (even element in the high nibble), scales E4M3 in 128x4 tiles
// [roundup(rows_pad16,128), roundup(blocks,4)], global decode scale g (one f32 on the device).
struct Nvfp4Operand {
  const uint8_t* data = nullptr;
  const uint8_t* scales = nullptr;
  const float* global_scale = nullptr;
  int64_t rows = 0;  // logical rows (M tokens or N output channels)
  int64_t cols = 0;  // logical K
};

enum class Nvfp4GemmPath : uint8_t {
  kEmulatedBf16,  // any GPU with BF16 cuBLASLt: exact operand dequantization + BF16 GEMM (E1 vs native)
  kNativeFp4,     // cuBLASLt block-scaled FP4: sm_100 / sm_103 / sm_120 / sm_121 only
};
const char* nvfp4_gemm_path_name(Nvfp4GemmPath path);

// True when this build's CUDA headers carry the FP4 cuBLASLt enums (CUDA >= 12.8).
bool nvfp4_native_compiled();
// The path for a device of compute capability (major, minor): native FP4 when the build has it and the
// architecture has FP4 tensor cores (10.0, 10.3, 12.0, 12.1), else the BF16 emulation (sm_90: always).
Nvfp4GemmPath select_nvfp4_gemm_path(int cc_major, int cc_minor);

// Exact dequantization without the global scale: out[r, c] = bf16(e2m1 * e4m3) for r < rows and
// c < roundup(cols, 16) (padding columns are 0 because the quantizer wrote zero codes there).
// Exactness: an E2M1 value has at most 2 significant bits (0.5, 1, 1.5, 2, 3, 4, 6) and an E4M3 value at
// most 4 (normals 1.mmm, subnormals 0.mmm * 2^-6); their product has at most 2 + 4 = 6 <= 8 significant
// bits (BF16's 7 stored + 1 implicit), and its magnitude lies in [0.5 * 2^-9, 6 * 448] = [2^-10, 2688],
// far inside BF16's normal range [2^-126, 2^128): no rounding, no subnormal, no overflow. Hence
// bf16(e2m1 * e4m3) == e2m1 * e4m3 exactly, and the BF16 GEMM sees the FP4 GEMM's exact operand values.
// out: [rows, ld_out] bf16, ld_out >= roundup(cols, 16), 16-byte aligned rows.
Status nvfp4_dequantize_unscaled_bf16(const Nvfp4Operand& a, uint16_t* out, int64_t ld_out, cudaStream_t stream);
// alpha[0] = fp32(g_a[0] * g_b[0]) (IEEE RN multiply, as torch's tensor_scale_a * tensor_scale_b).
Status nvfp4_alpha(const float* g_a, const float* g_b, float* alpha, cudaStream_t stream);

// Runs NVFP4 GEMMs through a GemmEngine on one stream. Owns its scratch (dequantized operands for the
// emulation, alpha), sized at first use for the shape and grown only for a larger one: the hot path
// allocates nothing once the largest shape has run.
class Nvfp4Gemm {
 public:
  // The path picked by select_nvfp4_gemm_path for the current device.
  static Result<std::unique_ptr<Nvfp4Gemm>> create(GemmEngine& engine);
  // An explicit path; kNativeFp4 on a device without FP4 tensor cores (or a build without the FP4
  // headers) is kUnsupported with the reason. Scratch and alpha come from `memory` (null: cudaMalloc).
  static Result<std::unique_ptr<Nvfp4Gemm>> create(GemmEngine& engine, Nvfp4GemmPath path,
                                                   std::shared_ptr<DeviceMemoryResource> memory = nullptr);
  ~Nvfp4Gemm();
  Nvfp4Gemm(const Nvfp4Gemm&) = delete;
  Nvfp4Gemm& operator=(const Nvfp4Gemm&) = delete;

  Nvfp4GemmPath path() const { return path_; }

  // out[M, N] bf16 (row stride ldd) = R(g_x * g_w * x'[M, K] @ w'[N, K]^T + bias[N]);
  // x.cols == w.cols == K, bias bf16 [N] or nullptr. Pointers from device memory. On the native path a
  // shape cuBLASLt FP4 cannot take (K % 32 != 0, unaligned output rows) runs the emulation instead.
  Status run(const Nvfp4Operand& x, const Nvfp4Operand& w, const void* bias, void* out, int64_t ldd,
             cudaStream_t stream);
  // The same with an NVFP4 LinearWeight on the device (weight u8 [N16, K16/2], weight_scale E4M3 tiled,
  // weight_scale_2 f32 [1]) and an output tensor [M, N] bf16 (row views allowed).
  Status linear(const Nvfp4Operand& x, const LinearWeight& w, const Tensor* bias, Tensor& out, cudaStream_t stream);

 private:
  Nvfp4Gemm(GemmEngine& engine, Nvfp4GemmPath path) : engine_(engine), path_(path) {}
  Result<char*> scratch(size_t bytes);

  GemmEngine& engine_;
  Nvfp4GemmPath path_;
  std::shared_ptr<DeviceMemoryResource> memory_;
  DeviceBuffer scratch_;  // dequantized operands (emulation), grown on demand
  DeviceBuffer alpha_;    // device f32 [1] (own block: stays valid while the scratch grows)
};

// Validates a device NVFP4 LinearWeight (dtypes, padded shapes, global scale) and returns its operand view.
Result<Nvfp4Operand> nvfp4_weight_operand(const LinearWeight& w);

}  // namespace vortex
