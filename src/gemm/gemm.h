// GemmEngine: every linear layer on the GPU goes through cuBLASLt here (BF16 with FP32 accumulation,
// FP32 without TF32 for the FP32 patch projections/heads, FP8 E4M3 per-tensor and Hopper blockwise).
// One cuBLASLt handle, a plan cache per (shape, dtypes, layout), a workspace, and the pinned algorithm
// table written by `vortex gemm-tune` (used only for the exact shapes it was proven on).
// Numerics: out = R(x @ W^T + bias) (docs/numerics.md). Tested in tests/gemm (E1 vs FP64).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string>

#include "backend/linear_weight.h"
#include "core/device_buffer.h"
#include "vortex/status.h"
#include "vortex/tensor.h"

namespace vortex {

// How an FP8 GEMM scales its operands (dequantized value = e4m3 code value * scale).
//  kPerTensor: one FP32 scale per operand (cuBLASLt SCALAR_32F), scale = amax / 448.
//  kBlockwise: activations 1x128 (one scale per row per 128 input channels, cuBLASLt VEC128_32F),
//              weights 128x128 (cuBLASLt BLK128x128_32F) — the DeepSeek-V3 recipe, Hopper only.
enum class Fp8Scaling : uint8_t { kPerTensor, kBlockwise };
const char* fp8_scaling_name(Fp8Scaling scaling);

// Which cuBLASLt program a plan runs (also the key of the pinned table).
//  kNvfp4Emulated: the BF16 program (BF16 A/B/D, FP32 accumulation) with alpha read from DEVICE memory
//                  (CUBLASLT_POINTER_MODE_DEVICE): the Hopper exact W4A4 emulation (gemm/nvfp4_gemm.h).
//  kNvfp4:         Blackwell block-scaled FP4 (CUDA_R_4F_E2M1 A/B, VEC16_UE4M3 block scales, alpha on the
//                  device, BF16 D); compiled with CUDA >= 12.8 headers, runs only on sm_100/103/120/121.
//  kFp8RowScaled:  FP8 E4M3 with cuBLASLt OUTER_VEC_32F scales on both operands: x_scale [M] f32 (one per
//                  token, quantize_fp8_per_row), w_scale [N] f32 (one per output channel; a per-tensor weight
//                  scale broadcast, optionally multiplied by a per-channel gate). Hopper and later.
//  kBf16F32Out:    BF16 A/B, FP32 accumulation and an FP32 D (no rounding to BF16): the run-time LoRA program
//                  (CudaBackend::linear_lora) sums x W^T and t B^T into one FP32 accumulator, `accumulate`
//                  (beta = 1) adding the second GEMM; the bias, when given, is f32.
enum class GemmPrecision : uint8_t {
  kBf16,
  kF32,
  kFp8PerTensor,
  kFp8Blockwise,
  kNvfp4Emulated,
  kNvfp4,
  kFp8RowScaled,
  kBf16F32Out
};
const char* gemm_precision_name(GemmPrecision precision);
Result<GemmPrecision> gemm_precision_from_name(const std::string& name);

// One fully specified cuBLASLt GEMM on raw device pointers (row-major terms):
//   d[M, N] (ldd) = R(scale_a * scale_b * x[M, K] (ldx) @ w[N, K]^T (ldw) + bias[N])
// Pointers must be 16-byte aligned for FP8 and leading dims multiples of 16 bytes.
// kFp8Blockwise: x_scale is [ceil(K/128), M] f32 (token-contiguous per 128-channel group) and M must
// be a multiple of 4; w_scale is [ceil(N/128), roundup(ceil(K/128), 4)] f32. kFp8PerTensor: both are
// one f32 on the device.
struct GemmCall {
  GemmPrecision precision = GemmPrecision::kBf16;
  int64_t m = 0, n = 0, k = 0;
  const void* x = nullptr;
  int64_t ldx = 0;
  const void* w = nullptr;
  int64_t ldw = 0;
  void* d = nullptr;
  int64_t ldd = 0;
  const void* bias = nullptr;  // bf16 for bf16/fp8 outputs, f32 for kF32; nullptr = no bias
  const float* x_scale = nullptr;
  const float* w_scale = nullptr;
  // kNvfp4Emulated / kNvfp4 only: alpha (one f32 in device memory, e.g. g_x * g_w), and for kNvfp4 the
  // E4M3 block scales of x and w in the cuBLAS 128x4-tiled layout (ref::nvfp4_layout). x/w are then
  // packed E2M1 (ld in elements, K a multiple of 32).
  const float* alpha = nullptr;
  const void* x_block_scale = nullptr;
  const void* w_block_scale = nullptr;
  // d = R(d + scale_a * scale_b * x @ w^T (+ bias)): beta = 1 with C = D in place (the gated residual of
  // an H3 block when w_scale carries s_w * gate; kBf16F32Out: d += x @ w^T in FP32, unrounded).
  // Host-pointer-mode plans only (not the NVFP4 ones).
  bool accumulate = false;
  // kBf16 only: d = R(gelu(x @ w^T (+ bias))) with cuBLASLt's GELU epilogue (CUBLASLT_EPILOGUE_GELU[_BIAS], the
  // tanh approximation in FP32, one rounding); not with accumulate.
  bool gelu = false;
};

// A cuBLASLt algorithm configuration as gemm-tune enumerates and pins it (cublasLtMatmulAlgoConfig).
struct GemmAlgoConfig {
  int algo_id = -1;
  int tile_id = 0;
  int stages_id = 0;
  int splitk_num = 1;
  int reduction_scheme = 0;
  int cta_swizzling = 0;
  int custom_option = 0;
  int inner_shape_id = 0;
  int cluster_shape_id = 0;
  std::string describe() const;
};

// Device memory straight from cudaMalloc / cudaFree (not counted by any backend): for engines made outside a
// backend (benchmarks, gemm-tune). A backend passes its caching allocator instead.
std::shared_ptr<DeviceMemoryResource> cuda_malloc_resource();

struct GemmEngineOptions {
  size_t workspace_bytes = size_t{32} << 20;
  // Where the cuBLASLt workspace and the FP8 scratch come from (null: cuda_malloc_resource()).
  std::shared_ptr<DeviceMemoryResource> memory;
  // Pinned algorithm table written by `vortex gemm-tune` (JSON). Empty: $VORTEX_GEMM_TABLE if set,
  // else the built-in table (src/gemm/tables/, compiled in) when use_builtin_table, else none
  // (heuristic top-1 for every shape). An entry cuBLASLt no longer accepts falls back to the heuristic.
  std::string pinned_table_path;
  bool use_builtin_table = true;
  // false: never load a table (gemm-tune measures the heuristic default itself).
  bool load_pinned_table = true;
};

// One engine per stream: plans are shared, but linear()'s FP8 path quantizes into engine-owned scratch.
class GemmEngine {
 public:
  static Result<std::unique_ptr<GemmEngine>> create();
  static Result<std::unique_ptr<GemmEngine>> create(const GemmEngineOptions& options);
  virtual ~GemmEngine() = default;
  // out[M, N] = x[M, K] @ W[N, K]^T (+ bias[N]) on `stream`; x/out row-major with leading-dimension
  // strides allowed (row views of larger buffers). Dispatches on x.dtype() and w.format:
  //   x bf16, w bf16 (kNone)       -> BF16 GEMM, FP32 accumulation, bias (bf16) in the FP32 epilogue
  //   x f32,  w f32  (kNone)       -> FP32 GEMM (CUBLAS_COMPUTE_32F, no TF32), bias f32
  //   x bf16, w f8e4m3 (kFp8Scaled) -> x is quantized to E4M3 on the fly into engine scratch; the
  //       weight_scale shape picks the scaling: one element = per tensor (x per tensor, amax/448, or
  //       the static input_scale when present); [ceil(N/128), roundup(ceil(K/128),4)] = blockwise
  //       (x 1x128). Output bf16.
  //   w nvfp4 (kNvfp4)             -> kUnsupported here: the activation must be quantized first; the
  //       NVFP4 GEMMs are Nvfp4Gemm (gemm/nvfp4_gemm.h), called by CudaBackend::linear.
  virtual Status linear(const Tensor& x, const LinearWeight& w, const Tensor* bias, Tensor& out,
                        cudaStream_t stream) = 0;
  // The raw GEMM (what linear() ends in); uses the pinned algorithm when the table has this exact
  // (precision, M, N, K, lds, bias) entry for this GPU and cuBLASLt version, else heuristic top-1.
  virtual Status gemm(const GemmCall& call, cudaStream_t stream) = 0;
  // Same GEMM with an explicit algorithm (gemm-tune). kUnsupported when cuBLASLt rejects it.
  virtual Status gemm_with_algo(const GemmCall& call, const GemmAlgoConfig& algo, cudaStream_t stream) = 0;
  // The algorithm gemm() would run for `call` (pinned or heuristic top-1) and where it came from;
  // `pin_note` (optional) says why a matching table entry was not used (empty otherwise).
  virtual Result<GemmAlgoConfig> selected_algo(const GemmCall& call, bool* pinned) = 0;
  virtual std::string pin_note(const GemmCall& call) { return {}; }
  // Every valid configuration cuBLASLt offers for `call` (AlgoGetIds x tiles x stages x split-K x
  // reduction x swizzle, filtered by cublasLtMatmulAlgoCheck), at most `max_configs`.
  virtual Result<std::vector<GemmAlgoConfig>> enumerate_algos(const GemmCall& call, int max_configs) = 0;
  virtual size_t workspace_bytes() const = 0;
};

// Weight quantization at load (host, exact dtype.h conversions; E4M3 RNE satfinite).
//  per tensor: scale = amax / 448 (amax 0 -> scale 1), q = e4m3(w / scale); weight_scale [1] f32.
//  blockwise 128x128: the same per 128x128 block; weight_scale [ceil(N/128), roundup(ceil(K/128),4)]
//  f32 (padding columns hold 1.0).
// `w` is a host [N, K] bf16 tensor; the result is a host LinearWeight (format kFp8Scaled).
Result<LinearWeight> quantize_weight_fp8(const Tensor& w, Fp8Scaling scaling);

// GPU activation quantizers (E0 with the host versions in gemm/fp8_reference.h).
//  per tensor: amax over all of x (exact), scale = amax / 448 (0 -> 1), q = e4m3_rn_satfinite(x / scale).
//  1x128: the same per (row, 128-channel group); scales [ceil(K/128), ld_scale] f32, rows in
//  [M, ld_scale) of q are written as zeros with scale 1 (padding so M can be rounded up to 4).
// x: [M, K] bf16 (row stride ldx), q: [>= M, K] f8e4m3 (row stride K), scale on the device.
// `amax_scratch` is one uint32 of device memory.
Status quantize_fp8_per_tensor(const void* x, int64_t m, int64_t k, int64_t ldx, void* q, float* scale,
                               uint32_t* amax_scratch, cudaStream_t stream);
// The per-tensor quantizer's element path alone (2-byte loads), which quantize_fp8_per_tensor uses
// when x/ldx/K/q rule out its 16-byte vector path; tests and `gemm_bench fp8` compare the two.
Status quantize_fp8_per_tensor_element_path(const void* x, int64_t m, int64_t k, int64_t ldx, void* q, float* scale,
                                            uint32_t* amax_scratch, cudaStream_t stream);
Status quantize_fp8_per_tensor_static(const void* x, int64_t m, int64_t k, int64_t ldx, void* q, const float* scale,
                                      cudaStream_t stream);
// Per row (token): scales[r] = amax(row r)/448 (0 -> 1), f32 [M] on the device; the kFp8RowScaled
// activation. Needs x 16-byte aligned, K and ldx multiples of 8, q 8-byte aligned (else kInvalidArgument).
Status quantize_fp8_per_row(const void* x, int64_t m, int64_t k, int64_t ldx, void* q, float* scales,
                            cudaStream_t stream);
// out[j] = fp32(s_w * gate[j]) for j < n: s_w one f32 (device), gate n bf16 (device, e.g. one AdaLN table row
// chunk), out n f32: the kFp8RowScaled w_scale of a gated residual (x += gate * (a @ W^T)).
Status fp8_gate_scale_vector(const float* w_scale, const void* gate_bf16, int64_t n, float* out, cudaStream_t stream);
Status quantize_fp8_rowblock128(const void* x, int64_t m, int64_t k, int64_t ldx, void* q, float* scales,
                                int64_t ld_scale, cudaStream_t stream);

}  // namespace vortex
