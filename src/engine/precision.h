// Precision modes applied to loaded weights (docs/numerics.md "Levels", "NVFP4 modes"):
//   bf16 : the reference program, weights as loaded;
//   fp8  : the 4 GEMM weights of every main block quantized at load to FP8 E4M3 with one FP32 scale
//          per tensor (scale = amax/448, RNE satfinite); activations are quantized per tensor on the
//          fly by GemmEngine (amax/448). An E2 mode: its deviation from bf16 is measured, not gated.
//   nvfp4: W4A4 (comfy-kitchen numerics): the 4 GEMM weights of every main
//          block quantized at load by the CPU reference quantizer with comfy-kitchen's CUDA encode
//          (div.approx/rcp.approx from the measured table) and a static global scale g = amax/2688 (a
//          checkpoint's NVFP4 layers are kept as they are); activations quantized per call by the GPU
//          producer (dynamic g) and multiplied by the native FP4 GEMM (Blackwell) or its exact BF16
//          emulation (Hopper). FC2 follows the CUDA policy switch nvfp4_fc2_fallback. CUDA only; E2.
//   nvfp4-weight-only: what stock ComfyUI runs on Hopper: the same NVFP4 weights expanded to BF16 at load
//          (w = R(e2m1 * (e4m3 * g)), io's dequantize_linear_bf16), BF16 activations, plain BF16 GEMMs.
//          Runs on every backend (the weights are ordinary BF16 afterwards). E2.
// Other layers (refiner, AdaLN, patch projections, heads) keep their release dtypes.
// Where the conversion runs: FP8 and NVFP4 quantization on the device, tensor by tensor (Backend::quantize_weight;
// the CUDA backend), the NVFP4 -> BF16 expansion on the host; the bytes equal the host quantizers' (E0, tested in
// tests/engine/device_residency_test.cpp on the GPU).
// Tested in tests/engine/precision_test.cpp (CPU) and tests/engine/nvfp4_mode_test.cpp (GPU).
#pragma once

#include <string>

#include "backend/backend.h"
#include "model/h3_weights.h"

namespace vortex {

// "bf16", "fp8", "nvfp4", "nvfp4-weight-only".
bool is_precision_name(const std::string& name);
const char* precision_names_help();  // "bf16, fp8, nvfp4, nvfp4-weight-only"

struct PrecisionOptions {
  std::string precision = "bf16";
  // nvfp4 only: what FC2 runs. "" = the backend's default (CUDA policy table `nvfp4_fc2_fallback`);
  // "off" (W4A4 like the other three GEMMs: materialized SwiGLU output, standalone quantizer, NVFP4 GEMM),
  // "weight-only" (FC2 weight expanded to BF16, BF16 activations), "bf16" (FC2 keeps its release BF16
  // weight; an NVFP4 checkpoint's FC2 is expanded as in weight-only because no BF16 original exists).
  std::string nvfp4_fc2;
  int threads = 16;  // host workers quantizing tensors concurrently (download -> host quantizer -> upload)
};

// Converts `weights` in place for the mode ("bf16" is a no-op).
Status apply_precision(H3Weights& weights, Backend& backend, const PrecisionOptions& options);
Status apply_precision(H3Weights& weights, Backend& backend, const std::string& precision, int threads = 16);

// NVFP4 weight quantization at load (host, exact CPU reference): w [N, K] bf16 contiguous host tensor ->
// host LinearWeight kNvfp4 (weight U8 [N16, K16/2], weight_scale F8_E4M3 128x4-tiled, weight_scale_2 F32 [1]
// = nvfp4_global_scale_from_amax(amax(w))). approx_encode = true: comfy-kitchen's CUDA encode (needs the
// measured rcp.approx table, ref::RcpApproxTable::default_table); false: its eager IEEE-division encode.
Result<LinearWeight> quantize_weight_nvfp4(const Tensor& w, bool approx_encode = true);

}  // namespace vortex
