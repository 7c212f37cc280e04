// cuDNN SDPA baseline (GPU): reads Q/K/V as strided views of one [S, 3I] buffer and writes token-major
// out; checked with the two-reference rule against FP64 attention for ragged S (1..300), 2-4 heads,
// D = 128. The CPU same-program reference is the flash program: FP32 scores, FP32 softmax, P rounded
// to BF16 for the PV product, FP32 accumulation, one final rounding. Outputs poisoned, sentinels after
// them, gap columns of a strided out checked untouched.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <tuple>
#include <vector>

#include "cuda/attention/sdpa.h"
#include "gpu_test.h"
#include "vortex/dtype.h"

namespace vortex {
namespace {

using testing::DeviceBuffer;
using testing::TwoReference;

Tensor device_view(const DeviceBuffer& buf, int64_t byte_offset, Shape shape, Shape strides) {
  return buf.view(std::move(shape), DType::kBF16, std::move(strides), static_cast<size_t>(byte_offset));
}

// FP64 attention and the CPU flash program for head h, query i. qkv: [S, 3I] bf16 bits.
void reference_row(const std::vector<uint16_t>& qkv, int64_t s, int64_t width, int64_t d, int64_t h, int64_t i,
                   std::vector<double>& out64, std::vector<float>& out_cpu) {
  const int64_t ld = 3 * width;
  auto q = [&](int64_t t, int64_t c) { return f32_from_bf16_bits(qkv[static_cast<size_t>(t * ld + h * d + c)]); };
  auto k = [&](int64_t t, int64_t c) {
    return f32_from_bf16_bits(qkv[static_cast<size_t>(t * ld + width + h * d + c)]);
  };
  auto v = [&](int64_t t, int64_t c) {
    return f32_from_bf16_bits(qkv[static_cast<size_t>(t * ld + 2 * width + h * d + c)]);
  };
  const double scale64 = 1.0 / std::sqrt(static_cast<double>(d));
  const float scale32 = static_cast<float>(scale64);
  std::vector<double> s64(static_cast<size_t>(s));
  std::vector<float> s32(static_cast<size_t>(s));
  double mx64 = -1e300;
  float mx32 = -INFINITY;
  for (int64_t j = 0; j < s; ++j) {
    double a64 = 0;
    float a32 = 0;
    for (int64_t c = 0; c < d; ++c) {
      a64 += static_cast<double>(q(i, c)) * k(j, c);
      a32 += q(i, c) * k(j, c);
    }
    s64[static_cast<size_t>(j)] = a64 * scale64;
    s32[static_cast<size_t>(j)] = a32 * scale32;
    mx64 = std::max(mx64, s64[static_cast<size_t>(j)]);
    mx32 = std::max(mx32, s32[static_cast<size_t>(j)]);
  }
  double sum64 = 0;
  float sum32 = 0;
  std::vector<double> p64(static_cast<size_t>(s));
  std::vector<float> p32(static_cast<size_t>(s));
  for (int64_t j = 0; j < s; ++j) {
    p64[static_cast<size_t>(j)] = std::exp(s64[static_cast<size_t>(j)] - mx64);
    sum64 += p64[static_cast<size_t>(j)];
    p32[static_cast<size_t>(j)] = std::exp(s32[static_cast<size_t>(j)] - mx32);
    sum32 += p32[static_cast<size_t>(j)];
  }
  out64.assign(static_cast<size_t>(d), 0.0);
  out_cpu.assign(static_cast<size_t>(d), 0.0f);
  for (int64_t c = 0; c < d; ++c) {
    double o64 = 0;
    float o32 = 0;
    for (int64_t j = 0; j < s; ++j) {
      o64 += p64[static_cast<size_t>(j)] * v(j, c);
      o32 += round_bf16(p32[static_cast<size_t>(j)]) * v(j, c);
    }
    out64[static_cast<size_t>(c)] = o64 / sum64;
    out_cpu[static_cast<size_t>(c)] = round_bf16(o32 / sum32);
  }
}

void check_case(SdpaAttention& sdpa, int64_t s, int heads, int64_t out_pad, std::mt19937_64& rng) {
  const int64_t d = 128, width = heads * d, ld = 3 * width, ldo = width + out_pad;
  SCOPED_TRACE("S=" + std::to_string(s) + " heads=" + std::to_string(heads) + " out_pad=" + std::to_string(out_pad));
  std::normal_distribution<float> g(0.f, 1.f);
  std::vector<uint16_t> qkv(static_cast<size_t>(s * ld));
  for (int64_t t = 0; t < s; ++t)
    for (int64_t c = 0; c < ld; ++c) {
      // K gets a per-channel mean (as real K does) and Q a larger scale so softmax is not flat.
      const float base = g(rng);
      float val = base;
      if (c < width) val = 1.5f * base;
      else if (c < 2 * width) val = base + 0.5f * static_cast<float>((c % 7) - 3);
      qkv[static_cast<size_t>(t * ld + c)] = bf16_bits_from_f32(val);
    }
  DeviceBuffer buf(qkv.size() * 2), out(static_cast<size_t>(s * ldo) * 2);
  buf.upload(qkv.data(), qkv.size() * 2);
  out.poison(0xFF);
  if (out_pad > 0) {
    std::vector<uint16_t> pattern(static_cast<size_t>(s * ldo), 0x7B7B);
    for (int64_t t = 0; t < s; ++t)
      for (int64_t c = 0; c < width; ++c) pattern[static_cast<size_t>(t * ldo + c)] = 0xFFFF;
    out.upload(pattern.data(), pattern.size() * 2);
  }
  Tensor q = device_view(buf, 0, {s, width}, {ld, 1});
  Tensor k = device_view(buf, width * 2, {s, width}, {ld, 1});
  Tensor v = device_view(buf, 2 * width * 2, {s, width}, {ld, 1});
  Tensor o = device_view(out, 0, {s, width}, {ldo, 1});
  Status st = sdpa.run(q, k, v, heads, static_cast<int>(d), o, nullptr);
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
  std::vector<double> r64;
  std::vector<float> rcpu;
  // All queries for small S; a spread of them for larger S (each costs S*D*2 MACs per head).
  const int64_t step = s <= 64 ? 1 : 7;
  for (int h = 0; h < heads; ++h)
    for (int64_t i = 0; i < s; i += step) {
      reference_row(qkv, s, width, d, h, i, r64, rcpu);
      for (int64_t c = 0; c < d; ++c)
        tr.add(f32_from_bf16_bits(oh[static_cast<size_t>(i * ldo + h * d + c)]), rcpu[static_cast<size_t>(c)],
               r64[static_cast<size_t>(c)]);
    }
  std::printf("[sdpa S=%lld heads=%d pad=%lld] %s\n", static_cast<long long>(s), heads, static_cast<long long>(out_pad),
              tr.summary().c_str());
  EXPECT_TRUE(tr.passes(2e-4, 2e-3)) << tr.summary();
}

TEST(SdpaCudnn, RaggedShapesTwoReference) {
  VORTEX_REQUIRE_GPU();
  auto sdpa = SdpaAttention::create();
  ASSERT_TRUE(sdpa.ok()) << sdpa.status().to_string();
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (auto [s, heads] : std::vector<std::pair<int64_t, int>>{{1, 2}, {7, 3}, {64, 4}, {129, 2}, {255, 3}, {300, 4}})
    check_case(**sdpa, s, heads, 0, rng);
  auto info = (*sdpa)->plan_info(129, 2, 128, 3 * 256, 256);
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  std::printf("[sdpa plan] %s\n", info->c_str());
}

// run_batched: B equal sequences packed along the rows of one [B * S, 3I] buffer (the video VAE's tiles, D = 64),
// one cuDNN call; each sequence checked with the two-reference rule on its own rows, and compared with the
// per-sequence run() (reported: equal bytes are expected of one kernel but not part of the contract).
TEST(SdpaCudnn, BatchedSequencesTwoReference) {
  VORTEX_REQUIRE_GPU();
  auto sdpa = SdpaAttention::create();
  ASSERT_TRUE(sdpa.ok()) << sdpa.status().to_string();
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> g(0.f, 1.f);
  for (auto [batch, s, heads] : std::vector<std::tuple<int64_t, int64_t, int>>{{3, 97, 2}, {4, 261, 4}, {2, 1797, 2}}) {
    const int64_t d = 64, width = heads * d, ld = 3 * width, rows = batch * s;
    SCOPED_TRACE("B=" + std::to_string(batch) + " S=" + std::to_string(s));
    std::vector<uint16_t> qkv(static_cast<size_t>(rows * ld));
    for (int64_t t = 0; t < rows; ++t)
      for (int64_t c = 0; c < ld; ++c) {
        const float base = g(rng);
        const float val = c < width       ? 1.5f * base
                          : c < 2 * width ? base + 0.5f * static_cast<float>((c % 7) - 3)
                                          : base;
        qkv[static_cast<size_t>(t * ld + c)] = bf16_bits_from_f32(val);
      }
    DeviceBuffer buf(qkv.size() * 2), out(static_cast<size_t>(rows * width) * 2),
        out1(static_cast<size_t>(rows * width) * 2);
    buf.upload(qkv.data(), qkv.size() * 2);
    out.poison(0xFF);
    out1.poison(0xFF);
    Tensor q = device_view(buf, 0, {rows, width}, {ld, 1});
    Tensor k = device_view(buf, width * 2, {rows, width}, {ld, 1});
    Tensor v = device_view(buf, 2 * width * 2, {rows, width}, {ld, 1});
    Tensor o = device_view(out, 0, {rows, width}, {width, 1});
    Status st = (*sdpa)->run_batched(q, k, v, batch, heads, static_cast<int>(d), o, nullptr);
    ASSERT_TRUE(st.ok()) << st.to_string();
    for (int64_t b = 0; b < batch; ++b) {  // the per-sequence calls into out1
      auto qb = q.narrow(0, b * s, s), kb = k.narrow(0, b * s, s), vb = v.narrow(0, b * s, s);
      Tensor ob = device_view(out1, b * s * width * 2, {s, width}, {width, 1});
      ASSERT_TRUE(qb.ok() && kb.ok() && vb.ok());
      ASSERT_TRUE((*sdpa)->run(*qb, *kb, *vb, heads, static_cast<int>(d), ob, nullptr).ok());
    }
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<uint16_t> oh(static_cast<size_t>(rows * width)), oh1(oh.size());
    out.download(oh.data(), oh.size() * 2);
    out1.download(oh1.data(), oh1.size() * 2);
    EXPECT_TRUE(out.sentinel_intact()) << "write past the end of out";
    int64_t differ = 0;
    for (size_t i = 0; i < oh.size(); ++i) differ += oh[i] != oh1[i];
    TwoReference tr;
    std::vector<double> r64;
    std::vector<float> rcpu;
    for (int64_t b = 0; b < batch; ++b) {
      const std::vector<uint16_t> seq(qkv.begin() + b * s * ld, qkv.begin() + (b + 1) * s * ld);
      for (int h = 0; h < heads; ++h)
        for (int64_t i = 0; i < s; i += 13) {
          reference_row(seq, s, width, d, h, i, r64, rcpu);
          for (int64_t c = 0; c < d; ++c)
            tr.add(f32_from_bf16_bits(oh[static_cast<size_t>((b * s + i) * width + h * d + c)]),
                   rcpu[static_cast<size_t>(c)], r64[static_cast<size_t>(c)]);
        }
    }
    std::printf("[sdpa batched B=%lld S=%lld heads=%d D=64] %s; %lld of %zu values differ from per-sequence run()\n",
                static_cast<long long>(batch), static_cast<long long>(s), heads, tr.summary().c_str(),
                static_cast<long long>(differ), oh.size());
    EXPECT_TRUE(tr.passes(2e-4, 2e-3)) << tr.summary();
  }
  // Rows that do not split into equal sequences are refused.
  DeviceBuffer buf(static_cast<size_t>(10 * 3 * 128) * 2), out(static_cast<size_t>(10 * 128) * 2);
  Tensor q = device_view(buf, 0, {10, 128}, {384, 1}), k = device_view(buf, 256, {10, 128}, {384, 1});
  Tensor v = device_view(buf, 512, {10, 128}, {384, 1}), o = device_view(out, 0, {10, 128}, {128, 1});
  EXPECT_EQ((*sdpa)->run_batched(q, k, v, 3, 2, 64, o, nullptr).code(), ErrorCode::kInvalidArgument);
}

TEST(SdpaCudnn, StridedOutputView) {
  VORTEX_REQUIRE_GPU();
  auto sdpa = SdpaAttention::create();
  ASSERT_TRUE(sdpa.ok()) << sdpa.status().to_string();
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  check_case(**sdpa, 97, 2, 64, rng);
}

TEST(SdpaCudnn, BadArgumentsAreClearErrors) {
  VORTEX_REQUIRE_GPU();
  auto sdpa = SdpaAttention::create();
  ASSERT_TRUE(sdpa.ok()) << sdpa.status().to_string();
  DeviceBuffer buf(1 << 16);
  Status st = (*sdpa)->run_raw(static_cast<char*>(buf.get()) + 2, buf.get(), buf.get(), 768, buf.get(), 256, 8, 2, 128,
                               nullptr);
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument) << st.to_string();
}

}  // namespace
}  // namespace vortex
