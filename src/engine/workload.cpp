// Loading a bench/gate workload: see workload.h.
#include "engine/workload.h"

#include <chrono>
#include <sstream>

#include "core/rng.h"
#include "core/strings.h"
#include "engine/generate.h"
#include "engine/precision.h"
#include "io/checkpoint.h"
#include "model/h3_spec.h"

namespace vortex {

namespace {

Status parse_bool(const std::string& key, const std::string& value, bool& out) {
  if (value == "1" || value == "on" || value == "true") {
    out = true;
  } else if (value == "0" || value == "off" || value == "false") {
    out = false;
  } else {
    return invalid_argument("switch " + key + " takes 0|1, got '" + value + "'");
  }
  return Status::Ok();
}

}  // namespace

Status apply_switches(const std::string& settings, ExecOptions& opts) {
  for (const std::string& item : split_list(settings)) {
    if (item == "eager") {
      opts.fused_norm_modulate = false;
      opts.fused_gate_add = false;
      continue;
    }
    if (item == "fused") {
      opts.fused_norm_modulate = true;
      opts.fused_gate_add = true;
      continue;
    }
    size_t eq = item.find('=');
    if (eq == std::string::npos) return invalid_argument("switch '" + item + "' is not name=value");
    std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    if (key == "fused_norm_modulate") {
      VORTEX_RETURN_IF_ERROR(parse_bool(key, value, opts.fused_norm_modulate));
    } else if (key == "fused_gate_add") {
      VORTEX_RETURN_IF_ERROR(parse_bool(key, value, opts.fused_gate_add));
    } else if (key == "fused_nvfp4_producers") {
      VORTEX_RETURN_IF_ERROR(parse_bool(key, value, opts.fused_nvfp4_producers));
    } else if (key == "precision") {
      // Precision converts the weights at load: a run-time switch can only restate it.
      if (value != opts.precision)
        return invalid_argument("precision is applied to the weights at load (currently '" + opts.precision +
                                "'); it cannot be switched to '" + value + "' here: use --precision " + value +
                                " (gates and A/B benches then flip only run-time switches on the loaded weights)");
    } else if (key == "debug_sync") {
      VORTEX_RETURN_IF_ERROR(parse_bool(key, value, opts.debug_sync));
    } else if (key == "attention") {
      if (value != "sdpa" && value != "sage2") return invalid_argument("attention takes sdpa|sage2");
      opts.attention = value;
    } else {
      return invalid_argument("unknown switch '" + key +
                              "' (known: fused_norm_modulate, fused_gate_add, fused_nvfp4_producers, attention, debug_sync, "
                              "precision (restating the loaded one), eager, fused)");
    }
  }
  return Status::Ok();
}

std::string describe_switches(const ExecOptions& opts) {
  std::ostringstream os;
  os << "fused_norm_modulate=" << opts.fused_norm_modulate << ",fused_gate_add=" << opts.fused_gate_add
     << ",attention=" << opts.attention << ",precision=" << opts.precision;
  if (opts.precision == "nvfp4") os << ",fused_nvfp4_producers=" << opts.fused_nvfp4_producers;
  return os.str();
}

SamplerSpec workload_sampler(const Workload& w, int steps) {
  SamplerSpec spec;
  spec.steps = steps;
  spec.video_shift = w.cfg.video_shift;
  spec.audio_shift = w.cfg.audio_shift;
  return spec;
}

Result<std::pair<double, double>> second_step_sigmas(const Workload& w, int steps) {
  VORTEX_ASSIGN_OR_RETURN(AvSchedule sched, make_av_schedule(workload_sampler(w, std::max(steps, 2))));
  return std::make_pair(sched.sigma_video[1], sched.sigma_audio[1]);
}

Result<Workload> load_workload(const WorkloadSpec& spec, const LogFn& log) {
  Workload w;
  Result<std::unique_ptr<Backend>> made = make_backend(spec.backend, spec.threads);
  if (!made.ok()) {
    // No CUDA build or device is this machine's limitation, not bad input: a runtime failure.
    if (made.status().code() == ErrorCode::kUnsupported) return Status(ErrorCode::kCuda, made.status().message());
    return made.status();
  }
  w.backend = std::move(*made);
  // Switches: the backend's policy defaults, then the caller's overrides.
  ExecOptions opts = w.backend->default_options();
  opts.precision = spec.precision;
  // nvfp4_fc2_fallback=off|weight-only|bf16 is a load-time precision switch (engine/precision.h), not an
  // ExecOptions field: taken out here and passed to apply_precision.
  PrecisionOptions precision_opts;
  std::string switches;
  for (const std::string& item : split_list(spec.switches)) {
    if (item.rfind("nvfp4_fc2_fallback=", 0) == 0) {
      precision_opts.nvfp4_fc2 = item.substr(std::string("nvfp4_fc2_fallback=").size());
    } else {
      switches += (switches.empty() ? "" : ",") + item;
    }
  }
  VORTEX_RETURN_IF_ERROR(apply_switches(switches, opts));
  if (spec.checkpoint.empty()) {
    VORTEX_ASSIGN_OR_RETURN(w.cfg, ModelConfig::by_name(spec.config));
  } else {
    Result<ModelConfig> cfg = config_for_checkpoint(spec.checkpoint);
    if (!cfg.ok()) return with_checkpoint_advice(cfg.status(), spec.checkpoint);
    w.cfg = *cfg;
  }
  auto t0 = std::chrono::steady_clock::now();
  H3Weights weights;
  if (spec.checkpoint.empty()) {
    VORTEX_ASSIGN_OR_RETURN(weights, synthesize_weights(w.cfg, *w.backend, spec.weights_seed));
  } else {
    Result<H3Weights> loaded = load_checkpoint(spec.checkpoint, w.cfg, *w.backend);
    if (!loaded.ok()) return with_checkpoint_advice(loaded.status(), spec.checkpoint);
    weights = std::move(*loaded);
  }
  precision_opts.precision = opts.precision;
  VORTEX_RETURN_IF_ERROR(apply_precision(weights, *w.backend, precision_opts));
  VORTEX_RETURN_IF_ERROR(w.backend->synchronize());
  double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (log) log("weights ready in " + std::to_string(load_s) + " s (" + w.cfg.name + ", " + std::string(w.backend->name()) + ")");

  VORTEX_ASSIGN_OR_RETURN(RequestGeometry geo, make_geometry(w.cfg, spec.width, spec.height, spec.frames, spec.text_rows));
  VORTEX_ASSIGN_OR_RETURN(w.layout, pack_request(w.cfg, geo));
  if (log) log("request: " + std::to_string(geo.width) + "x" + std::to_string(geo.height) + ", " + std::to_string(geo.frames) +
               " frames -> " + std::to_string(geo.total_rows()) + " rows (text " + std::to_string(geo.text_rows) + ", audio " +
               std::to_string(geo.audio_rows) + ", video " + std::to_string(geo.video_rows) + ")");

  // Synthetic refined text [L, D] (the seeds benchmark with refined synthetic tokens): N(0, 1), noise
  // stream 1 of the noise seed so it never overlaps the latent noise.
  Tensor text = Tensor::empty({geo.text_rows, w.cfg.hidden}, DType::kF32);  // [L, D] f32
  gaussian_noise(spec.noise_seed ^ 0x7465787400000000ull, 0, text.data<float>(), static_cast<size_t>(text.numel()));

  w.model = std::make_unique<H3Model>(w.cfg, *w.backend, std::move(weights), opts);
  VORTEX_RETURN_IF_ERROR(w.model->prepare(w.layout, text));

  size_t video_n = static_cast<size_t>(w.cfg.in_channels) * geo.latent_frames * geo.latent_h * geo.latent_w;
  size_t audio_n = static_cast<size_t>(2) * w.cfg.audio_in_channels * geo.audio_latents;
  w.noise.video.resize(video_n);
  w.noise.audio.resize(audio_n);
  gaussian_noise(spec.noise_seed, 0, w.noise.video.data(), video_n);
  gaussian_noise(spec.noise_seed, video_n, w.noise.audio.data(), audio_n);
  return w;
}

}  // namespace vortex
