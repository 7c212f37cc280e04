// ref2va requests in the engine: the checks a request with references (vortex generate --ref, serve's reference
// conditions) passes before any weight loads, and the run.json record of its reference files. The media rules are
// diffusers 0.42.1's MiniMaxH3Ref2VASetupStep (src/media/reference_media.h); the task rules are the release's: the
// Ref2VA transformer (transformer_ref/ of the snapshot, or the Ref2VA/ partition's transformer/) runs ref2va and
// nothing else, references run on nothing else. Tested in tests/engine/references_test.cpp and through the binary in
// tests/cli/cli_ref2va_test.cpp.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "media/keyframe_canvas.h"
#include "media/reference_media.h"
#include "model/packing.h"
#include "text/tokenizer.h"
#include "text_encoder/text_encoder.h"
#include "vae/audio_vae_encoder.h"
#include "vae/video_vae_encoder.h"
#include "vision/ref2va_presentation.h"
#include "vision/vision_tower.h"
#include "vortex/config.h"
#include "vortex/status.h"

namespace vortex {

// The parts a request's references need, besides the transformer.
struct ReferenceEncoders {
  std::string video_vae_dir;  // the video VAE (diffusers layout) whose encoder encodes image and video references
  std::string audio_vae_dir;  // the audio VAE whose encoder encodes soundtracks and audio clips
};

// The request's references probed and checked, in packed order: each `spec` ("image:" / "video:" / "audio:" prefix
// or none, then a path) parsed and probed from its header (probe_reference: existence, kind, size, duration, frame
// rate, channels), then the set (check_reference_set: counts, audio never alone, total durations). Also refused:
// references together with keyframes (fl2va), a transformer that is not H3's Ref2VA one (`checkpoint_path` empty:
// the built-in synthetic configs, which stand in for either), and a missing encoder folder. Every message starts
// with `field` ("--ref" or "conditions") and names the file.
Result<std::vector<ReferenceProbe>> check_references(const std::vector<std::string>& specs, bool has_keyframes,
                                                     const std::string& checkpoint_path,
                                                     const ReferenceEncoders& encoders, const std::string& field,
                                                     const ReferenceLimits& limits = {});

// A request without references on the Ref2VA transformer: refused naming the FL2VA transformer to use
// (refuse_reference_transformer's message); OK for any other transformer.
Status check_task_transformer(bool has_references, const std::string& checkpoint_path);

// run.json's record of the references, in packed order: per reference its index, kind, path, bytes and SHA-256,
// what its header says (an image's size; a video's size, frame rate, duration and soundtrack; an audio clip's rate,
// channels and duration). A file that cannot be read fails the whole record.
Result<nlohmann::json> reference_inputs_json(const std::vector<ReferenceProbe>& probes);

// The pipeline settings the setup step reads (MiniMaxH3Ref2VASetupStep's ConfigSpecs): `reference_image_short_edge`
// (2048) and the canvas rule `canvas_short_edge` / `canvas_max_pixels` (768, 768 * 1344) a video reference is put on.
// A model folder's model_index.json (or modular_model_index.json) may set them, as diffusers' modular config does;
// without a folder or a key, the defaults.
struct ReferenceSettings {
  int image_short_edge = 2048;
  CanvasRule canvas;
};
Result<ReferenceSettings> reference_settings(const std::string& model_dir);

// One reference as a request of `num_frames` generated frames uses it, known before any weight loads.
struct PlannedReference {
  ReferenceProbe probe;
  ReferenceBlock block;                      // the latent shape its encoders emit (packing's geometry)
  CanvasSize size;                           // an image: the size it is encoded at; a video: its canvas
  int frames_24 = 0;                         // a video: its frames on the 24 fps grid, truncated to num_frames
  int vae_frames = 0;                        // a video: the frames the video VAE encodes (17n + 5, at most frames_24)
  int64_t audio_samples = 0;                 // the soundtrack's samples at the audio VAE's rate (0: none)
  Ref2vaPresentationReference presentation;  // kind, soundtrack, vision grid, block timestamps
  std::vector<int64_t> sampled_frames;       // a video: the 24 fps frames the conditioner reads (2 fps)
};
struct ReferencePlan {
  ReferenceSettings settings;
  std::vector<PlannedReference> refs;  // packed order
  int audio_rate = 32000, audio_hop = 800;
};

// Each reference's geometry, from its header and (videos and soundtracks) a decode without conversion or resize:
// images at reference_image_size, videos on reference_video_canvas with their 24 fps frame count, soundtracks
// normalized (normalize_reference_audio) to count their latents (ceil(samples / hop)). `audio_vae_dir`: the audio
// encoder's config (rate, hop); `processors` (optional, with a text encoder): the image and video processors'
// configs, whose patch grids the presentation takes (a reference they would resize is refused, kUnsupported).
// `field` names the input in messages.
struct ReferenceProcessors {
  VisionProcessorConfig image, video;
};
Result<ReferencePlan> plan_references(const std::vector<ReferenceProbe>& probes, int num_frames,
                                      const ReferenceSettings& settings, const std::string& audio_vae_dir,
                                      const ReferenceProcessors* processors, const std::string& field);

// The video processor's config of a text-encoder folder: its video_preprocessor_config.json, else the snapshot's
// processor/video_preprocessor_config.json beside it; kNotFound naming both.
Result<VisionProcessorConfig> video_processor_config(const std::string& text_encoder_dir);

// MiniMaxH3Ref2VAReferenceEncoderStep then MiniMaxH3PrepareConditionLatentsStep, in packed order:
// * `visual` [Nvc, 4C] f32: each image (read, resized to its size with Pillow's LANCZOS) and video (its first
//   vae_frames frames at 24 fps on its canvas) through encode_condition, noised to 0.999 with noise from Vortex's
//   stream of `seed` from `noise_offset` (one block per reference, in packed order), patchified;
// * `audio` [Nac, Ca] f32: each soundtrack (a video's, an audio clip) normalized to stereo at the encoder's rate and
//   encoded (encode_condition: the posterior mean, normalized; never noised).
// Each encoded shape is checked against the plan's.
struct ReferenceRows {
  Tensor visual;                                    // [Nvc, 4C] f32 host
  Tensor audio;                                     // [Nac, Ca] f32 host (undefined without soundtracks)
  double video_seconds = 0.0, audio_seconds = 0.0;  // reading and encoding, per encoder
};
Result<ReferenceRows> encode_reference_rows(const ReferencePlan& plan, const VideoVaeEncoder* video,
                                            const AudioVaeEncoder* audio, const ModelConfig& cfg, int num_frames,
                                            uint64_t seed, uint64_t noise_offset);

// The conditioner's vision embeddings of a ref2va presentation: each image through the image processor and the
// tower, each video's sampled frames (2 fps) in temporal pairs through the video processor and the tower
// (encode_video_pairs); the tokens and DeepStack features merged in row order, image and video pad rows together, as
// Qwen3-VL places them (visual_pos_masks = image_mask | video_mask).
Result<VisionEmbeddings> reference_vision(const ReferencePlan& plan, const VisionTower& tower,
                                          const ReferenceProcessors& processors, const Ref2vaPresentation& text,
                                          int num_frames);

// run.json's "references" list of a planned request: reference_inputs_json's record of each file, plus "used": what
// the request took of it (an image: the size it was encoded at and its latent grid; a video: its canvas, 24 fps frame
// count, the frames encoded, its latent shape and the frames the conditioner read; a soundtrack: its samples at the
// encoder's rate and its latents per channel) and its packed rows.
Result<nlohmann::json> reference_record_json(const ReferencePlan& plan);

}  // namespace vortex
