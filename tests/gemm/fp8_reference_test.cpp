// Host FP8 quantizer reference (CPU): scale rule (amax/448, zero -> 1), saturation, RNE bytes vs an
// independent E4M3 grid search, 1x128 / 128x128 scale layouts and padding, and the quantization error
// bound (|x - q*s| <= half an E4M3 step). Also the pinned GEMM table JSON round trip and strictness.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "gemm/fp8_reference.h"
#include "gemm/gemm_table.h"
#include "vortex/dtype.h"

namespace vortex {
namespace {

// Nearest E4M3 value by exhaustive search over the 254 finite codes (ties to even code), saturating.
uint8_t e4m3_by_search(float x) {
  if (std::isnan(x)) return 0x7F;
  uint8_t best = 0;
  double best_err = 1e300;
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7F) == 0x7F) continue;
    const double v = f32_from_e4m3(static_cast<uint8_t>(c));
    const double err = std::fabs(v - static_cast<double>(x));
    const bool sign_ok = (c & 0x80) == (std::signbit(x) ? 0x80 : 0);
    if (!sign_ok) continue;
    if (err < best_err || (err == best_err && (c & 1) == 0)) {
      best_err = err;
      best = static_cast<uint8_t>(c);
    }
  }
  return best;
}

TEST(Fp8Reference, ScaleRule) {
  EXPECT_EQ(fp8_scale_from_amax(0.0f), 1.0f);
  EXPECT_EQ(fp8_scale_from_amax(448.0f), 1.0f);
  EXPECT_EQ(fp8_scale_from_amax(896.0f), 2.0f);
  // amax maps to exactly 448 (or saturates to it): the max element is never lost.
  for (float amax : {0.37f, 3.0f, 1234.5f, 1e-4f}) {
    const float s = fp8_scale_from_amax(amax);
    EXPECT_EQ(f32_from_e4m3(fp8_quantize_value(amax, s)), 448.0f) << amax;
    EXPECT_EQ(f32_from_e4m3(fp8_quantize_value(-amax, s)), -448.0f) << amax;
  }
}

TEST(Fp8Reference, BytesMatchGridSearchAndErrorBound) {
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-5.f, 5.f);
  const int64_t m = 3, k = 300;
  std::vector<uint16_t> x(static_cast<size_t>(m * k));
  for (auto& v : x) v = bf16_bits_from_f32(u(rng) * std::exp2(static_cast<float>(static_cast<int>(rng() % 9) - 4)));
  std::vector<uint8_t> q(x.size());
  const float s = quantize_fp8_per_tensor_ref(x.data(), m, k, k, q.data());
  for (size_t i = 0; i < x.size(); ++i) {
    const float xv = f32_from_bf16_bits(x[i]);
    EXPECT_EQ(q[i], e4m3_by_search(xv / s)) << xv;
    const float back = f32_from_e4m3(q[i]) * s;
    // Half a step: 2^-4 relative for normals, 2^-10 * s absolute in the subnormal range.
    EXPECT_LE(std::fabs(back - xv), std::max(std::fabs(xv) * 0.0625f, std::ldexp(s, -10)) * 1.0001f) << xv;
  }
}

TEST(Fp8Reference, RowBlockLayoutAndPadding) {
  const int64_t m = 5, k = 272, ld_scale = 8, groups = 3;  // last group is 16 wide
  std::vector<uint16_t> x(static_cast<size_t>(m * k));
  for (int64_t r = 0; r < m; ++r)
    for (int64_t c = 0; c < k; ++c)
      x[static_cast<size_t>(r * k + c)] =
          bf16_bits_from_f32(static_cast<float>((r + 1) * (c / 128 + 1)) * ((c % 2) ? -1.f : 1.f));
  std::vector<uint8_t> q(static_cast<size_t>(ld_scale * k), 0xEE);
  std::vector<float> s(static_cast<size_t>(groups * ld_scale), -1.f);
  quantize_fp8_rowblock128_ref(x.data(), m, k, k, q.data(), s.data(), ld_scale);
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t r = 0; r < ld_scale; ++r) {
      const float want = r < m ? static_cast<float>((r + 1) * (g + 1)) / 448.0f : 1.0f;
      EXPECT_EQ(s[static_cast<size_t>(g * ld_scale + r)], want) << "g " << g << " r " << r;
    }
  for (int64_t r = m; r < ld_scale; ++r)
    for (int64_t c = 0; c < k; ++c) EXPECT_EQ(q[static_cast<size_t>(r * k + c)], 0);
}

TEST(Fp8Reference, Block128x128LayoutAndPadding) {
  const int64_t n = 130, k = 200;  // 2 x 2 blocks, scale columns padded to 4
  std::vector<uint16_t> w(static_cast<size_t>(n * k));
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < k; ++c)
      w[static_cast<size_t>(r * k + c)] = bf16_bits_from_f32(static_cast<float>(1 + (r / 128) * 2 + (c / 128)));
  std::vector<uint8_t> q(w.size());
  std::vector<float> s(static_cast<size_t>(2 * fp8_block_scale_cols(k)));
  ASSERT_EQ(fp8_block_scale_cols(k), 4);
  quantize_fp8_block128x128_ref(w.data(), n, k, q.data(), s.data());
  EXPECT_EQ(s[0], 1.0f / 448.0f);
  EXPECT_EQ(s[1], 2.0f / 448.0f);
  EXPECT_EQ(s[2], 1.0f);
  EXPECT_EQ(s[3], 1.0f);
  EXPECT_EQ(s[4], 3.0f / 448.0f);
  EXPECT_EQ(s[5], 4.0f / 448.0f);
  for (uint8_t b : q) EXPECT_EQ(f32_from_e4m3(b), 448.0f);
}

TEST(GemmTable, RoundTripAndExactMatchOnly) {
  GemmTable t;
  GemmTableEntry e;
  e.precision = GemmPrecision::kFp8PerTensor;
  e.m = 37810;
  e.n = 5376;
  e.k = 14336;
  e.ldx = 14336;
  e.ldw = 14336;
  e.ldd = 5376;
  e.gpu = "NVIDIA H200";
  e.cublaslt_version = 130100;
  e.algo.algo_id = 70;
  e.algo.tile_id = 20;
  e.algo.stages_id = 37;
  e.algo.cluster_shape_id = 2;
  e.evidence = "benchmarks/x.json";
  t.entries.push_back(e);
  auto back = parse_gemm_table(gemm_table_to_json(t));
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  ASSERT_EQ(back->entries.size(), 1u);
  const auto* hit =
      back->find(GemmPrecision::kFp8PerTensor, 37810, 5376, 14336, 14336, 14336, 5376, false, "NVIDIA H200", 130100);
  ASSERT_NE(hit, nullptr);
  EXPECT_EQ(hit->algo.algo_id, 70);
  EXPECT_EQ(hit->algo.stages_id, 37);
  EXPECT_EQ(hit->algo.cluster_shape_id, 2);
  // Nearby shapes, other GPUs and other cuBLASLt versions never use the pin.
  EXPECT_EQ(
      back->find(GemmPrecision::kFp8PerTensor, 37812, 5376, 14336, 14336, 14336, 5376, false, "NVIDIA H200", 130100),
      nullptr);
  EXPECT_EQ(
      back->find(GemmPrecision::kFp8PerTensor, 37810, 5376, 14336, 14336, 14336, 5376, false, "NVIDIA H100", 130100),
      nullptr);
  EXPECT_EQ(
      back->find(GemmPrecision::kFp8PerTensor, 37810, 5376, 14336, 14336, 14336, 5376, false, "NVIDIA H200", 130000),
      nullptr);
  EXPECT_EQ(back->find(GemmPrecision::kBf16, 37810, 5376, 14336, 14336, 14336, 5376, false, "NVIDIA H200", 130100),
            nullptr);
}

TEST(GemmTable, MalformedIsFormatError) {
  EXPECT_EQ(parse_gemm_table("{").status().code(), ErrorCode::kFormat);
  EXPECT_EQ(parse_gemm_table("{\"schema\":\"other\",\"entries\":[]}").status().code(), ErrorCode::kFormat);
  auto missing = parse_gemm_table("{\"schema\":\"vortex.gemm_table.v1\",\"entries\":[{\"precision\":\"bf16\"}]}");
  EXPECT_EQ(missing.status().code(), ErrorCode::kFormat);
  auto bad_precision = parse_gemm_table("{\"schema\":\"vortex.gemm_table.v1\",\"entries\":[{\"precision\":\"fp4\"}]}");
  EXPECT_FALSE(bad_precision.ok());
}

TEST(GemmTable, ShippedH200TableParses) {
  auto t = load_gemm_table(std::string(VORTEX_SOURCE_DIR) + "/src/gemm/tables/h200-cublaslt-130100.json");
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  ASSERT_FALSE(t->entries.empty());
  for (const auto& e : t->entries) {
    EXPECT_EQ(e.m, 37810);
    EXPECT_EQ(e.gpu, "NVIDIA H200");
    EXPECT_EQ(e.algo.splitk_num, 1) << "pins must not split K (the numerics would change)";
  }
}

// The compiled-in table (GemmEngine's default) is the shipped file, entry for entry.
TEST(GemmTable, BuiltinTableIsTheShippedFile) {
  auto file = load_gemm_table(std::string(VORTEX_SOURCE_DIR) + "/src/gemm/tables/h200-cublaslt-130100.json");
  auto builtin = builtin_gemm_table();
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  ASSERT_TRUE(builtin.ok()) << builtin.status().to_string();
  EXPECT_EQ(gemm_table_to_json(*builtin), gemm_table_to_json(*file));
}

}  // namespace
}  // namespace vortex
