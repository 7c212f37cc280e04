// Two-reference rule helper: the FP32 flash program passes against itself and against the FP64 oracle
// structure; a perturbed "kernel" fails; NaN never passes; mismatched shapes are rejected.
#include <cmath>
#include <limits>

#include "ref/ref_ops.h"
#include "ref/two_reference.h"
#include "ref_test_util.h"

namespace vortex {
namespace {

TEST(TwoReferenceRule, PassFailAndNan) {
  const uint64_t seed = test::fresh_seed();
  std::mt19937_64 rng(seed);
  const int64_t s = 150;
  const int heads = 2, hd = 32, inner = 64;
  Tensor buf = test::random_bf16({s, 3 * inner}, rng, 1.5);
  Tensor q = buf.as_strided({s, inner}, {3 * inner, 1}, 0).value();
  Tensor k = buf.as_strided({s, inner}, {3 * inner, 1}, inner).value();
  Tensor v = buf.as_strided({s, inner}, {3 * inner, 1}, 2 * inner).value();
  Tensor exact = Tensor::empty({s, inner}, DType::kBF16), flash = Tensor::empty({s, inner}, DType::kBF16);
  Tensor other_blocks = Tensor::empty({s, inner}, DType::kBF16);
  ASSERT_TRUE(ref::attention(q, k, v, heads, hd, exact).ok());
  ASSERT_TRUE(ref::attention_flash_fp32(q, k, v, heads, hd, flash, 128).ok());
  ASSERT_TRUE(ref::attention_flash_fp32(q, k, v, heads, hd, other_blocks, 64).ok());  // a "kernel" with other tiles
  auto ok = ref::two_reference_rule(other_blocks, exact, flash);
  ASSERT_TRUE(ok.ok());
  std::printf("%s\n", ok->to_string().c_str());
  EXPECT_TRUE(ok->pass) << ok->to_string() << " " << test::seed_msg(seed);
  Tensor bad = Tensor::empty({s, inner}, DType::kF32);
  for (int64_t i = 0; i < s * inner; ++i) bad.data<float>()[i] = test::bf(flash.data<uint16_t>()[i]) * 1.05f + 0.01f;
  auto fail = ref::two_reference_rule(bad, exact, flash);
  ASSERT_TRUE(fail.ok());
  EXPECT_FALSE(fail->pass) << fail->to_string();
  bad.data<float>()[7] = std::numeric_limits<float>::quiet_NaN();
  auto nan = ref::two_reference_rule(bad, exact, exact);
  ASSERT_TRUE(nan.ok());
  EXPECT_TRUE(nan->kernel_has_nan);
  EXPECT_FALSE(nan->pass);
  EXPECT_EQ(ref::two_reference_rule(Tensor::empty({2, 2}, DType::kF32), exact, flash).status().code(),
            ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace vortex
