// Reference fused qk_norm_rope + Sage2 Q quantization (src/ref/qk_norm_rope_sage2.h) on strided views of a QKV
// buffer, ragged row counts (1 .. 257, odd included) and 1-3 heads, with and without RoPE: q and k equal
// ref::qk_norm_rope's bytes; Q INT8 bytes and scales equal the full pre-pass (sage2_quantize_reference) on the
// normed buffer; the K/V-only half completes it to the full pre-pass's bytes; and the Q groups obey the Sage2
// rule checked independently (rows {r, r + 8} amax, scale amax/127 + 1e-7, |x/scale - q| <= 1/2, padding 0).
#include <cmath>
#include <cstring>

#include "ref/qk_norm_rope_sage2.h"
#include "ref_test_util.h"

namespace vortex {
namespace {

constexpr int kD = kSage2HeadDim;

RopeTables make_rope(int64_t s, int rope_dims) {
  const int half = rope_dims / 2;
  RopeTables rope;
  rope.rope_dims = rope_dims;
  rope.cos = Tensor::empty({s, half}, DType::kBF16);
  rope.sin = Tensor::empty({s, half}, DType::kBF16);
  for (int64_t r = 0; r < s; ++r)
    for (int j = 0; j < half; ++j) {
      const double ang = r * std::pow(10000.0, -double(j) / half);
      rope.cos.data<uint16_t>()[r * half + j] = bf16_bits_from_f64(std::cos(ang));
      rope.sin.data<uint16_t>()[r * half + j] = bf16_bits_from_f64(std::sin(ang));
    }
  return rope;
}

struct Case {
  int64_t seq;
  int heads;
  bool rope;
};

TEST(QkNormRopeSage2Ref, EqualsUnfusedProgramBytes) {
  const uint64_t seed = test::fresh_seed();
  std::mt19937_64 rng(seed);
  for (const Case c : {Case{1, 1, true}, Case{7, 2, true}, Case{9, 1, false}, Case{17, 3, true}, Case{130, 2, true},
                       Case{257, 1, false}}) {
    SCOPED_TRACE(test::seed_msg(seed) + " seq=" + std::to_string(c.seq) + " heads=" + std::to_string(c.heads) +
                 (c.rope ? " rope" : " no-rope"));
    const int64_t s = c.seq, inner = static_cast<int64_t>(c.heads) * kD;
    Tensor fused_buf = test::random_bf16({s, 3 * inner}, rng, 3.0);
    Tensor unfused_buf = Tensor::empty({s, 3 * inner}, DType::kBF16);
    ASSERT_TRUE(ref::cast(fused_buf, unfused_buf).ok());
    Tensor qw = test::random_bf16({kD}, rng, 0.1, 1.0), kw = test::random_bf16({kD}, rng, 0.1, 1.0);
    const RopeTables rope = make_rope(s, 96);
    const RopeTables* rp = c.rope ? &rope : nullptr;
    auto views = [&](Tensor& buf, int part) {
      return buf.as_strided({s, inner}, {3 * inner, 1}, part * inner).value();
    };

    Tensor fq = views(fused_buf, 0), fk = views(fused_buf, 1);
    Sage2Quantized fused;
    ASSERT_TRUE(ref::qk_norm_rope_sage2(fq, fk, qw, kw, 1e-6f, rp, c.heads, kD, fused).ok());
    Tensor uq = views(unfused_buf, 0), uk = views(unfused_buf, 1);
    ASSERT_TRUE(ref::qk_norm_rope(uq, uk, qw, kw, 1e-6f, rp, c.heads, kD).ok());
    ASSERT_EQ(0, std::memcmp(fused_buf.raw_data(), unfused_buf.raw_data(), fused_buf.nbytes()))
        << "normed q/k (or v) bytes differ from qk_norm_rope";

    const uint16_t* base = unfused_buf.data<uint16_t>();
    const Sage2HostInput qv{base, 3 * inner}, kv{base + inner, 3 * inner}, vv{base + 2 * inner, 3 * inner};
    auto full_or = sage2_quantize_reference(qv, kv, vv, s, c.heads);
    ASSERT_TRUE(full_or.ok()) << full_or.status().to_string();
    const Sage2Quantized& full = *full_or;
    ASSERT_EQ(fused.padded, full.padded);
    EXPECT_EQ(fused.q, full.q) << "Q INT8 bytes differ from the separate pre-pass";
    ASSERT_EQ(fused.q_scale.size(), full.q_scale.size());
    EXPECT_EQ(0, std::memcmp(fused.q_scale.data(), full.q_scale.data(), full.q_scale.size() * 4)) << "Q scales differ";

    // The K/V-only half completes the fused Q to the full pre-pass, bytes and scales.
    ASSERT_TRUE(sage2_quantize_kv_reference(kv, vv, s, c.heads, fused).ok());
    EXPECT_EQ(fused.q, full.q) << "the K/V half touched Q";
    EXPECT_EQ(fused.k, full.k);
    EXPECT_EQ(fused.v, full.v);
    EXPECT_EQ(fused.k_mean, full.k_mean);
    EXPECT_EQ(0, std::memcmp(fused.k_scale.data(), full.k_scale.data(), full.k_scale.size() * 4));
    EXPECT_EQ(0, std::memcmp(fused.v_scale.data(), full.v_scale.data(), full.v_scale.size() * 4));

    // Independent check of the Sage2 Q rule on the normed values.
    const int64_t P = fused.padded;
    int64_t bad = 0;
    for (int h = 0; h < c.heads; ++h)
      for (int64_t slab = 0; slab < P / 16; ++slab)
        for (int r = 0; r < 8; ++r) {
          float amax = 0.0f;
          for (int64_t row : {slab * 16 + r, slab * 16 + r + 8})
            for (int d = 0; row < s && d < kD; ++d)
              amax = std::max(amax, std::fabs(f32_from_bf16_bits(base[row * 3 * inner + h * kD + d])));
          const float scale = fused.q_scale[static_cast<size_t>((h * (P / 16) + slab) * 8 + r)];
          const volatile float step = amax / 127.0f;  // one FP32 rounding per step
          if (scale != step + 1e-7f && bad++ < 5) ADD_FAILURE() << "scale head " << h << " slab " << slab << " r " << r;
          for (int64_t row : {slab * 16 + r, slab * 16 + r + 8})
            for (int d = 0; d < kD; ++d) {
              const int q8 = fused.q[static_cast<size_t>((h * P + row) * kD + d)];
              if (row >= s) {
                if (q8 != 0 && bad++ < 5) ADD_FAILURE() << "padding row " << row << " not zero";
                continue;
              }
              const double x = f32_from_bf16_bits(base[row * 3 * inner + h * kD + d]);
              if ((std::fabs(x / scale - q8) > 0.5 + 1e-5 || std::abs(q8) > 127) && bad++ < 5)
                ADD_FAILURE() << "q head " << h << " row " << row << " d " << d << ": " << q8 << " for " << x / scale;
            }
        }
    EXPECT_EQ(bad, 0);
  }
}

TEST(QkNormRopeSage2Ref, RejectsOtherHeadDims) {
  std::mt19937_64 rng(test::fresh_seed());
  Tensor buf = test::random_bf16({4, 3 * 64}, rng);
  Tensor q = buf.as_strided({4, 64}, {192, 1}, 0).value(), k = buf.as_strided({4, 64}, {192, 1}, 64).value();
  Tensor w = test::random_bf16({64}, rng, 0.1, 1.0);
  Sage2Quantized out;
  EXPECT_EQ(ref::qk_norm_rope_sage2(q, k, w, w, 1e-6f, nullptr, 1, 64, out).code(), ErrorCode::kUnsupported);
}

}  // namespace
}  // namespace vortex
