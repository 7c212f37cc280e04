// run.json's sections (see run_record.h), one function each, in the order docs/outputs.md lists them.
#include "engine/run_record.h"

#include <filesystem>
#include <string>
#include <thread>
#include <utility>

#include "engine/run_manifest.h"
#include "media/image_reader.h"
#include "model/packing.h"
#include "profiling/evidence.h"
#include "sampler/sampler.h"

namespace vortex {
namespace fs = std::filesystem;
namespace {

using J = nlohmann::ordered_json;

// "request": the request with the load-time choices it ran under.
J request_json(const RunRecord& r, const J& text_sha) {
  const PipelineOptions& o = *r.options;
  const RunPlan& plan = *r.plan;
  const RunRequest& req = plan.request;
  const bool from_file = plan.text_source == TextSource::kEmbeddings;
  const bool encoded = r.encoded;
  return {{"config", o.checkpoint_path.empty() ? o.config_name : r.config->name},
          {"checkpoint", o.checkpoint_path.empty() ? J(nullptr) : J(o.checkpoint_path)},
          {"synthetic_weights", o.synthetic_weights},
          {"weights_seed", o.synthetic_weights ? J(o.weights_seed) : J(nullptr)},
          {"text_embeddings", from_file ? J(req.text_embeddings_path) : J(nullptr)},
          {"text_embeddings_sha256", text_sha},
          {"synthetic_text_rows", plan.text_source == TextSource::kSynthetic ? J(req.synthetic_text_rows) : J(nullptr)},
          {"prompt", plan.text_source == TextSource::kPrompt ? J(req.prompt) : J(nullptr)},
          {"model", o.model_dir.empty() ? J(nullptr) : J(o.model_dir)},
          {"text_encoder", encoded ? J(o.text_encoder_dir) : J(nullptr)},
          {"tokenizer", encoded ? J(o.tokenizer_path) : J(nullptr)},
          {"text_layer", encoded ? J(o.text_layer) : J(nullptr)},
          {"prompt_tokens", encoded ? J(plan.text_ids.size()) : J(nullptr)},
          {"text_shape", r.text_shape},
          {"text_dtype", dtype_name(r.text_dtype)},
          {"width", req.width},
          {"height", req.height},
          {"frames_requested", req.seconds != 0.0 ? J(nullptr) : J(req.frames)},
          {"seconds_requested", req.seconds != 0.0 ? J(req.seconds) : J(nullptr)},
          {"steps", req.steps},
          {"sampler", sampler_kind_name(plan.spec.kind)},
          {"schedule", av_schedule_mode_name(plan.spec.mode)},
          {"seed", req.seed},
          {"backend", r.backend},
          {"threads", o.threads},
          {"hardware_threads", std::thread::hardware_concurrency()},
          {"precision", precision_name(r.exec.precision)},
          {"attention", attention_name(r.exec.attention)},
          {"fused_norm_modulate", r.exec.fused_norm_modulate},
          {"fused_gate_add", r.exec.fused_gate_add},
          {"fp8_gate_epilogue", r.exec.fp8_gate_epilogue},
          {"adaln_weights", r.adaln_weights}};
}

// "noise": the noise contract and the offsets of each part in the seed's stream.
J noise_json(const RunRecord& r) {
  const RunPlan& plan = *r.plan;
  const RunRequest& req = plan.request;
  return {{"contract",
           "gaussian_noise (src/core/rng.h): one stream of `seed`, video elements first, "
           "then audio"},
          {"seed", req.seed},
          {"video_offset", 0},
          {"audio_offset", r.audio_noise_offset},
          {"keyframe_offset", plan.geo.keyframes.empty() ? J(nullptr) : J(r.keyframe_noise_offset)},
          {"synthetic_text_seed", plan.text_source == TextSource::kSynthetic ? J(synthetic_text_seed(req.seed))
                                  : plan.text_source == TextSource::kPrompt && !r.encoded
                                      ? J(synthetic_text_seed(prompt_hash(req.prompt)))
                                      : J(nullptr)}};
}

// "inputs": every input file of the request with its SHA-256: the keyframe images and the text-embeddings file.
Result<J> inputs_json(const RunPlan& plan) {
  const RunRequest& req = plan.request;
  const bool from_file = plan.text_source == TextSource::kEmbeddings;
  std::error_code ec;
  J inputs = J::array();
  for (const auto& [role, path] : {std::pair<std::string, std::string>{"first_frame", req.keyframes.first},
                                   {"last_frame", req.keyframes.last},
                                   {"text_embeddings", from_file ? req.text_embeddings_path : std::string()}}) {
    if (path.empty()) continue;
    VORTEX_ASSIGN_OR_RETURN(std::string sha, sha256_file(path));
    J entry = {{"role", role}, {"path", path}, {"bytes", fs::file_size(path, ec)}, {"sha256", sha}};
    if (role != "text_embeddings") {
      VORTEX_ASSIGN_OR_RETURN(ImageHeader h, probe_image(path));
      entry["format"] = image_format_name(h.format);
      entry["width"] = h.width;
      entry["height"] = h.height;
      entry["exif_orientation"] = h.orientation;
    }
    inputs.push_back(entry);
  }
  return inputs;
}

// "keyframes" (fl2va): where the keyframes went and how they were encoded.
J keyframes_json(const RunRecord& r) {
  const PipelineOptions& o = *r.options;
  const RunPlan& plan = *r.plan;
  const RequestGeometry& geo = plan.geo;
  J anchors = J::array();
  for (KeyframeAnchor a : geo.keyframes) anchors.push_back(keyframe_anchor_name(a));
  return {{"anchors", anchors},
          {"canvas", {{"width", geo.width}, {"height", geo.height}}},
          {"placement", "MiniMaxH3ResizeStep: the first stretched, the last cover-cropped, Pillow LANCZOS"},
          {"vae", o.encoder_vae_dir()},
          {"encoder_seed", 42},
          {"noise_aug", kKeyframeNoiseAug},
          {"condition_rows", geo.condition_rows()},
          {"vision", plan.keyframe_text.ids.empty() ? J(nullptr) : J(o.text_encoder_dir)},
          {"seconds", r.keyframes_seconds}};
}

// "references" (ref2va): every reference with its SHA-256, kind and what the request used of it, and how the rows
// were made.
Result<J> references_json(const RunRecord& r) {
  const PipelineOptions& o = *r.options;
  const RunPlan& plan = *r.plan;
  const RequestGeometry& geo = plan.geo;
  VORTEX_ASSIGN_OR_RETURN(nlohmann::json refs, reference_record_json(plan.references));
  int64_t visual = 0, audio = 0;
  for (const ReferenceBlock& b : geo.references) visual += b.video_rows(), audio += b.audio_rows();
  return J{{"packing", "[text | reference blocks | audio | video] (build_ref2va_packed_sequence)"},
           {"video_vae", o.encoder_vae_dir()},
           {"audio_vae", audio > 0 ? J(o.reference_audio_encoder_dir()) : J(nullptr)},
           {"encoder_seed", 42},
           {"noise_aug", kKeyframeNoiseAug},
           {"noise_offset", r.keyframe_noise_offset},
           {"reference_audio_timestep", kReferenceAudioTimestep},
           {"image_short_edge", plan.references.settings.image_short_edge},
           {"visual_rows", visual},
           {"audio_rows", audio},
           {"vision", plan.reference_text.ids.empty() ? J(nullptr) : J(o.text_encoder_dir)},
           {"seconds", {{"video_vae", r.references_video_seconds}, {"audio_vae", r.references_audio_seconds}}},
           {"files", J::parse(refs.dump())}};
}

J schedule_json(const RunPlan& plan) {
  return {{"mode", av_schedule_mode_name(plan.spec.mode)},
          {"video_shift", plan.spec.video_shift},
          {"audio_shift", plan.spec.audio_shift},
          {"sigma_video", plan.schedule.sigma_video},
          {"sigma_audio", plan.schedule.sigma_audio},
          {"timesteps_video", timesteps_from_sigmas_f32(plan.schedule.sigma_video)},
          {"timesteps_audio", timesteps_from_sigmas_f32(plan.schedule.sigma_audio)}};
}

}  // namespace

Result<nlohmann::ordered_json> run_record_json(const RunRecord& r) {
  const RunPlan& plan = *r.plan;
  J text_sha = nullptr;
  if (plan.text_source == TextSource::kEmbeddings) {
    VORTEX_ASSIGN_OR_RETURN(std::string sha, sha256_file(plan.request.text_embeddings_path));
    text_sha = sha;
  }
  J manifest;
  manifest["schema"] = "vortex.run/1";
  manifest["vortex"] = build_info_json();
  manifest["time_utc"] = utc_now_iso8601();
  manifest["host"] = host_name();
  manifest["request"] = request_json(r, text_sha);
  manifest["noise"] = noise_json(r);
  VORTEX_ASSIGN_OR_RETURN(manifest["inputs"], inputs_json(plan));
  manifest["task"] = !plan.geo.references.empty() ? "ref2va" : plan.geo.keyframes.empty() ? "t2va" : "fl2va";
  if (!plan.geo.keyframes.empty()) manifest["keyframes"] = keyframes_json(r);
  if (!plan.geo.references.empty()) {
    VORTEX_ASSIGN_OR_RETURN(manifest["references"], references_json(r));
  }
  manifest["lora"] = r.lora;
  manifest["world"] = r.world;
  manifest["model_config"] = model_config_json(*r.config);
  manifest["geometry"] = geometry_json(plan.geo);
  manifest["schedule"] = schedule_json(plan);
  manifest["decode"] = r.decode;
  manifest["outputs"] = r.outputs;
  return manifest;
}

}  // namespace vortex
