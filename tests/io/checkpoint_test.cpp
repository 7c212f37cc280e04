// Checkpoint tests: synthetic h3-tiny files written by write_synthetic_checkpoint (the `vortex synth`
// engine) in both layouts and sharded load back to exactly synthesize_weights(); the layout rule and
// its override; validation messages for missing / unexpected / mismatched tensors; fp8_scaled loading;
// NVFP4 recognised and refused clearly; QKV reorder against an independent index formula; config
// inference. Backend: HostMemoryBackend, a memory-only test double (tests/io/host_test_backend.h).
#include "io/checkpoint.h"

#include <cmath>
#include <cstring>
#include <random>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "host_test_backend.h"
#include "io/synth_checkpoint.h"
#include "model/h3_spec.h"
#include "synth_checkpoint_util.h"
#include "test_files.h"

namespace vortex {
namespace {

using testing::HostMemoryBackend;
using testing::TempDir;

using TensorList = std::vector<std::pair<std::string, Tensor>>;

TensorList read_all(const std::string& path, std::map<std::string, std::string>* metadata = nullptr) {
  Result<SafetensorsFile> f = SafetensorsFile::open(path);
  EXPECT_TRUE(f.ok()) << f.status().to_string();
  TensorList out;
  if (!f.ok()) return out;
  for (const SafetensorsEntry& e : f->entries()) out.emplace_back(e.name, f->tensor(e.name).value());
  if (metadata) *metadata = f->metadata();
  return out;
}

H3Weights synthesized(uint64_t seed) {
  HostMemoryBackend backend;
  Result<H3Weights> w = synthesize_weights(ModelConfig::h3_tiny(), backend, seed);
  EXPECT_TRUE(w.ok()) << w.status().to_string();
  return std::move(w).value();
}

class CheckpointLayoutTest : public ::testing::TestWithParam<CheckpointLayout> {};

TEST_P(CheckpointLayoutTest, SynthFileLoadsToSynthesizedWeights) {
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  TempDir dir;
  const std::string path = write_synth(dir.path, seed, GetParam());
  Result<CheckpointInfo> info = inspect_checkpoint(path);
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  EXPECT_TRUE(info->is_h3);
  EXPECT_EQ(info->layout, GetParam());
  EXPECT_EQ(info->key_prefix, GetParam() == CheckpointLayout::kComfy ? "diffusion_model." : "");
  EXPECT_EQ(info->total_bytes, static_cast<uint64_t>(h3_total_bytes(ModelConfig::h3_tiny())));

  HostMemoryBackend backend;
  Result<H3Weights> loaded = load_checkpoint(path, ModelConfig::h3_tiny(), backend);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  H3Weights expected = synthesized(seed);
  expect_same_weights(*loaded, expected);
  EXPECT_EQ(loaded->blocks[1].mlp_fc1.out_features, 2 * 512);
  EXPECT_EQ(loaded->blocks[1].attn_qkv_proj.format, QuantFormat::kNone);

  // The file's QKV rows: per-head interleaved for the original layout, [q|k|v] for comfy.
  const ModelConfig c = ModelConfig::h3_tiny();
  Result<SafetensorsFile> f = SafetensorsFile::open(path);
  ASSERT_TRUE(f.ok());
  Tensor raw = f->tensor(info->key_prefix + "blocks.0.attn.qkv_proj.weight").value();
  Tensor interleaved = Tensor::empty(raw.shape(), raw.dtype());
  ASSERT_TRUE(
      qkv_blocked_to_interleaved(expected.blocks[0].attn_qkv_proj.weight, interleaved, c.num_heads, c.head_dim).ok());
  const Tensor& want =
      GetParam() == CheckpointLayout::kOriginal ? interleaved : expected.blocks[0].attn_qkv_proj.weight;
  EXPECT_EQ(std::memcmp(raw.raw_data(), want.raw_data(), raw.nbytes()), 0);
  EXPECT_NE(std::memcmp(interleaved.raw_data(), expected.blocks[0].attn_qkv_proj.weight.raw_data(), raw.nbytes()), 0);
}

INSTANTIATE_TEST_SUITE_P(Layouts, CheckpointLayoutTest,
                         ::testing::Values(CheckpointLayout::kOriginal, CheckpointLayout::kComfy),
                         [](const auto& info) { return std::string(checkpoint_layout_name(info.param)); });

TEST(CheckpointTest, ShardedSynthLoads) {
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  TempDir dir;
  const std::string index = write_synth(dir.path, seed, CheckpointLayout::kOriginal, 0.001, "m.safetensors.index.json");
  ASSERT_TRUE(is_safetensors_index_path(index)) << index;
  Result<CheckpointInfo> info = inspect_checkpoint(index);
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  EXPECT_GE(info->files.size(), 3u);
  HostMemoryBackend backend;
  Result<H3Weights> loaded = load_checkpoint(index, ModelConfig::h3_tiny(), backend);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  H3Weights expected = synthesized(seed);
  expect_same_weights(*loaded, expected);
}

TEST(CheckpointTest, LayoutRuleAndOverride) {
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  TempDir dir;
  const std::string path = write_synth(dir.path, seed, CheckpointLayout::kOriginal);
  TensorList tensors = read_all(path);
  // No vortex metadata, no prefix: the original MiniMax release.
  const std::string plain = dir.path + "/plain.safetensors";
  ASSERT_TRUE(write_safetensors(plain, tensors).ok());
  Result<CheckpointInfo> info = inspect_checkpoint(plain);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->layout, CheckpointLayout::kOriginal);
  EXPECT_NE(info->layout_reason.find("no ComfyUI markers"), std::string::npos);
  // Same (interleaved) bytes under the ComfyUI prefix: the rule says comfy, the override fixes it.
  TensorList prefixed;
  for (auto& [n, t] : tensors) prefixed.emplace_back("diffusion_model." + n, t);
  const std::string pre = dir.path + "/prefixed.safetensors";
  ASSERT_TRUE(write_safetensors(pre, prefixed).ok());
  info = inspect_checkpoint(pre);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->layout, CheckpointLayout::kComfy);
  HostMemoryBackend backend;
  H3Weights expected = synthesized(seed);
  Result<H3Weights> wrong = load_checkpoint(pre, ModelConfig::h3_tiny(), backend);
  ASSERT_TRUE(wrong.ok());
  EXPECT_NE(
      std::memcmp(wrong->blocks[0].attn_qkv_proj.weight.raw_data(), expected.blocks[0].attn_qkv_proj.weight.raw_data(),
                  expected.blocks[0].attn_qkv_proj.weight.nbytes()),
      0);
  // Keys outside the prefix (a bundled VAE) are ignored; unexpected keys inside it are not.
  prefixed.emplace_back("first_stage_model.decoder.weight", Tensor::zeros({3}, DType::kF32));
  ASSERT_TRUE(write_safetensors(pre, prefixed).ok());
  Result<H3Weights> right = load_checkpoint(pre, ModelConfig::h3_tiny(), backend, CheckpointLayout::kOriginal);
  ASSERT_TRUE(right.ok()) << right.status().to_string();
  expect_same_weights(*right, expected);
  prefixed.emplace_back("diffusion_model.blocks.0.extra", Tensor::zeros({3}, DType::kF32));
  ASSERT_TRUE(write_safetensors(pre, prefixed).ok());
  Status s = load_checkpoint(pre, ModelConfig::h3_tiny(), backend, CheckpointLayout::kOriginal).status();
  EXPECT_EQ(s.code(), ErrorCode::kFormat);
  EXPECT_NE(s.message().find("diffusion_model.blocks.0.extra"), std::string::npos) << s.message();
  EXPECT_EQ(s.message().find("first_stage_model"), std::string::npos) << s.message();
  // An invalid metadata value is a format error.
  ASSERT_TRUE(write_safetensors(plain, tensors, {{kQkvLayoutMetadataKey, "sideways"}}).ok());
  EXPECT_EQ(inspect_checkpoint(plain).status().code(), ErrorCode::kFormat);
  EXPECT_EQ(checkpoint_layout_from_name("bogus").status().code(), ErrorCode::kInvalidArgument);
}

TEST(CheckpointTest, ValidationListsEveryProblem) {
  TempDir dir;
  const std::string path = write_synth(dir.path, 7, CheckpointLayout::kOriginal);
  std::map<std::string, std::string> md;
  TensorList tensors = read_all(path, &md);
  TensorList edited;
  for (auto& [n, t] : tensors) {
    if (n == "blocks.1.norm2.weight") continue;                                                     // missing
    if (n == "condition_proj.bias") edited.emplace_back(n, Tensor::zeros(t.shape(), DType::kF32));  // wrong dtype
    else if (n == "blocks.0.mlp.fc2.weight") edited.emplace_back(n, Tensor::zeros({256, 511}, DType::kBF16));
    else edited.emplace_back(n, t);
  }
  edited.emplace_back("extra.tensor", Tensor::zeros({2}, DType::kF32));  // unexpected
  const std::string bad = dir.path + "/bad.safetensors";
  ASSERT_TRUE(write_safetensors(bad, edited, md).ok());
  HostMemoryBackend backend;
  Status s = load_checkpoint(bad, ModelConfig::h3_tiny(), backend).status();
  EXPECT_EQ(s.code(), ErrorCode::kFormat);
  for (const char* needle :
       {"blocks.1.norm2.weight", "extra.tensor", "condition_proj.bias", "blocks.0.mlp.fc2.weight", "[256, 511]"})
    EXPECT_NE(s.message().find(needle), std::string::npos) << needle << " not in: " << s.message();

  // A config with more blocks than the file.
  ModelConfig more = ModelConfig::h3_tiny();
  more.num_layers = 3;
  s = load_checkpoint(path, more, backend).status();
  EXPECT_EQ(s.code(), ErrorCode::kFormat);
  EXPECT_NE(s.message().find("blocks.2.norm1.weight"), std::string::npos) << s.message();
  // rope.inv_freq is optional (diffusers drops it).
  TensorList no_rope;
  for (auto& [n, t] : tensors)
    if (n != "rope.inv_freq") no_rope.emplace_back(n, t);
  ASSERT_TRUE(write_safetensors(bad, no_rope, md).ok());
  Result<H3Weights> w = load_checkpoint(bad, ModelConfig::h3_tiny(), backend);
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  EXPECT_FALSE(w->rope_inv_freq.defined());
}

Tensor u8_json(const std::string& text) {
  Tensor t = Tensor::empty({static_cast<int64_t>(text.size())}, DType::kU8);
  std::memcpy(t.raw_data(), text.data(), text.size());
  return t;
}

TEST(CheckpointTest, Fp8ScaledLayerLoads) {
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  TempDir dir;
  const std::string path = write_synth(dir.path, seed, CheckpointLayout::kOriginal);
  std::map<std::string, std::string> md;
  TensorList tensors = read_all(path, &md);
  Tensor fp8, scale = Tensor::empty({}, DType::kF32);
  scale.data<float>()[0] = 0.0125f;
  TensorList edited;
  for (auto& [n, t] : tensors) {
    if (n == "blocks.0.mlp.fc2.weight") {
      fp8 = Tensor::empty(t.shape(), DType::kF8E4M3);
      for (int64_t i = 0; i < t.numel(); ++i)
        fp8.data<uint8_t>()[i] = e4m3_from_f32(f32_from_bf16_bits(t.data<uint16_t>()[i]) / 0.0125f);
      edited.emplace_back(n, fp8);
      edited.emplace_back("blocks.0.mlp.fc2.weight_scale", scale);
      edited.emplace_back("blocks.0.mlp.fc2.comfy_quant", u8_json(R"({"format": "float8_e4m3fn"})"));
    } else {
      edited.emplace_back(n, t);
    }
  }
  const std::string q = dir.path + "/fp8.safetensors";
  ASSERT_TRUE(write_safetensors(q, edited, md).ok());
  Result<CheckpointInfo> info = inspect_checkpoint(q);
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  ASSERT_EQ(info->quantized_layers.size(), 1u);
  EXPECT_EQ(info->quantized_layers[0].layer, "blocks.0.mlp.fc2");
  EXPECT_EQ(info->quantized_layers[0].format, QuantFormat::kFp8Scaled);
  EXPECT_EQ(info->quantized_layers[0].source, "comfy_quant");
  EXPECT_NE(checkpoint_report_text(*info).find("[float8_e4m3fn]"), std::string::npos);
  HostMemoryBackend backend;
  Result<H3Weights> w = load_checkpoint(q, ModelConfig::h3_tiny(), backend);
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  const LinearWeight& lw = w->blocks[0].mlp_fc2;
  EXPECT_EQ(lw.format, QuantFormat::kFp8Scaled);
  EXPECT_EQ(lw.weight.dtype(), DType::kF8E4M3);
  EXPECT_EQ(std::memcmp(lw.weight.raw_data(), fp8.raw_data(), fp8.nbytes()), 0);
  EXPECT_EQ(lw.weight_scale.data<float>()[0], 0.0125f);
  EXPECT_EQ(w->blocks[1].mlp_fc2.format, QuantFormat::kNone);
  // Missing weight_scale: a clear mismatch error.
  TensorList no_scale;
  for (auto& [n, t] : edited)
    if (n != "blocks.0.mlp.fc2.weight_scale") no_scale.emplace_back(n, t);
  ASSERT_TRUE(write_safetensors(q, no_scale, md).ok());
  Status s = load_checkpoint(q, ModelConfig::h3_tiny(), backend).status();
  EXPECT_EQ(s.code(), ErrorCode::kFormat);
  EXPECT_NE(s.message().find("weight_scale"), std::string::npos) << s.message();
}

Tensor random_bytes(std::mt19937_64& rng, Shape shape, DType dtype) {
  Tensor t = Tensor::empty(std::move(shape), dtype);
  for (size_t i = 0; i < t.nbytes(); ++i) static_cast<uint8_t*>(t.raw_data())[i] = static_cast<uint8_t>(rng() & 0x7E);
  return t;
}

TEST(CheckpointTest, Nvfp4LayersLoadAndBadOnesAreRefusedClearly) {
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  TempDir dir;
  const std::string path = write_synth(dir.path, 3, CheckpointLayout::kComfy);
  std::map<std::string, std::string> md;
  TensorList tensors = read_all(path, &md);
  // out_proj [256, 256]: packed [256, 128] U8, tiled scales [ru(256,128), ru(256/16, 4)] = [256, 16].
  const std::string layer = "diffusion_model.blocks.1.attn.out_proj";
  Tensor packed = random_bytes(rng, {256, 128}, DType::kU8);
  Tensor scales = random_bytes(rng, {256, 16}, DType::kU8);  // U8 accepted, viewed as e4m3
  Tensor scale2 = Tensor::empty({}, DType::kF32);
  scale2.data<float>()[0] = 0.375f;
  Tensor input_scale = Tensor::empty({}, DType::kF32);
  input_scale.data<float>()[0] = 0.5f;
  auto build = [&](const Tensor& block_scales, bool marker) {
    TensorList edited;
    for (auto& [n, t] : tensors) {
      if (n == layer + ".weight") {
        edited.emplace_back(n, packed);
        edited.emplace_back(layer + ".weight_scale", block_scales);
        edited.emplace_back(layer + ".weight_scale_2", scale2);
        edited.emplace_back(layer + ".input_scale", input_scale);
        if (marker) edited.emplace_back(layer + ".comfy_quant", u8_json(R"({"format":"nvfp4"})"));
      } else {
        edited.emplace_back(n, t);
      }
    }
    return edited;
  };
  const std::string q = dir.path + "/nvfp4.safetensors";
  ASSERT_TRUE(write_safetensors(q, build(scales, true), md).ok());
  Result<CheckpointInfo> info = inspect_checkpoint(q);
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  ASSERT_EQ(info->quantized_layers.size(), 1u);
  EXPECT_EQ(info->quantized_layers[0].format, QuantFormat::kNvfp4);
  EXPECT_TRUE(info->quantized_layers[0].has_input_scale);
  nlohmann::json j = nlohmann::json::parse(checkpoint_report_json(*info));
  EXPECT_EQ(j["quantized_layers"][0]["format"], "nvfp4");
  HostMemoryBackend backend;
  Result<H3Weights> w = load_checkpoint(q, ModelConfig::h3_tiny(), backend);
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  const LinearWeight& lw = w->blocks[1].attn_out_proj;
  EXPECT_EQ(lw.format, QuantFormat::kNvfp4);
  EXPECT_EQ(lw.out_features, 256);
  EXPECT_EQ(lw.in_features, 256);
  EXPECT_EQ(lw.weight.shape(), (Shape{256, 128}));
  EXPECT_EQ(std::memcmp(lw.weight.raw_data(), packed.raw_data(), packed.nbytes()), 0);
  EXPECT_EQ(lw.weight_scale.dtype(), DType::kF8E4M3);
  EXPECT_EQ(std::memcmp(lw.weight_scale.raw_data(), scales.raw_data(), scales.nbytes()), 0);
  EXPECT_EQ(lw.weight_scale_2.data<float>()[0], 0.375f);
  EXPECT_TRUE(lw.input_scale.defined());

  // Block scales in the wrong (untiled) shape: a format error naming the tensor and the expected shape.
  ASSERT_TRUE(write_safetensors(q, build(random_bytes(rng, {256, 8}, DType::kF8E4M3), true), md).ok());
  Status s = load_checkpoint(q, ModelConfig::h3_tiny(), backend).status();
  EXPECT_EQ(s.code(), ErrorCode::kFormat);
  EXPECT_NE(s.message().find("blocks.1.attn.out_proj.weight_scale"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("[256, 16]"), std::string::npos) << s.message();

  // The __metadata__ marker instead of a comfy_quant tensor.
  md["_quantization_metadata"] = R"({"layers": {"diffusion_model.blocks.1.attn.out_proj": {"format": "nvfp4"}}})";
  ASSERT_TRUE(write_safetensors(q, build(scales, false), md).ok());
  info = inspect_checkpoint(q);
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  ASSERT_EQ(info->quantized_layers.size(), 1u);
  EXPECT_EQ(info->quantized_layers[0].layer, "blocks.1.attn.out_proj");
  EXPECT_EQ(info->quantized_layers[0].source, "_quantization_metadata");
  EXPECT_TRUE(load_checkpoint(q, ModelConfig::h3_tiny(), backend).ok());
  // An unknown format: reported by inspect, refused by the loader.
  md["_quantization_metadata"] = R"({"layers": {"blocks.1.attn.out_proj": {"format": "int8_tensorwise"}}})";
  ASSERT_TRUE(write_safetensors(q, build(scales, false), md).ok());
  info = inspect_checkpoint(q);
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  EXPECT_FALSE(info->warnings.empty());
  s = load_checkpoint(q, ModelConfig::h3_tiny(), backend).status();
  EXPECT_EQ(s.code(), ErrorCode::kUnsupported);
  EXPECT_NE(s.message().find("int8_tensorwise"), std::string::npos) << s.message();
  md["_quantization_metadata"] = "{not json";
  ASSERT_TRUE(write_safetensors(q, build(scales, false), md).ok());
  EXPECT_EQ(inspect_checkpoint(q).status().code(), ErrorCode::kFormat);

  // nvfp4 fused QKV: loaded as is in the comfy [q|k|v] layout; in the per-head interleaved layout the
  // packed rows are reordered like a BF16 QKV (checked with qkv_interleaved_to_blocked on the bytes).
  md.erase("_quantization_metadata");
  TensorList qkv;
  const std::string qkv_layer = "diffusion_model.blocks.0.attn.qkv_proj";
  Tensor qkv_packed = random_bytes(rng, {768, 128}, DType::kU8);
  for (auto& [n, t] : tensors) {
    if (n == qkv_layer + ".weight") {
      qkv.emplace_back(n, qkv_packed);
      qkv.emplace_back(qkv_layer + ".weight_scale", random_bytes(rng, {768, 16}, DType::kF8E4M3));
      qkv.emplace_back(qkv_layer + ".weight_scale_2", scale2);
      qkv.emplace_back(qkv_layer + ".comfy_quant", u8_json(R"({"format":"nvfp4"})"));
    } else {
      qkv.emplace_back(n, t);
    }
  }
  ASSERT_TRUE(write_safetensors(q, qkv, md).ok());
  Result<H3Weights> blocked = load_checkpoint(q, ModelConfig::h3_tiny(), backend);
  ASSERT_TRUE(blocked.ok()) << blocked.status().to_string();
  EXPECT_EQ(std::memcmp(blocked->blocks[0].attn_qkv_proj.weight.raw_data(), qkv_packed.raw_data(), qkv_packed.nbytes()),
            0);
  Result<H3Weights> reordered = load_checkpoint(q, ModelConfig::h3_tiny(), backend, CheckpointLayout::kOriginal);
  ASSERT_TRUE(reordered.ok()) << reordered.status().to_string();
  Tensor want = Tensor::empty(qkv_packed.shape(), DType::kU8);
  ASSERT_TRUE(qkv_interleaved_to_blocked(qkv_packed, want, 4, 64).ok());
  EXPECT_EQ(reordered->blocks[0].attn_qkv_proj.format, QuantFormat::kNvfp4);
  EXPECT_EQ(std::memcmp(reordered->blocks[0].attn_qkv_proj.weight.raw_data(), want.raw_data(), want.nbytes()), 0);
}

TEST(CheckpointTest, QkvReorderMatchesIndexFormula) {
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (int trial = 0; trial < 5; ++trial) {
    const int heads = 1 + static_cast<int>(rng() % 5), head_dim = 2 + static_cast<int>(rng() % 7);
    const int64_t k = 1 + static_cast<int64_t>(rng() % 9), rows = 3LL * heads * head_dim, inner = heads * head_dim;
    Tensor src = Tensor::empty({rows, k}, DType::kBF16);
    for (int64_t i = 0; i < src.numel(); ++i) src.data<uint16_t>()[i] = static_cast<uint16_t>(rng());
    Tensor dst = Tensor::empty(src.shape(), src.dtype());
    ASSERT_TRUE(qkv_interleaved_to_blocked(src, dst, heads, head_dim).ok());
    // Independent formulation: decompose the destination row.
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t which = r / inner, head = (r % inner) / head_dim, e = r % head_dim;
      const int64_t from = head * (3 * head_dim) + which * head_dim + e;
      for (int64_t c = 0; c < k; ++c)
        ASSERT_EQ(dst.data<uint16_t>()[r * k + c], src.data<uint16_t>()[from * k + c])
            << "row " << r << " heads " << heads << " head_dim " << head_dim;
    }
    Tensor back = Tensor::empty(src.shape(), src.dtype());
    ASSERT_TRUE(qkv_blocked_to_interleaved(dst, back, heads, head_dim).ok());
    EXPECT_EQ(std::memcmp(back.raw_data(), src.raw_data(), src.nbytes()), 0);
  }
  Tensor bad = Tensor::empty({10, 2}, DType::kBF16), out = Tensor::empty({10, 2}, DType::kBF16);
  EXPECT_EQ(qkv_interleaved_to_blocked(bad, out, 2, 2).code(), ErrorCode::kInvalidArgument);
}

TEST(CheckpointTest, ConfigFromJsonOrShapes) {
  TempDir dir;
  const std::string path = write_synth(dir.path, 1, CheckpointLayout::kComfy);
  const ModelConfig tiny = ModelConfig::h3_tiny();
  auto same_dims = [&](const ModelConfig& c) {
    EXPECT_EQ(c.num_layers, tiny.num_layers);
    EXPECT_EQ(c.num_refiner_layers, tiny.num_refiner_layers);
    EXPECT_EQ(c.hidden, tiny.hidden);
    EXPECT_EQ(c.num_heads, tiny.num_heads);
    EXPECT_EQ(c.head_dim, tiny.head_dim);
    EXPECT_EQ(c.ffn, tiny.ffn);
    EXPECT_EQ(c.in_channels, tiny.in_channels);
    EXPECT_EQ(c.audio_in_channels, tiny.audio_in_channels);
    EXPECT_EQ(c.text_dim, tiny.text_dim);
    EXPECT_EQ(c.freq_dim, tiny.freq_dim);
    EXPECT_EQ(c.time_embed_hidden, tiny.time_embed_hidden);
    EXPECT_EQ(c.time_embed_dim, tiny.time_embed_dim);
    EXPECT_EQ(c.rope_inv_freq_len, tiny.rope_inv_freq_len);
  };
  Result<ModelConfig> from_json = config_for_checkpoint(path);
  ASSERT_TRUE(from_json.ok()) << from_json.status().to_string();
  EXPECT_EQ(from_json->name, "h3-tiny");
  same_dims(*from_json);
  ASSERT_EQ(std::remove((dir.path + "/config.json").c_str()), 0);
  Result<ModelConfig> inferred = config_for_checkpoint(path);
  ASSERT_TRUE(inferred.ok()) << inferred.status().to_string();
  EXPECT_EQ(inferred->name, "inferred");
  same_dims(*inferred);
  testing::write_file_bytes(dir.path + "/config.json", "{\"hidden_size\": \"wide\"}");
  Status s = config_for_checkpoint(path).status();
  EXPECT_EQ(s.code(), ErrorCode::kFormat);
  EXPECT_NE(s.message().find("hidden_size"), std::string::npos) << s.message();
}

TEST(CheckpointTest, InspectReport) {
  TempDir dir;
  const std::string path = write_synth(dir.path, 5, CheckpointLayout::kOriginal);
  Result<CheckpointInfo> info = inspect_checkpoint(path);
  ASSERT_TRUE(info.ok());
  const std::string text = checkpoint_report_text(*info);
  for (const char* needle :
       {"layout: original", "blocks.1.adaln_proj.linear.weight", "[4608, 128]", "BF16", "F32", "quantized layers: 0"})
    EXPECT_NE(text.find(needle), std::string::npos) << needle << "\n" << text;
  nlohmann::json j = nlohmann::json::parse(checkpoint_report_json(*info));
  EXPECT_EQ(j["tensor_count"].get<size_t>(), h3_tensor_specs(ModelConfig::h3_tiny()).size());
  EXPECT_EQ(j["total_bytes"].get<uint64_t>(), static_cast<uint64_t>(h3_total_bytes(ModelConfig::h3_tiny())));
  EXPECT_EQ(j["layout"], "original");
  // Any safetensors file can be inspected, H3 or not.
  ASSERT_TRUE(write_safetensors(dir.path + "/lat.safetensors", {{"video", Tensor::zeros({2, 3}, DType::kF32)}}).ok());
  info = inspect_checkpoint(dir.path + "/lat.safetensors");
  ASSERT_TRUE(info.ok());
  EXPECT_FALSE(info->is_h3);
  EXPECT_NE(checkpoint_report_text(*info).find("not an H3"), std::string::npos);
}

TEST(H3SpecTest, SynthesizedValuesFollowTheDocumentedScales) {
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const ModelConfig c = ModelConfig::h3_tiny();
  H3Weights w = synthesized(seed);
  auto values = [](const Tensor& t) {
    std::vector<double> v(static_cast<size_t>(t.numel()));
    for (int64_t i = 0; i < t.numel(); ++i)
      v[static_cast<size_t>(i)] =
          t.dtype() == DType::kF32 ? t.data<float>()[i] : f32_from_bf16_bits(t.data<uint16_t>()[i]);
    return v;
  };
  auto check_range = [&](const char* name, const Tensor& t, double lo, double hi) {
    std::vector<double> v = values(t);
    lo -= std::fabs(lo) / 256;  // BF16 rounding of the bound (half an ulp is 2^-9 relative)
    hi += std::fabs(hi) / 256;
    double mn = *std::min_element(v.begin(), v.end()), mx = *std::max_element(v.begin(), v.end());
    EXPECT_GE(mn, lo) << name;
    EXPECT_LE(mx, hi) << name;
    EXPECT_LT(mn + 0.5 * (hi - lo), mx) << name << " does not fill its range";  // random, not constant
  };
  const double a_qkv = std::sqrt(3.0 / c.hidden);
  check_range("qkv", w.blocks[0].attn_qkv_proj.weight, -a_qkv, a_qkv);
  check_range("norm1", w.blocks[1].norm1_weight, 0.9, 1.1);
  check_range("q_norm", w.token_refiner_blocks[0].attn_q_norm_weight, 0.9, 1.1);
  const double a_ada = 0.1 * std::sqrt(3.0 / c.time_embed_dim);
  check_range("adaln", w.blocks[0].adaln_proj_linear_weight, -a_ada, a_ada);
  check_range("video_patch_proj", w.video_patch_proj_weight, -std::sqrt(3.0 / 96), std::sqrt(3.0 / 96));
  EXPECT_EQ(w.video_patch_proj_weight.dtype(), DType::kF32);
  EXPECT_EQ(w.condition_proj_weight.dtype(), DType::kBF16);
  // rope.inv_freq: the reference's FP32 steps, 1.0 / (theta ** (arange(0, 2L, 2) / 2L)).
  for (int k = 0; k < c.rope_inv_freq_len; ++k)
    EXPECT_EQ(w.rope_inv_freq.data<float>()[k], 1.0f / static_cast<float>(std::pow(10000.0, float(2 * k) / 16.0f)))
        << k;
  // Tensors of one model differ from each other (per-name seeds) and across seeds.
  EXPECT_NE(std::memcmp(w.blocks[0].norm1_weight.raw_data(), w.blocks[0].norm2_weight.raw_data(), 512), 0);
  H3Weights other = synthesized(seed + 1);
  EXPECT_NE(std::memcmp(w.blocks[0].norm1_weight.raw_data(), other.blocks[0].norm1_weight.raw_data(), 512), 0);
}

TEST(H3SpecTest, FullModelNumbers) {
  const ModelConfig h3 = ModelConfig::h3();
  std::vector<TensorSpec> specs = h3_tensor_specs(h3);
  int64_t gemm = 0, params = 0;
  for (const TensorSpec& s : specs) {
    params += shape_numel(s.shape);
    if (s.name.rfind("blocks.0.", 0) == 0 && s.name.find("adaln") == std::string::npos && s.shape.size() == 2)
      gemm += shape_numel(s.shape);
  }
  // One block's four GEMM weights from the model's widths (D 5376, inner 7168, FFN 14336; research §2.1):
  // qkv [3 * 7168, 5376] + out [5376, 7168] + fc1 [2 * 14336, 5376] + fc2 [5376, 14336] = 385,351,680.
  EXPECT_EQ(gemm, 3LL * 7168 * 5376 + 5376LL * 7168 + 2LL * 14336 * 5376 + 5376LL * 14336);
  EXPECT_GT(params, 32'500'000'000LL);
  EXPECT_LT(params, 33'500'000'000LL);
  const TensorSpec* ada = nullptr;
  for (const TensorSpec& s : specs)
    if (s.name == "blocks.49.adaln_proj.linear.weight") ada = &s;
  ASSERT_NE(ada, nullptr);
  EXPECT_EQ(ada->shape, (Shape{96768, 2688}));
  EXPECT_TRUE(is_qkv_weight_name("token_refiner.blocks.1.attn.qkv_proj.weight"));
  EXPECT_FALSE(is_qkv_weight_name("blocks.1.attn.out_proj.weight"));
  H3Weights w = make_empty_h3_weights(h3);
  EXPECT_EQ(h3_tensor_slots(w).size(), specs.size());
  EXPECT_EQ(h3_linear_slots(w).size(), 4u * (50 + 2));
}

}  // namespace
}  // namespace vortex
