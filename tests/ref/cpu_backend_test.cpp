// CpuBackend: every op through the Backend interface equals the ref op it dispatches to, results are
// byte-identical for 1 and 3 worker threads (ragged row counts that do not divide evenly), upload copies,
// fill_synthetic matches fill_synthetic_host, and sage2 is refused visibly.
#include <memory>

#include "backend/backend.h"
#include "core/synthetic.h"
#include "ref/cpu_backend.h"
#include "ref/ref_ops.h"
#include "ref_test_util.h"

namespace vortex {
namespace {

// Runs a small block-like op sequence on `be` and returns all outputs concatenated as bytes.
std::vector<uint8_t> run_all_ops(Backend& be, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const int64_t s = 37;  // not a multiple of 2 or 3
  const int heads = 2, hd = 16, inner = heads * hd, d = 40, f = 24;
  std::vector<uint8_t> bytes;
  auto keep = [&](const Tensor& t) {
    Tensor c = Tensor::empty(t.shape(), t.dtype());
    EXPECT_TRUE(ref::cast(t, c).ok());
    const uint8_t* p = static_cast<const uint8_t*>(c.raw_data());
    bytes.insert(bytes.end(), p, p + c.nbytes());
  };
  Tensor x = be.upload(test::random_bf16({s, d}, rng, 2.0)).value();
  Tensor w = be.upload(test::random_bf16({d}, rng, 0.1, 1.0)).value();
  Tensor table = be.upload(test::random_bf16({6, 6 * d}, rng, 0.2)).value();
  SegmentTable seg;
  seg.rows = s;
  seg.segments = {{0, 5, 4}, {5, 20, 2}, {20, s, 3}};
  Tensor n = be.alloc({s, d}, DType::kBF16).value();
  EXPECT_TRUE(be.rms_norm_modulate(x, w, 1e-5f, table, 0, 1, seg, n).ok());
  keep(n);
  LinearWeight qkv_w;
  qkv_w.weight = be.upload(test::random_bf16({3 * inner, d}, rng, 0.15)).value();
  Tensor qkv = be.alloc({s, 3 * inner}, DType::kBF16).value();
  EXPECT_TRUE(be.linear(n, qkv_w, nullptr, qkv).ok());
  Tensor q = qkv.as_strided({s, inner}, {3 * inner, 1}, 0).value();
  Tensor k = qkv.as_strided({s, inner}, {3 * inner, 1}, inner).value();
  Tensor v = qkv.as_strided({s, inner}, {3 * inner, 1}, 2 * inner).value();
  Tensor qn = be.upload(test::random_bf16({hd}, rng, 0.1, 1.0)).value();
  RopeTables rope;
  rope.rope_dims = 8;
  rope.cos = be.upload(test::random_bf16({s, 4}, rng, 0.5)).value();
  rope.sin = be.upload(test::random_bf16({s, 4}, rng, 0.5)).value();
  EXPECT_TRUE(be.qk_norm_rope(q, k, qn, qn, 1e-5f, &rope, heads, hd).ok());
  keep(qkv);
  Tensor o = be.alloc({s, inner}, DType::kBF16).value();
  EXPECT_TRUE(be.attention(q, k, v, heads, hd, o, ExecOptions{}).ok());
  keep(o);
  EXPECT_TRUE(be.gate_add(x, n, &table, 2, seg).ok());
  keep(x);
  Tensor u = be.upload(test::random_bf16({s, 2 * f}, rng, 2.0)).value();
  Tensor m = be.alloc({s, f}, DType::kBF16).value();
  EXPECT_TRUE(be.swiglu(u, m).ok());
  keep(m);
  Tensor xf = be.alloc({s, d}, DType::kF32).value();
  EXPECT_TRUE(be.cast(x, xf).ok());
  LinearWeight head;
  head.weight = be.upload(test::random_f32({7, d}, rng, 0.1)).value();
  Tensor hb = be.upload(test::random_f32({7}, rng)).value();
  Tensor y = be.alloc({s, 7}, DType::kF32).value();
  EXPECT_TRUE(be.linear(xf, head, &hb, y).ok());
  keep(y);
  EXPECT_TRUE(be.modulate(x, table, 3, 4, seg).ok());
  keep(x);
  return bytes;
}

TEST(CpuBackend, ResultsDoNotDependOnThreadCount) {
  const uint64_t seed = test::fresh_seed();
  CpuBackend one(1), three(3);
  ASSERT_EQ(one.threads(), 1);
  ASSERT_EQ(three.threads(), 3);
  const std::vector<uint8_t> a = run_all_ops(one, seed), b = run_all_ops(three, seed);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_TRUE(a == b) << "1 vs 3 threads differ, " << test::seed_msg(seed);
}

TEST(CpuBackend, DispatchEqualsRefOps) {
  const uint64_t seed = test::fresh_seed();
  std::mt19937_64 rng(seed);
  CpuBackend be(2);
  Tensor x = test::random_bf16({9, 16}, rng), w = test::random_bf16({16}, rng, 0.1, 1.0);
  Tensor a = be.alloc({9, 16}, DType::kBF16).value(), b = Tensor::empty({9, 16}, DType::kBF16);
  ASSERT_TRUE(be.rms_norm(x, w, 1e-5f, a).ok());
  ASSERT_TRUE(ref::rms_norm(x, w, 1e-5f, b).ok());
  EXPECT_EQ(0, std::memcmp(a.raw_data(), b.raw_data(), a.nbytes())) << test::seed_msg(seed);
  // upload copies: changing the source afterwards does not change the uploaded tensor.
  Tensor up = be.upload(x).value();
  x.data<uint16_t>()[0] ^= 0x1;
  EXPECT_NE(up.data<uint16_t>()[0], x.data<uint16_t>()[0]);
  Tensor host = Tensor::empty({9, 16}, DType::kBF16);
  ASSERT_TRUE(be.download(up, host).ok());
  EXPECT_EQ(0, std::memcmp(host.raw_data(), up.raw_data(), host.nbytes()));
  // fill_synthetic == fill_synthetic_host.
  Tensor s1 = be.alloc({5, 33}, DType::kBF16).value(), s2 = Tensor::empty({5, 33}, DType::kBF16);
  ASSERT_TRUE(be.fill_synthetic(s1, 1234, 0.5f, 0.25f).ok());
  ASSERT_TRUE(fill_synthetic_host(s2, 1234, 0.5f, 0.25f, 1).ok());
  EXPECT_EQ(0, std::memcmp(s1.raw_data(), s2.raw_data(), s1.nbytes()));
  // sage2 is refused with kUnsupported, never silently run as something else.
  ExecOptions sage;
  sage.attention = AttentionKind::kSage2;
  Tensor o = be.alloc({9, 16}, DType::kBF16).value();
  EXPECT_EQ(be.attention(up, up, up, 1, 16, o, sage).code(), ErrorCode::kUnsupported);
}

}  // namespace
}  // namespace vortex
