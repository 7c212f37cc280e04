// Pipeline's ref2va stages (see pipeline.h and engine/references.h): the references' vision embeddings for the
// conditioner (the vision tower on images and on video frame pairs) and their conditioning rows (the video VAE
// encoder on images and video frames, the audio VAE encoder on soundtracks), as diffusers 0.42.1's
// MiniMaxH3Ref2VATextEncoderStep and MiniMaxH3Ref2VAReferenceEncoderStep make them. Each encoder is loaded by the
// first request that needs it and kept. Tested end to end in tests/cli/cli_ref2va_test.cpp.
#include "core/clock.h"
#include "engine/pipeline.h"

namespace vortex {

Status Pipeline::load_vision_tower_once(ProgressSink& progress) {
  if (vision_tower_) return Status::Ok();
  progress.stage("loading the vision tower");
  VORTEX_ASSIGN_OR_RETURN(VisionTower tower, load_vision_tower(options_.text_encoder_dir, backend_.get()));
  vision_tower_ = std::make_unique<VisionTower>(std::move(tower));
  return Status::Ok();
}

Result<VisionEmbeddings> Pipeline::reference_vision_for(const RunPlan& plan, ProgressSink& progress) {
  ReferenceProcessors processors;
  VORTEX_ASSIGN_OR_RETURN(processors.image, keyframe_processor_config(options_.text_encoder_dir));
  bool videos = false;
  for (const PlannedReference& r : plan.references.refs) videos = videos || r.probe.kind == ReferenceKind::kVideo;
  if (videos) {
    VORTEX_ASSIGN_OR_RETURN(processors.video, video_processor_config(options_.text_encoder_dir));
  }
  bool visual = false;
  for (const PlannedReference& r : plan.references.refs) visual = visual || r.probe.kind != ReferenceKind::kAudio;
  if (!visual) return VisionEmbeddings{};
  VORTEX_RETURN_IF_ERROR(load_vision_tower_once(progress));
  progress.stage("encoding the references (vision tower, " +
                 std::to_string(plan.reference_text.image_pad_rows.size() + plan.reference_text.video_pad_rows.size()) +
                 " vision tokens)");
  return reference_vision(plan.references, *vision_tower_, processors, plan.reference_text, plan.geo.frames);
}

Result<ReferenceRows> Pipeline::reference_rows_for(const RunPlan& plan, ProgressSink& progress, uint64_t noise_offset) {
  bool visual = false, sound = false;
  for (const PlannedReference& r : plan.references.refs) {
    visual = visual || r.probe.kind != ReferenceKind::kAudio;
    sound = sound || r.probe.has_audio;
  }
  if (visual && !vae_encoder_) {
    progress.stage("loading the video VAE encoder");
    VORTEX_ASSIGN_OR_RETURN(VideoVaeEncoder enc, VideoVaeEncoder::load(options_.encoder_vae_dir(), backend_.get()));
    vae_encoder_ = std::make_unique<VideoVaeEncoder>(std::move(enc));
  }
  if (sound && !audio_encoder_) {
    progress.stage("loading the audio VAE encoder");
    VORTEX_ASSIGN_OR_RETURN(AudioVaeEncoder enc,
                            AudioVaeEncoder::load(options_.reference_audio_encoder_dir(), backend_.get()));
    audio_encoder_ = std::make_unique<AudioVaeEncoder>(std::move(enc));
  }
  progress.stage("encoding the references (" + std::to_string(plan.references.refs.size()) +
                 " references: video VAE encoder on images and frames, audio VAE encoder on soundtracks)");
  return encode_reference_rows(plan.references, visual ? vae_encoder_.get() : nullptr,
                               sound ? audio_encoder_.get() : nullptr, cfg_, plan.geo.frames, plan.request.seed,
                               noise_offset);
}

}  // namespace vortex
