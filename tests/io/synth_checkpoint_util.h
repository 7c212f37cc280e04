// Test helper shared by checkpoint_test.cpp and the quantization tests (quantize_test_util.h): writes a
// deterministic synthetic h3-tiny checkpoint with write_synthetic_checkpoint (the `vortex synth` engine).
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "io/synth_checkpoint.h"
#include "model/h3_spec.h"

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

// Every tensor of two weight sets: same names, shapes, dtypes and bytes.
inline void expect_same_weights(H3Weights& a, H3Weights& b) {
  auto sa = h3_tensor_slots(a);
  auto sb = h3_tensor_slots(b);
  ASSERT_EQ(sa.size(), sb.size());
  for (size_t i = 0; i < sa.size(); ++i) {
    const Tensor& x = *sa[i].second;
    const Tensor& y = *sb[i].second;
    ASSERT_TRUE(x.defined() && y.defined()) << sa[i].first;
    ASSERT_EQ(x.shape(), y.shape()) << sa[i].first;
    ASSERT_EQ(x.dtype(), y.dtype()) << sa[i].first;
    EXPECT_EQ(std::memcmp(x.raw_data(), y.raw_data(), x.nbytes()), 0) << sa[i].first << " differs";
  }
}

}  // namespace vortex
