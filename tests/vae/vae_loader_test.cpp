// VAE folders and inputs: every tensor is validated with an error naming it, bad latents are rejected
// with a clear message, synthetic weights are deterministic, and the tile layout follows diffusers.
#include <filesystem>
#include <fstream>
#include <functional>

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include "backend/backend.h"
#include "io/safetensors.h"
#include "vae/audio_vae.h"
#include "vae/vae_test_util.h"
#include "vae/video_vae.h"

namespace vortex {
namespace {

using vae_test::fixtures;

namespace fs = std::filesystem;

// A copy of a fixture folder with one tensor dropped or reshaped.
std::string corrupted_copy(const std::string& src, const std::string& victim, bool drop) {
  const std::string dir =
      (fs::temp_directory_path() / ("vortex_vae_" + std::to_string(::getpid()) + (drop ? "_drop" : "_shape"))).string();
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy_file(src + "/config.json", dir + "/config.json");
  auto f = SafetensorsFile::open(src + "/diffusion_pytorch_model.safetensors");
  EXPECT_TRUE(f.ok());
  std::vector<std::pair<std::string, Tensor>> out;
  for (const auto& e : f->entries()) {
    Tensor t = *f->tensor(e.name);
    if (e.name == victim) {
      if (drop) continue;
      t = *t.narrow(0, 0, t.dim(0) - 1);
      Tensor c = Tensor::empty(t.shape(), t.dtype());
      std::memcpy(c.raw_data(), t.raw_data(), c.nbytes());
      t = c;
    }
    out.emplace_back(e.name, t);
  }
  EXPECT_TRUE(write_safetensors(dir + "/diffusion_pytorch_model.safetensors", out).ok());
  return dir;
}

TEST(VaeLoader, MissingAndMisshapenTensorsAreNamed) {
  auto backend = make_backend("cpu", 0);
  ASSERT_TRUE(backend.ok());
  const std::string victim = "decoder.transformer_blocks.1.attn.to_k.weight";
  auto dropped = VideoVae::load(corrupted_copy(fixtures() + "/video_vae", victim, true), **backend);
  ASSERT_FALSE(dropped.ok());
  EXPECT_EQ(dropped.status().code(), ErrorCode::kNotFound);
  EXPECT_NE(dropped.status().message().find(victim), std::string::npos) << dropped.status().message();
  auto reshaped = VideoVae::load(corrupted_copy(fixtures() + "/video_vae", victim, false), **backend);
  ASSERT_FALSE(reshaped.ok());
  EXPECT_EQ(reshaped.status().code(), ErrorCode::kFormat);
  EXPECT_NE(reshaped.status().message().find(victim), std::string::npos) << reshaped.status().message();
  const std::string avictim = "decoder.resblocks.3.convs2.1.weight_v";
  auto adrop = AudioVae::load(corrupted_copy(fixtures() + "/audio_vae", avictim, true), **backend);
  ASSERT_FALSE(adrop.ok());
  EXPECT_NE(adrop.status().message().find(avictim), std::string::npos) << adrop.status().message();
  auto none = VideoVae::load("/nonexistent/vae", **backend);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("config.json"), std::string::npos);
}

// The official original layout (tests/vae/fixtures/original, made by make_original_layout_fixtures.py and
// checked there with diffusers' own conversion script) decodes exactly as the diffusers layout of the same
// weights, and that one is checked against diffusers' decode in vae_parity_test.cpp.
TEST(VaeLoader, OriginalLayoutDecodesAsTheDiffusersLayout) {
  auto backend = make_backend("cpu", 2);
  ASSERT_TRUE(backend.ok());
  auto orig = VideoVae::load(fixtures() + "/original/video_vae", **backend);
  ASSERT_TRUE(orig.ok()) << orig.status().to_string();
  auto diff = VideoVae::load(fixtures() + "/video_vae", **backend);
  ASSERT_TRUE(diff.ok()) << diff.status().to_string();
  EXPECT_EQ((*orig)->layout(), VaeLayout::kOriginal);
  EXPECT_EQ((*diff)->layout(), VaeLayout::kDiffusers);
  EXPECT_EQ((*orig)->parameter_count(), (*diff)->parameter_count());
  EXPECT_EQ((*orig)->config().tile, 256);  // from the wrapper's vae_tile_size
  EXPECT_EQ((*orig)->config().latents_std, (*diff)->config().latents_std);
  auto cases = SafetensorsFile::open(fixtures() + "/video_cases.safetensors");
  ASSERT_TRUE(cases.ok());
  Tensor z = *cases->tensor("odd_single_tile.latents");
  Tensor zc = Tensor::empty(z.shape(), DType::kF32);
  std::memcpy(zc.raw_data(), z.raw_data(), zc.nbytes());
  auto a = (*orig)->decode(zc), b = (*diff)->decode(zc);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status().to_string() << b.status().to_string();
  ASSERT_EQ(a->shape(), b->shape());
  EXPECT_EQ(std::memcmp(a->raw_data(), b->raw_data(), a->nbytes()), 0);

  auto aorig = AudioVae::load(fixtures() + "/original/audio_vae", **backend);
  ASSERT_TRUE(aorig.ok()) << aorig.status().to_string();
  auto adiff = AudioVae::load(fixtures() + "/audio_vae", **backend);
  ASSERT_TRUE(adiff.ok()) << adiff.status().to_string();
  EXPECT_EQ((*aorig)->layout(), VaeLayout::kOriginal);
  // Kernel sizes derived from the rates as the reference does (metadata.json carries only the rates).
  EXPECT_EQ((*aorig)->config().decoder_kernel_sizes, (*adiff)->config().decoder_kernel_sizes);
  auto acases = SafetensorsFile::open(fixtures() + "/audio_cases.safetensors");
  ASSERT_TRUE(acases.ok());
  Tensor az = *acases->tensor("odd.latents");
  Tensor azc = Tensor::empty(az.shape(), DType::kF32);
  std::memcpy(azc.raw_data(), az.raw_data(), azc.nbytes());
  auto aa = (*aorig)->decode(azc), ab = (*adiff)->decode(azc);
  ASSERT_TRUE(aa.ok() && ab.ok()) << aa.status().to_string() << ab.status().to_string();
  EXPECT_EQ(std::memcmp(aa->raw_data(), ab->raw_data(), aa->nbytes()), 0);
}

// Copies an original-layout video folder with its model.safetensors rewritten by `edit`.
std::string edited_original_copy(const std::string& tag,
                                 const std::function<void(std::vector<std::pair<std::string, Tensor>>&)>& edit) {
  const std::string src = fixtures() + "/original/video_vae";
  const std::string dir =
      (fs::temp_directory_path() / ("vortex_vae_orig_" + std::to_string(::getpid()) + tag)).string();
  fs::remove_all(dir);
  fs::create_directories(dir + "/source");
  fs::copy_file(src + "/config.json", dir + "/config.json");
  fs::copy_file(src + "/source/config.json", dir + "/source/config.json");
  auto f = SafetensorsFile::open(src + "/source/model.safetensors");
  EXPECT_TRUE(f.ok());
  std::vector<std::pair<std::string, Tensor>> out;
  for (const auto& e : f->entries()) {
    Tensor t = *f->tensor(e.name);
    Tensor c = Tensor::empty(t.shape(), t.dtype());
    std::memcpy(c.raw_data(), t.raw_data(), c.nbytes());
    out.emplace_back(e.name, c);
  }
  edit(out);
  EXPECT_TRUE(write_safetensors(dir + "/source/model.safetensors", out).ok());
  return dir;
}

TEST(VaeLoader, OriginalLayoutErrorsNameTheStoredTensor) {
  auto backend = make_backend("cpu", 0);
  ASSERT_TRUE(backend.ok());
  const std::string qkv = "decoder.transformer_blocks.1.attn.to_qkv.weight";
  auto dropped =
      VideoVae::load(edited_original_copy(
                         "_drop", [&](auto& ts) { std::erase_if(ts, [&](const auto& p) { return p.first == qkv; }); }),
                     **backend);
  ASSERT_FALSE(dropped.ok());
  EXPECT_EQ(dropped.status().code(), ErrorCode::kNotFound);
  EXPECT_NE(dropped.status().message().find(qkv), std::string::npos) << dropped.status().message();
  const std::string w1 = "decoder.transformer_blocks.0.ff.w1.weight";
  auto reshaped =
      VideoVae::load(edited_original_copy("_shape",
                                          [&](auto& ts) {
                                            for (auto& [n, t] : ts)
                                              if (n == w1) {
                                                Tensor c = Tensor::empty({t.dim(0) - 2, t.dim(1)}, t.dtype());
                                                std::memcpy(c.raw_data(), t.raw_data(), c.nbytes());
                                                t = c;
                                              }
                                          }),
                     **backend);
  ASSERT_FALSE(reshaped.ok());
  EXPECT_EQ(reshaped.status().code(), ErrorCode::kFormat);
  EXPECT_NE(reshaped.status().message().find(w1), std::string::npos) << reshaped.status().message();
  // A tensor the decoder does not know (outside the encoder and mask_token) is refused by name.
  auto extra = VideoVae::load(edited_original_copy("_extra",
                                                   [&](auto& ts) {
                                                     ts.emplace_back("decoder.transformer_blocks.0.attn.norm_q.weight",
                                                                     Tensor::zeros({16}, DType::kF32));
                                                   }),
                              **backend);
  ASSERT_FALSE(extra.ok());
  EXPECT_EQ(extra.status().code(), ErrorCode::kFormat);
  EXPECT_NE(extra.status().message().find("attn.norm_q.weight"), std::string::npos) << extra.status().message();
  // An unsupported variant in source/config.json is named before any tensor is read.
  const std::string dir = edited_original_copy("_cfg", [](auto&) {});
  {
    std::ifstream in(dir + "/source/config.json");
    auto j = nlohmann::json::parse(in);
    j["vit_decoder_kwargs"]["qk_norm_affine"] = true;
    std::ofstream(dir + "/source/config.json") << j.dump();
  }
  auto variant = VideoVae::load(dir, **backend);
  ASSERT_FALSE(variant.ok());
  EXPECT_NE(variant.status().message().find("qk_norm_affine"), std::string::npos) << variant.status().message();
  // The wrapper naming weights that are not there.
  {
    std::ifstream in(dir + "/config.json");
    auto j = nlohmann::json::parse(in);
    j["source_safetensors_path"] = "missing.safetensors";
    std::ofstream(dir + "/config.json") << j.dump();
  }
  auto gone = VideoVae::load(dir, **backend);
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.status().code(), ErrorCode::kNotFound);
  EXPECT_NE(gone.status().message().find("missing.safetensors"), std::string::npos) << gone.status().message();
  // A whole snapshot passed instead of its vae/ folder gets pointed at the subfolder.
  const std::string snap = dir + "_snapshot";
  fs::create_directories(snap);
  std::ofstream(snap + "/model_index.json") << "{}";
  auto whole = VideoVae::load(snap, **backend);
  ASSERT_FALSE(whole.ok());
  EXPECT_NE(whole.status().message().find("vae/"), std::string::npos) << whole.status().message();
}

TEST(VaeLoader, AudioOriginalLayoutCrossChecksItsTwoConfigs) {
  auto backend = make_backend("cpu", 0);
  ASSERT_TRUE(backend.ok());
  const std::string src = fixtures() + "/original/audio_vae";
  const std::string dir = (fs::temp_directory_path() / ("vortex_avae_orig_" + std::to_string(::getpid()))).string();
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const char* f : {"config.json", "metadata.json", "model.safetensors"})
    fs::copy_file(src + "/" + f, dir + "/" + f);
  {
    std::ifstream in(dir + "/config.json");
    auto j = nlohmann::json::parse(in);
    j["sample_rate"] = 16000;
    std::ofstream(dir + "/config.json") << j.dump();
  }
  auto bad = AudioVae::load(dir, **backend);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("sample_rate"), std::string::npos) << bad.status().message();
}

TEST(VaeLoader, BadLatentsAreRejected) {
  auto backend = make_backend("cpu", 0);
  ASSERT_TRUE(backend.ok());
  auto vae = VideoVae::synthetic(VideoVaeConfig::tiny(), **backend, 7);
  ASSERT_TRUE(vae.ok()) << vae.status().to_string();
  EXPECT_FALSE((*vae)->check_latents(Tensor::zeros({16, 7, 2, 2}, DType::kF32)).ok());  // channels
  EXPECT_FALSE((*vae)->check_latents(Tensor::zeros({24, 7, 2}, DType::kF32)).ok());     // rank
  EXPECT_FALSE((*vae)->check_latents(Tensor::zeros({24, 2, 2, 2}, DType::kF32)).ok());  // too few frames
  EXPECT_TRUE((*vae)->check_latents(Tensor::zeros({24, 7, 2, 2}, DType::kF32)).ok());
  Tensor nan = Tensor::zeros({24, 7, 2, 2}, DType::kF32);
  nan.data<float>()[5] = std::nanf("");
  auto s = (*vae)->check_latents(nan);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("non-finite"), std::string::npos);
  auto avae = AudioVae::synthetic(AudioVaeConfig::tiny(), **backend, 7);
  ASSERT_TRUE(avae.ok()) << avae.status().to_string();
  EXPECT_FALSE((*avae)->check_latents(Tensor::zeros({1, 32, 4}, DType::kF32)).ok());
  EXPECT_FALSE((*avae)->check_latents(Tensor::zeros({2, 8, 4}, DType::kF32)).ok());
  EXPECT_TRUE((*avae)->check_latents(Tensor::zeros({2, 32, 4}, DType::kF32)).ok());
  Tensor inf = Tensor::zeros({2, 32, 4}, DType::kF32);
  inf.data<float>()[3] = INFINITY;
  EXPECT_FALSE((*avae)->check_latents(inf).ok());
}

TEST(VaeSynthetic, DeterministicAndSeedDependent) {
  auto backend = make_backend("cpu", 2);
  ASSERT_TRUE(backend.ok());
  Tensor z = Tensor::empty({24, 7, 3, 5}, DType::kF32);
  for (int64_t i = 0; i < z.numel(); ++i) z.data<float>()[i] = std::sin(0.37f * static_cast<float>(i));
  auto a = VideoVae::synthetic(VideoVaeConfig::tiny(), **backend, 1);
  auto b = VideoVae::synthetic(VideoVaeConfig::tiny(), **backend, 1);
  auto c = VideoVae::synthetic(VideoVaeConfig::tiny(), **backend, 2);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  auto da = (*a)->decode(z), db = (*b)->decode(z), dc = (*c)->decode(z);
  ASSERT_TRUE(da.ok() && db.ok() && dc.ok()) << da.status().to_string();
  EXPECT_EQ(da->shape(), (Shape{3, 22, 48, 80}));
  EXPECT_EQ(std::memcmp(da->raw_data(), db->raw_data(), da->nbytes()), 0);
  EXPECT_NE(std::memcmp(da->raw_data(), dc->raw_data(), da->nbytes()), 0);
  // The full configs have the released sizes (parameter counts from the shapes alone).
  EXPECT_EQ(VideoVaeConfig::full().dim(), 2048);
  EXPECT_EQ(VideoVaeConfig::full().patch_values(), 3072);
  EXPECT_EQ(AudioVaeConfig::full().hop(), 800);
}

// The FP8 linears are a CUDA-only opt-in: the CPU backend refuses them before reading a weight.
TEST(VaeSynthetic, Fp8LinearsNeedTheCudaBackend) {
  auto backend = make_backend("cpu", 1);
  ASSERT_TRUE(backend.ok());
  auto fp8 = VideoVae::synthetic(VideoVaeConfig::tiny(), **backend, 1, VideoVaeLinears::kFp8Blockwise);
  ASSERT_FALSE(fp8.ok());
  EXPECT_EQ(fp8.status().code(), ErrorCode::kUnsupported);
  EXPECT_NE(fp8.status().message().find("cuda backend only"), std::string::npos) << fp8.status().to_string();
  auto bf16 = VideoVae::synthetic(VideoVaeConfig::tiny(), **backend, 1);
  ASSERT_TRUE(bf16.ok()) << bf16.status().to_string();
  EXPECT_EQ((*bf16)->linears(), VideoVaeLinears::kBf16);
  EXPECT_STREQ(video_vae_linears_name(VideoVaeLinears::kFp8Blockwise), "fp8-blockwise");
}

TEST(VaeTiling, SplitFollowsDiffusers) {
  // Released geometry on a 1344 x 768 canvas: 4 x 7 = 28 tiles.
  const TileSplit h = split_tiles(768, 256, 64, 16), w = split_tiles(1344, 256, 64, 16);
  EXPECT_EQ(h.starts.size(), 4u);
  EXPECT_EQ(w.starts.size(), 7u);
  EXPECT_EQ(h.starts.back() + h.lengths.back(), 768);
  EXPECT_EQ(w.starts.back() + w.lengths.back(), 1344);
  for (int o : w.overlaps) EXPECT_GE(o, 64);
  const TileSplit one = split_tiles(200, 256, 64, 16);
  EXPECT_EQ(one.starts, std::vector<int>{0});
  EXPECT_EQ(one.lengths, std::vector<int>{200});
  const TileSplit small = split_tiles(32, 16, 4, 4);
  EXPECT_EQ(small.starts, (std::vector<int>{0, 8, 16}));
  EXPECT_EQ(small.overlaps, (std::vector<int>{8, 8}));
}

}  // namespace
}  // namespace vortex
