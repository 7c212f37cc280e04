// Step graphs on the CUDA backend (GPU label; skips visibly without a device). Backend level: a captured op
// replays into a poisoned output with the eager bytes, allocation inside a capture is refused and the capture
// ends cleanly, a release invalidates the graph. Model level (h3-tiny, synthetic weights, one backend per
// model): after prepare() and one warm-up step, eager steps allocate nothing (eager and fused gate_add);
// with cuda_graph=on the warm-up / capture / replay steps give the same bytes as the eager model over a
// trajectory whose timestep slots change; replays into a poisoned workspace still do; a shape change
// (prepare with another size) warms up, re-captures and stays bit-identical; a release between steps
// invalidates the graph, which is re-captured, still bit-identical.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "cuda/cuda_backend.h"
#include "cuda_test_util.h"
#include "model/h3_model.h"
#include "model/h3_spec.h"
#include "model/random_inputs.h"
#include "vortex/config.h"

namespace vortex {
namespace {

using cuda_test::fresh_seed;

Tensor host_filled(const Shape& shape, DType dtype, uint8_t byte) {
  Tensor t = Tensor::empty(shape, dtype);
  std::memset(t.raw_data(), byte, t.nbytes());
  return t;
}

// ---- backend level -------------------------------------------------------------------------------

TEST(CudaStepGraph, CapturedOpReplaysIntoPoisonedOutput) {
  std::unique_ptr<CudaBackend> be;
  VORTEX_REQUIRE_CUDA(be);
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  auto src = be->alloc({257, 96}, DType::kF32);
  auto eager = be->alloc({257, 96}, DType::kBF16);
  auto graphed = be->alloc({257, 96}, DType::kBF16);
  ASSERT_TRUE(src.ok() && eager.ok() && graphed.ok());
  ASSERT_OK(be->fill_synthetic(*src, seed, 3.0f, 0.25f));
  ASSERT_OK(be->cast(*src, *eager));
  ASSERT_OK(be->upload_to(host_filled({257, 96}, DType::kBF16, 0xFF), *graphed));  // NaN poison
  ASSERT_OK(be->begin_capture());
  ASSERT_OK(be->cast(*src, *graphed));
  auto g = be->end_capture();
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  // Captured work has not run: the output still holds the poison.
  Tensor h = Tensor::empty({257, 96}, DType::kBF16);
  ASSERT_OK(be->download(*graphed, h));
  EXPECT_EQ(h.data<uint16_t>()[0], 0xFFFF);
  ASSERT_TRUE(be->graph_current(**g));
  ASSERT_OK(be->replay(**g));
  Tensor he = Tensor::empty({257, 96}, DType::kBF16);
  ASSERT_OK(be->download(*graphed, h));
  ASSERT_OK(be->download(*eager, he));
  EXPECT_EQ(std::memcmp(h.raw_data(), he.raw_data(), h.nbytes()), 0);
  // A new input, replayed again: the graph reads the buffer, not a copy taken at capture.
  ASSERT_OK(be->fill_synthetic(*src, seed + 1, 2.0f, -0.5f));
  ASSERT_OK(be->cast(*src, *eager));
  ASSERT_OK(be->replay(**g));
  ASSERT_OK(be->download(*graphed, h));
  ASSERT_OK(be->download(*eager, he));
  EXPECT_EQ(std::memcmp(h.raw_data(), he.raw_data(), h.nbytes()), 0);
}

TEST(CudaStepGraph, AllocationDuringCaptureIsRefusedAndReleaseInvalidates) {
  std::unique_ptr<CudaBackend> be;
  VORTEX_REQUIRE_CUDA(be);
  ASSERT_OK(be->begin_capture());
  auto t = be->alloc({1024}, DType::kF32);
  EXPECT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("during a CUDA graph capture"), std::string::npos) << t.status().to_string();
  EXPECT_EQ(be->begin_capture().code(), ErrorCode::kInternal);  // one capture at a time
  auto g = be->end_capture();                                   // an empty capture still ends the capture
  (void)g;
  EXPECT_EQ(be->end_capture().status().code(), ErrorCode::kInternal);  // nothing open any more
  auto after = be->alloc({1024}, DType::kF32);                         // the guard is down again
  ASSERT_TRUE(after.ok()) << after.status().to_string();
  Tensor kept = std::move(after).value();

  auto x = be->alloc({64}, DType::kF32);
  ASSERT_TRUE(x.ok());
  ASSERT_OK(be->begin_capture());
  ASSERT_OK(be->fill_synthetic(*x, 1, 1.0f, 0.0f));
  auto g2 = be->end_capture();
  ASSERT_TRUE(g2.ok()) << g2.status().to_string();
  EXPECT_TRUE(be->graph_current(**g2));
  kept = Tensor();  // releases a block: the graph may now reference reused memory
  EXPECT_FALSE(be->graph_current(**g2));
  EXPECT_EQ(be->replay(**g2).code(), ErrorCode::kInvalidArgument);
  be->set_debug_sync(true);
  EXPECT_EQ(be->begin_capture().code(), ErrorCode::kUnsupported);
}

// ---- model level (h3-tiny) -----------------------------------------------------------------------

struct Request {
  PackedLayout layout;
  Tensor text;
  AvLatents noise;
};

Request make_request(const ModelConfig& cfg, uint64_t seed, int width, int height, int frames) {
  Request r;
  RequestGeometry g = make_geometry(cfg, width, height, frames, 6).value();
  r.layout = pack_request(cfg, g).value();
  testing::random_request_inputs(cfg, g, 6, seed, r.text, r.noise);
  return r;
}

// One backend per model, so that one model's work never releases memory under the other's graph.
struct Side {
  std::unique_ptr<CudaBackend> backend;
  std::unique_ptr<H3Model> model;
};

Status make_side(Side& s, const ModelConfig& cfg, uint64_t weights_seed, CudaGraphMode mode, bool fused_gate_add) {
  VORTEX_ASSIGN_OR_RETURN(s.backend, CudaBackend::create(0));
  VORTEX_ASSIGN_OR_RETURN(H3Weights w, synthesize_weights(cfg, *s.backend, weights_seed));
  ExecOptions o = s.backend->default_options();
  o.cuda_graph = mode;
  o.fused_gate_add = fused_gate_add;
  s.model = std::make_unique<H3Model>(cfg, *s.backend, std::move(w), o);
  return Status::Ok();
}

bool same_bytes(const AvLatents& a, const AvLatents& b) {
  return a.video.size() == b.video.size() && a.audio.size() == b.audio.size() &&
         std::memcmp(a.video.data(), b.video.data(), a.video.size() * 4) == 0 &&
         std::memcmp(a.audio.data(), b.audio.data(), a.audio.size() * 4) == 0;
}

bool all_finite(const AvLatents& a) {
  for (float v : a.video)
    if (!std::isfinite(v)) return false;
  for (float v : a.audio)
    if (!std::isfinite(v)) return false;
  return true;
}

void euler_update(AvLatents& x, const AvLatents& v, float dt) {
  for (size_t i = 0; i < x.video.size(); ++i) x.video[i] -= dt * v.video[i];
  for (size_t i = 0; i < x.audio.size(); ++i) x.audio[i] -= dt * v.audio[i];
}

// Sigma pairs of a trajectory: equal at the start (one table slot), then distinct (two).
const double kSigmas[][2] = {{1.0, 1.0}, {0.9, 0.85}, {0.8, 0.7}, {0.6, 0.55}, {0.45, 0.4}, {0.3, 0.2}, {0.15, 0.1}};

#define REQUIRE_SIDE(side, ...)                            \
  do {                                                     \
    Status vortex_side_st_ = make_side(side, __VA_ARGS__); \
    VORTEX_SKIP_NO_GPU_OR_FAIL(vortex_side_st_);           \
  } while (0)

TEST(CudaStepGraph, EagerStepsAllocateNothingAfterWarmUp) {
  const ModelConfig cfg = ModelConfig::h3_tiny();
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  for (bool fused_gate_add : {false, true}) {
    SCOPED_TRACE(fused_gate_add ? "fused gate_add" : "eager gate_add");
    Side s;
    REQUIRE_SIDE(s, cfg, seed, CudaGraphMode::kOff, fused_gate_add);
    Request r = make_request(cfg, seed, 64, 64, 5);
    ASSERT_OK(s.model->prepare(r.layout, r.text));
    AvLatents x = r.noise;
    auto warm = s.model->forward(x, 0.9, 0.8);  // creates cuBLASLt / cuDNN plans, grows scratch
    ASSERT_TRUE(warm.ok()) << warm.status().to_string();
    const AllocatorStats before = s.backend->memory_stats();
    for (int step = 1; step < 4; ++step) {
      auto v = s.model->forward(x, kSigmas[step][0], kSigmas[step][1]);
      ASSERT_TRUE(v.ok()) << v.status().to_string();
      euler_update(x, *v, 0.1f);
    }
    const AllocatorStats after = s.backend->memory_stats();
    EXPECT_EQ(after.allocations, before.allocations) << "a warmed-up step allocated on the device";
    EXPECT_EQ(after.releases, before.releases) << "a warmed-up step released device memory";
    EXPECT_EQ(after.device_mallocs, before.device_mallocs);
    EXPECT_EQ(after.peak_bytes, before.peak_bytes);
  }
}

TEST(CudaStepGraph, CapturedStepsAreBitIdenticalToEagerOverATrajectory) {
  const ModelConfig cfg = ModelConfig::h3_tiny();
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  for (bool fused_gate_add : {false, true}) {
    SCOPED_TRACE(fused_gate_add ? "fused gate_add" : "eager gate_add");
    Side eager, graph;
    REQUIRE_SIDE(eager, cfg, seed, CudaGraphMode::kOff, fused_gate_add);
    REQUIRE_SIDE(graph, cfg, seed, CudaGraphMode::kOn, fused_gate_add);
    Request r = make_request(cfg, seed, 64, 64, 5);
    ASSERT_OK(eager.model->prepare(r.layout, r.text));
    ASSERT_OK(graph.model->prepare(r.layout, r.text));
    AvLatents xe = r.noise, xg = r.noise;
    std::vector<StepGraphAction> actions;
    for (const auto& s : kSigmas) {
      auto ve = eager.model->forward(xe, s[0], s[1]);
      auto vg = graph.model->forward(xg, s[0], s[1]);
      ASSERT_TRUE(ve.ok()) << ve.status().to_string();
      ASSERT_TRUE(vg.ok()) << vg.status().to_string();
      actions.push_back(graph.model->last_step_action());
      ASSERT_TRUE(all_finite(*vg));
      ASSERT_TRUE(same_bytes(*ve, *vg)) << "step " << actions.size() - 1 << " ("
                                        << step_graph_action_name(actions.back()) << ") differs from eager";
      euler_update(xe, *ve, 0.1f);
      euler_update(xg, *vg, 0.1f);
    }
    // Step 0 has one slot (equal sigmas), step 1 two: warm-up, warm-up, capture, replay...
    const StepGraphStats& st = graph.model->step_graph_stats();
    EXPECT_EQ(st.failed_captures, 0u) << st.fallback;
    ASSERT_EQ(actions.size(), std::size(kSigmas));
    EXPECT_EQ(actions[0], StepGraphAction::kWarmUp);
    EXPECT_EQ(actions[1], StepGraphAction::kWarmUp);
    EXPECT_EQ(actions[2], StepGraphAction::kCapture);
    for (size_t i = 3; i < actions.size(); ++i) EXPECT_EQ(actions[i], StepGraphAction::kReplay) << "step " << i;
    EXPECT_EQ(eager.model->last_step_action(), StepGraphAction::kEager);
  }
}

TEST(CudaStepGraph, ReplayRewritesAPoisonedWorkspace) {
  const ModelConfig cfg = ModelConfig::h3_tiny();
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Side eager, graph;
  REQUIRE_SIDE(eager, cfg, seed, CudaGraphMode::kOff, false);
  REQUIRE_SIDE(graph, cfg, seed, CudaGraphMode::kOn, false);
  Request r = make_request(cfg, seed, 64, 64, 5);
  ASSERT_OK(eager.model->prepare(r.layout, r.text));
  ASSERT_OK(graph.model->prepare(r.layout, r.text));
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(graph.model->forward(r.noise, 0.8, 0.7).ok());  // warm-up, capture, replay
  ASSERT_EQ(graph.model->last_step_action(), StepGraphAction::kReplay) << graph.model->step_graph_stats().fallback;
  AvLatents x = r.noise;
  for (int step = 0; step < 3; ++step) {
    x.video[static_cast<size_t>(step)] += 0.5f;  // a new input each step
    auto ve = eager.model->forward(x, 0.8, 0.7);
    ASSERT_TRUE(ve.ok()) << ve.status().to_string();
    ASSERT_OK(graph.model->stage_step(x, 0.8, 0.7));
    // Poison everything the graph writes (0xFF bytes: NaN in bf16 and f32), through upload_to (no release).
    const StepWorkspace& ws = graph.model->step_workspace();
    std::vector<Tensor> outs = {ws.packed,       ws.final_table_store, ws.io.video_f32,
                                ws.io.audio_f32, ws.io.video_out,      ws.io.audio_out};
    for (const Tensor& t : ws.block_table_store) outs.push_back(t);
    for (Tensor& t : outs)
      if (t.numel() > 0) ASSERT_OK(graph.backend->upload_to(host_filled(t.shape(), t.dtype(), 0xFF), t));
    ASSERT_OK(graph.model->run_step());
    EXPECT_EQ(graph.model->last_step_action(), StepGraphAction::kReplay) << graph.model->step_graph_stats().fallback;
    auto vg = graph.model->finish_step();
    ASSERT_TRUE(vg.ok()) << vg.status().to_string();
    EXPECT_TRUE(all_finite(*vg));
    EXPECT_TRUE(same_bytes(*ve, *vg)) << "replay " << step << " after poisoning differs from eager";
  }
}

TEST(CudaStepGraph, ShapeChangeRecapturesAndStaysBitIdentical) {
  const ModelConfig cfg = ModelConfig::h3_tiny();
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Side eager, graph;
  REQUIRE_SIDE(eager, cfg, seed, CudaGraphMode::kOff, false);
  REQUIRE_SIDE(graph, cfg, seed, CudaGraphMode::kOn, false);
  struct Size {
    int w, h, f;
  };
  const Size sizes[] = {{64, 64, 5}, {96, 64, 22}, {64, 64, 5}};
  for (const Size& sz : sizes) {
    SCOPED_TRACE(std::to_string(sz.w) + "x" + std::to_string(sz.h) + "x" + std::to_string(sz.f));
    Request r = make_request(cfg, seed ^ static_cast<uint64_t>(sz.w * 131 + sz.f), sz.w, sz.h, sz.f);
    ASSERT_OK(eager.model->prepare(r.layout, r.text));
    ASSERT_OK(graph.model->prepare(r.layout, r.text));
    const uint64_t captures_before = graph.model->step_graph_stats().captures;
    AvLatents xe = r.noise, xg = r.noise;
    for (int step = 1; step < 5; ++step) {
      auto ve = eager.model->forward(xe, kSigmas[step][0], kSigmas[step][1]);
      auto vg = graph.model->forward(xg, kSigmas[step][0], kSigmas[step][1]);
      ASSERT_TRUE(ve.ok() && vg.ok()) << ve.status().to_string() << " / " << vg.status().to_string();
      EXPECT_TRUE(same_bytes(*ve, *vg)) << "step " << step << " ("
                                        << step_graph_action_name(graph.model->last_step_action()) << ")";
      const StepGraphAction want = step == 1   ? StepGraphAction::kWarmUp
                                   : step == 2 ? StepGraphAction::kCapture
                                               : StepGraphAction::kReplay;
      EXPECT_EQ(graph.model->last_step_action(), want) << "step " << step;
      euler_update(xe, *ve, 0.1f);
      euler_update(xg, *vg, 0.1f);
    }
    EXPECT_EQ(graph.model->step_graph_stats().captures, captures_before + 1);
  }
  EXPECT_EQ(graph.model->step_graph_stats().failed_captures, 0u) << graph.model->step_graph_stats().fallback;
}

TEST(CudaStepGraph, ReleaseBetweenStepsInvalidatesAndRecaptures) {
  const ModelConfig cfg = ModelConfig::h3_tiny();
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Side eager, graph;
  REQUIRE_SIDE(eager, cfg, seed, CudaGraphMode::kOff, false);
  REQUIRE_SIDE(graph, cfg, seed, CudaGraphMode::kOn, false);
  Request r = make_request(cfg, seed, 64, 64, 5);
  ASSERT_OK(eager.model->prepare(r.layout, r.text));
  ASSERT_OK(graph.model->prepare(r.layout, r.text));
  std::vector<StepGraphAction> actions;
  AvLatents xe = r.noise, xg = r.noise;
  for (int step = 0; step < 6; ++step) {
    if (step == 3) {  // unrelated device work that frees a block between two replays
      auto tmp = graph.backend->alloc({4096}, DType::kF32);
      ASSERT_TRUE(tmp.ok());
    }
    auto ve = eager.model->forward(xe, 0.7, 0.6);
    auto vg = graph.model->forward(xg, 0.7, 0.6);
    ASSERT_TRUE(ve.ok() && vg.ok());
    actions.push_back(graph.model->last_step_action());
    EXPECT_TRUE(same_bytes(*ve, *vg)) << "step " << step << " (" << step_graph_action_name(actions.back()) << ")";
    euler_update(xe, *ve, 0.05f);
    euler_update(xg, *vg, 0.05f);
  }
  const std::vector<StepGraphAction> expected = {StepGraphAction::kWarmUp,  StepGraphAction::kCapture,
                                                 StepGraphAction::kReplay,  StepGraphAction::kWarmUp,
                                                 StepGraphAction::kCapture, StepGraphAction::kReplay};
  EXPECT_EQ(actions, expected);
  EXPECT_EQ(graph.model->step_graph_stats().invalidations, 1u);
}

}  // namespace
}  // namespace vortex
