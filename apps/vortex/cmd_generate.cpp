// `vortex generate`: the CLI front end of engine/generate.h. Options are read as strings and
// converted here so every bad value gets one message `vortex generate: error: ...` and exit code 2
// (bad arguments or input, exit_code_for in commands.h); runtime failures exit 1. Progress goes to stderr: a
// redrawn bar on a TTY, plain "step i/N ..." lines otherwise. Tested in tests/cli/cli_test.cpp.
#include <unistd.h>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "commands.h"
#include "engine/generate.h"
#include "lora/lora.h"

namespace vortex::cli {
namespace {

struct GenerateArgs {
  std::string config = "h3-tiny";
  std::string checkpoint;
  bool synthetic = false;
  std::string weights_seed = "0";
  std::string text_embeddings;
  std::string synthetic_text;  // empty: default 16 rows unless --text-embeddings is given
  std::string width = "448", height = "256", frames = "22", steps = "12";
  std::string seconds;   // empty: use --frames
  std::string schedule = "comfyui";
  std::string sampler;   // empty: the schedule's default
  std::string seed = "42";
  std::string backend = "cpu";
  std::string threads = "0";
  std::string out;
  bool overwrite = false;
  std::string precision = "bf16";
  std::string attention;  // empty: the backend policy's (sdpa on the CPU)
  std::vector<std::string> loras;  // FILE[:SCALE], repeatable
  bool lora_allow_unmatched = false;
  std::string lora_mode = "merge";
  std::string preset;  // "" | "turbo4"
  bool quiet = false;
};

std::optional<long long> parse_integer(const std::string& s) {
  long long v = 0;
  const char* end = s.data() + s.size();
  auto [ptr, ec] = std::from_chars(s.data(), end, v);
  if (ec != std::errc() || ptr != end || s.empty()) return std::nullopt;
  return v;
}

std::optional<uint64_t> parse_u64(const std::string& s) {
  uint64_t v = 0;
  const char* end = s.data() + s.size();
  auto [ptr, ec] = std::from_chars(s.data(), end, v);
  if (ec != std::errc() || ptr != end || s.empty()) return std::nullopt;
  return v;
}

// Converts an int option; on failure sets `error`.
bool to_int(const std::string& flag, const std::string& s, int& out, std::string& error) {
  auto v = parse_integer(s);
  if (!v || *v < std::numeric_limits<int>::min() || *v > std::numeric_limits<int>::max()) {
    error = flag + " expects an integer, got '" + s + "'";
    return false;
  }
  out = static_cast<int>(*v);
  return true;
}

bool to_u64(const std::string& flag, const std::string& s, uint64_t& out, std::string& error) {
  auto v = parse_u64(s);
  if (!v) {
    error = flag + " expects a non-negative integer, got '" + s + "'";
    return false;
  }
  out = *v;
  return true;
}

std::string format_seconds(double s) {
  char buf[32];
  if (s >= 100.0) {
    std::snprintf(buf, sizeof(buf), "%.0f s", s);
  } else {
    std::snprintf(buf, sizeof(buf), "%.2f s", s);
  }
  return buf;
}

// Progress on stderr: a bar redrawn with \r on a terminal, one line per step otherwise.
class StderrProgress : public ProgressSink {
 public:
  explicit StderrProgress(bool quiet) : quiet_(quiet), tty_(::isatty(::fileno(stderr)) == 1) {}
  ~StderrProgress() override { finish_bar(); }

  void stage(std::string_view what) override {
    if (quiet_) return;
    finish_bar();
    std::fprintf(stderr, "vortex generate: %.*s\n", static_cast<int>(what.size()), what.data());
  }

  void note(std::string_view what) override {
    if (quiet_) return;
    finish_bar();
    std::fprintf(stderr, "vortex generate: note: %.*s\n", static_cast<int>(what.size()), what.data());
  }

  // Warnings print even with --quiet: they describe the run the user asked for.
  void warning(std::string_view what) override {
    finish_bar();
    std::fprintf(stderr, "vortex generate: warning: %.*s\n", static_cast<int>(what.size()), what.data());
  }

  void step(int done, int total, double step_seconds, double elapsed_seconds) override {
    if (quiet_) return;
    const double eta = done > 0 ? elapsed_seconds / done * (total - done) : 0.0;
    if (tty_) {
      constexpr int kBarWidth = 30;
      const int filled = total > 0 ? done * kBarWidth / total : 0;
      std::string bar(static_cast<size_t>(filled), '#');
      bar.append(static_cast<size_t>(kBarWidth - filled), '.');
      std::fprintf(stderr, "\r[%s] step %d/%d  %s/step  eta %s   ", bar.c_str(), done, total,
                   format_seconds(step_seconds).c_str(), format_seconds(eta).c_str());
      bar_open_ = done < total;
      if (!bar_open_) std::fprintf(stderr, "\n");
    } else {
      std::fprintf(stderr, "step %d/%d %s eta %s\n", done, total, format_seconds(step_seconds).c_str(),
                   format_seconds(eta).c_str());
    }
    std::fflush(stderr);
  }

 private:
  void finish_bar() {
    if (bar_open_) std::fprintf(stderr, "\n");
    bar_open_ = false;
  }
  bool quiet_;
  bool tty_;
  bool bar_open_ = false;
};

int fail(int code, const std::string& message) {
  std::fprintf(stderr, "vortex generate: error: %s\n", message.c_str());
  return code;
}

int run_generate(const GenerateArgs& a, CLI::App& sub, int device) {
  GenerateRequest r;
  std::string error;
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
  if (!a.seconds.empty()) {
    char* end = nullptr;
    r.run.seconds = std::strtod(a.seconds.c_str(), &end);
    if (end == a.seconds.c_str() || *end != '\0' || !std::isfinite(r.run.seconds) || r.run.seconds <= 0.0) {
      return fail(2, "--seconds expects a positive number of seconds, got '" + a.seconds + "'");
    }
  }
  PipelineOptions& p = r.pipeline;
  RunRequest& q = r.run;
  p.config_name = a.config;
  p.checkpoint_path = a.checkpoint;
  p.synthetic_weights = a.synthetic;
  q.text_embeddings_path = a.text_embeddings;
  if (!to_u64("--weights-seed", a.weights_seed, p.weights_seed, error) ||
      (!a.synthetic_text.empty() && !to_int("--synthetic-text", a.synthetic_text, q.synthetic_text_rows, error)) ||
      !to_int("--width", a.width, q.width, error) || !to_int("--height", a.height, q.height, error) ||
      !to_int("--frames", a.frames, q.frames, error) || !to_int("--steps", a.steps, q.steps, error) ||
      !to_u64("--seed", a.seed, q.seed, error) || !to_int("--threads", a.threads, p.threads, error)) {
    return fail(2, error);
  }
  q.sampler = a.sampler;
  q.schedule = a.schedule;
  p.backend = a.backend;
  p.device = device;
  r.out_dir = a.out;
  r.overwrite = a.overwrite;
  p.precision = a.precision;
  q.attention = a.attention;
  // ---- LoRA adapters and presets (src/lora, docs/lora.md) ----
  for (const std::string& l : a.loras) {
    Result<LoraSpec> spec = parse_lora_spec(l);
    if (!spec.ok()) return fail(2, spec.status().message());
    p.loras.push_back(*spec);
  }
  p.lora_allow_unmatched = a.lora_allow_unmatched;
  p.lora_mode = a.lora_mode;
  if (!a.preset.empty()) {
    if (a.preset != "turbo4") return fail(2, "--preset must be turbo4, got '" + a.preset + "'");
    if (p.loras.empty())
      return fail(2, "--preset turbo4 is the 4-step schedule of the Turbo LoRA: pass the adapter with --lora FILE "
                     "(docs/lora.md names the files)");
    // SamplerSpec::turbo4: the adapter's published settings (4 steps, shift 6 / 3, euler, simple schedule).
    const SamplerSpec turbo = SamplerSpec::turbo4();
    if (sub.count("--steps") == 0) q.steps = turbo.steps;
    if (sub.count("--sampler") == 0) q.sampler = sampler_kind_name(turbo.kind);
    if (sub.count("--schedule") == 0) q.schedule = av_schedule_mode_name(turbo.mode);
    q.video_shift = turbo.video_shift;
    q.audio_shift = turbo.audio_shift;
  }

  StderrProgress progress(a.quiet);
  Result<GenerateResult> result = generate(r, progress);
  if (!result.ok()) {
    return fail(exit_code_for(result.status()), result.status().message());
  }
  const GenerateResult& g = *result;
  std::printf("vortex generate: %dx%d, %d frames (%d latent), %lld rows, %zu steps in %s (total %s)\n",
              g.geometry.width, g.geometry.height, g.geometry.frames, g.geometry.latent_frames,
              static_cast<long long>(g.geometry.total_rows()), g.step_seconds.size(),
              format_seconds(g.sampling_seconds).c_str(), format_seconds(g.total_seconds).c_str());
  std::printf("outputs in %s:\n", g.out_dir.c_str());
  for (const std::string& f : g.files) std::printf("  %s/%s\n", g.out_dir.c_str(), f.c_str());
  return 0;
}

}  // namespace

void register_generate(CLI::App& app, CommandContext& ctx) {
  auto args = std::make_shared<GenerateArgs>();
  CLI::App* sub = app.add_subcommand("generate", "Text -> video + stereo audio latents (+ run.json, preview.png)");
  sub->add_option("--config", args->config, "Built-in config: h3-tiny | h3 (default h3-tiny)")->type_name("NAME");
  sub->add_option("--checkpoint", args->checkpoint, "Weights: a .safetensors file, a .safetensors.index.json, or a folder (original or diffusers layout)")
      ->type_name("FILE|DIR");
  sub->add_flag("--synthetic", args->synthetic, "Deterministic synthetic weights for --config (no file)");
  sub->add_option("--weights-seed", args->weights_seed, "Seed of the synthetic weights (default 0)")->type_name("INT");
  sub->add_option("--text-embeddings", args->text_embeddings,
                  "safetensors with one [L, text_dim] or [L, hidden] tensor, f32/bf16")->type_name("FILE");
  sub->add_option("--synthetic-text", args->synthetic_text, "N deterministic synthetic text rows (default 16)")->type_name("INT");
  sub->add_option("--width", args->width, "Pixels, a multiple of 32, at most 8192 (default 448)")->type_name("INT");
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
  sub->add_option("--seed", args->seed, "Noise seed (default 42)")->type_name("INT");
  sub->add_option("--backend", args->backend, "cpu | cuda (default cpu)")->type_name("NAME");
  sub->add_option("--threads", args->threads, "CPU threads, 0 = all cores, at most 4x the cores; results never depend on it")->type_name("INT");
  sub->add_option("--out", args->out, "Output directory (required)")->type_name("DIR");
  sub->add_flag("--overwrite", args->overwrite, "Replace an --out directory holding a previous Vortex run (only that)");
  sub->add_option("--precision", args->precision, "bf16 | fp8 | nvfp4 | nvfp4-weight-only (GEMM precision; default bf16)")->type_name("NAME");
  sub->add_option("--attention", args->attention, "sdpa | sage2 (default: the backend policy's; sdpa on the CPU)")->type_name("NAME");
  sub->add_option("--lora", args->loras,
                  "LoRA adapter FILE[:SCALE], repeatable; SCALE multiplies alpha/rank (default 1), or is the whole "
                  "scale when the file's alpha is ambiguous (docs/lora.md)")
      ->type_name("FILE[:SCALE]");
  sub->add_flag("--lora-allow-unmatched", args->lora_allow_unmatched,
                "Skip LoRA keys that match no layer with a warning instead of failing");
  sub->add_option("--lora-mode", args->lora_mode,
                  "merge (into the BF16 weights at load, default) | runtime (unmerged low-rank branch, BF16 only)")
      ->type_name("NAME");
  sub->add_option("--preset", args->preset,
                  "turbo4: 4 steps, shift 6 / 3, euler, for the Turbo LoRA given with --lora")
      ->type_name("NAME");
  sub->add_flag("--quiet", args->quiet, "No progress output");
  sub->callback([args, sub, &ctx]() { ctx.exit_code = run_generate(*args, *sub, ctx.device); });
}

}  // namespace vortex::cli
