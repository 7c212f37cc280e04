// LoRA tests: every key style of tests/lora/fixtures normalised to the layers diffusers/PEFT adapted; the
// PEFT-compatible merge bit-identical to diffusers' fuse_lora (SHA-256 per weight); the single-rounding merge
// within one BF16 ulp of it; the run-time branch vs the merge (two-reference rule vs FP64); unmerge exact;
// bad files; generate end to end (a LoRA moves the latents, scale 0 reproduces the base bit for bit).
// Fixtures: tests/lora/make_lora_fixtures.py (diffusers 0.42.1 + PEFT), on the tiny H3 of tests/parity.
#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "core/rng.h"
#include "engine/generate.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "lora/lora.h"
#include "model/h3_spec.h"
#include "ref/cpu_backend.h"
#include "ref/ref_ops.h"

namespace vortex {
namespace {

namespace fs = std::filesystem;

std::string lora_dir() { return VORTEX_LORA_FIXTURES; }
std::string model_dir() { return std::string(VORTEX_PARITY_FIXTURES) + "/model_diffusers"; }
std::string fixture(const std::string& name) { return lora_dir() + "/" + name + ".safetensors"; }

nlohmann::json expected() {
  std::ifstream in(lora_dir() + "/expected.json");
  return nlohmann::json::parse(std::string(std::istreambuf_iterator<char>(in), {}));
}

std::string sha256_hex(const void* data, size_t n) {
  unsigned char md[32];
  unsigned int len = 0;
  EVP_Digest(data, n, md, &len, EVP_sha256(), nullptr);
  std::string s;
  char b[3];
  for (unsigned i = 0; i < len; ++i) {
    std::snprintf(b, sizeof b, "%02x", md[i]);
    s += b;
  }
  return s;
}

struct Tiny {
  ModelConfig cfg;
  CpuBackend backend{2};
  H3Weights weights;
};

std::unique_ptr<Tiny> load_tiny() {
  auto t = std::make_unique<Tiny>();
  Result<ModelConfig> cfg = config_for_checkpoint(model_dir());
  EXPECT_TRUE(cfg.ok()) << cfg.status().to_string();
  t->cfg = *cfg;
  Result<H3Weights> w = load_checkpoint(model_dir(), t->cfg, t->backend);
  EXPECT_TRUE(w.ok()) << w.status().to_string();
  t->weights = std::move(*w);
  return t;
}

// name -> BF16 weight tensor of every LoRA target.
std::map<std::string, Tensor*> targets(H3Weights& w) {
  std::map<std::string, Tensor*> m;
  for (auto& [name, lw] : h3_linear_slots(w)) m[name] = &lw->weight;
  for (size_t i = 0; i < w.blocks.size(); ++i)
    m["blocks." + std::to_string(i) + ".adaln_proj.linear"] = &w.blocks[i].adaln_proj_linear_weight;
  m["final_layer.adaln_proj.linear"] = &w.final_layer_adaln_proj_linear_weight;
  return m;
}

LoraLoadOptions options_for(const nlohmann::json& e) {
  LoraLoadOptions o;
  o.explicit_scale = !e["explicit_scale"].is_null();
  return o;
}

const char* kStyles[] = {"native_comfy", "kohya_unet", "peft_split", "peft_default"};

TEST(LoraKeys, EveryStyleTargetsTheLayersPeftAdapted) {
  auto tiny = load_tiny();
  const nlohmann::json ex = expected();
  const std::map<std::string, std::string> style = {
      {"native_comfy", "native"}, {"kohya_unet", "native"}, {"peft_split", "diffusers"}, {"peft_default", "diffusers"}};
  for (const char* name : kStyles) {
    const nlohmann::json& e = ex["files"][name];
    Result<LoraAdapter> ad = load_lora(fixture(name), tiny->cfg, options_for(e));
    ASSERT_TRUE(ad.ok()) << name << ": " << ad.status().to_string();
    std::set<std::string> layers;
    for (const LoraPart& p : ad->parts) layers.insert(p.layer);
    const std::vector<std::string> want = e["layers"].get<std::vector<std::string>>();
    EXPECT_EQ(std::vector<std::string>(layers.begin(), layers.end()), want) << name;
    EXPECT_EQ(ad->key_style, style.at(name)) << name;
    if (!e["effective_scale"].is_null()) {
      for (const LoraPart& p : ad->parts)
        EXPECT_EQ(e["strength"].get<double>() * p.alpha_scale, e["effective_scale"].get<double>())
            << name << " " << p.source;
    }
  }
}

TEST(LoraKeys, SplitQkvLandsOnTheBlockedThirds) {
  auto tiny = load_tiny();
  Result<LoraAdapter> ad = load_lora(fixture("peft_split"), tiny->cfg);
  ASSERT_TRUE(ad.ok()) << ad.status().to_string();
  const int64_t inner = tiny->cfg.inner();
  std::map<std::string, std::pair<int64_t, double>> seen;  // source -> (row offset, alpha / r)
  for (const LoraPart& p : ad->parts) seen[p.source] = {p.row_offset, p.alpha_scale};
  EXPECT_EQ(seen.at("transformer_blocks.1.attn.to_q"), std::make_pair(int64_t{0}, 0.5));
  EXPECT_EQ(seen.at("transformer_blocks.1.attn.to_k"), std::make_pair(inner, 1.0));  // rank 4, metadata alpha 4
  EXPECT_EQ(seen.at("transformer_blocks.1.attn.to_v"), std::make_pair(2 * inner, 0.5));
  EXPECT_NE(ad->alpha_source.find("__metadata__ alpha = 4"), std::string::npos) << ad->alpha_source;
}

// diffusers' fuse_lora on the CPU (PEFT merge): Vortex's kPeft program gives the same bytes for every weight.
TEST(LoraMerge, PeftProgramBitIdenticalToDiffusersFuseLora) {
  const nlohmann::json ex = expected();
  for (const char* name : kStyles) {
    auto tiny = load_tiny();
    const nlohmann::json& e = ex["files"][name];
    Result<LoraAdapter> ad = load_lora(fixture(name), tiny->cfg, options_for(e));
    ASSERT_TRUE(ad.ok()) << ad.status().to_string();
    const double strength =
        e["explicit_scale"].is_null() ? e["strength"].get<double>() : e["explicit_scale"].get<double>();
    ASSERT_TRUE(merge_lora(tiny->weights, *ad, strength, tiny->backend, LoraMergeProgram::kPeft).ok());
    int checked = 0;
    for (auto& [layer, t] : targets(tiny->weights)) {
      ASSERT_TRUE(e["sha256"].contains(layer)) << layer;
      EXPECT_EQ(sha256_hex(t->raw_data(), t->nbytes()), e["sha256"][layer].get<std::string>()) << name << " " << layer;
      ++checked;
    }
    EXPECT_EQ(checked, 15) << name;
  }
}

// Vortex's default merge rounds once; PEFT rounds the delta to BF16 first. Where W and the delta cancel, the
// delta's rounding can exceed an ulp of the result, so the bound is in ulps of max(|W|, |W'|): at most 2
// (half an ulp of the delta, |delta| <= 2 max, plus the final rounding). Counts are printed.
TEST(LoraMerge, SingleRoundingVsPeftWithinTwoUlpsOfTheOperands) {
  auto ulp = [](double v) {
    int e = 0;
    std::frexp(std::max(std::abs(v), 1e-30), &e);
    return std::ldexp(1.0, e - 8);  // BF16: 8 significant bits
  };
  for (const char* name : {"native_comfy", "peft_split"}) {
    auto a = load_tiny();
    auto b = load_tiny();
    auto base = load_tiny();
    Result<LoraAdapter> ad = load_lora(fixture(name), a->cfg);
    ASSERT_TRUE(ad.ok()) << ad.status().to_string();
    ASSERT_TRUE(merge_lora(a->weights, *ad, 1.0, a->backend, LoraMergeProgram::kSingleRounding).ok());
    ASSERT_TRUE(merge_lora(b->weights, *ad, 1.0, b->backend, LoraMergeProgram::kPeft).ok());
    auto ta = targets(a->weights), tb = targets(b->weights), t0 = targets(base->weights);
    int64_t total = 0, differ = 0, beyond_result_ulp = 0;
    for (auto& [layer, t] : ta) {
      const uint16_t* x = t->data<uint16_t>();
      const uint16_t* y = tb[layer]->data<uint16_t>();
      const uint16_t* w = t0[layer]->data<uint16_t>();
      for (int64_t i = 0; i < t->numel(); ++i) {
        ++total;
        if (x[i] == y[i]) continue;
        ++differ;
        const double xv = f32_from_bf16_bits(x[i]), yv = f32_from_bf16_bits(y[i]), wv = f32_from_bf16_bits(w[i]);
        const double m = std::max({std::abs(xv), std::abs(yv), std::abs(wv)});
        ASSERT_LE(std::abs(xv - yv), 2 * ulp(m)) << layer << " element " << i;
        if (std::abs(xv - yv) > ulp(std::max(std::abs(xv), std::abs(yv)))) ++beyond_result_ulp;
      }
    }
    std::printf(
        "%s: single-rounding vs PEFT merge: %lld of %lld elements differ, %lld by more than 1 ulp of the "
        "result (cancellation)\n",
        name, static_cast<long long>(differ), static_cast<long long>(total), static_cast<long long>(beyond_result_ulp));
    EXPECT_GT(differ, 0) << "the double rounding should show on a random adapter";
    EXPECT_LT(differ, total / 10);
  }
}

// The single-rounding merge equals an independent FP64 formula: R(W + s * sum B A) for a few elements.
TEST(LoraMerge, SingleRoundingIsRoundOnceOfTheFp64Sum) {
  auto tiny = load_tiny();
  Result<LoraAdapter> ad = load_lora(fixture("kohya_unet"), tiny->cfg);
  ASSERT_TRUE(ad.ok()) << ad.status().to_string();
  const LoraPart& p = ad->parts.front();  // blocks.0.attn.qkv_proj
  Tensor* w = targets(tiny->weights)[p.layer];
  Tensor before = Tensor::empty(w->shape(), DType::kBF16);
  std::memcpy(before.raw_data(), w->raw_data(), w->nbytes());
  ASSERT_TRUE(merge_lora(tiny->weights, *ad, 0.75, tiny->backend).ok());
  const int64_t k = w->dim(1), r = p.rank();
  for (int64_t i : {int64_t{0}, int64_t{17}, p.b.dim(0) - 1})
    for (int64_t j : {int64_t{0}, int64_t{5}, k - 1}) {
      long double d = 0;
      for (int64_t q = 0; q < r; ++q)
        d += static_cast<long double>(p.b.data<float>()[i * r + q]) * p.a.data<float>()[q * k + j];
      const double want = static_cast<double>(f32_from_bf16_bits(before.data<uint16_t>()[i * k + j])) +
                          static_cast<double>(0.75 * p.alpha_scale * d);
      EXPECT_EQ(w->data<uint16_t>()[i * k + j], bf16_bits_from_f64(want)) << i << "," << j;
    }
}

TEST(LoraMerge, UnmergeRestoresTheBaseBitForBit) {
  auto tiny = load_tiny();
  auto base = load_tiny();
  Result<LoraAdapter> ad = load_lora(fixture("native_comfy"), tiny->cfg);
  ASSERT_TRUE(ad.ok());
  LoraMergeBackup backup;
  ASSERT_TRUE(merge_lora(tiny->weights, *ad, 1.0, tiny->backend, LoraMergeProgram::kSingleRounding, &backup).ok());
  EXPECT_EQ(backup.weights.size(), 15u);
  ASSERT_TRUE(unmerge_lora(tiny->weights, backup, tiny->backend).ok());
  auto a = targets(tiny->weights), b = targets(base->weights);
  for (auto& [layer, t] : a) EXPECT_EQ(std::memcmp(t->raw_data(), b[layer]->raw_data(), t->nbytes()), 0) << layer;
}

TEST(LoraMerge, QuantizedLayerIsRefusedNamingIt) {
  auto tiny = load_tiny();
  Result<LoraAdapter> ad = load_lora(fixture("native_comfy"), tiny->cfg);
  ASSERT_TRUE(ad.ok());
  tiny->weights.blocks[0].attn_qkv_proj.format = QuantFormat::kNvfp4;
  Status s = merge_lora(tiny->weights, *ad, 1.0, tiny->backend);
  EXPECT_EQ(s.code(), ErrorCode::kUnsupported);
  EXPECT_NE(s.message().find("blocks.0.attn.qkv_proj"), std::string::npos) << s.message();
}

// ---- run-time branch ----

Tensor random_bf16(Shape shape, uint64_t seed) {
  Tensor t = Tensor::empty(shape, DType::kBF16);
  std::vector<float> g(static_cast<size_t>(t.numel()));
  gaussian_noise(seed, 0, g.data(), g.size(), 1);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<uint16_t>()[i] = bf16_bits_from_f32(g[static_cast<size_t>(i)]);
  return t;
}

// E1: on every adapted layer, run-time y = R(x W^T + R(s x A^T) B^T) and merged y = R(x R(W + s B A)^T) are
// judged against the FP64 y of the unrounded W + s B A: the branch's error must stay within 2x the merged
// path's plus a floor (docs/numerics.md two-reference rule).
TEST(LoraRuntime, BranchVsMergedTwoReferenceRule) {
  for (const char* name : {"native_comfy", "peft_split"}) {
    auto tiny = load_tiny();
    auto merged = load_tiny();
    Result<LoraAdapter> ad = load_lora(fixture(name), tiny->cfg);
    ASSERT_TRUE(ad.ok());
    const double strength = 1.0;
    ASSERT_TRUE(merge_lora(merged->weights, *ad, strength, merged->backend).ok());
    ASSERT_TRUE(attach_lora_branches(tiny->weights, {{&*ad, strength}}, tiny->backend).ok());
    std::map<std::string, LinearWeight*> lin;
    for (auto& [n, lw] : h3_linear_slots(tiny->weights)) lin[n] = lw;
    std::map<std::string, LinearWeight*> lin_m;
    for (auto& [n, lw] : h3_linear_slots(merged->weights)) lin_m[n] = lw;
    double worst_ratio = 0;
    for (auto& [layer, lw] : lin) {
      if (!lw->lora) continue;
      const int64_t m = 37, k = lw->weight.dim(1), n = lw->weight.dim(0);
      Tensor x = random_bf16({m, k}, 99);
      Tensor y_rt = Tensor::empty({m, n}, DType::kBF16), y_m = Tensor::empty({m, n}, DType::kBF16);
      ASSERT_TRUE(tiny->backend.linear_lora(x, *lw, nullptr, *lw->lora, y_rt).ok());
      ASSERT_TRUE(merged->backend.linear(x, *lin_m[layer], nullptr, y_m).ok());
      // FP64 reference with the exact W + s B A.
      std::vector<double> w64(static_cast<size_t>(n * k));
      for (int64_t i = 0; i < n * k; ++i)
        w64[static_cast<size_t>(i)] = f32_from_bf16_bits(lw->weight.data<uint16_t>()[i]);
      for (const LoraPart& p : ad->parts) {
        if (p.layer != layer) continue;
        for (int64_t i = 0; i < p.b.dim(0); ++i)
          for (int64_t j = 0; j < k; ++j) {
            double d = 0;
            for (int64_t q = 0; q < p.rank(); ++q)
              d += static_cast<double>(p.b.data<float>()[i * p.rank() + q]) * p.a.data<float>()[q * k + j];
            w64[static_cast<size_t>((p.row_offset + i) * k + j)] += strength * p.alpha_scale * d;
          }
      }
      double e_rt = 0, e_m = 0, ref2 = 0;
      for (int64_t r = 0; r < m; ++r)
        for (int64_t j = 0; j < n; ++j) {
          double y = 0;
          for (int64_t i = 0; i < k; ++i)
            y += static_cast<double>(f32_from_bf16_bits(x.data<uint16_t>()[r * k + i])) *
                 w64[static_cast<size_t>(j * k + i)];
          const double a = f32_from_bf16_bits(y_rt.data<uint16_t>()[r * n + j]) - y;
          const double b = f32_from_bf16_bits(y_m.data<uint16_t>()[r * n + j]) - y;
          e_rt += a * a, e_m += b * b, ref2 += y * y;
        }
      const double rel_rt = std::sqrt(e_rt / ref2), rel_m = std::sqrt(e_m / ref2);
      EXPECT_LE(rel_rt, 2.0 * rel_m + 1e-4) << name << " " << layer;
      worst_ratio = std::max(worst_ratio, rel_rt / rel_m);
      std::printf("%s %-28s rel-L2 vs FP64: run-time %.3e, merged %.3e\n", name, layer.c_str(), rel_rt, rel_m);
    }
    std::printf("%s: worst run-time / merged error ratio %.2f\n", name, worst_ratio);
  }
}

TEST(LoraRuntime, ZeroScaleBranchIsBytewiseThePlainLinear) {
  auto tiny = load_tiny();
  Result<LoraAdapter> ad = load_lora(fixture("native_comfy"), tiny->cfg);
  ASSERT_TRUE(ad.ok());
  ASSERT_TRUE(attach_lora_branches(tiny->weights, {{&*ad, 0.0}}, tiny->backend).ok());
  LinearWeight& w = tiny->weights.blocks[1].mlp_fc1;
  ASSERT_TRUE(w.lora);
  Tensor x = random_bf16({19, w.weight.dim(1)}, 7);
  Tensor a = Tensor::empty({19, w.weight.dim(0)}, DType::kBF16), b = Tensor::empty({19, w.weight.dim(0)}, DType::kBF16);
  ASSERT_TRUE(tiny->backend.linear_lora(x, w, nullptr, *w.lora, a).ok());
  LinearWeight plain = w;
  plain.lora.reset();
  ASSERT_TRUE(tiny->backend.linear(x, plain, nullptr, b).ok());
  EXPECT_EQ(std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()), 0);
  detach_lora_branches(tiny->weights);
  EXPECT_FALSE(tiny->weights.blocks[1].mlp_fc1.lora);
  EXPECT_FALSE(tiny->weights.blocks[0].adaln_proj_lora);
}

// ---- bad files ----

struct TempDir {
  std::string path;
  TempDir() {
    std::string tmpl = ::testing::TempDir() + "vortex_lora_XXXXXX";
    path = mkdtemp(tmpl.data());
  }
  ~TempDir() { fs::remove_all(path); }
};

Tensor filled(Shape shape, float v) {
  Tensor t = Tensor::empty(shape, DType::kBF16);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data<uint16_t>()[i] = bf16_bits_from_f32(v * static_cast<float>((i % 7) - 3) / 3.0f);
  return t;
}

class LoraBadFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<ModelConfig> cfg = config_for_checkpoint(model_dir());
    ASSERT_TRUE(cfg.ok());
    cfg_ = *cfg;
  }
  // A valid native pair for blocks.0.attn.out_proj ([D, I]) plus `extra`.
  std::string write(std::vector<std::pair<std::string, Tensor>> extra, bool base = true,
                    std::map<std::string, std::string> meta = {}) {
    std::vector<std::pair<std::string, Tensor>> t;
    if (base) {
      t.emplace_back("blocks.0.attn.out_proj.lora_A.weight", filled({4, cfg_.inner()}, 0.1f));
      t.emplace_back("blocks.0.attn.out_proj.lora_B.weight", filled({cfg_.hidden, 4}, 0.01f));
    }
    for (auto& e : extra) t.push_back(std::move(e));
    const std::string p = dir_.path + "/f" + std::to_string(n_++) + ".safetensors";
    EXPECT_TRUE(write_safetensors(p, t, meta).ok());
    return p;
  }
  Status load(const std::string& p, LoraLoadOptions o = {}) { return load_lora(p, cfg_, o).status(); }
  ModelConfig cfg_;
  TempDir dir_;
  int n_ = 0;
};

TEST_F(LoraBadFiles, UnmatchedKeysListedInOneError) {
  const std::string p = write({{"blocks.0.attn.out_proj.dora_scale", filled({cfg_.hidden}, 1)},
                               {"blocks.9.mlp.fc1.lora_A.weight", filled({4, cfg_.hidden}, 1)},
                               {"blocks.9.mlp.fc1.lora_B.weight", filled({2 * cfg_.ffn, 4}, 1)}});
  Status s = load(p);
  EXPECT_EQ(s.code(), ErrorCode::kFormat);
  for (const char* k : {"3 keys match no layer", "blocks.0.attn.out_proj.dora_scale", "blocks.9.mlp.fc1.lora_A.weight",
                        "blocks.9.mlp.fc1.lora_B.weight", "--lora-allow-unmatched"})
    EXPECT_NE(s.message().find(k), std::string::npos) << k << " in " << s.message();
  LoraLoadOptions o;
  o.allow_unmatched = true;
  Result<LoraAdapter> ad = load_lora(p, cfg_, o);
  ASSERT_TRUE(ad.ok()) << ad.status().to_string();
  EXPECT_EQ(ad->unmatched_keys.size(), 3u);
  EXPECT_EQ(ad->parts.size(), 1u);
}

TEST_F(LoraBadFiles, ShapeMismatchNamesTheLayer) {
  const std::string p = write({{"blocks.1.attn.qkv_proj.lora_A.weight", filled({4, cfg_.hidden}, 1)},
                               {"blocks.1.attn.qkv_proj.lora_B.weight", filled({cfg_.inner(), 4}, 1)}});
  Status s = load(p);
  EXPECT_EQ(s.code(), ErrorCode::kFormat);
  EXPECT_NE(s.message().find("blocks.1.attn.qkv_proj: expected A [r, " + std::to_string(cfg_.hidden) + "] and B [" +
                             std::to_string(3 * cfg_.inner()) + ", r]"),
            std::string::npos)
      << s.message();
}

TEST_F(LoraBadFiles, WrongRankNamesTheLayer) {
  const std::string p = write({{"blocks.1.mlp.fc2.lora_A.weight", filled({8, cfg_.ffn}, 1)},
                               {"blocks.1.mlp.fc2.lora_B.weight", filled({cfg_.hidden, 4}, 1)}});
  Status s = load(p);
  EXPECT_NE(s.message().find("blocks.1.mlp.fc2: wrong rank"), std::string::npos) << s.message();
}

TEST_F(LoraBadFiles, NaNIsRefused) {
  Tensor a = filled({4, cfg_.hidden}, 1);
  a.data<uint16_t>()[5] = 0x7FC0;  // NaN
  const std::string p =
      write({{"blocks.1.mlp.fc1.lora_A.weight", a}, {"blocks.1.mlp.fc1.lora_B.weight", filled({2 * cfg_.ffn, 4}, 1)}});
  Status s = load(p);
  EXPECT_NE(s.message().find("blocks.1.mlp.fc1.lora_A.weight: holds a non-finite value"), std::string::npos)
      << s.message();
}

TEST_F(LoraBadFiles, MissingHalfIsRefused) {
  const std::string p =
      write({{"diffusion_model.blocks.1.mlp.fc1.lora_down.weight", filled({4, cfg_.hidden}, 1)}}, false);
  Status s = load(p);
  EXPECT_NE(s.message().find(
                "blocks.1.mlp.fc1: has diffusion_model.blocks.1.mlp.fc1.lora_down.weight but no lora_B / lora_up"),
            std::string::npos)
      << s.message();
}

TEST_F(LoraBadFiles, ALoraForAnotherModelIsNamedAsSuch) {
  const std::string p = write({{"diffusion_model.blocks.0.self_attn.q.lora_A.weight", filled({4, 64}, 1)},
                               {"diffusion_model.blocks.0.self_attn.q.lora_B.weight", filled({64, 4}, 1)}},
                              false);
  Status s = load(p);
  EXPECT_NE(s.message().find("is it a LoRA for another model?"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("self_attn.q.lora_A"), std::string::npos) << s.message();
}

TEST_F(LoraBadFiles, AmbiguousAlphaRequiresAnExplicitScale) {
  // PEFT keys without any alpha.
  Status s = load(fixture("peft_default"));
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(s.message().find("alpha is ambiguous"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(":SCALE"), std::string::npos) << s.message();
  LoraLoadOptions o;
  o.explicit_scale = true;
  Result<LoraAdapter> ad = load_lora(fixture("peft_default"), cfg_, o);
  ASSERT_TRUE(ad.ok());
  EXPECT_NE(ad->alpha_source.find("the explicit scale is the effective scale"), std::string::npos);
  // Some modules with .alpha and some without; a non-numeric metadata alpha.
  EXPECT_NE(load(write({{"blocks.0.attn.out_proj.alpha", filled({}, 4)},
                        {"blocks.1.attn.out_proj.lora_A.weight", filled({4, cfg_.inner()}, 1)},
                        {"blocks.1.attn.out_proj.lora_B.weight", filled({cfg_.hidden, 4}, 1)}}))
                .message()
                .find("1 of 2 modules carry an .alpha tensor"),
            std::string::npos);
  EXPECT_NE(load(write({}, true, {{"alpha", "rank"}})).message().find("is not a number"), std::string::npos);
  // A serve request: the ambiguous adapter without SCALE is refused at admission in the request's words; with
  // SCALE it is admitted; a file that does not fit is left to fail the job (check_request_loras).
  Status req = check_request_loras({LoraSpec{fixture("peft_default"), std::nullopt}}, cfg_, false);
  EXPECT_EQ(req.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(req.message().find("\"lora\": [\"peft_default"), std::string::npos) << req.message();
  EXPECT_EQ(req.message().find("--lora"), std::string::npos) << "no CLI syntax in a request's error: " << req.message();
  EXPECT_TRUE(check_request_loras({LoraSpec{fixture("peft_default"), 0.5}}, cfg_, false).ok());
  const std::string misfit = write({{"blocks.1.attn.out_proj.lora_A.weight", filled({4, 7}, 1)},
                                    {"blocks.1.attn.out_proj.lora_B.weight", filled({cfg_.hidden, 4}, 1)}});
  EXPECT_FALSE(load(misfit).ok());
  EXPECT_TRUE(check_request_loras({LoraSpec{misfit, std::nullopt}}, cfg_, false).ok());
  // The native style without alpha is unambiguous (alpha = rank).
  Result<LoraAdapter> native = load_lora(write({}), cfg_);
  ASSERT_TRUE(native.ok());
  EXPECT_EQ(native->parts[0].alpha_scale, 1.0);
}

TEST_F(LoraBadFiles, AdapterConfigRankMismatchIsAmbiguous) {
  TempDir d;
  const std::string p = d.path + "/adapter_model.safetensors";
  ASSERT_TRUE(write_safetensors(p, {{"transformer_blocks.0.attn.to_out.0.lora_A.weight", filled({4, cfg_.inner()}, 1)},
                                    {"transformer_blocks.0.attn.to_out.0.lora_B.weight", filled({cfg_.hidden, 4}, 1)}})
                  .ok());
  ASSERT_TRUE(write_text_atomic(d.path + "/adapter_config.json", R"({"r": 12, "lora_alpha": 12})").ok());
  EXPECT_NE(load_lora(p, cfg_).status().message().find("says r = 12 but transformer_blocks.0.attn.to_out.0 has rank 4"),
            std::string::npos);
  ASSERT_TRUE(write_text_atomic(d.path + "/adapter_config.json", R"({"r": 4, "lora_alpha": 2})").ok());
  Result<LoraAdapter> ad = load_lora(p, cfg_);
  ASSERT_TRUE(ad.ok()) << ad.status().to_string();
  EXPECT_EQ(ad->parts[0].alpha_scale, 0.5);
}

// refuse_symlinks (per-request adapters in --lora-dir): the file and its adapter_config.json are opened with
// O_NOFOLLOW, so a link is refused however late it was put there; without it links are followed as before.
TEST_F(LoraBadFiles, SymbolicLinksAreRefusedWhenAsked) {
  TempDir d, elsewhere;
  const std::string real = elsewhere.path + "/adapter_model.safetensors";
  ASSERT_TRUE(
      write_safetensors(real, {{"transformer_blocks.0.attn.to_out.0.lora_A.weight", filled({4, cfg_.inner()}, 1)},
                               {"transformer_blocks.0.attn.to_out.0.lora_B.weight", filled({cfg_.hidden, 4}, 1)}})
          .ok());
  ASSERT_TRUE(write_text_atomic(elsewhere.path + "/adapter_config.json", R"({"r": 4, "lora_alpha": 2})").ok());
  const std::string link = d.path + "/adapter_model.safetensors";
  std::filesystem::create_symlink(real, link);
  // The scale given, so the alpha needs no adapter_config.json beside the link.
  LoraLoadOptions follow, refuse, refuse_scaled;
  follow.explicit_scale = refuse_scaled.explicit_scale = true;
  refuse.refuse_symlinks = refuse_scaled.refuse_symlinks = true;
  ASSERT_TRUE(load_lora(link, cfg_, follow).ok());  // followed by default (a --lora path given on the command line)
  Result<LoraAdapter> refused = load_lora(link, cfg_, refuse_scaled);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("is a symbolic link"), std::string::npos) << refused.status().message();
  EXPECT_EQ(check_request_loras({LoraSpec{link, std::nullopt}}, cfg_, false).code(), ErrorCode::kInvalidArgument);
  // The file a regular one, its adapter_config.json a link: refused too (followed without the option).
  std::filesystem::remove(link);
  std::filesystem::copy_file(real, link);
  std::filesystem::create_symlink(elsewhere.path + "/adapter_config.json", d.path + "/adapter_config.json");
  Result<LoraAdapter> followed = load_lora(link, cfg_);
  ASSERT_TRUE(followed.ok()) << followed.status().to_string();
  EXPECT_EQ(followed->parts[0].alpha_scale, 0.5);
  Result<LoraAdapter> config_refused = load_lora(link, cfg_, refuse);
  ASSERT_FALSE(config_refused.ok());
  EXPECT_NE(config_refused.status().message().find("adapter_config.json"), std::string::npos)
      << config_refused.status().message();
  // Both regular: loads with the option.
  std::filesystem::remove(d.path + "/adapter_config.json");
  ASSERT_TRUE(write_text_atomic(d.path + "/adapter_config.json", R"({"r": 4, "lora_alpha": 2})").ok());
  Result<LoraAdapter> plain = load_lora(link, cfg_, refuse);
  ASSERT_TRUE(plain.ok()) << plain.status().to_string();
  EXPECT_EQ(plain->parts[0].alpha_scale, 0.5);
}

TEST(LoraSpec, ParsesFileAndScale) {
  EXPECT_EQ(parse_lora_spec("a.safetensors")->path, "a.safetensors");
  EXPECT_FALSE(parse_lora_spec("a.safetensors")->scale);
  EXPECT_EQ(*parse_lora_spec("dir/a.safetensors:0.8")->scale, 0.8);
  EXPECT_EQ(parse_lora_spec("dir/a.safetensors:0.8")->path, "dir/a.safetensors");
  EXPECT_EQ(parse_lora_spec("c:/x.safetensors")->path, "c:/x.safetensors");  // not a number after ':'
  EXPECT_FALSE(parse_lora_spec(":1").ok());
  // Scales are bounded up front ([-100, 100], ComfyUI's range) and must be numbers after an existing file.
  EXPECT_EQ(*parse_lora_spec("dir/a.safetensors:-100")->scale, -100.0);
  for (const char* bad : {"dir/a.safetensors:1e9", "dir/a.safetensors:100.5", "dir/a.safetensors:inf",
                          "dir/a.safetensors:nan", "dir/a.safetensors:1e999"}) {
    Result<LoraSpec> r = parse_lora_spec(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument) << bad;
  }
  const std::string existing = fixture("peft_default");
  Result<LoraSpec> abc = parse_lora_spec(existing + ":abc");
  ASSERT_FALSE(abc.ok());
  EXPECT_NE(abc.status().message().find("SCALE 'abc' is not a number"), std::string::npos) << abc.status().message();
}

// ---- generate end to end ----

Result<std::vector<float>> run_generate(const std::string& out, std::vector<LoraSpec> loras, const std::string& mode,
                                        nlohmann::json* run_json = nullptr) {
  GenerateRequest r;
  r.pipeline.checkpoint_path = model_dir();
  r.pipeline.threads = 2;
  r.pipeline.loras = std::move(loras);
  r.pipeline.lora_mode = parse_lora_mode(mode).value();
  r.run.width = 64, r.run.height = 64, r.run.frames = 5, r.run.steps = 2, r.run.synthetic_text_rows = 4;
  r.out_dir = out;
  ProgressSink quiet;
  VORTEX_ASSIGN_OR_RETURN(GenerateResult g, generate(r, quiet));
  VORTEX_ASSIGN_OR_RETURN(SafetensorsFile f, SafetensorsFile::open(out + "/video_latents.safetensors"));
  VORTEX_ASSIGN_OR_RETURN(Tensor v, f.tensor("video_latents"));
  if (run_json) {
    std::ifstream in(out + "/run.json");
    *run_json = nlohmann::json::parse(std::string(std::istreambuf_iterator<char>(in), {}));
  }
  return std::vector<float>(v.data<float>(), v.data<float>() + v.numel());
}

TEST(LoraGenerate, LoraMovesLatentsScaleZeroReproducesBase) {
  TempDir d;
  Result<std::vector<float>> base = run_generate(d.path + "/base", {}, "merge");
  ASSERT_TRUE(base.ok()) << base.status().to_string();
  nlohmann::json run;
  Result<std::vector<float>> lora =
      run_generate(d.path + "/lora", {{fixture("native_comfy"), std::nullopt}}, "merge", &run);
  ASSERT_TRUE(lora.ok()) << lora.status().to_string();
  Result<std::vector<float>> zero = run_generate(d.path + "/zero", {{fixture("native_comfy"), 0.0}}, "merge");
  ASSERT_TRUE(zero.ok()) << zero.status().to_string();
  Result<std::vector<float>> zero_rt = run_generate(d.path + "/zero_rt", {{fixture("native_comfy"), 0.0}}, "runtime");
  ASSERT_TRUE(zero_rt.ok()) << zero_rt.status().to_string();
  Result<std::vector<float>> rt = run_generate(d.path + "/rt", {{fixture("native_comfy"), std::nullopt}}, "runtime");
  ASSERT_TRUE(rt.ok()) << rt.status().to_string();
  ASSERT_EQ(base->size(), lora->size());
  EXPECT_EQ(std::memcmp(base->data(), zero->data(), base->size() * 4), 0) << "scale 0 merge must reproduce the base";
  EXPECT_EQ(std::memcmp(base->data(), zero_rt->data(), base->size() * 4), 0)
      << "scale 0 branch must reproduce the base";
  double moved = 0, dev = 0, norm = 0;
  for (size_t i = 0; i < base->size(); ++i) {
    moved += std::pow((*lora)[i] - (*base)[i], 2);
    dev += std::pow((*rt)[i] - (*lora)[i], 2);
    norm += std::pow((*base)[i], 2);
  }
  std::printf("latents: LoRA moves rel-L2 %.3e; run-time vs merged rel-L2 %.3e\n", std::sqrt(moved / norm),
              std::sqrt(dev / norm));
  EXPECT_GT(std::sqrt(moved / norm), 1e-3);
  // Different rounding boundaries, so not E0: the branch's deviation stays far below the LoRA's own effect.
  EXPECT_LT(std::sqrt(dev / norm), 0.25 * std::sqrt(moved / norm));
  ASSERT_EQ(run["lora"].size(), 1u);
  EXPECT_EQ(run["lora"][0]["effective_scale_min"], 1.0);
  EXPECT_EQ(run["lora"][0]["key_style"], "native");
  EXPECT_EQ(run["lora"][0]["layers"], 15);
}

}  // namespace
}  // namespace vortex
