// CPU tests of the Sage2 reference program (src/ref/sage2_attention.cpp): quantization rules hold
// element by element (INT8 range and rounding bound, group amax -> 127, K mean = FP64 mean rounded
// once, V channel amax -> 448), the all-zero V channel is finite, the storage permutations are
// bijections, and the program's output is close to FP64 attention on random and realistic inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "attention/sage2_test_util.h"
#include "ref/sage2_attention.h"
#include "vortex/dtype.h"

namespace vortex {
namespace {

using sage2_test::InputKind;

TEST(Sage2Reference, PermutationsAreBijections) {
  std::set<int> qk, v;
  for (int i = 0; i < 128; ++i) {
    qk.insert(sage2_qk_byte_pos(i));
    v.insert(sage2_v_byte_pos(i));
  }
  EXPECT_EQ(qk.size(), 128u);
  EXPECT_EQ(v.size(), 128u);
  EXPECT_EQ(*qk.rbegin(), 127);
  EXPECT_EQ(*v.rbegin(), 127);
  // Sage2's 16-token order 0,1,8,9,2,3,10,11,...: key 8 sits right after keys 0 and 1 (thread 0).
  EXPECT_EQ(sage2_v_byte_pos(8), 2);
  EXPECT_EQ(sage2_v_byte_pos(2), 32);
}

TEST(Sage2Reference, QuantizationRules) {
  const uint64_t seed = sage2_test::fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  const int64_t seq = 300;
  const int heads = 2;
  auto qkv = sage2_test::make_qkv(seq, heads, InputKind::kRealistic, seed);
  auto qv = sage2_test::view(qkv, heads, 0), kv = sage2_test::view(qkv, heads, 1), vv = sage2_test::view(qkv, heads, 2);
  auto quant_or = sage2_quantize_reference(qv, kv, vv, seq, heads);
  ASSERT_TRUE(quant_or.ok()) << quant_or.status().to_string();
  const Sage2Quantized& qz = *quant_or;
  const int64_t P = qz.padded;
  ASSERT_EQ(P, 384);
  auto bf = [](Sage2HostInput in, int64_t s, int h, int c) {
    return f32_from_bf16_bits(in.data[s * in.row_stride + h * 128 + c]);
  };
  for (int h = 0; h < heads; ++h) {
    // Q: every element within half a step; every non-empty group reaches |127| or |126|.
    for (int64_t slab = 0; slab < P / 16; ++slab)
      for (int r = 0; r < 8; ++r) {
        const float scale = qz.q_scale[static_cast<size_t>((h * (P / 16) + slab) * 8 + r)];
        int qmax = 0;
        for (int64_t row : {slab * 16 + r, slab * 16 + r + 8})
          for (int c = 0; c < 128; ++c) {
            const int qv8 = qz.q[static_cast<size_t>((h * P + row) * 128 + c)];
            qmax = std::max(qmax, std::abs(qv8));
            const float x = row < seq ? bf(qv, row, h, c) : 0.0f;
            ASSERT_LE(std::fabs(x - qv8 * scale), 0.5f * scale * 1.0001f) << "q row " << row << " c " << c;
          }
        if (slab * 16 + r < seq) {
          EXPECT_GE(qmax, 126) << "q group slab " << slab << " r " << r;
        }
      }
    // K mean: FP64 mean rounded once to bf16.
    for (int c = 0; c < 128; ++c) {
      double sum = 0.0;
      for (int64_t s = 0; s < seq; ++s) sum += bf(kv, s, h, c);
      EXPECT_EQ(qz.k_mean[static_cast<size_t>(h * 128 + c)], bf16_bits_from_f64(sum / seq)) << "channel " << c;
    }
    // K: groups of keys with (idx mod 8)/2 == t per 128-block, elements of bf16(K - mean).
    for (int64_t key = 0; key < P; ++key) {
      const float scale = qz.k_scale[static_cast<size_t>((h * (P / 128) + key / 128) * 4 + (key % 8) / 2)];
      for (int c = 0; c < 128; ++c) {
        const float x =
            key < seq ? round_bf16(bf(kv, key, h, c) - f32_from_bf16_bits(qz.k_mean[static_cast<size_t>(h * 128 + c)]))
                      : 0.0f;
        const int kq = qz.k[static_cast<size_t>((h * P + key) * 128 + c)];
        ASSERT_LE(std::fabs(x - kq * scale), 0.5f * scale * 1.0001f) << "k key " << key << " c " << c;
      }
    }
    // V: per channel, amax maps to 448, every element within E4M3 relative precision (2^-4).
    for (int c = 0; c < 128; ++c) {
      const float vs = qz.v_scale[static_cast<size_t>(h * 128 + c)];
      float amax = 0.0f;
      int hits = 0;
      for (int64_t s = 0; s < seq; ++s) {
        const float x = bf(vv, s, h, c);
        amax = std::max(amax, std::fabs(x));
        const float dec = f32_from_e4m3(qz.v[static_cast<size_t>((h * 128 + c) * P + s)]) * vs;
        ASSERT_LE(std::fabs(dec - x), std::fabs(x) * 0.0625f + vs * 0.002f) << "v token " << s << " c " << c;
        hits += std::fabs(f32_from_e4m3(qz.v[static_cast<size_t>((h * 128 + c) * P + s)])) == 448.0f;
      }
      EXPECT_EQ(vs, amax / 448.0f);
      EXPECT_GE(hits, 1);
      for (int64_t s = seq; s < P; ++s) ASSERT_EQ(qz.v[static_cast<size_t>((h * 128 + c) * P + s)], 0);
    }
  }
}

TEST(Sage2Reference, ZeroVChannelIsFiniteZero) {
  const uint64_t seed = sage2_test::fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  const int64_t seq = 150;
  auto qkv = sage2_test::make_qkv(seq, 1, InputKind::kRandom, seed);
  for (int64_t s = 0; s < seq; ++s) qkv[static_cast<size_t>(s * 384 + 256 + 17)] = 0x8000;  // -0.0 in V ch 17
  auto qz = sage2_quantize_reference(sage2_test::view(qkv, 1, 0), sage2_test::view(qkv, 1, 1),
                                     sage2_test::view(qkv, 1, 2), seq, 1);
  ASSERT_TRUE(qz.ok());
  auto rows = sage2_test::pick_rows(seq, 200, seed);
  auto out = sage2_attention_reference(*qz, 0, rows);
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(out[i * 128 + 17], 0.0f);
    for (int c = 0; c < 128; ++c) ASSERT_FALSE(std::isnan(out[i * 128 + c]));
  }
}

struct ProgramCase {
  int64_t seq;
  int heads;
  InputKind kind;
};

class Sage2ReferenceProgram : public ::testing::TestWithParam<ProgramCase> {};

TEST_P(Sage2ReferenceProgram, CloseToFp64) {
  const ProgramCase pc = GetParam();
  const uint64_t seed = sage2_test::fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed) + " seq=" + std::to_string(pc.seq));
  auto qkv = sage2_test::make_qkv(pc.seq, pc.heads, pc.kind, seed);
  auto qv = sage2_test::view(qkv, pc.heads, 0), kv = sage2_test::view(qkv, pc.heads, 1),
       vv = sage2_test::view(qkv, pc.heads, 2);
  auto qz = sage2_quantize_reference(qv, kv, vv, pc.seq, pc.heads);
  ASSERT_TRUE(qz.ok());
  auto rows = sage2_test::pick_rows(pc.seq, 64, seed);
  for (int h = 0; h < pc.heads; ++h) {
    auto want = attention_fp64_reference(qv, kv, vv, pc.seq, h, rows);
    auto got = sage2_attention_reference(*qz, h, rows);
    auto e = sage2_test::compare(got, want);
    std::printf("sage2 ref vs fp64 seq=%lld head=%d %s: %s\n", static_cast<long long>(pc.seq), h,
                pc.kind == InputKind::kRandom ? "random" : "realistic", e.str().c_str());
    EXPECT_FALSE(e.has_nan);
    EXPECT_LT(e.rel_l2, 0.08);
    EXPECT_GT(e.cosine, 0.995);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, Sage2ReferenceProgram,
                         ::testing::Values(ProgramCase{1, 1, InputKind::kRandom},
                                           ProgramCase{100, 2, InputKind::kRandom},
                                           ProgramCase{300, 1, InputKind::kRealistic},
                                           ProgramCase{700, 1, InputKind::kRandom}));

}  // namespace
}  // namespace vortex
