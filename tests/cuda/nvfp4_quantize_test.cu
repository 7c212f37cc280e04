// GPU tests of the NVFP4 producers (src/cuda/ops/nvfp4_quantize.cpp, nvfp4_quantize_kernels.cu), label gpu:
//  * the approximate instructions (probes in tools/nvfp4_probes.cu): rcp.approx.ftz.f32 vs the binade model on all
//    2^32 inputs, div.approx.ftz.f32 and mul.rn.ftz.f32 vs their models, the device E2M1 converter vs cuda_fp4.h on all
//    2^32 inputs, and the shipped table (data/approx/rcp_approx_sm90.bin) vs this GPU;
//  * producers (plain, modulation, SwiGLU) E0 vs the CPU reference (ref::nvfp4_quantize with the binade measured
//    here), fused == materialize-then-quantize with the real modulate / swiglu kernels, on adversarial inputs;
//    shapes cover both producer paths (16-byte main path and the element-wise path for ragged / unaligned K);
//    the modulated cases include random per-row table rows (more distinct rows per CTA than the kernel stages in
//    shared memory: the global fallback) and a static g;
//  * the backend's input checks (nvfp4_*_input_shape) on the host (run without a device).
// Fresh seeds per run (printed on failure); outputs poisoned before each run; sentinels catch overruns.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cuda/ops/nvfp4_quantize.h"
#include "cuda/ops/ops.h"
#include "gpu_test.h"
#include "ref/nvfp4_quantize.h"
#include "ref/nvfp4_test_inputs.h"
#include "ref/ref_ops.h"
#include "tools/nvfp4_probes.h"
#include "vortex/dtype.h"

namespace vortex {
namespace {

using testing::DeviceBuffer;

// rcp.approx.ftz.f32 over [1, 2) measured on this GPU, once per process.
const ref::RcpApproxTable& measured_table() {
  static std::unique_ptr<ref::RcpApproxTable> table;
  if (!table) {
    DeviceBuffer d(ref::kRcpBinadeSize * 4);
    EXPECT_TRUE(nvfp4_probes::nvfp4_probe_rcp_binade(static_cast<uint32_t*>(d.get()), nullptr).ok());
    std::vector<uint32_t> bits(ref::kRcpBinadeSize);
    d.download(bits.data(), bits.size() * 4);
    table = std::make_unique<ref::RcpApproxTable>(std::move(bits));
  }
  return *table;
}

TEST(Nvfp4Approx, RcpModelEqualsInstructionOnAll2Pow32Inputs) {
  VORTEX_REQUIRE_GPU();
  const ref::RcpApproxTable& t = measured_table();
  DeviceBuffer binade(ref::kRcpBinadeSize * 4), counters(16);
  binade.upload(t.binade().data(), ref::kRcpBinadeSize * 4);
  ASSERT_TRUE(nvfp4_probes::nvfp4_check_rcp_model(static_cast<const uint32_t*>(binade.get()),
                                                  static_cast<unsigned long long*>(counters.get()), nullptr)
                  .ok());
  unsigned long long c[2];
  counters.download(c, sizeof(c));
  EXPECT_EQ(c[0], 0ull) << "rcp.approx.ftz.f32 differs from the binade model; example input 0x" << std::hex
                        << (c[1] - 1);
  int64_t hist[4] = {0, 0, 0, 0};  // delta vs correctly rounded: 0, +1, -1, other
  for (uint32_t m = 0; m < ref::kRcpBinadeSize; ++m) {
    const int64_t delta = static_cast<int64_t>(t.binade()[m]) - ref::rcp_correctly_rounded_binade_bits(m);
    ++hist[delta == 0 ? 0 : delta == 1 ? 1 : delta == -1 ? 2 : 3];
  }
  std::printf("rcp.approx.ftz.f32 on [1,2): %lld correctly rounded, %lld +1 ulp, %lld -1 ulp, %lld other\n",
              static_cast<long long>(hist[0]), static_cast<long long>(hist[1]), static_cast<long long>(hist[2]),
              static_cast<long long>(hist[3]));
}

TEST(Nvfp4Approx, ShippedTableMatchesThisGpu) {
  VORTEX_REQUIRE_GPU();
  auto shipped = ref::RcpApproxTable::load(ref::RcpApproxTable::default_path());
  if (!shipped.ok()) GTEST_SKIP() << "no shipped table yet: " << shipped.status().message();
  EXPECT_TRUE(shipped.value()->binade() == measured_table().binade())
      << "data/approx/rcp_approx_sm90.bin differs from this GPU's rcp.approx.ftz.f32";
}

TEST(Nvfp4Approx, DivMulAndE2m1MatchModels) {
  VORTEX_REQUIRE_GPU();
  const uint64_t seed = testing::fresh_seed();
  DeviceBuffer binade(ref::kRcpBinadeSize * 4), counters(48);
  binade.upload(measured_table().binade().data(), ref::kRcpBinadeSize * 4);
  ASSERT_TRUE(nvfp4_probes::nvfp4_check_div_mul_e2m1(static_cast<const uint32_t*>(binade.get()), seed,
                                                     uint64_t{1} << 30,
                                                     static_cast<unsigned long long*>(counters.get()), nullptr)
                  .ok());
  unsigned long long c[6];
  counters.download(c, sizeof(c));
  EXPECT_EQ(c[0], 0ull) << "div.approx.ftz != mul.ftz(a, rcp model(b)); pair index " << c[1] - 1 << " seed=" << seed;
  EXPECT_EQ(c[2], 0ull) << "mul.rn.ftz != flush model; pair index " << c[3] - 1 << " seed=" << seed;
  EXPECT_EQ(c[4], 0ull) << "device E2M1 != __nv_cvt_float_to_fp4 (input < 2^32), E4M3 decoders differ (2^32 + code) "
                           "or fast != exact packed word (2^33 + chunk index; seed="
                        << seed << "); input 0x" << std::hex << c[5] - 1;
}

// ---- producers ---------------------------------------------------------------------------------------
struct DeviceOut {
  ref::Nvfp4Layout layout;
  DeviceBuffer data, scales, g, amax;
  explicit DeviceOut(const ref::Nvfp4Layout& l)
      : layout(l),
        data(std::max<size_t>(l.data_bytes(), 16)),
        scales(std::max<size_t>(l.scale_bytes(), 16)),
        g(4),
        amax(4) {
    data.poison(0xA5 ^ 0x5A);
    scales.poison(0x3C);
    amax.poison(0x77);
  }
  cuda_ops::Nvfp4Buffers buffers() { return {static_cast<uint8_t*>(data.get()), static_cast<uint8_t*>(scales.get())}; }
  cuda_ops::Nvfp4GlobalScale scale(bool dynamic) {
    return {dynamic, static_cast<float*>(g.get()), static_cast<uint32_t*>(amax.get())};
  }
};

struct HostOut {
  std::vector<uint8_t> data, scales;
  float g = 0.0f;
};

HostOut download(DeviceOut& d) {
  HostOut h;
  h.data.resize(d.layout.data_bytes());
  h.scales.resize(d.layout.scale_bytes());
  d.data.download(h.data.data(), h.data.size());
  d.scales.download(h.scales.data(), h.scales.size());
  d.g.download(&h.g, 4);
  EXPECT_TRUE(d.data.sentinel_intact() && d.scales.sentinel_intact()) << "write past the end of data/scales";
  return h;
}

bool same_float(float a, float b) {
  uint32_t ua, ub;
  std::memcpy(&ua, &a, 4);
  std::memcpy(&ub, &b, 4);
  return (std::isnan(a) && std::isnan(b)) || ua == ub;
}

// Byte comparison with the first mismatch located (row, block / column).
void expect_same(const HostOut& got, const HostOut& want, const ref::Nvfp4Layout& l, const std::string& what) {
  EXPECT_TRUE(same_float(got.g, want.g)) << what << ": g " << got.g << " vs " << want.g;
  for (size_t i = 0; i < want.data.size(); ++i)
    if (got.data[i] != want.data[i]) {
      ADD_FAILURE() << what << ": data byte row " << i / l.data_row_bytes << " col " << 2 * (i % l.data_row_bytes)
                    << ": 0x" << std::hex << int(got.data[i]) << " vs 0x" << int(want.data[i]);
      break;
    }
  for (size_t i = 0; i < want.scales.size(); ++i)
    if (got.scales[i] != want.scales[i]) {
      ADD_FAILURE() << what << ": scale byte offset " << i << ": 0x" << std::hex << int(got.scales[i]) << " vs 0x"
                    << int(want.scales[i]);
      break;
    }
}

HostOut cpu_reference(const std::vector<uint16_t>& x, int64_t rows, int64_t cols, int64_t ld, bool dynamic,
                      float g_static) {
  HostOut h;
  const ref::Nvfp4Layout l = ref::nvfp4_layout(rows, cols);
  h.data.assign(l.data_bytes(), 0xEE);
  h.scales.assign(l.scale_bytes(), 0xEE);
  h.g = dynamic ? ref::nvfp4_global_scale_from_amax(ref::bf16_abs_max_bits(x.data(), rows, cols, ld)) : g_static;
  const ref::Nvfp4Options opt{ref::Nvfp4Encode::kApproxInstructions, &measured_table()};
  EXPECT_TRUE(ref::nvfp4_quantize(x.data(), rows, cols, ld, h.g, opt, h.data.data(), h.scales.data()).ok());
  return h;
}

void check_plain(int64_t rows, int64_t cols, int64_t ld, bool inf_nan, bool dynamic, bool power_of_two_g = false) {
  const uint64_t seed = testing::fresh_seed();
  std::mt19937_64 rng(seed);
  const std::string what = "plain [" + std::to_string(rows) + ", " + std::to_string(cols) + "] ld " +
                           std::to_string(ld) + (dynamic ? " dynamic" : " static") + " seed=" + std::to_string(seed);
  const std::vector<uint16_t> x = test::nvfp4_adversarial_bf16(rows, cols, ld, rng, inf_nan);
  const float g_static = std::ldexp(power_of_two_g ? 1.0f : 1.0f + static_cast<float>(rng() % 1000) / 1000.0f,
                                    static_cast<int>(rng() % 20) - 15);
  DeviceBuffer dx(std::max<size_t>(x.size() * 2, 16));
  dx.upload(x.data(), x.size() * 2);
  const HostOut want = cpu_reference(x, rows, cols, ld, dynamic, g_static);
  {
    DeviceOut out(ref::nvfp4_layout(rows, cols));
    if (!dynamic) out.g.upload(&g_static, 4);
    const Status s = cuda_ops::nvfp4_quantize(static_cast<const uint16_t*>(dx.get()), rows, cols, ld,
                                              out.scale(dynamic), out.buffers(), nullptr);
    ASSERT_TRUE(s.ok()) << s.message();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    expect_same(download(out), want, out.layout, what);
  }
}

TEST(Nvfp4Producer, PlainRaggedShapesDynamic) {
  VORTEX_REQUIRE_GPU();
  const int64_t shapes[][3] = {{1, 16, 16},
                               {17, 40, 40},
                               {130, 64, 72},
                               {3, 5376, 5376},
                               {300, 5376, 5376},
                               {33, 7168, 7200},
                               {129, 14336, 14336},
                               {16, 8, 8},
                               {45, 100, 101},
                               {0, 64, 64},
                               {37, 48, 48},
                               {5, 272, 272},
                               {131, 5376 + 16, 5376 + 16}};
  for (const auto& s : shapes) check_plain(s[0], s[1], s[2], false, true);
}

TEST(Nvfp4Producer, PlainStaticScale) {
  VORTEX_REQUIRE_GPU();
  check_plain(200, 5376, 5376, false, false);
  check_plain(19, 48, 48, false, false);
  check_plain(100, 7168, 7168, false, false, true);  // exact scales: E2M1 ties land exactly
}

TEST(Nvfp4Producer, InfNanPolicy) {
  VORTEX_REQUIRE_GPU();
  check_plain(64, 256, 256, true, false);  // static g: inf -> +-6, NaN -> 0x7
  check_plain(64, 256, 256, true, true);   // dynamic: amax NaN -> g NaN (torch.amax propagates)
}

TEST(Nvfp4Producer, AllZeroTensorDynamic) {
  VORTEX_REQUIRE_GPU();
  const int64_t rows = 20, cols = 64;
  std::vector<uint16_t> x(rows * cols, 0);
  for (size_t i = 0; i < x.size(); i += 3) x[i] = 0x8000;  // negative zeros
  DeviceBuffer dx(x.size() * 2);
  dx.upload(x.data(), x.size() * 2);
  const HostOut want = cpu_reference(x, rows, cols, cols, true, 0.0f);
  {
    DeviceOut out(ref::nvfp4_layout(rows, cols));
    ASSERT_TRUE(cuda_ops::nvfp4_quantize(static_cast<const uint16_t*>(dx.get()), rows, cols, cols, out.scale(true),
                                         out.buffers(), nullptr)
                    .ok());
    const HostOut got = download(out);
    expect_same(got, want, out.layout, "all-zero");
    EXPECT_EQ(got.g, 0.0f);
    EXPECT_EQ(got.scales[ref::nvfp4_scale_offset(0, 0, out.layout.scale_cols)], 0x7E) << "0/0 = NaN -> 448 expected";
  }
}

// Segments of a packed sequence -> AdaLN table rows (3 table rows); fills the host row map.
SegmentTable make_segments(int64_t rows, std::vector<int32_t>& host_map) {
  SegmentTable seg;
  seg.rows = rows;
  const int64_t a = rows / 3, b = rows - rows / 5;
  const int32_t table_rows[3] = {2, 0, 1};
  const int64_t bounds[4] = {0, a, b, rows};
  for (int i = 0; i < 3; ++i)
    if (bounds[i + 1] > bounds[i]) seg.segments.push_back({bounds[i], bounds[i + 1], table_rows[i]});
  host_map.assign(static_cast<size_t>(rows), 0);
  for (int64_t r = 0; r < rows; ++r) host_map[static_cast<size_t>(r)] = seg.row_of(r);
  return seg;
}

// A random table row in [0, table_rows) for every row (runs of equal rows merged into one segment).
SegmentTable make_random_segments(int64_t rows, int32_t table_rows, std::mt19937_64& rng,
                                  std::vector<int32_t>& host_map) {
  SegmentTable seg;
  seg.rows = rows;
  host_map.assign(static_cast<size_t>(rows), 0);
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t t = static_cast<int32_t>(rng() % static_cast<uint64_t>(table_rows));
    host_map[static_cast<size_t>(r)] = t;
    if (!seg.segments.empty() && seg.segments.back().table_row == t) seg.segments.back().stop = r + 1;
    else seg.segments.push_back({r, r + 1, t});
  }
  return seg;
}

Tensor device_view(const DeviceBuffer& b, Shape shape, DType dtype) { return b.view(std::move(shape), dtype); }
Tensor host_tensor(const std::vector<uint16_t>& v, Shape shape) {
  Tensor t = Tensor::empty(std::move(shape), DType::kBF16);
  std::memcpy(t.raw_data(), v.data(), v.size() * 2);
  return t;
}

// random_map: every row picks one of 7 table rows at random (CTAs of the staged-table kernels meet more distinct table
// rows than they stage); dynamic = false: a static g (the pack kernels' other instantiation). inf_nan: the RMSNorm
// output carries +-inf and NaN (the packed bf16x2 roundings of the fused producers must give the bytes of the scalar
// path).
void check_modulated(int64_t rows, int64_t d, bool random_map = false, bool dynamic = true, bool inf_nan = false) {
  const uint64_t seed = testing::fresh_seed();
  std::mt19937_64 rng(seed);
  const std::string what = "modulated [" + std::to_string(rows) + ", " + std::to_string(d) + "]" +
                           (random_map ? " random row map" : " segments") + (dynamic ? " dynamic" : " static") +
                           (inf_nan ? " inf/nan" : "") + " seed=" + std::to_string(seed);
  const int chunks = 6, shift_chunk = 3, scale_chunk = 4;
  const int32_t table_rows = random_map ? 7 : 3;
  const std::vector<uint16_t> n = test::nvfp4_adversarial_bf16(rows, d, d, rng, inf_nan);
  std::vector<uint16_t> table(static_cast<size_t>(table_rows) * chunks * d);
  std::normal_distribution<float> nd(0.0f, 0.7f);
  for (auto& t : table) t = bf16_bits_from_f32(nd(rng));
  std::vector<int32_t> map_host;
  const SegmentTable seg =
      random_map ? make_random_segments(rows, table_rows, rng, map_host) : make_segments(rows, map_host);
  const float g_static = std::ldexp(1.0f + static_cast<float>(rng() % 1000) / 1000.0f, static_cast<int>(rng() % 8) - 6);

  DeviceBuffer dn(n.size() * 2), dt(table.size() * 2), dmap(map_host.size() * 4 + 4), dm(n.size() * 2);
  dn.upload(n.data(), n.size() * 2);
  dt.upload(table.data(), table.size() * 2);
  dmap.upload(map_host.data(), map_host.size() * 4);
  const cuda_ops::DeviceRowMap map{static_cast<const int32_t*>(dmap.get()), rows, table_rows};
  // Unfused: the modulate kernel materializes the BF16 tensor, then the plain producer.
  dm.upload(n.data(), n.size() * 2);
  Tensor m_dev = device_view(dm, {rows, d}, DType::kBF16);
  const Status s1 = cuda_ops::modulate(m_dev, device_view(dt, {table_rows, chunks * d}, DType::kBF16), shift_chunk,
                                       scale_chunk, map, nullptr);
  ASSERT_TRUE(s1.ok()) << s1.message();
  // CPU: ref::modulate then ref::nvfp4_quantize.
  Tensor m_host = host_tensor(n, {rows, d});
  ASSERT_TRUE(ref::modulate(m_host, host_tensor(table, {table_rows, chunks * d}), shift_chunk, scale_chunk, seg).ok());
  std::vector<uint16_t> m_ref(n.size());
  std::memcpy(m_ref.data(), m_host.raw_data(), m_ref.size() * 2);
  const HostOut want = cpu_reference(m_ref, rows, d, d, dynamic, g_static);
  {
    DeviceOut fused(ref::nvfp4_layout(rows, d));
    if (!dynamic) fused.g.upload(&g_static, 4);
    const Status s = cuda_ops::nvfp4_quantize_modulated(
        static_cast<const uint16_t*>(dn.get()), rows, d, d, static_cast<const uint16_t*>(dt.get()), chunks * d,
        shift_chunk, scale_chunk, map, fused.scale(dynamic), fused.buffers(), nullptr);
    ASSERT_TRUE(s.ok()) << s.message();
    DeviceOut unfused(ref::nvfp4_layout(rows, d));
    if (!dynamic) unfused.g.upload(&g_static, 4);
    const Status s2 = cuda_ops::nvfp4_quantize(static_cast<const uint16_t*>(dm.get()), rows, d, d,
                                               unfused.scale(dynamic), unfused.buffers(), nullptr);
    ASSERT_TRUE(s2.ok()) << s2.message();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const HostOut got_fused = download(fused), got_unfused = download(unfused);
    expect_same(got_unfused, want, fused.layout, what + " unfused GPU vs CPU");
    expect_same(got_fused, got_unfused, fused.layout, what + " fused vs unfused GPU");
  }
}

TEST(Nvfp4Producer, ModulationFusedEqualsMaterializeThenQuantize) {
  VORTEX_REQUIRE_GPU();
  check_modulated(300, 5376);
  check_modulated(37, 40);  // element-wise path, ragged rows and K
  check_modulated(130, 7168);
  check_modulated(2000, 5376, /*random_map=*/true);  // > 3 distinct table rows per CTA: staged + global fallback
  check_modulated(517, 1040, /*random_map=*/true);   // 130 chunks: one partial task column, padding rows
  check_modulated(1100, 3072, /*random_map=*/false, /*dynamic=*/false);                  // static g
  check_modulated(300, 5376, /*random_map=*/true, /*dynamic=*/false, /*inf_nan=*/true);  // inf -> +-6, NaN -> 0x7
}

void check_swiglu(int64_t rows, int64_t f) {
  const uint64_t seed = testing::fresh_seed();
  std::mt19937_64 rng(seed);
  const std::string what =
      "swiglu [" + std::to_string(rows) + ", " + std::to_string(f) + "] seed=" + std::to_string(seed);
  const std::vector<uint16_t> u = test::nvfp4_adversarial_bf16(rows, 2 * f, 2 * f, rng, false);
  const std::vector<uint16_t> silu = cuda_ops::silu_bf16_table_host();
  DeviceBuffer du(u.size() * 2), dsilu(silu.size() * 2), dm(u.size());
  du.upload(u.data(), u.size() * 2);
  dsilu.upload(silu.data(), silu.size() * 2);
  const auto* silu_dev = static_cast<const uint16_t*>(dsilu.get());
  Tensor m_dev = device_view(dm, {rows, f}, DType::kBF16);
  const Status s3 = cuda_ops::swiglu(device_view(du, {rows, 2 * f}, DType::kBF16), m_dev, silu_dev, nullptr);
  ASSERT_TRUE(s3.ok()) << s3.message();
  Tensor m_host = Tensor::empty({rows, f}, DType::kBF16);
  ASSERT_TRUE(ref::swiglu(host_tensor(u, {rows, 2 * f}), m_host).ok());
  std::vector<uint16_t> m_ref(static_cast<size_t>(rows * f));
  std::memcpy(m_ref.data(), m_host.raw_data(), m_ref.size() * 2);
  const HostOut want = cpu_reference(m_ref, rows, f, f, true, 0.0f);
  {
    DeviceOut fused(ref::nvfp4_layout(rows, f));
    const Status s = cuda_ops::nvfp4_quantize_swiglu(static_cast<const uint16_t*>(du.get()), rows, f, 2 * f, silu_dev,
                                                     fused.scale(true), fused.buffers(), nullptr);
    ASSERT_TRUE(s.ok()) << s.message();
    DeviceOut unfused(ref::nvfp4_layout(rows, f));
    const Status s4 = cuda_ops::nvfp4_quantize(static_cast<const uint16_t*>(dm.get()), rows, f, f, unfused.scale(true),
                                               unfused.buffers(), nullptr);
    ASSERT_TRUE(s4.ok()) << s4.message();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const HostOut got_fused = download(fused), got_unfused = download(unfused);
    expect_same(got_unfused, want, fused.layout, what + " unfused GPU vs CPU");
    expect_same(got_fused, got_unfused, fused.layout, what + " fused vs unfused GPU");
  }
}

TEST(Nvfp4Producer, SwigluFusedEqualsMaterializeThenQuantize) {
  VORTEX_REQUIRE_GPU();
  check_swiglu(150, 14336);
  check_swiglu(21, 24);   // element-wise path (F not a multiple of 16)
  check_swiglu(19, 272);  // main path, K not a multiple of 64 (partial scale word groups)
}

// A CUDA-tagged tensor without memory: the backend validators read only its shape, dtype and strides.
Tensor device_tag(Shape shape, DType dtype = DType::kBF16) {
  auto st = std::make_shared<Storage>();
  st->bytes = static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype);
  st->device = Device::kCuda;
  return Tensor::from_storage(st, 0, std::move(shape), dtype);
}
bool has(const Status& s, const std::string& text) { return s.message().find(text) != std::string::npos; }

// The backend's input checks (host only, run without a device): shapes out, clear errors for the rest.
TEST(Nvfp4InputShape, AcceptsProducerInputsAndNamesTheOp) {
  Result<cuda_ops::Nvfp4ProducerShape> x = cuda_ops::nvfp4_quantize_input_shape(device_tag({37, 64}));
  ASSERT_TRUE(x.ok()) << x.status().message();
  EXPECT_EQ(x->rows, 37);
  EXPECT_EQ(x->cols, 64);
  Result<cuda_ops::Nvfp4ProducerShape> u = cuda_ops::nvfp4_swiglu_input_shape(device_tag({5, 96}));
  ASSERT_TRUE(u.ok()) << u.status().message();
  EXPECT_EQ(u->rows, 5);
  EXPECT_EQ(u->cols, 48) << "[S, 2F] -> [S, F]";
  Result<cuda_ops::Nvfp4ProducerShape> n =
      cuda_ops::nvfp4_modulated_input_shape(device_tag({9, 32}), device_tag({3, 6 * 32}), 3, 4);
  ASSERT_TRUE(n.ok()) << n.status().message();
  EXPECT_EQ(n->rows, 9);
  EXPECT_EQ(n->cols, 32);

  const Tensor host = Tensor::empty({4, 64}, DType::kBF16);
  EXPECT_TRUE(has(cuda_ops::nvfp4_quantize_input_shape(host).status(), "nvfp4 linear: x must be a device bf16"));
  EXPECT_TRUE(has(cuda_ops::nvfp4_quantize_input_shape(Tensor()).status(), "got undefined"));
  EXPECT_TRUE(has(cuda_ops::nvfp4_quantize_input_shape(device_tag({4, 64}, DType::kF32)).status(), "device bf16"));
  EXPECT_TRUE(has(cuda_ops::nvfp4_quantize_input_shape(device_tag({4, 4, 64})).status(), "[M, K]"));
  EXPECT_TRUE(has(cuda_ops::nvfp4_swiglu_input_shape(device_tag({4, 63})).status(), "swiglu_quantize: u must be"));
  EXPECT_TRUE(has(cuda_ops::nvfp4_modulated_input_shape(host, device_tag({3, 192}), 0, 1).status(),
                  "modulate_quantize: n must be"));
  EXPECT_TRUE(has(cuda_ops::nvfp4_modulated_input_shape(device_tag({9, 32}), device_tag({192}), 0, 1).status(),
                  "modulate_quantize: table must be"));
  EXPECT_TRUE(has(cuda_ops::nvfp4_modulated_input_shape(device_tag({9, 32}), device_tag({3, 100}), 0, 1).status(),
                  "must hold whole rows of chunks of D=32"));
  EXPECT_TRUE(has(cuda_ops::nvfp4_modulated_input_shape(device_tag({9, 32}), device_tag({3, 192}), 0, 6).status(),
                  "covering chunks 0/6"));
}

TEST(Nvfp4Producer, RejectsBadArguments) {
  VORTEX_REQUIRE_GPU();
  DeviceBuffer x(4096);
  DeviceOut out(ref::nvfp4_layout(16, 64));
  cuda_ops::Nvfp4Buffers misaligned{static_cast<uint8_t*>(out.data.get()) + 1, static_cast<uint8_t*>(out.scales.get())};
  EXPECT_FALSE(
      cuda_ops::nvfp4_quantize(static_cast<const uint16_t*>(x.get()), 16, 64, 64, out.scale(true), misaligned, nullptr)
          .ok());
  cuda_ops::Nvfp4GlobalScale no_ws{true, static_cast<float*>(out.g.get()), nullptr};
  EXPECT_FALSE(
      cuda_ops::nvfp4_quantize(static_cast<const uint16_t*>(x.get()), 16, 64, 64, no_ws, out.buffers(), nullptr).ok());
  EXPECT_FALSE(cuda_ops::nvfp4_quantize(static_cast<const uint16_t*>(x.get()), 16, 64, 32, out.scale(true),
                                        out.buffers(), nullptr)
                   .ok());
}

}  // namespace
}  // namespace vortex
