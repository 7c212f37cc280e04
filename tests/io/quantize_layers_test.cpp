// Tests of io/quantized_layers (read_quantized_linear and friends) and the fp8_scaled side of io/quantize:
// every malformed-layer case of the issue gives its own message naming the layer; NVFP4 dequantization is
// exact (E2M1 x E4M3 x 2^e in BF16) on random codes and scales, including padded shapes; fp8_scaled round
// trip of a synthetic h3-tiny checkpoint (error bound per element, untouched tensors byte-identical, output
// loads through load_checkpoint); an already quantized input is refused. Random inputs are fresh per run
// (seed printed). The NVFP4 round trip (needs the CPU reference quantizer) is in quantize_roundtrip_test.cpp.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "host_test_backend.h"
#include "io/checkpoint.h"
#include "io/quantize.h"
#include "io/quantized_layers.h"
#include "io/safetensors.h"
#include "io/synth_checkpoint.h"
#include "quantize_test_util.h"
#include "ref/nvfp4_quantize.h"  // nvfp4_scale_offset (header-only layout formula)
#include "test_files.h"

namespace vortex {
namespace {

using TensorMap = std::map<std::string, Tensor>;

Tensor u8_json(const std::string& text) {
  Tensor t = Tensor::empty({static_cast<int64_t>(text.size())}, DType::kU8);
  std::memcpy(t.raw_data(), text.data(), text.size());
  return t;
}

Tensor f32_scalar(float v, Shape shape = {}) {
  Tensor t = Tensor::empty(shape, DType::kF32);
  std::memcpy(t.raw_data(), &v, 4);
  return t;
}

Tensor filled(Shape shape, DType dtype, uint8_t byte) {
  Tensor t = Tensor::empty(shape, dtype);
  std::memset(t.raw_data(), byte, t.nbytes());
  return t;
}

QuantTensorLookup lookup_of(const TensorMap& m) {
  return [&m](const std::string& name) -> Result<Tensor> {
    auto it = m.find(name);
    return it == m.end() ? Tensor() : it->second;
  };
}

constexpr int64_t kN = 20, kK = 40;  // padded: data [32, 24], scales [128, 4]
const std::string kLayer = "model.diffusion_model.blocks.7.mlp.fc1";

TensorMap valid_nvfp4() {
  TensorMap m;
  m[kLayer + ".weight"] = filled({32, 24}, DType::kU8, 0x12);
  m[kLayer + ".weight_scale"] = filled({128, 4}, DType::kF8E4M3, 0x30);
  m[kLayer + ".weight_scale_2"] = f32_scalar(0.001f);
  m[kLayer + ".comfy_quant"] = u8_json(R"({"format": "nvfp4"})");
  return m;
}

TensorMap valid_fp8() {
  TensorMap m;
  m[kLayer + ".weight"] = filled({kN, kK}, DType::kF8E4M3, 0x38);
  m[kLayer + ".weight_scale"] = f32_scalar(0.5f, {1});
  m[kLayer + ".comfy_quant"] = u8_json(R"({"format": "float8_e4m3fn"})");
  return m;
}

// Expects read_quantized_linear to fail with `code` and a message containing the layer and every needle.
void expect_rejected(const TensorMap& m, ErrorCode code, std::initializer_list<std::string> needles,
                     std::string_view metadata_entry = {}) {
  Result<LinearWeight> r = read_quantized_linear(kLayer, lookup_of(m), kN, kK, metadata_entry);
  ASSERT_FALSE(r.ok()) << "accepted a malformed layer; expected: " << *needles.begin();
  EXPECT_EQ(r.status().code(), code) << r.status().to_string();
  EXPECT_NE(r.status().message().find(kLayer), std::string::npos) << r.status().message();
  for (const std::string& n : needles)
    EXPECT_NE(r.status().message().find(n), std::string::npos) << "missing '" << n << "' in: " << r.status().message();
}

TEST(QuantizedLayersTest, ValidLayersLoad) {
  TensorMap m = valid_nvfp4();
  m[kLayer + ".input_scale"] = f32_scalar(0.25f);
  Result<LinearWeight> w = read_quantized_linear(kLayer, lookup_of(m), kN, kK);
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  EXPECT_EQ(w->format, QuantFormat::kNvfp4);
  EXPECT_EQ(w->out_features, kN);
  EXPECT_EQ(w->in_features, kK);
  EXPECT_EQ(w->weight_scale.dtype(), DType::kF8E4M3);
  EXPECT_EQ(w->weight_scale_2.data<float>()[0], 0.001f);
  EXPECT_EQ(w->input_scale.data<float>()[0], 0.25f);

  // U8 block scales are accepted and viewed as E4M3 (same bytes).
  m[kLayer + ".weight_scale"] = filled({128, 4}, DType::kU8, 0x31);
  w = read_quantized_linear(kLayer, lookup_of(m), kN, kK);
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  EXPECT_EQ(w->weight_scale.dtype(), DType::kF8E4M3);
  EXPECT_EQ(static_cast<const uint8_t*>(w->weight_scale.raw_data())[5], 0x31);

  TensorMap f = valid_fp8();
  w = read_quantized_linear(kLayer, lookup_of(f), kN, kK);
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  EXPECT_EQ(w->format, QuantFormat::kFp8Scaled);

  // Legacy scaled fp8: no marker, F8_E4M3 weight + weight_scale.
  f.erase(kLayer + ".comfy_quant");
  Result<QuantizedLinear> q = read_quantized_layer(kLayer, lookup_of(f), kN, kK);
  ASSERT_TRUE(q.ok()) << q.status().to_string();
  EXPECT_EQ(q->weight.format, QuantFormat::kFp8Scaled);
  EXPECT_EQ(q->marker.source, "legacy scaled fp8 (no marker)");
}

TEST(QuantizedLayersTest, MarkerFromMetadataAndFullPrecisionNoted) {
  TensorMap m = valid_nvfp4();
  m.erase(kLayer + ".comfy_quant");
  Result<std::map<std::string, std::string>> md =
      parse_quantization_metadata(R"({"layers": {"model.diffusion_model.blocks.7.mlp.fc1": )"
                                  R"({"format": "nvfp4", "full_precision_matrix_mult": true}}})");
  ASSERT_TRUE(md.ok()) << md.status().to_string();
  ASSERT_EQ(md->count(kLayer), 1u);
  Result<QuantizedLinear> q = read_quantized_layer(kLayer, lookup_of(m), kN, kK, md->at(kLayer));
  ASSERT_TRUE(q.ok()) << q.status().to_string();
  EXPECT_EQ(q->marker.source, "_quantization_metadata");
  EXPECT_TRUE(q->marker.full_precision_matrix_mult);
  EXPECT_EQ(q->weight.format, QuantFormat::kNvfp4);

  EXPECT_EQ(parse_quantization_metadata(R"({"layer": {}})").status().code(), ErrorCode::kFormat);
  EXPECT_EQ(parse_quantization_metadata("not json").status().code(), ErrorCode::kFormat);
  Result<QuantMarker> bad =
      parse_quant_marker(kLayer, R"({"format": "nvfp4", "full_precision_matrix_mult": 3})", "comfy_quant");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("full_precision_matrix_mult"), std::string::npos);
}

TEST(QuantizedLayersTest, EveryMalformedNvfp4CaseHasItsMessage) {
  TensorMap m = valid_nvfp4();
  m[kLayer + ".weight"] = filled({32, 24}, DType::kBF16, 0);
  expect_rejected(m, ErrorCode::kFormat, {".weight", "expected U8", "BF16"});
  m = valid_nvfp4();
  m[kLayer + ".weight"] = filled({kN, kK / 2}, DType::kU8, 0);  // unpadded rows
  expect_rejected(m, ErrorCode::kFormat, {".weight", "[32, 24]", "[20, 20]"});
  m = valid_nvfp4();
  m[kLayer + ".weight_scale"] = filled({32, 4}, DType::kF8E4M3, 0x30);  // rows not padded to 128
  expect_rejected(m, ErrorCode::kFormat, {".weight_scale", "[128, 4]", "[32, 4]"});
  m = valid_nvfp4();
  m[kLayer + ".weight_scale"] = filled({128, 4}, DType::kF32, 0);
  expect_rejected(m, ErrorCode::kFormat, {".weight_scale", "F8_E4M3", "F32"});
  m = valid_nvfp4();
  m.erase(kLayer + ".weight_scale");
  expect_rejected(m, ErrorCode::kFormat, {".weight_scale is missing"});
  m = valid_nvfp4();
  m.erase(kLayer + ".weight_scale_2");
  expect_rejected(m, ErrorCode::kFormat, {".weight_scale_2 is missing"});
  m = valid_nvfp4();
  m[kLayer + ".weight_scale_2"] = f32_scalar(-1.0f);
  expect_rejected(m, ErrorCode::kFormat, {".weight_scale_2", ">= 0"});
  m[kLayer + ".weight_scale_2"] = f32_scalar(NAN);
  expect_rejected(m, ErrorCode::kFormat, {".weight_scale_2", "not finite"});
  m[kLayer + ".weight_scale_2"] = f32_scalar(INFINITY);
  expect_rejected(m, ErrorCode::kFormat, {".weight_scale_2", "not finite"});
  m[kLayer + ".weight_scale_2"] = filled({2}, DType::kF32, 0);
  expect_rejected(m, ErrorCode::kFormat, {".weight_scale_2", "scalar"});
  m = valid_nvfp4();
  static_cast<uint8_t*>(m[kLayer + ".weight_scale"].raw_data())[77] = 0x7F;
  expect_rejected(m, ErrorCode::kFormat, {".weight_scale", "byte 77", "NaN"});
  m = valid_nvfp4();
  static_cast<uint8_t*>(m[kLayer + ".weight_scale"].raw_data())[3] = 0x88;
  expect_rejected(m, ErrorCode::kFormat, {".weight_scale", "byte 3", "negative"});
  m = valid_nvfp4();
  m[kLayer + ".input_scale"] = f32_scalar(0.0f);
  expect_rejected(m, ErrorCode::kFormat, {".input_scale", "> 0"});
  m[kLayer + ".input_scale"] = f32_scalar(NAN);
  expect_rejected(m, ErrorCode::kFormat, {".input_scale", "not finite"});
}

TEST(QuantizedLayersTest, EveryMalformedFp8AndMarkerCaseHasItsMessage) {
  TensorMap m = valid_fp8();
  m[kLayer + ".weight"] = filled({kN, kK}, DType::kBF16, 0);
  expect_rejected(m, ErrorCode::kFormat, {".weight", "expected F8_E4M3", "BF16"});
  m = valid_fp8();
  m[kLayer + ".weight"] = filled({kK, kN}, DType::kF8E4M3, 0);
  expect_rejected(m, ErrorCode::kFormat, {".weight", "[20, 40]", "[40, 20]"});
  m = valid_fp8();
  m.erase(kLayer + ".weight_scale");
  expect_rejected(m, ErrorCode::kFormat, {".weight_scale is missing"});
  m = valid_fp8();
  m[kLayer + ".weight_scale"] = filled({kN}, DType::kF32, 0);
  expect_rejected(m, ErrorCode::kFormat, {".weight_scale", "scalar"});
  m[kLayer + ".weight_scale"] = filled({}, DType::kBF16, 0);
  expect_rejected(m, ErrorCode::kFormat, {".weight_scale", "F32", "BF16"});
  m[kLayer + ".weight_scale"] = f32_scalar(-0.5f);
  expect_rejected(m, ErrorCode::kFormat, {".weight_scale", ">= 0"});
  m[kLayer + ".weight_scale"] = f32_scalar(NAN);
  expect_rejected(m, ErrorCode::kFormat, {".weight_scale", "not finite"});
  m = valid_fp8();
  m[kLayer + ".weight_scale_2"] = f32_scalar(1.0f);
  expect_rejected(m, ErrorCode::kFormat, {".weight_scale_2", "fp8_scaled"});

  m = valid_fp8();
  m[kLayer + ".comfy_quant"] = u8_json("{\"format\": nvfp4");
  expect_rejected(m, ErrorCode::kFormat, {"not valid JSON"});
  m[kLayer + ".comfy_quant"] = u8_json(R"({"format": "int8_tensorwise"})");
  expect_rejected(m, ErrorCode::kFormat, {"unknown quantization format 'int8_tensorwise'"});
  m[kLayer + ".comfy_quant"] = u8_json(R"({"fmt": "nvfp4"})");
  expect_rejected(m, ErrorCode::kFormat, {"string \"format\""});
  m[kLayer + ".comfy_quant"] = filled({4}, DType::kF32, 0);
  expect_rejected(m, ErrorCode::kFormat, {".comfy_quant", "U8"});
  m = valid_fp8();
  m.erase(kLayer + ".comfy_quant");
  expect_rejected(m, ErrorCode::kFormat, {"not valid JSON"}, "{bad");
  // Not quantized at all.
  m.clear();
  m[kLayer + ".weight"] = filled({kN, kK}, DType::kBF16, 0);
  expect_rejected(m, ErrorCode::kFormat, {"is not quantized"});
  m.clear();
  expect_rejected(m, ErrorCode::kFormat, {".weight is missing"});

  // pre_quant_scale: validated, then refused by read_quantized_linear (the GEMMs do not apply it).
  m = valid_nvfp4();
  m[kLayer + ".pre_quant_scale"] = filled({kK}, DType::kF32, 0);  // zeros: finite
  Result<QuantizedLinear> q = read_quantized_layer(kLayer, lookup_of(m), kN, kK);
  ASSERT_TRUE(q.ok()) << q.status().to_string();
  EXPECT_TRUE(q->pre_quant_scale.defined());
  expect_rejected(m, ErrorCode::kUnsupported, {"pre_quant_scale", "do not apply"});
  m[kLayer + ".pre_quant_scale"] = filled({kK + 1}, DType::kF32, 0);
  expect_rejected(m, ErrorCode::kFormat, {".pre_quant_scale", "[40]"});
  m[kLayer + ".pre_quant_scale"] = filled({kK}, DType::kF32, 0xFF);  // NaN
  expect_rejected(m, ErrorCode::kFormat, {".pre_quant_scale", "not finite"});
}

// E2M1 x E4M3 is exact in BF16 (<= 6 significant bits); with g = 2^e the dequantized weight is exact.
TEST(QuantizedLayersTest, Nvfp4DequantizationIsExact) {
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (auto [n, k] : {std::pair<int64_t, int64_t>{20, 40}, {128, 64}, {131, 272}}) {
    const Shape ds = nvfp4_weight_shape(n, k), ss = nvfp4_weight_scale_shape(n, k);
    Tensor data = Tensor::empty(ds, DType::kU8), scales = Tensor::empty(ss, DType::kF8E4M3);
    for (size_t i = 0; i < data.nbytes(); ++i) data.data<uint8_t>()[i] = static_cast<uint8_t>(rng());
    for (size_t i = 0; i < scales.nbytes(); ++i) scales.data<uint8_t>()[i] = static_cast<uint8_t>(rng() % 0x7F);
    const int e = static_cast<int>(rng() % 21) - 16;
    for (float g : {std::ldexp(1.0f, e), 0.00123f}) {
      LinearWeight w;
      w.format = QuantFormat::kNvfp4;
      w.weight = data;
      w.weight_scale = scales;
      w.weight_scale_2 = f32_scalar(g);
      w.out_features = n;
      w.in_features = k;
      Result<Tensor> deq = dequantize_linear_bf16(w);
      ASSERT_TRUE(deq.ok()) << deq.status().to_string();
      ASSERT_EQ(deq->shape(), (Shape{n, k}));
      const bool pow2 = g == std::ldexp(1.0f, e);
      int bad = 0;
      for (int64_t r = 0; r < n && bad < 5; ++r) {
        for (int64_t c = 0; c < k && bad < 5; ++c) {
          const uint8_t byte = data.data<uint8_t>()[r * ds[1] + c / 2];
          const uint8_t code = c % 2 == 0 ? byte >> 4 : byte & 0xF;  // even element in the high nibble
          const uint8_t s = scales.data<uint8_t>()[ref::nvfp4_scale_offset(r, c / 16, ss[1])];
          const double exact = static_cast<double>(f32_from_e2m1(code)) * f32_from_e4m3(s) * g;
          const float got = f32_from_bf16_bits(deq->data<uint16_t>()[r * k + c]);
          const bool ok = pow2 ? (got == exact && std::signbit(got) == std::signbit(exact))
                               : std::fabs(got - exact) <= std::ldexp(std::fabs(exact), -8);
          if (!ok) {
            ++bad;
            ADD_FAILURE() << "n=" << n << " k=" << k << " g=" << g << " (" << r << ", " << c << "): code " << int(code)
                          << " scale 0x" << std::hex << int(s) << std::dec << " -> " << got << ", exact " << exact;
          }
        }
      }
    }
  }
}

class QuantizeFp8Test : public ::testing::TestWithParam<CheckpointLayout> {};

TEST_P(QuantizeFp8Test, RoundTripWithinBoundAndUntouchedBytesEqual) {
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  testing::TempDir dir;
  const std::string in = write_synth(dir.path, seed, GetParam());
  ASSERT_FALSE(in.empty());
  std::filesystem::create_directories(dir.path + "/out");
  QuantizeOptions opt;
  opt.in = in;
  opt.out = dir.path + "/out/fp8.safetensors";
  opt.format = QuantFormat::kFp8Scaled;
  opt.layers = QuantizeLayerSet::kBlocksAndRefiner;
  std::vector<std::string> lines;
  Result<QuantizeSummary> s = quantize_checkpoint(opt, [&](const std::string& l) { lines.push_back(l); });
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ(s->layers_quantized, 12u);  // (2 blocks + 1 refiner block) x 4 GEMMs
  EXPECT_TRUE(s->copied_config_json);
  EXPECT_GE(lines.size(), s->tensors_in);

  Result<SafetensorsSet> a = SafetensorsSet::open(in);
  Result<SafetensorsSet> b = SafetensorsSet::open(opt.out);
  ASSERT_TRUE(a.ok() && b.ok());
  const std::string layout = GetParam() == CheckpointLayout::kOriginal ? kQkvInterleavedValue : kQkvBlockedValue;
  EXPECT_EQ(b->metadata().at(kQkvLayoutMetadataKey), layout);
  Result<CheckpointInfo> info = inspect_checkpoint(in);
  ASSERT_TRUE(info.ok());
  const std::string prefix = info->key_prefix;
  size_t checked_layers = 0;
  for (const std::string& name : a->names()) {
    Tensor x = a->tensor(name).value();
    const std::string canonical = name.substr(prefix.size());
    if (!is_quantize_target(canonical, opt.layers)) {
      Result<Tensor> y = b->tensor(name);
      ASSERT_TRUE(y.ok()) << name << " missing from the output";
      ASSERT_EQ(y->dtype(), x.dtype()) << name;
      ASSERT_EQ(y->shape(), x.shape()) << name;
      EXPECT_EQ(std::memcmp(x.raw_data(), y->raw_data(), x.nbytes()), 0) << name << " changed";
      continue;
    }
    const std::string layer = name.substr(0, name.size() - 7);
    Result<LinearWeight> w = read_quantized_linear(layer, quant_lookup_in(*b), x.dim(0), x.dim(1));
    ASSERT_TRUE(w.ok()) << w.status().to_string();
    ASSERT_EQ(w->format, QuantFormat::kFp8Scaled);
    Result<Tensor> deq = dequantize_linear_bf16(*w);
    ASSERT_TRUE(deq.ok()) << deq.status().to_string();
    // scale = amax / 448: e4m3 RNE is within 2^-4 relative (normals) or 2^-10 * scale absolute (subnormals);
    // the BF16 rounding of the dequantized value adds 2^-9 relative.
    const float scale = w->weight_scale.data<float>()[0];
    float amax = 0.0f;
    for (int64_t i = 0; i < x.numel(); ++i) amax = std::max(amax, std::fabs(f32_from_bf16_bits(x.data<uint16_t>()[i])));
    EXPECT_EQ(scale, amax / 448.0f) << layer;
    int bad = 0;
    for (int64_t i = 0; i < x.numel() && bad < 5; ++i) {
      const double v = f32_from_bf16_bits(x.data<uint16_t>()[i]);
      const double d = f32_from_bf16_bits(deq->data<uint16_t>()[i]);
      const double bound = std::fabs(v) * (0.0625 + 0.004) + std::ldexp(scale, -10) * 1.01;
      if (std::fabs(d - v) > bound) {
        ++bad;
        ADD_FAILURE() << layer << " element " << i << ": " << v << " -> " << d << " (bound " << bound << ")";
      }
    }
    ++checked_layers;
  }
  EXPECT_EQ(checked_layers, 12u);

  // The output loads through the checkpoint loader (fp8_scaled), QKV order as in the input.
  testing::HostMemoryBackend backend;
  Result<H3Weights> loaded = load_checkpoint(opt.out, ModelConfig::h3_tiny(), backend);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  EXPECT_EQ(loaded->blocks[1].attn_qkv_proj.format, QuantFormat::kFp8Scaled);
  EXPECT_EQ(loaded->token_refiner_blocks[0].mlp_fc2.format, QuantFormat::kFp8Scaled);
  Result<H3Weights> original = load_checkpoint(in, ModelConfig::h3_tiny(), backend);
  ASSERT_TRUE(original.ok()) << original.status().to_string();
  // Reordered QKV rows of the output dequantize close to the reordered original rows.
  LinearWeight qkv = loaded->blocks[0].attn_qkv_proj;
  Result<Tensor> deq = dequantize_linear_bf16(qkv);
  ASSERT_TRUE(deq.ok()) << deq.status().to_string();
  const Tensor& ow = original->blocks[0].attn_qkv_proj.weight;
  const float scale = qkv.weight_scale.data<float>()[0];
  for (int64_t i = 0; i < ow.numel(); ++i) {
    const double v = f32_from_bf16_bits(ow.data<uint16_t>()[i]);
    const double d = f32_from_bf16_bits(deq->data<uint16_t>()[i]);
    ASSERT_LE(std::fabs(d - v), std::fabs(v) * 0.0665 + std::ldexp(scale, -10) * 1.01) << "qkv element " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, QuantizeFp8Test,
                         ::testing::Values(CheckpointLayout::kOriginal, CheckpointLayout::kComfy));

TEST(QuantizeTest, BlocksOnlyLeavesRefinerAndShardedInputWorks) {
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  testing::TempDir dir;
  const std::string index = write_synth(dir.path, seed, CheckpointLayout::kOriginal, 0.001, "m.safetensors.index.json");
  QuantizeOptions opt;
  opt.in = index;
  opt.out = dir.path + "/q.safetensors";
  opt.format = QuantFormat::kFp8Scaled;
  Result<QuantizeSummary> s = quantize_checkpoint(opt);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ(s->layers_quantized, 8u);
  EXPECT_FALSE(s->copied_config_json);  // same directory
  Result<SafetensorsFile> f = SafetensorsFile::open(opt.out);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->header().find("token_refiner.blocks.0.mlp.fc1.weight")->dtype, DType::kBF16);
  EXPECT_EQ(f->header().find("blocks.1.mlp.fc1.weight")->dtype, DType::kF8E4M3);
  Tensor cq = f->tensor("blocks.1.mlp.fc1.comfy_quant").value();
  EXPECT_EQ(std::string(static_cast<const char*>(cq.raw_data()), cq.nbytes()), R"({"format": "float8_e4m3fn"})");
  EXPECT_EQ(f->header().find("blocks.1.mlp.fc1.weight_scale")->shape, Shape{});
}

TEST(QuantizeTest, RefusesQuantizedInputAndBadArguments) {
  testing::TempDir dir;
  const std::string in = write_synth(dir.path, 11, CheckpointLayout::kComfy);
  QuantizeOptions opt;
  opt.in = in;
  opt.out = dir.path + "/q.safetensors";
  opt.format = QuantFormat::kFp8Scaled;
  ASSERT_TRUE(quantize_checkpoint(opt).ok());
  // Quantizing the quantized output again is refused clearly, and nothing is written.
  opt.in = opt.out;
  opt.out = dir.path + "/qq.safetensors";
  Status st = quantize_checkpoint(opt).status();
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(st.message().find("already quantized"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("float8_e4m3fn"), std::string::npos) << st.message();
  EXPECT_FALSE(std::ifstream(opt.out).good());
  opt.format = QuantFormat::kNvfp4;  // no encoder injected
  opt.in = in;
  EXPECT_EQ(quantize_checkpoint(opt).status().code(), ErrorCode::kInternal);
  opt.format = QuantFormat::kFp8Scaled;
  opt.out = in;
  st = quantize_checkpoint(opt).status();
  EXPECT_NE(st.message().find("is one of the input files"), std::string::npos) << st.message();
  opt.out = dir.path + "/x.safetensors.index.json";
  EXPECT_EQ(quantize_checkpoint(opt).status().code(), ErrorCode::kUnsupported);
  // A target weight that is not BF16, and a file without block GEMM weights.
  const std::string f32_in = dir.path + "/f32.safetensors";
  ASSERT_TRUE(write_safetensors(f32_in, {{"blocks.0.mlp.fc1.weight", Tensor::zeros({32, 16}, DType::kF32)}}).ok());
  opt.in = f32_in;
  opt.out = dir.path + "/f32_q.safetensors";
  st = quantize_checkpoint(opt).status();
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(st.message().find("expects 2-D BF16"), std::string::npos) << st.message();
  ASSERT_TRUE(write_safetensors(f32_in, {{"final_layer.norm.weight", Tensor::zeros({16}, DType::kBF16)}}).ok());
  st = quantize_checkpoint(opt).status();
  EXPECT_NE(st.message().find("no block GEMM weights"), std::string::npos) << st.message();
  EXPECT_EQ(quantize_format_from_name("int4").status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(quantize_layer_set_from_name("all").status().code(), ErrorCode::kInvalidArgument);
  EXPECT_TRUE(is_quantize_target("blocks.12.mlp.fc2.weight", QuantizeLayerSet::kBlocks));
  EXPECT_FALSE(is_quantize_target("blocks.12.mlp.fc2.bias", QuantizeLayerSet::kBlocks));
  EXPECT_FALSE(is_quantize_target("blocks.x.mlp.fc2.weight", QuantizeLayerSet::kBlocks));
  EXPECT_FALSE(is_quantize_target("blocks.1.adaln_proj.linear.weight", QuantizeLayerSet::kBlocksAndRefiner));
  EXPECT_FALSE(is_quantize_target("token_refiner.blocks.0.attn.qkv_proj.weight", QuantizeLayerSet::kBlocks));
  EXPECT_TRUE(is_quantize_target("token_refiner.blocks.0.attn.qkv_proj.weight", QuantizeLayerSet::kBlocksAndRefiner));
}

// Quantizing the per-head-interleaved file and reordering its QKV rows gives exactly the bytes of quantizing
// the [q|k|v] (ComfyUI) file of the same weights: what a loader of original-layout quantized files relies on.
TEST(QuantizeTest, Fp8QkvRowPermutationCommutesWithQuantization) {
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  testing::TempDir dir;
  QuantizeOptions opt;
  opt.format = QuantFormat::kFp8Scaled;
  auto sets = quantize_both_layouts(dir.path, seed, opt);
  ASSERT_TRUE(sets.ok()) << sets.status().to_string();
  const SafetensorsSet* a = &sets->first;
  const SafetensorsSet* b = &sets->second;
  const ModelConfig c = ModelConfig::h3_tiny();
  const int64_t n = 3LL * c.num_heads * c.head_dim, k = c.hidden;
  for (int i = 0; i < c.num_layers; ++i) {
    const std::string layer = "blocks." + std::to_string(i) + ".attn.qkv_proj";
    Result<LinearWeight> wa = read_quantized_linear(layer, quant_lookup_in(*a), n, k);
    Result<LinearWeight> wb = read_quantized_linear("diffusion_model." + layer, quant_lookup_in(*b), n, k);
    ASSERT_TRUE(wa.ok() && wb.ok());
    Result<LinearWeight> p = permute_quantized_rows(*wa, qkv_interleaved_to_blocked_rows(c.num_heads, c.head_dim));
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    EXPECT_EQ(std::memcmp(p->weight.raw_data(), wb->weight.raw_data(), wb->weight.nbytes()), 0) << layer;
    EXPECT_EQ(p->weight_scale.data<float>()[0], wb->weight_scale.data<float>()[0]) << layer;
  }
  std::vector<int64_t> not_a_permutation(static_cast<size_t>(n), 0);
  LinearWeight any = read_quantized_linear("blocks.0.attn.qkv_proj", quant_lookup_in(*a), n, k).value();
  EXPECT_EQ(permute_quantized_rows(any, not_a_permutation).status().code(), ErrorCode::kInvalidArgument);
}

// A tensor of more than one 1M-element chunk, quantized on 2 threads, equals one whole-buffer call.
TEST(QuantizeTest, Fp8ThreadedChunksMatchOneCall) {
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.03f);
  const int64_t n = 1100, k = 1000;
  Tensor w = Tensor::empty({n, k}, DType::kBF16);  // [1100, 1000] bf16
  for (int64_t i = 0; i < n * k; ++i) w.data<uint16_t>()[i] = bf16_bits_from_f32(normal(rng));
  testing::TempDir dir;
  const std::string in = dir.path + "/in.safetensors";
  ASSERT_TRUE(write_safetensors(in, {{"blocks.0.attn.out_proj.weight", w}}).ok());
  QuantizeOptions opt;
  opt.in = in;
  opt.out = dir.path + "/q.safetensors";
  opt.format = QuantFormat::kFp8Scaled;
  opt.threads = 2;
  ASSERT_TRUE(quantize_checkpoint(opt).ok());
  Result<SafetensorsSet> b = SafetensorsSet::open(opt.out);
  ASSERT_TRUE(b.ok());
  Result<LinearWeight> q = read_quantized_linear("blocks.0.attn.out_proj", quant_lookup_in(*b), n, k);
  ASSERT_TRUE(q.ok()) << q.status().to_string();
  uint16_t amax = 0;
  for (int64_t i = 0; i < n * k; ++i) amax = std::max<uint16_t>(amax, w.data<uint16_t>()[i] & 0x7FFF);
  const float scale = fp8_scaled_weight_scale(amax);
  EXPECT_EQ(q->weight_scale.data<float>()[0], scale);
  std::vector<uint8_t> expected(static_cast<size_t>(n * k));
  fp8_scaled_quantize(w.data<uint16_t>(), n * k, scale, expected.data());
  EXPECT_EQ(std::memcmp(q->weight.raw_data(), expected.data(), expected.size()), 0);
}

TEST(QuantizeTest, Fp8FormulaOnEdgeValues) {
  EXPECT_EQ(fp8_scaled_weight_scale(0), 1.0f);  // all-zero weight: scale 1, codes 0
  const uint16_t amax = bf16_bits_from_f32(0.75f);
  const float scale = fp8_scaled_weight_scale(amax);
  EXPECT_EQ(scale, 0.75f / 448.0f);
  const uint16_t w[4] = {amax, static_cast<uint16_t>(amax | 0x8000), 0x8000, bf16_bits_from_f32(1e-6f)};
  uint8_t q[4];
  fp8_scaled_quantize(w, 4, scale, q);
  EXPECT_EQ(q[0], 0x7E);  // +448
  EXPECT_EQ(q[1], 0xFE);  // -448
  EXPECT_EQ(q[2], 0x80);  // -0 keeps its sign
  EXPECT_EQ(q[3], e4m3_from_f32(f32_from_bf16_bits(w[3]) / scale));
}

}  // namespace
}  // namespace vortex
