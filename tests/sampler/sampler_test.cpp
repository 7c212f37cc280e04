// Tests for src/sampler: sigma tables against research §4.4 (ComfyUI simple s=12, diffusers s=12 and s=3,
// Turbo-4), res_multistep coefficients on the diffusers grid, analytic exactness (a denoiser returning the
// exact velocity of a known x0 must land on x0), ComfyUI-parity vs standalone audio Euler equivalence, and
// argument errors. Random inputs are seeded from std::random_device; the seed is printed on failure.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "sampler/sampler.h"

namespace vortex {
namespace {

constexpr double kFiveDecimals = 5e-6;

void expect_table(const std::vector<double>& got, const std::vector<double>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    // Research values are printed rounded to 5 decimals (trailing zeros dropped).
    EXPECT_NEAR(got[i], want[i], kFiveDecimals) << what << " index " << i;
  }
}

TEST(SigmaSchedule, ComfySimpleShift12Matches) {
  expect_table(sigmas_comfy_simple(12, 12.0),
               {1.0, .99251, .98368, .97297, .96006, .94397, .92308, .89565, .85751, .8, .70638, .52391, 0.0},
               "comfy simple s=12");
}

TEST(SigmaSchedule, ComfySimpleIsFloat32Grid) {
  // Every returned sigma must be an exact float32 value (ComfyUI's grid is a float32 tensor).
  for (double s : sigmas_comfy_simple(12, 12.0)) EXPECT_EQ(s, static_cast<double>(static_cast<float>(s)));
  // And each must be within 2 float32 ulps of the FP64 shift of the same grid point k/1000.
  const auto sig = sigmas_comfy_simple(12, 12.0);
  for (int i = 0; i < 12; ++i) {
    const int k = 1000 - (i * 1000) / 12;
    const float want = static_cast<float>(flow_shift(k / 1000.0, 12.0));
    EXPECT_NEAR(sig[static_cast<size_t>(i)], want, 2.0 * std::nextafter(want, 2.0f) - 2.0 * want) << i;
  }
}

TEST(SigmaSchedule, DiffusersLinspaceMatches) {
  expect_table(sigmas_diffusers(12, 12.0),
               {1.0, .99248, .98361, .97297, .96, .94382, .92308, .89552, .85714, .8, .70588, .52174, 0.0},
               "diffusers s=12");
  expect_table(sigmas_diffusers(12, 3.0),
               {1.0, .97059, .9375, .9, .85714, .80769, .75, .68182, .6, .5, .375, .21429, 0.0}, "diffusers s=3");
}

TEST(SigmaSchedule, Turbo4) {
  const SamplerSpec spec = SamplerSpec::turbo4();
  EXPECT_EQ(spec.steps, 4);
  EXPECT_EQ(spec.video_shift, 6.0);
  EXPECT_EQ(spec.audio_shift, 3.0);
  EXPECT_EQ(spec.kind, SamplerKind::kEuler);
  EXPECT_EQ(spec.mode, AvScheduleMode::kComfyParity);
  auto sched = make_av_schedule(spec);
  ASSERT_TRUE(sched.ok()) << sched.status().to_string();
  expect_table(sched->sigma_video, {1.0, .94737, .85714, .66667, 0.0}, "turbo4 video");
  expect_table(sched->sigma_audio, {1.0, .9, .75, .5, 0.0}, "turbo4 audio");
}

TEST(SigmaSchedule, AudioSigmaFromVideoInvertsShift) {
  for (double b : {0.0, 0.1, 0.37, 0.5, 0.9, 1.0}) {
    const double sv = flow_shift(b, 12.0);
    EXPECT_NEAR(audio_sigma_from_video(sv, 12.0, 3.0), flow_shift(b, 3.0), 1e-15) << "base " << b;
  }
}

TEST(ResMultistep, CoefficientsOnDiffusersGrid) {
  const auto sv = sigmas_diffusers(12, 12.0);
  // Step 10 (research §4.4).
  const ResCoefficients c10 = res_multistep_coefficients(sv[9], sv[10], sv[11]);
  EXPECT_NEAR(c10.exp_neg_h, 0.73913, kFiveDecimals);
  EXPECT_NEAR(c10.h * c10.b1, 0.59173, kFiveDecimals);
  EXPECT_NEAR(c10.h * c10.b2, -0.33086, kFiveDecimals);
  EXPECT_NEAR(c10.h, 0.3023, 5e-5);
  EXPECT_NEAR(c10.c2, -0.4141, 5e-5);
  const ResCoefficients c1 = res_multistep_coefficients(sv[0], sv[1], sv[2]);
  EXPECT_NEAR(c1.h, 0.0090, 5e-5);
  // Research §4.4 derives -0.8402 on the FP64 grid; near sigma = 1 the float32 table moves each sigma by
  // up to an ulp (6e-8) while h is only 0.009, so c2 moves by ~1e-4 (-0.84026 here).
  EXPECT_NEAR(c1.c2, -0.8402, 2e-4);
  double prev_h = 0.0;
  for (size_t i = 1; i <= 10; ++i) {
    const ResCoefficients c = res_multistep_coefficients(sv[i - 1], sv[i], sv[i + 1]);
    EXPECT_GT(c.h, prev_h) << "h must grow, step " << i;
    prev_h = c.h;
    EXPECT_LT(c.c2, -0.41) << i;
    EXPECT_GT(c.c2, -0.85) << i;
    // h (b1 + b2) == 1 - e^{-h}: the RES step is the Euler blend plus an extrapolation.
    EXPECT_NEAR(c.h * (c.b1 + c.b2), -std::expm1(-c.h), 1e-15) << i;
  }
}

TEST(ResMultistep, PhiFunctionsStableForTinyAndLargeSteps) {
  // Tiny h (dense grids) must still satisfy the identity and give finite coefficients.
  for (double h : {1e-12, 1e-8, 1e-4, 0.05, 0.099, 0.1, 0.101, 1.0, 5.0}) {
    const double sigma = 0.5;
    const double sigma_next = sigma * std::exp(-h);
    const double sigma_prev = sigma * std::exp(0.7 * h);
    const ResCoefficients c = res_multistep_coefficients(sigma_prev, sigma, sigma_next);
    ASSERT_TRUE(std::isfinite(c.b1) && std::isfinite(c.b2)) << "h " << h;
    EXPECT_NEAR(c.h * (c.b1 + c.b2), -std::expm1(-c.h), 1e-14 * std::max(1.0, c.h)) << "h " << h;
    // b2 = phi2(-h)/c2 with phi2(0) = 1/2 and c2 = -0.7.
    if (h < 1e-3) {
      EXPECT_NEAR(c.b2, 0.5 / (-0.7), 1e-3) << "h " << h;
    }
  }
}

// Denoiser that returns the exact data-ward velocity of a fixed x0: v = (x0 - x)/sigma.
struct ExactDenoiser {
  std::vector<float> x0_video, x0_audio;
  std::vector<double> seen_sigma_v, seen_sigma_a;
  Result<AvLatents> operator()(const AvLatents& x, double sv, double sa, int) {
    seen_sigma_v.push_back(sv);
    seen_sigma_a.push_back(sa);
    AvLatents v;
    v.video.resize(x.video.size());
    v.audio.resize(x.audio.size());
    for (size_t i = 0; i < x.video.size(); ++i) v.video[i] = static_cast<float>((x0_video[i] - x.video[i]) / sv);
    for (size_t i = 0; i < x.audio.size(); ++i) v.audio[i] = static_cast<float>((x0_audio[i] - x.audio[i]) / sa);
    return v;
  }
};

std::vector<float> random_vector(std::mt19937& rng, size_t n) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

TEST(SampleAv, ExactVelocityLandsOnX0AllModes) {
  const unsigned seed = std::random_device{}();
  std::mt19937 rng(seed);
  for (SamplerKind kind : {SamplerKind::kEuler, SamplerKind::kResMultistep}) {
    for (AvScheduleMode mode : {AvScheduleMode::kComfyParity, AvScheduleMode::kDiffusers}) {
      for (int steps : {1, 2, 4, 12}) {
        SamplerSpec spec;
        spec.kind = kind;
        spec.mode = mode;
        spec.steps = steps;
        ExactDenoiser den;
        den.x0_video = random_vector(rng, 257);
        den.x0_audio = random_vector(rng, 64);
        AvLatents noise{random_vector(rng, 257), random_vector(rng, 64)};
        int callbacks = 0;
        auto out = sample_av(
            spec, noise, [&](const AvLatents& x, double sv, double sa, int i) { return den(x, sv, sa, i); },
            [&](int, int total) {
              ++callbacks;
              EXPECT_EQ(total, steps);
            });
        ASSERT_TRUE(out.ok()) << out.status().to_string();
        EXPECT_EQ(callbacks, steps);
        ASSERT_EQ(den.seen_sigma_v.size(), static_cast<size_t>(steps));
        EXPECT_EQ(den.seen_sigma_v[0], 1.0);
        EXPECT_NEAR(den.seen_sigma_a[0], 1.0, 1e-15);
        double max_err = 0.0;
        for (size_t i = 0; i < den.x0_video.size(); ++i)
          max_err = std::max(max_err, static_cast<double>(std::fabs(out->video[i] - den.x0_video[i])));
        for (size_t i = 0; i < den.x0_audio.size(); ++i)
          max_err = std::max(max_err, static_cast<double>(std::fabs(out->audio[i] - den.x0_audio[i])));
        EXPECT_LT(max_err, 1e-5) << "seed " << seed << " kind " << sampler_kind_name(kind) << " mode "
                                 << static_cast<int>(mode) << " steps " << steps;
      }
    }
  }
}

TEST(SampleAv, ParityModeIntermediateStatesAreFlowStates) {
  // With the exact denoiser every intermediate x_a the model sees must be (1-sa) x0 + sa n (first-order
  // steps are exact for a straight flow); checks the y <-> x_a carry of ComfyUI-parity mode.
  const unsigned seed = std::random_device{}();
  std::mt19937 rng(seed);
  SamplerSpec spec;
  spec.kind = SamplerKind::kEuler;
  spec.steps = 12;
  std::vector<float> x0v = random_vector(rng, 33), x0a = random_vector(rng, 40);
  AvLatents noise{random_vector(rng, 33), random_vector(rng, 40)};
  double max_err = 0.0;
  auto out = sample_av(spec, noise, [&](const AvLatents& x, double sv, double sa, int) -> Result<AvLatents> {
    AvLatents v;
    for (size_t i = 0; i < x.audio.size(); ++i) {
      const double want = (1.0 - sa) * x0a[i] + sa * noise.audio[i];
      max_err = std::max(max_err, std::fabs(x.audio[i] - want));
      v.audio.push_back(static_cast<float>((x0a[i] - x.audio[i]) / sa));
    }
    for (size_t i = 0; i < x.video.size(); ++i) {
      const double want = (1.0 - sv) * x0v[i] + sv * noise.video[i];
      max_err = std::max(max_err, std::fabs(x.video[i] - want));
      v.video.push_back(static_cast<float>((x0v[i] - x.video[i]) / sv));
    }
    return v;
  });
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_LT(max_err, 2e-6) << "seed " << seed;
}

TEST(SampleAv, ParityEulerAudioEqualsStandaloneEulerOnMappedGrid) {
  // Research §4.3 (i): first-order steps on the carried y are identical to stepping x_a on its own grid
  // sigma_a = g(sigma_v). Use a nonlinear denoiser so the trajectory is not trivially straight.
  const unsigned seed = std::random_device{}();
  std::mt19937 rng(seed);
  SamplerSpec spec;
  spec.kind = SamplerKind::kEuler;
  spec.mode = AvScheduleMode::kComfyParity;
  spec.steps = 12;
  auto sched = make_av_schedule(spec);
  ASSERT_TRUE(sched.ok());
  const size_t n = 50;
  AvLatents noise{random_vector(rng, 8), random_vector(rng, n)};
  auto velocity = [](float x, double sigma) { return static_cast<float>(std::tanh(x) * (1.0 + sigma) - 0.3 * x); };
  std::vector<std::vector<float>> seen;
  auto out = sample_av(spec, noise, [&](const AvLatents& x, double, double sa, int) -> Result<AvLatents> {
    seen.push_back(x.audio);
    AvLatents v;
    v.video.assign(x.video.size(), 0.5f);
    for (float xa : x.audio) v.audio.push_back(velocity(xa, sa));
    return v;
  });
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  // Standalone Euler blend x <- r x + (1-r)(x + sa v) on the mapped audio grid, in FP64.
  std::vector<double> xa(noise.audio.begin(), noise.audio.end());
  double max_err = 0.0;
  for (int i = 0; i < spec.steps; ++i) {
    const double sa = sched->sigma_audio[static_cast<size_t>(i)];
    const double sa_next = sched->sigma_audio[static_cast<size_t>(i) + 1];
    for (size_t j = 0; j < n; ++j) {
      max_err = std::max(max_err, std::fabs(seen[static_cast<size_t>(i)][j] - xa[j]) / (1.0 + std::fabs(xa[j])));
      const double d = xa[j] + sa * velocity(static_cast<float>(xa[j]), sa);
      const double r = sa_next / sa;
      xa[j] = r * xa[j] + (1.0 - r) * d;
    }
  }
  for (size_t j = 0; j < n; ++j)
    max_err = std::max(max_err, std::fabs(out->audio[j] - xa[j]) / (1.0 + std::fabs(xa[j])));
  EXPECT_LT(max_err, 2e-5) << "seed " << seed;
}

TEST(SampleAv, DiffusersModeStreamsUseOwnGrids) {
  // diffusers mode: video and audio are each evaluated on their own linspace grid (s=12 / s=3).
  SamplerSpec spec;
  spec.kind = SamplerKind::kEuler;
  spec.mode = AvScheduleMode::kDiffusers;
  spec.steps = 12;
  std::vector<double> sa_seen, sv_seen;
  AvLatents noise{std::vector<float>(4, 1.0f), std::vector<float>(4, -1.0f)};
  auto out = sample_av(spec, noise, [&](const AvLatents& x, double sv, double sa, int) -> Result<AvLatents> {
    sv_seen.push_back(sv);
    sa_seen.push_back(sa);
    AvLatents v{std::vector<float>(x.video.size(), 0.25f), std::vector<float>(x.audio.size(), 0.25f)};
    return v;
  });
  ASSERT_TRUE(out.ok());
  const auto want_v = sigmas_diffusers(12, 12.0);
  const auto want_a = sigmas_diffusers(12, 3.0);
  for (size_t i = 0; i < 12; ++i) {
    EXPECT_EQ(sv_seen[i], want_v[i]);
    EXPECT_EQ(sa_seen[i], want_a[i]);
  }
}

TEST(SampleAv, ResMultistepDiffersFromEulerForCurvedTrajectory) {
  // The second-order term must actually act: with a non-linear denoiser Euler and RES disagree.
  const unsigned seed = std::random_device{}();
  std::mt19937 rng(seed);
  AvLatents noise{random_vector(rng, 16), random_vector(rng, 16)};
  auto den = [](const AvLatents& x, double sv, double sa, int) -> Result<AvLatents> {
    AvLatents v;
    for (float a : x.video) v.video.push_back(static_cast<float>(std::sin(3.0 * a) * sv - a));
    for (float a : x.audio) v.audio.push_back(static_cast<float>(std::cos(2.0 * a) * sa - a));
    return v;
  };
  SamplerSpec e;
  e.kind = SamplerKind::kEuler;
  SamplerSpec r;
  r.kind = SamplerKind::kResMultistep;
  auto oe = sample_av(e, noise, den);
  auto orr = sample_av(r, noise, den);
  ASSERT_TRUE(oe.ok() && orr.ok());
  double diff = 0.0;
  for (size_t i = 0; i < 16; ++i) diff = std::max(diff, static_cast<double>(std::fabs(oe->video[i] - orr->video[i])));
  EXPECT_GT(diff, 1e-4) << "seed " << seed;
}

// Golden trajectories from tests/sampler/comfy_res_multistep_golden.py, an FP64 numpy transcription of
// ComfyUI's simple scheduler, res_multistep / Euler, ModelSamplingAV audio carry and CONST denoised (and of
// the diffusers mode on FP64 linspace grids), with the same fixed analytic denoiser as below. Our FP32
// trajectories must agree to FP32 accumulation noise.
struct GoldenCase {
  AvScheduleMode mode;
  SamplerKind kind;
  int steps;
  double video_shift;
  double video[6];
  double audio[6];
};

TEST(SampleAv, MatchesComfyTranscription) {
  const GoldenCase cases[] = {
      {AvScheduleMode::kComfyParity,
       SamplerKind::kEuler,
       12,
       12.0,
       {0.764110897, 1.86445392, 2.2592507, 2.41780542, 1.42019482, -1.4776268},
       {0.935430895, 0.911493953, 0.726397069, 0.512342123, -0.0696828656, -0.717640258}},
      {AvScheduleMode::kComfyParity,
       SamplerKind::kEuler,
       4,
       6.0,
       {0.737781363, 1.91392119, 2.34023845, 2.50720813, 1.42688351, -1.50974092},
       {0.949324828, 0.93182875, 0.791620077, 0.615199454, 0.053220348, -0.656347249}},
      {AvScheduleMode::kComfyParity,
       SamplerKind::kResMultistep,
       12,
       12.0,
       {0.786032397, 1.85556174, 2.23609072, 2.39073908, 1.42997277, -1.47336826},
       {0.931785579, 0.903962019, 0.69230961, 0.457474518, -0.131020221, -0.742743377}},
      {AvScheduleMode::kComfyParity,
       SamplerKind::kResMultistep,
       4,
       6.0,
       {0.762998883, 1.9173172, 2.32631331, 2.48800338, 1.44805954, -1.51533227},
       {0.95353583, 0.930869906, 0.755422874, 0.55477572, 0.00627562778, -0.65101265}},
      {AvScheduleMode::kDiffusers,
       SamplerKind::kEuler,
       12,
       12.0,
       {0.764174937, 1.86378898, 2.2583738, 2.41687687, 1.41987232, -1.4771482},
       {0.935389533, 0.911448206, 0.726319767, 0.512234353, -0.0698326581, -0.717765387}},
      {AvScheduleMode::kDiffusers,
       SamplerKind::kResMultistep,
       12,
       12.0,
       {0.786383757, 1.85470533, 2.23479754, 2.38932993, 1.42973883, -1.47278094},
       {0.932320689, 0.904946676, 0.696384699, 0.464040406, -0.123357652, -0.739268846}},
      {AvScheduleMode::kDiffusers,
       SamplerKind::kResMultistep,
       4,
       6.0,
       {0.762998887, 1.91731719, 2.3263133, 2.48800337, 1.44805954, -1.51533227},
       {0.953191205, 0.930963924, 0.758565828, 0.560115302, 0.0105047627, -0.651451026}},
  };
  auto noise = [](double salt) {
    std::vector<float> v(6);
    for (int i = 0; i < 6; ++i)
      v[static_cast<size_t>(i)] = static_cast<float>(std::sin(0.7 * i + salt) * 1.3 + 0.2 * std::cos(1.9 * i));
    return v;
  };
  for (const GoldenCase& gc : cases) {
    SamplerSpec spec;
    spec.mode = gc.mode;
    spec.kind = gc.kind;
    spec.steps = gc.steps;
    spec.video_shift = gc.video_shift;
    spec.audio_shift = 3.0;
    auto out = sample_av(spec, AvLatents{noise(0.0), noise(1.0)},
                         [](const AvLatents& x, double sv, double sa, int) -> Result<AvLatents> {
                           AvLatents v;
                           for (float a : x.video)
                             v.video.push_back(static_cast<float>(std::tanh(a) * (1.0 + sv) - 0.3 * a + 0.1));
                           for (float a : x.audio) v.audio.push_back(static_cast<float>(std::cos(a) * sa - 0.5 * a));
                           return v;
                         });
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    for (size_t i = 0; i < 6; ++i) {
      EXPECT_NEAR(out->video[i], gc.video[i], 2e-5)
          << "mode " << static_cast<int>(gc.mode) << " " << sampler_kind_name(gc.kind) << " steps " << gc.steps
          << " video " << i;
      EXPECT_NEAR(out->audio[i], gc.audio[i], 2e-5)
          << "mode " << static_cast<int>(gc.mode) << " " << sampler_kind_name(gc.kind) << " steps " << gc.steps
          << " audio " << i;
    }
  }
}

TEST(SampleAv, Errors) {
  SamplerSpec spec;
  spec.steps = 0;
  EXPECT_FALSE(make_av_schedule(spec).ok());
  spec.steps = -3;
  EXPECT_FALSE(make_av_schedule(spec).ok());
  spec.steps = 12;
  spec.video_shift = 0.0;
  auto r = make_av_schedule(spec);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("video shift"), std::string::npos) << r.status().message();
  spec.video_shift = 12.0;
  spec.audio_shift = -1.0;
  EXPECT_FALSE(make_av_schedule(spec).ok());
  spec.audio_shift = std::nan("");
  EXPECT_FALSE(make_av_schedule(spec).ok());
  spec.audio_shift = 3.0;
  AvLatents noise{std::vector<float>(4, 0.5f), std::vector<float>(2, 0.5f)};
  // Wrong velocity size.
  auto bad_size = sample_av(spec, noise, [](const AvLatents& x, double, double, int) -> Result<AvLatents> {
    return AvLatents{std::vector<float>(x.video.size() + 1, 0.0f), x.audio};
  });
  EXPECT_FALSE(bad_size.ok());
  // Non-finite velocity.
  auto nan_vel = sample_av(spec, noise, [](const AvLatents& x, double, double, int) -> Result<AvLatents> {
    AvLatents v = x;
    v.audio[1] = std::nanf("");
    return v;
  });
  EXPECT_FALSE(nan_vel.ok());
  // Denoiser error is propagated with context.
  auto fail = sample_av(
      spec, noise, [](const AvLatents&, double, double, int) -> Result<AvLatents> { return invalid_argument("boom"); });
  ASSERT_FALSE(fail.ok());
  EXPECT_NE(fail.status().message().find("boom"), std::string::npos);
  EXPECT_FALSE(sample_av(spec, noise, DenoiseFn{}).ok());
  EXPECT_TRUE(sampler_kind_from_name("euler").ok());
  EXPECT_EQ(*sampler_kind_from_name("res_multistep"), SamplerKind::kResMultistep);
  EXPECT_FALSE(sampler_kind_from_name("dpmpp").ok());
  EXPECT_EQ(*av_schedule_mode_from_name("comfyui"), AvScheduleMode::kComfyParity);
  EXPECT_EQ(*av_schedule_mode_from_name("diffusers"), AvScheduleMode::kDiffusers);
  EXPECT_STREQ(av_schedule_mode_name(AvScheduleMode::kDiffusers), "diffusers");
  EXPECT_STREQ(av_schedule_mode_name(AvScheduleMode::kComfyParity), "comfyui");
  EXPECT_FALSE(av_schedule_mode_from_name("simple").ok());
  EXPECT_FALSE(av_schedule_mode_from_name("reference").ok());
}

}  // namespace
}  // namespace vortex
