// `vortex decode LATENTS_DIR --vae DIR --audio-vae DIR --out DIR [--frames-dir DIR]`: a `vortex generate`
// output folder -> video.mp4 (H.264 CRF 18 + AAC), audio.wav (32-bit float) and decode.json; optionally every
// frame as PNG. `--synthetic-vae tiny|full` uses deterministic synthetic decoders (noise, for demos and
// benchmarks). Progress (tiles done, ETA) on stderr. Exit 2: bad input; 1: runtime failure.
// Tested in tests/cli/cli_decode_test.cpp.
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "commands.h"
#include "engine/decode.h"

namespace vortex::cli {
namespace {

struct DecodeArgs {
  std::string latents_dir, vae, audio_vae, synthetic_vae, out, frames_dir, backend = "cpu";
  uint64_t seed = 0;
  int threads = 0, crf = 18;
  bool overwrite = false, no_tiling = false, quiet = false;
};

int run_decode(const DecodeArgs& a) {
  DecodeRequest r;
  r.latents_dir = a.latents_dir;
  r.vae_dir = a.vae;
  r.audio_vae_dir = a.audio_vae;
  r.synthetic_vae = a.synthetic_vae;
  r.synthetic_seed = a.seed;
  r.out_dir = a.out;
  r.frames_dir = a.frames_dir;
  r.overwrite = a.overwrite;
  r.tiling = !a.no_tiling;
  r.backend = a.backend;
  r.threads = a.threads;
  r.mp4.crf = a.crf;
  const auto start = std::chrono::steady_clock::now();
  auto progress = [&](const VaeProgress& p) {
    if (a.quiet) return;
    const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (p.stage == "video") {
      const double eta = p.done > 0 ? el / static_cast<double>(p.done) * static_cast<double>(p.total - p.done) : 0.0;
      std::fprintf(stderr, "decode: video tile %lld/%lld  %.1fs elapsed, ETA %.1fs\n", static_cast<long long>(p.done),
                   static_cast<long long>(p.total), el, eta);
    } else {
      std::fprintf(stderr, "decode: audio channel %lld/%lld  %.1fs elapsed\n", static_cast<long long>(p.done),
                   static_cast<long long>(p.total), el);
    }
  };
  auto res = decode(r, progress);
  if (!res.ok()) {
    const Status& s = res.status();
    const bool bad_input =
        s.code() == ErrorCode::kInvalidArgument || s.code() == ErrorCode::kNotFound || s.code() == ErrorCode::kFormat;
    std::fprintf(stderr, "vortex decode: %s\n", s.message().c_str());
    return bad_input ? 2 : 1;
  }
  const DecodeResult& d = *res;
  std::printf(
      "vortex decode: %lldx%lld, %lld frames at 24 fps, %lld samples at %d Hz stereo "
      "(video %.2fs, audio %.2fs, write %.2fs)\n",
      static_cast<long long>(d.width), static_cast<long long>(d.height), static_cast<long long>(d.frames),
      static_cast<long long>(d.samples), d.sample_rate, d.video_decode_s, d.audio_decode_s, d.write_s);
  std::printf("outputs in %s:\n", d.out_dir.c_str());
  for (const std::string& f : d.files) std::printf("  %s/%s\n", d.out_dir.c_str(), f.c_str());
  if (!d.frames_dir.empty()) std::printf("frames in %s (frame_00000.png ...)\n", d.frames_dir.c_str());
  return 0;
}

}  // namespace

void register_decode(CLI::App& app, CommandContext& ctx) {
  auto args = std::make_shared<DecodeArgs>();
  CLI::App* sub = app.add_subcommand("decode", "Latents -> video.mp4 (H.264 + AAC) and audio.wav through the H3 VAEs");
  sub->add_option("LATENTS_DIR", args->latents_dir, "A `vortex generate` output folder")->required();
  sub->add_option("--vae", args->vae, "Video VAE folder: diffusers (vae/) or original (FL2VA/video_vae) layout");
  sub->add_option("--audio-vae", args->audio_vae,
                  "Audio VAE folder: diffusers (audio_vae/) or original (FL2VA/audio_vae) layout");
  sub->add_option("--synthetic-vae", args->synthetic_vae,
                  "tiny | full: deterministic synthetic decoders (output is noise)");
  sub->add_option("--vae-seed", args->seed, "Seed of the synthetic decoders (default 0)");
  sub->add_option("--out", args->out, "Output directory (required)")->required();
  sub->add_option("--frames-dir", args->frames_dir, "Also write every frame as 8-bit RGB PNG here");
  sub->add_flag("--overwrite", args->overwrite, "Replace a previous decode in --out / --frames-dir");
  sub->add_flag("--no-tiling", args->no_tiling, "Decode whole frames (not the released tiling; changes the pixels)");
  sub->add_option("--crf", args->crf, "x264 constant rate factor (default 18)");
  sub->add_option("--backend", args->backend, "cpu | cuda (default cpu)");
  sub->add_option("--threads", args->threads, "CPU threads, 0 = all cores; results never depend on it");
  sub->add_flag("--quiet", args->quiet, "No progress output");
  sub->callback([args, &ctx]() { ctx.exit_code = run_decode(*args); });
}

}  // namespace vortex::cli
