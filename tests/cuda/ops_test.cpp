// GPU tests of the Component 1 kernels and the CudaBackend: every op against the CPU backend (the
// reference program) byte for byte (E0), on fresh random and adversarial inputs (huge dynamic range,
// signed zeros, denormals, inf/NaN, BF16 ties after the multiply), H3 widths (D 5376, 56 x 128 heads,
// F 14336) and ragged row counts, with outputs poisoned before the run and padding/sentinels checked
// after it. Also fused == unfused, fill_synthetic device == host, and the exhaustive SiLU check.
// Label gpu; every test skips with the reason when no CUDA device is present.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>

#include "core/synthetic.h"
#include "cuda/ops/ops.h"
#include "cuda_test_util.h"
#include "measure/bench_ops.h"
#include "ref/ref_ops.h"

namespace vortex {
namespace {

using cuda_test::Fill;
using cuda_test::Guarded;

const char* fill_name(Fill f) {
  switch (f) {
    case Fill::kNormal:
      return "normal";
    case Fill::kDynamicRange:
      return "dynamic-range";
    case Fill::kSpecial:
      return "special(+-0,denormal,inf,nan)";
    case Fill::kOddMantissa:
      return "odd-mantissa(ties)";
  }
  return "?";
}

class CudaOps : public ::testing::Test {
 protected:
  void SetUp() override {
    VORTEX_REQUIRE_CUDA(gpu_);
    seed_ = cuda_test::fresh_seed();
    rng_.seed(seed_);
    cpu_ = std::make_unique<CpuBackend>(0);
  }
  std::string seed_note() const { return "seed " + std::to_string(seed_) + " (rerun to get fresh inputs)"; }

  // Uploads a host tensor into a guarded device buffer (row stride ld).
  Guarded guarded(const Tensor& host, int64_t ld) {
    Result<Guarded> g = cuda_test::make_guarded(*gpu_, host.dim(0), host.dim(1), ld, host.dtype(), &host);
    EXPECT_TRUE(g.ok()) << g.status().to_string();
    return g.ok() ? g.value() : Guarded{};
  }
  Guarded poisoned(int64_t rows, int64_t cols, int64_t ld, DType dtype) {
    Result<Guarded> g = cuda_test::make_guarded(*gpu_, rows, cols, ld, dtype, nullptr);
    EXPECT_TRUE(g.ok()) << g.status().to_string();
    return g.ok() ? g.value() : Guarded{};
  }
  // Reads a guarded output, checks the sentinels, and compares with `expect`.
  void expect_equal(const Tensor& expect, const Guarded& g, const std::string& what) {
    std::string oob;
    Result<Tensor> got = cuda_test::read_guarded(*gpu_, g, &oob);
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    EXPECT_TRUE(oob.empty()) << what << ": " << oob << "; " << seed_note();
    const std::string diff = cuda_test::compare_bytes(expect, got.value());
    EXPECT_TRUE(diff.empty()) << what << ": " << diff << seed_note();
  }
  Tensor upload(const Tensor& host) {
    Result<Tensor> t = gpu_->upload(host);
    EXPECT_TRUE(t.ok()) << t.status().to_string();
    return t.ok() ? t.value() : Tensor{};
  }
  Tensor clone_host(const Tensor& t) {
    Tensor c = Tensor::empty(t.shape(), t.dtype());
    std::memcpy(c.raw_data(), t.raw_data(), t.nbytes());
    return c;
  }
  // AdaLN-like table [rows, chunks * d]: small random values; in tie mode the scale chunk holds 0.5 /
  // -0.25 (1 + scale = 1.5 / 0.75) and the gate chunk +-1.5, so odd-mantissa inputs hit BF16 ties.
  Tensor make_table(int64_t rows, int chunks, int64_t d, bool ties, int scale_chunk, int gate_chunk) {
    Tensor t = Tensor::empty({rows, chunks * d}, DType::kBF16);
    std::normal_distribution<float> n(0.0f, 0.3f);
    uint16_t* p = t.data<uint16_t>();
    for (int64_t r = 0; r < rows; ++r)
      for (int c = 0; c < chunks; ++c)
        for (int64_t j = 0; j < d; ++j) {
          float v = n(rng_);
          if (ties && c == scale_chunk && (rng_() & 3) != 0) v = (rng_() & 1) ? 0.5f : -0.25f;
          if (ties && c == gate_chunk && (rng_() & 3) != 0) v = (rng_() & 1) ? 1.5f : -1.5f;
          p[(r * chunks + c) * d + j] = bf16_bits_from_f32(v);
        }
    return t;
  }

  std::unique_ptr<CudaBackend> gpu_;
  std::unique_ptr<CpuBackend> cpu_;
  std::shared_ptr<CachingAllocator> row_map_memory_ = std::make_shared<CachingAllocator>();
  cuda_ops::SegmentRowMapCache row_maps_{row_map_memory_};  // device row maps for the direct cuda_ops calls
  uint64_t seed_ = 0;
  std::mt19937_64 rng_;
};

struct RowCase {
  int64_t rows, cols, ld;
  Fill fill;
};
// H3 width D = 5376 at ragged row counts (1, 7, 1000, 37810), unaligned strides (scalar path), a tiny
// width, and a row wider than 48 KB of shared memory.
const std::vector<RowCase> kNormCases = {
    {1, 5376, 5376, Fill::kNormal},      {7, 5376, 5440, Fill::kDynamicRange}, {1000, 5376, 5376, Fill::kSpecial},
    {37810, 5376, 5376, Fill::kNormal},  {13, 40, 43, Fill::kDynamicRange},    {5, 24, 24, Fill::kSpecial},
    {9, 5376, 5376, Fill::kOddMantissa}, {3, 30000, 30000, Fill::kNormal},
};

TEST_F(CudaOps, RmsNormMatchesReference) {
  for (const RowCase& c : kNormCases) {
    SCOPED_TRACE(std::to_string(c.rows) + "x" + std::to_string(c.cols) + " ld " + std::to_string(c.ld) + " " +
                 fill_name(c.fill));
    Tensor x = cuda_test::random_host_bf16({c.rows, c.cols}, rng_, c.fill);
    Tensor w = cuda_test::random_host_bf16({c.cols}, rng_, Fill::kNormal);
    for (float eps : {1e-5f, 1e-6f}) {
      Tensor expect = Tensor::empty({c.rows, c.cols}, DType::kBF16);
      ASSERT_OK(cpu_->rms_norm(x, w, eps, expect));
      Guarded gx = guarded(x, c.ld);
      Guarded go = poisoned(c.rows, c.cols, c.ld + 8, DType::kBF16);
      Tensor gw = upload(w);
      ASSERT_OK(gpu_->rms_norm(gx.view, gw, eps, go.view));
      expect_equal(expect, go, "rms_norm out");
      expect_equal(x, gx, "rms_norm input (must be unchanged)");
    }
  }
}

TEST_F(CudaOps, ModulateMatchesReference) {
  for (const RowCase& c : kNormCases) {
    if (c.rows > 1000) continue;
    SCOPED_TRACE(std::to_string(c.rows) + "x" + std::to_string(c.cols) + " " + fill_name(c.fill));
    const bool ties = c.fill == Fill::kOddMantissa || c.fill == Fill::kSpecial;
    Tensor x = cuda_test::random_host_bf16({c.rows, c.cols}, rng_, c.fill);
    Tensor table = make_table(6, 6, c.cols, ties, 1, 2);
    SegmentTable seg = cuda_test::random_segments(c.rows, 6, rng_);
    for (auto [shift, scale] : {std::pair{0, 1}, std::pair{3, 4}}) {
      Tensor expect = clone_host(x);
      ASSERT_OK(cpu_->modulate(expect, table, shift, scale, seg));
      Guarded gx = guarded(x, c.ld);
      Tensor gt = upload(table);
      ASSERT_OK(gpu_->modulate(gx.view, gt, shift, scale, seg));
      expect_equal(expect, gx, "modulate x");
    }
  }
}

// One segment per row with a random table row: every CTA of the shared-memory-table variant sees more distinct
// table rows than it can stage, so staged and global-fallback rows alternate.
SegmentTable per_row_segments(int64_t rows, int32_t table_rows, std::mt19937_64& rng) {
  SegmentTable seg;
  seg.rows = rows;
  for (int64_t r = 0; r < rows; ++r) seg.segments.push_back({r, r + 1, static_cast<int32_t>(rng() % table_rows)});
  return seg;
}

TEST_F(CudaOps, RmsNormModulateFusedMatchesReferenceAndUnfused) {
  struct TableCase {
    int64_t table_rows;
    bool per_row;  // random table row per row instead of random_segments
  };
  std::vector<std::pair<RowCase, TableCase>> cases;
  for (const RowCase& c : kNormCases) cases.push_back({c, {3, false}});
  cases.push_back({{2000, 5376, 5376, Fill::kNormal}, {6, true}});        // > 3 table rows per CTA: fallback rows
  cases.push_back({{999, 5376, 5376, Fill::kOddMantissa}, {1, false}});   // one table row (one slot)
  cases.push_back({{4099, 4096, 4096, Fill::kDynamicRange}, {5, true}});  // 16 chunks per lane
  cases.push_back({{301, 6144, 6144, Fill::kSpecial}, {3, true}});        // widest register row (24 chunks)
  // Smallest first: the S = 37,810 case (most of the time, in the CPU reference) runs last.
  std::stable_sort(cases.begin(), cases.end(), [](const auto& a, const auto& b) {
    return a.first.rows * a.first.cols < b.first.rows * b.first.cols;
  });
  for (const auto& [c, tc] : cases) {
    SCOPED_TRACE(std::to_string(c.rows) + "x" + std::to_string(c.cols) + " " + fill_name(c.fill) + ", " +
                 std::to_string(tc.table_rows) + " table rows" + (tc.per_row ? " (random per row)" : ""));
    const bool ties = c.fill == Fill::kOddMantissa;
    Tensor x = cuda_test::random_host_bf16({c.rows, c.cols}, rng_, c.fill);
    Tensor w = cuda_test::random_host_bf16({c.cols}, rng_, Fill::kNormal);
    Tensor table = make_table(tc.table_rows, 6, c.cols, ties, 1, 2);
    SegmentTable seg = tc.per_row ? per_row_segments(c.rows, static_cast<int32_t>(tc.table_rows), rng_)
                                  : cuda_test::random_segments(c.rows, static_cast<int32_t>(tc.table_rows), rng_);
    Tensor expect = Tensor::empty({c.rows, c.cols}, DType::kBF16);
    ASSERT_OK(cpu_->rms_norm_modulate(x, w, 1e-5f, table, 0, 1, seg, expect));
    Guarded gx = guarded(x, c.ld);
    Tensor gw = upload(w), gt = upload(table);
    // The default kernels (through the backend) and the warp-per-row fallback of register rows (called directly:
    // on this device the table kernel always runs) must give the reference bytes; a failure names the path. The
    // output is contiguous (ld = cols), so one memcmp of the view plus the poisoned guard tail checks it;
    // expect_equal (element-wise, slow at S = 37,810) runs only to report a mismatch.
    std::string mismatched;  // paths whose bytes differ
    Tensor poison = Tensor::empty({c.rows * c.cols + cuda_test::kGuardElements}, DType::kBF16);  // host, poisoned once
    cuda_test::poison_fill(poison);
    const bool reg_rows = c.cols <= 6144 && c.cols % 8 == 0 && c.ld % 8 == 0;  // the fallback's domain
    int paths = 0;
    for (const bool fallback : {false, true}) {
      if (fallback && !reg_rows) continue;
      ++paths;
      const std::string path = fallback ? "warp-per-row fallback" : "default";
      const std::string what = "rms_norm_modulate (fused, " + path + ") vs CPU";
      Guarded fused;  // fresh poisoned device buffer per path, view [rows, cols] contiguous
      fused.rows = c.rows;
      fused.cols = fused.ld = c.cols;
      fused.buffer = upload(poison);
      fused.view = fused.buffer.as_strided({c.rows, c.cols}, {c.cols, 1}).value();
      if (fallback) {
        Result<cuda_ops::DeviceRowMap> map = cuda_ops::table_row_map(row_maps_, seg, gt, "test", gpu_->stream());
        ASSERT_TRUE(map.ok()) << map.status().to_string();
        ASSERT_OK(cuda_ops::rms_norm_modulate_warp_rows(gx.view, gw, 1e-5f, gt, 0, 1, map.value(), fused.view,
                                                        gpu_->stream()));
      } else {
        ASSERT_OK(gpu_->rms_norm_modulate(gx.view, gw, 1e-5f, gt, 0, 1, seg, fused.view));
      }
      Tensor got = Tensor::empty(fused.buffer.shape(), DType::kBF16);  // [rows * cols + guard] bf16
      ASSERT_OK(gpu_->download(fused.buffer, got));
      const uint16_t* g = got.data<uint16_t>();
      bool same = std::memcmp(g, expect.raw_data(), expect.nbytes()) == 0;
      for (int64_t i = expect.numel(); i < got.numel(); ++i) same = same && g[i] == cuda_test::kPoisonBf16;
      if (!same) {
        expect_equal(expect, fused, what);
        mismatched += " " + path;
      }
      EXPECT_TRUE(same) << what << ": bytes differ (details above); " << seed_note();
    }
    std::cout << "[rms_norm_modulate] " << c.rows << "x" << c.cols << " " << fill_name(c.fill) << ", " << tc.table_rows
              << " table rows" << (tc.per_row ? " per row" : "") << ": " << paths << " kernel paths checked, "
              << (mismatched.empty() ? "all E0" : "BYTES DIFFER:" + mismatched) << std::endl;
    if (tc.per_row || tc.table_rows != 3) continue;  // the unfused pair: once per row case
    Guarded unfused = poisoned(c.rows, c.cols, c.cols, DType::kBF16);
    ASSERT_OK(gpu_->rms_norm(gx.view, gw, 1e-5f, unfused.view));
    ASSERT_OK(gpu_->modulate(unfused.view, gt, 0, 1, seg));
    expect_equal(expect, unfused, "rms_norm + modulate (unfused GPU) vs CPU");
  }
}

struct QkCase {
  int64_t rows;
  int heads, head_dim, rope_dims;  // rope_dims 0: no RoPE
  Fill fill;
};

TEST_F(CudaOps, QkNormRopeInPlaceOnStridedQkvMatchesReference) {
  const std::vector<QkCase> cases = {
      {1, 56, 128, 96, Fill::kNormal},       {7, 56, 128, 96, Fill::kDynamicRange},
      {1000, 56, 128, 96, Fill::kNormal},    {37, 56, 128, 96, Fill::kSpecial},
      {9, 4, 64, 48, Fill::kOddMantissa},    {5, 3, 32, 0, Fill::kNormal},
      {11, 2, 256, 128, Fill::kNormal},      {3, 5, 128, 0, Fill::kDynamicRange},
      {13, 3, 128, 128, Fill::kOddMantissa}, {2000, 56, 128, 96, Fill::kDynamicRange},
      {3594, 32, 64, 48, Fill::kNormal},     {5, 3, 64, 0, Fill::kDynamicRange},  // the video VAE's heads
      {7, 2, 64, 64, Fill::kSpecial},        {33, 5, 64, 16, Fill::kOddMantissa},
  };
  for (const QkCase& c : cases) {
    SCOPED_TRACE("S " + std::to_string(c.rows) + " heads " + std::to_string(c.heads) + " hd " +
                 std::to_string(c.head_dim) + " rope " + std::to_string(c.rope_dims) + " " + fill_name(c.fill));
    const int64_t inner = static_cast<int64_t>(c.heads) * c.head_dim;
    Tensor qkv = cuda_test::random_host_bf16({c.rows, 3 * inner}, rng_, c.fill);  // [S, 3I] bf16
    Tensor qw = cuda_test::random_host_bf16({c.head_dim}, rng_, Fill::kNormal);
    Tensor kw = cuda_test::random_host_bf16({c.head_dim}, rng_, Fill::kNormal);
    RopeTables host_rope;
    RopeTables dev_rope;
    if (c.rope_dims > 0) {
      std::uniform_real_distribution<float> u(-1.0f, 1.0f);
      host_rope.rope_dims = c.rope_dims;
      host_rope.cos = Tensor::empty({c.rows, c.rope_dims / 2}, DType::kBF16);
      host_rope.sin = Tensor::empty({c.rows, c.rope_dims / 2}, DType::kBF16);
      for (int64_t i = 0; i < host_rope.cos.numel(); ++i) {
        host_rope.cos.data<uint16_t>()[i] = bf16_bits_from_f32(u(rng_));
        host_rope.sin.data<uint16_t>()[i] = bf16_bits_from_f32(u(rng_));
      }
      dev_rope.rope_dims = c.rope_dims;
      dev_rope.cos = upload(host_rope.cos);
      dev_rope.sin = upload(host_rope.sin);
    }
    Tensor expect = clone_host(qkv);
    Tensor hq = expect.as_strided({c.rows, inner}, {3 * inner, 1}, 0).value();
    Tensor hk = expect.as_strided({c.rows, inner}, {3 * inner, 1}, inner).value();
    ASSERT_OK(cpu_->qk_norm_rope(hq, hk, qw, kw, 1e-6f, c.rope_dims > 0 ? &host_rope : nullptr, c.heads, c.head_dim));
    Tensor gqw = upload(qw), gkw = upload(kw);
    Guarded g = guarded(qkv, 3 * inner);
    Tensor dq = g.buffer.as_strided({c.rows, inner}, {3 * inner, 1}, 0).value();
    Tensor dk = g.buffer.as_strided({c.rows, inner}, {3 * inner, 1}, inner).value();
    ASSERT_OK(gpu_->qk_norm_rope(dq, dk, gqw, gkw, 1e-6f, c.rope_dims > 0 ? &dev_rope : nullptr, c.heads, c.head_dim));
    expect_equal(expect, g, "qkv after qk_norm_rope (q, k normed in place; v untouched)");
  }
}

TEST_F(CudaOps, GateAddFusedEagerAndPlainMatchReference) {
  const std::vector<RowCase> cases = {
      {1, 5376, 5376, Fill::kNormal},     {7, 5376, 5440, Fill::kOddMantissa}, {1000, 5376, 5376, Fill::kSpecial},
      {37810, 5376, 5376, Fill::kNormal}, {13, 40, 43, Fill::kDynamicRange},   {6, 24, 24, Fill::kOddMantissa},
  };
  for (const RowCase& c : cases) {
    SCOPED_TRACE(std::to_string(c.rows) + "x" + std::to_string(c.cols) + " " + fill_name(c.fill));
    Tensor x =
        cuda_test::random_host_bf16({c.rows, c.cols}, rng_, c.fill == Fill::kSpecial ? Fill::kSpecial : Fill::kNormal);
    Tensor a = cuda_test::random_host_bf16({c.rows, c.cols}, rng_, c.fill);
    Tensor table = make_table(6, 6, c.cols, c.fill == Fill::kOddMantissa, 1, 2);
    SegmentTable seg = cuda_test::random_segments(c.rows, 6, rng_);
    Tensor ga = upload(a), gt = upload(table);
    Tensor expect = clone_host(x);
    ASSERT_OK(cpu_->gate_add(expect, a, &table, 2, seg));
    for (bool fused : {true, false}) {
      SCOPED_TRACE(fused ? "fused" : "eager");
      gpu_->set_fused_gate_add(fused);
      Guarded gx = guarded(x, c.ld);
      ASSERT_OK(gpu_->gate_add(gx.view, ga, &gt, 2, seg));
      expect_equal(expect, gx, "gate_add x");
    }
    Tensor plain = clone_host(x);
    ASSERT_OK(cpu_->gate_add(plain, a, nullptr, 0, seg));
    Guarded gx = guarded(x, c.ld);
    ASSERT_OK(gpu_->gate_add(gx.view, ga, nullptr, 0, seg));
    expect_equal(plain, gx, "gate_add without table (x + a)");
  }
}

TEST_F(CudaOps, SwigluMatchesReference) {
  const std::vector<RowCase> cases = {
      // cols = F
      {1, 14336, 2 * 14336, Fill::kNormal},    {7, 14336, 2 * 14336 + 8, Fill::kDynamicRange},
      {300, 14336, 2 * 14336, Fill::kSpecial}, {13, 36, 72, Fill::kNormal},
      {3, 40, 85, Fill::kOddMantissa},
  };
  for (const RowCase& c : cases) {
    SCOPED_TRACE(std::to_string(c.rows) + "x2*" + std::to_string(c.cols) + " " + fill_name(c.fill));
    Tensor u = cuda_test::random_host_bf16({c.rows, 2 * c.cols}, rng_, c.fill);
    Tensor expect = Tensor::empty({c.rows, c.cols}, DType::kBF16);
    ASSERT_OK(cpu_->swiglu(u, expect));
    Guarded gu = guarded(u, c.ld);
    Guarded gm = poisoned(c.rows, c.cols, c.cols + 8, DType::kBF16);
    ASSERT_OK(gpu_->swiglu(gu.view, gm.view));
    expect_equal(expect, gm, "swiglu m");
  }
}

// All 65,536 BF16 gate values, with value = 1 (m = R(silu)) and with random values.
TEST_F(CudaOps, SiluExhaustiveAllBf16Inputs) {
  Tensor u = Tensor::empty({256, 512}, DType::kBF16);  // [256, 2 * 256]: gate bits = row * 256 + col
  for (bool unit_value : {true, false}) {
    SCOPED_TRACE(unit_value ? "value = 1" : "random values");
    for (int64_t r = 0; r < 256; ++r)
      for (int64_t c = 0; c < 256; ++c) {
        u.data<uint16_t>()[r * 512 + c] = static_cast<uint16_t>(r * 256 + c);
        u.data<uint16_t>()[r * 512 + 256 + c] = unit_value ? 0x3F80 : cuda_test::random_bf16(rng_, Fill::kNormal);
      }
    Tensor expect = Tensor::empty({256, 256}, DType::kBF16);
    ASSERT_OK(cpu_->swiglu(u, expect));
    Guarded gu = guarded(u, 512);
    Guarded gm = poisoned(256, 256, 256, DType::kBF16);
    ASSERT_OK(gpu_->swiglu(gu.view, gm.view));
    expect_equal(expect, gm, "swiglu over every BF16 gate");
  }
  // Evidence for the table decision (src/cuda/ops/swiglu.cu): does CUDA's FP64 exp give the same
  // BF16 SiLU as the host reference on every input? The kernel uses the table either way.
  uint16_t* dev = nullptr;
  ASSERT_EQ(cudaMalloc(&dev, 65536 * 2), cudaSuccess);
  ASSERT_OK(cuda_ops::silu_fp64_device_all(dev, gpu_->stream()));
  std::vector<uint16_t> device_bits(65536);
  ASSERT_EQ(cudaMemcpyAsync(device_bits.data(), dev, 65536 * 2, cudaMemcpyDeviceToHost, gpu_->stream()), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(gpu_->stream()), cudaSuccess);
  (void)cudaFree(dev);
  int differ = 0, first = -1;
  for (int i = 0; i < 65536; ++i)
    if (device_bits[i] != ref::silu_bf16_bits(static_cast<uint16_t>(i))) {
      if (first < 0) first = i;
      ++differ;
    }
  std::cout << "[evidence] device FP64 SiLU (CUDA exp) vs host reference: " << differ << " of 65536 BF16 inputs differ"
            << (first >= 0 ? " (first input bits " + std::to_string(first) + ")" : "")
            << "; the swiglu kernel uses the host table regardless\n";
  RecordProperty("silu_fp64_device_differs", differ);
}

TEST_F(CudaOps, CastMatchesReference) {
  for (auto [rows, cols, ld] : {std::tuple<int64_t, int64_t, int64_t>{1, 96, 96}, {7, 5376, 5380}, {1000, 33, 40}}) {
    SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(cols));
    Tensor f = Tensor::empty({rows, cols}, DType::kF32);  // every bit pattern class: NaN, inf, denormals, ties
    uint32_t* fp = static_cast<uint32_t*>(f.raw_data());
    for (int64_t i = 0; i < f.numel(); ++i) {
      uint32_t bits = static_cast<uint32_t>(rng_());
      if (i % 5 == 0) bits = (bits & 0xFFFF0000u) | 0x8000u;       // exact BF16 tie
      if (i % 7 == 0) bits = (bits & 0x807FFFFFu);                 // denormal
      if (i % 11 == 0) bits = (bits & 0x80000000u) | 0x7F800000u;  // +-inf
      fp[i] = bits;
    }
    Tensor expect = Tensor::empty({rows, cols}, DType::kBF16);
    ASSERT_OK(cpu_->cast(f, expect));
    Guarded gf = guarded(f, ld);
    Guarded gb = poisoned(rows, cols, ld + 8, DType::kBF16);
    ASSERT_OK(gpu_->cast(gf.view, gb.view));
    expect_equal(expect, gb, "cast f32 -> bf16");
    Tensor b = cuda_test::random_host_bf16({rows, cols}, rng_, Fill::kSpecial);
    Tensor expect32 = Tensor::empty({rows, cols}, DType::kF32);
    ASSERT_OK(cpu_->cast(b, expect32));
    Guarded gb2 = guarded(b, ld);
    Guarded gf2 = poisoned(rows, cols, ld, DType::kF32);
    ASSERT_OK(gpu_->cast(gb2.view, gf2.view));
    expect_equal(expect32, gf2, "cast bf16 -> f32");
  }
}

TEST_F(CudaOps, FillSyntheticDeviceEqualsHost) {
  struct C {
    int64_t rows, cols, ld;
    DType dtype;
    float scale, offset;
  };
  for (const C& c : {C{1000, 5376, 5384, DType::kBF16, 0.02f, 0.0f}, C{7, 33, 33, DType::kF32, 3.0f, 0.25f},
                     C{13, 100, 100, DType::kF8E4M3, 1000.0f, 1.0f}, C{1, 1, 1, DType::kBF16, 1.0f, -0.5f}}) {
    SCOPED_TRACE(std::string(dtype_short_name(c.dtype)) + " " + std::to_string(c.rows) + "x" + std::to_string(c.cols));
    const uint64_t seed = rng_();
    Tensor expect = Tensor::empty({c.rows, c.cols}, c.dtype);
    ASSERT_OK(fill_synthetic_host(expect, seed, c.scale, c.offset));
    Guarded g = poisoned(c.rows, c.cols, c.ld, c.dtype);
    ASSERT_OK(gpu_->fill_synthetic(g.view, seed, c.scale, c.offset));
    expect_equal(expect, g, "fill_synthetic");
  }
}

TEST_F(CudaOps, UploadDownloadAndStridedCopy) {
  Tensor x = cuda_test::random_host_bf16({37, 130}, rng_, Fill::kSpecial);
  Tensor dx = upload(x);
  Tensor back = Tensor::empty({37, 130}, DType::kBF16);
  ASSERT_OK(gpu_->download(dx, back));
  EXPECT_EQ(cuda_test::compare_bytes(x, back), "") << seed_note();
  Guarded dst = poisoned(37, 130, 200, DType::kBF16);
  ASSERT_OK(gpu_->copy(dx, dst.view));  // contiguous -> row view
  expect_equal(x, dst, "copy into a row view");
  Tensor again = Tensor::empty({37, 130}, DType::kBF16);
  ASSERT_OK(gpu_->download(dst.view, again));  // strided download
  EXPECT_EQ(cuda_test::compare_bytes(x, again), "");
}

TEST_F(CudaOps, SegmentMapIsBuiltOncePerTable) {
  Tensor x = cuda_test::random_host_bf16({100, 64}, rng_, Fill::kNormal);
  Tensor table = make_table(3, 6, 64, false, 1, 2);
  SegmentTable seg = cuda_test::random_segments(100, 3, rng_);
  Tensor dx = upload(x), dt = upload(table);
  const uint64_t before = gpu_->segment_map_builds();
  for (int i = 0; i < 5; ++i) ASSERT_OK(gpu_->modulate(dx, dt, 0, 1, seg));
  EXPECT_EQ(gpu_->segment_map_builds(), before + 1);
  SegmentTable other = seg;
  other.segments.back().table_row = (other.segments.back().table_row + 1) % 3;
  ASSERT_OK(gpu_->modulate(dx, dt, 0, 1, other));
  EXPECT_EQ(gpu_->segment_map_builds(), before + 2);
  ASSERT_OK(gpu_->modulate(dx, dt, 0, 1, seg));  // still cached
  EXPECT_EQ(gpu_->segment_map_builds(), before + 2);
}

TEST_F(CudaOps, ValidationErrorsAreClear) {
  Tensor x = cuda_test::random_host_bf16({4, 64}, rng_, Fill::kNormal);
  Tensor w = cuda_test::random_host_bf16({64}, rng_, Fill::kNormal);
  Tensor dx = upload(x), dw = upload(w);
  Tensor out = gpu_->alloc({4, 64}, DType::kBF16).value();
  Status st = gpu_->rms_norm(x, dw, 1e-5f, out);  // host input
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(st.message().find("CUDA tensor"), std::string::npos) << st.message();
  Tensor bad_w = gpu_->alloc({63}, DType::kBF16).value();
  st = gpu_->rms_norm(dx, bad_w, 1e-5f, out);
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument);
  Tensor f32 = gpu_->alloc({4, 64}, DType::kF32).value();
  st = gpu_->rms_norm(dx, dw, 1e-5f, f32);
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument) << st.to_string();
  ExecOptions opts;
  opts.attention = AttentionKind::kSage2;  // head_dim 64: the Sage2 kernels are written for 128
  st = gpu_->attention(dx, dx, dx, 1, 64, out, opts);
  EXPECT_EQ(st.code(), ErrorCode::kUnsupported) << st.to_string();
  EXPECT_NE(st.message().find("head_dim 64"), std::string::npos) << st.message();
}

TEST_F(CudaOps, DebugSyncRunsOpsAndReportsPeakMemory) {
  gpu_->set_debug_sync(true);
  Tensor x = cuda_test::random_host_bf16({64, 5376}, rng_, Fill::kNormal);
  Tensor w = cuda_test::random_host_bf16({5376}, rng_, Fill::kNormal);
  gpu_->reset_peak_memory();
  Tensor dx = upload(x), dw = upload(w);
  Tensor out = gpu_->alloc({64, 5376}, DType::kBF16).value();
  ASSERT_OK(gpu_->rms_norm(dx, dw, 1e-5f, out));
  EXPECT_GE(gpu_->memory_peak(), 2 * x.nbytes());
  EXPECT_GE(gpu_->memory_in_use(), 2 * x.nbytes());
  const Backend::DeviceInfo info = gpu_->device_info();
  EXPECT_FALSE(info.name.empty());
  EXPECT_EQ(info.sm, "sm_90");
}

// The micro-benchmark at the canonical shape; opt in with VORTEX_RUN_BENCH=1 (prints the rows). VORTEX_BENCH_OPS
// (comma list of sections) narrows it; VORTEX_BENCH_REPS sets the timed repetitions (default 20).
TEST_F(CudaOps, BenchElementwiseOpsCanonical) {
  const char* on = std::getenv("VORTEX_RUN_BENCH");
  if (on == nullptr || std::string(on) != "1")
    GTEST_SKIP() << "set VORTEX_RUN_BENCH=1 to run the S = 37,810 micro-benchmark";
  OpsBenchConfig cfg;
  if (const char* ops = std::getenv("VORTEX_BENCH_OPS")) cfg.ops = ops;  // e.g. rms_norm_modulate
  if (const char* reps = std::getenv("VORTEX_BENCH_REPS")) cfg.reps = std::max(1, std::atoi(reps));
  Result<OpsBenchResult> r = bench_elementwise_ops(*gpu_, cfg);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  std::cout << "[bench] " << r->device << ", " << r->input_sets << " rotated input sets, peak " << r->peak_gbps
            << " GB/s\n";
  for (const OpsBenchRow& row : r->rows) {
    std::cout << "[bench] " << row.op << " [" << row.rows << ", " << row.cols << "] p10/p50/p90 " << row.ms_p10 << " / "
              << row.ms_p50 << " / " << row.ms_p90 << " ms, " << row.gbps_p50 << " GB/s ("
              << 100.0 * row.fraction_of_peak << "% of peak), check: " << row.check << "\n";
    EXPECT_EQ(row.check.find("FAIL"), std::string::npos) << row.op;
  }
}

}  // namespace
}  // namespace vortex
