// Pipeline::run (see pipeline.h): one planned request on the resident model, stage by stage: prepare (adapters,
// text, fl2va keyframe rows, the model's text and positions, the AdaLN tables), sample, then the outputs into the
// caller's staging directory (latents and preview: engine/run_outputs.h; video.mp4 and audio.wav with decoders;
// run.json: engine/run_record.h). The caller publishes the directory, so a failed or cancelled run never leaves
// half a result.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "core/clock.h"
#include "engine/decode.h"
#include "engine/load_overlap.h"
#include "engine/pipeline.h"
#include "engine/run_manifest.h"
#include "engine/run_outputs.h"
#include "engine/run_record.h"
#include "engine/stream_mux.h"

namespace vortex {
namespace fs = std::filesystem;

// What prepare_run hands to sampling and to run.json.
struct PreparedRun {
  ExecOptions exec;                     // the switches in force for this request
  Tensor text;                          // [L, text_dim] host: what the model was prepared with
  bool media = false;                   // decode video.mp4 and audio.wav after sampling
  uint64_t condition_noise_offset = 0;  // fl2va / ref2va: the visual conditioning rows' noise, after the video and
                                        // audio noise
  double keyframes_seconds = 0.0;
  ReferenceRows references;  // ref2va: the reference rows and their encoders' seconds
  double tables_seconds = 0.0;
  double prepare_seconds = 0.0;
};

namespace {

using Clock = std::chrono::steady_clock;

// Disarms an injected allocation failure when a run ends, however it ends.
class InjectedFailureGuard {
 public:
  InjectedFailureGuard(Backend& backend, int after) : backend_(backend), armed_(after >= 0) {
    if (armed_) backend_.inject_alloc_failure(after);
  }
  ~InjectedFailureGuard() {
    if (armed_) backend_.inject_alloc_failure(-1);
  }
  InjectedFailureGuard(const InjectedFailureGuard&) = delete;
  InjectedFailureGuard& operator=(const InjectedFailureGuard&) = delete;

 private:
  Backend& backend_;
  bool armed_;
};

// Elements of the video and of the audio latents of `geo`.
size_t video_elements(const ModelConfig& cfg, const RequestGeometry& geo) {
  return static_cast<size_t>(cfg.in_channels) * geo.latent_frames * geo.latent_h * geo.latent_w;
}
size_t audio_elements(const ModelConfig& cfg, const RequestGeometry& geo) {
  return static_cast<size_t>(2) * cfg.audio_in_channels * geo.audio_latents;
}

}  // namespace

Result<PreparedRun> Pipeline::prepare_run(const RunPlan& plan, ProgressSink& progress, const CancelToken& cancel) {
  const RunRequest& req = plan.request;
  const RequestGeometry& geo = plan.geo;
  // With ranks, only rank 0's token counts and it is agreed before every model evaluation (agreed_cancel):
  // a rank that stopped on its own, before sampling or between blocks, would leave its peers waiting in a
  // collective.
  const bool alone = model_->communicator() == nullptr;
  PreparedRun prep;
  prep.exec = exec_;
  if (req.attention) prep.exec.attention = *req.attention;
  model_->options() = prep.exec;
  // With ranks the adapters were attached and compared by agree_request_loras: a rank loading here alone
  // could sample with other weights than its peers.
  if (model_->communicator() != nullptr && !req.loras.empty() && !request_loras_attached(req))
    return internal_error("Pipeline::run with ranks: the job's adapters were not agreed (agree_request_loras)");
  // Overlapped loading: adapters attach to every block, so a request with adapters waits for the whole load.
  if (!req.loras.empty() && model_->weights_arriving()) {
    progress.note("the request's adapters attach to every block: waiting for the whole load");
    VORTEX_RETURN_IF_ERROR(model_->await_weights(cfg_.num_layers));
  }
  VORTEX_RETURN_IF_ERROR(switch_request_loras(req, progress));  // before prepare: the refiner may be adapted

  prep.text = plan.text;  // [L, text_dim] host
  if (!prep.text.defined()) {
    RunPlan encoded = plan;
    VORTEX_RETURN_IF_ERROR(encode_prompt(encoded, progress, alone ? &cancel : nullptr));
    if (!encoded.text.defined()) return internal_error("Pipeline::run: the plan has no text and no prompt to encode");
    prep.text = encoded.text;
  }
  if (alone && cancel.cancelled()) return cancelled("cancelled before sampling");
  prep.media = has_decoders() && req.media.value_or(true);
  if (req.media.value_or(false) && !has_decoders())
    return invalid_argument("media requested but no decoders are loaded");
  make_room_for(plan.memory.total());  // a resident conditioner gives way to a request that needs its memory

  // fl2va: the keyframe rows, their noise from the request's stream after the video and audio noise.
  prep.condition_noise_offset = video_elements(cfg_, geo) + audio_elements(cfg_, geo);
  Tensor condition_rows;  // [Nc, 4C] f32 host (fl2va)
  if (!geo.keyframes.empty()) {
    const auto t_keyframes = Clock::now();
    VORTEX_ASSIGN_OR_RETURN(condition_rows, keyframe_rows_for(plan, progress, prep.condition_noise_offset));
    prep.keyframes_seconds = seconds_since(t_keyframes);
    if (alone && cancel.cancelled()) return cancelled("cancelled before sampling");
  }
  if (!geo.references.empty()) {  // ref2va (engine/pipeline_references.cpp)
    VORTEX_ASSIGN_OR_RETURN(prep.references, reference_rows_for(plan, progress, prep.condition_noise_offset));
    condition_rows = prep.references.visual;
    if (alone && cancel.cancelled()) return cancelled("cancelled before sampling");
  }
  progress.stage("preparing text and positions");
  const auto t_prepare = Clock::now();
  VORTEX_RETURN_IF_ERROR(model_->await_weights(-1));  // overlapped loading: the weights before the blocks
  VORTEX_RETURN_IF_ERROR(model_->prepare(plan.layout, prep.text, condition_rows, prep.references.audio));
  VORTEX_ASSIGN_OR_RETURN(prep.tables_seconds, precompute_tables(plan, prep.exec, progress));
  prep.prepare_seconds = seconds_since(t_prepare);
  if (alone && cancel.cancelled()) return cancelled("cancelled before sampling");
  return prep;
}

Result<double> Pipeline::precompute_tables(const RunPlan& plan, const ExecOptions& exec, ProgressSink& progress) {
  // Every step's AdaLN tables before step 1 (H3Model::precompute_adaln): each adaln_proj weight read once.
  std::vector<std::pair<double, double>> sigmas;
  for (int i = 0; i < plan.spec.steps; ++i)
    sigmas.emplace_back(plan.schedule.sigma_video[static_cast<size_t>(i)],
                        plan.schedule.sigma_audio[static_cast<size_t>(i)]);
  const auto t_tables = Clock::now();
  if (exec.adaln_ahead) {
    progress.stage(std::string("computing the AdaLN tables of ") + std::to_string(plan.spec.steps) + " steps" +
                   (model_->adaln_weights_on_host() ? " (AdaLN projections from host memory)" : ""));
    VORTEX_RETURN_IF_ERROR(model_->precompute_adaln(sigmas));
    // The projection upload buffer (0.5 GB at h3 scale) is free now: back to the driver, not held through sampling.
    if (model_->adaln_weights_on_host()) VORTEX_RETURN_IF_ERROR(backend_->release_cached_memory());
  } else {
    VORTEX_RETURN_IF_ERROR(model_->precompute_adaln({}));  // drops held entries: every step computes its own
  }
  VORTEX_RETURN_IF_ERROR(backend_->synchronize());
  return seconds_since(t_tables);
}

Result<AvLatents> Pipeline::sample_run(const RunPlan& plan, ProgressSink& progress, const CancelToken& cancel,
                                       RunOutputs& result) {
  const RequestGeometry& geo = plan.geo;
  progress.stage("sampling");
  AvLatents noise = initial_noise(cfg_, geo, plan.request.seed);
  const auto t_sample = Clock::now();
  load_order_.first_step = seconds_since(t_open_);
  auto t_mark = t_sample;
  H3Model& model = *model_;
  Backend& backend = *backend_;
  Communicator* world = model_->communicator();
  DenoiseFn denoise = [&model, &cancel, &backend, world](const AvLatents& x, double sigma_v, double sigma_a,
                                                         int) -> Result<AvLatents> {
    if (world == nullptr) return model.forward(x, sigma_v, sigma_a, cancel.flag());
    VORTEX_ASSIGN_OR_RETURN(const bool stop, agreed_cancel(*world, backend, cancel));
    if (stop) return cancelled("cancelled between steps");
    return model.forward(x, sigma_v, sigma_a, nullptr);
  };
  StepCallback on_step = [&](int, int total) {
    const auto now = Clock::now();
    const double dt = std::chrono::duration<double>(now - t_mark).count();
    t_mark = now;
    result.step_seconds.push_back(dt);
    progress.step(static_cast<int>(result.step_seconds.size()), total, dt, seconds_since(t_sample));
  };
  VORTEX_ASSIGN_OR_RETURN(AvLatents final_latents,
                          sample_av(plan.spec, plan.schedule, std::move(noise), denoise, on_step));
  result.sampling_seconds = seconds_since(t_sample);
  const size_t video_n = video_elements(cfg_, geo);
  const size_t audio_n = audio_elements(cfg_, geo);
  if (final_latents.video.size() != video_n || final_latents.audio.size() != audio_n) {
    return internal_error("sampler returned " + std::to_string(final_latents.video.size()) + " video / " +
                          std::to_string(final_latents.audio.size()) + " audio values, expected " +
                          std::to_string(video_n) + " / " + std::to_string(audio_n));
  }
  return final_latents;
}

Result<nlohmann::ordered_json> Pipeline::decode_media(const Tensor& video, const Tensor& audio, const RunRequest& req,
                                                      ProgressSink& progress, const CancelToken& cancel,
                                                      OutputRecord& record, double& decode_seconds) {
  using J = nlohmann::ordered_json;
  if (cancel.cancelled()) return cancelled("cancelled before decoding");
  progress.stage("decoding video and audio");
  const fs::path staged(record.dir());
  const auto t_decode = Clock::now();
  // Elapsed per stage (a stage starts when the previous one reported last), so each ETA is its own.
  std::string stage_now;
  auto t_stage = t_decode, t_last = t_decode;
  VaeProgressFn on_tile = [&](const VaeProgress& p) {
    if (p.stage != stage_now) stage_now = p.stage, t_stage = t_last;
    progress.decode(p.stage, p.done, p.total, seconds_since(t_stage));
    t_last = Clock::now();
  };
  const int64_t tiles = video_vae_->tile_forwards(video.shape());
  VORTEX_RETURN_IF_ERROR(video_vae_->check_latents(video).with_context("sampled video latents"));
  VORTEX_RETURN_IF_ERROR(audio_vae_->check_latents(audio).with_context("sampled audio latents"));
  // video.mp4 is encoded while the video decodes (the audio first; src/engine/stream_mux.h).
  Mp4Options mp4;
  mp4.crf = options_.mp4_crf;
  mp4.video_encoder = options_.mp4_video_encoder;
  if (!options_.mp4_x264_preset.empty()) mp4.preset = options_.mp4_x264_preset;
  // A cancel stops the decode between clips and before the mux's flush (decode_to_mp4); on backends that poll
  // it, inside long ops too, whose cut-short outputs the cancel then discards.
  struct CancelScope {
    Backend& b;
    ~CancelScope() { b.set_cancel_flag(nullptr); }
  } cancel_scope{*backend_};
  backend_->set_cancel_flag(cancel.flag());
  VORTEX_ASSIGN_OR_RETURN(StreamedDecode streamed,
                          decode_to_mp4(video, audio, *video_vae_, *audio_vae_, (staged / "video.mp4").string(), mp4,
                                        on_tile, cancel.flag()));
  const DecodedMedia& decoded = streamed.media;
  const Tensor& rgb = decoded.frames;  // [F, H, W, 3] u8
  for (int64_t f = 0; f < rgb.dim(0) && !cancel.cancelled(); ++f)
    progress.frame(static_cast<int>(f), static_cast<int>(rgb.dim(0)), static_cast<int>(rgb.dim(2)),
                   static_cast<int>(rgb.dim(1)), rgb.data<uint8_t>() + f * rgb.dim(1) * rgb.dim(2) * 3);
  if (cancel.cancelled()) return cancelled("cancelled while delivering the decoded frames");
  const auto t0 = Clock::now();
  VORTEX_ASSIGN_OR_RETURN(nlohmann::json described,
                          write_media_files(decoded, staged.string(), mp4, &streamed.encoder));
  for (const char* f : {"video.mp4", "audio.wav"})
    VORTEX_RETURN_IF_ERROR(record.describe(f, J::parse(described[f].dump())));
  if (!req.frames_dir.empty()) VORTEX_RETURN_IF_ERROR(write_frames_dir(decoded, req.frames_dir));
  const double write_s = seconds_since(t0);
  decode_seconds = seconds_since(t_decode);
  const VideoVaeConfig& vc = video_vae_->config();
  const bool synthetic = !decoders_source_.empty();
  return J{{"vae", synthetic ? J(decoders_source_) : J(options_.vae_dir)},
           {"audio_vae", synthetic ? J(decoders_source_) : J(options_.audio_vae_dir)},
           {"vae_layout", synthetic ? J(nullptr) : J(vae_layout_name(video_vae_->layout()))},
           {"audio_vae_layout", synthetic ? J(nullptr) : J(vae_layout_name(audio_vae_->layout()))},
           {"synthetic_seed", synthetic ? J(options_.synthetic_vae_seed) : J(nullptr)},
           {"backend", std::string(backend_->name())},
           {"program",
            "video: BF16 activations, FP32 residual stream and pinned modules; audio: FP32 "
            "(docs/numerics.md \"VAE decoders\")"},
           {"tiling", vc.tiling ? J{{"tile", vc.tile}, {"min_overlap", vc.tile_overlap}} : J(false)},
           {"clip", {{"latent_frames", vc.tokens_chunk_size()}, {"overlap", vc.token_overlap()}}},
           {"tile_forwards", tiles},
           {"video_parameters", video_vae_->parameter_count()},
           {"audio_parameters", audio_vae_->parameter_count()},
           {"frames_dir", req.frames_dir.empty() ? J(nullptr) : J(req.frames_dir)},
           {"timing",
            {{"load_decoders_seconds", decoders_load_seconds_},
             {"video_decode_seconds", streamed.video_decode_s},
             {"audio_decode_seconds", streamed.audio_decode_s},
             {"write_media_seconds", write_s}}}};
}

Result<RunOutputs> Pipeline::run(const RunPlan& plan, ProgressSink& progress, const CancelToken& cancel,
                                 const std::string& dir, double seconds_before) {
  if (!model_) return internal_error("Pipeline::run before load_weights");
  const auto t_run = Clock::now();
  const RunRequest& req = plan.request;
  InjectedFailureGuard injected(*backend_, req.fail_alloc_after);
  // Overlapped loading: the loader's progress, reported on this thread while the run waits for a block.
  struct ReporterScope {
    std::shared_ptr<BackgroundLoad> load;
    ~ReporterScope() {
      if (load) load->set_reporter(nullptr);
    }
  } reporter{background_};
  if (background_) {
    const int layers = cfg_.num_layers;
    background_->set_reporter([&progress, layers](const BackgroundLoad::Progress& p) {
      progress.loading("transformer", p.done, p.total, std::clamp(p.groups - 1, 0, layers), layers, p.seconds);
    });
  }
  VORTEX_ASSIGN_OR_RETURN(const PreparedRun prep, prepare_run(plan, progress, cancel));
  RunOutputs result;
  result.prepare_seconds = prep.prepare_seconds;
  result.geo = plan.geo;
  VORTEX_ASSIGN_OR_RETURN(const AvLatents final_latents, sample_run(plan, progress, cancel, result));
  VORTEX_RETURN_IF_ERROR(finish_load(progress));  // the loader's thread ends with the run that waited on it

  // ---- outputs, into the caller's staging directory ----
  progress.stage("writing outputs");
  OutputRecord record(dir);
  VORTEX_ASSIGN_OR_RETURN(const LatentTensors latents, write_latent_outputs(final_latents, cfg_, plan.geo, record));
  RunRecord run_record;
  if (prep.media) {
    VORTEX_ASSIGN_OR_RETURN(run_record.decode, decode_media(latents.video, latents.audio, req, progress, cancel, record,
                                                            result.decode_seconds));
  }
  const bool encoded = plan.text_source == TextSource::kPrompt && has_text_encoder();
  run_record.options = &options_;
  run_record.plan = &plan;
  run_record.config = &cfg_;
  run_record.exec = prep.exec;
  run_record.backend = backend_->name();
  run_record.adaln_weights = adaln_weight_place_name(model_->adaln_weight_place());
  run_record.text_shape = prep.text.shape();
  run_record.text_dtype = prep.text.dtype();
  run_record.encoded = encoded;
  run_record.audio_noise_offset = video_elements(cfg_, plan.geo);
  run_record.keyframe_noise_offset = prep.condition_noise_offset;
  run_record.keyframes_seconds = prep.keyframes_seconds;
  run_record.references_video_seconds = prep.references.video_seconds;
  run_record.references_audio_seconds = prep.references.audio_seconds;
  run_record.lora = lora_manifest_;
  run_record.world = world_json(model_->communicator());
  run_record.outputs = record.json();
  VORTEX_ASSIGN_OR_RETURN(nlohmann::ordered_json manifest, run_record_json(run_record));
  result.run_seconds = seconds_since(t_run);
  using J = nlohmann::ordered_json;
  manifest["timing"] = {
      {"load_weights_seconds", load_seconds_},     {"encode_prompt_seconds", encoded ? J(encode_seconds_) : J(nullptr)},
      {"prepare_seconds", result.prepare_seconds}, {"adaln_tables_seconds", prep.tables_seconds},
      {"step_seconds", result.step_seconds},       {"sampling_seconds", result.sampling_seconds},
      {"decode_seconds", result.decode_seconds},   {"total_seconds", seconds_before + result.run_seconds}};
  // The load's timeline in seconds since the pipeline opened (docs/memory.md "Overlapped loading").
  auto at = [](double t) { return t >= 0.0 ? J(t) : J(nullptr); };
  manifest["timing"]["load_overlap"] = {
      {"mode", !load_order_.decided     ? "sequential"
               : load_order_.overlapped ? "overlapped"
                                        : "sequential"},
      {"reason", load_order_.decided && !load_order_.overlapped ? J(load_order_.refusal) : J(nullptr)},
      // Overlapped: where the AdaLN projections went as the blocks arrived ("host": read into host memory beside the
      // load, each block's tables computed from it on arrival; "device": loaded with the blocks).
      {"adaln_projections", !load_order_.overlapped ? J(nullptr) : J(load_order_.adaln_host ? "host" : "device")},
      {"text_encoder", load_order_.text_note.empty() ? J(nullptr) : J(load_order_.text_note)},
      {"load_start_seconds", at(load_order_.load_start)},
      {"load_end_seconds", at(load_order_.load_end)},
      {"first_step_start_seconds", at(load_order_.first_step)}};
  VORTEX_RETURN_IF_ERROR(write_json_file(manifest, (fs::path(dir) / kRunRecordFile).string()));
  result.files = {kVideoLatentsFile, kAudioLatentsFile, kPreviewFile};
  if (prep.media) result.files.insert(result.files.end(), {"video.mp4", "audio.wav"});
  result.files.push_back(kRunRecordFile);
  return result;
}

}  // namespace vortex
