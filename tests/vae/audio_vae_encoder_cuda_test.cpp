// The audio VAE encoder on the CUDA backend (AudioVaeEncoder::load with a backend) against diffusers 0.42.1 on the
// tiny fixtures (tests/vae/make_audio_encoder_fixtures.py): the posterior mean within 2x diffusers' FP32 floor
// (FP32 vs FP64), the Ref2VA rows within the CPU test's allowance, and the CPU reference within the floor (the
// kernels are its program except libdevice's FP64 sin / tanh / exp). Label gpu; skips without a device.
#include <cstdio>
#include <cstring>

#include <gtest/gtest.h>

#include "audio_encoder_test_util.h"
#include "cuda/cuda_backend.h"
#include "gpu_test.h"
#include "vae/audio_vae_encoder.h"

namespace vortex {
namespace {

using audio_encoder_test::cases;
using audio_encoder_test::dir;
using audio_encoder_test::Err;
using audio_encoder_test::error_vs;
using vae_test::get;

TEST(AudioVaeEncoderCuda, WithinTwiceTheFloorAndCloseToTheReference) {
  auto gpu = CudaBackend::create(0);
  VORTEX_SKIP_NO_GPU_OR_FAIL(gpu.status());
  auto reference = AudioVaeEncoder::load(dir() + "/audio_vae");
  auto on_gpu = AudioVaeEncoder::load(dir() + "/audio_vae", gpu->get());
  ASSERT_TRUE(reference.ok()) << reference.status().to_string();
  ASSERT_TRUE(on_gpu.ok()) << on_gpu.status().to_string();
  ASSERT_EQ(on_gpu->backend(), gpu->get());
  int checked = 0;
  for (const std::string name : {"short", "long"}) {
    SCOPED_TRACE(name);
    const Tensor audio = get(cases(), name + ".audio");
    const Tensor want = get(cases(), name + ".mean"), truth = get(cases(), name + ".mean64");
    for (int rep = 0; rep < 2; ++rep) {  // a second encode reuses the uploaded weights
      auto got = on_gpu->encode_mean(audio);
      auto cpu = reference->encode_mean(audio);
      ASSERT_TRUE(got.ok()) << got.status().to_string();
      ASSERT_TRUE(cpu.ok()) << cpu.status().to_string();
      ASSERT_EQ(got->shape(), want.shape());
      const Err ours = error_vs<double>(*got, truth), floor = error_vs<double>(want, truth);
      const Err vs_cpu = error_vs<float>(*got, *cpu);
      int64_t equal = 0;
      for (int64_t i = 0; i < cpu->numel(); ++i)
        equal += std::memcmp(got->data<float>() + i, cpu->data<float>() + i, sizeof(float)) == 0;
      std::printf(
          "%s mean on CUDA: vs FP64 max %.3g rms %.3g; floor max %.3g rms %.3g; vs the CPU reference max %.3g"
          " (%lld of %lld equal)\n",
          name.c_str(), ours.max_abs, ours.rms, floor.max_abs, floor.rms, vs_cpu.max_abs, static_cast<long long>(equal),
          static_cast<long long>(cpu->numel()));
      EXPECT_GT(floor.max_abs, 0.0);
      EXPECT_LE(ours.rms, 2 * floor.rms);
      EXPECT_LE(ours.max_abs, 2 * floor.max_abs);
      EXPECT_LE(vs_cpu.max_abs, floor.max_abs);
      ++checked;
    }
    auto rows = on_gpu->encode_condition(audio);
    ASSERT_TRUE(rows.ok()) << rows.status().to_string();
    const Tensor want_rows = get(cases(), name + ".rows");
    ASSERT_EQ(rows->shape(), want_rows.shape());
    const auto& stdv = on_gpu->config().latents_std;
    const double min_std = *std::min_element(stdv.begin(), stdv.end());
    const Err diff = error_vs<float>(*rows, want_rows), floor = error_vs<double>(want, truth);
    EXPECT_LE(diff.max_abs, 2 * 2 * floor.max_abs / min_std);
  }
  EXPECT_EQ(checked, 4);
  Tensor nan = Tensor::empty({2, 10}, DType::kF32);
  for (int i = 0; i < 20; ++i) nan.data<float>()[i] = i == 3 ? NAN : 0.0f;
  EXPECT_FALSE(on_gpu->encode_mean(nan).ok());
}

}  // namespace
}  // namespace vortex
