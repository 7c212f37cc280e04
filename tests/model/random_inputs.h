// Test helper: fresh random inputs of an H3 request (text rows and the initial noise), drawn from one normal stream of
// a seed in a fixed order (text, then video, then audio), so a test replays with its printed seed. Used by
// tests/model/adaln_ahead_test.cpp, tests/io/disk_stream_test.cpp and tests/cuda/step_graph_test.cpp.
#pragma once

#include <cstdint>
#include <random>

#include "model/packing.h"
#include "sampler/sampler.h"
#include "vortex/config.h"
#include "vortex/tensor.h"

namespace vortex::testing {

// text: host [text_rows, text_dim] f32; noise: the flattened video and audio latents of geometry `g`.
inline void random_request_inputs(const ModelConfig& cfg, const RequestGeometry& g, int64_t text_rows, uint64_t seed,
                                  Tensor& text, AvLatents& noise) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  text = Tensor::empty({text_rows, cfg.text_dim}, DType::kF32);
  for (int64_t i = 0; i < text.numel(); ++i) text.data<float>()[i] = nd(rng);
  noise.video.resize(static_cast<size_t>(cfg.in_channels) * g.latent_frames * g.latent_h * g.latent_w);
  noise.audio.resize(static_cast<size_t>(2 * cfg.audio_in_channels * g.audio_latents));
  for (float& v : noise.video) v = nd(rng);
  for (float& v : noise.audio) v = nd(rng);
}

}  // namespace vortex::testing
