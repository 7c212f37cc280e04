// The sigma and timestep tables of both schedules, bit for bit against the references' own arithmetic:
// diffusers' MiniMaxH3Scheduler (fixtures/schedules.json "diffusers": every step count 1..40, 50, 64, 100,
// 250, 1000 and 999 at shifts 12, 3, 6, 1) and ComfyUI's ModelSamplingDiscreteFlow + simple scheduler with
// the ModelSamplingAV audio map, evaluated by torch on float32 tensors ("comfyui", shifts 12 and 6). And the
// Euler update of diffusers' loop: fed diffusers' own velocities, every step's latents are bit-identical.
#include <gtest/gtest.h>

#include <cstring>

#include "io/safetensors.h"
#include "parity/parity_fixtures.h"
#include "sampler/sampler.h"

namespace vortex {
namespace {

uint32_t bits(float x) {
  uint32_t b;
  std::memcpy(&b, &x, 4);
  return b;
}

// Compares a table of float32 values (widened to double) with the fixture's bit patterns; returns the
// number of differing entries (every difference is also reported).
int compare(const std::vector<double>& got, const std::vector<uint32_t>& want, const std::string& what) {
  EXPECT_EQ(got.size(), want.size()) << what;
  int bad = 0;
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    const float g = static_cast<float>(got[i]);
    EXPECT_EQ(static_cast<double>(g), got[i]) << what << " [" << i << "] is not a float32 value";
    if (bits(g) != want[i]) {
      ++bad;
      ADD_FAILURE() << what << " [" << i << "]: got 0x" << std::hex << bits(g) << " want 0x" << want[i];
    }
  }
  return bad;
}

TEST(ScheduleParity, DiffusersSigmasAndTimestepsBitIdentical) {
  const nlohmann::json j = parity::read_json("schedules.json");
  ASSERT_TRUE(j.is_object()) << "missing " << parity::fixtures_dir() << "/schedules.json";
  ASSERT_GE(j["diffusers"].size(), 150u);
  int tables = 0;
  for (const auto& e : j["diffusers"]) {
    const int steps = e["steps"].get<int>();
    const double shift = e["shift"].get<double>();
    const std::string what = "diffusers steps " + std::to_string(steps) + " shift " + std::to_string(shift);
    const std::vector<double> sig = sigmas_diffusers(steps, shift);
    EXPECT_EQ(compare(sig, parity::hex_words(e["sigmas"].get<std::string>()), what + " sigmas"), 0);
    const std::vector<float> t = timesteps_from_sigmas_f32(sig);
    std::vector<double> t64(t.begin(), t.end());
    EXPECT_EQ(compare(t64, parity::hex_words(e["timesteps"].get<std::string>()), what + " timesteps"), 0);
    ++tables;
  }
  std::printf("diffusers: %d sigma + timestep tables bit-identical (torch %s, %s)\n", tables,
              j["torch"].get<std::string>().c_str(), j["cpu_capability"].get<std::string>().c_str());
}

TEST(ScheduleParity, ComfyuiVideoAndAudioSigmasBitIdentical) {
  const nlohmann::json j = parity::read_json("schedules.json");
  ASSERT_TRUE(j.is_object());
  ASSERT_GE(j["comfyui"].size(), 80u);
  for (const auto& e : j["comfyui"]) {
    const int steps = e["steps"].get<int>();
    const double shift = e["shift"].get<double>(), audio_shift = e["audio_shift"].get<double>();
    const std::string what = "comfyui steps " + std::to_string(steps) + " shift " + std::to_string(shift);
    SamplerSpec spec;
    spec.mode = AvScheduleMode::kComfyParity;
    spec.steps = steps;
    spec.video_shift = shift;
    spec.audio_shift = audio_shift;
    auto sched = make_av_schedule(spec);
    ASSERT_TRUE(sched.ok()) << sched.status().to_string();
    EXPECT_EQ(compare(sched->sigma_video, parity::hex_words(e["sigmas"].get<std::string>()), what + " video"), 0);
    EXPECT_EQ(compare(sched->sigma_audio, parity::hex_words(e["audio_sigmas"].get<std::string>()), what + " audio"), 0);
  }
}

TEST(ScheduleParity, AvScheduleUsesTheDiffusersTablesPerStream) {
  SamplerSpec spec;
  spec.mode = AvScheduleMode::kDiffusers;
  spec.steps = 12;
  auto sched = make_av_schedule(spec);
  ASSERT_TRUE(sched.ok());
  EXPECT_EQ(sched->sigma_video, sigmas_diffusers(12, 12.0));
  EXPECT_EQ(sched->sigma_audio, sigmas_diffusers(12, 3.0));
}

TEST(ScheduleParity, DiffusersLoopArithmeticBitIdentical) {
  // fixtures/trajectory.safetensors holds, for each of the 12 steps of diffusers' loop, the BF16 model's
  // velocities and the latents MiniMaxH3Scheduler.step made of them. Replaying those velocities through
  // sample_av (diffusers mode, Euler) must reproduce every step's latents bit for bit.
  auto traj = SafetensorsFile::open(parity::fixtures_dir() + "/trajectory.safetensors");
  auto fwd = SafetensorsFile::open(parity::fixtures_dir() + "/forward.safetensors");
  ASSERT_TRUE(traj.ok() && fwd.ok()) << "missing trajectory/forward fixtures in " << parity::fixtures_dir();
  auto floats = [](SafetensorsFile& f, const std::string& name) {
    Tensor t = f.tensor(name).value();
    return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
  };
  AvLatents noise{floats(*fwd, "noise_video"), floats(*fwd, "noise_audio")};
  SamplerSpec spec;
  spec.kind = SamplerKind::kEuler;
  spec.mode = AvScheduleMode::kDiffusers;
  spec.steps = 12;
  std::vector<AvLatents> seen;
  auto out = sample_av(spec, noise, [&](const AvLatents& x, double, double, int step) -> Result<AvLatents> {
    seen.push_back(x);
    const std::string p = "bf16.step" + std::to_string(step) + ".velocity_";
    return AvLatents{floats(*traj, p + "video"), floats(*traj, p + "audio")};
  });
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  seen.push_back(*out);
  ASSERT_EQ(seen.size(), 13u);
  EXPECT_EQ(std::memcmp(seen[0].video.data(), noise.video.data(), noise.video.size() * 4), 0);
  for (int i = 0; i < 12; ++i) {
    const std::string p = "bf16.step" + std::to_string(i) + ".latents_";
    const std::vector<float> want_v = floats(*traj, p + "video"), want_a = floats(*traj, p + "audio");
    const AvLatents& got = seen[static_cast<size_t>(i) + 1];
    ASSERT_EQ(got.video.size(), want_v.size());
    ASSERT_EQ(got.audio.size(), want_a.size());
    size_t bad_v = 0, bad_a = 0;
    for (size_t k = 0; k < want_v.size(); ++k) bad_v += bits(got.video[k]) != bits(want_v[k]);
    for (size_t k = 0; k < want_a.size(); ++k) bad_a += bits(got.audio[k]) != bits(want_a[k]);
    EXPECT_EQ(bad_v, 0u) << "video latents after step " << i + 1 << ": " << bad_v << " of " << want_v.size()
                         << " differ";
    EXPECT_EQ(bad_a, 0u) << "audio latents after step " << i + 1 << ": " << bad_a << " of " << want_a.size()
                         << " differ";
  }
}

TEST(ScheduleParity, TorchLinspaceKernel) {
  // Spot values of torch.linspace(1, 0, n) float32 that the two-rounding form start + f32(step * i) gets
  // wrong (n = 10, i = 3: 0x3f2aaaab, not 0x3f2aaaaa); the fixture tables cover the rest.
  const std::vector<float> l = torch_linspace_f32(1.0f, 0.0f, 10);
  ASSERT_EQ(l.size(), 10u);
  EXPECT_EQ(bits(l[3]), 0x3f2aaaabu);
  EXPECT_EQ(l.front(), 1.0f);
  EXPECT_EQ(l.back(), 0.0f);
  EXPECT_EQ(torch_linspace_f32(1.0f, 0.0f, 1), std::vector<float>{1.0f});
  EXPECT_TRUE(torch_linspace_f32(1.0f, 0.0f, 0).empty());
}

}  // namespace
}  // namespace vortex
