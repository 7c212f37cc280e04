// modulate / rms_norm_modulate / gate_add references: vs independent FP64 formulations, exact expected bits
// from numpy (R(1 + scale) and the per-op roundings), segment boundaries (each row must read its own table
// row), rms_norm_modulate == rms_norm then modulate byte for byte, and bad segment tables rejected.
#include "ref/ref_ops.h"
#include "ref_test_util.h"

namespace vortex {
namespace {

using test::bf;

SegmentTable three_segments(int64_t s, int32_t a, int32_t b, int32_t c) {
  SegmentTable seg;
  seg.rows = s;
  seg.segments = {{0, s / 3, a}, {s / 3, s / 2, b}, {s / 2, s, c}};
  return seg;
}

TEST(Modulate, MatchesFp64FormulationPerSegment) {
  const uint64_t seed = test::fresh_seed();
  std::mt19937_64 rng(seed);
  const int64_t s = 31, d = 40, chunks = 6;
  Tensor x = test::random_bf16({s, d}, rng, 1.5);
  Tensor x0 = Tensor::empty({s, d}, DType::kBF16);
  ASSERT_TRUE(ref::cast(x, x0).ok());
  Tensor table = test::random_bf16({4, chunks * d}, rng, 0.2);
  SegmentTable seg = three_segments(s, 2, 0, 3);
  ASSERT_TRUE(ref::modulate(x, table, 3, 4, seg).ok());
  test::MatchStats st;
  for (int64_t r = 0; r < s; ++r) {
    const int trow = r < s / 3 ? 2 : (r < s / 2 ? 0 : 3);
    const uint16_t* t = table.data<uint16_t>() + trow * chunks * d;
    for (int64_t j = 0; j < d; ++j) {
      // Independent: each step in double, rounded to BF16 where the contract rounds.
      const double scale1 = bf(bf16_bits_from_f64(1.0 + bf(t[4 * d + j])));
      const double n = bf(bf16_bits_from_f64(bf(x0.data<uint16_t>()[r * d + j]) * scale1));
      st.add(x.data<uint16_t>()[r * d + j], bf16_bits_from_f64(n + bf(t[3 * d + j])));
    }
  }
  EXPECT_BF16_CLOSE_TO_ORACLE(st, test::seed_msg(seed));
}

TEST(Modulate, ExactProgramRoundings) {
  // numpy float32 + ml_dtypes: t = R(1 + scale), n = R(x * t), out = R(n + shift). Two of these eight
  // differ from a single-rounding x * (1 + scale) + shift.
  const uint16_t x[8] = {0xBF24, 0x4000, 0x3F43, 0xBF9A, 0x3D99, 0x3F14, 0xBE41, 0x3F2F};
  const uint16_t scale[8] = {0xBA2E, 0x3BDB, 0x3C6C, 0xBBDD, 0x3B05, 0xBB98, 0x3AA7, 0xBC43};
  const uint16_t shift[8] = {0xBD6D, 0xBCA1, 0x3DB8, 0x3DEB, 0xBE08, 0xBDA3, 0x3D84, 0xBE4C};
  const uint16_t want[8] = {0xBF33, 0x3FFF, 0x3F5D, 0xBF8A, 0xBD6E, 0x3EFD, 0xBDFE, 0x3EF4};
  Tensor xt = Tensor::empty({1, 8}, DType::kBF16), table = Tensor::empty({1, 16}, DType::kBF16);
  for (int j = 0; j < 8; ++j) {
    xt.data<uint16_t>()[j] = x[j];
    table.data<uint16_t>()[j] = shift[j];
    table.data<uint16_t>()[8 + j] = scale[j];
  }
  SegmentTable seg;
  seg.rows = 1;
  seg.segments = {{0, 1, 0}};
  ASSERT_TRUE(ref::modulate(xt, table, 0, 1, seg).ok());
  for (int j = 0; j < 8; ++j) EXPECT_EQ(xt.data<uint16_t>()[j], want[j]) << j;
}

TEST(RmsNormModulate, EqualsRmsNormThenModulateByteExact) {
  const uint64_t seed = test::fresh_seed();
  std::mt19937_64 rng(seed);
  for (int64_t s : {1, 5, 64}) {
    const int64_t d = 136;
    Tensor x = test::random_bf16({s, d}, rng, 3.0);
    Tensor w = test::random_bf16({d}, rng, 0.1, 1.0);
    Tensor table = test::random_bf16({6, 6 * d}, rng, 0.3);
    SegmentTable seg;
    seg.rows = s;
    seg.segments = s == 1 ? std::vector<Segment>{{0, 1, 5}} : std::vector<Segment>{{0, 1, 5}, {1, s, 1}};
    Tensor fused = Tensor::empty({s, d}, DType::kBF16), two = Tensor::empty({s, d}, DType::kBF16);
    test::poison(fused);
    ASSERT_TRUE(ref::rms_norm_modulate(x, w, 1e-5f, table, 0, 1, seg, fused).ok());
    ASSERT_TRUE(ref::rms_norm(x, w, 1e-5f, two).ok());
    ASSERT_TRUE(ref::modulate(two, table, 0, 1, seg).ok());
    EXPECT_EQ(0, std::memcmp(fused.raw_data(), two.raw_data(), fused.nbytes())) << test::seed_msg(seed);
  }
}

TEST(Modulate, RejectsBadSegments) {
  Tensor x = Tensor::empty({4, 8}, DType::kBF16), table = Tensor::empty({2, 48}, DType::kBF16);
  SegmentTable gap;
  gap.rows = 4;
  gap.segments = {{0, 2, 0}, {3, 4, 1}};
  EXPECT_EQ(ref::modulate(x, table, 0, 1, gap).code(), ErrorCode::kInvalidArgument);
  SegmentTable out_of_table;
  out_of_table.rows = 4;
  out_of_table.segments = {{0, 4, 2}};
  EXPECT_EQ(ref::modulate(x, table, 0, 1, out_of_table).code(), ErrorCode::kInvalidArgument);
  SegmentTable ok;
  ok.rows = 4;
  ok.segments = {{0, 4, 1}};
  EXPECT_EQ(ref::modulate(x, table, 0, 6, ok).code(), ErrorCode::kInvalidArgument);  // chunk 6 of 6
  Tensor bad_table = Tensor::empty({2, 47}, DType::kBF16);
  EXPECT_EQ(ref::modulate(x, bad_table, 0, 1, ok).code(), ErrorCode::kInvalidArgument);
}

TEST(GateAdd, MatchesFp64FormulationAndExactBits) {
  const uint64_t seed = test::fresh_seed();
  std::mt19937_64 rng(seed);
  const int64_t s = 19, d = 33;
  Tensor x = test::random_bf16({s, d}, rng, 4.0), a = test::random_bf16({s, d}, rng);
  Tensor x0 = Tensor::empty({s, d}, DType::kBF16);
  ASSERT_TRUE(ref::cast(x, x0).ok());
  Tensor table = test::random_bf16({3, 6 * d}, rng, 0.1);
  SegmentTable seg = three_segments(s, 1, 2, 0);
  ASSERT_TRUE(ref::gate_add(x, a, &table, 5, seg).ok());
  test::MatchStats st;
  for (int64_t r = 0; r < s; ++r) {
    const int trow = r < s / 3 ? 1 : (r < s / 2 ? 2 : 0);
    for (int64_t j = 0; j < d; ++j) {
      const double g = bf(table.data<uint16_t>()[trow * 6 * d + 5 * d + j]);
      const double ga = bf(bf16_bits_from_f64(g * bf(a.data<uint16_t>()[r * d + j])));
      st.add(x.data<uint16_t>()[r * d + j], bf16_bits_from_f64(bf(x0.data<uint16_t>()[r * d + j]) + ga));
    }
  }
  EXPECT_BF16_CLOSE_TO_ORACLE(st, test::seed_msg(seed));

  // numpy float32 + ml_dtypes: out = R(x + R(gate * a)).
  const uint16_t xv[8] = {0x4095, 0x4027, 0xBDC6, 0x402B, 0xBFAE, 0x4087, 0xBCB1, 0x4015};
  const uint16_t gv[8] = {0xBD3E, 0xBC1F, 0x3E01, 0x3D8D, 0xBD06, 0xBD17, 0xBCCD, 0x3E1C};
  const uint16_t av[8] = {0xBEDB, 0xBE9B, 0x3EB5, 0xBDF7, 0xBE4A, 0xBF8F, 0xBC3D, 0xBEE3};
  const uint16_t want[8] = {0x4096, 0x4027, 0xBD56, 0x402A, 0xBFAD, 0x4088, 0xBCAF, 0x4011};
  Tensor xt = Tensor::empty({1, 8}, DType::kBF16), at = Tensor::empty({1, 8}, DType::kBF16);
  Tensor gt = Tensor::empty({1, 8}, DType::kBF16);
  for (int j = 0; j < 8; ++j) {
    xt.data<uint16_t>()[j] = xv[j];
    at.data<uint16_t>()[j] = av[j];
    gt.data<uint16_t>()[j] = gv[j];
  }
  SegmentTable one;
  one.rows = 1;
  one.segments = {{0, 1, 0}};
  ASSERT_TRUE(ref::gate_add(xt, at, &gt, 0, one).ok());
  for (int j = 0; j < 8; ++j) EXPECT_EQ(xt.data<uint16_t>()[j], want[j]) << j;
}

TEST(GateAdd, PlainResidualWithoutTable) {
  const uint64_t seed = test::fresh_seed();
  std::mt19937_64 rng(seed);
  Tensor x = test::random_bf16({7, 12}, rng), a = test::random_bf16({7, 12}, rng);
  Tensor x0 = Tensor::empty({7, 12}, DType::kBF16);
  ASSERT_TRUE(ref::cast(x, x0).ok());
  SegmentTable unused;
  ASSERT_TRUE(ref::gate_add(x, a, nullptr, 0, unused).ok());
  for (int64_t i = 0; i < 84; ++i)
    EXPECT_EQ(x.data<uint16_t>()[i],
              bf16_bits_from_f64(static_cast<double>(bf(x0.data<uint16_t>()[i])) + bf(a.data<uint16_t>()[i])))
        << test::seed_msg(seed);
}

}  // namespace
}  // namespace vortex
