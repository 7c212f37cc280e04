// Writes deterministic synthetic H3 checkpoints with the real names, shapes and dtypes
// (`vortex synth`): single file or shards + index.json, original (per-head interleaved QKV), ComfyUI
// or diffusers layout (save_pretrained names, config.json with diffusers keys), plus config.json (marked
// "vortex.written_by"). Existing files are replaced only with `overwrite` and only if Vortex wrote them;
// every file is written atomically. Streams one tensor at a time so the 66 GB h3 checkpoint never sits in
// memory. Values equal synthesize_weights() on any backend. Tested in tests/io/checkpoint_test.cpp and
// tests/cli/cli_test.cpp (refusals).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "io/checkpoint.h"
#include "vortex/config.h"

namespace vortex {

struct SynthCheckpointOptions {
  ModelConfig config;
  std::string out;  // "x.safetensors" (single file) or "x.safetensors.index.json" (sharded)
  uint64_t seed = 0;
  CheckpointLayout layout = CheckpointLayout::kOriginal;  // kOriginal, kComfy or kDiffusers
  double shard_size_gb = 0.0;  // > 0: shard at this size (GiB); 0: single file unless `out` is an index
  // Existing outputs are refused unless set, and then replaced only if Vortex wrote them (io/publish.h).
  bool overwrite = false;
};

// Returns the files written (shards, index, config.json). `progress` (optional) gets one line per
// shard and about every 2% of the bytes.
Result<std::vector<std::string>> write_synthetic_checkpoint(
    const SynthCheckpointOptions& options, const std::function<void(const std::string&)>& progress = {});

}  // namespace vortex
