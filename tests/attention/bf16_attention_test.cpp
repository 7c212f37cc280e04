// Owned BF16 attention (sm_90a, bf16_attention.h) on the GPU, head_dim 128, 72 (the vision tower's) and 64 (the video
// VAE decoder's), single and
// batched launches: Q/K/V read as strided views of one [S, 3I] buffer, token-major out. Two-reference rule
// (docs/numerics.md): FP64 attention (attention_fp64_reference, ref::attention's program before its rounding) as the
// reference, ref::attention_flash_fp32 (the same FP32 / BF16-P program) as the CPU same-program reference; ragged S
// (not multiples of the 128-row tile), 1-4 heads, fresh random inputs, outputs poisoned with NaN (0xFF) and a sentinel
// tail after them; and cuDNN SDPA on the same inputs (its own two-reference numbers, the bound the kernel must meet,
// and the kernel's max-abs / rel-L2 deviation from it). Skips visibly without a GPU; a GPU that is not sm_90 or a build
// without sm_90a kernels fails (tests/gpu_test.h: only a missing device is a skip).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cuda/attention/bf16_attention.h"
#include "cuda/attention/sdpa.h"
#include "gpu_test.h"
#include "ref/ref_ops.h"
#include "vortex/dtype.h"

namespace vortex {
namespace {

using testing::DeviceBuffer;
using testing::TwoReference;

Tensor device_view(const DeviceBuffer& buf, int64_t byte_offset, Shape shape, Shape strides) {
  return buf.view(std::move(shape), DType::kBF16, std::move(strides), static_cast<size_t>(byte_offset));
}
Tensor host_view(std::vector<uint16_t>& data, int64_t elem_offset, Shape shape, Shape strides) {
  auto storage = std::make_shared<Storage>();
  storage->ptr = data.data();
  storage->bytes = data.size() * 2;
  storage->device = Device::kCpu;
  return Tensor::from_storage(storage, static_cast<size_t>(elem_offset) * 2, std::move(shape), DType::kBF16,
                              std::move(strides));
}

bool sm90_kernel_available() {
  int dev = 0;
  return cudaGetDevice(&dev) == cudaSuccess && bf16_attention_supported(dev);
}

struct DeviationStats {
  double max_abs = 0, rel_l2 = 0;
  int64_t nonfinite = 0;
};
DeviationStats deviation(const std::vector<uint16_t>& a, const std::vector<uint16_t>& b, int64_t rows, int64_t width,
                         int64_t lda, int64_t ldb) {
  DeviationStats d;
  double num = 0, den = 0;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t c = 0; c < width; ++c) {
      const double x = f32_from_bf16_bits(a[static_cast<size_t>(i * lda + c)]);
      const double y = f32_from_bf16_bits(b[static_cast<size_t>(i * ldb + c)]);
      if (!std::isfinite(x) || !std::isfinite(y)) {
        ++d.nonfinite;
        continue;
      }
      d.max_abs = std::max(d.max_abs, std::fabs(x - y));
      num += (x - y) * (x - y);
      den += y * y;
    }
  d.rel_l2 = std::sqrt(num / std::max(den, 1e-300));
  return d;
}

// FP64 softmax(q k^T / sqrt(d)) v of head h for the listed query rows on the bf16 inputs (q at column 0, k at
// `width`, v at 2 `width` of rows of ld elements), unrounded: [rows, d].
std::vector<double> fp64_attention(const std::vector<uint16_t>& qkv, int64_t ld, int64_t width, int64_t d, int64_t s,
                                   int h, const std::vector<int64_t>& rows) {
  std::vector<double> out(rows.size() * static_cast<size_t>(d), 0.0), p(static_cast<size_t>(s));
  auto at = [&](int64_t t, int64_t c) {
    return static_cast<double>(f32_from_bf16_bits(qkv[static_cast<size_t>(t * ld + c)]));
  };
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  for (size_t i = 0; i < rows.size(); ++i) {
    double mx = -INFINITY;
    for (int64_t t = 0; t < s; ++t) {
      double dot = 0;
      for (int64_t c = 0; c < d; ++c) dot += at(rows[i], h * d + c) * at(t, width + h * d + c);
      p[static_cast<size_t>(t)] = dot * scale;
      mx = std::max(mx, dot * scale);
    }
    double l = 0;
    for (int64_t t = 0; t < s; ++t) l += (p[static_cast<size_t>(t)] = std::exp(p[static_cast<size_t>(t)] - mx));
    for (int64_t t = 0; t < s; ++t)
      for (int64_t c = 0; c < d; ++c)
        out[i * static_cast<size_t>(d) + static_cast<size_t>(c)] +=
            p[static_cast<size_t>(t)] / l * at(t, 2 * width + h * d + c);
  }
  return out;
}

// One case: S tokens, `heads` heads of d (128, 72: the vision tower's, or 64: the video VAE's), out rows padded by
// out_pad columns (gap columns must stay untouched), every `row_step`-th query row checked against the CPU references
// (all rows vs cuDNN), the kernel and cuDNN on the same inputs.
void check_case(SdpaAttention& sdpa, int64_t s, int heads, int64_t out_pad, int64_t row_step, std::mt19937_64& rng,
                int64_t d = 128, Bf16PvWidth pv = Bf16PvWidth::kHead) {
  const int64_t width = heads * d, ld = 3 * width, ldo = width + out_pad;
  SCOPED_TRACE("S=" + std::to_string(s) + " heads=" + std::to_string(heads) + " d=" + std::to_string(d) +
               " out_pad=" + std::to_string(out_pad));
  std::normal_distribution<float> g(0.f, 1.f);
  std::vector<uint16_t> qkv(static_cast<size_t>(s * ld));
  for (int64_t t = 0; t < s; ++t)
    for (int64_t c = 0; c < ld; ++c) {
      // K gets a per-channel mean (as real K does) and Q a larger scale so the softmax is not flat.
      const float base = g(rng);
      float val = base;
      if (c < width) val = 1.5f * base;
      else if (c < 2 * width) val = base + 0.5f * static_cast<float>((c % 7) - 3);
      qkv[static_cast<size_t>(t * ld + c)] = bf16_bits_from_f32(val);
    }
  DeviceBuffer buf(qkv.size() * 2), out(static_cast<size_t>(s * ldo) * 2), out_cudnn(static_cast<size_t>(s * ldo) * 2);
  buf.upload(qkv.data(), qkv.size() * 2);
  Tensor q = device_view(buf, 0, {s, width}, {ld, 1});
  Tensor k = device_view(buf, width * 2, {s, width}, {ld, 1});
  Tensor v = device_view(buf, 2 * width * 2, {s, width}, {ld, 1});
  Tensor o = device_view(out, 0, {s, width}, {ldo, 1});
  Tensor oc = device_view(out_cudnn, 0, {s, width}, {ldo, 1});
  out_cudnn.poison(0xFF);
  Status st = sdpa.run(q, k, v, heads, static_cast<int>(d), oc, nullptr);
  ASSERT_TRUE(st.ok()) << st.to_string();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<uint16_t> och(static_cast<size_t>(s * ldo));
  out_cudnn.download(och.data(), och.size() * 2);

  // CPU references on the checked query rows (a row-strided view of Q), all keys.
  const int64_t n = (s + row_step - 1) / row_step;
  Tensor qh = host_view(qkv, 0, {n, width}, {ld * row_step, 1});
  Tensor kh = host_view(qkv, width, {s, width}, {ld, 1});
  Tensor vh = host_view(qkv, 2 * width, {s, width}, {ld, 1});
  std::vector<uint16_t> rcpu(static_cast<size_t>(n * width));
  Tensor rcput = host_view(rcpu, 0, {n, width}, {width, 1});
  ASSERT_TRUE(ref::attention_flash_fp32(qh, kh, vh, heads, static_cast<int>(d), rcput).ok());
  // The FP64 reference unrounded (ref::attention's program before its one BF16 rounding): r64 [n, width].
  std::vector<int64_t> rows;
  for (int64_t i = 0; i < s; i += row_step) rows.push_back(i);
  std::vector<double> r64(static_cast<size_t>(n * width));
  for (int h = 0; h < heads; ++h) {
    const std::vector<double> rh = fp64_attention(qkv, ld, width, d, s, h, rows);
    ASSERT_EQ(rh.size(), static_cast<size_t>(n * d));
    for (int64_t i = 0; i < n; ++i)
      for (int64_t c = 0; c < d; ++c)
        r64[static_cast<size_t>(i * width + h * d + c)] = rh[static_cast<size_t>(i * d + c)];
  }
  TwoReference tr_cudnn;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t c = 0; c < width; ++c) {
      const size_t ri = static_cast<size_t>(i * width + c), gi = static_cast<size_t>(i * row_step * ldo + c);
      tr_cudnn.add(f32_from_bf16_bits(och[gi]), f32_from_bf16_bits(rcpu[ri]), r64[ri]);
    }
  std::printf("[bf16_attention S=%lld heads=%d pad=%lld] cuDNN: %s\n", static_cast<long long>(s), heads,
              static_cast<long long>(out_pad), tr_cudnn.summary().c_str());

  // Poison: NaN (0xFFFF) in the out view, 0x7B7B in the gap columns of a padded out.
  std::vector<uint16_t> pattern(static_cast<size_t>(s * ldo), 0x7B7B);
  for (int64_t t = 0; t < s; ++t)
    for (int64_t c = 0; c < width; ++c) pattern[static_cast<size_t>(t * ldo + c)] = 0xFFFF;
  out.upload(pattern.data(), pattern.size() * 2);
  st = bf16_attention_batched(q, k, v, 1, heads, static_cast<int>(d), o, nullptr, pv);
  ASSERT_TRUE(st.ok()) << st.to_string();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<uint16_t> oh(static_cast<size_t>(s * ldo));
  out.download(oh.data(), oh.size() * 2);
  EXPECT_TRUE(out.sentinel_intact()) << "write past the end of out";
  int64_t gap = 0;
  for (int64_t t = 0; t < s; ++t)
    for (int64_t c = width; c < ldo; ++c) gap += oh[static_cast<size_t>(t * ldo + c)] != 0x7B7B;
  EXPECT_EQ(gap, 0) << "wrote outside the out row view";
  TwoReference tr;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t c = 0; c < width; ++c) {
      const size_t ri = static_cast<size_t>(i * width + c), gi = static_cast<size_t>(i * row_step * ldo + c);
      tr.add(f32_from_bf16_bits(oh[gi]), f32_from_bf16_bits(rcpu[ri]), r64[ri]);
    }
  const DeviationStats vs_cudnn = deviation(oh, och, s, width, ldo, ldo);
  std::printf(
      "[bf16_attention S=%lld heads=%d pad=%lld] owned: %s | vs cuDNN (all rows): max-abs %.3e rel-L2 "
      "%.3e nonfinite %lld\n",
      static_cast<long long>(s), heads, static_cast<long long>(out_pad), tr.summary().c_str(), vs_cudnn.max_abs,
      vs_cudnn.rel_l2, static_cast<long long>(vs_cudnn.nonfinite));
  EXPECT_TRUE(tr.passes(2e-4, 2e-3)) << tr.summary();
  // The kernel's error vs FP64 stays within the bound the cuDNN path meets on the same inputs (docs/numerics.md).
  EXPECT_LE(tr.rel_l2_gpu(), 2.0 * tr_cudnn.rel_l2_gpu() + 2e-4) << tr.summary() << " vs cuDNN " << tr_cudnn.summary();
  EXPECT_LE(tr.max_gpu, 2.0 * tr_cudnn.max_gpu + 2e-3 * tr.max_ref)
      << tr.summary() << " vs cuDNN " << tr_cudnn.summary();
  EXPECT_EQ(vs_cudnn.nonfinite, 0);
  // Two E1 implementations of one program: a few BF16 ulps of O apart, never O(1) (a wrong tile or mask).
  EXPECT_LT(vs_cudnn.rel_l2, 1e-2);
}

TEST(Bf16Attention, RaggedShapesTwoReferenceAndCudnn) {
  VORTEX_REQUIRE_GPU();
  // An unsupported GPU or a build without the kernel is a failure, not a skip (tests/gpu_test.h).
  ASSERT_TRUE(sm90_kernel_available()) << "the owned BF16 attention needs an sm_90 GPU and 90a in VORTEX_CUDA_ARCHS";
  auto sdpa = SdpaAttention::create();
  ASSERT_TRUE(sdpa.ok()) << sdpa.status().to_string();
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  struct Case {
    int64_t s;
    int heads;
    int64_t row_step;
  };
  for (const Case& c : std::vector<Case>{{1, 1, 1},
                                         {7, 2, 1},
                                         {64, 3, 1},
                                         {128, 2, 1},
                                         {129, 2, 1},
                                         {255, 3, 1},
                                         {256, 1, 1},
                                         {300, 4, 1},
                                         {1000, 2, 3},
                                         {2049, 2, 11}})
    check_case(**sdpa, c.s, c.heads, 0, c.row_step, rng);
}

// Many key blocks (long online-softmax chains, both ring stages reused ~30 times) and a padded out view.
TEST(Bf16Attention, LongSequenceStridedOutput) {
  VORTEX_REQUIRE_GPU();
  // An unsupported GPU or a build without the kernel is a failure, not a skip (tests/gpu_test.h).
  ASSERT_TRUE(sm90_kernel_available()) << "the owned BF16 attention needs an sm_90 GPU and 90a in VORTEX_CUDA_ARCHS";
  auto sdpa = SdpaAttention::create();
  ASSERT_TRUE(sdpa.ok()) << sdpa.status().to_string();
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  check_case(**sdpa, 97, 2, 64, 1, rng);
  check_case(**sdpa, 7777, 3, 64, 97, rng);
}

// head_dim 72 (the Qwen3-VL vision tower's 16 heads): ragged S, the tower's 4032 rows, every head (the last one's
// tile columns past the tensor read as zeros, the others' as the next head's values).
TEST(Bf16Attention, HeadDim72TwoReferenceAndCudnn) {
  VORTEX_REQUIRE_GPU();
  ASSERT_TRUE(sm90_kernel_available()) << "the owned BF16 attention needs an sm_90 GPU and 90a in VORTEX_CUDA_ARCHS";
  auto sdpa = SdpaAttention::create();
  ASSERT_TRUE(sdpa.ok()) << sdpa.status().to_string();
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (const Bf16PvWidth pv : {Bf16PvWidth::kHead, Bf16PvWidth::kFullTile}) {
    SCOPED_TRACE(pv == Bf16PvWidth::kHead ? "P V over 72 columns" : "P V over the 128-column tile");
    check_case(**sdpa, 1, 1, 0, 1, rng, 72, pv);
    check_case(**sdpa, 129, 2, 0, 1, rng, 72, pv);
    check_case(**sdpa, 300, 3, 8, 1, rng, 72, pv);
    check_case(**sdpa, 4032, 16, 0, 61, rng, 72, pv);
  }
}

// head_dim 64 (the video VAE decoder's 32 heads of 64, tiles of 1,797 tokens): ragged S, one key block and many, a
// padded out view, and the decoder's tile length with every head's columns in the row.
TEST(Bf16Attention, HeadDim64TwoReferenceAndCudnn) {
  VORTEX_REQUIRE_GPU();
  ASSERT_TRUE(sm90_kernel_available()) << "the owned BF16 attention needs an sm_90 GPU and 90a in VORTEX_CUDA_ARCHS";
  auto sdpa = SdpaAttention::create();
  ASSERT_TRUE(sdpa.ok()) << sdpa.status().to_string();
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  check_case(**sdpa, 1, 1, 0, 1, rng, 64);
  check_case(**sdpa, 127, 2, 0, 1, rng, 64);
  check_case(**sdpa, 129, 3, 8, 1, rng, 64);
  check_case(**sdpa, 300, 4, 0, 1, rng, 64);
  check_case(**sdpa, 1797, 32, 0, 41, rng, 64);
}

// Sequences stacked in the rows in one launch equal one launch per sequence bit for bit (d 64, 72 and 128, S not a
// multiple of the 128-row tile, so the last tiles and key blocks of a sequence overlap the next one's rows).
TEST(Bf16Attention, BatchedEqualsPerSequence) {
  VORTEX_REQUIRE_GPU();
  ASSERT_TRUE(sm90_kernel_available()) << "the owned BF16 attention needs an sm_90 GPU and 90a in VORTEX_CUDA_ARCHS";
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> g(0.f, 1.f);
  for (const auto& [d, pv] :
       {std::pair{int64_t{72}, Bf16PvWidth::kHead}, std::pair{int64_t{72}, Bf16PvWidth::kFullTile},
        std::pair{int64_t{128}, Bf16PvWidth::kHead}, std::pair{int64_t{64}, Bf16PvWidth::kHead}}) {
    SCOPED_TRACE("d=" + std::to_string(d) + (pv == Bf16PvWidth::kFullTile ? " full-tile P V" : ""));
    const int heads = 3;
    const int64_t s = 333, batch = 3, rows = s * batch, width = heads * d, ld = 3 * width;
    std::vector<uint16_t> qkv(static_cast<size_t>(rows * ld));
    for (uint16_t& x : qkv) x = bf16_bits_from_f32(g(rng));
    DeviceBuffer buf(qkv.size() * 2), out_b(static_cast<size_t>(rows * width) * 2),
        out_s(static_cast<size_t>(rows * width) * 2);
    buf.upload(qkv.data(), qkv.size() * 2);
    out_b.poison(0xFF);
    out_s.poison(0xFF);
    Tensor q = device_view(buf, 0, {rows, width}, {ld, 1});
    Tensor k = device_view(buf, width * 2, {rows, width}, {ld, 1});
    Tensor v = device_view(buf, 2 * width * 2, {rows, width}, {ld, 1});
    Tensor ob = device_view(out_b, 0, {rows, width}, {width, 1});
    Status st = bf16_attention_batched(q, k, v, batch, heads, static_cast<int>(d), ob, nullptr, pv);
    ASSERT_TRUE(st.ok()) << st.to_string();
    for (int64_t b = 0; b < batch; ++b) {
      Tensor qs = device_view(buf, b * s * ld * 2, {s, width}, {ld, 1});
      Tensor ks = device_view(buf, (b * s * ld + width) * 2, {s, width}, {ld, 1});
      Tensor vs = device_view(buf, (b * s * ld + 2 * width) * 2, {s, width}, {ld, 1});
      Tensor os = device_view(out_s, b * s * width * 2, {s, width}, {width, 1});
      st = bf16_attention_batched(qs, ks, vs, 1, heads, static_cast<int>(d), os, nullptr, pv);
      ASSERT_TRUE(st.ok()) << st.to_string();
    }
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<uint16_t> hb(static_cast<size_t>(rows * width)), hs(hb.size());
    out_b.download(hb.data(), hb.size() * 2);
    out_s.download(hs.data(), hs.size() * 2);
    int64_t differ = 0, nonfinite = 0;
    for (size_t i = 0; i < hb.size(); ++i) {
      differ += hb[i] != hs[i];
      nonfinite += !std::isfinite(f32_from_bf16_bits(hb[i]));
    }
    EXPECT_EQ(differ, 0) << "d=" << d;
    EXPECT_EQ(nonfinite, 0) << "d=" << d;
  }
}

TEST(Bf16Attention, BadArgumentsAreClearErrors) {
  // Validation happens before any device work, so this runs without a GPU too.
  auto st = std::make_shared<Storage>();
  std::vector<uint16_t> host(64 * 3 * 256 + 64 * 256 + 8);
  st->ptr = host.data();
  st->bytes = host.size() * 2;
  st->device = Device::kCuda;  // metadata only; never dereferenced on the error paths
  const int64_t s = 64, width = 256, ld = 3 * width;
  Tensor q = Tensor::from_storage(st, 0, {s, width}, DType::kBF16, {ld, 1});
  Tensor k = Tensor::from_storage(st, width * 2, {s, width}, DType::kBF16, {ld, 1});
  Tensor v = Tensor::from_storage(st, 2 * width * 2, {s, width}, DType::kBF16, {ld, 1});
  Tensor o = Tensor::from_storage(st, s * ld * 2, {s, width}, DType::kBF16, {width, 1});
  Tensor misaligned = Tensor::from_storage(st, 2, {s, width}, DType::kBF16, {ld, 1});
  Tensor odd_stride = Tensor::from_storage(st, 0, {s, width}, DType::kBF16, {ld + 1, 1});
  Tensor short_rows = Tensor::from_storage(st, 0, {s - 1, width}, DType::kBF16, {ld, 1});
  Status r = bf16_attention(q, k, v, 2, 96, o, nullptr);  // head_dim 96: not a kernel of this file
  EXPECT_EQ(r.code(), ErrorCode::kUnsupported) << r.to_string();
  r = bf16_attention_batched(q, k, v, 3, 2, 128, o, nullptr);  // 64 rows are not 3 equal sequences
  EXPECT_EQ(r.code(), ErrorCode::kInvalidArgument) << r.to_string();
  r = bf16_attention(misaligned, k, v, 2, 128, o, nullptr);
  EXPECT_EQ(r.code(), ErrorCode::kInvalidArgument) << r.to_string();
  r = bf16_attention(q, odd_stride, v, 2, 128, o, nullptr);
  EXPECT_EQ(r.code(), ErrorCode::kInvalidArgument) << r.to_string();
  EXPECT_NE(r.message().find("multiple of 8"), std::string::npos) << r.message();
  r = bf16_attention(q, k, v, 3, 128, o, nullptr);  // 3 heads need 384 columns
  EXPECT_EQ(r.code(), ErrorCode::kInvalidArgument) << r.to_string();
  r = bf16_attention(q, k, short_rows, 2, 128, o, nullptr);
  EXPECT_EQ(r.code(), ErrorCode::kInvalidArgument) << r.to_string();
}

}  // namespace
}  // namespace vortex
