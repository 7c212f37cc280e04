// `vortex generate`: the CLI front end of the public API (include/vortex/vortex.h). Its flags come from the one
// option table (src/api/request_flags.h, registered by request_flags_cli.h) and reach vortex::generate as they were
// typed, so the CLI and the API check them the same way; every bad value gets one message `vortex generate: error:
// ...` naming its --flag and exit code 2 (bad arguments or input, exit_code_for in commands.h); runtime failures
// exit 1. Progress goes to stderr: a redrawn bar on a TTY, plain "step i/N ..." lines otherwise. --gpus N starts one
// rank process per GPU here. Tested in tests/cli/cli_test.cpp and tests/cli/cli_errors_test.cpp.
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "api/engine_internal.h"
#include "commands.h"
#include "interrupt.h"
#include "progress.h"
#include "rank_options.h"
#include "request_flags_cli.h"

namespace vortex::cli {
namespace {

int fail(int code, const std::string& message) {
  if (interrupted()) await_interrupt_exit();  // the interrupt's message, not the error it caused
  std::fprintf(stderr, "vortex generate: error: %s\n", message.c_str());
  return code;
}

// The public callbacks drawing on `progress`.
Callbacks progress_callbacks(StderrProgress& progress) {
  Callbacks cb;
  cb.on_progress = [&progress](const ProgressEvent& e) {
    using K = ProgressEvent::Kind;
    switch (e.kind) {
      case K::kStage:
        progress.stage(e.text);
        break;
      case K::kNote:
        progress.note(e.text);
        break;
      case K::kWarning:
        progress.warning(e.text);
        break;
      case K::kStep:
        progress.step(static_cast<int>(e.done), static_cast<int>(e.total), e.seconds, e.elapsed);
        break;
      case K::kLoading:
        progress.loading(e.text, e.bytes_done, e.bytes_total, static_cast<int>(e.done), static_cast<int>(e.total),
                         e.seconds);
        break;
      case K::kDecode:
        progress.decode(e.text, e.done, e.total, e.seconds);
        break;
    }
    return true;
  };
  return cb;
}

// --gpus N: one rank process per GPU running this command line; returns the launcher's exit code.
int launch(const api::RequestSpec& spec, bool quiet) {
  if (spec.load.backend != BackendKind::kCuda)
    return fail(2, "--gpus needs --backend cuda (one rank process per GPU, over NCCL)");
  if (!quiet) std::fprintf(stderr, "vortex generate: starting %d rank processes, one per GPU\n", spec.gpus);
  LaunchOptions lo;
  lo.argv = rank_command_line();
  lo.world = spec.gpus;
  Result<LaunchResult> launched = launch_ranks(lo);
  if (!launched.ok()) return fail(exit_code_for(launched.status()), launched.status().message());
  return launched->exit_code;
}

int run_generate(const FlagValues& v, CLI::App& sub, int device) {
  // ---- multi-GPU: the launcher (--gpus N) or one rank of a world (VORTEX_RANK / RANK in the environment) ----
  Result<std::optional<RankEnv>> rank_env = rank_env_from_environment();
  if (!rank_env.ok()) return fail(2, rank_env.status().message());
  api::RequestSpec launcher;
  for (const char* flag : {"--comm-timeout", "--gpus", "--backend"})
    if (Status s = parse_given_flag(sub, v, flag, launcher); !s.ok()) return fail(2, s.message());
  const bool quiet = sub.count("--quiet") > 0;
  if (launcher.gpus > 0 && !rank_env->has_value()) return launch(launcher, quiet);
  if (rank_env->has_value()) {
    if (std::string e = select_local_rank_device(**rank_env); !e.empty()) return fail(2, e);
  }
  LoadOptions load;
  load.names = LoadOptions::Names::kFlags;
  load.device = device;
  load.set = given_flags(sub, v, api::FlagScope::kLoad);
  Request request;
  request.set = given_flags(sub, v, api::FlagScope::kRun);
  // Ranks other than 0 sample the same latents silently; rank 0 reports.
  const bool follower = rank_env->has_value() && (*rank_env)->rank != 0;
  StderrProgress progress("generate", quiet || follower);
  Outcome<Outputs> result = api::generate_ranked(load, request, progress_callbacks(progress), *rank_env);
  if (!result.ok()) return fail(exit_code_for(result.status()), result.status().message());
  if (follower) return 0;
  const Outputs& g = result.value();
  std::printf("vortex generate: %dx%d, %d frames (%d latent), %lld rows, %zu steps in %s (total %s)\n", g.width,
              g.height, g.frames, g.latent_frames, static_cast<long long>(g.rows), g.step_seconds.size(),
              format_duration(g.sampling_seconds).c_str(), format_duration(g.total_seconds).c_str());
  std::printf("outputs in %s:\n", g.out_dir.c_str());
  for (const std::string& f : g.files) std::printf("  %s/%s\n", g.out_dir.c_str(), f.c_str());
  if (!g.unused_vae_dir.empty()) {
    std::printf("decode with the folder's VAEs: vortex decode %s --vae %s --audio-vae %s --out DIR\n",
                g.out_dir.c_str(), g.unused_vae_dir.c_str(), g.unused_audio_vae_dir.c_str());
  }
  return 0;
}

}  // namespace

void register_generate(CLI::App& app, CommandContext& ctx) {
  auto values = std::make_shared<FlagValues>();
  CLI::App* sub =
      app.add_subcommand("generate", "Text -> video + stereo audio (latents, run.json, video.mp4, audio.wav)");
  add_request_flags(sub, *values,
                    {{"--config"},
                     {"--checkpoint"},
                     {"--synthetic"},
                     {"--weights-seed"},
                     {"--text-embeddings"},
                     {"--synthetic-text"},
                     {"--first-frame"},
                     {"--last-frame"},
                     {"--keyframe-vae"},
                     {"--ref"},
                     {"--width"},
                     {"--height"},
                     {"--frames"},
                     {"--seconds"},
                     {"--steps"},
                     {"--schedule"},
                     {"--sampler"},
                     {"--seed"},
                     {"--backend"},
                     {"--threads"},
                     {"--out"},
                     {"--overwrite"},
                     {"--precision"},
                     {"--max-vram"},
                     {"--max-host-ram"},
                     {"--adaln-weights"},
                     {"--switches"},
                     {"--attention"},
                     {"--cuda-graph"},
                     {"--lora"},
                     {"--lora-allow-unmatched"},
                     {"--lora-mode"},
                     {"--preset"},
                     {"--model"},
                     {"--prompt"},
                     {"--prompt-file"},
                     {"--text-layer"},
                     {"--vae"},
                     {"--audio-vae"},
                     {"--synthetic-vae"},
                     {"--vae-seed"},
                     {"--no-tiling"},
                     {"--crf"},
                     {"--video-encoder"},
                     {"--x264-preset"},
                     {"--frames-dir"},
                     {"--latents-only"},
                     {"--quiet"},
                     {"--gpus"},
                     {"--comm-timeout"}});
  group_options(
      sub,
      {{"Model and weights", {"--model", "--config", "--checkpoint", "--synthetic", "--weights-seed"}},
       {"Text", {"--prompt", "--prompt-file", "--text-embeddings", "--synthetic-text", "--text-layer"}},
       {"Request",
        {"--width", "--height", "--frames", "--seconds", "--steps", "--schedule", "--sampler", "--seed", "--preset"}},
       {"Output", {"--out", "--overwrite", "--latents-only", "--frames-dir", "--quiet"}},
       {"Decoders",
        {"--vae", "--audio-vae", "--synthetic-vae", "--vae-seed", "--no-tiling", "--crf", "--video-encoder",
         "--x264-preset"}},
       {"Backend and precision",
        {"--backend", "--threads", "--precision", "--attention", "--switches", "--cuda-graph", "--gpus",
         "--comm-timeout"}},
       {"LoRA", {"--lora", "--lora-allow-unmatched", "--lora-mode"}}});
  sub->footer(
      "Examples:\n"
      "  vortex generate --config h3-tiny --synthetic --synthetic-vae tiny -o out/demo\n"
      "  vortex generate -m ~/models/MiniMax-H3 -p \"a cat walks along a wall at dusk\" --seconds 5 \\\n"
      "      --width 1344 --height 768 --backend cuda -o out/cat\n"
      "  vortex generate -m ~/models/MiniMax-H3 --prompt-file prompt.txt --seed -1 --backend cuda -o out/run2\n"
      "H3 is guidance-distilled: there is no CFG scale and no negative prompt.");
  sub->callback([values, sub, &ctx]() {
    install_interrupt_cleanup("generate");
    ctx.exit_code = run_generate(*values, *sub, ctx.device);
  });
}

}  // namespace vortex::cli
