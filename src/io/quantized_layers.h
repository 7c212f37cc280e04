// Quantized linear layers of ComfyUI checkpoints (comfy_quant formats): reads the tensors
// of one layer P (P.weight, P.weight_scale, P.weight_scale_2, P.input_scale, P.pre_quant_scale and the
// P.comfy_quant U8 JSON or its __metadata__._quantization_metadata entry) into a validated LinearWeight
// for fp8_scaled ("float8_e4m3fn") and nvfp4; every inconsistency is a kFormat Status naming the layer.
// Also the host dequantization (ComfyUI's weight-only path) used by tests and the Hopper emulation.
// Tested in tests/io/quantize_layers_test.cpp (every malformed case) and tests/io/quantize_roundtrip_test.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "backend/linear_weight.h"
#include "io/safetensors.h"
#include "vortex/status.h"
#include "vortex/tensor.h"

namespace vortex {

// Looks a tensor up by its full key as stored; returns an undefined Tensor when the key is absent
// (an error Status only for real failures).
using QuantTensorLookup = std::function<Result<Tensor>(const std::string& name)>;
// A lookup onto an opened file or shard set (host views onto the mapping); `set` must outlive it.
QuantTensorLookup quant_lookup_in(const SafetensorsSet& set);

// The comfy_quant marker of one layer.
struct QuantMarker {
  QuantFormat format = QuantFormat::kNone;
  std::string format_name;  // as written: "float8_e4m3fn" | "nvfp4"
  std::string source;       // "comfy_quant" | "_quantization_metadata" | "legacy scaled fp8 (no marker)"
  bool full_precision_matrix_mult = false;  // ComfyUI: dequantize and run the GEMM in the compute dtype
};

// Parses one marker object, e.g. {"format": "nvfp4", "full_precision_matrix_mult": true}.
Result<QuantMarker> parse_quant_marker(const std::string& layer, std::string_view json_text, std::string_view source);
// __metadata__["_quantization_metadata"] = {"layers": {"<layer>": {...}, ...}} -> layer -> object text.
Result<std::map<std::string, std::string>> parse_quantization_metadata(std::string_view metadata_json);

// The ComfyUI marker JSON Vortex writes (bytes of P.comfy_quant): {"format": "nvfp4"} / {"format": "float8_e4m3fn"}.
std::string comfy_quant_json(QuantFormat format);

// Padded NVFP4 storage shapes (§1.8): data U8 [roundup(N,16), roundup(K,16)/2],
// scales F8_E4M3 [roundup(N,128), roundup(roundup(K,16)/16, 4)].
Shape nvfp4_weight_shape(int64_t n, int64_t k);
Shape nvfp4_weight_scale_shape(int64_t n, int64_t k);

struct QuantizedLinear {
  LinearWeight weight;  // format, weight, weight_scale, weight_scale_2, input_scale, N, K
  QuantMarker marker;
  Tensor pre_quant_scale;  // [K], optional (ModelOpt/AWQ smoothing of the activation)
};

// `layer` is the full key prefix as stored ("model.diffusion_model.blocks.3.mlp.fc1"); N, K the logical
// (unpadded) out/in features. The format comes from P.comfy_quant, else `metadata_entry` (the layer's
// _quantization_metadata object text, empty when none), else legacy scaled fp8 (F8_E4M3 weight +
// weight_scale). A layer with no marker and an unquantized weight is an error (it is not quantized).
// Checks: dtypes, exact (padded) shapes, scalar scales finite and >= 0 (input_scale > 0), every NVFP4
// block-scale byte non-negative and not NaN, pre_quant_scale [K] finite.
Result<QuantizedLinear> read_quantized_layer(const std::string& layer, const QuantTensorLookup& lookup, int64_t N,
                                             int64_t K, std::string_view metadata_entry = {});
// The LinearWeight the GEMMs consume. A pre_quant_scale is rejected (kUnsupported): Vortex's GEMMs do
// not apply it, and ignoring it would silently change the layer's output.
Result<LinearWeight> read_quantized_linear(const std::string& layer, const QuantTensorLookup& lookup, int64_t N,
                                           int64_t K, std::string_view metadata_entry = {});

// Row order of a fused QKV weight: element i of the result is the per-head-interleaved row that becomes blocked
// row i ([q | k | v]); the same permutation as qkv_interleaved_to_blocked (io/checkpoint.h).
std::vector<int64_t> qkv_interleaved_to_blocked_rows(int num_heads, int head_dim);
// Reorders the output rows (N) of a quantized host weight: row i of the result = row new_to_old[i] of `w`.
// fp8_scaled: rows of the [N, K] weight; nvfp4: rows of the packed data and the matching entries of the
// 128x4-tiled block scales (padding rows and columns kept). Scalar scales are unchanged: a row permutation
// keeps the tensor amax, so the result equals quantizing the permuted BF16 weight (byte for byte).
Result<LinearWeight> permute_quantized_rows(const LinearWeight& w, const std::vector<int64_t>& new_to_old);

// Host dequantization to BF16 [N, K] (the unpadded logical weight), one rounding each:
//   fp8_scaled: w = R(f32(e4m3) * scale)                         (fp32 multiply, then BF16 RNE)
//   nvfp4:      w = R(f32(e2m1) * (f32(e4m3 block scale) * g))   (comfy-kitchen dequantize_nvfp4 CUDA, §1.11)
// For nvfp4, e2m1 * e4m3 is exact in BF16, so the result is exact whenever g is a power of two.
Result<Tensor> dequantize_linear_bf16(const LinearWeight& weight);

}  // namespace vortex
