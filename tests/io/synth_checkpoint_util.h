// Test helper shared by checkpoint_test.cpp and the quantization tests (quantize_test_util.h): writes a
// deterministic synthetic h3-tiny checkpoint with write_synthetic_checkpoint (the `vortex synth` engine).
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "io/synth_checkpoint.h"

namespace vortex {

// Writes a synthetic h3-tiny checkpoint into `dir`; returns the last weights file or the index
// (config.json is the last file written).
inline std::string write_synth(const std::string& dir, uint64_t seed, CheckpointLayout layout, double shard_gb = 0,
                               const std::string& name = "model.safetensors") {
  SynthCheckpointOptions opt;
  opt.config = ModelConfig::h3_tiny();
  opt.out = dir + "/" + name;
  opt.seed = seed;
  opt.layout = layout;
  opt.shard_size_gb = shard_gb;
  Result<std::vector<std::string>> r = write_synthetic_checkpoint(opt);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? (*r)[r->size() - 2] : "";
}

}  // namespace vortex
