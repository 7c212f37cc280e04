// cast reference: f32 -> bf16 round-to-nearest-even including exact ties, NaN canonicalisation and inf,
// bf16 -> f32 exact round trip of every BF16 pattern, strided/transposed views, rank-3 tensors, bad pairs.
#include <cmath>
#include <limits>

#include "ref/ref_ops.h"
#include "ref_test_util.h"

namespace vortex {
namespace {

TEST(Cast, TiesNanInfAndRoundTrip) {
  Tensor f = Tensor::empty({1, 6}, DType::kF32);
  float* p = f.data<float>();
  p[0] = 1.0f + std::ldexp(1.0f, -8);      // tie -> even (1.0)
  p[1] = 1.0f + 3 * std::ldexp(1.0f, -8);  // tie -> even (1 + 2^-6)
  p[2] = std::numeric_limits<float>::infinity();
  p[3] = -std::numeric_limits<float>::quiet_NaN();
  p[4] = -0.0f;
  p[5] = 1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20);  // above the tie -> up
  Tensor b = Tensor::empty({1, 6}, DType::kBF16);
  ASSERT_TRUE(ref::cast(f, b).ok());
  const uint16_t* q = b.data<uint16_t>();
  EXPECT_EQ(q[0], 0x3F80);
  EXPECT_EQ(q[1], 0x3F82);
  EXPECT_EQ(q[2], 0x7F80);
  EXPECT_EQ(q[3], 0x7FFF);
  EXPECT_EQ(q[4], 0x8000);
  EXPECT_EQ(q[5], 0x3F81);
  Tensor all = Tensor::empty({256, 256}, DType::kBF16), back = Tensor::empty({256, 256}, DType::kF32);
  for (int i = 0; i < 65536; ++i) all.data<uint16_t>()[i] = static_cast<uint16_t>(i);
  ASSERT_TRUE(ref::cast(all, back).ok());
  Tensor again = Tensor::empty({256, 256}, DType::kBF16);
  ASSERT_TRUE(ref::cast(back, again).ok());
  for (int i = 0; i < 65536; ++i) {
    if (std::isnan(back.data<float>()[i])) continue;
    EXPECT_EQ(again.data<uint16_t>()[i], i);
  }
}

TEST(Cast, StridedAndTransposedViews) {
  const uint64_t seed = test::fresh_seed();
  std::mt19937_64 rng(seed);
  Tensor src = test::random_f32({4, 5, 6}, rng);
  Tensor t = src.as_strided({6, 5, 4}, {1, 6, 30}).value();  // full transpose
  Tensor dst = Tensor::empty({6, 5, 4}, DType::kBF16);
  test::poison(dst);
  ASSERT_TRUE(ref::cast(t, dst).ok());
  for (int a = 0; a < 6; ++a)
    for (int b = 0; b < 5; ++b)
      for (int c = 0; c < 4; ++c)
        EXPECT_EQ(dst.data<uint16_t>()[(a * 5 + b) * 4 + c],
                  bf16_bits_from_f32(src.data<float>()[(c * 5 + b) * 6 + a]));
  Tensor wrong = Tensor::empty({6, 5, 4}, DType::kI32);
  EXPECT_EQ(ref::cast(t, wrong).code(), ErrorCode::kUnsupported);
  Tensor wrong_shape = Tensor::empty({6, 20}, DType::kBF16);
  EXPECT_EQ(ref::cast(t, wrong_shape).code(), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace vortex
