// The vision tower's BF16 program on the CUDA backend (VisionTower::from_source with a backend) against
// transformers' BF16 Qwen3VLVisionModel on the tiny fixtures (tests/vision/make_vision_bf16_fixtures.py): vision
// tokens, DeepStack features and the blocks' output within 2x the floor (transformers BF16 vs FP32), and close to
// the same program on the cpu backend; the fused GEMM epilogues (linear_gelu_tanh, linear_residual) against their CPU
// programs; the BF16 device hand-off to the text encoder byte for byte against the FP32 host one. Label gpu; skips
// without a device.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <tuple>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cuda/cuda_backend.h"
#include "gpu_test.h"
#include "io/safetensors.h"
#include "ref/cpu_backend.h"
#include "text_encoder/text_encoder.h"
#include "vae/vae_checkpoint.h"
#include "vision/keyframe_presentation.h"
#include "vision/vision_tower.h"
#include "vision_test_util.h"

namespace vortex {
namespace {

// The fixtures folder: $VORTEX_VISION_FIXTURES when set (a GPU machine with the tree elsewhere), else the build's.
const std::string kDir = [] {
  const char* env = std::getenv("VORTEX_VISION_FIXTURES");
  return std::string(env && *env ? env : VORTEX_VISION_FIXTURES);
}();
// The text encoder tests' tiny Qwen3-VL (vision tower included): $VORTEX_TE_FIXTURES when set, else the build's.
const std::string kTeModel = [] {
  const char* env = std::getenv("VORTEX_TE_FIXTURES");
  return std::string(env && *env ? env : VORTEX_TE_FIXTURES) + "/model";
}();

TEST(VisionTowerCuda, Bf16ProgramWithinTwiceTheFloor) {
  auto gpu = CudaBackend::create(0);
  VORTEX_SKIP_NO_GPU_OR_FAIL(gpu.status());
  CpuBackend cpu_backend(0);
  CpuBackend* cpu = &cpu_backend;
  auto weights = SafetensorsSet::open(kDir + "/model/model.safetensors");
  auto cases = SafetensorsFile::open(kDir + "/cases.safetensors");
  auto bf16 = SafetensorsFile::open(kDir + "/cases_bf16.safetensors");
  ASSERT_TRUE(weights.ok() && cases.ok() && bf16.ok());
  auto root = ConfigJson::read_file(kDir + "/model/config.json");
  ASSERT_TRUE(root.ok()) << root.status().to_string();
  auto cfg = VisionConfig::from_json(*root);
  ASSERT_TRUE(cfg.ok()) << cfg.status().to_string();
  const SafetensorsSet* w = &*weights;
  VaeTensorSource source = [w](const std::string& name, const Shape& shape) -> Result<Tensor> {
    VORTEX_ASSIGN_OR_RETURN(Tensor t, w->tensor(name));
    if (t.shape() != shape) return format_error(name + ": shape " + t.describe());
    return to_f32_host(t, name);
  };
  auto on_gpu = VisionTower::from_source(*cfg, source, gpu->get());
  auto on_cpu = VisionTower::from_source(*cfg, source, cpu);
  ASSERT_TRUE(on_gpu.ok()) << on_gpu.status().to_string();
  ASSERT_TRUE(on_cpu.ok()) << on_cpu.status().to_string();
  const nlohmann::json meta = nlohmann::json::parse(std::ifstream(kDir + "/meta.json"));
  for (const auto& [name, c] : meta["cases"].items()) {
    SCOPED_TRACE(name);
    VisionInput in;
    auto px = cases->tensor(name + ".pixel_values");
    ASSERT_TRUE(px.ok());
    in.pixel_values = *px;
    in.grid_h = c["grid_thw"][1].get<int>();
    in.grid_w = c["grid_thw"][2].get<int>();
    for (int rep = 0; rep < 2; ++rep) {  // the second run reuses the cached grid tables
      auto g = on_gpu->forward(in);
      auto h = on_cpu->forward(in);
      ASSERT_TRUE(g.ok()) << g.status().to_string();
      ASSERT_TRUE(h.ok()) << h.status().to_string();
      ASSERT_EQ(g->deepstack.size(), 2u);
      std::vector<std::tuple<std::string, const Tensor*, const Tensor*>> outs = {
          {"merged", &g->merged, &h->merged}, {"last_hidden", &g->last_hidden, &h->last_hidden}};
      for (int k = 0; k < 2; ++k)
        outs.emplace_back("deepstack." + std::to_string(k), &g->deepstack[static_cast<size_t>(k)],
                          &h->deepstack[static_cast<size_t>(k)]);
      for (const auto& [key, ours, cpu_out] : outs) {
        auto theirs = bf16->tensor(name + "." + key);
        auto fp32 = cases->tensor(name + "." + key);
        ASSERT_TRUE(theirs.ok() && fp32.ok()) << key;
        ASSERT_EQ(ours->shape(), theirs->shape()) << key;
        const double floor = test::rel_l2_f32(*theirs, *fp32), err = test::rel_l2_f32(*ours, *theirs),
                     vs_cpu = test::rel_l2_f32(*ours, *cpu_out);
        std::printf("%s %s: CUDA vs transformers BF16 rel-L2 %.3g (floor %.3g); CUDA vs cpu backend %.3g\n",
                    name.c_str(), key.c_str(), err, floor, vs_cpu);
        EXPECT_GT(floor, 0.0);
        EXPECT_LE(err, 2 * floor) << key;
        EXPECT_LE(vs_cpu, floor) << key;
      }
    }
  }
  // Both cases and a second image of the first size (negated) in one call: equal sizes take one batched attention
  // call, different sizes one per image. Each image's slice is within the first case's merged floor (transformers
  // BF16 vs FP32) of its own forward on the GPU: the GEMMs over more rows may take other cuBLASLt algorithms.
  std::vector<VisionInput> batch;
  double merged_floor = 0;
  for (const auto& [name, c] : meta["cases"].items()) {
    VisionInput in;
    auto px = cases->tensor(name + ".pixel_values");
    ASSERT_TRUE(px.ok());
    in.pixel_values = *px;
    in.grid_h = c["grid_thw"][1].get<int>();
    in.grid_w = c["grid_thw"][2].get<int>();
    if (batch.empty()) {
      auto theirs = bf16->tensor(name + ".merged");
      auto fp32 = cases->tensor(name + ".merged");
      ASSERT_TRUE(theirs.ok() && fp32.ok());
      merged_floor = test::rel_l2_f32(*theirs, *fp32);
    }
    batch.push_back(in);
  }
  VisionInput negated = batch.front();
  negated.pixel_values = Tensor::empty(batch.front().pixel_values.shape(), DType::kF32);
  for (int64_t i = 0; i < negated.pixel_values.numel(); ++i)
    negated.pixel_values.data<float>()[i] = -batch.front().pixel_values.data<float>()[i];
  for (const std::vector<VisionInput>& group :
       {std::vector<VisionInput>{batch.front(), negated}, std::vector<VisionInput>{batch.front(), batch.back()}}) {
    auto together = on_gpu->forward(group);
    ASSERT_TRUE(together.ok()) << together.status().to_string();
    int64_t at = 0;
    for (const VisionInput& in : group) {
      auto alone = on_gpu->forward(in);
      ASSERT_TRUE(alone.ok()) << alone.status().to_string();
      auto slice = together->merged.narrow(0, at, alone->merged.dim(0));
      ASSERT_TRUE(slice.ok());
      Tensor part = Tensor::empty(alone->merged.shape(), DType::kF32);
      std::memcpy(part.data<float>(), slice->data<float>(), part.nbytes());
      const double err = test::rel_l2_f32(part, alone->merged);
      std::printf("batched vs alone, rows %lld..: merged rel-L2 %.3g\n", static_cast<long long>(at), err);
      EXPECT_LE(err, merged_floor);
      at += alone->merged.dim(0);
    }
    EXPECT_EQ(at, together->merged.dim(0));
  }
}

// The release's head size (72) on a small synthetic tower: the attention runs the backend policy's kernel for
// head_dim 72 (the owned sm_90a kernel on an H100/H200, src/cuda/attention/bf16_attention.h), the pixel rows are built
// on the GPU from u8 images (image_input). CUDA vs the same BF16 program on the cpu backend within 1e-2 rel-L2 (two E1
// realizations through 2 blocks; the tiny fixtures above measure ~1e-3); u8 images and the processor's FP32 rows give
// the same outputs bit for bit; fresh random images per run (seed printed on failure).
TEST(VisionTowerCuda, HeadDim72U8ImagesMatchCpuBackend) {
  auto gpu = CudaBackend::create(0);
  VORTEX_SKIP_NO_GPU_OR_FAIL(gpu.status());
  CpuBackend cpu(0);
  VisionConfig cfg;
  cfg.depth = 2;
  cfg.hidden = 144;
  cfg.heads = 2;  // head_dim 72
  cfg.intermediate = 256;
  cfg.out_hidden = 96;
  cfg.num_positions = 64;
  cfg.deepstack = {0};
  ASSERT_TRUE(cfg.validate().ok());
  ASSERT_EQ(cfg.head_dim(), 72);
  auto init = [](const std::string& name, const Shape& shape) -> std::pair<float, float> {
    if (name.find("norm") != std::string::npos)
      return name.find("bias") != std::string::npos ? std::pair{0.02f, 0.0f} : std::pair{0.1f, 1.0f};
    if (name.find("bias") != std::string::npos) return {0.02f, 0.0f};
    int64_t fan_in = 1;
    for (size_t i = 1; i < shape.size(); ++i) fan_in *= shape[i];
    return {static_cast<float>(std::sqrt(3.0 / static_cast<double>(std::max<int64_t>(fan_in, 1)))), 0.0f};
  };
  auto on_gpu = VisionTower::from_source(cfg, synthetic_tensor_source(7, init), gpu->get());
  auto on_cpu = VisionTower::from_source(cfg, synthetic_tensor_source(7, init), &cpu);
  ASSERT_TRUE(on_gpu.ok()) << on_gpu.status().to_string();
  ASSERT_TRUE(on_cpu.ok()) << on_cpu.status().to_string();
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> byte(0, 255);
  VisionProcessorConfig proc;
  proc.min_pixels = 1024;
  std::vector<VisionInput> u8, f32;
  for (const auto& [w, h] : {std::pair{320, 192}, std::pair{320, 192}}) {  // 240 patches each: 2 query tiles
    RgbImage img{w, h, std::vector<uint8_t>(static_cast<size_t>(w) * h * 3)};
    for (uint8_t& v : img.rgb) v = static_cast<uint8_t>(byte(rng));
    auto a = image_input(img, proc);
    auto b = preprocess_image(img, proc);
    ASSERT_TRUE(a.ok() && b.ok());
    u8.push_back(std::move(*a));
    f32.push_back(std::move(*b));
  }
  auto g = on_gpu->forward(u8);
  auto g_rows = on_gpu->forward(f32);
  auto c = on_cpu->forward(u8);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  ASSERT_TRUE(g_rows.ok()) << g_rows.status().to_string();
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  std::vector<std::tuple<std::string, const Tensor*, const Tensor*, const Tensor*>> outs = {
      {"merged", &g->merged, &c->merged, &g_rows->merged},
      {"last_hidden", &g->last_hidden, &c->last_hidden, &g_rows->last_hidden},
      {"deepstack.0", &g->deepstack[0], &c->deepstack[0], &g_rows->deepstack[0]}};
  for (const auto& [key, ours, cpu_out, rows_out] : outs) {
    ASSERT_EQ(ours->shape(), cpu_out->shape()) << key;
    int64_t nonfinite = 0;
    for (int64_t i = 0; i < ours->numel(); ++i) nonfinite += !std::isfinite(ours->data<float>()[i]);
    const double err = test::rel_l2_f32(*ours, *cpu_out);
    std::printf("head_dim 72 %s: CUDA vs cpu backend rel-L2 %.3g\n", key.c_str(), err);
    EXPECT_EQ(nonfinite, 0) << key;
    EXPECT_GT(err, 0.0) << key << ": two realizations agreeing bit for bit everywhere is suspicious";
    EXPECT_LE(err, 1e-2) << key;
    EXPECT_EQ(std::memcmp(ours->raw_data(), rows_out->raw_data(), ours->nbytes()), 0)
        << key << ": u8 images and FP32 rows differ on the GPU";
  }
}

// Random BF16 values u * scale, u uniform in [-1, 1).
Tensor random_bf16(const Shape& shape, std::mt19937_64& rng, float scale) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  Tensor t = Tensor::empty(shape, DType::kBF16);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<uint16_t>()[i] = bf16_bits_from_f32(u(rng) * scale);
  return t;
}

// Element by element within 2 BF16 ulps of the CPU program's value (the GPU accumulates in FP32 in its own order,
// the CPU in FP64), and rel-L2 within 2e-3; returns the rel-L2.
double expect_close_bf16(const Tensor& got, const Tensor& want, const std::string& what) {
  double num = 0, den = 0;
  int64_t bad = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double g = f32_from_bf16_bits(got.data<uint16_t>()[i]), w = f32_from_bf16_bits(want.data<uint16_t>()[i]);
    num += (g - w) * (g - w);
    den += w * w;
    bad += !(std::fabs(g - w) <= std::ldexp(std::fabs(w), -7) + 1e-6);
  }
  const double err = std::sqrt(num / den);
  std::printf("%s: CUDA vs CPU program rel-L2 %.3g, %lld of %lld beyond 2 ulps\n", what.c_str(), err,
              static_cast<long long>(bad), static_cast<long long>(want.numel()));
  EXPECT_EQ(bad, 0) << what;
  EXPECT_LE(err, 2e-3) << what;
  return err;
}

TEST(VisionTowerCuda, VisionEpiloguesMatchTheirCpuPrograms) {
  auto gpu = CudaBackend::create(0);
  VORTEX_SKIP_NO_GPU_OR_FAIL(gpu.status());
  Backend& g = **gpu;
  CpuBackend cpu(0);
  ASSERT_TRUE(g.has_vision_epilogues() && cpu.has_vision_epilogues());
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  // (rows, K, N, a's row stride): the tower's fc1 / fc2 / proj widths at a few rows, odd counts, a strided a.
  for (const auto& [m, k, n, lda] : {std::tuple<int64_t, int64_t, int64_t, int64_t>{37, 144, 256, 144},
                                     {200, 1152, 576, 1152},
                                     {129, 576, 1152, 608},
                                     {64, 4304, 1152, 4304}}) {
    const std::string shape = std::to_string(m) + "x" + std::to_string(k) + "->" + std::to_string(n);
    SCOPED_TRACE(shape);
    const Tensor a_wide = random_bf16({m, lda}, rng, 2.0f);  // [M, lda] bf16; a = its first K columns
    const Tensor w = random_bf16({n, k}, rng, static_cast<float>(std::sqrt(3.0 / static_cast<double>(k))));
    const Tensor b = random_bf16({n}, rng, 0.5f);
    const Tensor x0 = random_bf16({m, n}, rng, 4.0f);  // the residual stream
    auto a_cpu = a_wide.narrow(1, 0, k);
    ASSERT_TRUE(a_cpu.ok());
    auto up = [&](const Tensor& t) {
      auto d = g.upload(t);
      EXPECT_TRUE(d.ok()) << d.status().to_string();
      return *d;
    };
    const Tensor a_dev_wide = up(a_wide), b_dev = up(b);
    auto a_dev = a_dev_wide.narrow(1, 0, k);
    ASSERT_TRUE(a_dev.ok());
    LinearWeight w_cpu, w_dev;
    w_cpu.weight = w;
    w_dev.weight = up(w);
    for (const bool with_bias : {true, false}) {
      SCOPED_TRACE(with_bias ? "bias" : "no bias");
      // fc1 + GELU: outputs poisoned with NaN first.
      Tensor want = Tensor::empty({m, n}, DType::kBF16);
      for (int64_t i = 0; i < want.numel(); ++i) want.data<uint16_t>()[i] = 0x7FC0;
      Tensor got_dev = up(want);
      ASSERT_TRUE(cpu.linear_gelu_tanh(*a_cpu, w_cpu, with_bias ? &b : nullptr, want).ok());
      Status st = g.linear_gelu_tanh(*a_dev, w_dev, with_bias ? &b_dev : nullptr, got_dev);
      ASSERT_TRUE(st.ok()) << st.to_string();
      Tensor got = Tensor::empty({m, n}, DType::kBF16);
      ASSERT_TRUE(g.download(got_dev, got).ok());
      expect_close_bf16(got, want, "linear_gelu_tanh " + shape);
      // projection + residual, in place on x.
      Tensor x_cpu = Tensor::empty({m, n}, DType::kBF16);
      std::memcpy(x_cpu.raw_data(), x0.raw_data(), x0.nbytes());
      Tensor x_dev = up(x0);
      ASSERT_TRUE(cpu.linear_residual(*a_cpu, w_cpu, with_bias ? &b : nullptr, x_cpu).ok());
      st = g.linear_residual(*a_dev, w_dev, with_bias ? &b_dev : nullptr, x_dev);
      ASSERT_TRUE(st.ok()) << st.to_string();
      ASSERT_TRUE(g.download(x_dev, got).ok());
      expect_close_bf16(got, x_cpu, "linear_residual " + shape);
      EXPECT_NE(std::memcmp(got.raw_data(), x0.raw_data(), x0.nbytes()), 0) << "x was not updated";
    }
  }
  // Shapes that do not fit are refused before any launch.
  Tensor a = *g.alloc({8, 64}, DType::kBF16), out = *g.alloc({8, 32}, DType::kBF16);
  LinearWeight w;
  w.weight = *g.alloc({16, 64}, DType::kBF16);
  EXPECT_EQ(g.linear_gelu_tanh(a, w, nullptr, out).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(g.linear_residual(a, w, nullptr, out).code(), ErrorCode::kInvalidArgument);
}

// The keyframes' vision embeddings handed to the text encoder as BF16 tensors left on the GPU give the same bytes as
// the FP32 host hand-off, at every hidden state (the conditioner fixture's two keyframes on the tiny Qwen3-VL).
TEST(VisionTowerCuda, DeviceHandOffEqualsTheHostHandOffBytes) {
  auto gpu = CudaBackend::create(0);
  VORTEX_SKIP_NO_GPU_OR_FAIL(gpu.status());
  auto enc = TextEncoder::load(kTeModel, **gpu, 4);
  ASSERT_TRUE(enc.ok()) << enc.status().to_string();
  auto tower = test::tower_from_model_folder(kTeModel, gpu->get());
  ASSERT_TRUE(tower.ok()) << tower.status().to_string();
  auto fx = SafetensorsFile::open(kDir + "/conditioner.safetensors");
  ASSERT_TRUE(fx.ok()) << fx.status().to_string();
  VisionProcessorConfig proc;
  proc.patch = 8;
  proc.min_pixels = 64;
  const Tensor ids_t = *fx->tensor("two.ids");
  const std::vector<int32_t> ids(ids_t.data<int32_t>(), ids_t.data<int32_t>() + ids_t.numel());
  std::vector<VisionInput> inputs;
  std::vector<std::pair<int, int>> grids;
  for (int i = 0; fx->contains("two.image." + std::to_string(i)); ++i) {
    const Tensor img = *fx->tensor("two.image." + std::to_string(i));
    RgbImage rgb{static_cast<int>(img.dim(1)), static_cast<int>(img.dim(0)), {}};
    rgb.rgb.assign(img.data<uint8_t>(), img.data<uint8_t>() + img.numel());
    auto in = image_input(rgb, proc);
    ASSERT_TRUE(in.ok()) << in.status().to_string();
    grids.push_back({in->grid_h, in->grid_w});
    inputs.push_back(std::move(*in));
  }
  ASSERT_EQ(inputs.size(), 2u);
  auto positions = mrope_positions_with_images(ids, 500, grids, 2);
  ASSERT_TRUE(positions.ok()) << positions.status().to_string();
  auto host = tower->forward(inputs, /*with_last_hidden=*/false);
  auto dev = tower->forward_device(inputs);
  ASSERT_TRUE(host.ok() && dev.ok());
  VisionEmbeddings vh, vd;
  for (size_t r = 0; r < ids.size(); ++r)
    if (ids[r] == 500) vh.rows.push_back(static_cast<int64_t>(r));
  vd.rows = vh.rows;
  vh.tokens = host->merged;
  vh.deepstack = host->deepstack;
  vd.tokens = dev->merged;
  vd.deepstack = dev->deepstack;
  ASSERT_EQ(vd.tokens.dtype(), DType::kBF16);
  ASSERT_EQ(vd.tokens.device(), Device::kCuda);
  for (int k = 0; k <= 4; ++k) {
    auto a = (*enc)->encode(ids, *positions, k, &vh);
    auto b = (*enc)->encode(ids, *positions, k, &vd);
    ASSERT_TRUE(a.ok()) << a.status().to_string();
    ASSERT_TRUE(b.ok()) << b.status().to_string();
    ASSERT_EQ(a->shape(), b->shape());
    EXPECT_EQ(std::memcmp(a->raw_data(), b->raw_data(), a->nbytes()), 0) << "hidden_states[" << k << "]";
  }
  // Mixed forms are refused with the form named.
  VisionEmbeddings mixed = vd;
  mixed.deepstack = host->deepstack;
  auto refused = (*enc)->encode(ids, *positions, 4, &mixed);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().to_string().find("bf16 on the text encoder's device"), std::string::npos)
      << refused.status().to_string();
}

}  // namespace
}  // namespace vortex
