// Latents and preview of a run (see run_outputs.h).
#include "engine/run_outputs.h"

#include <algorithm>
#include <filesystem>
#include <utility>

#include "engine/preview.h"
#include "engine/run_manifest.h"
#include "io/safetensors.h"

namespace vortex {
namespace fs = std::filesystem;
namespace {

Tensor latents_tensor(const std::vector<float>& values, Shape shape) {
  Tensor t = Tensor::empty(std::move(shape), DType::kF32);
  std::copy(values.begin(), values.end(), t.data<float>());
  return t;
}

}  // namespace

Status OutputRecord::describe(const std::string& file, const nlohmann::ordered_json& extra) {
  const fs::path path = fs::path(dir_) / file;
  VORTEX_ASSIGN_OR_RETURN(std::string sha, sha256_file(path.string()));
  nlohmann::ordered_json entry = extra;
  entry["sha256"] = sha;
  std::error_code ec;
  entry["bytes"] = fs::file_size(path, ec);
  outputs_[file] = entry;
  return Status::Ok();
}

Result<LatentTensors> write_latent_outputs(const AvLatents& latents, const ModelConfig& cfg, const RequestGeometry& geo,
                                           OutputRecord& record) {
  const fs::path dir(record.dir());
  LatentTensors t;
  t.video = latents_tensor(
      latents.video, {cfg.in_channels, geo.latent_frames, geo.latent_h, geo.latent_w});    // [24, T, H/16, W/16] f32
  t.audio = latents_tensor(latents.audio, {2, cfg.audio_in_channels, geo.audio_latents});  // [2, 32, Ta] f32
  VORTEX_RETURN_IF_ERROR(write_safetensors((dir / kVideoLatentsFile).string(), {{"video_latents", t.video}}, {}));
  VORTEX_RETURN_IF_ERROR(write_safetensors((dir / kAudioLatentsFile).string(), {{"audio_latents", t.audio}}, {}));
  VORTEX_ASSIGN_OR_RETURN(PreviewImage preview, render_latent_preview(t.video));
  VORTEX_RETURN_IF_ERROR(write_png_rgb(preview, (dir / kPreviewFile).string()));
  VORTEX_RETURN_IF_ERROR(record.describe(
      kVideoLatentsFile,
      {{"tensor", "video_latents"}, {"dtype", "F32"}, {"shape", t.video.shape()}, {"layout", "[C, T, H/16, W/16]"}}));
  VORTEX_RETURN_IF_ERROR(record.describe(
      kAudioLatentsFile,
      {{"tensor", "audio_latents"}, {"dtype", "F32"}, {"shape", t.audio.shape()}, {"layout", "[2, C, Ta]"}}));
  VORTEX_RETURN_IF_ERROR(record.describe(kPreviewFile, {{"width", preview.width},
                                                        {"height", preview.height},
                                                        {"frames_shown", preview_frame_indices(geo.latent_frames)},
                                                        {"note", "fixed linear latent->RGB map, NOT a VAE decode"}}));
  return t;
}

}  // namespace vortex
