// The decoder flags `vortex generate` and `vortex serve` share (--vae, --audio-vae, --synthetic-vae,
// --vae-seed, --no-tiling, --crf; generate also --frames-dir): parsed into PipelineOptions, which loads the
// decoders before the transformer's weights (engine/pipeline.h). Tested in tests/cli/cli_decode_test.cpp.
#pragma once

#include <cstdint>
#include <string>

#include "commands.h"
#include "engine/pipeline.h"

namespace vortex::cli {

struct DecoderArgs {
  std::string vae, audio_vae, synthetic_vae, frames_dir;
  uint64_t seed = 0;
  int crf = 18;
  bool no_tiling = false;
};

// Registers the flags on `sub`; `frames_dir`: also --frames-dir (per-run, so generate only).
void add_decoder_options(CLI::App* sub, DecoderArgs& args, bool frames_dir);
// Copies them into the load-time options (and, for generate, the request's frames folder).
// kInvalidArgument for a --synthetic-vae other than tiny or full.
Status apply_decoder_args(const DecoderArgs& args, PipelineOptions& options);

}  // namespace vortex::cli
