// fl2va through the tiny random H3 of fixtures/model_diffusers against diffusers 0.42.1 (fixtures from
// tests/parity/make_fl2va_model_fixtures.py), for a first keyframe, a last one and both:
//   - the keyframe rows Vortex builds (noise_condition_latents + patchify_video) equal diffusers' bit for bit;
//   - their packed input rows (video_patch_proj, BF16), the generated rows' velocities at two timestep pairs (the
//     second puts t_video above the keyframes' 0.999), and the latents after every step of a 6-step Euler loop in
//     which the keyframe rows stay as they were noised (diffusers' MiniMaxH3LoopSchedulerStep never writes them).
// Tolerance: 2x the BF16 floor, diffusers' BF16 model against the same weights in FP32 (printed with every number),
// the rule of tests/parity/diffusers_parity_test.cpp. VORTEX_PARITY_BACKEND selects cpu (CI) or cuda.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>

#include "gpu_test.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "model/h3_model.h"
#include "parity/model_parity_checks.h"
#include "parity/parity_fixtures.h"
#include "vortex/dtype.h"

#ifndef VORTEX_PARITY_BACKEND
#error "VORTEX_PARITY_BACKEND must be \"cpu\" or \"cuda\""
#endif
#define PARITY_CAT2(a, b) a##b
#define PARITY_CAT(a, b) PARITY_CAT2(a, b)
#define PARITY_SUITE(name) PARITY_CAT(VORTEX_PARITY_PREFIX, name)

namespace vortex {
namespace {

using parity::rel_l2;
using parity::values;

struct Case {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<H3Model> model;
  PackedLayout layout;
  Tensor condition_rows;  // [Nc, 96] f32, built by Vortex from the fixture's latents and noise
  AvLatents noise;
  SafetensorsFile fx;
  std::string name;
  std::vector<float> get(const std::string& key) {
    Result<Tensor> t = fx.tensor(name + "." + key);
    EXPECT_TRUE(t.ok()) << name << "." << key << ": " << t.status().to_string();
    return t.ok() ? values(*t) : std::vector<float>{};
  }
};

const nlohmann::json& meta() {
  static const nlohmann::json j = parity::read_json("fl2va_model.json");
  return j;
}

const nlohmann::json* find_case(const std::string& name) {
  for (const auto& c : meta()["cases"])
    if (c["name"] == name) return &c;
  return nullptr;
}

Result<Case> load_case(const std::string& name) {
  Case c;
  c.name = name;
  const nlohmann::json* j = find_case(name);
  if (j == nullptr) return not_found("fl2va_model.json has no case " + name);
  VORTEX_ASSIGN_OR_RETURN(c.fx, SafetensorsFile::open(parity::fixtures_dir() + "/fl2va_model.safetensors"));
  VORTEX_ASSIGN_OR_RETURN(c.backend, make_backend(VORTEX_PARITY_BACKEND, 0));
  const std::string path = parity::fixtures_dir() + "/model_diffusers";
  VORTEX_ASSIGN_OR_RETURN(ModelConfig cfg, config_for_checkpoint(path));
  VORTEX_ASSIGN_OR_RETURN(H3Weights w, load_checkpoint(path, cfg, *c.backend, CheckpointLayout::kAuto));
  c.model = std::make_unique<H3Model>(cfg, *c.backend, std::move(w), c.backend->default_options());
  const int64_t text_rows = (*j)["text_rows"].get<int64_t>();
  VORTEX_ASSIGN_OR_RETURN(RequestGeometry geo,
                          make_geometry(cfg, meta()["width"].get<int>(), meta()["height"].get<int>(),
                                        meta()["frames"].get<int>(), text_rows));
  for (const auto& a : (*j)["anchors"])
    geo.keyframes.push_back(a == "first" ? KeyframeAnchor::kFirst : KeyframeAnchor::kLast);
  std::vector<Modality> tags(static_cast<size_t>(text_rows), Modality::kText);
  for (const auto& b : (*j)["vision_blocks"])
    for (int i = 0; i < b[1].get<int>(); ++i) tags[static_cast<size_t>(b[0].get<int>() + i)] = Modality::kVideo;
  VORTEX_ASSIGN_OR_RETURN(c.layout, pack_request(cfg, geo, tags));
  // The keyframe rows: Vortex's mix and patchify of each keyframe's latents and noise, in packed order.
  c.condition_rows = Tensor::empty({geo.condition_rows(), int64_t{cfg.in_channels} * 4}, DType::kF32);
  for (size_t k = 0; k < geo.keyframes.size(); ++k) {
    VORTEX_ASSIGN_OR_RETURN(Tensor lat, c.fx.tensor(name + ".condition_latents." + std::to_string(k)));
    VORTEX_ASSIGN_OR_RETURN(Tensor noise, c.fx.tensor(name + ".condition_noise." + std::to_string(k)));
    VORTEX_ASSIGN_OR_RETURN(Tensor mixed, noise_condition_latents(lat, noise));
    VORTEX_ASSIGN_OR_RETURN(Tensor rows, patchify_video(cfg, mixed));  // [h/2 * w/2, 96] f32
    std::memcpy(static_cast<char*>(c.condition_rows.raw_data()) + k * rows.nbytes(), rows.raw_data(), rows.nbytes());
  }
  VORTEX_ASSIGN_OR_RETURN(Tensor text, c.fx.tensor(name + ".text"));
  VORTEX_RETURN_IF_ERROR(c.model->prepare(c.layout, text, c.condition_rows));
  c.noise.video = c.get("noise_video");
  c.noise.audio = c.get("noise_audio");
  return c;
}

#define SKIP_WITHOUT_BACKEND(result)               \
  do {                                             \
    VORTEX_SKIP_NO_GPU_OR_FAIL((result).status()); \
  } while (0)

class Fl2vaModelParity : public ::testing::TestWithParam<const char*> {};

TEST_P(Fl2vaModelParity, KeyframeRowsBitIdentical) {
  ASSERT_TRUE(meta().is_object()) << "missing " << parity::fixtures_dir() << "/fl2va_model.json";
  auto c = load_case(GetParam());
  SKIP_WITHOUT_BACKEND(c);
  const std::vector<float> want = c->get("condition_rows");
  ASSERT_EQ(static_cast<size_t>(c->condition_rows.numel()), want.size());
  EXPECT_EQ(std::memcmp(c->condition_rows.raw_data(), want.data(), want.size() * 4), 0);
  EXPECT_EQ(c->layout.geo.condition_rows(), find_case(GetParam())->at("condition_rows").get<int64_t>());
  EXPECT_EQ(c->layout.geo.total_rows(), find_case(GetParam())->at("rows").get<int64_t>());
}

TEST_P(Fl2vaModelParity, KeyframeInputRowsAndVelocities) {
  auto c = load_case(GetParam());
  SKIP_WITHOUT_BACKEND(c);
  const auto& forwards = meta()["forwards"];
  ASSERT_EQ(forwards.size(), 2u);
  for (size_t k = 0; k < forwards.size(); ++k) {
    const double tv = forwards[k][0].get<double>(), ta = forwards[k][1].get<double>();
    const std::string f = ".f" + std::to_string(k) + ".";
    // The keyframe rows of the packed input: projected once by prepare(), the same at every step.
    auto x = c->model->embed_inputs(c->noise);
    ASSERT_TRUE(x.ok()) << x.status().to_string();
    Tensor x_host = Tensor::empty(x->shape(), x->dtype());
    ASSERT_TRUE(c->backend->download(*x, x_host).ok());
    const std::vector<float> all_in = values(x_host);  // [S, D]
    const int64_t d = x_host.dim(1);
    const std::vector<float> got_in(all_in.begin() + c->layout.geo.condition_start() * d,
                                    all_in.begin() + c->layout.geo.audio_start() * d);
    const std::vector<float> want_in = c->get("bf16" + f + "condition_in"),
                             want_in32 = c->get("fp32" + f + "condition_in");
    const double in_err = rel_l2(got_in, want_in), in_floor = rel_l2(want_in, want_in32);
    std::printf("[%s %s] t=(%.4f, %.4f) keyframe input rows: rel-L2 %.3e (floor %.3e)\n", VORTEX_PARITY_BACKEND,
                GetParam(), tv, ta, in_err, in_floor);
    EXPECT_LT(in_err, 2.0 * in_floor);

    auto v = c->model->forward(c->noise, 1.0 - tv, 1.0 - ta);
    ASSERT_TRUE(v.ok()) << v.status().to_string();
    for (const char* stream : {"video", "audio"}) {
      const std::vector<float>& got = std::string(stream) == "video" ? v->video : v->audio;
      const std::vector<float> want = c->get("bf16" + f + "velocity_" + stream);
      const std::vector<float> want32 = c->get("fp32" + f + "velocity_" + stream);
      ASSERT_EQ(got.size(), want.size());
      const double err = rel_l2(got, want), floor = rel_l2(want, want32);
      std::printf("[%s %s] t=(%.4f, %.4f) %s velocity: rel-L2 %.3e (floor %.3e)\n", VORTEX_PARITY_BACKEND, GetParam(),
                  tv, ta, stream, err, floor);
      EXPECT_LT(err, 2.0 * floor) << stream << " at forward " << k;
    }
  }
}

TEST_P(Fl2vaModelParity, SixStepTrajectory) {
  auto c = load_case(GetParam());
  SKIP_WITHOUT_BACKEND(c);
  parity::expect_trajectory_within_floor(*c, meta()["steps"].get<int>(),
                                         std::string(VORTEX_PARITY_BACKEND) + " " + GetParam());
}

// The check can fail: the same request with other keyframe rows (noise in place of the keyframe latents) moves the
// video velocity to about 7x the floor, over three times the 2x tolerance.
TEST(PARITY_SUITE(Fl2vaModelParityCheck), KeyframeRowsChangeTheVelocities) {
  auto with = load_case("both");
  SKIP_WITHOUT_BACKEND(with);
  const std::vector<float> want = with->get("bf16.f0.velocity_video"), want32 = with->get("fp32.f0.velocity_video");
  const double floor = rel_l2(want, want32);
  // The same request with the keyframe rows replaced by fresh noise: the conditioning must reach the velocities.
  Tensor copy = Tensor::empty(with->condition_rows.shape(), DType::kF32);
  std::vector<float> fresh = with->get("noise_video");
  for (int64_t i = 0; i < copy.numel(); ++i) copy.data<float>()[i] = fresh[static_cast<size_t>(i) % fresh.size()];
  ASSERT_TRUE(with->model->prepare(with->layout, *with->fx.tensor("both.text"), copy).ok());
  auto v = with->model->forward(with->noise, 1.0, 1.0);
  ASSERT_TRUE(v.ok()) << v.status().to_string();
  const double err = rel_l2(v->video, want);
  std::printf("[%s] other keyframe rows: video velocity rel-L2 %.3e (floor %.3e)\n", VORTEX_PARITY_BACKEND, err, floor);
  EXPECT_GT(err, 4.0 * floor);
  // And a keyframe layout without its rows is refused rather than run with stale ones.
  EXPECT_FALSE(with->model->prepare(with->layout, *with->fx.tensor("both.text")).ok());
}

INSTANTIATE_TEST_SUITE_P(VORTEX_PARITY_PREFIX, Fl2vaModelParity, ::testing::Values("first", "last", "both"),
                         [](const ::testing::TestParamInfo<const char*>& info) { return std::string(info.param); });

}  // namespace
}  // namespace vortex
