// Test helper for tests/cli/golden_noise.py: writes the exact initial noise and synthetic text that
// `vortex generate` uses (engine/generate.h initial_noise, synthetic_text_states) for a request, as raw
// little-endian f32 [video | audio | text], and prints the element counts as JSON on stdout.
// Usage: noise_dump OUT.bin SEED WIDTH HEIGHT FRAMES TEXT_ROWS [CONFIG]. Not a vortex subcommand.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "engine/generate.h"
#include "model/packing.h"
#include "vortex/config.h"

int main(int argc, char** argv) {
  if (argc < 7) {
    std::fprintf(stderr, "usage: noise_dump OUT.bin SEED WIDTH HEIGHT FRAMES TEXT_ROWS [CONFIG]\n");
    return 2;
  }
  const uint64_t seed = std::strtoull(argv[2], nullptr, 10);
  const int width = std::atoi(argv[3]), height = std::atoi(argv[4]), frames = std::atoi(argv[5]);
  const int text_rows = std::atoi(argv[6]);
  const std::string config = argc > 7 ? argv[7] : "h3-tiny";
  auto cfg = vortex::ModelConfig::by_name(config);
  if (!cfg.ok()) {
    std::fprintf(stderr, "noise_dump: %s\n", cfg.status().to_string().c_str());
    return 1;
  }
  auto geo = vortex::make_geometry(*cfg, width, height, frames, text_rows);
  if (!geo.ok()) {
    std::fprintf(stderr, "noise_dump: %s\n", geo.status().to_string().c_str());
    return 1;
  }
  vortex::AvLatents noise = vortex::initial_noise(*cfg, *geo, seed);
  vortex::Tensor text = vortex::synthetic_text_states(*cfg, text_rows, seed);  // [L, text_dim] f32
  FILE* f = std::fopen(argv[1], "wb");
  if (!f) {
    std::fprintf(stderr, "noise_dump: cannot create %s\n", argv[1]);
    return 1;
  }
  std::fwrite(noise.video.data(), 4, noise.video.size(), f);
  std::fwrite(noise.audio.data(), 4, noise.audio.size(), f);
  std::fwrite(text.data<float>(), 4, static_cast<size_t>(text.numel()), f);
  if (std::fclose(f) != 0) return 1;
  std::printf(
      "{\"video\": %zu, \"audio\": %zu, \"text\": %lld, \"latent_frames\": %d, \"latent_h\": %d, "
      "\"latent_w\": %d, \"audio_latents\": %d, \"text_dim\": %d}\n",
      noise.video.size(), noise.audio.size(), static_cast<long long>(text.numel()), geo->latent_frames, geo->latent_h,
      geo->latent_w, geo->audio_latents, cfg->text_dim);
  return 0;
}
