// The files Pipeline::run writes into its staging directory (docs/outputs.md): the video and audio latents as
// safetensors and the latent preview PNG, each entered in run.json's "outputs" with its SHA-256 and size by an
// OutputRecord (the media files join it after the decode, engine/pipeline_run.cpp). Tested through
// tests/cli/cli_test.cpp (the files, their shapes and hashes) and the latents parity tests.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/packing.h"
#include "sampler/sampler.h"
#include "vortex/config.h"
#include "vortex/status.h"
#include "vortex/tensor.h"

namespace vortex {

inline constexpr const char* kVideoLatentsFile = "video_latents.safetensors";
inline constexpr const char* kAudioLatentsFile = "audio_latents.safetensors";
inline constexpr const char* kPreviewFile = "preview.png";
inline constexpr const char* kRunRecordFile = "run.json";

// run.json "outputs" of the files written into `dir`, in the order they were described.
class OutputRecord {
 public:
  explicit OutputRecord(std::string dir) : dir_(std::move(dir)) {}
  // Enters `file` (inside the directory, written) as `extra` plus its "sha256" and "bytes".
  Status describe(const std::string& file, const nlohmann::ordered_json& extra);
  const nlohmann::ordered_json& json() const { return outputs_; }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
  nlohmann::ordered_json outputs_ = nlohmann::ordered_json::object();
};

// The sampled latents as tensors: video [C, T, H/16, W/16] f32, audio [2, Ca, Ta] f32.
struct LatentTensors {
  Tensor video;
  Tensor audio;
};

// Writes video_latents.safetensors, audio_latents.safetensors and preview.png into `record`'s directory and
// describes them there; returns the latents as tensors (the decoders' input).
Result<LatentTensors> write_latent_outputs(const AvLatents& latents, const ModelConfig& cfg, const RequestGeometry& geo,
                                           OutputRecord& record);

}  // namespace vortex
