// A tiny synthetic MiniMax-H3 snapshot on disk (`vortex synth --snapshot tiny`): every part of the official
// layout (engine/model_folder.h, diffusers layout) with deterministic weights and tiny configs, so that
// `vortex generate --model DIR --prompt "a cat"` runs end to end on the CPU in CI:
//   model_index.json        MiniMaxH3ModularPipeline, text_encoder_layer = kTinyTextLayer, and the ref2va setup
//                           settings at tiny scale (reference_image_short_edge 64, canvas 64 x 112 at most)
//   transformer/            h3-tiny, diffusers keys (io/synth_checkpoint.h), config.json
//   transformer_ref/        the Ref2VA transformer: h3-tiny with the weights of seed + 1 (ref2va, --ref FILE)
//   text_encoder/           a 4-layer Qwen3-VL text model of width 128 (= h3-tiny's text_dim), real key names
//                           (text_encoder_weights.h write_synthetic_text_encoder), config.json
//   tokenizer/tokenizer.json  a copy of the given tokenizer.json, or of the bundled tiny tokenizer
//                           (tests/text/fixtures/tiny_tokenizer.json, compiled in); its vocabulary sizes the
//                           text encoder
//   vae/, audio_vae/        copies of the given VAE folders (refused unless they decode the tiny transformer's
//                           latents: 24 video channels, audio [2, 32, Ta] as 2 stereo channels); otherwise the
//                           tiny decoders with synthetic weights (the same as --synthetic-vae tiny --vae-seed SEED),
//                           so `generate --model DIR --prompt ...` ends in an MP4 (of noise); the synthetic vae/
//                           also holds a tiny encoder (the released downsampling, 8 channels per level) for fl2va
//                           keyframes (--first-frame / --last-frame) and ref2va images and frames, the synthetic
//                           audio_vae/ a tiny encoder (widths 4 to 64, the released rates) for ref2va soundtracks
//   processor/              the image and video processors' configs (the vision tower's inputs)
// Full-size synthetic conditioner weights for benchmarks are made on the backend instead
// (TextEncoder::synthesize): the 33B transformer plus 50 conditioner layers would be ~116 GB on disk.
// Tested in tests/engine/model_folder_cli_test.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "text_encoder/text_encoder_config.h"
#include "vortex/status.h"

namespace vortex {

// The tiny snapshot's conditioner reads hidden_states[3] of 4 layers: pre-norm, like H3's 50 of 64.
constexpr int kTinyTextLayer = 3;

struct SyntheticSnapshotOptions {
  std::string out;                     // a folder that does not exist yet, or an empty one
  uint64_t seed = 0;                   // transformer and text-encoder weights
  std::string tokenizer_json;          // "": the bundled tiny tokenizer
  std::string vae_dir, audio_vae_dir;  // copied as vae/ and audio_vae/; "": synthetic tiny decoders
};

// The tiny text encoder config for a tokenizer of `vocab` ids (rounded up to a multiple of 64).
TextEncoderConfig tiny_text_encoder_config(int vocab);

// Writes the snapshot; returns the files written. Refuses an existing non-empty `out`.
Result<std::vector<std::string>> write_synthetic_snapshot(const SyntheticSnapshotOptions& options);

}  // namespace vortex
