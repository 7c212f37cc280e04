// H3Model on h3-tiny with synthetic weights (src/model/h3_spec.h) on the CPU reference backend:
// forward shapes and finiteness, fused vs composed norm+modulate give identical bytes, identical bytes for
// 1 vs 3 threads, one main block vs an independent FP64 re-implementation (rel-L2 of the block's update
// at BF16-rounding level; numbers printed), the host time embedding, and prepare/forward argument errors.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <random>

#include "model/h3_model.h"
#include "model/h3_spec.h"
#include "ref/cpu_backend.h"

namespace vortex {
namespace {

uint64_t fresh_seed() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

struct TinyRun {
  ModelConfig cfg = ModelConfig::h3_tiny();
  PackedLayout layout;
  Tensor text;  // host [L, text_dim] f32
  AvLatents noise;
};

TinyRun make_tiny_request(uint64_t seed, int width = 64, int height = 64, int frames = 5, int text_rows = 6) {
  TinyRun r;
  RequestGeometry g = make_geometry(r.cfg, width, height, frames, text_rows).value();
  r.layout = pack_request(r.cfg, g).value();
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  r.text = Tensor::empty({text_rows, r.cfg.text_dim}, DType::kF32);
  for (int64_t i = 0; i < r.text.numel(); ++i) r.text.data<float>()[i] = nd(rng);
  r.noise.video.resize(static_cast<size_t>(r.cfg.in_channels) * g.latent_frames * g.latent_h * g.latent_w);
  r.noise.audio.resize(static_cast<size_t>(2 * r.cfg.audio_in_channels * g.audio_latents));
  for (float& v : r.noise.video) v = nd(rng);
  for (float& v : r.noise.audio) v = nd(rng);
  return r;
}

Result<AvLatents> run_forward(const TinyRun& r, int threads, uint64_t weight_seed, ExecOptions opts, double sigma_v,
                              double sigma_a) {
  CpuBackend be(threads);
  VORTEX_ASSIGN_OR_RETURN(H3Weights w, synthesize_weights(r.cfg, be, weight_seed));
  H3Model model(r.cfg, be, std::move(w), opts);
  VORTEX_RETURN_IF_ERROR(model.prepare(r.layout, r.text));
  return model.forward(r.noise, sigma_v, sigma_a);
}

bool same_bytes(const AvLatents& a, const AvLatents& b) {
  return a.video.size() == b.video.size() && a.audio.size() == b.audio.size() &&
         std::memcmp(a.video.data(), b.video.data(), a.video.size() * 4) == 0 &&
         std::memcmp(a.audio.data(), b.audio.data(), a.audio.size() * 4) == 0;
}

TEST(H3Model, TinyForwardIsFiniteWithTheRightShapes) {
  const uint64_t seed = fresh_seed();
  TinyRun r = make_tiny_request(seed);
  for (auto [sv, sa] : {std::pair<double, double>{1.0, 1.0}, {0.7, 0.9}}) {
    auto out = run_forward(r, 2, seed, ExecOptions{}, sv, sa);
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    ASSERT_EQ(out->video.size(), r.noise.video.size());
    ASSERT_EQ(out->audio.size(), r.noise.audio.size());
    double sq = 0;
    for (float v : out->video) {
      ASSERT_TRUE(std::isfinite(v)) << "seed=" << seed;
      sq += double(v) * v;
    }
    for (float v : out->audio) ASSERT_TRUE(std::isfinite(v)) << "seed=" << seed;
    EXPECT_GT(sq, 0.0) << "velocity is identically zero, seed=" << seed;
  }
}

TEST(H3Model, FusedAndComposedNormModulateGiveIdenticalBytes) {
  const uint64_t seed = fresh_seed();
  TinyRun r = make_tiny_request(seed);
  ExecOptions fused, composed;
  composed.fused_norm_modulate = false;
  composed.fused_gate_add = false;
  auto a = run_forward(r, 2, seed, fused, 0.6, 0.8);
  auto b = run_forward(r, 2, seed, composed, 0.6, 0.8);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE(same_bytes(*a, *b)) << "seed=" << seed;
}

TEST(H3Model, IdenticalBytesForOneAndThreeThreads) {
  const uint64_t seed = fresh_seed();
  TinyRun r = make_tiny_request(seed, 96, 64, 5, 7);
  auto a = run_forward(r, 1, seed, ExecOptions{}, 0.5, 0.75);
  auto b = run_forward(r, 3, seed, ExecOptions{}, 0.5, 0.75);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE(same_bytes(*a, *b)) << "seed=" << seed;
}

TEST(H3Model, RefinedTextSkipsTheRefinerAndBadInputsAreRejected) {
  const uint64_t seed = fresh_seed();
  TinyRun r = make_tiny_request(seed);
  CpuBackend be(2);
  H3Model model(r.cfg, be, synthesize_weights(r.cfg, be, seed).value(), ExecOptions{});
  EXPECT_EQ(model.forward(r.noise, 1.0, 1.0).status().code(), ErrorCode::kInvalidArgument);  // before prepare
  Tensor wrong = Tensor::empty({6, 77}, DType::kF32);
  EXPECT_EQ(model.prepare(r.layout, wrong).code(), ErrorCode::kInvalidArgument);
  Tensor refined = Tensor::empty({6, r.cfg.hidden}, DType::kBF16);
  for (int64_t i = 0; i < refined.numel(); ++i)
    refined.data<uint16_t>()[i] = bf16_bits_from_f32(0.01f * static_cast<float>(i % 97));
  ASSERT_TRUE(model.prepare(r.layout, refined).ok());
  auto out = model.forward(r.noise, 0.4, 0.4);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  AvLatents short_noise = r.noise;
  short_noise.video.pop_back();
  EXPECT_EQ(model.forward(short_noise, 0.4, 0.4).status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(model.forward(r.noise, 1.5, 0.4).status().code(), ErrorCode::kInvalidArgument);
}

// token_refiner.final_norm uses final_norm_eps (diffusers: nn.RMSNorm(hidden, eps=final_norm_eps)), not
// norm_eps: raw text through the model's refiner must equal text refined here (condition_proj, the refiner
// blocks, then rms_norm with final_norm_eps) and passed in as [L, D]. The eps values are far apart so the
// two norms give different bytes.
TEST(H3Model, RefinerFinalNormUsesFinalNormEps) {
  const uint64_t seed = fresh_seed();
  TinyRun r = make_tiny_request(seed);
  r.cfg.norm_eps = 1e-5f;
  r.cfg.final_norm_eps = 0.5f;
  CpuBackend be(2);
  H3Weights w = synthesize_weights(r.cfg, be, seed).value();

  const int64_t l = r.text.dim(0);
  Tensor text_bf16 = be.alloc(r.text.shape(), DType::kBF16).value();
  ASSERT_TRUE(be.cast(be.upload(r.text).value(), text_bf16).ok());
  Tensor h = be.alloc({l, r.cfg.hidden}, DType::kBF16).value();
  LinearWeight cond;
  cond.weight = w.condition_proj_weight;
  cond.out_features = r.cfg.hidden;
  cond.in_features = r.cfg.text_dim;
  ASSERT_TRUE(be.linear(text_bf16, cond, &w.condition_proj_bias, h).ok());
  BlockScratch scratch = BlockScratch::allocate(be, r.cfg, l).value();
  for (const H3BlockWeights& b : w.token_refiner_blocks)
    ASSERT_TRUE(run_transformer_block(be, r.cfg, ExecOptions{}, b, h, nullptr, nullptr, nullptr, scratch).ok());
  Tensor refined = be.alloc({l, r.cfg.hidden}, DType::kBF16).value();
  Tensor refined_norm_eps = be.alloc({l, r.cfg.hidden}, DType::kBF16).value();
  ASSERT_TRUE(be.rms_norm(h, w.token_refiner_final_norm_weight, r.cfg.final_norm_eps, refined).ok());
  ASSERT_TRUE(be.rms_norm(h, w.token_refiner_final_norm_weight, r.cfg.norm_eps, refined_norm_eps).ok());
  ASSERT_NE(std::memcmp(refined.raw_data(), refined_norm_eps.raw_data(), refined.nbytes()), 0)
      << "the two eps values must give different refined text for this test to mean anything";

  H3Model from_raw(r.cfg, be, synthesize_weights(r.cfg, be, seed).value(), ExecOptions{});
  ASSERT_TRUE(from_raw.prepare(r.layout, r.text).ok());
  H3Model from_refined(r.cfg, be, std::move(w), ExecOptions{});
  ASSERT_TRUE(from_refined.prepare(r.layout, refined).ok());
  auto a = from_raw.forward(r.noise, 0.6, 0.8);
  auto b = from_refined.forward(r.noise, 0.6, 0.8);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE(same_bytes(*a, *b)) << "the refiner's final norm does not use final_norm_eps, seed=" << seed;
}

TEST(H3Model, RequestWithoutTextRows) {
  const uint64_t seed = fresh_seed();
  TinyRun r = make_tiny_request(seed, 64, 64, 5, 0);
  auto out = run_forward(r, 2, seed, ExecOptions{}, 0.5, 0.5);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  for (float v : out->video) ASSERT_TRUE(std::isfinite(v)) << "seed=" << seed;
}

TEST(H3Model, TimestepSinusoidIsCosThenSin) {
  const std::vector<float> e = timestep_sinusoid(8, 0.5f);
  ASSERT_EQ(e.size(), 8u);
  EXPECT_EQ(e[0], static_cast<float>(std::cos(0.5)));  // k = 0: freq 1
  EXPECT_EQ(e[4], static_cast<float>(std::sin(0.5)));
  const float f1 = static_cast<float>(std::exp(-std::log(10000.0) / 4));
  EXPECT_EQ(e[1], static_cast<float>(std::cos(static_cast<double>(0.5f * f1))));
  const std::vector<float> z = timestep_sinusoid(8, 0.0f);
  for (int k = 0; k < 4; ++k) {
    EXPECT_EQ(z[static_cast<size_t>(k)], 1.0f);
    EXPECT_EQ(z[static_cast<size_t>(4 + k)], 0.0f);
  }
}

// The host time MLP vs a pure-FP64 evaluation (sinusoid, both linears, both SiLUs) rounded once to BF16.
TEST(H3Model, AdalnInputMatchesFp64TimeMlp) {
  const uint64_t seed = fresh_seed();
  const ModelConfig cfg = ModelConfig::h3_tiny();
  CpuBackend be(2);
  H3Weights w = synthesize_weights(cfg, be, seed).value();
  TimeEmbedderHost te{w.time_embedder_proj_in_weight, w.time_embedder_proj_in_bias, w.time_embedder_proj_out_weight,
                      w.time_embedder_proj_out_bias};  // CPU backend tensors are host tensors
  const std::vector<float> ts = {0.0f, 0.3125f, 0.97f};
  Tensor got = adaln_input_host(cfg, te, ts).value();
  ASSERT_EQ(got.shape(), (Shape{3, cfg.time_embed_dim}));
  const int half = cfg.freq_dim / 2;
  int64_t equal = 0, total = 0;
  for (size_t m = 0; m < ts.size(); ++m) {
    std::vector<double> e(static_cast<size_t>(cfg.freq_dim));
    for (int k = 0; k < half; ++k) {
      const double arg = static_cast<double>(ts[m]) * std::exp(-std::log(10000.0) * k / half);
      e[static_cast<size_t>(k)] = std::cos(arg);
      e[static_cast<size_t>(half + k)] = std::sin(arg);
    }
    std::vector<double> h(static_cast<size_t>(cfg.time_embed_hidden));
    for (int j = 0; j < cfg.time_embed_hidden; ++j) {
      double a = te.proj_in_bias.data<float>()[j];
      for (int i = 0; i < cfg.freq_dim; ++i)
        a += te.proj_in_weight.data<float>()[j * cfg.freq_dim + i] * e[static_cast<size_t>(i)];
      h[static_cast<size_t>(j)] = a / (1.0 + std::exp(-a));
    }
    for (int j = 0; j < cfg.time_embed_dim; ++j) {
      double a = te.proj_out_bias.data<float>()[j];
      for (int i = 0; i < cfg.time_embed_hidden; ++i)
        a += te.proj_out_weight.data<float>()[j * cfg.time_embed_hidden + i] * h[static_cast<size_t>(i)];
      const uint16_t want = bf16_bits_from_f64(a / (1.0 + std::exp(-a)));
      const uint16_t g = got.data<uint16_t>()[m * static_cast<size_t>(cfg.time_embed_dim) + static_cast<size_t>(j)];
      ++total;
      equal += g == want;
      const float diff = std::fabs(f32_from_bf16_bits(g) - f32_from_bf16_bits(want));
      EXPECT_LE(diff, std::fabs(f32_from_bf16_bits(want)) * (1.0f / 128) + 1e-6f) << "seed=" << seed;
    }
  }
  EXPECT_GE(equal, total * 98 / 100) << equal << "/" << total << " equal, seed=" << seed;
}

// ---- one block vs an independent FP64 implementation ----------------------------------------------

using Mat = std::vector<double>;
Mat to_f64(Backend& be, const Tensor& t) {
  Tensor host = Tensor::empty(t.shape(), t.dtype());
  EXPECT_TRUE(be.download(t, host).ok());
  Mat m(static_cast<size_t>(host.numel()));
  for (size_t i = 0; i < m.size(); ++i)
    m[i] = host.dtype() == DType::kBF16 ? f32_from_bf16_bits(host.data<uint16_t>()[i]) : host.data<float>()[i];
  return m;
}
Mat matmul_t(const Mat& x, int64_t rows, int64_t k, const Mat& w, int64_t n) {  // x [rows,k] @ w[n,k]^T
  Mat out(static_cast<size_t>(rows * n), 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < n; ++j) {
      double a = 0;
      for (int64_t i = 0; i < k; ++i) a += x[r * k + i] * w[j * k + i];
      out[r * n + j] = a;
    }
  return out;
}
void rms_rows(Mat& x, int64_t rows, int64_t d, const Mat& w, double eps) {
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t j = 0; j < d; ++j) ss += x[r * d + j] * x[r * d + j];
    const double inv = 1.0 / std::sqrt(ss / d + eps);
    for (int64_t j = 0; j < d; ++j) x[r * d + j] = x[r * d + j] * inv * w[j];
  }
}

TEST(H3Model, OneBlockMatchesIndependentFp64Block) {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  const ModelConfig cfg = ModelConfig::h3_tiny();
  CpuBackend be(2);
  H3Weights w = synthesize_weights(cfg, be, seed).value();
  const H3BlockWeights& b = w.blocks[0];
  const int64_t s = 40, d = cfg.hidden, inner = cfg.inner(), f = cfg.ffn, hd = cfg.head_dim, half = cfg.rope_dims() / 2;
  // Inputs: x ~ N(0, 1) in BF16; a table with 2 slots x 3 modalities ~ N(0, 0.2); random RoPE angles.
  std::normal_distribution<float> nd(0.0f, 1.0f);
  Tensor xh = Tensor::empty({s, d}, DType::kBF16), th = Tensor::empty({6, 6 * d}, DType::kBF16);
  for (int64_t i = 0; i < xh.numel(); ++i) xh.data<uint16_t>()[i] = bf16_bits_from_f32(nd(rng));
  for (int64_t i = 0; i < th.numel(); ++i) th.data<uint16_t>()[i] = bf16_bits_from_f32(0.2f * nd(rng));
  RopeTables rope_h;
  rope_h.rope_dims = 2 * static_cast<int>(half);
  rope_h.cos = Tensor::empty({s, half}, DType::kBF16);
  rope_h.sin = Tensor::empty({s, half}, DType::kBF16);
  for (int64_t i = 0; i < s * half; ++i) {
    const double ang = 10.0 * nd(rng);
    rope_h.cos.data<uint16_t>()[i] = bf16_bits_from_f64(std::cos(ang));
    rope_h.sin.data<uint16_t>()[i] = bf16_bits_from_f64(std::sin(ang));
  }
  SegmentTable seg;
  seg.rows = s;
  seg.segments = {{0, 7, 1}, {7, 19, 5}, {19, s, 3}};
  Tensor x = be.upload(xh).value(), table = be.upload(th).value();
  RopeTables rope{be.upload(rope_h.cos).value(), be.upload(rope_h.sin).value(), rope_h.rope_dims};
  BlockScratch scratch = BlockScratch::allocate(be, cfg, s).value();
  ASSERT_TRUE(run_transformer_block(be, cfg, ExecOptions{}, b, x, &table, &seg, &rope, scratch).ok());
  const Mat got = to_f64(be, x);

  // Independent FP64 block: same BF16 operands, no intermediate rounding anywhere.
  Mat xr = to_f64(be, xh), tab = to_f64(be, th), cs = to_f64(be, rope_h.cos), sn = to_f64(be, rope_h.sin);
  const Mat x_in = xr;
  const Mat n1w = to_f64(be, b.norm1_weight), n2w = to_f64(be, b.norm2_weight), qnw = to_f64(be, b.attn_q_norm_weight),
            knw = to_f64(be, b.attn_k_norm_weight), wqkv = to_f64(be, b.attn_qkv_proj.weight),
            wout = to_f64(be, b.attn_out_proj.weight), wfc1 = to_f64(be, b.mlp_fc1.weight),
            wfc2 = to_f64(be, b.mlp_fc2.weight);
  auto trow = [&](int64_t r) { return static_cast<int64_t>(seg.row_of(r)); };
  auto chunk = [&](int64_t r, int c, int64_t j) { return tab[trow(r) * 6 * d + c * d + j]; };
  auto norm_mod = [&](int shift_c, int scale_c, const Mat& nw) {
    Mat n = xr;
    rms_rows(n, s, d, nw, cfg.norm_eps);
    for (int64_t r = 0; r < s; ++r)
      for (int64_t j = 0; j < d; ++j) n[r * d + j] = n[r * d + j] * (1.0 + chunk(r, scale_c, j)) + chunk(r, shift_c, j);
    return n;
  };
  Mat n = norm_mod(0, 1, n1w);
  Mat qkv = matmul_t(n, s, d, wqkv, 3 * inner);
  for (int which = 0; which < 2; ++which)
    for (int64_t r = 0; r < s; ++r)
      for (int h = 0; h < cfg.num_heads; ++h) {
        double* v = &qkv[r * 3 * inner + which * inner + h * hd];
        double ss = 0;
        for (int64_t j = 0; j < hd; ++j) ss += v[j] * v[j];
        const double inv = 1.0 / std::sqrt(ss / hd + cfg.qk_norm_eps);
        const Mat& nw = which == 0 ? qnw : knw;
        for (int64_t j = 0; j < hd; ++j) v[j] = v[j] * inv * nw[j];
        for (int64_t j = 0; j < half; ++j) {
          const double c = cs[r * half + j], si = sn[r * half + j], a1 = v[j], a2 = v[j + half];
          v[j] = a1 * c - a2 * si;
          v[j + half] = a2 * c + a1 * si;
        }
      }
  Mat o(static_cast<size_t>(s * inner), 0.0);
  for (int h = 0; h < cfg.num_heads; ++h)
    for (int64_t i = 0; i < s; ++i) {
      std::vector<double> p(static_cast<size_t>(s));
      double mx = -1e300, sum = 0;
      for (int64_t j = 0; j < s; ++j) {
        double dot = 0;
        for (int64_t e = 0; e < hd; ++e)
          dot += qkv[i * 3 * inner + h * hd + e] * qkv[j * 3 * inner + inner + h * hd + e];
        p[static_cast<size_t>(j)] = dot / std::sqrt(double(hd));
        mx = std::max(mx, p[static_cast<size_t>(j)]);
      }
      for (double& e : p) sum += (e = std::exp(e - mx));
      for (int64_t j = 0; j < s; ++j)
        for (int64_t e = 0; e < hd; ++e)
          o[i * inner + h * hd + e] += p[static_cast<size_t>(j)] / sum * qkv[j * 3 * inner + 2 * inner + h * hd + e];
    }
  Mat a = matmul_t(o, s, inner, wout, d);
  for (int64_t r = 0; r < s; ++r)
    for (int64_t j = 0; j < d; ++j) xr[r * d + j] += chunk(r, 2, j) * a[r * d + j];
  n = norm_mod(3, 4, n2w);
  Mat u = matmul_t(n, s, d, wfc1, 2 * f);
  Mat m(static_cast<size_t>(s * f));
  for (int64_t r = 0; r < s; ++r)
    for (int64_t j = 0; j < f; ++j) {
      const double g = u[r * 2 * f + j];
      m[r * f + j] = g / (1.0 + std::exp(-g)) * u[r * 2 * f + f + j];
    }
  Mat fo = matmul_t(m, s, f, wfc2, d);
  for (int64_t r = 0; r < s; ++r)
    for (int64_t j = 0; j < d; ++j) xr[r * d + j] += chunk(r, 5, j) * fo[r * d + j];

  // Floor: the error of merely storing the FP64 result in BF16 (the residual stream's own rounding).
  double num = 0, den = 0, num_x = 0, den_x = 0, floor_num = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_TRUE(std::isfinite(got[i]));
    const double stored = f32_from_bf16_bits(bf16_bits_from_f64(xr[i]));
    floor_num += (stored - xr[i]) * (stored - xr[i]);
    const double dg = got[i] - x_in[i], dr = xr[i] - x_in[i];
    num += (dg - dr) * (dg - dr);
    den += dr * dr;
    num_x += (got[i] - xr[i]) * (got[i] - xr[i]);
    den_x += xr[i] * xr[i];
  }
  const double rel_update = std::sqrt(num / den), rel_x = std::sqrt(num_x / den_x);
  const double floor_update = std::sqrt(floor_num / den);
  std::printf("block vs FP64: rel-L2 of x %.3e; of the block's update %.3e (BF16 storage floor %.3e) (seed=%llu)\n",
              rel_x, rel_update, floor_update, static_cast<unsigned long long>(seed));
  EXPECT_GT(den, 0.0);
  EXPECT_LT(rel_x, 1e-2) << "seed=" << seed;
  // The update's error: the residual's BF16 storage floor plus ~10 roundings of 2^-9 along the path.
  EXPECT_LT(rel_update, 2.0 * floor_update + 1e-2) << "seed=" << seed;
}

// The demo workload size (448x256, 22 frames, 16 text rows: 874 rows): one forward, timed, so a
// regression toward a slow reference shows up; 12 steps must stay well under 60 s on 2 cores.
TEST(H3Model, DemoSizedForwardTiming) {
  const uint64_t seed = fresh_seed();
  TinyRun r = make_tiny_request(seed, 448, 256, 22, 16);
  ASSERT_EQ(r.layout.geo.total_rows(), 874);
  CpuBackend be(2);
  H3Model model(r.cfg, be, synthesize_weights(r.cfg, be, seed).value(), ExecOptions{});
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(model.prepare(r.layout, r.text).ok());
  auto out = model.forward(r.noise, 0.8, 0.9);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("h3-tiny demo forward (874 rows, 2 threads): %.2f s -> 12 steps ~ %.1f s\n", sec, 12 * sec);
}

}  // namespace
}  // namespace vortex
