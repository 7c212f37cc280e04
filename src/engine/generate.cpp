// `generate` (see generate.h): validate -> backend -> weights -> text -> pack -> noise -> sample ->
// outputs. Every check that can fail cheaply runs before weights are loaded. Outputs go to a sibling
// temp directory `<out>.partial-<pid>` that is renamed onto `<out>` only when all four files are
// written, so a failed run never leaves half a result. Tested end to end in tests/cli/cli_test.cpp.
#include "engine/generate.h"
#include "engine/precision.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <system_error>
#include <thread>
#include <utility>

#include "core/rng.h"
#include "engine/preview.h"
#include "engine/run_manifest.h"
#include "profiling/evidence.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "model/h3_model.h"
#include "model/h3_spec.h"

namespace vortex {
namespace fs = std::filesystem;
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

constexpr int kMaxSteps = 1000;
constexpr int kMaxSyntheticTextRows = 4096;
// Packed rows per request: 50x the canonical 37,810 (the seeds' long shape is ~74K). Beyond this a
// request is a typo (e.g. --frames 100000) that would only end in an out-of-memory kill.
constexpr int64_t kMaxPackedRows = 2'000'000;

// Removes a temp directory on scope exit unless released.
class TempDirGuard {
 public:
  explicit TempDirGuard(fs::path p) : path_(std::move(p)) {}
  ~TempDirGuard() {
    if (!path_.empty()) {
      std::error_code ec;
      fs::remove_all(path_, ec);
    }
  }
  void release() { path_.clear(); }
  TempDirGuard(const TempDirGuard&) = delete;
  TempDirGuard& operator=(const TempDirGuard&) = delete;

 private:
  fs::path path_;
};

Status validate_request_fields(const GenerateRequest& r) {
  if (r.out_dir.empty()) return invalid_argument("--out is required: the directory the outputs are written to");
  if (r.checkpoint_path.empty() && !r.synthetic_weights) {
    return invalid_argument("no weights: pass --checkpoint FILE, or --synthetic for deterministic synthetic weights "
                            "of --config " + r.config_name);
  }
  if (!r.checkpoint_path.empty() && r.synthetic_weights) {
    return invalid_argument("--checkpoint and --synthetic exclude each other: synthetic weights come from --config");
  }
  if (r.steps < 1 || r.steps > kMaxSteps) {
    return invalid_argument("--steps must be in [1, " + std::to_string(kMaxSteps) + "], got " + std::to_string(r.steps));
  }
  if (r.threads < 0) return invalid_argument("--threads must be >= 0 (0 = all cores), got " + std::to_string(r.threads));
  if (r.width <= 0 || r.height <= 0) {
    return invalid_argument("--width/--height must be positive multiples of 32, got " + std::to_string(r.width) + "x" +
                            std::to_string(r.height));
  }
  if (r.frames <= 0) return invalid_argument("--frames must be positive, got " + std::to_string(r.frames));
  if (r.text_embeddings_path.empty() && (r.synthetic_text_rows < 1 || r.synthetic_text_rows > kMaxSyntheticTextRows)) {
    return invalid_argument("--synthetic-text must be in [1, " + std::to_string(kMaxSyntheticTextRows) + "] rows, got " +
                            std::to_string(r.synthetic_text_rows));
  }
  if (r.backend != "cpu" && r.backend != "cuda") {
    return invalid_argument("--backend must be cpu or cuda, got '" + r.backend + "'");
  }
  if (!is_precision_name(r.exec.precision)) {
    return invalid_argument("--precision must be one of " + std::string(precision_names_help()) + ", got '" +
                            r.exec.precision + "'");
  }
  if (r.exec.attention != "sdpa" && r.exec.attention != "sage2") {
    return invalid_argument("--attention must be sdpa or sage2, got '" + r.exec.attention + "'");
  }
  if (r.backend == "cpu" && ((r.exec.precision != "bf16" && r.exec.precision != "nvfp4-weight-only") ||
                              r.exec.attention != "sdpa")) {
    return unsupported("the cpu backend runs BF16 GEMMs only: use --precision bf16 (or nvfp4-weight-only) --attention sdpa "
                       "(fp8/nvfp4/sage2 are approximate CUDA modes, --backend cuda)");
  }
  return Status::Ok();
}

// Absolute, normalized, without a trailing separator ("out/" -> "/abs/out"), so that the staging
// directory "<out>.partial-<pid>" is a sibling of out, never a child.
fs::path normalized_out_path(const std::string& out_dir) {
  fs::path out = fs::absolute(fs::path(out_dir)).lexically_normal();
  while (out.has_parent_path() && out.filename().empty() && out != out.root_path()) out = out.parent_path();
  return out;
}

// The out directory may not exist, may be empty, or (with --overwrite) may hold anything.
Status check_out_dir(const GenerateRequest& r) {
  const fs::path out = normalized_out_path(r.out_dir);
  if (out == out.root_path()) return invalid_argument("--out must not be the root directory");
  std::error_code ec;
  if (fs::exists(out, ec)) {
    if (!fs::is_directory(out, ec)) {
      return invalid_argument("--out " + r.out_dir + " exists and is not a directory; choose another path");
    }
    if (!fs::is_empty(out, ec) && !r.overwrite) {
      return invalid_argument("--out " + r.out_dir + " exists and is not empty; pass --overwrite to replace it "
                              "or choose another directory");
    }
  }
  const fs::path parent = out.parent_path();
  if (!parent.empty() && !fs::exists(parent, ec)) {
    fs::create_directories(parent, ec);
    if (ec) return io_error("cannot create the parent directory " + parent.string() + " of --out: " + ec.message());
  }
  return Status::Ok();
}

// Text conditioning from a safetensors file: exactly one 2-D tensor, width text_dim or hidden, f32/bf16.
Result<Tensor> load_text_embeddings(const std::string& path, const ModelConfig& cfg) {
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    return not_found("--text-embeddings " + path + " does not exist (pass a safetensors file with one [L, " +
                     std::to_string(cfg.text_dim) + "] tensor, or use --synthetic-text N)");
  }
  VORTEX_ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::open(path));
  if (file.entries().size() != 1) {
    return invalid_argument("--text-embeddings " + path + " holds " + std::to_string(file.entries().size()) +
                            " tensors; it must hold exactly one 2-D tensor [L, " + std::to_string(cfg.text_dim) +
                            "] (Qwen3-VL layer-50 states) or [L, " + std::to_string(cfg.hidden) + "] (refined)");
  }
  const std::string name = file.entries().front().name;
  VORTEX_ASSIGN_OR_RETURN(Tensor t, file.tensor(name));
  if (t.ndim() != 2) {
    return invalid_argument("--text-embeddings " + path + ": tensor '" + name + "' is " + t.describe() +
                            "; it must be 2-D [L, " + std::to_string(cfg.text_dim) + "] or [L, " +
                            std::to_string(cfg.hidden) + "]");
  }
  if (t.dim(1) != cfg.text_dim && t.dim(1) != cfg.hidden) {
    return invalid_argument("--text-embeddings " + path + ": tensor '" + name + "' has width " +
                            std::to_string(t.dim(1)) + "; config " + cfg.name + " expects text_dim " +
                            std::to_string(cfg.text_dim) + " (raw text-encoder states) or hidden " +
                            std::to_string(cfg.hidden) + " (already refined)");
  }
  if (t.dtype() != DType::kF32 && t.dtype() != DType::kBF16) {
    return invalid_argument("--text-embeddings " + path + ": tensor '" + name + "' is " + t.describe() +
                            "; only f32 and bf16 are accepted");
  }
  if (t.dim(0) < 1) return invalid_argument("--text-embeddings " + path + ": tensor '" + name + "' has no rows");
  return t;
}

Tensor latents_tensor(const std::vector<float>& values, Shape shape) {
  Tensor t = Tensor::empty(std::move(shape), DType::kF32);
  std::copy(values.begin(), values.end(), t.data<float>());
  return t;
}

// Puts `staged` at `out`: an existing `out` (empty, or replaced with --overwrite) is moved aside
// first and restored if the final rename fails.
Status publish_outputs(const fs::path& staged, const fs::path& out) {
  std::error_code ec;
  fs::path aside;
  if (fs::exists(out, ec)) {
    aside = out;
    aside += ".old-" + std::to_string(::getpid());
    fs::rename(out, aside, ec);
    if (ec) return io_error("cannot move the existing " + out.string() + " aside: " + ec.message());
  }
  fs::rename(staged, out, ec);
  if (ec) {
    std::error_code ec2;
    if (!aside.empty()) fs::rename(aside, out, ec2);
    return io_error("cannot rename " + staged.string() + " to " + out.string() + ": " + ec.message());
  }
  if (!aside.empty()) fs::remove_all(aside, ec);  // best effort: the new outputs are already in place
  return Status::Ok();
}

}  // namespace

uint64_t synthetic_text_seed(uint64_t seed) { return seed ^ 0x7465787400000000ull; }

Tensor synthetic_text_states(const ModelConfig& cfg, int rows, uint64_t seed) {
  Tensor text = Tensor::empty({rows, cfg.text_dim}, DType::kF32);  // [L, text_dim] f32
  gaussian_noise(synthetic_text_seed(seed), 0, text.data<float>(), static_cast<size_t>(text.numel()));
  return text;
}

AvLatents initial_noise(const ModelConfig& cfg, const RequestGeometry& geo, uint64_t seed) {
  const size_t video_n = static_cast<size_t>(cfg.in_channels) * geo.latent_frames * geo.latent_h * geo.latent_w;
  const size_t audio_n = static_cast<size_t>(2) * cfg.audio_in_channels * geo.audio_latents;
  AvLatents noise;
  noise.video.resize(video_n);  // [24, T, H/16, W/16] flattened
  noise.audio.resize(audio_n);  // [2, 32, Ta] flattened
  gaussian_noise(seed, 0, noise.video.data(), video_n);
  gaussian_noise(seed, video_n, noise.audio.data(), audio_n);
  return noise;
}

const char* default_sampler_for_schedule(AvScheduleMode mode) {
  return mode == AvScheduleMode::kDiffusers ? "euler" : "res_multistep";
}

Result<GenerateResult> generate(const GenerateRequest& req, ProgressSink& progress) {
  const auto t_start = Clock::now();
  // ---- 1. cheap validation: arguments, config, text, geometry, out dir, backend ----
  VORTEX_RETURN_IF_ERROR(validate_request_fields(req));
  VORTEX_ASSIGN_OR_RETURN(AvScheduleMode schedule_mode, av_schedule_mode_from_name(req.schedule));
  const std::string sampler_name = req.sampler.empty() ? default_sampler_for_schedule(schedule_mode) : req.sampler;
  VORTEX_ASSIGN_OR_RETURN(SamplerKind sampler_kind, sampler_kind_from_name(sampler_name));
  int frames = req.frames;
  if (req.seconds != 0.0) {
    VORTEX_ASSIGN_OR_RETURN(frames, frames_for_seconds(req.seconds));
  }

  ModelConfig cfg;
  if (!req.checkpoint_path.empty()) {
    std::error_code ec;
    if (!fs::exists(req.checkpoint_path, ec)) {
      return not_found("--checkpoint " + req.checkpoint_path + " does not exist");
    }
    VORTEX_ASSIGN_OR_RETURN(cfg, config_for_checkpoint(req.checkpoint_path));
  } else {
    VORTEX_ASSIGN_OR_RETURN(cfg, ModelConfig::by_name(req.config_name));
  }
  VORTEX_RETURN_IF_ERROR(cfg.validate());

  Tensor text;  // host [L, text_dim] or [L, hidden], f32 or bf16
  if (!req.text_embeddings_path.empty()) {
    VORTEX_ASSIGN_OR_RETURN(text, load_text_embeddings(req.text_embeddings_path, cfg));
  } else {
    text = synthetic_text_states(cfg, req.synthetic_text_rows, req.seed);
  }
  VORTEX_ASSIGN_OR_RETURN(RequestGeometry geo, make_geometry(cfg, req.width, req.height, frames, text.dim(0)));
  if (req.seconds != 0.0) {
    char secs[32];
    std::snprintf(secs, sizeof(secs), "%g", req.seconds);
    progress.note(std::string(secs) + " s at 24 fps -> " + std::to_string(geo.frames) +
                  " frames (the next 17n + 5 at or above " + std::to_string(static_cast<int>(std::ceil(req.seconds * 24.0))) + ")");
  } else if (geo.frames != req.frames) {
    progress.note("frames " + std::to_string(req.frames) + " snapped up to " + std::to_string(geo.frames) +
                  ": the video VAE decodes 17n + 5 frames (as diffusers' align_num_frames)");
  }
  if (geo.total_rows() > kMaxPackedRows) {
    return invalid_argument("request too large: " + std::to_string(geo.total_rows()) + " packed rows (" +
                            std::to_string(geo.width) + "x" + std::to_string(geo.height) + ", " +
                            std::to_string(geo.frames) + " frames); the limit is " + std::to_string(kMaxPackedRows) +
                            ", reduce the size or the frame count");
  }
  VORTEX_ASSIGN_OR_RETURN(PackedLayout layout, pack_request(cfg, geo));
  VORTEX_RETURN_IF_ERROR(check_out_dir(req));

  SamplerSpec spec;
  spec.kind = sampler_kind;
  spec.mode = schedule_mode;
  spec.steps = req.steps;
  spec.video_shift = cfg.video_shift;
  spec.audio_shift = cfg.audio_shift;
  VORTEX_ASSIGN_OR_RETURN(AvSchedule schedule, make_av_schedule(spec));

  VORTEX_ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend, make_backend(req.backend, req.threads));
  // Fusion switches follow the backend's policy table (on only where the gate passed on this arch).
  ExecOptions exec = req.exec;
  const ExecOptions policy = backend->default_options();
  exec.fused_norm_modulate = policy.fused_norm_modulate;
  exec.fused_gate_add = policy.fused_gate_add;
  exec.fused_nvfp4_producers = policy.fused_nvfp4_producers;  // precision nvfp4 only; off until gated

  // ---- 2. weights and per-request preparation ----
  progress.stage(req.synthetic_weights ? "synthesizing weights" : "loading weights");
  const auto t_load = Clock::now();
  H3Weights weights;
  if (req.synthetic_weights) {
    VORTEX_ASSIGN_OR_RETURN(weights, synthesize_weights(cfg, *backend, req.weights_seed));
  } else {
    VORTEX_ASSIGN_OR_RETURN(weights, load_checkpoint(req.checkpoint_path, cfg, *backend));
  }
  VORTEX_RETURN_IF_ERROR(backend->synchronize());
  const double load_seconds = seconds_since(t_load);

  progress.stage("preparing text and positions");
  const auto t_prepare = Clock::now();
  VORTEX_RETURN_IF_ERROR(apply_precision(weights, *backend, exec.precision));
  H3Model model(cfg, *backend, std::move(weights), exec);
  VORTEX_RETURN_IF_ERROR(model.prepare(layout, text));
  const double prepare_seconds = seconds_since(t_prepare);

  // ---- 3. sampling ----
  progress.stage("sampling");
  AvLatents noise = initial_noise(cfg, geo, req.seed);
  GenerateResult result;
  result.geometry = geo;
  const auto t_sample = Clock::now();
  auto t_mark = t_sample;
  DenoiseFn denoise = [&model](const AvLatents& x, double sigma_v, double sigma_a, int) {
    return model.forward(x, sigma_v, sigma_a);
  };
  StepCallback on_step = [&](int, int total) {
    const auto now = Clock::now();
    const double dt = std::chrono::duration<double>(now - t_mark).count();
    t_mark = now;
    result.step_seconds.push_back(dt);
    progress.step(static_cast<int>(result.step_seconds.size()), total, dt, seconds_since(t_sample));
  };
  VORTEX_ASSIGN_OR_RETURN(AvLatents final_latents, sample_av(spec, std::move(noise), denoise, on_step));
  result.sampling_seconds = seconds_since(t_sample);
  const size_t video_n = static_cast<size_t>(cfg.in_channels) * geo.latent_frames * geo.latent_h * geo.latent_w;
  const size_t audio_n = static_cast<size_t>(2) * cfg.audio_in_channels * geo.audio_latents;
  if (final_latents.video.size() != video_n || final_latents.audio.size() != audio_n) {
    return internal_error("sampler returned " + std::to_string(final_latents.video.size()) + " video / " +
                          std::to_string(final_latents.audio.size()) + " audio values, expected " +
                          std::to_string(video_n) + " / " + std::to_string(audio_n));
  }

  // ---- 4. outputs, staged in a sibling temp dir and renamed into place ----
  progress.stage("writing outputs");
  const fs::path out = normalized_out_path(req.out_dir);
  fs::path staged = out;
  staged += ".partial-" + std::to_string(::getpid());
  std::error_code ec;
  fs::remove_all(staged, ec);
  fs::create_directories(staged, ec);
  if (ec) return io_error("cannot create the staging directory " + staged.string() + ": " + ec.message());
  TempDirGuard guard(staged);

  Tensor video = latents_tensor(final_latents.video,
                                {cfg.in_channels, geo.latent_frames, geo.latent_h, geo.latent_w});  // [24, T, H/16, W/16] f32
  Tensor audio = latents_tensor(final_latents.audio, {2, cfg.audio_in_channels, geo.audio_latents});  // [2, 32, Ta] f32
  const std::string video_file = "video_latents.safetensors";
  const std::string audio_file = "audio_latents.safetensors";
  const std::string preview_file = "preview.png";
  const std::string manifest_file = "run.json";
  VORTEX_RETURN_IF_ERROR(write_safetensors((staged / video_file).string(), {{"video_latents", video}}, {}));
  VORTEX_RETURN_IF_ERROR(write_safetensors((staged / audio_file).string(), {{"audio_latents", audio}}, {}));
  VORTEX_ASSIGN_OR_RETURN(PreviewImage preview, render_latent_preview(video));
  VORTEX_RETURN_IF_ERROR(write_png_rgb(preview, (staged / preview_file).string()));

  nlohmann::ordered_json outputs = nlohmann::ordered_json::object();
  auto describe_output = [&](const std::string& file, const nlohmann::ordered_json& extra) -> Status {
    VORTEX_ASSIGN_OR_RETURN(std::string sha, sha256_file((staged / file).string()));
    nlohmann::ordered_json entry = extra;
    entry["sha256"] = sha;
    entry["bytes"] = fs::file_size(staged / file, ec);
    outputs[file] = entry;
    return Status::Ok();
  };
  VORTEX_RETURN_IF_ERROR(describe_output(video_file, {{"tensor", "video_latents"}, {"dtype", "F32"},
                                                      {"shape", video.shape()}, {"layout", "[C, T, H/16, W/16]"}}));
  VORTEX_RETURN_IF_ERROR(describe_output(audio_file, {{"tensor", "audio_latents"}, {"dtype", "F32"},
                                                      {"shape", audio.shape()}, {"layout", "[2, C, Ta]"}}));
  VORTEX_RETURN_IF_ERROR(describe_output(preview_file, {{"width", preview.width}, {"height", preview.height},
                                                        {"frames_shown", preview_frame_indices(geo.latent_frames)},
                                                        {"note", "fixed linear latent->RGB map, NOT a VAE decode"}}));

  nlohmann::ordered_json text_sha = nullptr;
  if (!req.text_embeddings_path.empty()) {
    VORTEX_ASSIGN_OR_RETURN(std::string sha, sha256_file(req.text_embeddings_path));
    text_sha = sha;
  }
  nlohmann::ordered_json manifest;
  manifest["schema"] = "vortex.run/1";
  manifest["vortex"] = build_info_json();
  manifest["time_utc"] = utc_now_iso8601();
  manifest["host"] = host_name();
  manifest["request"] = {
      {"config", req.checkpoint_path.empty() ? req.config_name : cfg.name},
      {"checkpoint", req.checkpoint_path.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(req.checkpoint_path)},
      {"synthetic_weights", req.synthetic_weights},
      {"weights_seed", req.synthetic_weights ? nlohmann::ordered_json(req.weights_seed) : nlohmann::ordered_json(nullptr)},
      {"text_embeddings", req.text_embeddings_path.empty() ? nlohmann::ordered_json(nullptr)
                                                           : nlohmann::ordered_json(req.text_embeddings_path)},
      {"text_embeddings_sha256", text_sha},
      {"synthetic_text_rows", req.text_embeddings_path.empty() ? nlohmann::ordered_json(req.synthetic_text_rows)
                                                               : nlohmann::ordered_json(nullptr)},
      {"text_shape", text.shape()},
      {"text_dtype", dtype_name(text.dtype())},
      {"width", req.width},
      {"height", req.height},
      {"frames_requested", req.seconds != 0.0 ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(req.frames)},
      {"seconds_requested", req.seconds != 0.0 ? nlohmann::ordered_json(req.seconds) : nlohmann::ordered_json(nullptr)},
      {"steps", req.steps},
      {"sampler", sampler_kind_name(sampler_kind)},
      {"schedule", av_schedule_mode_name(schedule_mode)},
      {"seed", req.seed},
      {"backend", std::string(backend->name())},
      {"threads", req.threads},
      {"hardware_threads", std::thread::hardware_concurrency()},
      {"precision", req.exec.precision},
      {"attention", req.exec.attention},
      {"fused_norm_modulate", exec.fused_norm_modulate},
      {"fused_gate_add", exec.fused_gate_add}};
  manifest["noise"] = {{"contract", "gaussian_noise (src/core/rng.h): one stream of `seed`, video elements first, "
                                    "then audio"},
                       {"seed", req.seed},
                       {"video_offset", 0},
                       {"audio_offset", video_n},
                       {"synthetic_text_seed", req.text_embeddings_path.empty()
                                                   ? nlohmann::ordered_json(synthetic_text_seed(req.seed))
                                                   : nlohmann::ordered_json(nullptr)}};
  manifest["model_config"] = model_config_json(cfg);
  manifest["geometry"] = geometry_json(geo);
  manifest["schedule"] = {{"mode", av_schedule_mode_name(schedule_mode)},
                          {"video_shift", spec.video_shift},
                          {"audio_shift", spec.audio_shift},
                          {"sigma_video", schedule.sigma_video},
                          {"sigma_audio", schedule.sigma_audio},
                          {"timesteps_video", timesteps_from_sigmas_f32(schedule.sigma_video)},
                          {"timesteps_audio", timesteps_from_sigmas_f32(schedule.sigma_audio)}};
  manifest["outputs"] = outputs;
  result.total_seconds = seconds_since(t_start);
  manifest["timing"] = {{"load_weights_seconds", load_seconds},
                        {"prepare_seconds", prepare_seconds},
                        {"step_seconds", result.step_seconds},
                        {"sampling_seconds", result.sampling_seconds},
                        {"total_seconds", result.total_seconds}};
  VORTEX_RETURN_IF_ERROR(write_json_file(manifest, (staged / manifest_file).string()));

  VORTEX_RETURN_IF_ERROR(publish_outputs(staged, out));
  guard.release();
  result.out_dir = out.string();
  result.files = {video_file, audio_file, preview_file, manifest_file};
  return result;
}

}  // namespace vortex
