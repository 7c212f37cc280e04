// Loading a bench/gate workload: see workload.h.
#include "engine/workload.h"

#include <cstdio>
#include <sstream>
#include <utility>

#include "core/rng.h"
#include "core/strings.h"
#include "engine/pipeline.h"
#include "engine/precision.h"

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

// The on/off switches, by name.
constexpr std::pair<const char*, bool ExecOptions::*> kBoolSwitches[] = {
    {"fused_norm_modulate", &ExecOptions::fused_norm_modulate},
    {"fused_gate_add", &ExecOptions::fused_gate_add},
    {"fused_nvfp4_producers", &ExecOptions::fused_nvfp4_producers},
    {"fp8_gate_epilogue", &ExecOptions::fp8_gate_epilogue},
    {"fused_q_quantize", &ExecOptions::fused_q_quantize},
    {"adaln_ahead", &ExecOptions::adaln_ahead},
    {"debug_sync", &ExecOptions::debug_sync},
};

bool ExecOptions::*bool_switch(const std::string& key) {
  for (const auto& [name, member] : kBoolSwitches)
    if (key == name) return member;
  return nullptr;
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
    if (bool ExecOptions::*flag = bool_switch(key)) {
      VORTEX_RETURN_IF_ERROR(parse_bool(key, value, opts.*flag));
    } else if (key == "precision") {
      // Precision converts the weights at load: a run-time switch can only restate it.
      if (value != precision_name(opts.precision))
        return invalid_argument("precision is applied to the weights at load (currently '" +
                                std::string(precision_name(opts.precision)) + "'); it cannot be switched to '" + value +
                                "' here: use --precision " + value +
                                " (gates and A/B benches then flip only run-time switches on the loaded weights)");
    } else if (key == "attention") {
      VORTEX_ASSIGN_OR_RETURN(opts.attention, parse_attention(value));
    } else if (key == "cuda_graph") {
      VORTEX_ASSIGN_OR_RETURN(opts.cuda_graph, parse_cuda_graph(value));
    } else {
      return invalid_argument("unknown switch '" + key +
                              "' (known: fused_norm_modulate, fused_gate_add, fused_nvfp4_producers, "
                              "fp8_gate_epilogue, fused_q_quantize, adaln_ahead, attention, cuda_graph, debug_sync, "
                              "precision (restating the loaded one), eager, fused)");
    }
  }
  return Status::Ok();
}

std::string describe_switches(const ExecOptions& opts) {
  std::ostringstream os;
  os << "fused_norm_modulate=" << opts.fused_norm_modulate << ",fused_gate_add=" << opts.fused_gate_add
     << ",attention=" << attention_name(opts.attention) << ",precision=" << precision_name(opts.precision);
  if (opts.precision == Precision::kNvfp4) os << ",fused_nvfp4_producers=" << opts.fused_nvfp4_producers;
  if (opts.precision == Precision::kFp8) os << ",fp8_gate_epilogue=" << opts.fp8_gate_epilogue;
  if (opts.attention == AttentionKind::kSage2) os << ",fused_q_quantize=" << opts.fused_q_quantize;
  if (opts.cuda_graph != CudaGraphMode::kOff) os << ",cuda_graph=" << cuda_graph_name(opts.cuda_graph);
  if (!opts.adaln_ahead) os << ",adaln_ahead=0";
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

namespace {

// Loader notes (dtype conversions) go to the workload's log.
class LogProgress : public ProgressSink {
 public:
  explicit LogProgress(const LogFn& log) : log_(log) {}
  void note(std::string_view what) override {
    if (log_) log_(std::string(what));
  }

 private:
  const LogFn& log_;
};

}  // namespace

Result<Workload> load_workload(const WorkloadSpec& spec, const LogFn& log, const JoinWorldFn& join) {
  Workload w;
  PipelineOptions options;
  options.config_name = spec.config;
  options.checkpoint_path = spec.checkpoint;
  options.synthetic_weights = spec.checkpoint.empty();
  options.weights_seed = spec.weights_seed;
  VORTEX_ASSIGN_OR_RETURN(options.backend, parse_backend_kind(spec.backend));
  options.threads = spec.threads;
  options.device = spec.device;
  VORTEX_ASSIGN_OR_RETURN(options.precision, parse_precision_field(spec.precision));
  // nvfp4_fc2_fallback=off|weight-only|bf16 is a load-time precision switch (engine/precision.h), not an
  // ExecOptions field: taken out here and passed to the precision conversion.
  for (const std::string& item : split_list(spec.switches)) {
    if (item.rfind("nvfp4_fc2_fallback=", 0) == 0) {
      options.nvfp4_fc2 = item.substr(std::string("nvfp4_fc2_fallback=").size());
    } else {
      options.switches += (options.switches.empty() ? "" : ",") + item;
    }
  }
  // Bad switches fail before the weights load (open resolves them over the backend's policy).
  VORTEX_ASSIGN_OR_RETURN(std::unique_ptr<Pipeline> opened, Pipeline::open(options));
  std::shared_ptr<Pipeline> pipeline = std::move(opened);
  w.pipeline = pipeline;  // held by `w` from here: its communicator goes before the backend on every return
  w.cfg = pipeline->config();
  // The request and the world are checked before the weights load: both are cheap, the weights are not.
  VORTEX_ASSIGN_OR_RETURN(RequestGeometry geo,
                          make_geometry(w.cfg, spec.width, spec.height, spec.frames, spec.text_rows));
  if (join) {
    VORTEX_ASSIGN_OR_RETURN(w.comm, join(pipeline->backend(), w.owned_comm));
    VORTEX_RETURN_IF_ERROR(check_sequence_parallel(w.cfg, w.comm->size(), geo.total_rows()));
  }
  LogProgress progress(log);
  VORTEX_RETURN_IF_ERROR(pipeline->load_weights(progress));
  w.backend = &pipeline->backend();
  w.model = &pipeline->model();
  if (log) {
    char secs[32];
    std::snprintf(secs, sizeof secs, "%.2f", pipeline->load_seconds());
    log("weights ready in " + std::string(secs) + " s (" + w.cfg.name + ", " + std::string(w.backend->name()) + ")");
  }

  VORTEX_ASSIGN_OR_RETURN(w.layout, pack_request(w.cfg, geo));
  if (log)
    log("request: " + std::to_string(geo.width) + "x" + std::to_string(geo.height) + ", " + std::to_string(geo.frames) +
        " frames -> " + std::to_string(geo.total_rows()) + " rows (text " + std::to_string(geo.text_rows) + ", audio " +
        std::to_string(geo.audio_rows) + ", video " + std::to_string(geo.video_rows) + ")");
  // Sequence parallel: prepare() builds the rank's UlyssesPlan (rows, heads, exchange buffers).
  w.model->set_communicator(w.comm);

  // Synthetic refined text [L, D] (the seeds benchmark with refined synthetic tokens): N(0, 1), noise
  // stream 1 of the noise seed so it never overlaps the latent noise.
  Tensor text = Tensor::empty({geo.text_rows, w.cfg.hidden}, DType::kF32);  // [L, D] f32
  gaussian_noise(spec.noise_seed ^ 0x7465787400000000ull, 0, text.data<float>(), static_cast<size_t>(text.numel()));

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
