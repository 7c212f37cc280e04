// NVFP4 GEMMs on the GPU (GPU label; docs/numerics.md E1): the exact dequant kernel vs ref::nvfp4_dequantized_value
// (every bit), the Hopper emulation vs FP64 dot products of the quantized operands (activations quantized on
// the CPU by the reference, ragged M 1/37/300, H3 K/N), alpha-before-bias with one rounding (bit-exact on
// exact sums), path selection (sm_90 -> emulation; native FP4 refused there), gemm-tune on the emulated
// plan, and argument checks.
// Outputs are poisoned first; sentinels after every output catch out-of-bounds writes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "gemm/gemm.h"
#include "gemm/nvfp4_gemm.h"
#include "gpu_test.h"
#include "measure/gemm_tune.h"
#include "ref/nvfp4_quantize.h"
#include "vortex/dtype.h"

namespace vortex {
namespace {

using testing::DeviceBuffer;
using testing::TwoReference;

std::unique_ptr<GemmEngine> make_engine() {
  GemmEngineOptions opt;
  opt.load_pinned_table = false;
  auto e = GemmEngine::create(opt);
  EXPECT_TRUE(e.ok()) << e.status().to_string();
  return e.ok() ? std::move(e).value() : nullptr;
}

// A host NVFP4 tensor plus its device copy.
struct HostNvfp4 {
  ref::Nvfp4Layout layout;
  std::vector<uint8_t> data, scales;
  float g = 0;
};

// Random BF16 rows quantized by the CPU reference (exact-division encode: no measured table needed here;
// the GEMM does not care which encoder produced valid bytes).
HostNvfp4 quantize_random(int64_t rows, int64_t cols, std::mt19937_64& rng, float scale) {
  std::normal_distribution<float> nd(0.0f, scale);
  std::vector<uint16_t> x(static_cast<size_t>(rows * cols));
  for (auto& v : x) v = bf16_bits_from_f32(nd(rng));
  HostNvfp4 h;
  h.layout = ref::nvfp4_layout(rows, cols);
  h.data.assign(h.layout.data_bytes(), 0xEE);
  h.scales.assign(h.layout.scale_bytes(), 0xEE);
  h.g = ref::nvfp4_global_scale_from_amax(ref::bf16_abs_max_bits(x.data(), rows, cols, cols));
  ref::Nvfp4Options opt;
  opt.encode = ref::Nvfp4Encode::kExactDivision;
  Status st = ref::nvfp4_quantize(x.data(), rows, cols, cols, h.g, opt, h.data.data(), h.scales.data());
  EXPECT_TRUE(st.ok()) << st.to_string();
  return h;
}

// Random valid NVFP4 bytes (every code; scale exponents 3..11, i.e. block scales 2^-4..2^4, as real weights
// have) with zero codes in the padding — fast for the full-size H3 weights.
HostNvfp4 random_nvfp4(int64_t rows, int64_t cols, std::mt19937_64& rng, float g) {
  HostNvfp4 h;
  h.layout = ref::nvfp4_layout(rows, cols);
  h.g = g;
  h.data.assign(h.layout.data_bytes(), 0);
  h.scales.assign(h.layout.scale_bytes(), 0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t b = 0; b < cols / 2; ++b)
      h.data[static_cast<size_t>(r * h.layout.data_row_bytes + b)] = static_cast<uint8_t>(rng());
  std::uniform_int_distribution<int> exp_d(3, 11), man_d(0, 7);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < (cols + 15) / 16; ++c)
      h.scales[static_cast<size_t>(ref::nvfp4_scale_offset(r, c, h.layout.scale_cols))] =
          static_cast<uint8_t>((exp_d(rng) << 3) | man_d(rng));
  return h;
}

struct DeviceNvfp4 {
  std::unique_ptr<DeviceBuffer> data, scales, g;
  Nvfp4Operand op(int64_t rows, int64_t cols) const {
    Nvfp4Operand o;
    o.data = static_cast<const uint8_t*>(data->get());
    o.scales = static_cast<const uint8_t*>(scales->get());
    o.global_scale = static_cast<const float*>(g->get());
    o.rows = rows;
    o.cols = cols;
    return o;
  }
};
DeviceNvfp4 upload(const HostNvfp4& h) {
  DeviceNvfp4 d;
  d.data = std::make_unique<DeviceBuffer>(h.data.size());
  d.scales = std::make_unique<DeviceBuffer>(h.scales.size());
  d.g = std::make_unique<DeviceBuffer>(4);
  d.data->upload(h.data.data(), h.data.size());
  d.scales->upload(h.scales.data(), h.scales.size());
  d.g->upload(&h.g, 4);
  return d;
}

float deq(const HostNvfp4& h, int64_t r, int64_t k) {
  return ref::nvfp4_dequantized_value(h.data.data(), h.scales.data(), h.layout, r, k);
}

// ---- path selection (host only: runs everywhere) ---------------------------------------------------------
TEST(Nvfp4Path, Sm90SelectsTheEmulation) {
  EXPECT_EQ(select_nvfp4_gemm_path(9, 0), Nvfp4GemmPath::kEmulatedBf16);
  EXPECT_EQ(select_nvfp4_gemm_path(8, 9), Nvfp4GemmPath::kEmulatedBf16);
  const Nvfp4GemmPath blackwell = nvfp4_native_compiled() ? Nvfp4GemmPath::kNativeFp4 : Nvfp4GemmPath::kEmulatedBf16;
  for (auto [major, minor] : {std::pair{10, 0}, std::pair{10, 3}, std::pair{12, 0}, std::pair{12, 1}})
    EXPECT_EQ(select_nvfp4_gemm_path(major, minor), blackwell) << "sm_" << major << minor;
  EXPECT_TRUE(nvfp4_native_compiled()) << "the CUDA 13 headers of this build carry the FP4 enums";
}

TEST(Nvfp4Path, DeviceSelectionAndNativeRefusal) {
  VORTEX_REQUIRE_GPU();
  auto engine = make_engine();
  ASSERT_TRUE(engine);
  cudaDeviceProp prop{};
  ASSERT_EQ(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
  auto g = Nvfp4Gemm::create(*engine);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  std::printf("[nvfp4 path] sm_%d%d -> %s\n", prop.major, prop.minor, nvfp4_gemm_path_name((*g)->path()));
  EXPECT_EQ((*g)->path(), select_nvfp4_gemm_path(prop.major, prop.minor));
  if (prop.major == 9) {
    EXPECT_EQ((*g)->path(), Nvfp4GemmPath::kEmulatedBf16);
    auto native = Nvfp4Gemm::create(*engine, Nvfp4GemmPath::kNativeFp4);
    ASSERT_FALSE(native.ok());
    EXPECT_EQ(native.status().code(), ErrorCode::kUnsupported) << native.status().to_string();
    std::printf("[nvfp4 path] native on sm_90: %s\n", native.status().to_string().c_str());
  }
}

// ---- the exact dequant kernel: every output bit vs the reference ------------------------------------------
TEST(Nvfp4Dequant, KernelMatchesReferenceBits) {
  VORTEX_REQUIRE_GPU();
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{37, 5376}, {300, 200}, {1, 16}, {129, 14336}}) {
    SCOPED_TRACE("rows " + std::to_string(rows) + " cols " + std::to_string(cols));
    const HostNvfp4 h = quantize_random(rows, cols, rng, 0.7f);
    const DeviceNvfp4 d = upload(h);
    const int64_t ld = h.layout.blocks * 16 + 8;  // a row stride wider than the row
    DeviceBuffer out(static_cast<size_t>(rows * ld) * 2);
    out.poison(0xFF);
    Status st = nvfp4_dequantize_unscaled_bf16(d.op(rows, cols), static_cast<uint16_t*>(out.get()), ld, nullptr);
    ASSERT_TRUE(st.ok()) << st.to_string();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<uint16_t> oh(static_cast<size_t>(rows * ld));
    out.download(oh.data(), oh.size() * 2);
    EXPECT_TRUE(out.sentinel_intact()) << "write past the end of out";
    int64_t bad = 0, nonzero = 0;
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < h.layout.blocks * 16; ++c) {
        const float want = c < cols ? deq(h, r, c) : 0.0f;
        const uint16_t got = oh[static_cast<size_t>(r * ld + c)];
        nonzero += want != 0.0f;
        if (got != bf16_bits_from_f32(want) && !(want == 0.0f && (got & 0x7FFF) == 0)) {
          if (bad < 5) ADD_FAILURE() << "r " << r << " c " << c << " got 0x" << std::hex << got << " want " << want;
          ++bad;
        }
        EXPECT_EQ(round_bf16(want), want);  // the exactness claim of nvfp4_gemm.h
      }
      for (int64_t c = h.layout.blocks * 16; c < ld; ++c)
        ASSERT_EQ(oh[static_cast<size_t>(r * ld + c)], 0xFFFF) << "wrote into the row-stride gap";
    }
    EXPECT_EQ(bad, 0);
    EXPECT_GT(nonzero, rows * cols / 2);
  }
}

// ---- the emulated GEMM vs FP64 dot products of the quantized operands (E1) ---------------------------------
void run_e1_case(GemmEngine& engine, Nvfp4Gemm& gemm, int64_t n, int64_t k, bool quantized_weight, bool with_bias,
                 std::mt19937_64& rng) {
  const HostNvfp4 wh = quantized_weight ? quantize_random(n, k, rng, 0.02f) : random_nvfp4(n, k, rng, 3.1e-5f);
  const DeviceNvfp4 wd = upload(wh);
  std::vector<uint16_t> bias_h(static_cast<size_t>(n));
  std::uniform_real_distribution<float> ub(-0.5f, 0.5f);
  for (auto& b : bias_h) b = bf16_bits_from_f32(ub(rng));
  DeviceBuffer bias_d(bias_h.size() * 2);
  bias_d.upload(bias_h.data(), bias_h.size() * 2);
  std::vector<int64_t> cols = {0, n - 1};
  while (cols.size() < 40) cols.push_back(static_cast<int64_t>(rng() % static_cast<uint64_t>(n)));
  for (int64_t m : {1, 37, 300}) {
    SCOPED_TRACE("N " + std::to_string(n) + " K " + std::to_string(k) + " M " + std::to_string(m));
    const HostNvfp4 xh = quantize_random(m, k, rng, 1.0f);
    const DeviceNvfp4 xd = upload(xh);
    DeviceBuffer out(static_cast<size_t>(m * n) * 2);
    out.poison(0xFF);
    Status st = gemm.run(xd.op(m, k), wd.op(n, k), with_bias ? bias_d.get() : nullptr, out.get(), n, nullptr);
    ASSERT_TRUE(st.ok()) << st.to_string();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<uint16_t> oh(static_cast<size_t>(m * n));
    out.download(oh.data(), oh.size() * 2);
    EXPECT_TRUE(out.sentinel_intact()) << "write past the end of out";
    int64_t nan_count = 0;
    for (uint16_t b : oh) nan_count += std::isnan(f32_from_bf16_bits(b));
    EXPECT_EQ(nan_count, 0) << "unwritten (poisoned) or NaN outputs";
    const float alpha = xh.g * wh.g;  // fp32 RN, as on the device
    TwoReference tr;
    for (int64_t i = 0; i < m; ++i) {
      std::vector<float> xr(static_cast<size_t>(k));
      for (int64_t t = 0; t < k; ++t) xr[static_cast<size_t>(t)] = deq(xh, i, t);
      for (int64_t j : cols) {
        double ref = 0;
        float acc = 0;
        for (int64_t t = 0; t < k; ++t) {
          const float a = xr[static_cast<size_t>(t)], b = deq(wh, j, t);
          ref += static_cast<double>(a) * b;
          acc += a * b;  // exact product (<= 12 significant bits), FP32 sequential sum
        }
        const float bias = with_bias ? f32_from_bf16_bits(bias_h[static_cast<size_t>(j)]) : 0.0f;
        ref = static_cast<double>(xh.g) * static_cast<double>(wh.g) * ref + bias;
        const float cpu = round_bf16(alpha * acc + bias);
        tr.add(f32_from_bf16_bits(oh[static_cast<size_t>(i * n + j)]), cpu, ref);
      }
    }
    std::printf("[nvfp4 %s N=%lld K=%lld M=%lld %s%s] %s\n", nvfp4_gemm_path_name(gemm.path()),
                static_cast<long long>(n), static_cast<long long>(k), static_cast<long long>(m),
                quantized_weight ? "quantized-w" : "random-w", with_bias ? " bias" : "", tr.summary().c_str());
    EXPECT_TRUE(tr.passes(1e-5, 1e-6)) << tr.summary();
  }
  (void)engine;
}

TEST(Nvfp4Gemm, EmulationE1AtH3Shapes) {
  VORTEX_REQUIRE_GPU();
  auto engine = make_engine();
  ASSERT_TRUE(engine);
  auto g = Nvfp4Gemm::create(*engine);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  run_e1_case(*engine, **g, 16128, 5376, false, false, rng);  // QKV-like (K = hidden)
  run_e1_case(*engine, **g, 5376, 14336, false, true, rng);   // FC2 (K = FFN)
  run_e1_case(*engine, **g, 520, 7168, true, true, rng);      // out-proj K, weight through the quantizer
}

// ---- Blackwell: native FP4 vs the emulation on the same operands (E1 between each other; skips on sm_90) ----
TEST(Nvfp4Gemm, NativeAgreesWithEmulationOnBlackwell) {
  VORTEX_REQUIRE_GPU();
  cudaDeviceProp prop{};
  ASSERT_EQ(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
  if (select_nvfp4_gemm_path(prop.major, prop.minor) != Nvfp4GemmPath::kNativeFp4)
    GTEST_SKIP() << "sm_" << prop.major << prop.minor
                 << " has no FP4 tensor cores: the native path is compiled, not run";
  auto engine = make_engine();
  ASSERT_TRUE(engine);
  auto native = Nvfp4Gemm::create(*engine, Nvfp4GemmPath::kNativeFp4);
  auto emulated = Nvfp4Gemm::create(*engine, Nvfp4GemmPath::kEmulatedBf16);
  ASSERT_TRUE(native.ok()) << native.status().to_string();
  ASSERT_TRUE(emulated.ok()) << emulated.status().to_string();
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  run_e1_case(*engine, **native, 5376, 7168, false, true, rng);
  run_e1_case(*engine, **emulated, 5376, 7168, false, true, rng);
}

// ---- alpha multiplies the accumulator, then the bias is added, then ONE rounding -----------------------------
TEST(Nvfp4Gemm, AlphaThenBiasRoundsOnce) {
  VORTEX_REQUIRE_GPU();
  auto engine = make_engine();
  ASSERT_TRUE(engine);
  auto g = Nvfp4Gemm::create(*engine);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  // Block scale 1.0 (0x38) everywhere: values are multiples of 0.5 up to 6, products multiples of 0.25 up to 36,
  // every partial sum of K = 96 terms is exact in FP32 in any order. alpha = 2^-3 keeps alpha * acc exact, so
  // the expected output is R(alpha * acc + bias) bit for bit; alpha * R(acc + bias) or R(R(alpha*acc) + bias)
  // differ on many outputs.
  const int64_t m = 37, n = 256, k = 96;
  auto make = [&](int64_t rows, float gs) {
    HostNvfp4 h = random_nvfp4(rows, k, rng, gs);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < k / 16; ++c)
        h.scales[static_cast<size_t>(ref::nvfp4_scale_offset(r, c, h.layout.scale_cols))] = 0x38;
    return h;
  };
  const HostNvfp4 xh = make(m, 0.5f), wh = make(n, 0.25f);
  const DeviceNvfp4 xd = upload(xh), wd = upload(wh);
  std::vector<uint16_t> bias_h(static_cast<size_t>(n));
  std::uniform_int_distribution<int> eighths(-127, 127);
  for (auto& b : bias_h) b = bf16_bits_from_f32(static_cast<float>(eighths(rng)) / 8.0f);
  DeviceBuffer bias_d(bias_h.size() * 2), out(static_cast<size_t>(m * n) * 2);
  bias_d.upload(bias_h.data(), bias_h.size() * 2);
  out.poison(0xFF);
  Status st = (*g)->run(xd.op(m, k), wd.op(n, k), bias_d.get(), out.get(), n, nullptr);
  ASSERT_TRUE(st.ok()) << st.to_string();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<uint16_t> oh(static_cast<size_t>(m * n));
  out.download(oh.data(), oh.size() * 2);
  EXPECT_TRUE(out.sentinel_intact());
  const float alpha = 0.5f * 0.25f;
  int64_t mismatches = 0, alt_differs = 0;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      float acc = 0;
      for (int64_t t = 0; t < k; ++t) acc += deq(xh, i, t) * deq(wh, j, t);
      const float bias = f32_from_bf16_bits(bias_h[static_cast<size_t>(j)]);
      const uint16_t want = bf16_bits_from_f32(alpha * acc + bias);
      const uint16_t alt = bf16_bits_from_f32(alpha * (acc + bias));
      alt_differs += want != alt;
      mismatches += oh[static_cast<size_t>(i * n + j)] != want;
    }
  std::printf("[nvfp4 alpha/bias] %lld of %lld differ from R(alpha*acc + bias); alpha*(acc+bias) differs on %lld\n",
              static_cast<long long>(mismatches), static_cast<long long>(m * n), static_cast<long long>(alt_differs));
  EXPECT_GT(alt_differs, 0) << "operands do not discriminate the bias order";
  EXPECT_EQ(mismatches, 0) << "cuBLASLt does not compute R(alpha * acc + bias) with a device alpha";
}

// gemm-tune keeps working for the emulation's plan (BF16 operands, device alpha = 1): candidates rebuild
// exactly and the heuristic's error vs FP64 is BF16-sized.
TEST(Nvfp4Gemm, TuneEmulatedPlan) {
  VORTEX_REQUIRE_GPU();
  auto engine = make_engine();
  ASSERT_TRUE(engine);
  GemmTuneOptions topt;
  topt.m = 509;
  topt.max_configs = 12;
  topt.reps = 3;
  topt.samples = 64;
  topt.seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(topt.seed));
  auto r = tune_gemm(*engine, GemmPrecision::kNvfp4Emulated, GemmShape{"small", 768, 1024}, topt);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  std::printf("[tune nvfp4_emulated] heuristic %s err %.3e, %zu candidates, best %d\n", r->heuristic.describe().c_str(),
              r->heuristic_max_rel_err, r->candidates.size(), r->best);
  ASSERT_FALSE(r->candidates.empty());
  EXPECT_TRUE(r->candidates[0].ran) << r->candidates[0].error;
  EXPECT_EQ(r->candidates[0].mismatches_vs_default, 0);
  EXPECT_LT(r->heuristic_max_rel_err, 2e-2);
  EXPECT_EQ(tune_gemm(*engine, GemmPrecision::kNvfp4, GemmShape{"small", 768, 1024}, topt).status().code(),
            ErrorCode::kUnsupported);
}

TEST(Nvfp4Gemm, RejectsBadArguments) {
  VORTEX_REQUIRE_GPU();
  auto engine = make_engine();
  ASSERT_TRUE(engine);
  auto g = Nvfp4Gemm::create(*engine);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  std::mt19937_64 rng(testing::fresh_seed());
  const HostNvfp4 xh = random_nvfp4(4, 64, rng, 1.0f), wh = random_nvfp4(8, 32, rng, 1.0f);
  const DeviceNvfp4 xd = upload(xh), wd = upload(wh);
  DeviceBuffer out(4 * 8 * 2);
  Status st = (*g)->run(xd.op(4, 64), wd.op(8, 32), nullptr, out.get(), 8, nullptr);
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument) << st.to_string();  // K mismatch
  Nvfp4Operand no_scale = wd.op(8, 32);
  no_scale.global_scale = nullptr;
  st = (*g)->run(xd.op(4, 32), no_scale, nullptr, out.get(), 8, nullptr);
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument) << st.to_string();
  GemmCall call;  // a device alpha on a plain BF16 GEMM is refused
  call.precision = GemmPrecision::kBf16;
  call.m = 4;
  call.n = 8;
  call.k = 32;
  call.x = out.get();
  call.w = out.get();
  call.d = out.get();
  call.ldx = call.ldw = 32;
  call.ldd = 8;
  call.alpha = static_cast<const float*>(wd.g->get());
  st = engine->gemm(call, nullptr);
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument) << st.to_string();
}

}  // namespace
}  // namespace vortex
