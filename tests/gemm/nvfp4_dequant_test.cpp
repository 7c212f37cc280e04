// NVFP4 dequantization reference on the CPU (no GPU needed): the exactness claim behind the Hopper W4A4
// emulation (every e2m1 * e4m3 product is a BF16 value, exhaustively), the hi-first nibble order and the
// 128x4 scale tiling of ref::nvfp4_dequantized_value on hand-built bytes, the quantize -> dequantize error
// bound on random data, and the weight-only link: io's dequantize_linear_bf16 == R(g * e2m1 * e4m3).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "io/quantized_layers.h"
#include "ref/nvfp4_quantize.h"
#include "vortex/dtype.h"

namespace vortex {
namespace {

uint64_t fresh_seed() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

TEST(Nvfp4DequantRef, EveryCodeTimesEveryScaleIsExactInBf16) {
  int64_t checked = 0;
  for (int code = 0; code < 16; ++code) {
    for (int s = 0; s < 0x7F; ++s) {  // every non-negative, non-NaN E4M3 scale byte
      const float p = f32_from_e2m1(static_cast<uint8_t>(code)) * f32_from_e4m3(static_cast<uint8_t>(s));
      const double exact = static_cast<double>(f32_from_e2m1(static_cast<uint8_t>(code))) *
                           static_cast<double>(f32_from_e4m3(static_cast<uint8_t>(s)));
      ASSERT_EQ(static_cast<double>(p), exact) << "code " << code << " scale 0x" << std::hex << s;
      ASSERT_EQ(round_bf16(p), p) << "code " << code << " scale 0x" << std::hex << s << " = " << p;
      if (p != 0.0f) {
        ASSERT_GE(std::fabs(p), std::ldexp(1.0f, -10));
        ASSERT_LE(std::fabs(p), 2688.0f);
      }
      ++checked;
    }
  }
  EXPECT_EQ(checked, 16 * 127);
}

TEST(Nvfp4DequantRef, HiFirstNibblesAndTiledScales) {
  // 130 rows x 80 cols: two scale row tiles, two scale column tiles (blocks 0..4, padded to 8).
  const ref::Nvfp4Layout L = ref::nvfp4_layout(130, 80);
  ASSERT_EQ(L.data_rows, 144);
  ASSERT_EQ(L.data_row_bytes, 40);
  ASSERT_EQ(L.scale_rows, 256);
  ASSERT_EQ(L.scale_cols, 8);
  std::vector<uint8_t> data(L.data_bytes(), 0), scales(L.scale_bytes(), 0);
  // Row 129, elements 66 (even, high nibble) and 67 (odd, low nibble) in block 4 (second column tile).
  data[129 * 40 + 33] = static_cast<uint8_t>((0x7 << 4) | 0xB);  // +6 | -1.5
  const int64_t off = ref::nvfp4_scale_offset(129, 4, L.scale_cols);
  // Tile (1, 1) of 2 column tiles: (1 * 2 + 1) * 512; row 129 -> rr 1: (1 % 32) * 16 + (1 / 32) * 4 + 0.
  EXPECT_EQ(off, 3 * 512 + 16);
  scales[static_cast<size_t>(off)] = 0x30;  // 2^-1
  EXPECT_EQ(ref::nvfp4_dequantized_value(data.data(), scales.data(), L, 129, 66), 3.0f);
  EXPECT_EQ(ref::nvfp4_dequantized_value(data.data(), scales.data(), L, 129, 67), -0.75f);
  EXPECT_EQ(ref::nvfp4_dequantized_value(data.data(), scales.data(), L, 129, 68), 0.0f);
  EXPECT_EQ(ref::nvfp4_dequantized_value(data.data(), scales.data(), L, 128, 66), 0.0f);
}

TEST(Nvfp4DequantRef, QuantizeThenDequantizeIsWithinOneGridStep) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int64_t rows = 37, cols = 272;
  std::vector<uint16_t> x(static_cast<size_t>(rows * cols));
  for (auto& v : x) v = bf16_bits_from_f32(nd(rng) * (rng() % 8 == 0 ? 20.0f : 1.0f));
  const ref::Nvfp4Layout L = ref::nvfp4_layout(rows, cols);
  std::vector<uint8_t> data(L.data_bytes()), scales(L.scale_bytes());
  const float g = ref::nvfp4_global_scale_from_amax(ref::bf16_abs_max_bits(x.data(), rows, cols, cols));
  ASSERT_GT(g, 0.0f);
  ref::Nvfp4Options opt;
  opt.encode = ref::Nvfp4Encode::kExactDivision;
  ASSERT_TRUE(ref::nvfp4_quantize(x.data(), rows, cols, cols, g, opt, data.data(), scales.data()).ok());
  double err2 = 0, ref2 = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const float s = f32_from_e4m3(scales[static_cast<size_t>(ref::nvfp4_scale_offset(r, c / 16, L.scale_cols))]);
      const double xv = f32_from_bf16_bits(x[static_cast<size_t>(r * cols + c)]);
      const double back = static_cast<double>(g) * ref::nvfp4_dequantized_value(data.data(), scales.data(), L, r, c);
      // Largest E2M1 grid step is 2 (between 4 and 6): error <= one step of the block's grid (+ rounding slack).
      ASSERT_LE(std::fabs(xv - back), 1.0 * g * s * 1.01 + 1e-30) << "r " << r << " c " << c;
      err2 += (xv - back) * (xv - back);
      ref2 += xv * xv;
    }
  const double rel = std::sqrt(err2 / ref2);
  std::printf("[nvfp4 round trip] rel-L2 %.4f\n", rel);
  EXPECT_LT(rel, 0.2);
  EXPECT_GT(rel, 0.0);
}

TEST(Nvfp4DequantRef, WeightOnlyExpansionIsGTimesTheExactValue) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 0.02f);
  const int64_t n = 40, k = 96;
  std::vector<uint16_t> w(static_cast<size_t>(n * k));
  for (auto& v : w) v = bf16_bits_from_f32(nd(rng));
  const ref::Nvfp4Layout L = ref::nvfp4_layout(n, k);
  LinearWeight lw;
  lw.format = QuantFormat::kNvfp4;
  lw.out_features = n;
  lw.in_features = k;
  lw.weight = Tensor::empty(nvfp4_weight_shape(n, k), DType::kU8);
  lw.weight_scale = Tensor::empty(nvfp4_weight_scale_shape(n, k), DType::kF8E4M3);
  lw.weight_scale_2 = Tensor::empty({1}, DType::kF32);
  const float g = ref::nvfp4_global_scale_from_amax(ref::bf16_abs_max_bits(w.data(), n, k, k));
  lw.weight_scale_2.data<float>()[0] = g;
  ref::Nvfp4Options opt;
  opt.encode = ref::Nvfp4Encode::kExactDivision;
  ASSERT_TRUE(
      ref::nvfp4_quantize(w.data(), n, k, k, g, opt, lw.weight.data<uint8_t>(), lw.weight_scale.data<uint8_t>()).ok());
  auto bf = dequantize_linear_bf16(lw);
  ASSERT_TRUE(bf.ok()) << bf.status().to_string();
  ASSERT_EQ(bf->shape(), (Shape{n, k}));
  const uint16_t* out = bf->data<uint16_t>();
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < k; ++c) {
      const float e2m1 = f32_from_e2m1(
          static_cast<uint8_t>(c % 2 == 0 ? lw.weight.data<uint8_t>()[r * L.data_row_bytes + c / 2] >> 4
                                          : lw.weight.data<uint8_t>()[r * L.data_row_bytes + c / 2] & 0xF));
      const float s = f32_from_e4m3(lw.weight_scale.data<uint8_t>()[ref::nvfp4_scale_offset(r, c / 16, L.scale_cols)]);
      ASSERT_EQ(out[r * k + c], bf16_bits_from_f32(e2m1 * (s * g))) << "r " << r << " c " << c;
    }
}

}  // namespace
}  // namespace vortex
