// Weights at load and between requests on the cuda backend (GPU label; skips visibly without a device).
// Device quantization at load (Backend::quantize_weight): FP8 per tensor and NVFP4 bytes equal the host quantizers'
// (random BF16 weights of aligned, odd and all-zero shapes, outputs poisoned first), and apply_precision on h3-tiny
// gives every block GEMM weight the host quantizer's bytes. AdaLN tables ahead of sampling with the projections in
// page-locked host memory (H3Model::place_adaln_weights / precompute_adaln): the device memory drops by their
// bytes, and a sampled trajectory (eager, replayed CUDA graphs, entries computed on demand, a run-time LoRA branch
// on adaln_proj) gives the latent bytes of the per-step path with the projections on the device. The allocator
// enforces a device budget (--max-vram). Streamed blocks (copy stream, two slots) give the resident blocks' latent
// bytes in bf16 and fp8.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "cuda/cuda_backend.h"
#include "cuda/device.h"
#include "engine/precision.h"
#include "gemm/gemm.h"
#include "gpu_test.h"
#include "model/h3_model.h"
#include "model/h3_spec.h"
#include "sampler/sampler.h"
#include "vortex/dtype.h"

namespace vortex {
namespace {

Result<std::unique_ptr<CudaBackend>> cuda() { return CudaBackend::create(0); }

#define REQUIRE_CUDA(be)                        \
  do {                                          \
    auto made_ = cuda();                        \
    VORTEX_SKIP_NO_GPU_OR_FAIL(made_.status()); \
    be = std::move(made_).value();              \
  } while (0)

Tensor to_host(Backend& b, const Tensor& t) {
  Tensor h = Tensor::empty(t.shape(), t.dtype());
  Status st = b.download(t, h);
  EXPECT_TRUE(st.ok()) << st.to_string();
  return h;
}

bool same(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() && std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

Tensor random_weight(int64_t n, int64_t k, std::mt19937_64& rng, float sd, bool zeros) {
  std::normal_distribution<float> nd(0.0f, sd);
  Tensor w = Tensor::empty({n, k}, DType::kBF16);
  for (int64_t i = 0; i < w.numel(); ++i) w.data<uint16_t>()[i] = zeros ? 0 : bf16_bits_from_f32(nd(rng));
  return w;
}

TEST(DeviceQuantize, BytesEqualTheHostQuantizers) {
  std::unique_ptr<CudaBackend> be;
  REQUIRE_CUDA(be);
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  struct Case {
    int64_t n, k;
    float sd;
    bool zeros;
  };
  // Aligned (vector path), K % 8 != 0 (FP8 element path), N and K off the NVFP4 16/128 grid, a wide range, zeros.
  const Case cases[] = {{128, 256, 0.02f, false},
                        {257, 136, 1.0f, false},
                        {33, 41, 3e-3f, false},
                        {130, 200, 40.0f, false},
                        {64, 64, 0.0f, true}};
  for (const Case& c : cases) {
    SCOPED_TRACE(std::to_string(c.n) + "x" + std::to_string(c.k));
    Tensor host = random_weight(c.n, c.k, rng, c.sd, c.zeros);
    LinearWeight w;
    auto dev = be->upload(host);
    ASSERT_TRUE(dev.ok());
    w.weight = *dev;
    w.out_features = c.n;
    w.in_features = c.k;
    // FP8 per tensor vs gemm/gemm.h quantize_weight_fp8.
    auto want8 = quantize_weight_fp8(host, Fp8Scaling::kPerTensor);
    ASSERT_TRUE(want8.ok()) << want8.status().to_string();
    auto got8 = be->quantize_weight(w, QuantFormat::kFp8Scaled);
    ASSERT_TRUE(got8.ok()) << got8.status().to_string();
    EXPECT_EQ(got8->format, QuantFormat::kFp8Scaled);
    EXPECT_TRUE(same(to_host(*be, got8->weight), want8->weight));
    EXPECT_TRUE(same(to_host(*be, got8->weight_scale), want8->weight_scale));
    // NVFP4 vs engine/precision.h quantize_weight_nvfp4 (comfy-kitchen's CUDA encode).
    if (c.k % 16 == 0 || c.k > 100) {
      auto want4 = quantize_weight_nvfp4(host, true);
      ASSERT_TRUE(want4.ok()) << want4.status().to_string();
      auto got4 = be->quantize_weight(w, QuantFormat::kNvfp4);
      ASSERT_TRUE(got4.ok()) << got4.status().to_string();
      EXPECT_TRUE(same(to_host(*be, got4->weight), want4->weight));
      EXPECT_TRUE(same(to_host(*be, got4->weight_scale), want4->weight_scale));
      EXPECT_TRUE(same(to_host(*be, got4->weight_scale_2), want4->weight_scale_2));
    }
  }
  // A quantized weight is not a BF16 input.
  LinearWeight bad;
  bad.format = QuantFormat::kFp8Scaled;
  EXPECT_EQ(be->quantize_weight(bad, QuantFormat::kFp8Scaled).status().code(), ErrorCode::kInvalidArgument);
}

TEST(DeviceQuantize, ApplyPrecisionGivesTheHostQuantizersBytes) {
  std::unique_ptr<CudaBackend> be;
  REQUIRE_CUDA(be);
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const ModelConfig cfg = ModelConfig::h3_tiny();
  for (const char* precision : {"fp8", "nvfp4"}) {
    SCOPED_TRACE(precision);
    auto w = synthesize_weights(cfg, *be, seed);
    ASSERT_TRUE(w.ok());
    std::vector<Tensor> originals;
    for (auto& b : w->blocks)
      for (LinearWeight* l : {&b.attn_qkv_proj, &b.attn_out_proj, &b.mlp_fc1, &b.mlp_fc2})
        originals.push_back(to_host(*be, l->weight));
    PrecisionOptions po;
    po.precision = precision;
    po.nvfp4_fc2 = "off";  // all four GEMMs W4A4: every weight through the device quantizer
    ASSERT_TRUE(apply_precision(*w, *be, po).ok());
    size_t i = 0;
    for (auto& b : w->blocks) {
      for (LinearWeight* l : {&b.attn_qkv_proj, &b.attn_out_proj, &b.mlp_fc1, &b.mlp_fc2}) {
        const Tensor& orig = originals[i++];
        auto want = std::string(precision) == "fp8" ? quantize_weight_fp8(orig, Fp8Scaling::kPerTensor)
                                                    : quantize_weight_nvfp4(orig, true);
        ASSERT_TRUE(want.ok());
        EXPECT_EQ(l->format, want->format);
        EXPECT_TRUE(same(to_host(*be, l->weight), want->weight)) << "tensor " << i;
        EXPECT_TRUE(same(to_host(*be, l->weight_scale), want->weight_scale)) << "tensor " << i;
      }
    }
  }
}

TEST(DeviceBudget, TheAllocatorEnforcesMaxVram) {
  std::unique_ptr<CudaBackend> be;
  REQUIRE_CUDA(be);
  ASSERT_TRUE(be->set_memory_budget(uint64_t{64} << 20).ok());  // 64 MiB
  const std::optional<size_t> free = be->free_device_memory();
  ASSERT_TRUE(free.has_value());
  EXPECT_LE(*free, size_t{64} << 20) << "free memory must be reported within the budget";
  {
    auto a = be->alloc({48 << 20}, DType::kU8);
    ASSERT_TRUE(a.ok()) << a.status().to_string();
    auto b = be->alloc({32 << 20}, DType::kU8);  // 80 MiB in use would pass the budget
    ASSERT_FALSE(b.ok());
    EXPECT_EQ(b.status().code(), ErrorCode::kOutOfMemory);
    EXPECT_NE(b.status().message().find("--max-vram"), std::string::npos) << b.status().to_string();
  }
  // The freed 48 MiB block sits in the cache; a block of another size makes the allocator return it first.
  auto c = be->alloc({40 << 20}, DType::kU8);
  EXPECT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_LE(be->memory_stats().reserved_bytes, size_t{64} << 20);
}

// ---- AdaLN tables ahead, projections in host memory ---------------------------------------------------------

struct Request {
  ModelConfig cfg = ModelConfig::h3_tiny();
  PackedLayout layout;
  Tensor text;
  AvLatents noise;
  SamplerSpec spec;
  AvSchedule schedule;
  std::vector<std::pair<double, double>> sigmas;
};

Request make_request(uint64_t seed) {
  Request r;
  RequestGeometry g = make_geometry(r.cfg, 96, 64, 22, 7).value();
  r.layout = pack_request(r.cfg, g).value();
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  r.text = Tensor::empty({7, r.cfg.text_dim}, DType::kF32);
  for (int64_t i = 0; i < r.text.numel(); ++i) r.text.data<float>()[i] = nd(rng);
  r.noise.video.resize(static_cast<size_t>(r.cfg.in_channels) * g.latent_frames * g.latent_h * g.latent_w);
  r.noise.audio.resize(static_cast<size_t>(2 * r.cfg.audio_in_channels * g.audio_latents));
  for (float& v : r.noise.video) v = nd(rng);
  for (float& v : r.noise.audio) v = nd(rng);
  r.spec.steps = 4;
  r.schedule = make_av_schedule(r.spec).value();
  for (int i = 0; i < r.spec.steps; ++i) r.sigmas.emplace_back(r.schedule.sigma_video[i], r.schedule.sigma_audio[i]);
  return r;
}

std::shared_ptr<LoraBranch> adaln_branch(Backend& be, const ModelConfig& cfg, uint64_t seed) {
  std::mt19937_64 rng(seed);
  LoraBranchPart p;
  p.a = be.upload(random_weight(4, cfg.time_embed_dim, rng, 0.3f, false)).value();  // [4, E]
  p.b = be.upload(random_weight(18 * cfg.hidden, 4, rng, 0.3f, false)).value();     // [18D, 4]
  p.scale = 0.5;
  auto br = std::make_shared<LoraBranch>();
  br->parts.push_back(std::move(p));
  return br;
}

enum class Mode { kPerStep, kAheadHost, kAheadHostGraph, kOnDemandHost };

Result<AvLatents> run_mode(const Request& r, uint64_t seed, Mode mode, bool lora) {
  VORTEX_ASSIGN_OR_RETURN(std::unique_ptr<CudaBackend> be, cuda());
  VORTEX_ASSIGN_OR_RETURN(H3Weights w, synthesize_weights(r.cfg, *be, seed));
  ExecOptions opts = be->default_options();
  opts.attention = AttentionKind::kSdpa;
  opts.cuda_graph = mode == Mode::kAheadHostGraph ? CudaGraphMode::kOn : CudaGraphMode::kOff;
  H3Model model(r.cfg, *be, std::move(w), opts);
  if (lora) model.mutable_weights().blocks.back().adaln_proj_lora = adaln_branch(*be, r.cfg, seed + 7);
  if (mode != Mode::kPerStep) {
    const size_t before = be->memory_in_use();
    VORTEX_RETURN_IF_ERROR(model.place_adaln_weights(AdalnWeightPlace::kHost));
    EXPECT_TRUE(model.adaln_weights_on_host());
    EXPECT_LE(be->memory_in_use() + model.adaln_weight_bytes(), before) << "the device copies were not freed";
    for (const H3BlockWeights& b : model.weights().blocks)
      EXPECT_TRUE(is_page_locked(b.adaln_proj_linear_weight.raw_data()));
  }
  VORTEX_RETURN_IF_ERROR(model.prepare(r.layout, r.text));
  if (mode == Mode::kAheadHost || mode == Mode::kAheadHostGraph) {
    VORTEX_RETURN_IF_ERROR(model.precompute_adaln(r.sigmas));
  }
  DenoiseFn denoise = [&](const AvLatents& x, double sv, double sa, int) { return model.forward(x, sv, sa); };
  VORTEX_ASSIGN_OR_RETURN(AvLatents out, sample_av(r.spec, r.noise, denoise));
  EXPECT_EQ(model.step_workspace().tables_ahead, mode != Mode::kPerStep);
  if (mode == Mode::kAheadHostGraph) {
    EXPECT_EQ(model.last_step_action(), StepGraphAction::kReplay);
  }
  return out;
}

bool same_latents(const AvLatents& a, const AvLatents& b) {
  return a.video.size() == b.video.size() && a.audio.size() == b.audio.size() &&
         std::memcmp(a.video.data(), b.video.data(), a.video.size() * 4) == 0 &&
         std::memcmp(a.audio.data(), b.audio.data(), a.audio.size() * 4) == 0;
}

TEST(AdalnAheadCuda, HostProjectionsGiveThePerStepLatentBytes) {
  {
    std::unique_ptr<CudaBackend> probe;
    REQUIRE_CUDA(probe);
  }
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const Request r = make_request(seed);
  auto base = run_mode(r, seed, Mode::kPerStep, false);
  ASSERT_TRUE(base.ok()) << base.status().to_string();
  for (Mode m : {Mode::kAheadHost, Mode::kAheadHostGraph, Mode::kOnDemandHost}) {
    SCOPED_TRACE(static_cast<int>(m));
    auto got = run_mode(r, seed, m, false);
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    EXPECT_TRUE(same_latents(*base, *got));
  }
}

TEST(AdalnAheadCuda, RuntimeLoraOnAdalnProjWithHostProjections) {
  {
    std::unique_ptr<CudaBackend> probe;
    REQUIRE_CUDA(probe);
  }
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const Request r = make_request(seed);
  auto plain = run_mode(r, seed, Mode::kPerStep, false);
  auto base = run_mode(r, seed, Mode::kPerStep, true);
  auto ahead = run_mode(r, seed, Mode::kAheadHostGraph, true);
  ASSERT_TRUE(plain.ok() && base.ok() && ahead.ok());
  EXPECT_TRUE(same_latents(*base, *ahead));
  EXPECT_FALSE(same_latents(*plain, *base)) << "the adapter changed nothing: the test cannot see it";
}

// Streamed blocks on the GPU: uploads on the copy stream two blocks ahead, in BF16 and after the fp8 conversion.
TEST(StreamedBlocksCuda, TrajectoryBytesEqualTheResidentBlocks) {
  {
    std::unique_ptr<CudaBackend> probe;
    REQUIRE_CUDA(probe);
  }
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Request r = make_request(seed);
  r.cfg.num_layers = 5;
  for (const char* precision : {"bf16", "fp8"}) {
    SCOPED_TRACE(precision);
    auto run = [&](int first_streamed) -> Result<AvLatents> {
      VORTEX_ASSIGN_OR_RETURN(std::unique_ptr<CudaBackend> be, cuda());
      VORTEX_ASSIGN_OR_RETURN(H3Weights w, synthesize_weights(r.cfg, *be, seed));
      VORTEX_RETURN_IF_ERROR(apply_precision(w, *be, precision));
      ExecOptions opts = be->default_options();
      opts.attention = AttentionKind::kSdpa;
      VORTEX_ASSIGN_OR_RETURN(opts.precision, parse_precision(precision));
      H3Model model(r.cfg, *be, std::move(w), opts);
      const size_t before = be->memory_in_use();
      VORTEX_RETURN_IF_ERROR(model.stream_blocks(first_streamed));
      if (first_streamed < 3) {
        EXPECT_LT(be->memory_in_use(), before) << "streamed weights stayed on the device";
      }
      VORTEX_RETURN_IF_ERROR(model.prepare(r.layout, r.text));
      VORTEX_RETURN_IF_ERROR(model.precompute_adaln(r.sigmas));
      DenoiseFn denoise = [&](const AvLatents& x, double sv, double sa, int) { return model.forward(x, sv, sa); };
      return sample_av(r.spec, r.noise, denoise);
    };
    auto resident = run(5);
    ASSERT_TRUE(resident.ok()) << resident.status().to_string();
    for (int first : {0, 2}) {
      auto streamed = run(first);
      ASSERT_TRUE(streamed.ok()) << streamed.status().to_string();
      EXPECT_TRUE(same_latents(*resident, *streamed)) << "streaming from block " << first;
    }
  }
}

}  // namespace
}  // namespace vortex
