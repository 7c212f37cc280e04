// Helpers shared by the quantization tests (quantize_layers_test.cpp, quantize_roundtrip_test.cpp):
// deterministic synthetic h3-tiny checkpoints, and the same weights quantized in both QKV layouts.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "io/checkpoint.h"
#include "io/quantize.h"
#include "io/safetensors.h"
#include "io/synth_checkpoint.h"
#include "synth_checkpoint_util.h"

namespace vortex {

// The same synthetic weights (seed) in the original layout (dir/a) and the ComfyUI layout (dir/b), each
// quantized with `opt` (its in/out are set here); returns the two opened results {original, comfy}.
inline Result<std::pair<SafetensorsSet, SafetensorsSet>> quantize_both_layouts(const std::string& dir, uint64_t seed,
                                                                               QuantizeOptions opt) {
  std::pair<std::string, CheckpointLayout> sides[2] = {{dir + "/a", CheckpointLayout::kOriginal},
                                                       {dir + "/b", CheckpointLayout::kComfy}};
  for (const auto& [sub, layout] : sides) {
    std::filesystem::create_directories(sub);
    opt.in = write_synth(sub, seed, layout);
    opt.out = sub + "/q.safetensors";
    VORTEX_RETURN_IF_ERROR(quantize_checkpoint(opt).status());
  }
  VORTEX_ASSIGN_OR_RETURN(SafetensorsSet a, SafetensorsSet::open(dir + "/a/q.safetensors"));
  VORTEX_ASSIGN_OR_RETURN(SafetensorsSet b, SafetensorsSet::open(dir + "/b/q.safetensors"));
  return std::make_pair(std::move(a), std::move(b));
}

}  // namespace vortex
