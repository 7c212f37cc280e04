// The vision tower's BF16 program on the CUDA backend (VisionTower::from_source with a backend) against
// transformers' BF16 Qwen3VLVisionModel on the tiny fixtures (tests/vision/make_vision_bf16_fixtures.py): vision
// tokens, DeepStack features and the blocks' output within 2x the floor (transformers BF16 vs FP32), and close to
// the same program on the cpu backend. Label gpu; skips without a device.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cuda/cuda_backend.h"
#include "gpu_test.h"
#include "io/safetensors.h"
#include "ref/cpu_backend.h"
#include "vae/vae_checkpoint.h"
#include "vision/vision_tower.h"
#include "vision_test_util.h"

namespace vortex {
namespace {

// The fixtures folder: $VORTEX_VISION_FIXTURES when set (a GPU machine with the tree elsewhere), else the build's.
const std::string kDir = [] {
  const char* env = std::getenv("VORTEX_VISION_FIXTURES");
  return std::string(env && *env ? env : VORTEX_VISION_FIXTURES);
}();

TEST(VisionTowerCuda, Bf16ProgramWithinTwiceTheFloor) {
  auto gpu = CudaBackend::create(0);
  VORTEX_SKIP_NO_GPU_OR_FAIL(gpu.status());
  CpuBackend cpu_backend(0);
  CpuBackend* cpu = &cpu_backend;
  auto weights = SafetensorsSet::open(kDir + "/model/model.safetensors");
  auto cases = SafetensorsFile::open(kDir + "/cases.safetensors");
  auto bf16 = SafetensorsFile::open(kDir + "/cases_bf16.safetensors");
  ASSERT_TRUE(weights.ok() && cases.ok() && bf16.ok());
  auto root = ConfigJson::read_file(kDir + "/model/config.json");
  ASSERT_TRUE(root.ok()) << root.status().to_string();
  auto cfg = VisionConfig::from_json(*root);
  ASSERT_TRUE(cfg.ok()) << cfg.status().to_string();
  const SafetensorsSet* w = &*weights;
  VaeTensorSource source = [w](const std::string& name, const Shape& shape) -> Result<Tensor> {
    VORTEX_ASSIGN_OR_RETURN(Tensor t, w->tensor(name));
    if (t.shape() != shape) return format_error(name + ": shape " + t.describe());
    return to_f32_host(t, name);
  };
  auto on_gpu = VisionTower::from_source(*cfg, source, gpu->get());
  auto on_cpu = VisionTower::from_source(*cfg, source, cpu);
  ASSERT_TRUE(on_gpu.ok()) << on_gpu.status().to_string();
  ASSERT_TRUE(on_cpu.ok()) << on_cpu.status().to_string();
  const nlohmann::json meta = nlohmann::json::parse(std::ifstream(kDir + "/meta.json"));
  for (const auto& [name, c] : meta["cases"].items()) {
    SCOPED_TRACE(name);
    VisionInput in;
    auto px = cases->tensor(name + ".pixel_values");
    ASSERT_TRUE(px.ok());
    in.pixel_values = *px;
    in.grid_h = c["grid_thw"][1].get<int>();
    in.grid_w = c["grid_thw"][2].get<int>();
    for (int rep = 0; rep < 2; ++rep) {  // the second run reuses the cached grid tables
      auto g = on_gpu->forward(in);
      auto h = on_cpu->forward(in);
      ASSERT_TRUE(g.ok()) << g.status().to_string();
      ASSERT_TRUE(h.ok()) << h.status().to_string();
      ASSERT_EQ(g->deepstack.size(), 2u);
      std::vector<std::tuple<std::string, const Tensor*, const Tensor*>> outs = {
          {"merged", &g->merged, &h->merged}, {"last_hidden", &g->last_hidden, &h->last_hidden}};
      for (int k = 0; k < 2; ++k)
        outs.emplace_back("deepstack." + std::to_string(k), &g->deepstack[static_cast<size_t>(k)],
                          &h->deepstack[static_cast<size_t>(k)]);
      for (const auto& [key, ours, cpu_out] : outs) {
        auto theirs = bf16->tensor(name + "." + key);
        auto fp32 = cases->tensor(name + "." + key);
        ASSERT_TRUE(theirs.ok() && fp32.ok()) << key;
        ASSERT_EQ(ours->shape(), theirs->shape()) << key;
        const double floor = test::rel_l2_f32(*theirs, *fp32), err = test::rel_l2_f32(*ours, *theirs),
                     vs_cpu = test::rel_l2_f32(*ours, *cpu_out);
        std::printf("%s %s: CUDA vs transformers BF16 rel-L2 %.3g (floor %.3g); CUDA vs cpu backend %.3g\n",
                    name.c_str(), key.c_str(), err, floor, vs_cpu);
        EXPECT_GT(floor, 0.0);
        EXPECT_LE(err, 2 * floor) << key;
        EXPECT_LE(vs_cpu, floor) << key;
      }
    }
  }
  // Both cases and a second image of the first size (negated) in one call: equal sizes take one batched attention
  // call, different sizes one per image. Each image's slice is within the first case's merged floor (transformers
  // BF16 vs FP32) of its own forward on the GPU: the GEMMs over more rows may take other cuBLASLt algorithms.
  std::vector<VisionInput> batch;
  double merged_floor = 0;
  for (const auto& [name, c] : meta["cases"].items()) {
    VisionInput in;
    auto px = cases->tensor(name + ".pixel_values");
    ASSERT_TRUE(px.ok());
    in.pixel_values = *px;
    in.grid_h = c["grid_thw"][1].get<int>();
    in.grid_w = c["grid_thw"][2].get<int>();
    if (batch.empty()) {
      auto theirs = bf16->tensor(name + ".merged");
      auto fp32 = cases->tensor(name + ".merged");
      ASSERT_TRUE(theirs.ok() && fp32.ok());
      merged_floor = test::rel_l2_f32(*theirs, *fp32);
    }
    batch.push_back(in);
  }
  VisionInput negated = batch.front();
  negated.pixel_values = Tensor::empty(batch.front().pixel_values.shape(), DType::kF32);
  for (int64_t i = 0; i < negated.pixel_values.numel(); ++i)
    negated.pixel_values.data<float>()[i] = -batch.front().pixel_values.data<float>()[i];
  for (const std::vector<VisionInput>& group :
       {std::vector<VisionInput>{batch.front(), negated}, std::vector<VisionInput>{batch.front(), batch.back()}}) {
    auto together = on_gpu->forward(group);
    ASSERT_TRUE(together.ok()) << together.status().to_string();
    int64_t at = 0;
    for (const VisionInput& in : group) {
      auto alone = on_gpu->forward(in);
      ASSERT_TRUE(alone.ok()) << alone.status().to_string();
      auto slice = together->merged.narrow(0, at, alone->merged.dim(0));
      ASSERT_TRUE(slice.ok());
      Tensor part = Tensor::empty(alone->merged.shape(), DType::kF32);
      std::memcpy(part.data<float>(), slice->data<float>(), part.nbytes());
      const double err = test::rel_l2_f32(part, alone->merged);
      std::printf("batched vs alone, rows %lld..: merged rel-L2 %.3g\n", static_cast<long long>(at), err);
      EXPECT_LE(err, merged_floor);
      at += alone->merged.dim(0);
    }
    EXPECT_EQ(at, together->merged.dim(0));
  }
}

}  // namespace
}  // namespace vortex
