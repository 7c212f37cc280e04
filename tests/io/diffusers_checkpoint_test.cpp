// diffusers-layout and folder checkpoints: `vortex synth --layout diffusers` folders (single file and
// sharded) and folders converted here from an original-layout file by an independent converter (own
// rename table, own per-head de-interleave, q/k/v split and SwiGLU half swap, rope.inv_freq dropped)
// load to exactly the weights of the original layout; all-F32 and all-BF16 diffusers folders load with
// the documented conversions; the refiner/rope tables; a single malformed tensor is the only one named
// (with and without config.json); folder resolution errors. Backend: HostMemoryBackend (memory only).
#include <cmath>
#include <cstring>
#include <filesystem>

#include <gtest/gtest.h>

#include "host_test_backend.h"
#include "io/checkpoint.h"
#include "io/synth_checkpoint.h"
#include "model/h3_spec.h"
#include "synth_checkpoint_util.h"
#include "test_files.h"
#include "vortex/dtype.h"

namespace vortex {
namespace {

using testing::HostMemoryBackend;
using testing::TempDir;
using TensorList = std::vector<std::pair<std::string, Tensor>>;

TensorList read_all(const std::string& path) {
  Result<SafetensorsFile> f = SafetensorsFile::open(path);
  EXPECT_TRUE(f.ok()) << f.status().to_string();
  TensorList out;
  if (!f.ok()) return out;
  for (const SafetensorsEntry& e : f->entries()) out.emplace_back(e.name, f->tensor(e.name).value());
  return out;
}

H3Weights load(const std::string& path, std::vector<std::string>* notes = nullptr) {
  HostMemoryBackend backend;
  Result<ModelConfig> c = config_for_checkpoint(path);
  EXPECT_TRUE(c.ok()) << c.status().to_string();
  Result<H3Weights> w =
      load_checkpoint(path, c.ok() ? *c : ModelConfig::h3_tiny(), backend, CheckpointLayout::kAuto, notes);
  EXPECT_TRUE(w.ok()) << w.status().to_string();
  return w.ok() ? std::move(w).value() : H3Weights{};
}

H3Weights synthesized(uint64_t seed) {
  HostMemoryBackend backend;
  return synthesize_weights(ModelConfig::h3_tiny(), backend, seed).value();
}

// ---- an independent original -> diffusers converter -------------------------------------------

std::string diffusers_name(std::string k) {
  if (k.rfind("blocks.", 0) == 0) k = "transformer_blocks." + k.substr(7);
  const std::pair<const char*, const char*> renames[] = {
      {"token_refiner.blocks.", "token_refiner.refiner_blocks."},
      {"time_embedder.proj_in.", "time_embedder.linear_1."},
      {"time_embedder.proj_out.", "time_embedder.linear_2."},
      {"video_patch_proj.", "proj_in."},
      {"audio_patch_proj.", "audio_proj_in."},
      {"condition_proj.", "context_embedder."},
      {"final_layer.norm.", "norm_out.norm."},
      {"final_layer.adaln_proj.linear.", "norm_out.linear."},
      {"final_layer.video_out.", "proj_out."},
      {"final_layer.audio_out.", "audio_proj_out."},
      {".attn.q_norm.", ".attn.norm_q."},
      {".attn.k_norm.", ".attn.norm_k."},
      {".attn.out_proj.", ".attn.to_out.0."},
      {".mlp.fc1.", ".ff.net.0.proj."},
      {".mlp.fc2.", ".ff.net.2."},
  };
  for (const auto& [from, to] : renames)
    if (size_t at = k.find(from); at != std::string::npos) k.replace(at, std::strlen(from), to);
  return k;
}

Tensor row_slice(const Tensor& t, int64_t row0, int64_t rows) {
  Tensor out = Tensor::empty({rows, t.dim(1)}, t.dtype());
  const size_t row_bytes = t.nbytes() / static_cast<size_t>(t.dim(0));
  std::memcpy(out.raw_data(), static_cast<const char*>(t.raw_data()) + row0 * row_bytes, rows * row_bytes);
  return out;
}

enum class FolderDtype { kAsReleased, kAllF32, kAllBf16 };

Tensor with_dtype(const Tensor& t, FolderDtype mode) {
  if (mode == FolderDtype::kAllF32 && t.dtype() == DType::kBF16) {
    Tensor out = Tensor::empty(t.shape(), DType::kF32);
    for (int64_t i = 0; i < t.numel(); ++i)
      out.data<float>()[i] = f32_from_bf16_bits(static_cast<const uint16_t*>(t.raw_data())[i]);
    return out;
  }
  if (mode == FolderDtype::kAllBf16 && t.dtype() == DType::kF32) {
    Tensor out = Tensor::empty(t.shape(), DType::kBF16);
    for (int64_t i = 0; i < t.numel(); ++i)
      static_cast<uint16_t*>(out.raw_data())[i] = bf16_bits_from_f32(t.data<float>()[i]);
    return out;
  }
  return t;
}

// Converts the original-layout h3-tiny file at `original` into a diffusers folder `dir`.
void write_diffusers_folder(const std::string& original, const std::string& dir, FolderDtype mode) {
  const ModelConfig c = ModelConfig::h3_tiny();
  const int64_t heads = c.num_heads, hd = c.head_dim, f = c.ffn;
  TensorList out;
  for (auto& [name, t] : read_all(original)) {
    if (name == "rope.inv_freq") continue;  // diffusers recomputes it
    const std::string base = diffusers_name(name);
    if (name.size() > 21 && name.compare(name.size() - 21, 21, ".attn.qkv_proj.weight") == 0) {
      // Interleaved row (h * 3 + p) * hd + e  ->  to_{q,k,v}[p] row h * hd + e.
      const std::string stem = base.substr(0, base.size() - std::strlen("qkv_proj.weight"));
      const char* part_names[] = {"to_q.weight", "to_k.weight", "to_v.weight"};
      for (int p = 0; p < 3; ++p) {
        Tensor part = Tensor::empty({heads * hd, t.dim(1)}, t.dtype());
        for (int64_t h = 0; h < heads; ++h) {
          Tensor rows = row_slice(t, (h * 3 + p) * hd, hd);
          std::memcpy(static_cast<char*>(part.raw_data()) + h * rows.nbytes(), rows.raw_data(), rows.nbytes());
        }
        out.emplace_back(stem + part_names[p], with_dtype(part, mode));
      }
      continue;
    }
    if (name.find(".mlp.fc1.weight") != std::string::npos) {  // [gate; value] -> [value; gate]
      Tensor swapped = Tensor::empty(t.shape(), t.dtype());
      Tensor value = row_slice(t, f, f), gate = row_slice(t, 0, f);
      std::memcpy(swapped.raw_data(), value.raw_data(), value.nbytes());
      std::memcpy(static_cast<char*>(swapped.raw_data()) + value.nbytes(), gate.raw_data(), gate.nbytes());
      out.emplace_back(base, with_dtype(swapped, mode));
      continue;
    }
    out.emplace_back(base, with_dtype(t, mode));
  }
  std::filesystem::create_directories(dir);
  ASSERT_TRUE(write_safetensors(dir + "/diffusion_pytorch_model.safetensors", out, {{"format", "pt"}}).ok());
  testing::write_file_bytes(dir + "/config.json", R"({
  "_class_name": "MiniMaxH3Transformer3DModel", "_diffusers_version": "0.42.1",
  "num_attention_heads": 4, "attention_head_dim": 64, "hidden_size": 256, "num_layers": 2,
  "num_refiner_layers": 1, "ffn_dim": 512, "in_channels": 24, "audio_in_channels": 32,
  "patch_size": [1, 2, 2], "text_dim": 128, "freq_dim": 256, "time_embed_hidden_dim": 256,
  "time_embed_dim": 128, "rope_freq_dim": 8, "rope_theta": 10000.0,
  "norm_eps": 1e-05, "qk_norm_eps": 1e-05, "final_norm_eps": 1e-05
})");
}

// torch: 1.0 / (10000.0 ** (arange(0, 16, 2, dtype=float32) / 16)), each step in FP32.
float reference_inv_freq(int k) {
  const float exponent = static_cast<float>(2 * k) / 16.0f;
  return 1.0f / static_cast<float>(std::pow(10000.0, static_cast<double>(exponent)));
}

// ---- tests --------------------------------------------------------------------------------------

TEST(DiffusersCheckpoint, SynthFolderLoadsToSynthesizedWeights) {
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  for (double shard_gb : {0.0, 0.001}) {
    TempDir dir;
    const std::string name =
        shard_gb > 0 ? "diffusion_pytorch_model.safetensors.index.json" : "diffusion_pytorch_model.safetensors";
    write_synth(dir.path, seed, CheckpointLayout::kDiffusers, shard_gb, name);
    Result<CheckpointInfo> info = inspect_checkpoint(dir.path);  // the folder itself
    ASSERT_TRUE(info.ok()) << info.status().to_string();
    EXPECT_TRUE(info->is_h3);
    EXPECT_EQ(info->layout, CheckpointLayout::kDiffusers);
    EXPECT_EQ(info->path, dir.path + "/" + name);
    EXPECT_NE(checkpoint_report_text(*info).find("layout: diffusers"), std::string::npos);
    if (shard_gb > 0) {
      EXPECT_GE(info->files.size(), 3u);
    }
    for (const CheckpointTensorInfo& t : info->tensors) {
      EXPECT_EQ(t.name.find("blocks.0.attn.qkv_proj"), std::string::npos) << t.name;
      EXPECT_NE(t.name, "rope.inv_freq");
    }
    Result<ModelConfig> c = config_for_checkpoint(dir.path);
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    EXPECT_EQ(model_config_to_json(*c).substr(model_config_to_json(*c).find("\"hidden_size\"")),
              model_config_to_json(ModelConfig::h3_tiny())
                  .substr(model_config_to_json(ModelConfig::h3_tiny()).find("\"hidden_size\"")));
    H3Weights loaded = load(dir.path);
    H3Weights expected = synthesized(seed);
    expect_same_weights(loaded, expected);
  }
}

TEST(DiffusersCheckpoint, IndependentlyConvertedFolderMatchesTheOriginalLayout) {
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  TempDir dir;
  const std::string original = write_synth(dir.path + "/original", seed, CheckpointLayout::kOriginal);
  write_diffusers_folder(original, dir.path + "/diffusers", FolderDtype::kAsReleased);
  Result<CheckpointInfo> info = inspect_checkpoint(dir.path + "/diffusers");
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  EXPECT_EQ(info->layout, CheckpointLayout::kDiffusers);
  H3Weights from_original = load(original);
  std::vector<std::string> notes;
  H3Weights from_diffusers = load(dir.path + "/diffusers", &notes);
  expect_same_weights(from_diffusers, from_original);
  EXPECT_TRUE(notes.empty()) << notes[0];
  // The synthesized table is the reference's, computed independently here.
  for (int k = 0; k < 8; ++k) EXPECT_EQ(from_diffusers.rope_inv_freq.data<float>()[k], reference_inv_freq(k)) << k;
}

TEST(DiffusersCheckpoint, AllF32AndAllBf16FoldersLoadWithTheDocumentedConversions) {
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  TempDir dir;
  const std::string original = write_synth(dir.path + "/original", seed, CheckpointLayout::kOriginal);
  H3Weights expected = load(original);

  // All F32 (save_pretrained with torch_dtype=float32): BF16 values widened, rounded back exactly.
  write_diffusers_folder(original, dir.path + "/f32", FolderDtype::kAllF32);
  std::vector<std::string> notes;
  H3Weights from_f32 = load(dir.path + "/f32", &notes);
  expect_same_weights(from_f32, expected);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("rounded to the BF16"), std::string::npos) << notes[0];
  EXPECT_NE(notes[0].find("0 values changed"), std::string::npos) << notes[0];

  // All BF16: the F32 tensors arrive rounded and are widened exactly; BF16 tensors are untouched.
  write_diffusers_folder(original, dir.path + "/bf16", FolderDtype::kAllBf16);
  notes.clear();
  H3Weights from_bf16 = load(dir.path + "/bf16", &notes);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("widened"), std::string::npos) << notes[0];
  ASSERT_EQ(from_bf16.video_patch_proj_weight.dtype(), DType::kF32);
  for (int64_t i = 0; i < expected.video_patch_proj_weight.numel(); ++i)
    ASSERT_EQ(from_bf16.video_patch_proj_weight.data<float>()[i],
              round_bf16(expected.video_patch_proj_weight.data<float>()[i]))
        << i;
  EXPECT_EQ(std::memcmp(from_bf16.blocks[1].mlp_fc1.weight.raw_data(), expected.blocks[1].mlp_fc1.weight.raw_data(),
                        expected.blocks[1].mlp_fc1.weight.nbytes()),
            0);

  // F16 is neither: refused, naming the tensor.
  TensorList tensors = read_all(dir.path + "/f32/diffusion_pytorch_model.safetensors");
  for (auto& [n, t] : tensors)
    if (n == "context_embedder.bias") t = Tensor::zeros(t.shape(), DType::kF16);
  ASSERT_TRUE(write_safetensors(dir.path + "/f32/diffusion_pytorch_model.safetensors", tensors, {}).ok());
  HostMemoryBackend backend;
  Status s = load_checkpoint(dir.path + "/f32", ModelConfig::h3_tiny(), backend).status();
  EXPECT_EQ(s.code(), ErrorCode::kFormat);
  EXPECT_NE(s.message().find("context_embedder.bias: expected [256] BF16, got [256] F16"), std::string::npos)
      << s.message();
}

// One tensor of the wrong shape must be the only tensor the error names, with or without config.json
// (without it the config is inferred from shapes, and each dimension is voted on by all its tensors).
TEST(CheckpointMismatch, OneWrongTensorIsTheOnlyOneNamed) {
  struct Case {
    const char* tensor;
    Shape wrong;
  };
  const Case cases[] = {
      {"blocks.0.attn.q_norm.weight", {128}},
      {"time_embedder.proj_in.weight", {320, 256}},
      {"blocks.0.norm1.weight", {512}},
      {"blocks.1.mlp.fc1.weight", {1000, 256}},
  };
  const std::vector<TensorSpec> specs = h3_tensor_specs(ModelConfig::h3_tiny());
  for (const Case& bad : cases) {
    for (bool with_config : {true, false}) {
      SCOPED_TRACE(std::string(bad.tensor) + (with_config ? " with config.json" : " without config.json"));
      TempDir dir;
      const std::string path = write_synth(dir.path, 3, CheckpointLayout::kOriginal);
      TensorList tensors = read_all(path);
      for (auto& [n, t] : tensors)
        if (n == bad.tensor) t = Tensor::zeros(bad.wrong, t.dtype());
      ASSERT_TRUE(write_safetensors(path, tensors, {{kQkvLayoutMetadataKey, kQkvInterleavedValue}}).ok());
      if (!with_config) {
        ASSERT_EQ(std::remove((dir.path + "/config.json").c_str()), 0);
      }
      Result<ModelConfig> c = config_for_checkpoint(path);
      ASSERT_TRUE(c.ok()) << c.status().to_string();
      HostMemoryBackend backend;
      Status s = load_checkpoint(path, *c, backend).status();
      ASSERT_EQ(s.code(), ErrorCode::kFormat) << s.to_string();
      EXPECT_NE(s.message().find("wrong shape/dtype/values 1: " + std::string(bad.tensor) + ": expected "),
                std::string::npos)
          << s.message();
      EXPECT_NE(s.message().find("got " + shape_to_string(bad.wrong)), std::string::npos) << s.message();
      EXPECT_EQ(s.message().find("missing"), std::string::npos) << s.message();
      EXPECT_EQ(s.message().find("unexpected"), std::string::npos) << s.message();
      for (const TensorSpec& spec : specs)
        if (spec.name != bad.tensor) {
          EXPECT_EQ(s.message().find(spec.name + ":"), std::string::npos) << spec.name;
        }
    }
  }
  // The same in a diffusers folder: the one split third of the wrong shape is named.
  TempDir dir;
  write_synth(dir.path, 3, CheckpointLayout::kDiffusers, 0, "diffusion_pytorch_model.safetensors");
  const std::string file = dir.path + "/diffusion_pytorch_model.safetensors";
  TensorList tensors = read_all(file);
  for (auto& [n, t] : tensors)
    if (n == "transformer_blocks.1.attn.to_k.weight") t = Tensor::zeros({255, 256}, t.dtype());
  ASSERT_TRUE(write_safetensors(file, tensors, {}).ok());
  for (bool with_config : {true, false}) {
    if (!with_config) {
      ASSERT_EQ(std::remove((dir.path + "/config.json").c_str()), 0);
    }
    Result<ModelConfig> c = config_for_checkpoint(dir.path);
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    HostMemoryBackend backend;
    Status s = load_checkpoint(dir.path, *c, backend).status();
    EXPECT_NE(s.message().find("wrong shape/dtype/values 1: transformer_blocks.1.attn.to_k.weight: expected [256, "
                               "256] BF16, got [255, 256] BF16"),
              std::string::npos)
        << s.message();
    EXPECT_EQ(s.message().find("missing"), std::string::npos) << s.message();
  }
}

TEST(CheckpointFolder, OriginalShardedFolderAndResolutionErrors) {
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  TempDir dir;
  write_synth(dir.path + "/orig", seed, CheckpointLayout::kOriginal, 0.001, "model.safetensors.index.json");
  Result<std::string> resolved = resolve_checkpoint_path(dir.path + "/orig/");
  ASSERT_TRUE(resolved.ok()) << resolved.status().to_string();
  EXPECT_EQ(*resolved, dir.path + "/orig/model.safetensors.index.json");
  H3Weights loaded = load(dir.path + "/orig");
  H3Weights expected = synthesized(seed);
  expect_same_weights(loaded, expected);

  // Nothing loadable: kNotFound, listing what is there.
  std::filesystem::create_directories(dir.path + "/empty/transformer");
  testing::write_file_bytes(dir.path + "/empty/model_index.json", "{}");
  Status s = inspect_checkpoint(dir.path + "/empty").status();
  EXPECT_EQ(s.code(), ErrorCode::kNotFound) << s.to_string();
  for (const char* needle : {"holds no", "model_index.json", "/empty/transformer"})
    EXPECT_NE(s.message().find(needle), std::string::npos) << needle << ": " << s.message();
  HostMemoryBackend backend;
  EXPECT_EQ(load_checkpoint(dir.path + "/empty", ModelConfig::h3_tiny(), backend).status().code(),
            ErrorCode::kNotFound);

  // Two weights files and no index, or two indexes: ambiguous, both named.
  write_synth(dir.path + "/two", seed, CheckpointLayout::kOriginal, 0, "a.safetensors");
  write_synth(dir.path + "/two", seed, CheckpointLayout::kComfy, 0, "b.safetensors");
  s = inspect_checkpoint(dir.path + "/two").status();
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument) << s.to_string();
  EXPECT_NE(s.message().find("a.safetensors, b.safetensors"), std::string::npos) << s.message();
  testing::write_file_bytes(dir.path + "/two/a.safetensors.index.json", "{}");
  testing::write_file_bytes(dir.path + "/two/b.safetensors.index.json", "{}");
  s = inspect_checkpoint(dir.path + "/two").status();
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument) << s.to_string();
  EXPECT_NE(s.message().find("a.safetensors.index.json, b.safetensors.index.json"), std::string::npos) << s.message();
}

TEST(DiffusersCheckpoint, KeyMapping) {
  EXPECT_EQ(diffusers_key_for("blocks.3.attn.qkv_proj.weight"), "transformer_blocks.3.attn.to_q.weight");
  EXPECT_EQ(diffusers_qkv_keys("token_refiner.blocks.0.attn.qkv_proj.weight"),
            (std::vector<std::string>{"token_refiner.refiner_blocks.0.attn.to_q.weight",
                                      "token_refiner.refiner_blocks.0.attn.to_k.weight",
                                      "token_refiner.refiner_blocks.0.attn.to_v.weight"}));
  for (const TensorSpec& spec : h3_tensor_specs(ModelConfig::h3_tiny()))
    if (spec.name != "rope.inv_freq" && !is_qkv_weight_name(spec.name)) {
      EXPECT_EQ(diffusers_key_for(spec.name), diffusers_name(spec.name)) << spec.name;
    }
  EXPECT_EQ(diffusers_key_for("blocks.0.adaln_proj.linear.bias"), "transformer_blocks.0.adaln_proj.linear.bias");
  EXPECT_EQ(diffusers_key_for("final_layer.audio_out.weight"), "audio_proj_out.weight");
  EXPECT_EQ(checkpoint_layout_from_name("diffusers").value(), CheckpointLayout::kDiffusers);
}

}  // namespace
}  // namespace vortex
