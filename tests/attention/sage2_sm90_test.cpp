// GPU tests of the Sage2 sm90 path (gpu label; skips visibly without a device): quantized Q/K/V bytes
// and scales E0 vs the CPU reference (including padding), and the attention output vs FP64 attention
// and vs the CPU Sage2 program (two-reference rule: GPU error vs FP64 <= 2x the CPU program's error
// + a small floor), random and realistic inputs, ragged S (1 .. 4097), 1-4 heads. Inputs are strided
// views of a [S, 3*H*128] QKV buffer; outputs are poisoned first and followed by a sentinel region.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "attention/sage2_test_util.h"
#include "cuda/attention/sage2_attention.h"
#include "gpu_test.h"
#include "ref/sage2_attention.h"
#include "vortex/dtype.h"

namespace vortex {
namespace {

using sage2_test::InputKind;

#define ASSERT_CUDA(expr) ASSERT_EQ((expr), cudaSuccess) << #expr << ": " << cudaGetErrorString(cudaGetLastError())

std::shared_ptr<Storage> device_storage(size_t bytes) {
  auto st = std::make_shared<Storage>();
  if (cudaMalloc(&st->ptr, bytes) != cudaSuccess) return nullptr;
  st->bytes = bytes;
  st->device = Device::kCuda;
  st->release = [](void* p, size_t) { cudaFree(p); };
  return st;
}

template <typename T>
std::vector<T> download(const T* dev, size_t count) {
  std::vector<T> host(count);
  EXPECT_EQ(cudaMemcpy(host.data(), dev, count * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  return host;
}

TEST(Sage2Sm90, RejectsUnsupportedArguments) {
  // Validation happens before any device work, so this runs without a GPU too.
  auto st = std::make_shared<Storage>();
  std::vector<uint16_t> host(64 * 3 * 128);
  st->ptr = host.data();
  st->bytes = host.size() * 2;
  st->device = Device::kCuda;  // metadata only; never dereferenced on the error paths
  Tensor q = Tensor::from_storage(st, 0, {64, 128}, DType::kBF16, {384, 1});
  Tensor k = Tensor::from_storage(st, 256, {64, 128}, DType::kBF16, {384, 1});
  Tensor v = Tensor::from_storage(st, 512, {64, 128}, DType::kBF16, {384, 1});
  Tensor out = Tensor::from_storage(st, 0, {64, 128}, DType::kBF16);
  Sage2Workspace ws;
  Status s = sage2_attention(q, k, v, 1, 64, out, nullptr, ws);
  EXPECT_EQ(s.code(), ErrorCode::kUnsupported) << s.to_string();
  Tensor odd = Tensor::from_storage(st, 0, {64, 128}, DType::kBF16, {383, 1});
  s = sage2_attention(odd, k, v, 1, 128, out, nullptr, ws);
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument) << s.to_string();
  EXPECT_NE(s.message().find("multiple of 8"), std::string::npos) << s.message();
  s = sage2_attention(q, k, v, 2, 128, out, nullptr, ws);  // 2 heads need 256 columns
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument) << s.to_string();
  Tensor f32 = Tensor::from_storage(st, 0, {64, 64}, DType::kF32, {192, 1});
  s = sage2_attention(f32, k, v, 1, 128, out, nullptr, ws);
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument) << s.to_string();
}

struct GpuCase {
  int64_t seq;
  int heads;
  InputKind kind;
  Sage2Mainloop mainloop;
};

std::string mainloop_name(const GpuCase& c) {
  return c.mainloop == Sage2Mainloop::kWgmma ? "wgmma" : "mma";  // gtest names: [A-Za-z0-9_] only
}

std::string case_name(const ::testing::TestParamInfo<GpuCase>& info) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%s_S%lld_H%d_%s", mainloop_name(info.param).c_str(),
                static_cast<long long>(info.param.seq), info.param.heads,
                info.param.kind == InputKind::kRandom ? "random" : "realistic");
  return buf;
}

class Sage2Sm90Case : public ::testing::TestWithParam<GpuCase> {};

TEST_P(Sage2Sm90Case, QuantizedBytesAndOutput) {
  VORTEX_REQUIRE_GPU();
  const GpuCase gc = GetParam();
  const uint64_t seed = sage2_test::fresh_seed();
  char trace[128];
  std::snprintf(trace, sizeof(trace), "seed=%llu seq=%lld heads=%d", static_cast<unsigned long long>(seed),
                static_cast<long long>(gc.seq), gc.heads);
  SCOPED_TRACE(trace);
  const int H = gc.heads;
  const int64_t S = gc.seq, width = 3LL * H * 128, P = sage2_padded_tokens(S);

  // Host inputs and CPU quantization reference.
  auto qkv = sage2_test::make_qkv(S, H, gc.kind, seed);
  auto qv = sage2_test::view(qkv, H, 0), kv = sage2_test::view(qkv, H, 1), vv = sage2_test::view(qkv, H, 2);
  auto ref_or = sage2_quantize_reference(qv, kv, vv, S, H);
  ASSERT_TRUE(ref_or.ok()) << ref_or.status().to_string();
  const Sage2Quantized& ref = *ref_or;

  // Device QKV buffer [S, 3*H*128] and strided views; output [S, H*128] + sentinel, poisoned (bf16 NaN).
  auto qkv_dev = device_storage(qkv.size() * 2);
  ASSERT_TRUE(qkv_dev);
  ASSERT_CUDA(cudaMemcpy(qkv_dev->ptr, qkv.data(), qkv.size() * 2, cudaMemcpyHostToDevice));
  Tensor q = Tensor::from_storage(qkv_dev, 0, {S, H * 128}, DType::kBF16, {width, 1});
  Tensor k = Tensor::from_storage(qkv_dev, static_cast<size_t>(H) * 128 * 2, {S, H * 128}, DType::kBF16, {width, 1});
  Tensor v = Tensor::from_storage(qkv_dev, static_cast<size_t>(H) * 256 * 2, {S, H * 128}, DType::kBF16, {width, 1});
  constexpr size_t kSentinel = 4096;
  const size_t out_elems = static_cast<size_t>(S * H * 128);
  auto out_dev = device_storage((out_elems + kSentinel) * 2);
  ASSERT_TRUE(out_dev);
  ASSERT_CUDA(cudaMemset(out_dev->ptr, 0xFF, (out_elems + kSentinel) * 2));
  Tensor out = Tensor::from_storage(out_dev, 0, {S, H * 128}, DType::kBF16);

  Sage2Workspace ws;
  ws.mainloop = gc.mainloop;
  ASSERT_TRUE(ws.reserve(H, S).ok());
  const size_t n8 = static_cast<size_t>(H * P * 128);
  ASSERT_CUDA(cudaMemset(ws.q_int8, 0x5A, n8));
  ASSERT_CUDA(cudaMemset(ws.k_int8, 0x5A, n8));
  ASSERT_CUDA(cudaMemset(ws.v_fp8, 0x5A, n8));
  ASSERT_CUDA(cudaMemset(ws.q_scale, 0xFF, static_cast<size_t>(H * (P / 16) * 8) * 4));
  ASSERT_CUDA(cudaMemset(ws.k_scale, 0xFF, static_cast<size_t>(H * (P / 128) * 4) * 4));
  ASSERT_CUDA(cudaMemset(ws.v_scale, 0xFF, static_cast<size_t>(H * 128) * 4));

  Status st = sage2_attention(q, k, v, H, 128, out, nullptr, ws);
  ASSERT_TRUE(st.ok()) << st.to_string();
  ASSERT_CUDA(cudaDeviceSynchronize());

  // ---- E0: quantized bytes and scales ----
  auto q8 = download(ws.q_int8, n8);
  auto k8 = download(ws.k_int8, n8);
  auto v8 = download(ws.v_fp8, n8);
  auto qs = download(ws.q_scale, ref.q_scale.size());
  auto ks = download(ws.k_scale, ref.k_scale.size());
  auto km = download(ws.k_mean, ref.k_mean.size());
  auto vs = download(ws.v_scale, ref.v_scale.size());
  int64_t bad = 0;
  const bool tiled = sage2_tiled_layout(gc.mainloop);
  for (int hh = 0; hh < H; ++hh)
    for (int64_t row = 0; row < P; ++row)
      for (int c = 0; c < 128; ++c) {
        const size_t logical = static_cast<size_t>((hh * P + row) * 128 + c);
        const size_t stored =
            static_cast<size_t>(hh * P * 128 + (tiled ? sage2_tiled_pos(row, c) : row * 128 + sage2_qk_byte_pos(c)));
        if (q8[stored] != ref.q[logical] && bad++ < 5)
          ADD_FAILURE() << "q byte head " << hh << " row " << row << " c " << c;
        if (k8[stored] != ref.k[logical] && bad++ < 5)
          ADD_FAILURE() << "k byte head " << hh << " row " << row << " c " << c;
      }
  for (int hh = 0; hh < H; ++hh)
    for (int ch = 0; ch < 128; ++ch)
      for (int64_t key = 0; key < P; ++key) {
        const size_t logical = static_cast<size_t>((hh * 128 + ch) * P + key);
        const int64_t pos = tiled ? sage2_tiled_v_pos(ch, key)
                                  : ch * P + key / 128 * 128 + sage2_v_byte_pos(static_cast<int>(key % 128));
        const size_t stored = static_cast<size_t>(hh * 128 * P + pos);
        if (v8[stored] != ref.v[logical] && bad++ < 5)
          ADD_FAILURE() << "v byte head " << hh << " ch " << ch << " key " << key;
      }
  EXPECT_EQ(bad, 0) << "quantized bytes differ from the CPU reference";
  EXPECT_EQ(std::memcmp(qs.data(), ref.q_scale.data(), qs.size() * 4), 0) << "q scales differ";
  EXPECT_EQ(std::memcmp(ks.data(), ref.k_scale.data(), ks.size() * 4), 0) << "k scales differ";
  EXPECT_EQ(std::memcmp(km.data(), ref.k_mean.data(), km.size() * 2), 0) << "k mean differs";
  EXPECT_EQ(std::memcmp(vs.data(), ref.v_scale.data(), vs.size() * 4), 0) << "v scales differ";

  // ---- output: sentinels, NaN, two-reference rule ----
  auto o16 = download(static_cast<const uint16_t*>(out_dev->ptr), out_elems + kSentinel);
  for (size_t i = out_elems; i < out_elems + kSentinel; ++i)
    ASSERT_EQ(o16[i], 0xFFFF) << "write past the output at element " << i;
  for (size_t i = 0; i < out_elems; ++i)
    ASSERT_FALSE(std::isnan(f32_from_bf16_bits(o16[i]))) << "NaN (or unwritten poison) at element " << i;
  auto rows = sage2_test::pick_rows(S, 96, seed);
  for (int h = 0; h < H; ++h) {
    auto want = attention_fp64_reference(qv, kv, vv, S, h, rows);
    auto cpu = sage2_attention_reference(ref, h, rows);
    std::vector<float> gpu(rows.size() * 128);
    for (size_t i = 0; i < rows.size(); ++i)
      for (int c = 0; c < 128; ++c)
        gpu[i * 128 + c] = f32_from_bf16_bits(o16[static_cast<size_t>(rows[i] * H * 128 + h * 128 + c)]);
    const auto e_cpu = sage2_test::compare(cpu, want);
    const auto e_gpu = sage2_test::compare(gpu, want);
    std::vector<double> cpu_d(cpu.begin(), cpu.end());
    const auto e_same = sage2_test::compare(gpu, cpu_d);
    double want_max = 0.0;
    for (double w : want) want_max = std::max(want_max, std::fabs(w));
    std::printf(
        "%s S=%lld head=%d %s\n  cpu-program vs fp64: %s\n  gpu vs fp64:         %s\n  gpu vs cpu-program:  %s\n",
        mainloop_name(gc).c_str(), static_cast<long long>(S), h, gc.kind == InputKind::kRandom ? "random" : "realistic",
        e_cpu.str().c_str(), e_gpu.str().c_str(), e_same.str().c_str());
    EXPECT_FALSE(e_gpu.has_nan);
    EXPECT_LE(e_gpu.rel_l2, 2.0 * e_cpu.rel_l2 + 2e-3) << "two-reference rule (rel-L2), head " << h;
    EXPECT_LE(e_gpu.max_abs, 2.0 * e_cpu.max_abs + 8e-3 * want_max) << "two-reference rule (max-abs), head " << h;
    EXPECT_LT(e_same.rel_l2, 0.02) << "gpu vs the same program on the CPU, head " << h;
  }
}

std::vector<GpuCase> all_cases() {
  std::vector<GpuCase> cases;
  for (Sage2Mainloop ml : {Sage2Mainloop::kWgmma, Sage2Mainloop::kMmaSync}) {
    auto add = [&](int64_t seq, int heads, InputKind kind) { cases.push_back({seq, heads, kind, ml}); };
    add(1, 1, InputKind::kRandom);
    add(100, 2, InputKind::kRandom);
    add(128, 1, InputKind::kRandom);  // one full key block (no masking)
    add(256, 1, InputKind::kRandom);  // two full key blocks: the carried softmax state
    add(129, 1, InputKind::kRealistic);
    add(1000, 3, InputKind::kRealistic);
    add(4097, 4, InputKind::kRandom);
    add(4097, 2, InputKind::kRealistic);
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Shapes, Sage2Sm90Case, ::testing::ValuesIn(all_cases()), case_name);

TEST(Sage2Sm90, RejectsWorkspaceQuantizedForAnotherMainloop) {
  VORTEX_REQUIRE_GPU();
  const int64_t S = 64;
  auto qkv = sage2_test::make_qkv(S, 1, InputKind::kRandom, sage2_test::fresh_seed());
  auto qkv_dev = device_storage(qkv.size() * 2);
  auto out_dev = device_storage(static_cast<size_t>(S) * 128 * 2);
  ASSERT_TRUE(qkv_dev && out_dev);
  ASSERT_CUDA(cudaMemcpy(qkv_dev->ptr, qkv.data(), qkv.size() * 2, cudaMemcpyHostToDevice));
  Tensor q = Tensor::from_storage(qkv_dev, 0, {S, 128}, DType::kBF16, {384, 1});
  Tensor k = Tensor::from_storage(qkv_dev, 256, {S, 128}, DType::kBF16, {384, 1});
  Tensor v = Tensor::from_storage(qkv_dev, 512, {S, 128}, DType::kBF16, {384, 1});
  Tensor out = Tensor::from_storage(out_dev, 0, {S, 128}, DType::kBF16);
  Sage2Workspace ws;
  ws.mainloop = Sage2Mainloop::kWgmma;
  ASSERT_TRUE(sage2_quantize(q, k, v, 1, 128, nullptr, ws).ok());
  ws.mainloop = Sage2Mainloop::kMmaSync;
  Status s = sage2_attention_quantized(out, nullptr, ws);
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument) << s.to_string();
  EXPECT_NE(s.message().find("quantized for the wgmma mainloop"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace vortex
