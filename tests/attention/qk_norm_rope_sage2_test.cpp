// GPU tests of qk_norm_rope_sage2 (gpu label; skips visibly without a device). Fused (qk_norm_rope_sage2, then
// the K/V-only pre-pass) vs unfused (qk_norm_rope, then the full Sage2 pre-pass) on the same inputs, bit for bit:
// the normed Q and K (and untouched V) in the QKV buffer, every INT8 Q byte and scale of the workspace (padding
// rows included), the K/V operands, and the Sage2 attention output. Also the normed bytes and Q operand vs the
// CPU reference ref::qk_norm_rope_sage2 (stored layout mapped back to logical order), ragged S (odd included),
// 1-3 heads and 56 heads, RoPE on/off, both mainloops' layouts; the CudaBackend seam (fused_q_quantize) vs
// qk_norm_rope + attention; workspace poisoned first; out-of-order calls rejected.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>

#include "attention/sage2_test_util.h"
#include "core/arch.h"
#include "cuda/attention/sage2_attention.h"
#include "cuda/cuda_backend.h"
#include "cuda/ops/ops.h"
#include "gpu_test.h"
#include "ref/qk_norm_rope_sage2.h"
#include "vortex/dtype.h"

namespace vortex {
namespace {

#define ASSERT_CUDA(expr) ASSERT_EQ((expr), cudaSuccess) << #expr << ": " << cudaGetErrorString(cudaGetLastError())

constexpr int kD = kSage2HeadDim;

std::shared_ptr<Storage> device_storage(size_t bytes) {
  auto st = std::make_shared<Storage>();
  if (cudaMalloc(&st->ptr, bytes) != cudaSuccess) return nullptr;
  st->bytes = bytes;
  st->device = Device::kCuda;
  st->release = [](void* p, size_t) { cudaFree(p); };
  return st;
}

Tensor device_copy(const std::vector<uint16_t>& host, const Shape& shape) {
  auto st = device_storage(host.size() * 2);
  EXPECT_TRUE(st);
  EXPECT_EQ(cudaMemcpy(st->ptr, host.data(), host.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
  return Tensor::from_storage(st, 0, shape, DType::kBF16);
}

template <typename T>
std::vector<T> download(const void* dev, size_t count) {
  std::vector<T> host(count);
  EXPECT_EQ(cudaMemcpy(host.data(), dev, count * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  return host;
}

// Host bf16 bits of a [rows, cols] rope table and a weight, random but deterministic in `rng`.
struct HostParams {
  std::vector<uint16_t> qw, kw, cos, sin;
};
HostParams make_params(int64_t s, int rope_dims, std::mt19937_64& rng) {
  HostParams p;
  std::uniform_real_distribution<float> w(0.5f, 1.5f);
  for (int i = 0; i < kD; ++i) p.qw.push_back(bf16_bits_from_f32(w(rng)));
  for (int i = 0; i < kD; ++i) p.kw.push_back(bf16_bits_from_f32(w(rng)));
  const int half = rope_dims / 2;
  for (int64_t r = 0; r < s; ++r)
    for (int j = 0; j < half; ++j) {
      const double ang = r * std::pow(10000.0, -double(j) / half);
      p.cos.push_back(bf16_bits_from_f64(std::cos(ang)));
      p.sin.push_back(bf16_bits_from_f64(std::sin(ang)));
    }
  return p;
}

size_t q_stored(bool tiled, int h, int64_t P, int64_t row, int c) {
  return static_cast<size_t>(h * P * kD + (tiled ? sage2_tiled_pos(row, c) : row * kD + sage2_qk_byte_pos(c)));
}

struct FusedCase {
  int64_t seq;
  int heads;
  bool rope;
  Sage2Mainloop mainloop;
};

std::string case_name(const ::testing::TestParamInfo<FusedCase>& info) {
  const FusedCase& c = info.param;
  return std::string(c.mainloop == Sage2Mainloop::kWgmma ? "tiled" : "mma") + "_S" + std::to_string(c.seq) + "_H" +
         std::to_string(c.heads) + (c.rope ? "_rope" : "_norope");
}

class QkNormRopeSage2 : public ::testing::TestWithParam<FusedCase> {};

TEST_P(QkNormRopeSage2, FusedEqualsUnfusedBytesAndOutput) {
  VORTEX_REQUIRE_GPU();
  const FusedCase c = GetParam();
  const uint64_t seed = sage2_test::fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const int H = c.heads;
  const int64_t S = c.seq, inner = static_cast<int64_t>(H) * kD, width = 3 * inner, P = sage2_padded_tokens(S);
  const int rope_dims = 96;
  const auto qkv = sage2_test::make_qkv(S, H, sage2_test::InputKind::kRealistic, seed);
  const HostParams hp = make_params(S, rope_dims, rng);

  Tensor buf_a = device_copy(qkv, {S, width}), buf_b = device_copy(qkv, {S, width});
  Tensor qw = device_copy(hp.qw, {kD}), kw = device_copy(hp.kw, {kD});
  Tensor cos = device_copy(hp.cos, {S, rope_dims / 2}), sin = device_copy(hp.sin, {S, rope_dims / 2});
  const Tensor* cp = c.rope ? &cos : nullptr;
  const Tensor* sp = c.rope ? &sin : nullptr;
  auto view = [&](Tensor& buf, int part) { return buf.as_strided({S, inner}, {width, 1}, part * inner).value(); };
  Tensor qa = view(buf_a, 0), ka = view(buf_a, 1), va = view(buf_a, 2);
  Tensor qb = view(buf_b, 0), kb = view(buf_b, 1), vb = view(buf_b, 2);
  const size_t out_elems = static_cast<size_t>(S * inner);
  auto out_a_st = device_storage((out_elems + 4096) * 2), out_b_st = device_storage((out_elems + 4096) * 2);
  ASSERT_TRUE(out_a_st && out_b_st);
  ASSERT_CUDA(cudaMemset(out_a_st->ptr, 0xFF, (out_elems + 4096) * 2));
  ASSERT_CUDA(cudaMemset(out_b_st->ptr, 0xFF, (out_elems + 4096) * 2));
  Tensor out_a = Tensor::from_storage(out_a_st, 0, {S, inner}, DType::kBF16);
  Tensor out_b = Tensor::from_storage(out_b_st, 0, {S, inner}, DType::kBF16);

  Sage2Workspace ws_a, ws_b;
  ws_a.mainloop = ws_b.mainloop = c.mainloop;
  const size_t n8 = static_cast<size_t>(H * P * kD), nqs = static_cast<size_t>(H * (P / 16) * 8);
  for (Sage2Workspace* ws : {&ws_a, &ws_b}) {
    ASSERT_TRUE(ws->reserve(H, S).ok());
    ASSERT_CUDA(cudaMemset(ws->q_int8, ws == &ws_a ? 0x5A : 0xA5, n8));
    ASSERT_CUDA(cudaMemset(ws->q_scale, ws == &ws_a ? 0xFF : 0x7F, nqs * 4));
  }

  // Unfused: qk_norm_rope, full pre-pass, mainloop.
  Status st = cuda_ops::qk_norm_rope(qa, ka, qw, kw, 1e-6f, cp, sp, c.rope ? rope_dims : 0, H, kD, nullptr);
  ASSERT_TRUE(st.ok()) << st.to_string();
  st = sage2_quantize(qa, ka, va, H, kD, nullptr, ws_a);
  ASSERT_TRUE(st.ok()) << st.to_string();
  // Fused: qk_norm_rope_sage2, K/V-only pre-pass, mainloop.
  st = qk_norm_rope_sage2(qb, kb, qw, kw, 1e-6f, cp, sp, c.rope ? rope_dims : 0, H, kD, nullptr, ws_b);
  ASSERT_TRUE(st.ok()) << st.to_string();
  st = sage2_quantize_kv(kb, vb, H, kD, nullptr, ws_b);
  ASSERT_TRUE(st.ok()) << st.to_string();
  cudaDeviceProp prop{};
  ASSERT_CUDA(cudaGetDeviceProperties(&prop, 0));
  // The wgmma mainloop is sm_90a code; the layout bytes above are compared on every device.
  const bool run_mainloop = c.mainloop == Sage2Mainloop::kMmaSync || (build_has_sm90_kernels() && prop.major == 9);
  if (run_mainloop) {
    st = sage2_attention_quantized(out_a, nullptr, ws_a);
    ASSERT_TRUE(st.ok()) << st.to_string();
    st = sage2_attention_quantized(out_b, nullptr, ws_b);
    ASSERT_TRUE(st.ok()) << st.to_string();
  }
  ASSERT_CUDA(cudaDeviceSynchronize());

  // Normed Q, K (and V untouched): same buffer bytes.
  const auto host_a = download<uint16_t>(buf_a.raw_data(), qkv.size());
  const auto host_b = download<uint16_t>(buf_b.raw_data(), qkv.size());
  ASSERT_EQ(0, std::memcmp(host_a.data(), host_b.data(), qkv.size() * 2)) << "normed q/k bytes differ";
  // Quantized operands: every byte of the workspace, padding included.
  EXPECT_EQ(download<int8_t>(ws_a.q_int8, n8), download<int8_t>(ws_b.q_int8, n8)) << "Q INT8 bytes differ";
  const auto qs_a = download<uint32_t>(ws_a.q_scale, nqs), qs_b = download<uint32_t>(ws_b.q_scale, nqs);
  EXPECT_EQ(qs_a, qs_b) << "Q scales differ";
  EXPECT_EQ(download<int8_t>(ws_a.k_int8, n8), download<int8_t>(ws_b.k_int8, n8));
  EXPECT_EQ(download<uint8_t>(ws_a.v_fp8, n8), download<uint8_t>(ws_b.v_fp8, n8));
  const size_t nks = static_cast<size_t>(H * (P / 128) * 4);
  EXPECT_EQ(download<uint32_t>(ws_a.k_scale, nks), download<uint32_t>(ws_b.k_scale, nks));

  // CPU reference: normed bytes and the Q operand (logical order) of the composed reference.
  Tensor rb = Tensor::empty({S, width}, DType::kBF16);  // host copy of the inputs
  std::memcpy(rb.raw_data(), qkv.data(), qkv.size() * 2);
  const uint16_t* ref_buf = rb.data<uint16_t>();
  Tensor rq = view(rb, 0), rk = view(rb, 1);
  Tensor hqw = Tensor::empty({kD}, DType::kBF16), hkw = Tensor::empty({kD}, DType::kBF16);
  std::memcpy(hqw.raw_data(), hp.qw.data(), kD * 2);
  std::memcpy(hkw.raw_data(), hp.kw.data(), kD * 2);
  RopeTables rope;
  rope.rope_dims = rope_dims;
  rope.cos = Tensor::empty({S, rope_dims / 2}, DType::kBF16);
  rope.sin = Tensor::empty({S, rope_dims / 2}, DType::kBF16);
  std::memcpy(rope.cos.raw_data(), hp.cos.data(), hp.cos.size() * 2);
  std::memcpy(rope.sin.raw_data(), hp.sin.data(), hp.sin.size() * 2);
  Sage2Quantized ref;
  st = ref::qk_norm_rope_sage2(rq, rk, hqw, hkw, 1e-6f, c.rope ? &rope : nullptr, H, kD, ref);
  ASSERT_TRUE(st.ok()) << st.to_string();
  EXPECT_EQ(0, std::memcmp(ref_buf, host_b.data(), qkv.size() * 2)) << "normed bytes differ from the CPU";
  const auto q8 = download<int8_t>(ws_b.q_int8, n8);
  int64_t bad = 0;
  const bool tiled = sage2_tiled_layout(c.mainloop);
  for (int h = 0; h < H; ++h)
    for (int64_t row = 0; row < P; ++row)
      for (int d = 0; d < kD; ++d)
        if (q8[q_stored(tiled, h, P, row, d)] != ref.q[static_cast<size_t>((h * P + row) * kD + d)] && bad++ < 5)
          ADD_FAILURE() << "Q byte vs CPU: head " << h << " row " << row << " d " << d;
  EXPECT_EQ(bad, 0);
  EXPECT_EQ(0, std::memcmp(qs_b.data(), ref.q_scale.data(), nqs * 4)) << "Q scales differ from the CPU";

  if (run_mainloop) {  // the attention output with the fused Q: the same bytes, nothing written past it
    const auto oa = download<uint16_t>(out_a.raw_data(), out_elems + 4096);
    const auto ob = download<uint16_t>(out_b.raw_data(), out_elems + 4096);
    EXPECT_EQ(0, std::memcmp(oa.data(), ob.data(), out_elems * 2)) << "attention output differs";
    for (size_t i = out_elems; i < out_elems + 4096; ++i) ASSERT_EQ(ob[i], 0xFFFF) << "write past the output " << i;
    for (size_t i = 0; i < out_elems; ++i) ASSERT_FALSE(std::isnan(f32_from_bf16_bits(ob[i]))) << "NaN at " << i;
  } else {
    std::printf(
        "wgmma mainloop not runnable here (no sm_90 device or no 90a in VORTEX_CUDA_ARCHS): output compared "
        "on the mma.sync cases only\n");
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, QkNormRopeSage2,
    ::testing::Values(FusedCase{1, 1, true, Sage2Mainloop::kWgmma}, FusedCase{7, 2, true, Sage2Mainloop::kWgmma},
                      FusedCase{9, 3, false, Sage2Mainloop::kWgmma}, FusedCase{129, 2, true, Sage2Mainloop::kWgmma},
                      FusedCase{1001, 3, true, Sage2Mainloop::kWgmma}, FusedCase{300, 56, true, Sage2Mainloop::kWgmma},
                      FusedCase{4097, 1, true, Sage2Mainloop::kWgmma}, FusedCase{1, 1, true, Sage2Mainloop::kMmaSync},
                      FusedCase{23, 2, false, Sage2Mainloop::kMmaSync},
                      FusedCase{1001, 3, true, Sage2Mainloop::kMmaSync}),
    case_name);

TEST(QkNormRopeSage2Order, KvWithoutQIsRejected) {
  // Validation happens before any device work, so this runs without a GPU too.
  auto st = std::make_shared<Storage>();
  std::vector<uint16_t> host(64 * 3 * kD);
  st->ptr = host.data();
  st->bytes = host.size() * 2;
  st->device = Device::kCuda;  // metadata only; never dereferenced on the error paths
  Tensor k = Tensor::from_storage(st, kD * 2, {64, kD}, DType::kBF16, {3 * kD, 1});
  Tensor v = Tensor::from_storage(st, 2 * kD * 2, {64, kD}, DType::kBF16, {3 * kD, 1});
  Sage2Workspace ws;
  const Status s = sage2_quantize_kv(k, v, 1, kD, nullptr, ws);
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument) << s.to_string();
  EXPECT_NE(s.message().find("qk_norm_rope_sage2"), std::string::npos) << s.message();
}

// The Backend seam the block uses: has_fused_q_quantize + qk_norm_rope_quantize_q + attention_quantized_q vs
// qk_norm_rope + attention on the same CUDA backend (its policy's Sage2 mainloop), bytes of q/k and out.
TEST(QkNormRopeSage2Backend, FusedSeamEqualsUnfusedOps) {
  auto be_or = make_cuda_backend();
  VORTEX_SKIP_NO_GPU_OR_FAIL(be_or.status());
  Backend& be = **be_or;
  const uint64_t seed = sage2_test::fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const int H = 4, rope_dims = 96;
  const int64_t S = 777, inner = static_cast<int64_t>(H) * kD, width = 3 * inner;
  ExecOptions opts = be.default_options();
  opts.attention = AttentionKind::kSage2;
  opts.fused_q_quantize = false;
  EXPECT_FALSE(be.has_fused_q_quantize(S, H, kD, opts)) << "switch off";
  opts.fused_q_quantize = true;
  ASSERT_TRUE(be.has_fused_q_quantize(S, H, kD, opts)) << "the CUDA backend offers the fusion for sage2";
  ExecOptions sdpa = opts;
  sdpa.attention = AttentionKind::kSdpa;
  EXPECT_FALSE(be.has_fused_q_quantize(S, H, kD, sdpa)) << "cuDNN SDPA reads a BF16 Q";

  const auto qkv = sage2_test::make_qkv(S, H, sage2_test::InputKind::kRandom, seed);
  const HostParams hp = make_params(S, rope_dims, rng);
  auto up = [&](const std::vector<uint16_t>& h, const Shape& shape) {
    Tensor t = Tensor::empty(shape, DType::kBF16);
    std::memcpy(t.raw_data(), h.data(), h.size() * 2);
    return be.upload(t).value();
  };
  Tensor buf_a = up(qkv, {S, width}), buf_b = up(qkv, {S, width});
  Tensor qw = up(hp.qw, {kD}), kw = up(hp.kw, {kD});
  RopeTables rope;
  rope.rope_dims = rope_dims;
  rope.cos = up(hp.cos, {S, rope_dims / 2});
  rope.sin = up(hp.sin, {S, rope_dims / 2});
  auto view = [&](Tensor& buf, int part) { return buf.as_strided({S, inner}, {width, 1}, part * inner).value(); };
  Tensor qa = view(buf_a, 0), ka = view(buf_a, 1), va = view(buf_a, 2);
  Tensor qb = view(buf_b, 0), kb = view(buf_b, 1), vb = view(buf_b, 2);
  Tensor out_a = be.alloc({S, inner}, DType::kBF16).value(), out_b = be.alloc({S, inner}, DType::kBF16).value();
  ASSERT_TRUE(be.fill_synthetic(out_a, 1, 1.0f, 0.0f).ok());
  ASSERT_TRUE(be.fill_synthetic(out_b, 2, 1.0f, 0.0f).ok());

  ASSERT_TRUE(be.qk_norm_rope(qa, ka, qw, kw, 1e-6f, &rope, H, kD).ok());
  ASSERT_TRUE(be.attention(qa, ka, va, H, kD, out_a, opts).ok());
  QuantizedQuery qq;
  Status st = be.qk_norm_rope_quantize_q(qb, kb, qw, kw, 1e-6f, &rope, H, kD, opts, qq);
  ASSERT_TRUE(st.ok()) << st.to_string();
  st = be.attention_quantized_q(qq, kb, vb, H, kD, out_b, opts);
  ASSERT_TRUE(st.ok()) << st.to_string();
  // The quantized Q is consumed: a second use is rejected, never run on stale bytes.
  EXPECT_EQ(be.attention_quantized_q(qq, kb, vb, H, kD, out_b, opts).code(), ErrorCode::kInvalidArgument);
  ASSERT_TRUE(be.synchronize().ok());

  Tensor ha = Tensor::empty({S, width}, DType::kBF16), hb = Tensor::empty({S, width}, DType::kBF16);
  ASSERT_TRUE(be.download(buf_a, ha).ok());
  ASSERT_TRUE(be.download(buf_b, hb).ok());
  EXPECT_EQ(0, std::memcmp(ha.raw_data(), hb.raw_data(), ha.nbytes())) << "q/k bytes differ";
  Tensor oa = Tensor::empty({S, inner}, DType::kBF16), ob = Tensor::empty({S, inner}, DType::kBF16);
  ASSERT_TRUE(be.download(out_a, oa).ok());
  ASSERT_TRUE(be.download(out_b, ob).ok());
  EXPECT_EQ(0, std::memcmp(oa.raw_data(), ob.raw_data(), oa.nbytes())) << "attention output differs";
}

}  // namespace
}  // namespace vortex
