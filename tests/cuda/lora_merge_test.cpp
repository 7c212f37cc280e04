// GPU test of CudaBackend::lora_merge against the CPU backend's (ref::lora_merge) bytes for both programs
// (kSingleRounding: FP64 ascending-rank sum, one rounding; kPeft: FP32 FMA chain, BF16 delta, BF16 add): ragged
// weights around the 64 x 64 tile and the 16-rank chunk, ranks 1..128, row offsets (the q/k/v thirds of a split
// file), negative and tiny scales, FP32 factors that are not BF16 values, weights with +-0, denormals, inf/NaN, and a
// canonical-width rank-128 part. Rows outside the part, and the sentinel tail, must keep their bytes. Label gpu.
#include <gtest/gtest.h>

#include "cuda_test_util.h"

namespace vortex {
namespace {

using cuda_test::Fill;

Tensor random_f32(Shape shape, std::mt19937_64& rng, float sd) {
  Tensor t = Tensor::empty(shape, DType::kF32);
  std::normal_distribution<float> n(0.0f, sd);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = n(rng);
  return t;
}

TEST(CudaLoraMerge, BothProgramsMatchTheCpuMergeByteForByte) {
  std::unique_ptr<CudaBackend> gpu;
  VORTEX_REQUIRE_CUDA(gpu);
  const uint64_t seed = cuda_test::fresh_seed();
  std::mt19937_64 rng(seed);
  CpuBackend cpu(0);
  struct Case {
    int64_t n, k, r, row_offset, rows;
    double scale;
    Fill fill;
  };
  const std::vector<Case> cases = {
      {37, 70, 3, 5, 20, 0.5, Fill::kNormal},
      {64, 64, 16, 0, 64, 1.0, Fill::kOddMantissa},
      {65, 129, 17, 0, 65, -0.0625, Fill::kDynamicRange},
      {300, 200, 128, 100, 100, 1.0 / 16, Fill::kNormal},
      {96, 40, 1, 64, 32, 3.0, Fill::kSpecial},
      {1, 1, 2, 0, 1, 1e-3, Fill::kNormal},
      {1024, 5376, 128, 0, 1024, 1.0, Fill::kNormal},
  };
  for (const Case& c : cases) {
    for (LoraMergeProgram program : {LoraMergeProgram::kSingleRounding, LoraMergeProgram::kPeft}) {
      SCOPED_TRACE("W [" + std::to_string(c.n) + ", " + std::to_string(c.k) + "] r " + std::to_string(c.r) + " rows [" +
                   std::to_string(c.row_offset) + ", +" + std::to_string(c.rows) + ") scale " +
                   std::to_string(c.scale) + (program == LoraMergeProgram::kPeft ? " peft" : " single-rounding") +
                   "; seed " + std::to_string(seed));
      Tensor w = cuda_test::random_host_bf16({c.n, c.k}, rng, c.fill);
      Tensor a = random_f32({c.r, c.k}, rng, 0.05f);
      Tensor b = random_f32({c.rows, c.r}, rng, 0.05f);
      Tensor expect = Tensor::empty(w.shape(), DType::kBF16);
      std::memcpy(expect.raw_data(), w.raw_data(), w.nbytes());
      ASSERT_OK(cpu.lora_merge(expect, a, b, c.row_offset, c.scale, program));
      // The weight in a buffer with a poisoned tail: the kernel must write only inside the part's rows.
      Result<cuda_test::Guarded> g = cuda_test::make_guarded(*gpu, c.n, c.k, c.k, DType::kBF16, &w);
      ASSERT_TRUE(g.ok()) << g.status().to_string();
      Tensor dw = g->buffer.as_strided({c.n, c.k}, {c.k, 1}).value();
      Result<Tensor> da = gpu->upload(a), db = gpu->upload(b);
      ASSERT_TRUE(da.ok() && db.ok());
      ASSERT_OK(gpu->lora_merge(dw, *da, *db, c.row_offset, c.scale, program));
      std::string oob;
      Result<Tensor> got = cuda_test::read_guarded(*gpu, *g, &oob);
      ASSERT_TRUE(got.ok()) << got.status().to_string();
      EXPECT_TRUE(oob.empty()) << oob;
      const std::string diff = cuda_test::compare_bytes(expect, *got);
      EXPECT_TRUE(diff.empty()) << diff;
    }
  }
}

TEST(CudaLoraMerge, RejectsBadParts) {
  std::unique_ptr<CudaBackend> gpu;
  VORTEX_REQUIRE_CUDA(gpu);
  std::mt19937_64 rng(cuda_test::fresh_seed());
  Tensor w = gpu->upload(cuda_test::random_host_bf16({8, 16}, rng, Fill::kNormal)).value();
  Tensor a = gpu->upload(random_f32({4, 16}, rng, 0.1f)).value();
  Tensor b = gpu->upload(random_f32({8, 4}, rng, 0.1f)).value();
  Tensor a_wrong = gpu->upload(random_f32({4, 15}, rng, 0.1f)).value();
  EXPECT_EQ(gpu->lora_merge(w, a, b, 1, 1.0, LoraMergeProgram::kSingleRounding).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(gpu->lora_merge(w, a_wrong, b, 0, 1.0, LoraMergeProgram::kSingleRounding).code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(gpu->lora_merge(w, a, b, 0, std::nan(""), LoraMergeProgram::kPeft).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(gpu->lora_merge(w, b, a, 0, 1.0, LoraMergeProgram::kPeft).code(), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace vortex
