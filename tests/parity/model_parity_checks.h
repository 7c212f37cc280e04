// The diffusers-trajectory check the conditioned model parity tests share (fl2va_model_parity_test.cpp,
// ref2va_model_parity_test.cpp): N Euler steps of diffusers' MiniMaxH3 loop from the fixture's noise, each step's
// latents within twice the BF16 floor (rel-L2 of diffusers' BF16 latents against its FP32 run).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "model/h3_model.h"
#include "parity/parity_fixtures.h"
#include "sampler/sampler.h"

namespace vortex::parity {

// `c` holds `model` (an H3Model pointer, prepared), `noise` (AvLatents) and `get(key)` (a fixture tensor's values,
// keys "bf16.stepI.latents_video" etc.). `label` names the backend and case in the printed lines.
template <typename Case>
void expect_trajectory_within_floor(Case& c, int steps, const std::string& label) {
  SamplerSpec spec;  // diffusers' MiniMaxH3 loop: Euler on each stream's own MiniMaxH3Scheduler table
  spec.kind = SamplerKind::kEuler;
  spec.mode = AvScheduleMode::kDiffusers;
  spec.steps = steps;
  std::vector<AvLatents> seen;
  H3Model& model = *c.model;
  auto out = sample_av(spec, c.noise, [&](const AvLatents& x, double sv, double sa, int) {
    seen.push_back(x);
    return model.forward(x, sv, sa);
  });
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  seen.push_back(*out);
  ASSERT_EQ(seen.size(), static_cast<size_t>(spec.steps) + 1);
  double worst = 0.0;
  for (int i = 0; i < spec.steps; ++i) {
    for (const char* stream : {"video", "audio"}) {
      const AvLatents& g = seen[static_cast<size_t>(i) + 1];
      const std::vector<float>& got = std::string(stream) == "video" ? g.video : g.audio;
      const std::string key = "step" + std::to_string(i) + ".latents_" + stream;
      const std::vector<float> want = c.get("bf16." + key), want32 = c.get("fp32." + key);
      ASSERT_EQ(got.size(), want.size());
      const double err = rel_l2(got, want), floor = rel_l2(want, want32);
      std::printf("[%s] after step %d %s latents: rel-L2 %.3e (floor %.3e)\n", label.c_str(), i + 1, stream, err,
                  floor);
      worst = std::max(worst, err / floor);
      EXPECT_LT(err, 2.0 * floor) << stream << " latents after step " << i + 1;
    }
  }
  std::printf("[%s] worst step error / floor: %.2f\n", label.c_str(), worst);
}

}  // namespace vortex::parity
