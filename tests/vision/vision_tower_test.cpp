// The Qwen3-VL image processor and vision tower against transformers 5.x (tests/vision/make_vision_fixtures.py):
// pixel_values bit for bit (the tiny model's processor and the release's on 1344x768 / 768x1344 canvases, whose
// config is a verbatim copy of FL2VA/processor/preprocessor_config.json); the vision tokens and DeepStack
// features within 2x diffusers' FP32 floor (FP32 transformers vs FP64 transformers); errors.
#include <openssl/sha.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <tuple>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "io/safetensors.h"
#include "ref/cpu_backend.h"
#include "seed.h"
#include "vae/vae_checkpoint.h"
#include "vision/vision_tower.h"
#include "vision_test_util.h"

namespace vortex {
namespace {

const std::string kDir = VORTEX_VISION_FIXTURES;

nlohmann::json read_json(const std::string& path) { return nlohmann::json::parse(std::ifstream(path)); }
// A config file through the one config reader, labelled with its path.
ConfigJson read_config(const std::string& path) {
  auto c = ConfigJson::read_file(path);
  EXPECT_TRUE(c.ok()) << c.status().to_string();
  return c.ok() ? std::move(*c) : ConfigJson();
}
ConfigJson config_of(nlohmann::json j) {
  auto c = ConfigJson::from_object(std::move(j), "edited config.json");
  EXPECT_TRUE(c.ok()) << c.status().to_string();
  return c.ok() ? std::move(*c) : ConfigJson();
}

std::string sha256_hex(const void* data, size_t n) {
  unsigned char md[SHA256_DIGEST_LENGTH];
  SHA256(static_cast<const unsigned char*>(data), n, md);
  char hex[2 * SHA256_DIGEST_LENGTH + 1];
  for (int i = 0; i < SHA256_DIGEST_LENGTH; ++i) std::snprintf(hex + 2 * i, 3, "%02x", md[i]);
  return hex;
}

struct Fixture {
  SafetensorsFile cases;
  SafetensorsSet weights;
  nlohmann::json meta;
};

const Fixture& fixture() {
  static const Fixture f = [] {
    auto c = SafetensorsFile::open(kDir + "/cases.safetensors");
    EXPECT_TRUE(c.ok()) << c.status().to_string();
    auto w = SafetensorsSet::open(kDir + "/model/model.safetensors");
    EXPECT_TRUE(w.ok()) << w.status().to_string();
    return Fixture{std::move(*c), std::move(*w), read_json(kDir + "/meta.json")};
  }();
  return f;
}

Tensor get(const std::string& name) {
  auto t = fixture().cases.tensor(name);
  EXPECT_TRUE(t.ok()) << name << ": " << t.status().to_string();
  return t.ok() ? *t : Tensor();
}

VisionTower tower(Backend* backend = nullptr) {
  auto cfg = VisionConfig::from_json(read_config(kDir + "/model/config.json"));
  EXPECT_TRUE(cfg.ok()) << cfg.status().to_string();
  const SafetensorsSet* w = &fixture().weights;
  VaeTensorSource source = [w](const std::string& name, const Shape& shape) -> Result<Tensor> {
    if (!w->find(name)) return not_found("no tensor " + name);
    VORTEX_ASSIGN_OR_RETURN(Tensor t, w->tensor(name));
    if (t.shape() != shape) return format_error(name + ": shape " + t.describe());
    return to_f32_host(t, name);
  };
  auto t = VisionTower::from_source(*cfg, source, backend);
  EXPECT_TRUE(t.ok()) << t.status().to_string();
  return std::move(*t);
}

VisionProcessorConfig tiny_processor() {
  auto p = VisionProcessorConfig::from_json(read_config(kDir + "/release/preprocessor_config.json"));
  EXPECT_TRUE(p.ok()) << p.status().to_string();
  p->patch = 8;
  p->min_pixels = 256;
  return *p;
}

RgbImage image_of(const Tensor& t) {
  RgbImage img{static_cast<int>(t.dim(1)), static_cast<int>(t.dim(0)), {}};
  img.rgb.assign(t.data<uint8_t>(), t.data<uint8_t>() + t.numel());
  return img;
}

TEST(VisionProcessor, TinyPixelValuesBitExact) {
  for (const auto& [name, c] : fixture().meta["cases"].items()) {
    SCOPED_TRACE(name);
    auto in = preprocess_image(image_of(get(name + ".image")), tiny_processor());
    ASSERT_TRUE(in.ok()) << in.status().to_string();
    EXPECT_EQ(in->grid_h, c["grid_thw"][1].get<int>());
    EXPECT_EQ(in->grid_w, c["grid_thw"][2].get<int>());
    const Tensor want = get(name + ".pixel_values");
    ASSERT_EQ(in->pixel_values.shape(), want.shape());
    EXPECT_EQ(std::memcmp(in->pixel_values.data<float>(), want.data<float>(), want.nbytes()), 0);
  }
}

TEST(VisionProcessor, ReleaseProcessorOnCanvasesBitExact) {
  auto cfg = VisionProcessorConfig::from_json(read_config(kDir + "/release/preprocessor_config.json"));
  ASSERT_TRUE(cfg.ok()) << cfg.status().to_string();
  EXPECT_EQ(cfg->patch, 16);
  EXPECT_EQ(cfg->min_pixels, 65536);
  for (const auto& r : fixture().meta["release_processor"]) {
    const int h = r["height"].get<int>(), w = r["width"].get<int>();
    RgbImage img{w, h, std::vector<uint8_t>(static_cast<size_t>(w) * h * 3)};
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x)
        for (int c = 0; c < 3; ++c)
          img.rgb[(static_cast<size_t>(y) * w + x) * 3 + c] =
              static_cast<uint8_t>((7 * y + 13 * x + 29 * c + (x * y) % 11) % 256);
    auto in = preprocess_image(img, *cfg);
    ASSERT_TRUE(in.ok()) << in.status().to_string();
    EXPECT_EQ(in->grid_h, r["grid_thw"][1].get<int>());
    EXPECT_EQ(in->grid_w, r["grid_thw"][2].get<int>());
    EXPECT_EQ(sha256_hex(in->pixel_values.data<float>(), in->pixel_values.nbytes()), r["sha256"].get<std::string>())
        << w << "x" << h;
  }
}

TEST(VisionProcessor, SmartResizeAndRefusal) {
  VisionProcessorConfig cfg;
  auto s = smart_resize(768, 1344, cfg);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->first, 768);
  EXPECT_EQ(s->second, 1344);
  s = smart_resize(100, 150, cfg);  // below 65536 pixels: scaled up
  ASSERT_TRUE(s.ok());
  EXPECT_GE(static_cast<int64_t>(s->first) * s->second, 65536);
  RgbImage odd{100, 60, std::vector<uint8_t>(100 * 60 * 3, 7)};
  auto r = preprocess_image(odd, cfg);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kUnsupported);
}

// max |got - truth| and rms over a tensor pair, with FP64 truth.
void errors(const Tensor& got, const Tensor& truth, double* max_abs, double* rms) {
  double se = 0;
  *max_abs = 0;
  for (int64_t i = 0; i < truth.numel(); ++i) {
    const double e = std::abs(static_cast<double>(got.data<float>()[i]) - truth.data<double>()[i]);
    *max_abs = std::max(*max_abs, e);
    se += e * e;
  }
  *rms = std::sqrt(se / static_cast<double>(truth.numel()));
}

void expect_within_floor(const std::string& what, const Tensor& ours, const Tensor& theirs, const Tensor& truth) {
  ASSERT_EQ(ours.shape(), truth.shape()) << what;
  double om, orms, fm, frms;
  errors(ours, truth, &om, &orms);
  errors(theirs, truth, &fm, &frms);
  std::printf("%s %s: Vortex vs FP64 max %.3g rms %.3g; transformers FP32 vs FP64 (floor) max %.3g rms %.3g\n",
              what.c_str(), ours.describe().c_str(), om, orms, fm, frms);
  EXPECT_LE(orms, 2 * frms + 1e-7) << what;
  EXPECT_LE(om, 2 * fm + 1e-6) << what;
}

TEST(VisionTower, VisionTokensAndDeepStackWithinTwiceTheFloor) {
  const VisionTower t = tower();
  EXPECT_EQ(t.config().deepstack, (std::vector<int>{0, 2}));
  for (const auto& [name, c] : fixture().meta["cases"].items()) {
    SCOPED_TRACE(name);
    VisionInput in;
    in.pixel_values = get(name + ".pixel_values");
    in.grid_h = c["grid_thw"][1].get<int>();
    in.grid_w = c["grid_thw"][2].get<int>();
    auto out = t.forward(in);
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    expect_within_floor(name + " merged", out->merged, get(name + ".merged"), get(name + ".merged64"));
    ASSERT_EQ(out->deepstack.size(), 2u);
    for (int k = 0; k < 2; ++k)
      expect_within_floor(name + " deepstack " + std::to_string(k), out->deepstack[static_cast<size_t>(k)],
                          get(name + ".deepstack." + std::to_string(k)),
                          get(name + ".deepstack64." + std::to_string(k)));
    // The blocks' output against FP32 transformers (no FP64 copy of it is kept): close, not equal.
    const Tensor want = get(name + ".last_hidden");
    ASSERT_EQ(out->last_hidden.shape(), want.shape());
    double worst = 0;
    for (int64_t i = 0; i < want.numel(); ++i)
      worst = std::max(worst, static_cast<double>(std::abs(out->last_hidden.data<float>()[i] - want.data<float>()[i])));
    EXPECT_LT(worst, 1e-4);
  }
}

// The BF16 program (VisionTower::from_source with a backend) on the cpu backend against transformers' BF16 vision
// model (tests/vision/make_vision_bf16_fixtures.py): within 2x the floor, transformers BF16 vs FP32.
// Both programs: the separate GELU and residual passes (the default) and the opt-in fused GEMM epilogues.
TEST(VisionTower, Bf16ProgramOnCpuBackendWithinTwiceTheFloor) {
  CpuBackend cpu(0);
  VisionTower t = tower(&cpu);
  ASSERT_EQ(t.backend(), &cpu);
  ASSERT_FALSE(t.fused_epilogues());  // opt-in (src/vision/vision_tower.h)
  auto bf16 = SafetensorsFile::open(kDir + "/cases_bf16.safetensors");
  ASSERT_TRUE(bf16.ok()) << bf16.status().to_string();
  for (const bool fused : {true, false})
    for (const auto& [name, c] : fixture().meta["cases"].items()) {
      SCOPED_TRACE(name + (fused ? " fused" : " unfused"));
      t.set_fused_epilogues(fused);
      VisionInput in;
      in.pixel_values = get(name + ".pixel_values");
      in.grid_h = c["grid_thw"][1].get<int>();
      in.grid_w = c["grid_thw"][2].get<int>();
      auto out = t.forward(in);
      ASSERT_TRUE(out.ok()) << out.status().to_string();
      std::vector<std::pair<std::string, const Tensor*>> outputs = {{"merged", &out->merged},
                                                                    {"last_hidden", &out->last_hidden}};
      ASSERT_EQ(out->deepstack.size(), 2u);
      for (int k = 0; k < 2; ++k)
        outputs.emplace_back("deepstack." + std::to_string(k), &out->deepstack[static_cast<size_t>(k)]);
      for (const auto& [key, ours] : outputs) {
        auto theirs = bf16->tensor(name + "." + key);
        ASSERT_TRUE(theirs.ok()) << theirs.status().to_string();
        const Tensor fp32 = get(name + "." + key);
        ASSERT_EQ(ours->shape(), theirs->shape()) << key;
        const double floor = test::rel_l2_f32(*theirs, fp32), err = test::rel_l2_f32(*ours, *theirs);
        std::printf("%s %s %s: Vortex BF16 vs transformers BF16 rel-L2 %.3g; floor (transformers BF16 vs FP32) %.3g\n",
                    fused ? "fused" : "unfused", name.c_str(), key.c_str(), err, floor);
        EXPECT_GT(floor, 0.0) << key;
        EXPECT_LE(err, 2 * floor) << key;
      }
    }
}

// The CPU programs of the fused epilogues (src/ref/encoder_ops.h) against the program they state, written out here:
// the FP64 ascending-k dot product plus bias rounded to FP32, then GELU-tanh in FP32 or the residual add, one BF16
// rounding; byte for byte, on fresh random operands, a strided a, with and without a bias.
TEST(VisionTower, EpilogueCpuProgramsAreTheStatedProgram) {
  CpuBackend cpu(0);
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  auto random_bf16 = [&](const Shape& shape, float scale) {
    Tensor t = Tensor::empty(shape, DType::kBF16);
    for (int64_t i = 0; i < t.numel(); ++i) t.data<uint16_t>()[i] = bf16_bits_from_f32(u(rng) * scale);
    return t;
  };
  auto f = [](uint16_t bits) { return f32_from_bf16_bits(bits); };
  const int64_t m = 19, k = 40, n = 24, lda = 48;
  const Tensor a_wide = random_bf16({m, lda}, 2.0f), w = random_bf16({n, k}, 0.3f), b = random_bf16({n}, 0.5f);
  const Tensor x0 = random_bf16({m, n}, 3.0f);
  auto a = a_wide.narrow(1, 0, k);  // [M, K] rows of stride lda
  ASSERT_TRUE(a.ok());
  LinearWeight lw;
  lw.weight = w;
  for (const bool with_bias : {true, false}) {
    SCOPED_TRACE(with_bias ? "bias" : "no bias");
    Tensor out = Tensor::empty({m, n}, DType::kBF16);
    for (int64_t i = 0; i < out.numel(); ++i) out.data<uint16_t>()[i] = 0x7FC0;  // NaN poison
    Tensor x = Tensor::empty({m, n}, DType::kBF16);
    std::memcpy(x.raw_data(), x0.raw_data(), x0.nbytes());
    ASSERT_TRUE(cpu.linear_gelu_tanh(*a, lw, with_bias ? &b : nullptr, out).ok());
    ASSERT_TRUE(cpu.linear_residual(*a, lw, with_bias ? &b : nullptr, x).ok());
    int64_t changed = 0;
    for (int64_t r = 0; r < m; ++r)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0.0;
        for (int64_t i = 0; i < k; ++i)
          acc += static_cast<double>(f(a_wide.data<uint16_t>()[r * lda + i])) * f(w.data<uint16_t>()[j * k + i]);
        if (with_bias) acc += f(b.data<uint16_t>()[j]);
        const float y = static_cast<float>(acc);
        volatile float cube = y * y * y;
        volatile float inner = y + 0.044715f * cube;
        volatile float t = std::tanh(0.7978845608028654f * inner);
        volatile float half = 0.5f * y;
        volatile float g = half * (1.0f + t);
        volatile float sum = f(x0.data<uint16_t>()[r * n + j]) + y;
        ASSERT_EQ(out.data<uint16_t>()[r * n + j], bf16_bits_from_f32(g)) << r << "," << j;
        ASSERT_EQ(x.data<uint16_t>()[r * n + j], bf16_bits_from_f32(sum)) << r << "," << j;
        changed += x.data<uint16_t>()[r * n + j] != x0.data<uint16_t>()[r * n + j];
      }
    EXPECT_GT(changed, m * n / 2);
  }
  // Refusals: a weight that does not map a onto the output, an f32 weight.
  Tensor small = Tensor::empty({m, n - 1}, DType::kBF16);
  EXPECT_EQ(cpu.linear_gelu_tanh(*a, lw, nullptr, small).code(), ErrorCode::kInvalidArgument);
  LinearWeight lw32;
  lw32.weight = Tensor::zeros({n, k}, DType::kF32);
  Tensor out = Tensor::empty({m, n}, DType::kBF16);
  EXPECT_EQ(cpu.linear_residual(*a, lw32, nullptr, out).code(), ErrorCode::kInvalidArgument);
}

// Several images in one call equal the per-image forwards stacked in input order, byte for byte, on the FP32
// reference and on the BF16 program of the cpu backend: equal sizes (one batched attention call), different sizes
// (attention per image's rows) and three images. The second image of a size is another image (negated, rows
// reversed), so attention across images would change the result.
TEST(VisionTower, SeveralImagesInOneCallEqualPerImageForwards) {
  std::vector<VisionInput> cases;
  for (const auto& [name, c] : fixture().meta["cases"].items()) {
    VisionInput in;
    in.pixel_values = get(name + ".pixel_values");
    in.grid_h = c["grid_thw"][1].get<int>();
    in.grid_w = c["grid_thw"][2].get<int>();
    cases.push_back(in);
  }
  ASSERT_GE(cases.size(), 2u);
  ASSERT_NE(cases[0].pixel_values.dim(0), cases[1].pixel_values.dim(0));
  VisionInput other = cases[0];
  other.pixel_values = Tensor::empty(cases[0].pixel_values.shape(), DType::kF32);
  const int64_t rows = other.pixel_values.dim(0), cols = other.pixel_values.dim(1);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < cols; ++j)
      other.pixel_values.data<float>()[r * cols + j] = -cases[0].pixel_values.data<float>()[(rows - 1 - r) * cols + j];
  CpuBackend cpu(0);
  for (Backend* backend : {static_cast<Backend*>(nullptr), static_cast<Backend*>(&cpu)}) {
    SCOPED_TRACE(backend ? "cpu backend" : "FP32 reference");
    const VisionTower t = tower(backend);
    for (const std::vector<VisionInput>& batch :
         {std::vector<VisionInput>{cases[0], other}, std::vector<VisionInput>{cases[0], cases[1]},
          std::vector<VisionInput>{cases[1], other, cases[0]}}) {
      auto together = t.forward(batch);
      ASSERT_TRUE(together.ok()) << together.status().to_string();
      std::vector<VisionTower::Output> alone;
      for (const VisionInput& in : batch) {
        auto o = t.forward(in);
        ASSERT_TRUE(o.ok()) << o.status().to_string();
        alone.push_back(std::move(*o));
      }
      auto expect_stacked = [&](const Tensor& got, auto pick, const std::string& what) {
        int64_t at = 0;
        for (const VisionTower::Output& o : alone) {
          const Tensor& part = pick(o);
          ASSERT_LE(at + part.numel(), got.numel()) << what;
          EXPECT_EQ(std::memcmp(got.data<float>() + at, part.data<float>(), part.nbytes()), 0)
              << what << " differs at the image starting at element " << at;
          at += part.numel();
        }
        EXPECT_EQ(at, got.numel()) << what;
      };
      expect_stacked(
          together->merged, [](const VisionTower::Output& o) -> const Tensor& { return o.merged; }, "merged");
      expect_stacked(
          together->last_hidden, [](const VisionTower::Output& o) -> const Tensor& { return o.last_hidden; },
          "last_hidden");
      ASSERT_EQ(together->deepstack.size(), 2u);
      for (size_t k = 0; k < 2; ++k)
        expect_stacked(
            together->deepstack[k], [k](const VisionTower::Output& o) -> const Tensor& { return o.deepstack[k]; },
            "deepstack " + std::to_string(k));
    }
    EXPECT_FALSE(t.forward(std::vector<VisionInput>{}).ok());
  }
}

// Backend::vision_pixel_rows (src/ref/vision_prep.h) is the processor's FP32 rows rounded to BF16, bit for bit, on
// fresh random u8 canvases with the release's processor and the tiny one.
TEST(VisionProcessor, PixelRowsOpEqualsProcessorRoundedToBf16) {
  const uint64_t seed = testing::fresh_seed();
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> byte(0, 255);
  auto release = VisionProcessorConfig::from_json(read_config(kDir + "/release/preprocessor_config.json"));
  ASSERT_TRUE(release.ok()) << release.status().to_string();
  CpuBackend cpu(0);
  for (const auto& [cfg, h, w] : {std::tuple{*release, 256, 384}, std::tuple{tiny_processor(), 32, 48}}) {
    RgbImage img{w, h, std::vector<uint8_t>(static_cast<size_t>(w) * h * 3)};
    for (uint8_t& v : img.rgb) v = static_cast<uint8_t>(byte(rng));
    auto f32 = preprocess_image(img, cfg);
    ASSERT_TRUE(f32.ok()) << f32.status().to_string();
    auto u8 = image_input(img, cfg);
    ASSERT_TRUE(u8.ok()) << u8.status().to_string();
    ASSERT_FALSE(u8->pixel_values.defined());
    ASSERT_EQ(u8->grid_h, f32->grid_h);
    ASSERT_EQ(u8->grid_w, f32->grid_w);
    Tensor rows = Tensor::empty(f32->pixel_values.shape(), DType::kBF16);
    std::memset(rows.raw_data(), 0xFF, rows.nbytes());  // poisoned
    Status st = cpu.vision_pixel_rows(u8->rgb, u8->mean255, u8->std255, cfg.patch, cfg.temporal_patch, cfg.merge, rows);
    ASSERT_TRUE(st.ok()) << st.to_string();
    int64_t differ = 0;
    for (int64_t i = 0; i < rows.numel(); ++i)
      differ += rows.data<uint16_t>()[i] != bf16_bits_from_f32(f32->pixel_values.data<float>()[i]);
    EXPECT_EQ(differ, 0) << "seed " << seed;
  }
}

// A u8 VisionInput (image_input) gives the tower the same outputs as the processor's FP32 rows, on the FP32
// reference and on the cpu backend, alone and mixed in one call; forward without last_hidden leaves it undefined.
TEST(VisionTower, U8ImagesEqualProcessorRows) {
  std::vector<VisionInput> f32, u8;
  for (const auto& [name, c] : fixture().meta["cases"].items()) {
    const RgbImage img = image_of(get(name + ".image"));
    auto a = preprocess_image(img, tiny_processor());
    auto b = image_input(img, tiny_processor());
    ASSERT_TRUE(a.ok() && b.ok());
    f32.push_back(std::move(*a));
    u8.push_back(std::move(*b));
  }
  ASSERT_GE(f32.size(), 2u);
  CpuBackend cpu(0);
  auto same = [](const Tensor& a, const Tensor& b) {
    return a.shape() == b.shape() && std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
  };
  for (Backend* backend : {static_cast<Backend*>(nullptr), static_cast<Backend*>(&cpu)}) {
    SCOPED_TRACE(backend ? "cpu backend" : "FP32 reference");
    const VisionTower t = tower(backend);
    auto want = t.forward(f32);
    ASSERT_TRUE(want.ok()) << want.status().to_string();
    for (const std::vector<VisionInput>& batch : {u8, std::vector<VisionInput>{u8[0], f32[1]}}) {
      auto got = t.forward(batch);
      ASSERT_TRUE(got.ok()) << got.status().to_string();
      EXPECT_TRUE(same(got->merged, want->merged));
      EXPECT_TRUE(same(got->last_hidden, want->last_hidden));
      ASSERT_EQ(got->deepstack.size(), want->deepstack.size());
      for (size_t k = 0; k < got->deepstack.size(); ++k) EXPECT_TRUE(same(got->deepstack[k], want->deepstack[k]));
    }
    auto lean = t.forward(u8, /*with_last_hidden=*/false);
    ASSERT_TRUE(lean.ok()) << lean.status().to_string();
    EXPECT_FALSE(lean->last_hidden.defined());
    EXPECT_TRUE(same(lean->merged, want->merged));
    // A u8 input whose image does not match its grid is refused before any work.
    VisionInput bad = u8[0];
    bad.grid_w += 2;
    EXPECT_EQ(t.forward(bad).status().code(), ErrorCode::kInvalidArgument);
    bad = u8[0];
    bad.std255[1] = 0.0f;
    EXPECT_FALSE(t.forward(bad).ok());
  }
}

TEST(VisionTower, ReleaseConfigAndErrors) {
  // A verbatim copy of the release's text_encoder/config.json: its vision_config.
  auto cfg = VisionConfig::from_json(read_config(kDir + "/release/text_encoder_config.json"));
  ASSERT_TRUE(cfg.ok()) << cfg.status().to_string();
  EXPECT_EQ(cfg->depth, 27);
  EXPECT_EQ(cfg->hidden, 1152);
  EXPECT_EQ(cfg->out_hidden, 5120);
  EXPECT_EQ(cfg->deepstack, (std::vector<int>{8, 16, 24}));
  EXPECT_EQ(cfg->num_positions, 2304);
  nlohmann::json bad = read_json(kDir + "/model/config.json");
  bad["vision_config"]["num_position_embeddings"] = 35;
  EXPECT_FALSE(VisionConfig::from_json(config_of(bad)).ok());
  bad["vision_config"]["num_position_embeddings"] = 36;
  bad["vision_config"]["deepstack_visual_indexes"] = {0, 9};
  EXPECT_FALSE(VisionConfig::from_json(config_of(bad)).ok());
  // Through ConfigJson: a wrong type names the file and key, another component's config is refused by class name.
  bad["vision_config"]["deepstack_visual_indexes"] = {0, 1};
  ASSERT_TRUE(VisionConfig::from_json(config_of(bad)).ok());
  bad["vision_config"]["depth"] = 2.5;
  auto typed = VisionConfig::from_json(config_of(bad));
  ASSERT_FALSE(typed.ok());
  EXPECT_EQ(typed.status().code(), ErrorCode::kFormat);
  EXPECT_NE(typed.status().message().find("edited config.json:vision_config: 'depth'"), std::string::npos)
      << typed.status().to_string();
  auto vae = VisionConfig::from_json(config_of({{"_class_name", "AutoencoderKLMiniMaxH3"}, {"depth", 2}}));
  ASSERT_FALSE(vae.ok());
  EXPECT_NE(vae.status().message().find("the video VAE"), std::string::npos) << vae.status().to_string();
  nlohmann::json processor = read_json(kDir + "/release/preprocessor_config.json");
  processor["image_std"] = {0.5, 0.5};
  EXPECT_FALSE(VisionProcessorConfig::from_json(config_of(processor)).ok());
  processor["image_std"] = {0.5, 0.5, 0.5};
  processor["do_normalize"] = "yes";
  auto flag = VisionProcessorConfig::from_json(config_of(processor));
  ASSERT_FALSE(flag.ok());
  EXPECT_NE(flag.status().message().find("'do_normalize'"), std::string::npos) << flag.status().to_string();
  processor["do_normalize"] = false;
  EXPECT_EQ(VisionProcessorConfig::from_json(config_of(processor)).status().code(), ErrorCode::kUnsupported);
  const VisionTower t = tower();
  VisionInput in;
  in.pixel_values = Tensor::empty({6, 384}, DType::kF32);
  in.grid_h = 2;
  in.grid_w = 3;  // not divisible by the merge size
  EXPECT_FALSE(t.forward(in).ok());
}

}  // namespace
}  // namespace vortex
