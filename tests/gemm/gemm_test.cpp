// GemmEngine on the GPU (E1, docs/numerics.md two-reference rule): BF16 at the four H3 widths for ragged M
// (1, 7, 129) on sampled elements, the BF16 bias epilogue (one rounding after an FP32 add, checked
// bit-exactly on operands whose products sum exactly), strided x/out row views, FP32 without TF32,
// FP8 per-tensor and blockwise (error vs FP64 of the dequantized operands + the E2 table vs BF16).
// Outputs are poisoned first; sentinels after every output catch out-of-bounds writes. GPU label.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <vector>

#include "gemm/fp8_reference.h"
#include "gemm/gemm.h"
#include "gpu_test.h"
#include "measure/gemm_tune.h"
#include "vortex/dtype.h"

namespace vortex {
namespace {

using testing::DeviceBuffer;
using testing::TwoReference;

Tensor device_view(const DeviceBuffer& buf, Shape shape, DType dtype, Shape strides = {}) {
  return buf.view(std::move(shape), dtype, std::move(strides));
}

std::unique_ptr<GemmEngine> make_engine() {
  GemmEngineOptions opt;
  opt.load_pinned_table = false;
  auto e = GemmEngine::create(opt);
  EXPECT_TRUE(e.ok()) << e.status().to_string();
  return e.ok() ? std::move(e).value() : nullptr;
}

std::vector<uint16_t> random_bf16(size_t n, std::mt19937_64& rng, float scale) {
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<uint16_t> v(n);
  for (auto& x : v) x = bf16_bits_from_f32(u(rng));
  return v;
}

struct H3Shape {
  const char* name;
  int64_t n, k;
};
const H3Shape kShapes[] = {{"qkv", 21504, 5376}, {"out", 5376, 7168}, {"fc1", 28672, 5376}, {"fc2", 5376, 14336}};

// ---- BF16 at the H3 widths, ragged M, sampled columns ---------------------------------------------
TEST(GemmBf16, H3WidthsRaggedM) {
  VORTEX_REQUIRE_GPU();
  auto engine = make_engine();
  ASSERT_TRUE(engine);
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (const auto& sh : kShapes) {
    DeviceBuffer w(static_cast<size_t>(sh.n * sh.k) * 2);
    ASSERT_TRUE(fill_uniform_bf16_device(w.get(), sh.n * sh.k, seed ^ 0x9E37, 0.05f, nullptr).ok());
    // Sampled weight rows (first, last and random) downloaded for the reference.
    std::vector<int64_t> cols = {0, sh.n - 1};
    while (cols.size() < 48) cols.push_back(static_cast<int64_t>(rng() % static_cast<uint64_t>(sh.n)));
    std::vector<std::vector<uint16_t>> wrows;
    for (int64_t j : cols) {
      std::vector<uint16_t> row(static_cast<size_t>(sh.k));
      ASSERT_EQ(cudaMemcpy(row.data(), static_cast<const uint16_t*>(w.get()) + j * sh.k, static_cast<size_t>(sh.k) * 2,
                           cudaMemcpyDeviceToHost),
                cudaSuccess);
      wrows.push_back(std::move(row));
    }
    LinearWeight lw;
    lw.weight = device_view(w, {sh.n, sh.k}, DType::kBF16);
    for (int64_t m : {1, 7, 129}) {
      SCOPED_TRACE(std::string(sh.name) + " M=" + std::to_string(m));
      auto xh = random_bf16(static_cast<size_t>(m * sh.k), rng, 1.0f);
      DeviceBuffer x(xh.size() * 2), out(static_cast<size_t>(m * sh.n) * 2);
      x.upload(xh.data(), xh.size() * 2);
      out.poison(0xFF);  // bf16 NaN everywhere
      Tensor xt = device_view(x, {m, sh.k}, DType::kBF16);
      Tensor ot = device_view(out, {m, sh.n}, DType::kBF16);
      Status st = engine->linear(xt, lw, nullptr, ot, nullptr);
      ASSERT_TRUE(st.ok()) << st.to_string();
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      std::vector<uint16_t> oh(static_cast<size_t>(m * sh.n));
      out.download(oh.data(), oh.size() * 2);
      int64_t nan_count = 0;
      for (uint16_t b : oh) nan_count += std::isnan(f32_from_bf16_bits(b));
      EXPECT_EQ(nan_count, 0) << "unwritten (poisoned) or NaN outputs";
      EXPECT_TRUE(out.sentinel_intact()) << "write past the end of out";
      TwoReference tr;
      for (int64_t i = 0; i < m; ++i) {
        for (size_t c = 0; c < cols.size(); ++c) {
          const auto& wr = wrows[c];
          double ref = 0;
          float cpu = 0;
          for (int64_t t = 0; t < sh.k; ++t) {
            const float a = f32_from_bf16_bits(xh[static_cast<size_t>(i * sh.k + t)]);
            const float b = f32_from_bf16_bits(wr[static_cast<size_t>(t)]);
            ref += static_cast<double>(a) * b;
            cpu += a * b;  // exact product, FP32 sequential sum
          }
          tr.add(f32_from_bf16_bits(oh[static_cast<size_t>(i * sh.n + cols[c])]), round_bf16(cpu), ref);
        }
      }
      std::printf("[bf16 %s M=%lld] %s\n", sh.name, static_cast<long long>(m), tr.summary().c_str());
      EXPECT_TRUE(tr.passes(1e-5, 1e-6)) << tr.summary();
    }
  }
}

// ---- bias epilogue: R(fp32(acc + bias)), one rounding -----------------------------------------------
TEST(GemmBf16, BiasEpilogueRoundsOnce) {
  VORTEX_REQUIRE_GPU();
  auto engine = make_engine();
  ASSERT_TRUE(engine);
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  // Positive small integers: every partial sum is an exact integer in FP32 whatever the order, and the
  // sums (96..1536) are past 256, where BF16's step is 2..8, so R(R(acc) + bias) != R(acc + bias) often.
  const int64_t m = 37, n = 5376, k = 96;
  std::uniform_int_distribution<int> small(1, 4);
  std::vector<uint16_t> xh(static_cast<size_t>(m * k)), wh(static_cast<size_t>(n * k)), bh(static_cast<size_t>(n));
  for (auto& v : xh) v = bf16_bits_from_f32(static_cast<float>(small(rng)));
  for (auto& v : wh) v = bf16_bits_from_f32(static_cast<float>(small(rng)));
  std::uniform_int_distribution<int> eighths(-127, 127);
  for (auto& v : bh) v = bf16_bits_from_f32(static_cast<float>(eighths(rng)) / 8.0f);  // |bias| < 16, exact
  DeviceBuffer x(xh.size() * 2), w(wh.size() * 2), b(bh.size() * 2), out(static_cast<size_t>(m * n) * 2);
  x.upload(xh.data(), xh.size() * 2);
  w.upload(wh.data(), wh.size() * 2);
  b.upload(bh.data(), bh.size() * 2);
  out.poison(0xFF);
  LinearWeight lw;
  lw.weight = device_view(w, {n, k}, DType::kBF16);
  Tensor xt = device_view(x, {m, k}, DType::kBF16), ot = device_view(out, {m, n}, DType::kBF16);
  Tensor bt = device_view(b, {n}, DType::kBF16);
  Status st = engine->linear(xt, lw, &bt, ot, nullptr);
  ASSERT_TRUE(st.ok()) << st.to_string();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<uint16_t> oh(static_cast<size_t>(m * n));
  out.download(oh.data(), oh.size() * 2);
  EXPECT_TRUE(out.sentinel_intact());
  int64_t mismatches = 0, double_rounding_differs = 0;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      float acc = 0;
      for (int64_t t = 0; t < k; ++t)
        acc += f32_from_bf16_bits(xh[static_cast<size_t>(i * k + t)]) *
               f32_from_bf16_bits(wh[static_cast<size_t>(j * k + t)]);
      const float bias = f32_from_bf16_bits(bh[static_cast<size_t>(j)]);
      const uint16_t once = bf16_bits_from_f32(acc + bias);
      const uint16_t twice = bf16_bits_from_f32(round_bf16(acc) + bias);
      double_rounding_differs += once != twice;
      mismatches += oh[static_cast<size_t>(i * n + j)] != once;
    }
  std::printf("[bias epilogue] %lld of %lld outputs differ from R(acc + bias); double rounding would differ on %lld\n",
              static_cast<long long>(mismatches), static_cast<long long>(m * n),
              static_cast<long long>(double_rounding_differs));
  EXPECT_GT(double_rounding_differs, 0) << "test operands do not discriminate one vs two roundings";
  EXPECT_EQ(mismatches, 0) << "cuBLASLt's BIAS epilogue does not add the bias in FP32 before one rounding";
}

// ---- strided row views (ld > width) for x and out --------------------------------------------------
TEST(GemmBf16, StridedRowViews) {
  VORTEX_REQUIRE_GPU();
  auto engine = make_engine();
  ASSERT_TRUE(engine);
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const int64_t m = 129, n = 384, k = 5376, ldx = 3 * k, ldo = n + 64;  // x = middle third of [M, 3K]
  auto xh = random_bf16(static_cast<size_t>(m * ldx), rng, 1.0f);
  auto wh = random_bf16(static_cast<size_t>(n * k), rng, 0.05f);
  DeviceBuffer x(xh.size() * 2), w(wh.size() * 2), out(static_cast<size_t>(m * ldo) * 2);
  x.upload(xh.data(), xh.size() * 2);
  w.upload(wh.data(), wh.size() * 2);
  out.poison(0x7B);  // gap columns must keep this
  LinearWeight lw;
  lw.weight = device_view(w, {n, k}, DType::kBF16);
  Tensor xfull = device_view(x, {m, ldx}, DType::kBF16);
  auto xv = xfull.narrow(1, k, k);
  ASSERT_TRUE(xv.ok());
  Tensor ofull = device_view(out, {m, ldo}, DType::kBF16);
  auto ov = ofull.narrow(1, 0, n);
  ASSERT_TRUE(ov.ok());
  Status st = engine->linear(*xv, lw, nullptr, *ov, nullptr);
  ASSERT_TRUE(st.ok()) << st.to_string();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<uint16_t> oh(static_cast<size_t>(m * ldo));
  out.download(oh.data(), oh.size() * 2);
  EXPECT_TRUE(out.sentinel_intact());
  TwoReference tr;
  int64_t gap_clobbered = 0;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = n; j < ldo; ++j) gap_clobbered += oh[static_cast<size_t>(i * ldo + j)] != 0x7B7B;
    for (int64_t j = 0; j < n; ++j) {
      double ref = 0;
      float cpu = 0;
      for (int64_t t = 0; t < k; ++t) {
        const float a = f32_from_bf16_bits(xh[static_cast<size_t>(i * ldx + k + t)]);
        const float b = f32_from_bf16_bits(wh[static_cast<size_t>(j * k + t)]);
        ref += static_cast<double>(a) * b;
        cpu += a * b;
      }
      tr.add(f32_from_bf16_bits(oh[static_cast<size_t>(i * ldo + j)]), round_bf16(cpu), ref);
    }
  }
  std::printf("[bf16 strided] %s\n", tr.summary().c_str());
  EXPECT_EQ(gap_clobbered, 0) << "wrote outside the out row view";
  EXPECT_TRUE(tr.passes(1e-5, 1e-6)) << tr.summary();
}

// ---- FP32 (patch projection K=96 and head N=96): no TF32 -------------------------------------------
TEST(GemmF32, NoTf32PatchAndHead) {
  VORTEX_REQUIRE_GPU();
  auto engine = make_engine();
  ASSERT_TRUE(engine);
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  struct Case {
    int64_t m, n, k;
  };
  for (Case c : {Case{129, 5376, 96}, Case{7, 96, 5376}, Case{1, 32, 5376}}) {
    SCOPED_TRACE("M=" + std::to_string(c.m) + " N=" + std::to_string(c.n) + " K=" + std::to_string(c.k));
    std::vector<float> xh(static_cast<size_t>(c.m * c.k)), wh(static_cast<size_t>(c.n * c.k)),
        bh(static_cast<size_t>(c.n));
    for (auto& v : xh) v = u(rng);
    for (auto& v : wh) v = u(rng);
    for (auto& v : bh) v = u(rng);
    DeviceBuffer x(xh.size() * 4), w(wh.size() * 4), b(bh.size() * 4), out(static_cast<size_t>(c.m * c.n) * 4);
    x.upload(xh.data(), xh.size() * 4);
    w.upload(wh.data(), wh.size() * 4);
    b.upload(bh.data(), bh.size() * 4);
    out.poison(0xFF);
    LinearWeight lw;
    lw.weight = device_view(w, {c.n, c.k}, DType::kF32);
    Tensor xt = device_view(x, {c.m, c.k}, DType::kF32), ot = device_view(out, {c.m, c.n}, DType::kF32);
    Tensor bt = device_view(b, {c.n}, DType::kF32);
    Status st = engine->linear(xt, lw, &bt, ot, nullptr);
    ASSERT_TRUE(st.ok()) << st.to_string();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<float> oh(static_cast<size_t>(c.m * c.n));
    out.download(oh.data(), oh.size() * 4);
    EXPECT_TRUE(out.sentinel_intact());
    TwoReference tr;
    for (int64_t i = 0; i < c.m; ++i)
      for (int64_t j = 0; j < c.n; ++j) {
        double ref = bh[static_cast<size_t>(j)];
        float cpu = 0;
        for (int64_t t = 0; t < c.k; ++t) {
          const float a = xh[static_cast<size_t>(i * c.k + t)], bb = wh[static_cast<size_t>(j * c.k + t)];
          ref += static_cast<double>(a) * bb;
          cpu += a * bb;
        }
        cpu += bh[static_cast<size_t>(j)];
        tr.add(oh[static_cast<size_t>(i * c.n + j)], cpu, ref);
      }
    std::printf("[f32 M=%lld N=%lld K=%lld] %s\n", static_cast<long long>(c.m), static_cast<long long>(c.n),
                static_cast<long long>(c.k), tr.summary().c_str());
    // TF32 (10-bit mantissa inputs) would be ~1e-3 relative; FP32 is ~1e-7.
    EXPECT_TRUE(tr.passes(1e-6, 1e-6)) << tr.summary();
    EXPECT_LT(tr.rel_l2_gpu(), 1e-5) << "looks like TF32 or lower precision";
  }
}

// ---- FP8: quantizers are E0 with the host reference --------------------------------------------------
TEST(Fp8Quantize, PerTensorAndRowBlockMatchHostBytes) {
  VORTEX_REQUIRE_GPU();
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (int64_t m : {1, 7, 129}) {
    for (int64_t k : {5376, 7168, 14336, 144}) {
      SCOPED_TRACE("M=" + std::to_string(m) + " K=" + std::to_string(k));
      const int64_t ldx = k + 16;
      auto xh = random_bf16(static_cast<size_t>(m * ldx), rng, 3.0f);
      // Adversarial rows: zeros, one huge outlier, values past 448 * scale, subnormal-range values.
      for (int64_t t = 0; t < k; ++t) xh[static_cast<size_t>(t)] = 0;
      if (m > 1) xh[static_cast<size_t>(ldx + 5)] = bf16_bits_from_f32(-3.0e4f);
      if (m > 2)
        for (int64_t t = 0; t < k; ++t)
          xh[static_cast<size_t>(2 * ldx + t)] = bf16_bits_from_f32(1e-6f * static_cast<float>(t % 17));
      DeviceBuffer x(xh.size() * 2);
      x.upload(xh.data(), xh.size() * 2);
      // per tensor
      {
        DeviceBuffer q(static_cast<size_t>(m * k)), s(16), amax(16);
        q.poison(0xEE);
        ASSERT_TRUE(quantize_fp8_per_tensor(x.get(), m, k, ldx, q.get(), static_cast<float*>(s.get()),
                                            static_cast<uint32_t*>(amax.get()), nullptr)
                        .ok());
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        std::vector<uint8_t> qg(static_cast<size_t>(m * k)), qr(qg.size());
        float sg = 0;
        q.download(qg.data(), qg.size());
        s.download(&sg, 4);
        const float sr = quantize_fp8_per_tensor_ref(xh.data(), m, k, ldx, qr.data());
        EXPECT_EQ(std::memcmp(&sg, &sr, 4), 0) << "scale " << sg << " vs " << sr;
        EXPECT_EQ(qg, qr);
        EXPECT_TRUE(q.sentinel_intact());
        // Static (checkpoint input_scale) path: a scale that saturates part of the tensor.
        const float static_scale = sr * 0.37f;
        DeviceBuffer ss(16);
        ss.upload(&static_scale, 4);
        q.poison(0xEE);
        ASSERT_TRUE(
            quantize_fp8_per_tensor_static(x.get(), m, k, ldx, q.get(), static_cast<const float*>(ss.get()), nullptr)
                .ok());
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        q.download(qg.data(), qg.size());
        quantize_fp8_with_scale_ref(xh.data(), m, k, ldx, static_scale, qr.data());
        EXPECT_EQ(qg, qr) << "static-scale quantizer";
      }
      // 1x128 with padding rows up to a multiple of 4
      {
        const int64_t ld_scale = (m + 3) / 4 * 4, groups = (k + 127) / 128;
        DeviceBuffer q(static_cast<size_t>(ld_scale * k)), s(static_cast<size_t>(groups * ld_scale) * 4);
        q.poison(0xEE);
        s.poison(0xEE);
        ASSERT_TRUE(
            quantize_fp8_rowblock128(x.get(), m, k, ldx, q.get(), static_cast<float*>(s.get()), ld_scale, nullptr)
                .ok());
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        std::vector<uint8_t> qg(static_cast<size_t>(ld_scale * k)), qr(qg.size());
        std::vector<float> sg(static_cast<size_t>(groups * ld_scale)), sr(sg.size());
        q.download(qg.data(), qg.size());
        s.download(sg.data(), sg.size() * 4);
        quantize_fp8_rowblock128_ref(xh.data(), m, k, ldx, qr.data(), sr.data(), ld_scale);
        EXPECT_EQ(qg, qr);
        EXPECT_EQ(std::memcmp(sg.data(), sr.data(), sg.size() * 4), 0);
        EXPECT_TRUE(q.sentinel_intact());
        EXPECT_TRUE(s.sentinel_intact());
      }
    }
  }
}

// The per-tensor quantizer's two paths: the 16-byte vector path (aligned x, ldx % 8, K % 8) and the
// element path (forced, and reached through a misaligned x, ldx or K), each byte-for-byte vs the host.
TEST(Fp8Quantize, PerTensorVectorAndElementPathsMatchHostBytes) {
  VORTEX_REQUIRE_GPU();
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  struct Case {
    int64_t m, k, ldx, x_offset;  // x_offset in elements: 1 makes x 2-byte (not 16-byte) aligned
    const char* path;
  };
  const Case cases[] = {{257, 7168, 7168, 0, "vector"},       {33, 14336, 14352, 0, "vector"},
                        {5, 136, 144, 0, "vector"},           {33, 5376, 5384, 1, "element (x misaligned)"},
                        {17, 140, 140, 0, "element (K % 8)"}, {9, 512, 515, 0, "element (ldx % 8)"}};
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.path) + " M=" + std::to_string(c.m) + " K=" + std::to_string(c.k) +
                 " ldx=" + std::to_string(c.ldx));
    auto xh = random_bf16(static_cast<size_t>(c.m * c.ldx + c.x_offset), rng, 2.0f);
    xh[static_cast<size_t>(c.x_offset + (c.m / 2) * c.ldx + c.k - 1)] = bf16_bits_from_f32(-907.0f);  // the amax
    DeviceBuffer x(xh.size() * 2);
    x.upload(xh.data(), xh.size() * 2);
    const void* xp = static_cast<const uint16_t*>(x.get()) + c.x_offset;
    std::vector<uint8_t> qr(static_cast<size_t>(c.m * c.k));
    const float sr = quantize_fp8_per_tensor_ref(xh.data() + c.x_offset, c.m, c.k, c.ldx, qr.data());
    for (bool force_element : {false, true}) {
      SCOPED_TRACE(force_element ? "quantize_fp8_per_tensor_element_path" : "quantize_fp8_per_tensor");
      DeviceBuffer q(qr.size()), s(16), amax(16);
      q.poison(0xEE);
      s.poison(0xEE);
      Status st = force_element
                      ? quantize_fp8_per_tensor_element_path(xp, c.m, c.k, c.ldx, q.get(), static_cast<float*>(s.get()),
                                                             static_cast<uint32_t*>(amax.get()), nullptr)
                      : quantize_fp8_per_tensor(xp, c.m, c.k, c.ldx, q.get(), static_cast<float*>(s.get()),
                                                static_cast<uint32_t*>(amax.get()), nullptr);
      ASSERT_TRUE(st.ok()) << st.to_string();
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      std::vector<uint8_t> qg(qr.size());
      float sg = 0;
      q.download(qg.data(), qg.size());
      s.download(&sg, 4);
      EXPECT_EQ(std::memcmp(&sg, &sr, 4), 0) << "scale " << sg << " vs " << sr;
      EXPECT_EQ(qg, qr);
      EXPECT_TRUE(q.sentinel_intact());
      // Static scale (saturating part of the tensor) through the same entry's path choice.
      if (!force_element) {
        const float static_scale = sr * 0.5f;
        DeviceBuffer ss(16);
        ss.upload(&static_scale, 4);
        q.poison(0xEE);
        ASSERT_TRUE(
            quantize_fp8_per_tensor_static(xp, c.m, c.k, c.ldx, q.get(), static_cast<const float*>(ss.get()), nullptr)
                .ok());
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        std::vector<uint8_t> qs(qr.size());
        quantize_fp8_with_scale_ref(xh.data() + c.x_offset, c.m, c.k, c.ldx, static_scale, qs.data());
        q.download(qg.data(), qg.size());
        EXPECT_EQ(qg, qs) << "static-scale quantizer";
        EXPECT_TRUE(q.sentinel_intact());
      }
    }
  }
}

// Per-row (token) quantizer: bytes and scales vs the host reference; zero rows (scale 1) and outliers.
TEST(Fp8Quantize, PerRowMatchesHostBytes) {
  VORTEX_REQUIRE_GPU();
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (int64_t m : {1, 7, 129}) {
    for (int64_t k : {5376, 7168, 14336, 136}) {
      SCOPED_TRACE("M=" + std::to_string(m) + " K=" + std::to_string(k));
      const int64_t ldx = k + 16;
      auto xh = random_bf16(static_cast<size_t>(m * ldx), rng, 3.0f);
      if (m > 1)
        for (int64_t t = 0; t < k; ++t) xh[static_cast<size_t>(ldx + t)] = 0;  // row 1: all zeros -> scale 1
      xh[static_cast<size_t>(k / 3)] = bf16_bits_from_f32(-2.5e4f);            // row 0: one outlier
      DeviceBuffer x(xh.size() * 2), q(static_cast<size_t>(m * k)), sc(static_cast<size_t>(m) * 4);
      x.upload(xh.data(), xh.size() * 2);
      q.poison(0xEE);
      sc.poison(0xEE);
      Status st = quantize_fp8_per_row(x.get(), m, k, ldx, q.get(), static_cast<float*>(sc.get()), nullptr);
      ASSERT_TRUE(st.ok()) << st.to_string();
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      std::vector<uint8_t> qg(static_cast<size_t>(m * k)), qr(qg.size());
      std::vector<float> sg(static_cast<size_t>(m)), sr(sg.size());
      q.download(qg.data(), qg.size());
      sc.download(sg.data(), sg.size() * 4);
      quantize_fp8_per_row_ref(xh.data(), m, k, ldx, qr.data(), sr.data());
      EXPECT_EQ(qg, qr);
      EXPECT_EQ(std::memcmp(sg.data(), sr.data(), sg.size() * 4), 0);
      if (m > 1) {
        EXPECT_EQ(sg[1], 1.0f) << "an all-zero row has scale 1";
      }
      EXPECT_TRUE(q.sentinel_intact());
      EXPECT_TRUE(sc.sentinel_intact());
    }
  }
  // Shapes the vector-only kernel cannot take are rejected before any launch.
  DeviceBuffer x(4096), q(4096), sc(64);
  EXPECT_EQ(quantize_fp8_per_row(x.get(), 2, 140, 140, q.get(), static_cast<float*>(sc.get()), nullptr).code(),
            ErrorCode::kInvalidArgument);
}

// Row-scaled FP8 GEMM (OUTER_VEC_32F both sides) as the gated residual of a block:
//   d = R(r + (s_x[i] * (s_w * gate[j])) * sum_t qx[i,t] qw[j,t]), in place (accumulate, C = D),
// gates of both signs; E1 vs FP64 by the two-reference rule. Without accumulate the poisoned d
// (NaN bytes) must not leak into the result.
TEST(GemmFp8, RowScaledGatedResidualInPlace) {
  VORTEX_REQUIRE_GPU();
  int dev = 0;
  cudaDeviceProp prop{};
  ASSERT_EQ(cudaGetDevice(&dev), cudaSuccess);
  ASSERT_EQ(cudaGetDeviceProperties(&prop, dev), cudaSuccess);
  if (prop.major < 9)
    GTEST_SKIP() << "OUTER_VEC_32F FP8 scaling needs sm_90+; device is sm_" << prop.major << prop.minor;
  auto engine = make_engine();
  ASSERT_TRUE(engine);
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> gate_dist(-1.5f, 1.5f);
  struct Case {
    const char* name;
    int64_t n, k, m;
  };
  for (const Case& c : {Case{"out", 5376, 7168, 129}, Case{"fc2", 5376, 14336, 7}, Case{"small", 256, 512, 33}}) {
    for (bool accumulate : {true, false}) {
      SCOPED_TRACE(std::string(c.name) + " M=" + std::to_string(c.m) + (accumulate ? " accumulate" : " plain"));
      auto xh = random_bf16(static_cast<size_t>(c.m * c.k), rng, 2.0f);
      auto wh = random_bf16(static_cast<size_t>(c.n * c.k), rng, 0.05f);
      auto rh = random_bf16(static_cast<size_t>(c.m * c.n), rng, 4.0f);  // the residual stream x
      std::vector<uint8_t> wq(wh.size());
      const float sw = quantize_fp8_per_tensor_ref(wh.data(), c.n, c.k, c.k, wq.data());
      std::vector<float> wv(static_cast<size_t>(c.n));
      for (auto& v : wv) v = sw * gate_dist(rng);  // s_w * gate (f32), as the fused path builds it
      DeviceBuffer x(xh.size() * 2), xq(static_cast<size_t>(c.m * c.k)), xs(static_cast<size_t>(c.m) * 4), w(wq.size()),
          ws(wv.size() * 4), d(rh.size() * 2);
      x.upload(xh.data(), xh.size() * 2);
      w.upload(wq.data(), wq.size());
      ws.upload(wv.data(), wv.size() * 4);
      if (accumulate) {
        d.upload(rh.data(), rh.size() * 2);
      } else {
        d.poison(0xFF);
      }
      ASSERT_TRUE(quantize_fp8_per_row(x.get(), c.m, c.k, c.k, xq.get(), static_cast<float*>(xs.get()), nullptr).ok());
      GemmCall call;
      call.precision = GemmPrecision::kFp8RowScaled;
      call.m = c.m;
      call.n = c.n;
      call.k = c.k;
      call.x = xq.get();
      call.ldx = c.k;
      call.w = w.get();
      call.ldw = c.k;
      call.d = d.get();
      call.ldd = c.n;
      call.x_scale = static_cast<const float*>(xs.get());
      call.w_scale = static_cast<const float*>(ws.get());
      call.accumulate = accumulate;
      Status st = engine->gemm(call, nullptr);
      ASSERT_TRUE(st.ok()) << st.to_string();
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      std::vector<uint16_t> dh(rh.size());
      d.download(dh.data(), dh.size() * 2);
      EXPECT_TRUE(d.sentinel_intact());
      std::vector<uint8_t> xqh(static_cast<size_t>(c.m * c.k));
      std::vector<float> xsh(static_cast<size_t>(c.m));
      quantize_fp8_per_row_ref(xh.data(), c.m, c.k, c.k, xqh.data(), xsh.data());
      std::vector<int64_t> cols = {0, c.n - 1};
      while (cols.size() < 64) cols.push_back(static_cast<int64_t>(rng() % static_cast<uint64_t>(c.n)));
      TwoReference tr;
      for (int64_t i = 0; i < c.m; ++i)
        for (int64_t j : cols) {
          double acc = 0;
          float cacc = 0;
          for (int64_t t = 0; t < c.k; ++t) {
            const float a = f32_from_e4m3(xqh[static_cast<size_t>(i * c.k + t)]);
            const float b = f32_from_e4m3(wq[static_cast<size_t>(j * c.k + t)]);
            acc += static_cast<double>(a) * b;
            cacc += a * b;
          }
          const double r = accumulate ? f32_from_bf16_bits(rh[static_cast<size_t>(i * c.n + j)]) : 0.0;
          const double ref = r + acc * static_cast<double>(xsh[static_cast<size_t>(i)]) * wv[static_cast<size_t>(j)];
          const float cpu = static_cast<float>(r) + cacc * (xsh[static_cast<size_t>(i)] * wv[static_cast<size_t>(j)]);
          tr.add(f32_from_bf16_bits(dh[static_cast<size_t>(i * c.n + j)]), round_bf16(cpu), ref);
        }
      std::printf("FP8 row-scaled %-5s M=%lld %s | %s\n", c.name, static_cast<long long>(c.m),
                  accumulate ? "accumulate" : "plain     ", tr.summary().c_str());
      EXPECT_TRUE(tr.passes(5e-4, 1e-3)) << tr.summary();
    }
  }
}

// ---- FP8 GEMMs through linear(): E1 vs FP64 of the dequantized operands, E2 table vs BF16 ------------
struct Fp8Case {
  const char* name;
  int64_t n, k;
  std::vector<int64_t> ms;
};

void run_fp8_linear(Fp8Scaling scaling) {
  auto engine = make_engine();
  ASSERT_TRUE(engine);
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE(std::string("seed ") + std::to_string(seed) + " scaling " + fp8_scaling_name(scaling));
  std::mt19937_64 rng(seed);
  const std::vector<Fp8Case> cases = {{"out", 5376, 7168, {1, 7, 129}},
                                      {"fc2", 5376, 14336, {129}},
                                      {"qkv", 21504, 5376, {129}},
                                      {"fc1", 28672, 5376, {130}}};
  std::printf("FP8 %s | shape M | E1 vs FP64(dequant): rel-L2 gpu / cpu | E2 vs BF16 GEMM: rel-L2, max-abs, cosine\n",
              fp8_scaling_name(scaling));
  for (const auto& c : cases) {
    // Weights are filled on the device (fast) and downloaded for the host quantizer and references.
    DeviceBuffer wbf(static_cast<size_t>(c.n * c.k) * 2);
    ASSERT_TRUE(fill_uniform_bf16_device(wbf.get(), c.n * c.k, rng(), 0.05f, nullptr).ok());
    std::vector<uint16_t> wh(static_cast<size_t>(c.n * c.k));
    wbf.download(wh.data(), wh.size() * 2);
    Tensor wt = Tensor::empty({c.n, c.k}, DType::kBF16);
    std::memcpy(wt.raw_data(), wh.data(), wh.size() * 2);
    auto q = quantize_weight_fp8(wt, scaling);
    ASSERT_TRUE(q.ok()) << q.status().to_string();
    const LinearWeight& hq = *q;
    DeviceBuffer wq(static_cast<size_t>(c.n * c.k)), ws(hq.weight_scale.nbytes());
    wq.upload(hq.weight.raw_data(), hq.weight.nbytes());
    ws.upload(hq.weight_scale.raw_data(), hq.weight_scale.nbytes());
    LinearWeight lw;
    lw.format = QuantFormat::kFp8Scaled;
    lw.weight = device_view(wq, {c.n, c.k}, DType::kF8E4M3);
    lw.weight_scale = device_view(ws, hq.weight_scale.shape(), DType::kF32);
    LinearWeight lbf;
    lbf.weight = device_view(wbf, {c.n, c.k}, DType::kBF16);
    const auto* wqh = hq.weight.data<uint8_t>();
    const auto* wsh = hq.weight_scale.data<float>();
    const int64_t wcols = fp8_block_scale_cols(c.k);
    for (int64_t m : c.ms) {
      SCOPED_TRACE(std::string(c.name) + " M=" + std::to_string(m));
      const int64_t ldx = c.k + 128;  // strided activation view
      auto xh = random_bf16(static_cast<size_t>(m * ldx), rng, 2.0f);
      DeviceBuffer x(xh.size() * 2), out(static_cast<size_t>(m * c.n) * 2), out_bf(static_cast<size_t>(m * c.n) * 2);
      x.upload(xh.data(), xh.size() * 2);
      out.poison(0xFF);
      out_bf.poison(0xFF);
      Tensor xfull = device_view(x, {m, ldx}, DType::kBF16);
      auto xv = xfull.narrow(1, 0, c.k);
      ASSERT_TRUE(xv.ok());
      Tensor ot = device_view(out, {m, c.n}, DType::kBF16), obt = device_view(out_bf, {m, c.n}, DType::kBF16);
      Status st = engine->linear(*xv, lw, nullptr, ot, nullptr);
      ASSERT_TRUE(st.ok()) << st.to_string();
      st = engine->linear(*xv, lbf, nullptr, obt, nullptr);
      ASSERT_TRUE(st.ok()) << st.to_string();
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      std::vector<uint16_t> oh(static_cast<size_t>(m * c.n)), obh(oh.size());
      out.download(oh.data(), oh.size() * 2);
      out_bf.download(obh.data(), obh.size() * 2);
      EXPECT_TRUE(out.sentinel_intact());
      // Host quantization of x: identical bytes to the GPU quantizer (tested above).
      const int64_t groups = (c.k + 127) / 128;
      std::vector<uint8_t> xq(static_cast<size_t>(m * c.k));
      std::vector<float> xs(scaling == Fp8Scaling::kPerTensor ? 1 : static_cast<size_t>(groups * m));
      if (scaling == Fp8Scaling::kPerTensor) xs[0] = quantize_fp8_per_tensor_ref(xh.data(), m, c.k, ldx, xq.data());
      else quantize_fp8_rowblock128_ref(xh.data(), m, c.k, ldx, xq.data(), xs.data(), m);
      std::vector<int64_t> cols = {0, c.n - 1};
      while (cols.size() < 64) cols.push_back(static_cast<int64_t>(rng() % static_cast<uint64_t>(c.n)));
      TwoReference tr;
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j : cols) {
          double ref = 0;
          float cpu = 0;
          for (int64_t g = 0; g < groups; ++g) {
            double part = 0;
            float cpart = 0;
            for (int64_t t = g * 128; t < std::min(c.k, g * 128 + 128); ++t) {
              const float a = f32_from_e4m3(xq[static_cast<size_t>(i * c.k + t)]);
              const float b = f32_from_e4m3(wqh[static_cast<size_t>(j * c.k + t)]);
              part += static_cast<double>(a) * b;
              cpart += a * b;
            }
            const double sx = scaling == Fp8Scaling::kPerTensor ? 1.0 : xs[static_cast<size_t>(g * m + i)];
            const double sw = scaling == Fp8Scaling::kPerTensor ? 1.0 : wsh[(j / 128) * wcols + g];
            ref += part * sx * sw;
            cpu += cpart * static_cast<float>(sx) * static_cast<float>(sw);
          }
          if (scaling == Fp8Scaling::kPerTensor) {
            ref *= static_cast<double>(xs[0]) * static_cast<double>(wsh[0]);
            cpu = cpu * (xs[0] * wsh[0]);
          }
          tr.add(f32_from_bf16_bits(oh[static_cast<size_t>(i * c.n + j)]), round_bf16(cpu), ref);
        }
      // E2 table: FP8 output vs the BF16 GEMM of the original operands, whole output.
      double d2 = 0, r2 = 0, dot = 0, g2 = 0, maxabs = 0;
      int64_t nonfinite = 0;
      for (size_t e = 0; e < oh.size(); ++e) {
        const double a = f32_from_bf16_bits(oh[e]), b = f32_from_bf16_bits(obh[e]);
        if (!std::isfinite(a)) {
          ++nonfinite;
          continue;
        }
        d2 += (a - b) * (a - b);
        r2 += b * b;
        g2 += a * a;
        dot += a * b;
        maxabs = std::max(maxabs, std::fabs(a - b));
      }
      const double e2_rel = std::sqrt(d2 / r2), cosine = dot / std::sqrt(r2 * g2);
      std::printf("FP8 %-10s | %s M=%lld | %.3e / %.3e | %.3e, %.3e, %.6f\n", fp8_scaling_name(scaling), c.name,
                  static_cast<long long>(m), tr.rel_l2_gpu(), tr.rel_l2_cpu(), e2_rel, maxabs, cosine);
      EXPECT_EQ(nonfinite, 0);
      EXPECT_TRUE(tr.passes(5e-4, 1e-3)) << tr.summary();
      EXPECT_LT(e2_rel, 0.08) << "FP8 result far from the BF16 program";
    }
  }
}

TEST(GemmFp8, PerTensorLinear) {
  VORTEX_REQUIRE_GPU();
  run_fp8_linear(Fp8Scaling::kPerTensor);
}

TEST(GemmFp8, BlockwiseLinear) {
  VORTEX_REQUIRE_GPU();
  int dev = 0;
  cudaDeviceProp prop{};
  ASSERT_EQ(cudaGetDevice(&dev), cudaSuccess);
  ASSERT_EQ(cudaGetDeviceProperties(&prop, dev), cudaSuccess);
  if (prop.major != 9)
    GTEST_SKIP() << "blockwise (VEC128 / BLK128x128) scaling is Hopper-only in cuBLASLt; device is sm_" << prop.major
                 << prop.minor;
  run_fp8_linear(Fp8Scaling::kBlockwise);
}

// ---- errors are clear, not crashes -----------------------------------------------------------------
TEST(GemmErrors, MisalignedFp8IsRejected) {
  VORTEX_REQUIRE_GPU();
  auto engine = make_engine();
  ASSERT_TRUE(engine);
  DeviceBuffer buf(1 << 20);
  GemmCall call;
  call.precision = GemmPrecision::kFp8PerTensor;
  call.m = 4;
  call.n = 32;
  call.k = 40;  // not a multiple of 16
  call.x = buf.get();
  call.w = buf.get();
  call.d = buf.get();
  call.ldx = call.ldw = 40;
  call.ldd = 32;
  call.x_scale = call.w_scale = static_cast<const float*>(buf.get());
  Status st = engine->gemm(call, nullptr);
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument) << st.to_string();
}

}  // namespace
}  // namespace vortex
