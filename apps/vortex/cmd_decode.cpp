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
#include "interrupt.h"
#include "progress.h"

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
  StderrProgress bar("decode", a.quiet);
  auto progress = [&](const VaeProgress& p) {
    bar.decode(p.stage, p.done, p.total,
               std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  };
  auto res = decode(r, progress);
  if (!res.ok()) {
    if (interrupted()) await_interrupt_exit();  // the interrupt's message, not the error it caused
    const Status& s = res.status();
    std::fprintf(stderr, "vortex decode: error: %s\n", s.message().c_str());
    return exit_code_for(s);
  }
  const DecodeResult& d = *res;
  std::printf(
      "vortex decode: %lldx%lld, %lld frames at 24 fps, %lld samples at %d Hz stereo "
      "(video %s, audio %s, write %s)\n",
      static_cast<long long>(d.width), static_cast<long long>(d.height), static_cast<long long>(d.frames),
      static_cast<long long>(d.samples), d.sample_rate, format_duration(d.video_decode_s).c_str(),
      format_duration(d.audio_decode_s).c_str(), format_duration(d.write_s).c_str());
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
  sub->add_option("-o,--out", args->out, "Output directory (required)")->required()->type_name("DIR");
  sub->add_option("--frames-dir", args->frames_dir, "Also write every frame as 8-bit RGB PNG here");
  sub->add_flag("--overwrite", args->overwrite, "Replace a previous decode in --out / --frames-dir");
  sub->add_flag("--no-tiling", args->no_tiling, "Decode whole frames (not the released tiling; changes the pixels)");
  sub->add_option("--crf", args->crf, "x264 constant rate factor (default 18)");
  sub->add_option("--backend", args->backend, "cpu | cuda (default cpu)");
  sub->add_option("--threads", args->threads, "CPU threads, 0 = all cores; results never depend on it");
  sub->add_flag("--quiet", args->quiet, "No progress output");
  sub->footer(
      "Examples:\n"
      "  vortex decode out/cat --vae ~/models/MiniMax-H3/vae --audio-vae ~/models/MiniMax-H3/audio_vae -o "
      "out/cat-media\n"
      "  vortex decode out/demo --synthetic-vae tiny -o out/demo-media   # noise decoders, for a pipeline check");
  sub->callback([args, &ctx]() {
    install_interrupt_cleanup("decode");
    ctx.exit_code = run_decode(*args);
  });
}

}  // namespace vortex::cli
