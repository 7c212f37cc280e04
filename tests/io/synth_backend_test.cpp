// synthesize_weights on a real backend (cpu here; cuda in synth_backend_gpu_test) gives exactly the
// bytes of a file written by `vortex synth` (write_synthetic_checkpoint) and loaded with
// load_checkpoint onto the same backend, for both layouts. The GPU variant skips visibly when no
// CUDA device is present. Backend chosen at compile time (VORTEX_TEST_BACKEND_CUDA selects cuda).
#include <cstring>

#include <gtest/gtest.h>

#include "gpu_test.h"
#include "io/checkpoint.h"
#include "io/synth_checkpoint.h"
#include "model/h3_spec.h"
#include "test_files.h"

// Distinct suite names so CTest keeps the two executables' cases apart.
#if defined(VORTEX_TEST_BACKEND_CUDA)
#define VORTEX_TEST_BACKEND "cuda"
#define VORTEX_SYNTH_SUITE SynthBackendCudaTest
#else
#define VORTEX_TEST_BACKEND "cpu"
#define VORTEX_SYNTH_SUITE SynthBackendCpuTest
#endif

namespace vortex {
namespace {

TEST(VORTEX_SYNTH_SUITE, SynthesizedEqualsSynthFileLoaded) {
  Result<std::unique_ptr<Backend>> made = make_backend(VORTEX_TEST_BACKEND);
  if (std::string(VORTEX_TEST_BACKEND) == "cuda") VORTEX_SKIP_NO_GPU_OR_FAIL(made.status());
  ASSERT_TRUE(made.ok()) << "backend " << VORTEX_TEST_BACKEND << " unavailable: " << made.status().to_string();
  std::unique_ptr<Backend> backend = std::move(made).value();
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed) + " backend " + VORTEX_TEST_BACKEND);
  const ModelConfig config = ModelConfig::h3_tiny();
  Result<H3Weights> synth = synthesize_weights(config, *backend, seed);
  ASSERT_TRUE(synth.ok()) << synth.status().to_string();
  for (CheckpointLayout layout : {CheckpointLayout::kOriginal, CheckpointLayout::kComfy}) {
    testing::TempDir dir;
    SynthCheckpointOptions opt;
    opt.config = config;
    opt.out = dir.path + "/m.safetensors";
    opt.seed = seed;
    opt.layout = layout;
    ASSERT_TRUE(write_synthetic_checkpoint(opt).ok());
    Result<H3Weights> loaded = load_checkpoint(opt.out, config, *backend);
    ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
    auto a = h3_tensor_slots(*synth);
    auto b = h3_tensor_slots(*loaded);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      Tensor ha = Tensor::empty(a[i].second->shape(), a[i].second->dtype());
      Tensor hb = Tensor::empty(b[i].second->shape(), b[i].second->dtype());
      std::memset(ha.raw_data(), 0x5A, ha.nbytes());  // poison before download
      std::memset(hb.raw_data(), 0xA5, hb.nbytes());
      ASSERT_TRUE(backend->download(*a[i].second, ha).ok()) << a[i].first;
      ASSERT_TRUE(backend->download(*b[i].second, hb).ok()) << b[i].first;
      EXPECT_EQ(std::memcmp(ha.raw_data(), hb.raw_data(), ha.nbytes()), 0)
          << a[i].first << " differs (layout " << checkpoint_layout_name(layout) << ")";
    }
  }
}

}  // namespace
}  // namespace vortex
