// `vortex quantize`: streams a BF16 H3 checkpoint (file or sharded index) into a ComfyUI-loadable quantized
// one (nvfp4 or fp8_scaled) — only the four block GEMM weights (attn.qkv_proj, attn.out_proj, mlp.fc1,
// mlp.fc2) of the blocks (optionally the token refiner) are quantized; every other tensor is copied byte for
// byte. One tensor in memory at a time, atomic output (SafetensorsStreamWriter). The NVFP4 encoder is
// injected (the CPU reference of src/ref lives after io in the build order). Tested in
// tests/io/quantize_roundtrip_test.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "backend/linear_weight.h"
#include "vortex/status.h"

namespace vortex {

enum class QuantizeLayerSet : uint8_t { kBlocks, kBlocksAndRefiner };
Result<QuantizeLayerSet> quantize_layer_set_from_name(std::string_view name);  // "blocks" | "blocks+refiner"
const char* quantize_layer_set_name(QuantizeLayerSet set);
Result<QuantFormat> quantize_format_from_name(std::string_view name);  // "nvfp4" | "fp8_scaled"

// True for "blocks.<i>.{attn.qkv_proj,attn.out_proj,mlp.fc1,mlp.fc2}.weight" (and, with kBlocksAndRefiner,
// "token_refiner.blocks.<i>...."); `canonical` is the key without any ComfyUI prefix.
bool is_quantize_target(std::string_view canonical, QuantizeLayerSet set);

// NVFP4 weight encoder, provided by the CPU reference quantizer (ref/nvfp4_quantize.h; the CLI wires it).
struct Nvfp4WeightEncoder {
  // The dynamic per-tensor global scale of a BF16 [n, k] weight (ComfyUI: amax / (448 * 6)).
  std::function<float(const uint16_t* w, int64_t n, int64_t k)> global_scale;
  // Called concurrently on 128-row slabs (n <= 128 rows each, the last one may be ragged), so it must be
  // thread-safe. w [n, k] bf16 -> data [roundup(n,16) * roundup(k,16)/2] hi-first E2M1 pairs and
  // scales [roundup(n,128) * roundup(roundup(k,16)/16,4)] E4M3 in 128x4 tiles; every byte written.
  std::function<Status(const uint16_t* w, int64_t n, int64_t k, float g, uint8_t* data, uint8_t* scales)> encode;
  std::string description;  // recorded in the output's __metadata__
};

// fp8_scaled recipe (exact, documented): amax = max |w| over the BF16 tensor (exact);
//   scale = fp32(amax) / 448.0f   (IEEE FP32 division; amax = 0 -> scale = 1, so an all-zero weight stays 0)
//   q     = e4m3_rn_satfinite(fp32(w) / scale)   (IEEE FP32 division, then cvt.rn.satfinite.e4m3)
// Not byte-identical to ComfyUI/comfy-kitchen, which computes the scale in the weight's dtype
// (bf16(amax * RN(1/448))) and multiplies by a BF16-rounded reciprocal (x * (1/scale).to(bf16)) before the
// FP8 cast; both are valid per-tensor FP8 encodings that ComfyUI loads identically.
float fp8_scaled_weight_scale(uint16_t amax_bf16_bits);
void fp8_scaled_quantize(const uint16_t* w, int64_t count, float scale, uint8_t* q);

struct QuantizeOptions {
  std::string in;   // .safetensors or *.safetensors.index.json (BF16 block GEMM weights)
  std::string out;  // .safetensors (single file, written atomically)
  QuantFormat format = QuantFormat::kNvfp4;
  QuantizeLayerSet layers = QuantizeLayerSet::kBlocks;
  Nvfp4WeightEncoder nvfp4;  // required for kNvfp4
  int threads = 0;           // encode threads (NVFP4: 128-row slabs; fp8: 1M-element chunks); 0: all cores
  bool overwrite = false;    // replace an existing `out`, only if Vortex wrote it (io/publish.h)
};

struct QuantizeSummary {
  std::string out;
  size_t tensors_in = 0;
  size_t tensors_out = 0;
  size_t layers_quantized = 0;
  uint64_t bytes_in = 0;
  uint64_t bytes_out = 0;
  bool copied_config_json = false;
};

// Refuses an input that already has quantized layers (comfy_quant, _quantization_metadata or legacy
// scaled fp8), a target weight that is not BF16, an output path equal to an input file, or an existing
// output without `overwrite` (or not written by Vortex). The output
// keeps the input's QKV row order and records it in __metadata__["vortex.qkv_layout"]; a config.json
// beside the input is copied beside the output when none is there. `progress` gets one line per tensor.
Result<QuantizeSummary> quantize_checkpoint(const QuantizeOptions& options,
                                            const std::function<void(const std::string&)>& progress = {});

}  // namespace vortex
