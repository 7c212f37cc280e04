// Precision modes applied to loaded weights (VORTEX.md "Precision modes"):
//   bf16 : the reference program, weights as loaded;
//   fp8  : the 4 GEMM weights of every main block quantized at load to FP8 E4M3 with one FP32 scale
//          per tensor (scale = amax/448, RNE satfinite); activations are quantized per tensor on the
//          fly by GemmEngine (amax/448). An E2 mode: its deviation from bf16 is measured, not gated.
// Other layers (refiner, AdaLN, patch projections, heads) keep their release dtypes.
#pragma once

#include <string>

#include "model/backend.h"
#include "model/h3_weights.h"

namespace vortex {

// Converts `weights` in place for `precision` ("bf16" is a no-op). `threads` host workers quantize
// tensors concurrently (download -> exact host quantizer -> upload).
Status apply_precision(H3Weights& weights, Backend& backend, const std::string& precision, int threads = 16);

}  // namespace vortex
