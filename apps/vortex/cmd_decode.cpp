// `vortex decode LATENTS_DIR --vae DIR --audio-vae DIR --out DIR [--frames-dir DIR] [--video-encoder E]
// [--x264-preset P]`: a `vortex generate` output folder -> video.mp4 (H.264 CRF 18 + AAC, encoded while the video
// decodes), audio.wav (32-bit float) and decode.json; optionally every frame as PNG. `--synthetic-vae tiny|full` uses
// deterministic synthetic decoders (noise, for demos and benchmarks). Progress (tiles done, ETA) on stderr. Exit 2: bad
// input; 1: runtime failure. Tested in tests/cli/cli_decode_test.cpp.
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "engine/decode.h"
#include "interrupt.h"
#include "progress.h"
#include "request_flags_cli.h"

namespace vortex::cli {
namespace {

// LATENTS_DIR; the decoder, output and backend flags come from the option table (request_flags_cli.h).
struct DecodeArgs {
  std::string latents_dir;
  std::string video_encoder = "auto";
  std::string x264_preset = Mp4Options{}.preset;
  FlagValues flags;
};

int run_decode(const DecodeArgs& a, const CLI::App& sub) {
  api::RequestSpec spec;
  if (Status s = parse_given_flags(sub, a.flags, spec); !s.ok()) {
    std::fprintf(stderr, "vortex decode: error: %s\n", s.message().c_str());
    return 2;
  }
  const PipelineOptions& o = spec.load;
  DecodeRequest r;
  r.latents_dir = a.latents_dir;
  r.vae_dir = o.vae_dir;
  r.audio_vae_dir = o.audio_vae_dir;
  r.synthetic_vae = synthetic_vae_name(o.synthetic_vae);
  r.synthetic_seed = o.synthetic_vae_seed;
  r.out_dir = spec.out_dir;
  r.frames_dir = spec.run.frames_dir;
  r.overwrite = spec.overwrite;
  r.tiling = o.vae_tiling;
  r.backend = backend_kind_name(o.backend);
  r.threads = o.threads;
  r.mp4.crf = o.mp4_crf;
  r.mp4.video_encoder = a.video_encoder;
  r.mp4.preset = a.x264_preset;
  const auto start = std::chrono::steady_clock::now();
  StderrProgress bar("decode", spec.quiet);
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
      "(audio %s, video %s with video.mp4 encoded alongside by %s, mux tail %s, write %s)\n",
      static_cast<long long>(d.width), static_cast<long long>(d.height), static_cast<long long>(d.frames),
      static_cast<long long>(d.samples), d.sample_rate, format_duration(d.audio_decode_s).c_str(),
      format_duration(d.video_decode_s).c_str(), d.encoder.encoder.c_str(), format_duration(d.mux_tail_s).c_str(),
      format_duration(d.write_s).c_str());
  if (!d.encoder.fallback.empty()) std::printf("h264_nvenc unavailable: %s\n", d.encoder.fallback.c_str());
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
  add_request_flags(sub, args->flags,
                    {{"--vae", "Video VAE folder: diffusers (vae/) or original (FL2VA/video_vae) layout"},
                     {"--audio-vae"},
                     {"--synthetic-vae"},
                     {"--vae-seed"},
                     {"--out"},
                     {"--frames-dir", "Also write every frame as 8-bit RGB PNG here"},
                     {"--overwrite", "Replace a previous decode in --out / --frames-dir"},
                     {"--no-tiling"},
                     {"--crf", "x264 constant rate factor (default 18)"},
                     {"--backend"},
                     {"--threads", "CPU threads, 0 = all cores; results never depend on it"},
                     {"--quiet"}});
  sub->get_option("--out")->required();
  sub->add_option("--video-encoder", args->video_encoder,
                  "H.264 encoder of video.mp4: auto (h264_nvenc when the driver offers it, else libx264), libx264 or "
                  "h264_nvenc (an error where NVENC is absent)")
      ->check(CLI::IsMember({"auto", "libx264", "h264_nvenc"}))
      ->default_str("auto");
  std::vector<std::string> presets(std::begin(kX264Presets), std::end(kX264Presets));
  sub->add_option("--x264-preset", args->x264_preset,
                  "libx264 preset of video.mp4 (speed against file size at the same --crf; docs/decode.md has the "
                  "measured cost). Recorded in decode.json")
      ->check(CLI::IsMember(presets))
      ->default_str(Mp4Options{}.preset);
  sub->footer(
      "Examples:\n"
      "  vortex decode out/cat --vae ~/models/MiniMax-H3/vae --audio-vae ~/models/MiniMax-H3/audio_vae -o "
      "out/cat-media\n"
      "  vortex decode out/demo --synthetic-vae tiny -o out/demo-media   # noise decoders, for a pipeline check");
  sub->callback([args, sub, &ctx]() {
    install_interrupt_cleanup("decode");
    ctx.exit_code = run_decode(*args, *sub);
  });
}

}  // namespace vortex::cli
