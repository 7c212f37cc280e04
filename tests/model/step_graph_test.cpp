// The host side of step graphs (CPU, no GPU needed): the StepGraphPlanner state machine (warm-up, capture,
// replay; key changes, failed captures, invalidations, ineligible steps), the cuda_graph switch (parse,
// print, the auto row limit, apply_switches), and on the CPU backend h3-tiny's forward() through the step
// workspace: bit-identical to the fresh-buffer pieces (make_step_tables / embed_inputs / run_block /
// final_layer) over several steps, and with cuda_graph=on it runs eagerly and says why.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "engine/workload.h"
#include "model/h3_model.h"
#include "model/h3_spec.h"
#include "model/step_graph.h"
#include "ref/cpu_backend.h"

namespace vortex {
namespace {

using A = StepGraphAction;

StepGraphKey key_of(int64_t rows, int slots = 2) {
  StepGraphKey k;
  k.rows = rows;
  k.slots = slots;
  k.audio_slot = slots - 1;
  k.options.cuda_graph = CudaGraphMode::kOn;
  return k;
}

TEST(StepGraphPlanner, WarmUpCaptureThenReplay) {
  StepGraphPlanner p;
  const StepGraphKey k = key_of(2048);
  EXPECT_EQ(p.next(k, true, "", false), A::kWarmUp);
  EXPECT_EQ(p.next(k, true, "", false), A::kCapture);
  EXPECT_FALSE(p.holds_graph());
  p.captured();
  EXPECT_TRUE(p.holds_graph());
  for (int i = 0; i < 5; ++i) EXPECT_EQ(p.next(k, true, "", true), A::kReplay);
  EXPECT_EQ(p.stats().warm_ups, 1u);
  EXPECT_EQ(p.stats().captures, 1u);
  EXPECT_EQ(p.stats().replays, 5u);
  EXPECT_EQ(p.stats().eager, 0u);
}

TEST(StepGraphPlanner, AnyKeyChangeStartsOver) {
  StepGraphPlanner p;
  StepGraphKey k = key_of(2048);
  ASSERT_EQ(p.next(k, true, "", false), A::kWarmUp);
  ASSERT_EQ(p.next(k, true, "", false), A::kCapture);
  p.captured();
  ASSERT_EQ(p.next(k, true, "", true), A::kReplay);
  // Each field of the key drops the graph: a new shape, timestep slots (keyframe rows' too), options, weights,
  // workspace.
  std::vector<StepGraphKey> changed(7, k);
  changed[0].rows = 2049;
  changed[1].slots = 1;
  changed[2].video_slot = 1;
  changed[3].options.fused_gate_add = !k.options.fused_gate_add;
  changed[4].weights_generation = 7;
  changed[5].workspace_generation = 3;
  changed[6].condition_slot = 2;  // fl2va keyframe rows on another table row
  for (const StepGraphKey& c : changed) {
    EXPECT_EQ(p.next(c, true, "", true), A::kWarmUp);  // graph_current is ignored: the key differs
    EXPECT_FALSE(p.holds_graph());
    EXPECT_EQ(p.next(c, true, "", false), A::kCapture);
    p.captured();
    EXPECT_EQ(p.next(c, true, "", true), A::kReplay);
  }
  // Back to the first key: captured again (one graph is held at a time).
  EXPECT_EQ(p.next(k, true, "", true), A::kWarmUp);
}

TEST(StepGraphPlanner, FailedCaptureStaysEagerUntilTheKeyChanges) {
  StepGraphPlanner p;
  const StepGraphKey k = key_of(2048);
  ASSERT_EQ(p.next(k, true, "", false), A::kWarmUp);
  ASSERT_EQ(p.next(k, true, "", false), A::kCapture);
  p.capture_failed("allocation during capture");
  EXPECT_FALSE(p.holds_graph());
  EXPECT_EQ(p.stats().fallback, "allocation during capture");
  EXPECT_EQ(p.stats().failed_captures, 1u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(p.next(k, true, "", false), A::kEager);
  EXPECT_EQ(p.next(key_of(4096), true, "", false), A::kWarmUp);
  EXPECT_EQ(p.next(key_of(4096), true, "", false), A::kCapture);
}

TEST(StepGraphPlanner, InvalidatedGraphIsRecapturedAfterAnEagerStepThenGivenUp) {
  StepGraphPlanner p;
  const StepGraphKey k = key_of(2048);
  ASSERT_EQ(p.next(k, true, "", false), A::kWarmUp);
  ASSERT_EQ(p.next(k, true, "", false), A::kCapture);
  p.captured();
  for (int r = 1; r <= StepGraphPlanner::kMaxRecaptures; ++r) {
    EXPECT_EQ(p.next(k, true, "", false), A::kWarmUp) << "invalidation " << r;
    EXPECT_FALSE(p.holds_graph());
    EXPECT_EQ(p.next(k, true, "", false), A::kCapture);
    p.captured();
    EXPECT_EQ(p.next(k, true, "", true), A::kReplay);
  }
  EXPECT_EQ(p.next(k, true, "", false), A::kEager);  // one invalidation too many
  EXPECT_NE(p.stats().fallback.find("invalidated"), std::string::npos) << p.stats().fallback;
  EXPECT_EQ(p.next(k, true, "", false), A::kEager);
  EXPECT_EQ(p.stats().invalidations, static_cast<uint64_t>(StepGraphPlanner::kMaxRecaptures + 1));
}

TEST(StepGraphPlanner, IneligibleStepsAreEagerAndDropTheGraph) {
  StepGraphPlanner p;
  const StepGraphKey k = key_of(2048);
  ASSERT_EQ(p.next(k, true, "", false), A::kWarmUp);
  ASSERT_EQ(p.next(k, true, "", false), A::kCapture);
  p.captured();
  EXPECT_EQ(p.next(k, false, "profiling regions are on", true), A::kEager);
  EXPECT_FALSE(p.holds_graph());
  EXPECT_EQ(p.stats().fallback, "profiling regions are on");
  EXPECT_EQ(p.next(k, true, "", true), A::kWarmUp);  // eligible again: warm up, then capture
  EXPECT_EQ(p.next(k, true, "", false), A::kCapture);
}

TEST(CudaGraphSwitch, ParsePrintAndAutoLimit) {
  for (CudaGraphMode m : {CudaGraphMode::kOff, CudaGraphMode::kOn, CudaGraphMode::kAuto}) {
    auto parsed = parse_cuda_graph(cuda_graph_name(m));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, m);
  }
  EXPECT_EQ(parse_cuda_graph("yes").status().code(), ErrorCode::kInvalidArgument);
  ExecOptions o;
  EXPECT_EQ(o.cuda_graph, CudaGraphMode::kOff);  // off until the step-graph benchmark says where it pays
  EXPECT_FALSE(cuda_graph_wanted(o, 1));
  o.cuda_graph = CudaGraphMode::kOn;
  EXPECT_TRUE(cuda_graph_wanted(o, int64_t{1} << 40));
  o.cuda_graph = CudaGraphMode::kAuto;
  o.cuda_graph_auto_max_rows = 3000;
  EXPECT_TRUE(cuda_graph_wanted(o, 3000));
  EXPECT_FALSE(cuda_graph_wanted(o, 3001));

  ExecOptions s;
  ASSERT_TRUE(apply_switches("cuda_graph=auto", s).ok());
  EXPECT_EQ(s.cuda_graph, CudaGraphMode::kAuto);
  EXPECT_NE(describe_switches(s).find("cuda_graph=auto"), std::string::npos) << describe_switches(s);
  EXPECT_EQ(apply_switches("cuda_graph=1", s).code(), ErrorCode::kInvalidArgument);
  ExecOptions off;
  EXPECT_EQ(describe_switches(off).find("cuda_graph"), std::string::npos);  // evidence rows of eager runs unchanged
}

// ---- h3-tiny on the CPU backend ----------------------------------------------------------------

struct Tiny {
  ModelConfig cfg = ModelConfig::h3_tiny();
  PackedLayout layout;
  Tensor text;
  AvLatents noise;
};

Tiny make_tiny(uint64_t seed, int width, int height, int frames) {
  Tiny t;
  RequestGeometry g = make_geometry(t.cfg, width, height, frames, 5).value();
  t.layout = pack_request(t.cfg, g).value();
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  t.text = Tensor::empty({5, t.cfg.text_dim}, DType::kF32);
  for (int64_t i = 0; i < t.text.numel(); ++i) t.text.data<float>()[i] = nd(rng);
  t.noise.video.resize(static_cast<size_t>(t.cfg.in_channels) * g.latent_frames * g.latent_h * g.latent_w);
  t.noise.audio.resize(static_cast<size_t>(2 * t.cfg.audio_in_channels * g.audio_latents));
  for (float& v : t.noise.video) v = nd(rng);
  for (float& v : t.noise.audio) v = nd(rng);
  return t;
}

bool same_bytes(const AvLatents& a, const AvLatents& b) {
  return a.video.size() == b.video.size() && a.audio.size() == b.audio.size() &&
         std::memcmp(a.video.data(), b.video.data(), a.video.size() * 4) == 0 &&
         std::memcmp(a.audio.data(), b.audio.data(), a.audio.size() * 4) == 0;
}

// The forward program assembled from the public fresh-buffer pieces.
Result<AvLatents> pieces_forward(H3Model& m, const AvLatents& x, double sv, double sa) {
  VORTEX_ASSIGN_OR_RETURN(StepTables t, m.make_step_tables(sv, sa));
  VORTEX_ASSIGN_OR_RETURN(Tensor h, m.embed_inputs(x));
  for (int i = 0; i < m.config().num_layers; ++i) VORTEX_RETURN_IF_ERROR(m.run_block(i, h, t));
  return m.final_layer(h, t);
}

TEST(StepWorkspace, ForwardEqualsFreshBufferPiecesOverSteps) {
  std::random_device rd;
  const uint64_t seed = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Tiny t = make_tiny(seed, 64, 64, 5);
  CpuBackend be(2);
  auto w = synthesize_weights(t.cfg, be, seed ^ 0x5eed);
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  H3Model model(t.cfg, be, std::move(w).value(), ExecOptions{});
  ASSERT_TRUE(model.prepare(t.layout, t.text).ok());
  // Sigma pairs that change the number of distinct timesteps and the slot order between steps.
  const double sigmas[][2] = {{1.0, 1.0}, {0.8, 0.6}, {0.5, 0.7}, {0.3, 0.3}, {0.2, 0.1}};
  AvLatents x = t.noise;
  for (const auto& s : sigmas) {
    auto a = model.forward(x, s[0], s[1]);
    ASSERT_TRUE(a.ok()) << a.status().to_string();
    auto b = pieces_forward(model, x, s[0], s[1]);
    ASSERT_TRUE(b.ok()) << b.status().to_string();
    EXPECT_TRUE(same_bytes(*a, *b)) << "sigmas " << s[0] << ", " << s[1];
    EXPECT_EQ(model.last_step_action(), StepGraphAction::kEager);
    for (size_t i = 0; i < x.video.size(); ++i) x.video[i] -= 0.1f * a->video[i];  // a different input next step
    for (size_t i = 0; i < x.audio.size(); ++i) x.audio[i] -= 0.1f * a->audio[i];
  }
}

TEST(StepWorkspace, CudaGraphOnTheCpuBackendRunsEagerAndSaysWhy) {
  std::random_device rd;
  const uint64_t seed = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  Tiny t = make_tiny(seed, 64, 64, 5);
  CpuBackend be(2);
  auto w = synthesize_weights(t.cfg, be, seed);
  ASSERT_TRUE(w.ok());
  ExecOptions on;
  on.cuda_graph = CudaGraphMode::kOn;
  H3Model model(t.cfg, be, std::move(w).value(), on);
  ASSERT_TRUE(model.prepare(t.layout, t.text).ok());
  auto a = model.forward(t.noise, 0.7, 0.9);
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  EXPECT_EQ(model.last_step_action(), StepGraphAction::kEager);
  EXPECT_NE(model.step_graph_stats().fallback.find("no graph capture"), std::string::npos)
      << model.step_graph_stats().fallback;
  model.options().cuda_graph = CudaGraphMode::kOff;
  auto b = model.forward(t.noise, 0.7, 0.9);
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(same_bytes(*a, *b));
}

TEST(StepWorkspace, PiecesNeedAStagedStep) {
  Tiny t = make_tiny(1, 64, 64, 5);
  CpuBackend be(1);
  auto w = synthesize_weights(t.cfg, be, 3);
  ASSERT_TRUE(w.ok());
  H3Model model(t.cfg, be, std::move(w).value(), ExecOptions{});
  EXPECT_EQ(model.stage_step(t.noise, 0.5, 0.5).code(), ErrorCode::kInvalidArgument);  // before prepare
  ASSERT_TRUE(model.prepare(t.layout, t.text).ok());
  EXPECT_EQ(model.run_step().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(model.finish_step().status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(model.stage_step(t.noise, 1.5, 0.5).code(), ErrorCode::kInvalidArgument);
  AvLatents short_noise = t.noise;
  short_noise.video.pop_back();
  EXPECT_EQ(model.stage_step(short_noise, 0.5, 0.5).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(model.run_step().code(), ErrorCode::kInvalidArgument);  // a failed stage leaves nothing staged
}

}  // namespace
}  // namespace vortex
