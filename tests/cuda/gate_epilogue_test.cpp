// CudaBackend::linear_gate_residual (src/cuda/gate_epilogue.cpp), the fp8_gate_epilogue switch's op:
//   x = R(x + (s_a[r] * fp32(s_w * gate[seg(r)][j])) * sum_t q(a)[r, t] q(W)[j, t]),  a quantized per row.
// E1 vs FP64 of that program by the two-reference rule (every output element), on three AdaLN segments
// whose boundaries are not multiples of 4 rows (the per-segment scale runs must stay aligned), gates of
// both signs; E2 vs the unfused fp8 program (linear + gate_add) printed and bounded; bad weights rejected.
// GPU label; skips visibly without a device.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "cuda/cuda_test_util.h"
#include "gemm/fp8_reference.h"
#include "gemm/gemm.h"
#include "gpu_test.h"
#include "seed.h"
#include "vortex/config.h"
#include "vortex/dtype.h"

namespace vortex {
namespace {

Tensor host_bf16(int64_t rows, int64_t cols, std::mt19937_64& rng, float scale) {
  Tensor t = Tensor::empty({rows, cols}, DType::kBF16);
  std::uniform_real_distribution<float> u(-scale, scale);
  uint16_t* p = t.data<uint16_t>();
  for (int64_t i = 0; i < rows * cols; ++i) p[i] = bf16_bits_from_f32(u(rng));
  return t;
}

TEST(GateEpilogue, Fp64OfItsProgramAndNearTheUnfusedProgram) {
  std::unique_ptr<CudaBackend> be;
  VORTEX_REQUIRE_CUDA(be);
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const int64_t s = 530, k = 512, n = 256, chunks = 6, table_rows = 6;
  Tensor a = host_bf16(s, k, rng, 2.0f);   // [S, K] bf16, the GEMM input (attention output / SwiGLU)
  Tensor w = host_bf16(n, k, rng, 0.05f);  // [N, K] bf16
  Tensor x0 = host_bf16(s, n, rng, 4.0f);  // [S, N] bf16, the residual stream
  Tensor table = host_bf16(table_rows, chunks * n, rng, 1.5f);  // [6, 6N] bf16 AdaLN table, gates of both signs
  SegmentTable seg;
  seg.segments = {{0, 100, 3}, {100, 514, 1}, {514, s, 5}};  // text | audio | video-like, boundaries % 4 != 0
  seg.rows = s;
  auto wq = quantize_weight_fp8(w, Fp8Scaling::kPerTensor);
  ASSERT_TRUE(wq.ok()) << wq.status().to_string();
  LinearWeight dw;
  dw.format = QuantFormat::kFp8Scaled;
  dw.out_features = n;
  dw.in_features = k;
  auto up = [&](const Tensor& h) {
    auto t = be->upload(h);
    EXPECT_TRUE(t.ok()) << t.status().to_string();
    return t.ok() ? *t : Tensor();
  };
  dw.weight = up(wq->weight);
  dw.weight_scale = up(wq->weight_scale);
  if (!be->has_gate_epilogue(dw)) GTEST_SKIP() << "the fused gate epilogue needs sm_90+ FP8 (cuBLASLt OUTER_VEC_32F)";
  Tensor a_d = up(a), x_d = up(x0), x2_d = up(x0), t_d = up(table);
  ASSERT_OK(be->linear_gate_residual(a_d, dw, x_d, t_d, kGateMsa, seg));
  // The unfused fp8 program on the same inputs: proj = R(q(a) @ q(W)^T) per tensor, then x = R(x + R(gate * proj)).
  auto proj = be->alloc({s, n}, DType::kBF16);
  ASSERT_TRUE(proj.ok());
  ASSERT_OK(be->linear(a_d, dw, nullptr, *proj));
  ASSERT_OK(be->gate_add(x2_d, *proj, &t_d, kGateMsa, seg));
  ASSERT_OK(be->synchronize());
  Tensor out = Tensor::empty({s, n}, DType::kBF16), out2 = Tensor::empty({s, n}, DType::kBF16);
  ASSERT_OK(be->download(x_d, out));
  ASSERT_OK(be->download(x2_d, out2));

  std::vector<uint8_t> qa(static_cast<size_t>(s * k));
  std::vector<float> sa(static_cast<size_t>(s));
  quantize_fp8_per_row_ref(a.data<uint16_t>(), s, k, k, qa.data(), sa.data());
  const uint8_t* qw = wq->weight.data<uint8_t>();
  const float sw = wq->weight_scale.data<float>()[0];
  const uint16_t* xh = x0.data<uint16_t>();
  const uint16_t* th = table.data<uint16_t>();
  const uint16_t* o = out.data<uint16_t>();
  const uint16_t* o2 = out2.data<uint16_t>();
  testing::TwoReference tr;
  double d2 = 0, u2 = 0;
  for (int64_t r = 0; r < s; ++r) {
    const int32_t trow = seg.row_of(r);
    ASSERT_GE(trow, 0);
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      float cacc = 0;
      for (int64_t t = 0; t < k; ++t) {
        const float p = f32_from_e4m3(qa[static_cast<size_t>(r * k + t)]);
        const float q = f32_from_e4m3(qw[j * k + t]);
        acc += static_cast<double>(p) * q;
        cacc += p * q;
      }
      const float gate = f32_from_bf16_bits(th[trow * chunks * n + kGateMsa * n + j]);
      const float wv = sw * gate;  // the kernel's fp32(s_w * gate)
      const float xr = f32_from_bf16_bits(xh[r * n + j]);
      const double ref = static_cast<double>(xr) + acc * static_cast<double>(sa[static_cast<size_t>(r)]) * wv;
      const float cpu = xr + cacc * (sa[static_cast<size_t>(r)] * wv);
      const float got = f32_from_bf16_bits(o[r * n + j]);
      tr.add(got, round_bf16(cpu), ref);
      const double inc_f = got - xr, inc_u = static_cast<double>(f32_from_bf16_bits(o2[r * n + j])) - xr;
      d2 += (inc_f - inc_u) * (inc_f - inc_u);
      u2 += inc_u * inc_u;
    }
  }
  const double e2 = std::sqrt(d2 / u2);
  std::printf("gate epilogue | E1 vs FP64: %s | E2 increment vs linear + gate_add: rel-L2 %.3e\n", tr.summary().c_str(),
              e2);
  EXPECT_TRUE(tr.passes(5e-4, 1e-3)) << tr.summary();
  EXPECT_LT(e2, 0.1) << "the fused gated residual is far from the unfused fp8 program";
}

TEST(GateEpilogue, RejectsWeightsItCannotFuse) {
  std::unique_ptr<CudaBackend> be;
  VORTEX_REQUIRE_CUDA(be);
  std::mt19937_64 rng(7);
  Tensor w = host_bf16(64, 64, rng, 0.05f);
  auto wd = be->upload(w);
  ASSERT_TRUE(wd.ok());
  LinearWeight bf;
  bf.weight = *wd;
  bf.out_features = 64;
  bf.in_features = 64;
  EXPECT_FALSE(be->has_gate_epilogue(bf));
  auto a = be->upload(host_bf16(8, 64, rng, 1.0f));
  auto x = be->upload(host_bf16(8, 64, rng, 1.0f));
  auto t = be->upload(host_bf16(6, 6 * 64, rng, 1.0f));
  ASSERT_TRUE(a.ok() && x.ok() && t.ok());
  SegmentTable seg;
  seg.segments = {{0, 8, 0}};
  seg.rows = 8;
  Status st = be->linear_gate_residual(*a, bf, *x, *t, kGateMsa, seg);
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument) << st.to_string();
}

}  // namespace
}  // namespace vortex
