// End-to-end decode: `vortex generate` latents -> video.mp4 (H.264 + AAC), audio.wav (32-bit float) and
// optionally every frame as PNG. Two layers, so `vortex generate --vae --audio-vae` can reuse the second
// without files in between:
//   decode(request)            reads LATENTS_DIR, loads (or synthesizes) both VAEs, decodes, writes;
//   decode_latents + write_decoded_media   the same on tensors already in memory.
// Output rules as `vortex generate` (docs/outputs.md): the out folder appears complete or not at all
// (staged, then renamed); --overwrite replaces only a folder holding nothing but decode outputs.
// Tested in tests/cli/cli_decode_test.cpp (the built binary) and, for the VAEs it drives,
// tests/vae/vae_parity_test.cpp.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "media/mp4_writer.h"
#include "vae/audio_vae.h"
#include "vae/video_vae.h"
#include "vortex/status.h"
#include "vortex/tensor.h"

namespace vortex {

struct DecodeRequest {
  std::string latents_dir;    // holds video_latents.safetensors, audio_latents.safetensors (run.json optional)
  std::string vae_dir;        // video VAE folder (config.json + diffusion_pytorch_model.safetensors[.index.json])
  std::string audio_vae_dir;  // audio VAE folder
  std::string synthetic_vae;  // "" | "tiny" | "full": deterministic synthetic decoders instead of folders
  uint64_t synthetic_seed = 0;
  std::string out_dir;
  std::string frames_dir;  // optional: frame_00000.png ... (8-bit RGB, the MP4 encoder's input)
  bool overwrite = false;
  bool tiling = true;  // the released spatial tiling; off changes the pixels
  std::string backend = "cpu";
  int threads = 0;
  Mp4Options mp4;
};

// What the decoders produced, in memory.
struct DecodedMedia {
  Tensor frames;  // [F, H, W, 3] u8 RGB
  Tensor audio;   // [2, N] f32 in [-1, 1]
  int fps = 24;
  int sample_rate = 32000;
};

struct DecodeResult {
  std::string out_dir;
  std::vector<std::string> files;  // inside out_dir
  std::string frames_dir;
  int64_t frames = 0, width = 0, height = 0, samples = 0;
  int sample_rate = 0;
  // video_decode_s overlaps the MP4 encode; mux_tail_s: from the end of the video decode to video.mp4 complete;
  // decode_to_mp4_s: the audio decode, the video decode and the mux tail (src/engine/stream_mux.h).
  double video_decode_s = 0, audio_decode_s = 0, mux_tail_s = 0, decode_to_mp4_s = 0, write_s = 0;
  Mp4EncoderInfo encoder;  // the H.264 encoder that wrote video.mp4
  int64_t video_params = 0, audio_params = 0;
};

// Progress of the two decoders (tile forwards, then stereo channels).
Result<DecodedMedia> decode_latents(const Tensor& video_latents, const Tensor& audio_latents, VideoVae& video_vae,
                                    AudioVae& audio_vae, const VaeProgressFn& progress = nullptr);
// Writes video.mp4, audio.wav and decode.json into out_dir (staged + renamed) and the PNG frames into
// frames_dir when it is not empty. `manifest` is merged into decode.json.
Status write_decoded_media(const DecodedMedia& media, const std::string& out_dir, const std::string& frames_dir,
                           bool overwrite, const Mp4Options& opts, const nlohmann::json& manifest,
                           std::vector<std::string>* files = nullptr);

// Writes video.mp4 (H.264 + AAC) and audio.wav into the existing directory `dir` (a caller's staging folder,
// published atomically by that caller) and returns their run.json / decode.json descriptions keyed by file.
// `mp4_written`: video.mp4 is already in `dir` (decode_to_mp4, src/engine/stream_mux.h), written with that
// encoder; only audio.wav is written and video.mp4 described.
Result<nlohmann::json> write_media_files(const DecodedMedia& media, const std::string& dir, const Mp4Options& opts,
                                         const Mp4EncoderInfo* mp4_written = nullptr);
// --frames-dir: may not exist, may be empty, or (overwrite) may hold only frame_*.png a previous decode wrote.
Status check_frames_dir(const std::string& frames_dir, bool overwrite);
// Writes every frame as frame_00000.png ... into a staging sibling of `frames_dir`, then renames it into place
// (replacing, with overwrite, only a folder check_frames_dir accepts).
Status write_frames_dir(const DecodedMedia& media, const std::string& frames_dir);

// The whole command. Invalid input (paths, shapes, NaN latents, a size the VAE cannot decode) is
// kInvalidArgument / kNotFound / kFormat and nothing is written.
Result<DecodeResult> decode(const DecodeRequest& req, const VaeProgressFn& progress = nullptr);

}  // namespace vortex
