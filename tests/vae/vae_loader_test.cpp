// VAE folders and inputs: every tensor is validated with an error naming it, bad latents are rejected
// with a clear message, synthetic weights are deterministic, and the tile layout follows diffusers.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "io/safetensors.h"
#include "model/backend.h"
#include "vae/audio_vae.h"
#include "vae/video_vae.h"

namespace vortex {
namespace {

namespace fs = std::filesystem;

std::string fixtures() {
  const char* env = std::getenv("VORTEX_VAE_FIXTURES");
  return env && *env ? env : VORTEX_VAE_FIXTURES;
}

// A copy of a fixture folder with one tensor dropped or reshaped.
std::string corrupted_copy(const std::string& src, const std::string& victim, bool drop) {
  const std::string dir = (fs::temp_directory_path() / ("vortex_vae_" + std::to_string(::getpid()) + (drop ? "_drop" : "_shape"))).string();
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

TEST(VaeTiling, SplitFollowsDiffusers) {
  // Released geometry on a 1344 x 768 canvas: 4 x 7 = 28 tiles (research/pipeline-kernels-serving.md §3.1).
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
