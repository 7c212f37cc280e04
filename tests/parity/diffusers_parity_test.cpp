// The tiny random H3 of fixtures/ (diffusers' MiniMaxH3Transformer3DModel, BF16 with its FP32 modules)
// run by Vortex against diffusers' own outputs on the same inputs:
//   - the packed input rows (projections + refined text) and every block's contribution (out - in) from
//     diffusers' block input: the residual hides branch bugs, the contribution does not;
//   - the velocities of one forward;
//   - diffusers' 12-step denoise loop from the injected noise, every step's latents.
// Tolerance: 2x the BF16 noise floor the same fixture measures, diffusers' BF16 model against the same
// weights in FP32 (printed next to every number). Two BF16 programs that differ only in accumulation order
// and rounding placement sit at or below that floor (the CPU backend: 0.5-0.8x of it on every check);
// a real bug sits far above it (a QKV loaded without de-interleaving moves a block contribution by ~0.6).
// VORTEX_PARITY_BACKEND selects cpu (CI) or cuda (diffusers_parity_gpu_test, label gpu, skipped visibly without a
// device).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>

#include "gpu_test.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "model/h3_model.h"
#include "parity/parity_fixtures.h"
#include "vortex/dtype.h"

#ifndef VORTEX_PARITY_BACKEND
#error "VORTEX_PARITY_BACKEND must be \"cpu\" or \"cuda\""
#endif

// Test names carry the backend (CpuLayouts..., CudaLayouts...) so the two binaries never share a CTest name.
#define PARITY_CAT2(a, b) a##b
#define PARITY_CAT(a, b) PARITY_CAT2(a, b)
#define PARITY_SUITE(name) PARITY_CAT(VORTEX_PARITY_PREFIX, name)

namespace vortex {
namespace {

// The request of the model fixtures (make_diffusers_fixtures.py REQ): 96x64, 22 frames, 10 text rows.
constexpr int kWidth = 96, kHeight = 64, kFrames = 22, kTextRows = 10;

using parity::rel_l2;
using parity::values;

std::vector<float> minus(const std::vector<float>& a, const std::vector<float>& b) {
  std::vector<float> d(a.size());
  for (size_t i = 0; i < a.size(); ++i) d[i] = a[i] - b[i];
  return d;
}

class Fixture {
 public:
  static Result<std::unique_ptr<Fixture>> open(const std::string& layout_dir) {
    auto f = std::make_unique<Fixture>();
    const std::string dir = parity::fixtures_dir();
    VORTEX_ASSIGN_OR_RETURN(f->forward_, SafetensorsFile::open(dir + "/forward.safetensors"));
    VORTEX_ASSIGN_OR_RETURN(f->trajectory_, SafetensorsFile::open(dir + "/trajectory.safetensors"));
    f->checkpoint_ = dir + "/" + layout_dir;
    return f;
  }
  Result<std::vector<float>> fwd(const std::string& name) {
    VORTEX_ASSIGN_OR_RETURN(Tensor t, forward_.tensor(name));
    return values(t);
  }
  Result<std::vector<float>> traj(const std::string& name) {
    VORTEX_ASSIGN_OR_RETURN(Tensor t, trajectory_.tensor(name));
    return values(t);
  }
  Result<Tensor> fwd_tensor(const std::string& name) { return forward_.tensor(name); }
  const std::string& checkpoint() const { return checkpoint_; }

 private:
  SafetensorsFile forward_, trajectory_;
  std::string checkpoint_;
};

// The model of a fixture layout on the backend under test, prepared for the fixture request.
struct Loaded {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<H3Model> model;
  PackedLayout layout;
  AvLatents noise;
};

Result<Loaded> load(Fixture& fx, const std::string& file, CheckpointLayout layout = CheckpointLayout::kAuto) {
  Loaded l;
  VORTEX_ASSIGN_OR_RETURN(l.backend, make_backend(VORTEX_PARITY_BACKEND, 0));
  const std::string path = fx.checkpoint() + file;
  VORTEX_ASSIGN_OR_RETURN(ModelConfig cfg, config_for_checkpoint(path));
  VORTEX_ASSIGN_OR_RETURN(H3Weights w, load_checkpoint(path, cfg, *l.backend, layout));
  ExecOptions exec = l.backend->default_options();  // the backend's production policy (E0 fusions)
  l.model = std::make_unique<H3Model>(cfg, *l.backend, std::move(w), exec);
  VORTEX_ASSIGN_OR_RETURN(RequestGeometry geo, make_geometry(cfg, kWidth, kHeight, kFrames, kTextRows));
  VORTEX_ASSIGN_OR_RETURN(l.layout, pack_request(cfg, geo));
  VORTEX_ASSIGN_OR_RETURN(Tensor text, fx.fwd_tensor("text"));
  VORTEX_RETURN_IF_ERROR(l.model->prepare(l.layout, text));
  VORTEX_ASSIGN_OR_RETURN(l.noise.video, fx.fwd("noise_video"));
  VORTEX_ASSIGN_OR_RETURN(l.noise.audio, fx.fwd("noise_audio"));
  return l;
}

// Skips only for an absent device or a build without the CUDA backend; an unsupported GPU or any other
// failure is a failure.
#define SKIP_WITHOUT_BACKEND(result)               \
  do {                                             \
    VORTEX_SKIP_NO_GPU_OR_FAIL((result).status()); \
  } while (0)

struct LayoutCase {
  const char* dir;
  const char* file;
};

class DiffusersParity : public ::testing::TestWithParam<LayoutCase> {};

TEST_P(DiffusersParity, InputRowsAndBlockContributions) {
  auto fx = Fixture::open(GetParam().dir);
  ASSERT_TRUE(fx.ok()) << fx.status().to_string();
  auto l = load(**fx, GetParam().file);
  SKIP_WITHOUT_BACKEND(l);
  H3Model& model = *l->model;
  auto tables = model.make_step_tables(1.0, 1.0);  // t = 0 for both streams, as the fixture forward
  ASSERT_TRUE(tables.ok()) << tables.status().to_string();

  // Packed input rows: text refined by the refiner + projected video and audio rows.
  auto x = model.embed_inputs(l->noise);
  ASSERT_TRUE(x.ok()) << x.status().to_string();
  Tensor x_host = Tensor::empty(x->shape(), x->dtype());
  ASSERT_TRUE(l->backend->download(*x, x_host).ok());
  const std::vector<float> got_in = values(x_host);
  const std::vector<float> want_in = *(*fx)->fwd("bf16.block0.in");
  const std::vector<float> want_in32 = *(*fx)->fwd("fp32.block0.in");
  const double in_err = rel_l2(got_in, want_in), in_floor = rel_l2(want_in, want_in32);
  std::printf("[%s %s] packed input rows: rel-L2 %.3e (floor bf16-vs-fp32 %.3e)\n", VORTEX_PARITY_BACKEND,
              GetParam().dir, in_err, in_floor);
  EXPECT_LT(in_err, 2.0 * in_floor);

  const int blocks = model.config().num_layers;
  for (int i = 0; i < blocks; ++i) {
    const std::string p = "bf16.block" + std::to_string(i);
    auto in_t = (*fx)->fwd_tensor(p + ".in");  // [S, D] f32 holding BF16 values
    ASSERT_TRUE(in_t.ok());
    Tensor in_bf16 = Tensor::empty(in_t->shape(), DType::kBF16);
    const std::vector<float> in = values(*in_t);
    for (size_t k = 0; k < in.size(); ++k) {
      ASSERT_EQ(round_bf16(in[k]), in[k]) << "fixture block input is not BF16";
      in_bf16.data<uint16_t>()[k] = bf16_bits_from_f32(in[k]);
    }
    auto dev = l->backend->upload(in_bf16);
    ASSERT_TRUE(dev.ok());
    ASSERT_TRUE(model.run_block(i, *dev, *tables).ok());
    Tensor out_host = Tensor::empty(dev->shape(), DType::kBF16);
    ASSERT_TRUE(l->backend->download(*dev, out_host).ok());
    const std::vector<float> got_c = minus(values(out_host), in);
    const std::vector<float> want_c = minus(*(*fx)->fwd(p + ".out"), in);
    const std::string q = "fp32.block" + std::to_string(i);
    const std::vector<float> want_c32 = minus(*(*fx)->fwd(q + ".out"), *(*fx)->fwd(q + ".in"));
    const double err = rel_l2(got_c, want_c), floor = rel_l2(want_c, want_c32);
    std::printf("[%s %s] block %d contribution: rel-L2 %.3e (floor bf16-vs-fp32 %.3e)\n", VORTEX_PARITY_BACKEND,
                GetParam().dir, i, err, floor);
    EXPECT_LT(err, 2.0 * floor) << "block " << i;
  }
}

TEST_P(DiffusersParity, Velocities) {
  auto fx = Fixture::open(GetParam().dir);
  ASSERT_TRUE(fx.ok()) << fx.status().to_string();
  auto l = load(**fx, GetParam().file);
  SKIP_WITHOUT_BACKEND(l);
  auto v = l->model->forward(l->noise, 1.0, 1.0);
  ASSERT_TRUE(v.ok()) << v.status().to_string();
  for (const char* stream : {"video", "audio"}) {
    const std::vector<float>& got = std::string(stream) == "video" ? v->video : v->audio;
    const std::vector<float> want = *(*fx)->fwd(std::string("bf16.velocity_") + stream);
    const std::vector<float> want32 = *(*fx)->fwd(std::string("fp32.velocity_") + stream);
    ASSERT_EQ(got.size(), want.size());
    const double err = rel_l2(got, want), floor = rel_l2(want, want32);
    std::printf("[%s %s] %s velocity: rel-L2 %.3e (floor %.3e)\n", VORTEX_PARITY_BACKEND, GetParam().dir, stream, err,
                floor);
    EXPECT_LT(err, 2.0 * floor) << stream;
  }
}

TEST_P(DiffusersParity, TwelveStepTrajectory) {
  auto fx = Fixture::open(GetParam().dir);
  ASSERT_TRUE(fx.ok()) << fx.status().to_string();
  auto l = load(**fx, GetParam().file);
  SKIP_WITHOUT_BACKEND(l);
  SamplerSpec spec;  // diffusers' MiniMaxH3 loop: Euler on each stream's own MiniMaxH3Scheduler table
  spec.kind = SamplerKind::kEuler;
  spec.mode = AvScheduleMode::kDiffusers;
  spec.steps = 12;
  std::vector<AvLatents> seen;  // the latents handed to step i = the latents after step i - 1
  H3Model& model = *l->model;
  auto out = sample_av(spec, l->noise, [&](const AvLatents& x, double sv, double sa, int) {
    seen.push_back(x);
    return model.forward(x, sv, sa);
  });
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  seen.push_back(*out);
  ASSERT_EQ(seen.size(), 13u);
  double worst_ratio = 0.0;
  for (int i = 0; i < 12; ++i) {
    for (const char* stream : {"video", "audio"}) {
      const AvLatents& g = seen[static_cast<size_t>(i) + 1];
      const std::vector<float>& got = std::string(stream) == "video" ? g.video : g.audio;
      const std::string key = "step" + std::to_string(i) + ".latents_" + stream;
      const std::vector<float> want = *(*fx)->traj("bf16." + key), want32 = *(*fx)->traj("fp32." + key);
      const double err = rel_l2(got, want), floor = rel_l2(want, want32);
      std::printf("[%s %s] after step %2d %s latents: rel-L2 %.3e (floor %.3e)\n", VORTEX_PARITY_BACKEND,
                  GetParam().dir, i + 1, stream, err, floor);
      worst_ratio = std::max(worst_ratio, err / floor);
      EXPECT_LT(err, 2.0 * floor) << stream << " latents after step " << i + 1;
    }
  }
  std::printf("[%s %s] worst step error / floor: %.2f\n", VORTEX_PARITY_BACKEND, GetParam().dir, worst_ratio);
}

// The check can fail: the original file read as if its QKV rows were already [q|k|v] (no de-interleave)
// moves the block contributions far above the tolerance, while the residual stream barely shows it.
TEST(PARITY_SUITE(DiffusersParityLayouts), ContributionCheckCatchesAnUninterleavedQkv) {
  auto fx = Fixture::open("model_original");
  ASSERT_TRUE(fx.ok());
  auto l = load(**fx, "/model.safetensors", CheckpointLayout::kComfy);
  SKIP_WITHOUT_BACKEND(l);
  auto tables = l->model->make_step_tables(1.0, 1.0);
  ASSERT_TRUE(tables.ok());
  auto in_t = (*fx)->fwd_tensor("bf16.block0.in");
  ASSERT_TRUE(in_t.ok());
  const std::vector<float> in = values(*in_t);
  Tensor in_bf16 = Tensor::empty(in_t->shape(), DType::kBF16);
  for (size_t k = 0; k < in.size(); ++k) in_bf16.data<uint16_t>()[k] = bf16_bits_from_f32(in[k]);
  auto dev = l->backend->upload(in_bf16);
  ASSERT_TRUE(dev.ok());
  ASSERT_TRUE(l->model->run_block(0, *dev, *tables).ok());
  Tensor out_host = Tensor::empty(dev->shape(), DType::kBF16);
  ASSERT_TRUE(l->backend->download(*dev, out_host).ok());
  const std::vector<float> out = values(out_host), want_out = *(*fx)->fwd("bf16.block0.out");
  const double contribution_err = rel_l2(minus(out, in), minus(want_out, in));
  const double output_err = rel_l2(out, want_out);
  std::printf("[%s] QKV not de-interleaved, block 0: contribution rel-L2 %.3e, output rel-L2 %.3e\n",
              VORTEX_PARITY_BACKEND, contribution_err, output_err);
  EXPECT_GT(contribution_err, 0.2);
}

// Both checkpoint layouts of the same weights: diffusers' save_pretrained folder (mixed precision, split
// q/k/v, [value; gate] FC1, no rope.inv_freq) and the original MiniMax file (interleaved QKV, [gate; value]).
TEST(PARITY_SUITE(DiffusersParityLayouts), BothLayoutsGiveIdenticalVelocities) {
  auto fx = Fixture::open("model_original");
  auto fd = Fixture::open("model_diffusers");
  ASSERT_TRUE(fx.ok() && fd.ok());
  auto lo = load(**fx, "/model.safetensors");
  SKIP_WITHOUT_BACKEND(lo);
  auto ld = load(**fd, "");
  ASSERT_TRUE(ld.ok()) << ld.status().to_string();
  auto vo = lo->model->forward(lo->noise, 0.8, 0.6);
  auto vd = ld->model->forward(ld->noise, 0.8, 0.6);
  ASSERT_TRUE(vo.ok() && vd.ok());
  ASSERT_EQ(vo->video.size(), vd->video.size());
  EXPECT_EQ(std::memcmp(vo->video.data(), vd->video.data(), vo->video.size() * 4), 0);
  EXPECT_EQ(std::memcmp(vo->audio.data(), vd->audio.data(), vo->audio.size() * 4), 0);
}

INSTANTIATE_TEST_SUITE_P(VORTEX_PARITY_PREFIX, DiffusersParity,
                         ::testing::Values(LayoutCase{"model_original", "/model.safetensors"},
                                           LayoutCase{"model_diffusers", ""}),
                         [](const ::testing::TestParamInfo<LayoutCase>& info) {
                           return std::string(info.param.dir).substr(6);
                         });

}  // namespace
}  // namespace vortex
