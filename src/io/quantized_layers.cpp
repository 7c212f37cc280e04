// Reading and validating ComfyUI quantized linear layers (fp8_scaled, nvfp4) and their host dequantization.
// Why: a quantized checkpoint that is inconsistent (wrong padded shape, NaN scale, missing weight_scale_2)
// must be refused with a message naming the layer, never loaded into wrong numbers. Layout facts follow
// ComfyUI's comfy_quant layout and comfy-kitchen's NVFP4 format; the scale-tile offset is the NVFP4 reference's
// (ref/nvfp4_quantize.h). Tested in tests/io/quantize_layers_test.cpp and tests/io/quantize_roundtrip_test.cpp.
#include "io/quantized_layers.h"

#include <cmath>
#include <cstring>

#include <nlohmann/json.hpp>

#include "ref/nvfp4_quantize.h"  // nvfp4_scale_offset: header-only layout formula (no link dependency on ref)

namespace vortex {
namespace {

int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

std::string describe(const Tensor& t) { return shape_to_string(t.shape()) + " " + dtype_name(t.dtype()); }

Result<Tensor> need(const QuantTensorLookup& lookup, const std::string& name, const std::string& why) {
  VORTEX_ASSIGN_OR_RETURN(Tensor t, lookup(name));
  if (!t.defined()) return format_error(name + " is missing (" + why + ")");
  return t;
}

// A scalar F32 scale: shape [] or [1], finite, >= 0 (> 0 when `positive`). Returns its value.
Result<float> check_scalar_scale(const std::string& name, const Tensor& t, bool positive) {
  if (t.dtype() != DType::kF32)
    return format_error(name + ": expected an F32 scalar scale, got dtype " + dtype_name(t.dtype()));
  if (!(t.ndim() == 0 || (t.ndim() == 1 && t.dim(0) == 1)))
    return format_error(name + ": expected an F32 scalar (shape [] or [1]), got shape " + shape_to_string(t.shape()));
  if (t.device() != Device::kCpu) return internal_error(name + ": quantized-layer validation needs a host tensor");
  float v = 0.0f;
  std::memcpy(&v, t.raw_data(), sizeof(v));
  if (!std::isfinite(v)) return format_error(name + " is not finite (" + std::to_string(v) + "); the file is corrupt");
  if (v < 0.0f || (positive && v == 0.0f))
    return format_error(name + " must be " + (positive ? "> 0" : ">= 0") + ", got " + std::to_string(v));
  return v;
}

Status check_shape(const std::string& name, const Tensor& t, const Shape& expected, const std::string& what) {
  if (t.shape() != expected)
    return format_error(name + ": expected shape " + shape_to_string(expected) + " (" + what + "), got " +
                        shape_to_string(t.shape()));
  return Status::Ok();
}

Result<QuantMarker> marker_of(const std::string& layer, const QuantTensorLookup& lookup, const Tensor& weight,
                              std::string_view metadata_entry) {
  VORTEX_ASSIGN_OR_RETURN(Tensor cq, lookup(layer + ".comfy_quant"));
  if (cq.defined()) {
    if (cq.dtype() != DType::kU8 || cq.ndim() != 1)
      return format_error(layer + ".comfy_quant: expected a 1-D U8 tensor of UTF-8 JSON bytes, got " + describe(cq));
    if (!cq.is_contiguous()) return internal_error(layer + ".comfy_quant: non-contiguous view");
    std::string text(static_cast<const char*>(cq.raw_data()), static_cast<size_t>(cq.dim(0)));
    return parse_quant_marker(layer, text, "comfy_quant");
  }
  if (!metadata_entry.empty()) return parse_quant_marker(layer, metadata_entry, "_quantization_metadata");
  VORTEX_ASSIGN_OR_RETURN(Tensor scale, lookup(layer + ".weight_scale"));
  if (weight.dtype() == DType::kF8E4M3 && scale.defined()) {
    QuantMarker m;
    m.format = QuantFormat::kFp8Scaled;
    m.format_name = "float8_e4m3fn";
    m.source = "legacy scaled fp8 (no marker)";
    return m;
  }
  return format_error(layer + " is not quantized: no " + layer +
                      ".comfy_quant tensor, no _quantization_metadata "
                      "entry, and the weight is " +
                      describe(weight) +
                      " (legacy scaled fp8 needs an F8_E4M3 weight "
                      "and a weight_scale)");
}

}  // namespace

QuantTensorLookup quant_lookup_in(const SafetensorsSet& set) {
  return [&set](const std::string& name) -> Result<Tensor> {
    if (!set.find(name)) return Tensor();
    return set.tensor(name);
  };
}

Result<QuantMarker> parse_quant_marker(const std::string& layer, std::string_view json_text, std::string_view source) {
  nlohmann::json j = nlohmann::json::parse(json_text.begin(), json_text.end(), nullptr, /*allow_exceptions=*/false);
  const std::string where = layer + " (" + std::string(source) + ")";
  if (j.is_discarded())
    return format_error(where + ": quantization marker is not valid JSON: '" + std::string(json_text.substr(0, 200)) +
                        "'");
  if (!j.is_object() || !j.contains("format") || !j["format"].is_string())
    return format_error(where + ": quantization marker must be a JSON object with a string \"format\", got " +
                        j.dump());
  QuantMarker m;
  m.source = std::string(source);
  m.format_name = j["format"].get<std::string>();
  if (m.format_name == "float8_e4m3fn") m.format = QuantFormat::kFp8Scaled;
  else if (m.format_name == "nvfp4") m.format = QuantFormat::kNvfp4;
  else
    return format_error(where + ": unknown quantization format '" + m.format_name +
                        "' (Vortex reads float8_e4m3fn and nvfp4; requantize the layer or keep it in BF16)");
  if (j.contains("full_precision_matrix_mult")) {
    if (!j["full_precision_matrix_mult"].is_boolean())
      return format_error(where + ": \"full_precision_matrix_mult\" must be true or false, got " +
                          j["full_precision_matrix_mult"].dump());
    m.full_precision_matrix_mult = j["full_precision_matrix_mult"].get<bool>();
  }
  return m;
}

Result<std::map<std::string, std::string>> parse_quantization_metadata(std::string_view metadata_json) {
  nlohmann::json j = nlohmann::json::parse(metadata_json.begin(), metadata_json.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("layers") || !j["layers"].is_object())
    return format_error(
        "__metadata__._quantization_metadata must be JSON {\"layers\": {\"<layer>\": {\"format\": "
        "...}}}, got '" +
        std::string(metadata_json.substr(0, 200)) + "'");
  std::map<std::string, std::string> out;
  for (auto it = j["layers"].begin(); it != j["layers"].end(); ++it) out[it.key()] = it.value().dump();
  return out;
}

std::string comfy_quant_json(QuantFormat format) {
  switch (format) {
    case QuantFormat::kFp8Scaled:
      return "{\"format\": \"float8_e4m3fn\"}";
    case QuantFormat::kNvfp4:
      return "{\"format\": \"nvfp4\"}";
    case QuantFormat::kNone:
      break;
  }
  return "";
}

Shape nvfp4_weight_shape(int64_t n, int64_t k) { return {round_up(n, 16), round_up(k, 16) / 2}; }
Shape nvfp4_weight_scale_shape(int64_t n, int64_t k) { return {round_up(n, 128), round_up(round_up(k, 16) / 16, 4)}; }

Result<QuantizedLinear> read_quantized_layer(const std::string& layer, const QuantTensorLookup& lookup, int64_t N,
                                             int64_t K, std::string_view metadata_entry) {
  if (N <= 0 || K <= 0)
    return invalid_argument(layer + ": read_quantized_layer needs positive N, K, got " + std::to_string(N) + ", " +
                            std::to_string(K));
  VORTEX_ASSIGN_OR_RETURN(Tensor weight, need(lookup, layer + ".weight", "every linear layer has a weight"));
  VORTEX_ASSIGN_OR_RETURN(QuantMarker marker, marker_of(layer, lookup, weight, metadata_entry));
  QuantizedLinear q;
  q.marker = marker;
  LinearWeight& lw = q.weight;
  lw.format = marker.format;
  lw.out_features = N;
  lw.in_features = K;
  const std::string fmt = " (" + marker.format_name + ", from " + marker.source + ")";

  if (marker.format == QuantFormat::kFp8Scaled) {
    if (weight.dtype() != DType::kF8E4M3)
      return format_error(layer + ".weight: expected F8_E4M3" + fmt + ", got dtype " + dtype_name(weight.dtype()));
    VORTEX_RETURN_IF_ERROR(check_shape(layer + ".weight", weight, {N, K}, "[N, K]" + fmt));
    VORTEX_ASSIGN_OR_RETURN(Tensor scale, need(lookup, layer + ".weight_scale",
                                               "fp8_scaled needs its per-tensor "
                                               "F32 weight_scale"));
    VORTEX_RETURN_IF_ERROR(check_scalar_scale(layer + ".weight_scale", scale, false).status());
    lw.weight = weight;
    lw.weight_scale = scale;
    VORTEX_ASSIGN_OR_RETURN(Tensor s2, lookup(layer + ".weight_scale_2"));
    if (s2.defined())
      return format_error(layer +
                          ".weight_scale_2 present on an fp8_scaled layer (it belongs to nvfp4); the "
                          "comfy_quant format and the tensors disagree");
  } else {
    if (weight.dtype() != DType::kU8)
      return format_error(layer + ".weight: expected U8 packed E2M1 pairs" + fmt + ", got dtype " +
                          dtype_name(weight.dtype()));
    VORTEX_RETURN_IF_ERROR(
        check_shape(layer + ".weight", weight, nvfp4_weight_shape(N, K),
                    "[roundup(N,16), roundup(K,16)/2] for N=" + std::to_string(N) + ", K=" + std::to_string(K)));
    VORTEX_ASSIGN_OR_RETURN(Tensor scale, need(lookup, layer + ".weight_scale", "nvfp4 needs its E4M3 block scales"));
    if (scale.dtype() != DType::kF8E4M3 && scale.dtype() != DType::kU8)
      return format_error(layer + ".weight_scale: expected F8_E4M3 (or U8) block scales, got dtype " +
                          dtype_name(scale.dtype()));
    VORTEX_RETURN_IF_ERROR(check_shape(layer + ".weight_scale", scale, nvfp4_weight_scale_shape(N, K),
                                       "[roundup(N,128), roundup(roundup(K,16)/16,4)] in cuBLAS 128x4 tiles"));
    if (!scale.is_contiguous()) return internal_error(layer + ".weight_scale: non-contiguous view");
    const uint8_t* sb = static_cast<const uint8_t*>(scale.raw_data());
    for (size_t i = 0; i < scale.nbytes(); ++i) {
      if ((sb[i] & 0x7F) == 0x7F)
        return format_error(layer + ".weight_scale: block scale byte " + std::to_string(i) + " is NaN (0x" +
                            (sb[i] == 0x7F ? "7F" : "FF") + "); the file is corrupt");
      if (sb[i] & 0x80)
        return format_error(layer + ".weight_scale: block scale byte " + std::to_string(i) +
                            " is negative; NVFP4 block scales are unsigned E4M3 (the file is corrupt)");
    }
    VORTEX_ASSIGN_OR_RETURN(Tensor s2, need(lookup, layer + ".weight_scale_2",
                                            "nvfp4 needs the F32 per-tensor global scale weight_scale_2"));
    VORTEX_RETURN_IF_ERROR(check_scalar_scale(layer + ".weight_scale_2", s2, false).status());
    lw.weight = weight;
    // U8 block scales are viewed as E4M3 (ComfyUI: weight_scale.view(float8_e4m3fn)).
    lw.weight_scale = Tensor::from_storage(scale.storage(), scale.byte_offset(), scale.shape(), DType::kF8E4M3);
    lw.weight_scale_2 = s2;
  }

  VORTEX_ASSIGN_OR_RETURN(Tensor in_scale, lookup(layer + ".input_scale"));
  if (in_scale.defined()) {
    VORTEX_RETURN_IF_ERROR(check_scalar_scale(layer + ".input_scale", in_scale, true).status());
    lw.input_scale = in_scale;
  }
  VORTEX_ASSIGN_OR_RETURN(Tensor pqs, lookup(layer + ".pre_quant_scale"));
  if (pqs.defined()) {
    if (pqs.dtype() != DType::kF32 && pqs.dtype() != DType::kBF16 && pqs.dtype() != DType::kF16)
      return format_error(layer + ".pre_quant_scale: expected F32, BF16 or F16, got dtype " + dtype_name(pqs.dtype()));
    VORTEX_RETURN_IF_ERROR(check_shape(layer + ".pre_quant_scale", pqs, {K}, "[K]"));
    if (!pqs.is_contiguous()) return internal_error(layer + ".pre_quant_scale: non-contiguous view");
    for (int64_t i = 0; i < K; ++i) {
      float v = 0.0f;
      if (pqs.dtype() == DType::kF32) {
        std::memcpy(&v, static_cast<const char*>(pqs.raw_data()) + 4 * i, 4);
      } else if (pqs.dtype() == DType::kBF16) {
        uint16_t b = 0;
        std::memcpy(&b, static_cast<const char*>(pqs.raw_data()) + 2 * i, 2);
        v = f32_from_bf16_bits(b);
      } else {
        uint16_t h = 0;
        std::memcpy(&h, static_cast<const char*>(pqs.raw_data()) + 2 * i, 2);
        v = ((h & 0x7C00) == 0x7C00) ? NAN : 0.0f;  // only finiteness is checked for F16
      }
      if (!std::isfinite(v))
        return format_error(layer + ".pre_quant_scale[" + std::to_string(i) + "] is not finite; the file is corrupt");
    }
    q.pre_quant_scale = pqs;
  }
  return q;
}

Result<LinearWeight> read_quantized_linear(const std::string& layer, const QuantTensorLookup& lookup, int64_t N,
                                           int64_t K, std::string_view metadata_entry) {
  VORTEX_ASSIGN_OR_RETURN(QuantizedLinear q, read_quantized_layer(layer, lookup, N, K, metadata_entry));
  if (q.pre_quant_scale.defined())
    return unsupported(layer +
                       ".pre_quant_scale (ModelOpt/AWQ activation smoothing) is present, but Vortex's GEMMs "
                       "do not apply it; ignoring it would change the layer's output. Use a checkpoint without "
                       "pre_quant_scale (fold it into the previous layer) or keep this layer in BF16");
  return std::move(q.weight);
}

std::vector<int64_t> qkv_interleaved_to_blocked_rows(int num_heads, int head_dim) {
  const int64_t H = num_heads, Dh = head_dim;
  std::vector<int64_t> rows(static_cast<size_t>(3 * H * Dh));
  for (int64_t p = 0; p < 3; ++p)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t d = 0; d < Dh; ++d) rows[static_cast<size_t>(p * H * Dh + h * Dh + d)] = h * 3 * Dh + p * Dh + d;
  return rows;
}

Result<LinearWeight> permute_quantized_rows(const LinearWeight& w, const std::vector<int64_t>& new_to_old) {
  const int64_t N = w.out_features;
  if (w.format == QuantFormat::kNone) return invalid_argument("permute_quantized_rows: the layer is not quantized");
  if (static_cast<int64_t>(new_to_old.size()) != N)
    return invalid_argument("permute_quantized_rows: " + std::to_string(new_to_old.size()) +
                            " row indices for N = " + std::to_string(N));
  std::vector<bool> seen(static_cast<size_t>(N), false);
  for (int64_t r : new_to_old) {
    if (r < 0 || r >= N || seen[static_cast<size_t>(r)])
      return invalid_argument("permute_quantized_rows: row indices are not a permutation of 0.." +
                              std::to_string(N - 1));
    seen[static_cast<size_t>(r)] = true;
  }
  if (!w.weight.defined() || !w.weight_scale.defined() || w.weight.device() != Device::kCpu ||
      !w.weight.is_contiguous() || !w.weight_scale.is_contiguous() || w.weight.ndim() != 2 || w.weight.dim(0) < N)
    return invalid_argument("permute_quantized_rows: needs contiguous host tensors with at least N rows");
  LinearWeight out = w;
  out.weight = Tensor::empty(w.weight.shape(), w.weight.dtype());
  std::memcpy(out.weight.raw_data(), w.weight.raw_data(), w.weight.nbytes());  // padding rows kept
  const size_t row_bytes = static_cast<size_t>(w.weight.dim(1)) * dtype_size(w.weight.dtype());
  const char* src = static_cast<const char*>(w.weight.raw_data());
  char* dst = static_cast<char*>(out.weight.raw_data());
  for (int64_t i = 0; i < N; ++i)
    std::memcpy(dst + i * row_bytes, src + new_to_old[static_cast<size_t>(i)] * row_bytes, row_bytes);
  if (w.format == QuantFormat::kNvfp4) {
    out.weight_scale = Tensor::empty(w.weight_scale.shape(), w.weight_scale.dtype());
    std::memcpy(out.weight_scale.raw_data(), w.weight_scale.raw_data(), w.weight_scale.nbytes());
    const uint8_t* ss = static_cast<const uint8_t*>(w.weight_scale.raw_data());  // [N128, C4] e4m3, tiled
    uint8_t* ds = static_cast<uint8_t*>(out.weight_scale.raw_data());
    const int64_t cols = w.weight_scale.dim(1);
    for (int64_t i = 0; i < N; ++i)
      for (int64_t c = 0; c < cols; ++c)
        ds[ref::nvfp4_scale_offset(i, c, cols)] =
            ss[ref::nvfp4_scale_offset(new_to_old[static_cast<size_t>(i)], c, cols)];
  }
  return out;
}

Result<Tensor> dequantize_linear_bf16(const LinearWeight& w) {
  const int64_t N = w.out_features, K = w.in_features;
  if (w.format == QuantFormat::kNone) return invalid_argument("dequantize_linear_bf16: the layer is not quantized");
  if (!w.weight.defined() || !w.weight_scale.defined() || w.weight.device() != Device::kCpu ||
      !w.weight.is_contiguous() || !w.weight_scale.is_contiguous())
    return invalid_argument("dequantize_linear_bf16: needs contiguous host weight and weight_scale tensors");
  Tensor out = Tensor::empty({N, K}, DType::kBF16);  // [N, K] bf16
  uint16_t* o = out.data<uint16_t>();
  if (w.format == QuantFormat::kFp8Scaled) {
    if (w.weight.shape() != Shape{N, K} || w.weight.dtype() != DType::kF8E4M3 || w.weight_scale.dtype() != DType::kF32)
      return invalid_argument(
          "dequantize_linear_bf16: fp8_scaled weight must be [N, K] F8_E4M3 with an F32 scale, "
          "got " +
          describe(w.weight));
    float scale = 0.0f;
    std::memcpy(&scale, w.weight_scale.raw_data(), 4);
    const uint8_t* q = static_cast<const uint8_t*>(w.weight.raw_data());  // [N, K] e4m3
    for (int64_t i = 0; i < N * K; ++i) o[i] = bf16_bits_from_f32(f32_from_e4m3(q[i]) * scale);
    return out;
  }
  if (w.weight.shape() != nvfp4_weight_shape(N, K) || w.weight_scale.shape() != nvfp4_weight_scale_shape(N, K) ||
      !w.weight_scale_2.defined() || w.weight_scale_2.dtype() != DType::kF32)
    return invalid_argument("dequantize_linear_bf16: nvfp4 tensors do not match N=" + std::to_string(N) +
                            ", K=" + std::to_string(K) + " (weight " + describe(w.weight) + ")");
  float g = 0.0f;
  std::memcpy(&g, w.weight_scale_2.raw_data(), 4);
  const uint8_t* data = static_cast<const uint8_t*>(w.weight.raw_data());          // [N16, K16/2] u8, hi-first
  const uint8_t* scales = static_cast<const uint8_t*>(w.weight_scale.raw_data());  // [N128, C4] e4m3, tiled
  const int64_t row_bytes = w.weight.dim(1), scale_cols = w.weight_scale.dim(1);
  for (int64_t r = 0; r < N; ++r) {
    for (int64_t k = 0; k < K; ++k) {
      const uint8_t byte = data[r * row_bytes + k / 2];
      const uint8_t code = (k % 2 == 0) ? static_cast<uint8_t>(byte >> 4) : static_cast<uint8_t>(byte & 0x0F);
      const float decode = f32_from_e4m3(scales[ref::nvfp4_scale_offset(r, k / 16, scale_cols)]) * g;
      o[r * K + k] = bf16_bits_from_f32(f32_from_e2m1(code) * decode);
    }
  }
  return out;
}

}  // namespace vortex
