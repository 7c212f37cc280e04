// `vortex generate`: the CLI front end of engine/generate.h. Options are read as strings and
// converted here so every bad value gets one message `vortex generate: error: ...` and exit code 2
// (bad arguments or input, exit_code_for in commands.h); runtime failures exit 1. Progress goes to stderr: a
// redrawn bar on a TTY, plain "step i/N ..." lines otherwise. Tested in tests/cli/cli_test.cpp.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>

#include "commands.h"
#include "decoder_options.h"
#include "engine/generate.h"
#include "engine/model_folder.h"
#include "engine/prompt_encoder.h"
#include "interrupt.h"
#include "lora/lora.h"
#include "progress.h"
#include "rank_options.h"

namespace vortex::cli {
namespace {

struct GenerateArgs {
  std::string config = "h3-tiny";
  std::string checkpoint;
  bool synthetic = false;
  std::string weights_seed = "0";
  std::string text_embeddings;
  std::string synthetic_text;  // empty: default 16 rows unless --text-embeddings is given
  std::string width, height;   // empty: 448 x 256, or with keyframes the first keyframe's canvas
  std::string frames = "22", steps = "12";
  std::string seconds;  // empty: use --frames
  std::string schedule = "comfyui";
  std::string sampler;  // empty: the schedule's default
  std::string seed = "42";
  std::string backend = "cpu";
  std::string threads = "0";
  std::string out;
  bool overwrite = false;
  std::string precision = "bf16";
  std::string adaln_weights = "auto";  // auto | device | host (PipelineOptions::adaln_weights)
  std::string max_vram;                // GB; empty: the free device memory
  std::string max_host_ram;            // GB; empty: 90% of the available host memory
  std::string attention;               // empty: the backend policy's (sdpa on the CPU)
  std::string switches;                // run-time switches over the backend policy (apply_switches syntax)
  std::string cuda_graph;              // off | on | auto: appended to the switches as cuda_graph=...
  std::vector<std::string> loras;      // FILE[:SCALE], repeatable
  bool lora_allow_unmatched = false;
  std::string lora_mode = "merge";
  std::string preset;  // "" | "turbo4"
  bool quiet = false;
  // The model folder and the prompt (apply_model_args).
  std::string model;
  std::string prompt;
  std::string prompt_file;              // --prompt-file FILE
  std::string first_frame, last_frame;  // --first-frame / --last-frame IMG (fl2va)
  std::string keyframe_vae;             // --keyframe-vae DIR: the keyframes' encoder (default: the decoding VAE's)
  int text_layer = -1;
  DecoderArgs decoders;       // --vae --audio-vae ... (decoder_options.h)
  bool latents_only = false;  // --model DIR: do not decode with the folder's VAEs
  std::string gpus;           // --gpus N: one rank process per GPU
  std::string comm_timeout;   // --comm-timeout S
};

// The CLI dialect of the request's converters (engine/request.h): `text` as `field`'s type, or its message.
template <typename T>
bool convert(Result<T> parsed, T& out, std::string& error) {
  if (!parsed.ok()) {
    error = parsed.status().message();
    return false;
  }
  out = *parsed;
  return true;
}

int fail(int code, const std::string& message) {
  if (interrupted()) await_interrupt_exit();  // the interrupt's message, not the error it caused
  std::fprintf(stderr, "vortex generate: error: %s\n", message.c_str());
  return code;
}

// --prompt-file FILE: the prompt as UTF-8 text (one trailing newline dropped), for prompts too long for argv.
bool read_prompt_file(const std::string& path, std::string& prompt, std::string& error) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    error = "--prompt-file " + path + " does not exist";
    return false;
  }
  if (!std::filesystem::is_regular_file(path, ec)) {
    error = "--prompt-file " + path + " is not a regular file";
    return false;
  }
  if (std::filesystem::file_size(path, ec) > PromptLimits{}.max_bytes) {
    error = "--prompt-file " + path + " is larger than the prompt limit of " +
            std::to_string(PromptLimits{}.max_bytes) + " bytes";
    return false;
  }
  std::ifstream f(path, std::ios::binary);
  prompt.assign(std::istreambuf_iterator<char>(f), {});
  if (!f.good() && !f.eof()) {
    error = "--prompt-file " + path + " could not be read";
    return false;
  }
  if (!prompt.empty() && prompt.back() == '\n') prompt.pop_back();
  if (!prompt.empty() && prompt.back() == '\r') prompt.pop_back();
  return true;
}

// --model DIR (the snapshot: transformer, text encoder, tokenizer) and --prompt: every part resolved and
// every missing one named before anything is loaded.
// `decoders`: the folder's vae/ and audio_vae/ (decoder_paths), for decoding the latents.
Status apply_model_args(const GenerateArgs& a, CLI::App& sub, GenerateRequest& r, DecoderPaths& decoders) {
  const bool has_prompt = sub.count("--prompt") > 0 || !a.prompt_file.empty();
  if (a.model.empty()) {
    if (has_prompt) return invalid_argument("--prompt needs the text encoder: pass --model DIR (the model folder)");
    if (a.text_layer >= 0) return invalid_argument("--text-layer K chooses the text encoder's layer: pass --model DIR");
    return Status::Ok();
  }
  for (const char* flag : {"--checkpoint", "--config", "--synthetic", "--weights-seed"})
    if (sub.count(flag) > 0)
      return invalid_argument(std::string("--model and ") + flag +
                              " exclude each other: the model folder brings the transformer and its config");
  if (!has_prompt && a.text_embeddings.empty())
    return invalid_argument("--model DIR needs the text: pass --prompt \"...\" (or --text-embeddings FILE)");
  if (has_prompt && (!a.text_embeddings.empty() || !a.synthetic_text.empty()))
    return invalid_argument("--prompt excludes --text-embeddings and --synthetic-text: give one text source");
  // Empty, whitespace-only, invalid UTF-8 or oversized: refused before any file is opened.
  if (has_prompt) VORTEX_RETURN_IF_ERROR(validate_prompt_field(a.prompt, PromptLimits{}, "--prompt"));
  VORTEX_ASSIGN_OR_RETURN(ModelFolder folder, open_model_folder(a.model));
  decoders = decoder_paths(folder);
  if (!has_prompt) {  // --text-embeddings: the folder's transformer alone
    if (a.text_layer >= 0)
      return invalid_argument("--text-layer K applies to --prompt; --text-embeddings are already encoded");
    VORTEX_RETURN_IF_ERROR(require_parts(folder, {"transformer"}, "needed to generate"));
    r.pipeline.model_dir = folder.dir;
    r.pipeline.checkpoint_path = folder.path_of("transformer");
    return Status::Ok();
  }
  VORTEX_RETURN_IF_ERROR(apply_model_folder(folder, a.text_layer, r.pipeline));
  r.run.prompt = a.prompt;
  return Status::Ok();
}

int run_generate(GenerateArgs a, CLI::App& sub, int device) {
  GenerateRequest r;
  std::string error;
  if (!a.prompt_file.empty()) {
    if (sub.count("--prompt") > 0) return fail(2, "--prompt and --prompt-file exclude each other: give one prompt");
    if (!read_prompt_file(a.prompt_file, a.prompt, error)) return fail(2, error);
  }
  // ---- multi-GPU: the launcher (--gpus N) or one rank of a world (VORTEX_RANK / RANK in the environment) ----
  Result<std::optional<RankEnv>> rank_env = rank_env_from_environment();
  if (!rank_env.ok()) return fail(2, rank_env.status().message());
  if (!a.comm_timeout.empty() && !parse_comm_timeout(a.comm_timeout, r.comm, error)) return fail(2, error);
  if (!a.gpus.empty() && !rank_env->has_value()) {
    int n = 0;
    if (!convert(parse_int_text(Field::kGpus, a.gpus), n, error)) return fail(2, error);
    if (n < 1 || n > 64) return fail(2, "--gpus must be between 1 and 64, got " + std::to_string(n));
    if (a.backend != backend_kind_name(BackendKind::kCuda))
      return fail(2, "--gpus needs --backend cuda (one rank process per GPU, over NCCL)");
    if (!a.quiet) std::fprintf(stderr, "vortex generate: starting %d rank processes, one per GPU\n", n);
    LaunchOptions lo;
    lo.argv = rank_command_line();
    lo.world = n;
    Result<LaunchResult> launched = launch_ranks(lo);
    if (!launched.ok()) return fail(exit_code_for(launched.status()), launched.status().message());
    return launched->exit_code;
  }
  if (rank_env->has_value()) {
    RankEnv e = **rank_env;
    if (std::string e2 = select_local_rank_device(e); !e2.empty()) return fail(2, e2);
    r.rank = e;
  }
  const bool has_config = sub.count("--config") > 0;
  if (!a.checkpoint.empty() && has_config) {
    return fail(2, "--config and --checkpoint exclude each other: a checkpoint brings its own config");
  }
  if (!a.text_embeddings.empty() && !a.synthetic_text.empty()) {
    return fail(2, "--text-embeddings and --synthetic-text exclude each other");
  }
  if (!a.seconds.empty() && sub.count("--frames") > 0) {
    return fail(2, "--seconds and --frames exclude each other: --seconds S means ceil(24 S) frames, snapped up");
  }
  if (!a.seconds.empty() && !convert(parse_positive_text(Field::kSeconds, a.seconds, "seconds"), r.run.seconds, error))
    return fail(2, error);
  PipelineOptions& p = r.pipeline;
  RunRequest& q = r.run;
  p.config_name = a.config;
  p.checkpoint_path = a.checkpoint;
  p.synthetic_weights = a.synthetic;
  q.text_embeddings_path = a.text_embeddings;
  if (!convert(parse_u64_text(Field::kWeightsSeed, a.weights_seed), p.weights_seed, error) ||
      (!a.synthetic_text.empty() &&
       !convert(parse_int_text(Field::kSyntheticText, a.synthetic_text), q.synthetic_text_rows, error)) ||
      (!a.width.empty() && !convert(parse_int_text(Field::kWidth, a.width), q.width, error)) ||
      (!a.height.empty() && !convert(parse_int_text(Field::kHeight, a.height), q.height, error)) ||
      !convert(parse_int_text(Field::kFrames, a.frames), q.frames, error) ||
      !convert(parse_int_text(Field::kSteps, a.steps), q.steps, error) ||
      !convert(parse_int_text(Field::kThreads, a.threads), p.threads, error) ||
      !convert(parse_backend_kind(a.backend), p.backend, error) ||
      !convert(parse_precision_field(a.precision), p.precision, error) ||
      !convert(parse_adaln_placement(a.adaln_weights), p.adaln_weights, error) ||
      !convert(parse_lora_mode(a.lora_mode), p.lora_mode, error) ||
      !convert(parse_schedule_field(a.schedule), q.schedule, error)) {
    return fail(2, error);
  }
  if (!a.sampler.empty()) {
    SamplerKind kind = SamplerKind::kResMultistep;
    if (!convert(parse_sampler_field(a.sampler), kind, error)) return fail(2, error);
    q.sampler = kind;
  }
  if (!a.attention.empty()) {
    AttentionKind attention = AttentionKind::kSdpa;
    if (!convert(parse_attention_field(a.attention), attention, error)) return fail(2, error);
    q.attention = attention;
  }
  // --seed -1: a random seed, printed and recorded in run.json like any other.
  const bool random_seed = a.seed == "-1";
  if (random_seed) {
    std::random_device rd;
    q.seed = (static_cast<uint64_t>(rd()) << 32 | rd()) & ((uint64_t{1} << 53) - 1);  // exact in JSON doubles
  } else if (!parse_u64_text(Field::kSeed, a.seed).ok()) {
    return fail(2, "--seed expects a non-negative integer or -1 (random), got '" + a.seed + "'");
  } else {
    q.seed = *parse_u64_text(Field::kSeed, a.seed);
  }
  p.device = device;
  r.out_dir = a.out;
  r.overwrite = a.overwrite;
  if (!a.max_vram.empty() && !convert(parse_positive_text(Field::kMaxVram, a.max_vram, "GB"), p.max_vram_gb, error))
    return fail(2, error);
  if (!a.max_host_ram.empty() &&
      !convert(parse_positive_text(Field::kMaxHostRam, a.max_host_ram, "GB"), p.max_host_ram_gb, error))
    return fail(2, error);
  p.switches = a.switches;
  if (!a.cuda_graph.empty()) p.switches += (p.switches.empty() ? "" : ",") + std::string("cuda_graph=") + a.cuda_graph;
  // ---- LoRA adapters and presets (src/lora, docs/lora.md) ----
  for (const std::string& l : a.loras) {
    Result<LoraSpec> spec = parse_lora_spec(l);
    if (!spec.ok()) return fail(2, spec.status().message());
    p.loras.push_back(*spec);
  }
  p.lora_allow_unmatched = a.lora_allow_unmatched;
  if (!a.preset.empty()) {
    if (a.preset != "turbo4") return fail(2, "--preset must be turbo4, got '" + a.preset + "'");
    if (p.loras.empty())
      return fail(2,
                  "--preset turbo4 is the 4-step schedule of the Turbo LoRA: pass the adapter with --lora FILE "
                  "(docs/lora.md names the files)");
    // SamplerSpec::turbo4: the adapter's published settings (4 steps, shift 6 / 3, euler, simple schedule).
    const SamplerSpec turbo = SamplerSpec::turbo4();
    if (sub.count("--steps") == 0) q.steps = turbo.steps;
    if (sub.count("--sampler") == 0) q.sampler = turbo.kind;
    if (sub.count("--schedule") == 0) q.schedule = turbo.mode;
    q.video_shift = turbo.video_shift;
    q.audio_shift = turbo.audio_shift;
  }

  DecoderPaths decoders;
  if (Status s = apply_model_args(a, sub, r, decoders); !s.ok()) return fail(exit_code_for(s), s.message());
  // The folder's VAEs decode the run unless decoders were named explicitly or --latents-only was given.
  DecoderArgs decoder_args = a.decoders;
  const bool decoders_named =
      !a.decoders.vae.empty() || !a.decoders.audio_vae.empty() || !a.decoders.synthetic_vae.empty();
  if (a.latents_only && decoders_named)
    return fail(2, "--latents-only excludes --vae, --audio-vae and --synthetic-vae");
  if (!a.latents_only && !decoders_named && decoders.present()) {
    decoder_args.vae = decoders.vae_dir;
    decoder_args.audio_vae = decoders.audio_vae_dir;
  }
  if (Status s = apply_decoder_args(decoder_args, p); !s.ok()) return fail(2, s.message());
  // fl2va: the keyframes, encoded by the video VAE's encoder (--vae DIR, else the model folder's vae/, which
  // --latents-only keeps for the encoder).
  q.keyframes.first = a.first_frame;
  q.keyframes.last = a.last_frame;
  if (q.keyframes.any())
    p.keyframe_vae_dir = !a.keyframe_vae.empty()   ? a.keyframe_vae
                         : !a.decoders.vae.empty() ? a.decoders.vae
                                                   : decoders.vae_dir;
  // fl2va without --width/--height: the canvas follows the first keyframe (resolved by the planner).
  if (q.keyframes.any() && a.width.empty() != a.height.empty())
    return fail(2, std::string(a.width.empty() ? "--height" : "--width") +
                       ": with keyframes, --width and --height go together (or give neither: the canvas follows the "
                       "first keyframe's aspect ratio)");
  q.canvas_from_keyframe = q.keyframes.any() && a.width.empty() && a.height.empty();
  q.frames_dir = a.decoders.frames_dir;
  q.frames_overwrite = a.overwrite;

  // Ranks other than 0 sample the same latents silently; rank 0 reports.
  StderrProgress progress("generate", a.quiet || (r.rank && r.rank->rank != 0));
  if (random_seed) progress.note("--seed -1: random seed " + std::to_string(q.seed) + " (recorded in run.json)");
  if (!a.model.empty() && !a.latents_only && !decoders_named && !decoders.present())
    progress.note(a.model +
                  " has no vae/ and audio_vae/: the run stops at the latents (add the VAE folders, or pass "
                  "--vae DIR --audio-vae DIR, to get video.mp4 and audio.wav)");
  Result<GenerateResult> result = generate(r, progress);
  if (!result.ok()) {
    return fail(exit_code_for(result.status()), result.status().message());
  }
  const GenerateResult& g = *result;
  if (r.rank && r.rank->rank != 0) return 0;
  std::printf("vortex generate: %dx%d, %d frames (%d latent), %lld rows, %zu steps in %s (total %s)\n",
              g.geometry.width, g.geometry.height, g.geometry.frames, g.geometry.latent_frames,
              static_cast<long long>(g.geometry.total_rows()), g.step_seconds.size(),
              format_duration(g.sampling_seconds).c_str(), format_duration(g.total_seconds).c_str());
  std::printf("outputs in %s:\n", g.out_dir.c_str());
  for (const std::string& f : g.files) std::printf("  %s/%s\n", g.out_dir.c_str(), f.c_str());
  if (decoders.present() && a.latents_only) {
    std::printf("decode with the folder's VAEs: vortex decode %s --vae %s --audio-vae %s --out DIR\n",
                g.out_dir.c_str(), decoders.vae_dir.c_str(), decoders.audio_vae_dir.c_str());
  }
  return 0;
}

}  // namespace

void register_generate(CLI::App& app, CommandContext& ctx) {
  auto args = std::make_shared<GenerateArgs>();
  CLI::App* sub =
      app.add_subcommand("generate", "Text -> video + stereo audio (latents, run.json, video.mp4, audio.wav)");
  sub->add_option("--config", args->config, "Built-in config: h3-tiny | h3 (default h3-tiny)")->type_name("NAME");
  sub->add_option("--checkpoint", args->checkpoint,
                  "Weights: a .safetensors file, a .safetensors.index.json, or a folder (original or diffusers layout)")
      ->type_name("FILE|DIR");
  sub->add_flag("--synthetic", args->synthetic, "Deterministic synthetic weights for --config (no file)");
  sub->add_option("--weights-seed", args->weights_seed, "Seed of the synthetic weights (default 0)")->type_name("INT");
  sub->add_option("--text-embeddings", args->text_embeddings,
                  "safetensors with one [L, text_dim] or [L, hidden] tensor, f32/bf16")
      ->type_name("FILE");
  sub->add_option("--synthetic-text", args->synthetic_text, "N deterministic synthetic text rows (default 16)")
      ->type_name("INT");
  sub->add_option("--first-frame", args->first_frame,
                  "fl2va: the first keyframe (PNG, JPEG or WebP), stretched onto the canvas (--width x --height, else "
                  "its own aspect ratio at H3's 768 short edge); needs "
                  "the video VAE (--model DIR or --vae DIR)")
      ->type_name("IMG");
  sub->add_option("--last-frame", args->last_frame,
                  "fl2va: the last keyframe, cover-cropped onto the canvas (with or without --first-frame)")
      ->type_name("IMG");
  sub->add_option("--keyframe-vae", args->keyframe_vae,
                  "fl2va: the video VAE folder (diffusers layout) whose encoder encodes the keyframes (default: --vae, "
                  "else the --model folder's vae/); needs no decoder")
      ->type_name("DIR");
  sub->add_option("--width", args->width,
                  "Pixels, a multiple of 32, at most 8192 (default 448; with keyframes and neither --width nor "
                  "--height, the first keyframe's canvas)")
      ->type_name("INT");
  sub->add_option("--height", args->height, "Pixels, a multiple of 32, at most 8192 (default 256)")->type_name("INT");
  sub->add_option("--frames", args->frames, "Pixel frames, snapped up to 17n + 5 (default 22)")->type_name("INT");
  sub->add_option("--seconds", args->seconds, "Duration at 24 fps instead of --frames (rounded up to 17n + 5 frames)")
      ->type_name("FLOAT");
  sub->add_option("--steps", args->steps, "Denoising steps = model evaluations (default 12)")->type_name("INT");
  sub->add_option("--schedule", args->schedule,
                  "comfyui (ModelSamplingAV + simple, default) | diffusers (MiniMaxH3Scheduler), bit-identical tables")
      ->type_name("NAME");
  sub->add_option("--sampler", args->sampler,
                  "euler | res_multistep (default: res_multistep for comfyui, euler for diffusers)")
      ->type_name("NAME");
  sub->add_option("--seed", args->seed, "Noise seed (default 42; -1: a random seed, recorded in run.json)")
      ->type_name("INT");
  sub->add_option("--backend", args->backend, "cpu | cuda (default cpu)")->type_name("NAME");
  sub->add_option("--threads", args->threads,
                  "CPU threads, 0 = all cores, at most 4x the cores; results never depend on it")
      ->type_name("INT");
  sub->add_option("-o,--out", args->out, "Output directory (required)")->type_name("DIR");
  sub->add_flag("--overwrite", args->overwrite, "Replace an --out directory holding a previous Vortex run (only that)");
  sub->add_option("--precision", args->precision,
                  "bf16 | fp8 | nvfp4 | nvfp4-weight-only (GEMM precision; default bf16)")
      ->type_name("NAME");
  sub->add_option("--max-vram", args->max_vram,
                  "device memory budget in GB (10^9 bytes) for weights, activations and workspaces, enforced by the "
                  "allocator (default: the free device memory)")
      ->type_name("GB");
  sub->add_option("--max-host-ram", args->max_host_ram,
                  "page-locked host memory budget in GB (10^9 bytes) for weights kept in host memory; past it they "
                  "stream from the checkpoint's files with direct reads (default: 90% of the available host memory)")
      ->type_name("GB");
  sub->add_option("--adaln-weights", args->adaln_weights,
                  "auto | device | host: where the blocks' AdaLN projections live (host: page-locked memory, read "
                  "once per request for all steps' tables; auto = host on cuda; same bytes either way)")
      ->type_name("PLACE");
  sub->add_option("--switches", args->switches,
                  "run-time switches over the backend policy, e.g. fp8_gate_epilogue=1 (with --precision fp8)")
      ->type_name("LIST");
  sub->add_option("--attention", args->attention,
                  "sdpa | sage2 | bf16-owned (default: the backend policy's; sdpa on the CPU)")
      ->type_name("NAME");
  sub->add_option("--cuda-graph", args->cuda_graph,
                  "off | on | auto: run each denoiser step as a replayed CUDA graph (cuda backend; bit-identical; "
                  "default off, auto = requests of at most 4096 packed rows)")
      ->type_name("MODE");
  sub->add_option("--lora", args->loras,
                  "LoRA adapter FILE[:SCALE], repeatable; SCALE multiplies alpha/rank (default 1), or is the whole "
                  "scale when the file's alpha is ambiguous (docs/lora.md)")
      ->type_name("FILE[:SCALE]");
  sub->add_flag("--lora-allow-unmatched", args->lora_allow_unmatched,
                "Skip LoRA keys that match no layer with a warning instead of failing");
  sub->add_option("--lora-mode", args->lora_mode,
                  "merge (into the BF16 weights at load, default) | runtime (unmerged low-rank branch, BF16 only)")
      ->type_name("NAME");
  sub->add_option("--preset", args->preset, "turbo4: 4 steps, shift 6 / 3, euler, for the Turbo LoRA given with --lora")
      ->type_name("NAME");
  sub->add_option("-m,--model", args->model,
                  "The model folder (the MiniMax-H3 snapshot, or its FL2VA/ partition): transformer, text encoder, "
                  "tokenizer (docs/checkpoints.md)")
      ->type_name("DIR");
  sub->add_option("-p,--prompt", args->prompt, "The prompt, encoded by the folder's Qwen3-VL text encoder")
      ->type_name("TEXT");
  sub->add_option("--prompt-file", args->prompt_file,
                  "Read the prompt from a UTF-8 text file (for prompts too long for the command line)")
      ->type_name("FILE");
  sub->add_option("--text-layer", args->text_layer,
                  "hidden_states index the transformer reads (default: the pipeline config's, 50 for H3)")
      ->type_name("K")
      ->check(CLI::Validator(CLI::NonNegativeNumber).description(""));
  add_decoder_options(sub, args->decoders, /*frames_dir=*/true);
  sub->add_flag("--latents-only", args->latents_only,
                "With --model DIR: stop at the latents instead of decoding with the folder's vae/ and audio_vae/");
  sub->add_flag("--quiet", args->quiet, "No progress output");
  sub->add_option("--gpus", args->gpus,
                  "N GPUs: one rank process per GPU, Ulysses sequence parallelism over NCCL, latents identical to one "
                  "GPU (--backend cuda; docs/multi_gpu.md)")
      ->type_name("N");
  sub->add_option("--comm-timeout", args->comm_timeout,
                  "Seconds one collective may wait for the other ranks before the run fails (default 300)")
      ->type_name("S");
  group_options(
      sub,
      {{"Model and weights", {"--model", "--config", "--checkpoint", "--synthetic", "--weights-seed"}},
       {"Text", {"--prompt", "--prompt-file", "--text-embeddings", "--synthetic-text", "--text-layer"}},
       {"Request",
        {"--width", "--height", "--frames", "--seconds", "--steps", "--schedule", "--sampler", "--seed", "--preset"}},
       {"Output", {"--out", "--overwrite", "--latents-only", "--frames-dir", "--quiet"}},
       {"Decoders", {"--vae", "--audio-vae", "--synthetic-vae", "--vae-seed", "--no-tiling", "--crf"}},
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
  sub->callback([args, sub, &ctx]() {
    install_interrupt_cleanup("generate");
    ctx.exit_code = run_generate(*args, *sub, ctx.device);
  });
}

}  // namespace vortex::cli
