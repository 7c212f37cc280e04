// What the vision tests (tests/vision/*_test.cpp) share: the relative L2 distance of two f32 tensors, the measure
// their parity checks hold against twice the BF16 floor, and the vision tower of a tiny Qwen3-VL model folder.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include "core/config_json.h"
#include "io/safetensors.h"
#include "vae/vae_checkpoint.h"
#include "vision/vision_tower.h"
#include "vortex/tensor.h"

namespace vortex::test {

// ||a - b|| / ||b|| over two f32 tensors of one shape.
inline double rel_l2_f32(const Tensor& a, const Tensor& b) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < b.numel(); ++i) {
    const double d = static_cast<double>(a.data<float>()[i]) - b.data<float>()[i];
    num += d * d;
    den += static_cast<double>(b.data<float>()[i]) * b.data<float>()[i];
  }
  return std::sqrt(num / den);
}

// The vision tower of a Qwen3-VL model folder (config.json and model.safetensors.index.json), its BF16 checkpoint
// read as FP32; on `backend`, or the FP32 CPU reference when it is nullptr. from_source reads every weight before it
// returns, so the checkpoint is closed after.
inline Result<VisionTower> tower_from_model_folder(const std::string& model, Backend* backend = nullptr) {
  VORTEX_ASSIGN_OR_RETURN(SafetensorsSet weights, SafetensorsSet::open(model + "/model.safetensors.index.json"));
  VORTEX_ASSIGN_OR_RETURN(ConfigJson root, ConfigJson::read_file(model + "/config.json"));
  VORTEX_ASSIGN_OR_RETURN(VisionConfig cfg, VisionConfig::from_json(root));
  const SafetensorsSet* w = &weights;
  return VisionTower::from_source(
      cfg,
      [w](const std::string& name, const Shape& shape) -> Result<Tensor> {
        if (!w->find(name)) return not_found("no tensor " + name);
        VORTEX_ASSIGN_OR_RETURN(Tensor t, w->tensor(name));
        if (t.shape() != shape) return format_error(name + " is " + t.describe());
        return to_f32_host(t, name);
      },
      backend);
}

}  // namespace vortex::test
