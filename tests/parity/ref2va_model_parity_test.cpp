// ref2va through the tiny random H3 of fixtures/model_diffusers against diffusers 0.42.1 (fixtures from
// tests/parity/make_ref2va_model_fixtures.py), for an image, a video with its soundtrack, and an image then an audio
// clip:
//   - the packed layout (FP64 positions, tags) and the row timesteps of two forwards, bit for bit;
//   - the visual reference rows Vortex builds (noise_condition_latents + patchify_video) equal diffusers' bit for bit;
//   - the reference rows of the packed input (video_patch_proj / audio_patch_proj, BF16), the generated rows'
//     velocities at two timestep pairs, and the latents after every step of a 6-step Euler loop in which the
//     reference rows stay as they were (diffusers' MiniMaxH3LoopSchedulerStep never writes them).
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
  Tensor condition_rows;        // [Nvc, 96] f32, built by Vortex from the fixture's latents and noise
  Tensor reference_audio_rows;  // [Nac, 32] f32, the fixture's encoded soundtrack rows (undefined: none)
  Tensor text;
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
  static const nlohmann::json j = parity::read_json("ref2va_model.json");
  return j;
}

const nlohmann::json* find_case(const std::string& name) {
  for (const auto& c : meta()["cases"])
    if (c["name"] == name) return &c;
  return nullptr;
}

ReferenceKind kind_of(const std::string& k) {
  return k == "image" ? ReferenceKind::kImage : k == "video" ? ReferenceKind::kVideo : ReferenceKind::kAudio;
}

Result<Case> load_case(const std::string& name) {
  Case c;
  c.name = name;
  const nlohmann::json* j = find_case(name);
  if (j == nullptr) return not_found("ref2va_model.json has no case " + name);
  VORTEX_ASSIGN_OR_RETURN(c.fx, SafetensorsFile::open(parity::fixtures_dir() + "/ref2va_model.safetensors"));
  VORTEX_ASSIGN_OR_RETURN(c.backend, make_backend(VORTEX_PARITY_BACKEND, 0));
  const std::string path = parity::fixtures_dir() + "/model_diffusers";
  VORTEX_ASSIGN_OR_RETURN(ModelConfig cfg, config_for_checkpoint(path));
  VORTEX_ASSIGN_OR_RETURN(H3Weights w, load_checkpoint(path, cfg, *c.backend, CheckpointLayout::kAuto));
  c.model = std::make_unique<H3Model>(cfg, *c.backend, std::move(w), c.backend->default_options());
  const int64_t text_rows = (*j)["text_rows"].get<int64_t>();
  VORTEX_ASSIGN_OR_RETURN(RequestGeometry geo,
                          make_geometry(cfg, meta()["width"].get<int>(), meta()["height"].get<int>(),
                                        meta()["frames"].get<int>(), text_rows));
  for (const auto& r : (*j)["references"]) {
    ReferenceBlock b;
    b.kind = kind_of(r["kind"].get<std::string>());
    b.latent_frames = r["latent_frames"].get<int>();
    b.latent_h = r["latent_h"].get<int>();
    b.latent_w = r["latent_w"].get<int>();
    b.audio_latents = r["audio_latents"].get<int>();
    geo.references.push_back(b);
  }
  std::vector<Modality> tags(static_cast<size_t>(text_rows), Modality::kText);
  for (const auto& b : (*j)["vision_blocks"])
    for (int i = 0; i < b[1].get<int>(); ++i) tags[static_cast<size_t>(b[0].get<int>() + i)] = Modality::kVideo;
  VORTEX_ASSIGN_OR_RETURN(c.layout, pack_request(cfg, geo, tags));
  // The visual reference rows: Vortex's mix and patchify of each image / video reference's latents and noise, in
  // packed order.
  int64_t nvc = 0, nac = 0;
  for (const ReferenceBlock& r : geo.references) nvc += r.video_rows(), nac += r.audio_rows();
  c.condition_rows = Tensor::empty({nvc, int64_t{cfg.in_channels} * 4}, DType::kF32);
  size_t off = 0, visual = 0;
  for (const ReferenceBlock& r : geo.references) {
    if (r.kind == ReferenceKind::kAudio) continue;
    VORTEX_ASSIGN_OR_RETURN(Tensor lat, c.fx.tensor(name + ".condition_latents." + std::to_string(visual)));
    VORTEX_ASSIGN_OR_RETURN(Tensor noise, c.fx.tensor(name + ".condition_noise." + std::to_string(visual)));
    ++visual;
    VORTEX_ASSIGN_OR_RETURN(Tensor mixed, noise_condition_latents(lat, noise));
    VORTEX_ASSIGN_OR_RETURN(Tensor rows, patchify_video(cfg, mixed));  // [T * h/2 * w/2, 96] f32
    std::memcpy(static_cast<char*>(c.condition_rows.raw_data()) + off, rows.raw_data(), rows.nbytes());
    off += rows.nbytes();
  }
  if (nac > 0) {
    VORTEX_ASSIGN_OR_RETURN(c.reference_audio_rows, c.fx.tensor(name + ".audio_condition"));
  }
  VORTEX_ASSIGN_OR_RETURN(c.text, c.fx.tensor(name + ".text"));
  VORTEX_RETURN_IF_ERROR(c.model->prepare(c.layout, c.text, c.condition_rows, c.reference_audio_rows));
  c.noise.video = c.get("noise_video");
  c.noise.audio = c.get("noise_audio");
  return c;
}

#define SKIP_WITHOUT_BACKEND(result)               \
  do {                                             \
    VORTEX_SKIP_NO_GPU_OR_FAIL((result).status()); \
  } while (0)

class Ref2vaModelParity : public ::testing::TestWithParam<const char*> {};

TEST_P(Ref2vaModelParity, LayoutAndReferenceRowsBitIdentical) {
  ASSERT_TRUE(meta().is_object()) << "missing " << parity::fixtures_dir() << "/ref2va_model.json";
  auto c = load_case(GetParam());
  SKIP_WITHOUT_BACKEND(c);
  const nlohmann::json& j = *find_case(GetParam());
  EXPECT_EQ(c->layout.geo.total_rows(), j.at("rows").get<int64_t>());
  // Positions [S, 3] f64 and tags [S] i64 of build_ref2va_packed_sequence.
  auto pos = c->fx.tensor(c->name + ".position_ids");
  auto tags = c->fx.tensor(c->name + ".token_tags");
  ASSERT_TRUE(pos.ok() && tags.ok());
  ASSERT_EQ(pos->numel(), c->layout.geo.total_rows() * 3);
  EXPECT_EQ(std::memcmp(pos->raw_data(), c->layout.positions.data(), static_cast<size_t>(pos->nbytes())), 0);
  int64_t tag_mismatches = 0;
  for (int64_t i = 0; i < tags->numel(); ++i)
    tag_mismatches += tags->data<int64_t>()[i] != static_cast<int64_t>(c->layout.modality[static_cast<size_t>(i)]);
  EXPECT_EQ(tag_mismatches, 0);
  // The visual reference rows, noised and patchified.
  const std::vector<float> want = c->get("condition_rows");
  ASSERT_EQ(static_cast<size_t>(c->condition_rows.numel()), want.size());
  EXPECT_EQ(std::memcmp(c->condition_rows.raw_data(), want.data(), want.size() * 4), 0);
  EXPECT_EQ(c->condition_rows.dim(0), j.at("condition_video_rows").get<int64_t>());
  EXPECT_EQ(c->reference_audio_rows.defined() ? c->reference_audio_rows.dim(0) : 0,
            j.at("condition_audio_rows").get<int64_t>());
}

TEST_P(Ref2vaModelParity, RowTimestepsBitIdentical) {
  auto c = load_case(GetParam());
  SKIP_WITHOUT_BACKEND(c);
  const auto& forwards = meta()["forwards"];
  for (size_t k = 0; k < forwards.size(); ++k) {
    const double tv = forwards[k][0].get<double>(), ta = forwards[k][1].get<double>();
    auto st = c->model->make_step_tables(1.0 - tv, 1.0 - ta);
    ASSERT_TRUE(st.ok()) << st.status().to_string();
    auto want_t = c->fx.tensor(c->name + ".f" + std::to_string(k) + ".timesteps");
    auto want_i = c->fx.tensor(c->name + ".f" + std::to_string(k) + ".timestep_indices");
    ASSERT_TRUE(want_t.ok() && want_i.ok());
    ASSERT_EQ(static_cast<size_t>(want_t->numel()), st->timesteps.size()) << "forward " << k;
    EXPECT_EQ(std::memcmp(want_t->raw_data(), st->timesteps.data(), st->timesteps.size() * 4), 0);
    // The final layer's table row of each packed row is its timestep slot (build_row_timesteps' inverse index).
    int64_t mismatches = 0;
    for (int64_t r = 0; r < want_i->numel(); ++r)
      mismatches += st->final_segments.row_of(r) != want_i->data<int64_t>()[r];
    EXPECT_EQ(mismatches, 0) << "forward " << k;
    // And each block row's modality part is the row's tag.
    for (int64_t r = 0; r < want_i->numel(); ++r)
      ASSERT_EQ(st->block_segments.row_of(r), want_i->data<int64_t>()[r] * kNumModalities +
                                                  static_cast<int>(c->layout.modality[static_cast<size_t>(r)]));
  }
}

TEST_P(Ref2vaModelParity, ReferenceInputRowsAndVelocities) {
  auto c = load_case(GetParam());
  SKIP_WITHOUT_BACKEND(c);
  const auto& forwards = meta()["forwards"];
  ASSERT_EQ(forwards.size(), 2u);
  for (size_t k = 0; k < forwards.size(); ++k) {
    const double tv = forwards[k][0].get<double>(), ta = forwards[k][1].get<double>();
    const std::string f = ".f" + std::to_string(k) + ".";
    // The reference rows of the packed input: projected once by prepare(), the same at every step.
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
    ASSERT_EQ(got_in.size(), want_in.size());
    const double in_err = rel_l2(got_in, want_in), in_floor = rel_l2(want_in, want_in32);
    std::printf("[%s %s] t=(%.4f, %.4f) reference input rows: rel-L2 %.3e (floor %.3e)\n", VORTEX_PARITY_BACKEND,
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

TEST_P(Ref2vaModelParity, SixStepTrajectory) {
  auto c = load_case(GetParam());
  SKIP_WITHOUT_BACKEND(c);
  parity::expect_trajectory_within_floor(*c, meta()["steps"].get<int>(),
                                         std::string(VORTEX_PARITY_BACKEND) + " " + GetParam());
}

// The check can fail: the same request with other reference rows (noise in place of the image's latents, or the
// soundtrack's rows scaled) moves the velocities well past the 2x tolerance.
TEST(PARITY_SUITE(Ref2vaModelParityCheck), ReferenceRowsChangeTheVelocities) {
  auto c = load_case("image_audio");
  SKIP_WITHOUT_BACKEND(c);
  const std::vector<float> want = c->get("bf16.f0.velocity_audio"), want32 = c->get("fp32.f0.velocity_audio");
  const double floor = rel_l2(want, want32);
  // Only the reference audio rows change: the conditioning soundtrack must reach the generated audio's velocity.
  Tensor other = Tensor::empty(c->reference_audio_rows.shape(), DType::kF32);
  for (int64_t i = 0; i < other.numel(); ++i) other.data<float>()[i] = -c->reference_audio_rows.data<float>()[i];
  ASSERT_TRUE(c->model->prepare(c->layout, c->text, c->condition_rows, other).ok());
  auto v = c->model->forward(c->noise, 1.0, 1.0);
  ASSERT_TRUE(v.ok()) << v.status().to_string();
  const double err = rel_l2(v->audio, want);
  std::printf("[%s] other reference audio rows: audio velocity rel-L2 %.3e (floor %.3e)\n", VORTEX_PARITY_BACKEND, err,
              floor);
  EXPECT_GT(err, 4.0 * floor);
  // The reference audio rows at the audio slot instead of their own t = 1.0 slot would be another program: the
  // step's timesteps hold 1.0 at t_audio = 0.
  auto st = c->model->make_step_tables(1.0, 1.0);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->timesteps.back(), 1.0f);
  EXPECT_EQ(st->timesteps.size(), 3u);  // 0 (video and audio), 0.999 (the image), 1.0 (the audio clip)
  // And a reference layout without its rows is refused rather than run with stale ones.
  EXPECT_FALSE(c->model->prepare(c->layout, c->text, c->condition_rows).ok());
  EXPECT_FALSE(c->model->prepare(c->layout, c->text, Tensor(), c->reference_audio_rows).ok());
}

INSTANTIATE_TEST_SUITE_P(VORTEX_PARITY_PREFIX, Ref2vaModelParity,
                         ::testing::Values("image", "video_sound", "image_audio"),
                         [](const ::testing::TestParamInfo<const char*>& info) { return std::string(info.param); });

}  // namespace
}  // namespace vortex
