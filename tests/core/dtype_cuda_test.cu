// GPU check that the host conversions of include/vortex/dtype.h are bit-exact with the CUDA
// instructions they name, and that core/philox.h gives the same bytes on the device as on the host.
// Sweeps all 2^32 FP32 bit patterns through cvt.rn.bf16.f32, cvt.rn.satfinite.e4m3x2.f32 and
// cvt.rn.satfinite.e5m2x2.f32; decodes all FP8 codes with cvt.rn.f16x2.e4m3x2/e5m2x2; E2M1 and UE8M0
// cvt exist only on sm_100a/sm_120a builds and are skipped (with the reason) elsewhere. Label gpu.
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <atomic>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/parallel.h"
#include "core/philox.h"
#include "gpu_test.h"
#include "vortex/dtype.h"

#if defined(__CUDA_ARCH_FEAT_SM100_ALL) || defined(__CUDA_ARCH_FEAT_SM103_ALL) || \
    defined(__CUDA_ARCH_FEAT_SM120_ALL) || defined(__CUDA_ARCH_FEAT_SM121_ALL)
#define VORTEX_TEST_HAS_FP4_CVT 1
#endif

namespace vortex {
namespace {

#define CUDA_OK(expr)                                                          \
  do {                                                                         \
    cudaError_t err_ = (expr);                                                 \
    ASSERT_EQ(err_, cudaSuccess) << #expr << ": " << cudaGetErrorString(err_); \
  } while (0)

__global__ void cvt_sweep_kernel(uint64_t first, uint32_t count, uint16_t* bf16_out, uint8_t* e4m3_out,
                                 uint8_t* e5m2_out) {
  uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= count) return;
  float x = __uint_as_float(static_cast<uint32_t>(first + i));
  uint16_t b, p4, p5;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(b) : "f"(x));
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(p4) : "f"(x), "f"(x));
  asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(p5) : "f"(x), "f"(x));
  bf16_out[i] = b;
  e4m3_out[i] = static_cast<uint8_t>(p4 & 0xFF);
  e5m2_out[i] = static_cast<uint8_t>(p5 & 0xFF);
}

// Blackwell-only conversions; writes *compiled = 1 when this build has them.
__global__ void cvt_fp4_ue8m0_kernel(const float* in, uint32_t count, uint8_t* e2m1_out, uint8_t* ue8m0_out,
                                     int* compiled) {
  uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= count) return;
#if defined(VORTEX_TEST_HAS_FP4_CVT)
  float x = in[i];
  uint16_t e2;  // .b8 destination held in a 16-bit register
  asm("{ .reg .b8 t; cvt.rn.satfinite.e2m1x2.f32 t, %1, %2; cvt.u16.u8 %0, t; }" : "=h"(e2) : "f"(x), "f"(x));
  uint16_t s;
  asm("cvt.rp.satfinite.ue8m0x2.f32 %0, %1, %2;" : "=h"(s) : "f"(x), "f"(x));
  e2m1_out[i] = static_cast<uint8_t>(e2 & 0xF);
  ue8m0_out[i] = static_cast<uint8_t>(s & 0xFF);
  if (i == 0) *compiled = 1;
#endif
}

__global__ void fp8_decode_kernel(float* e4m3_out, float* e5m2_out) {
  uint32_t c = threadIdx.x;  // 256 threads
  uint16_t packed = static_cast<uint16_t>(c | (c << 8));
  uint32_t h4, h5;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(h4) : "h"(packed));
  asm("cvt.rn.f16x2.e5m2x2 %0, %1;" : "=r"(h5) : "h"(packed));
  e4m3_out[c] = __half2float(__ushort_as_half(static_cast<unsigned short>(h4 & 0xFFFF)));
  e5m2_out[c] = __half2float(__ushort_as_half(static_cast<unsigned short>(h5 & 0xFFFF)));
}

__global__ void philox_kernel(uint64_t seed, uint32_t count, float scale, float offset, float* values,
                              uint32_t* words) {
  uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= count) return;
  values[i] = synthetic_value(seed, i, scale, offset);
  Philox4x32 r = philox_block(seed ^ 0x5555555555555555ull, 0xFFFFFFF0ull + i);  // crosses the 2^32 carry
  for (int w = 0; w < 4; ++w) words[4 * i + w] = r.v[w];
}

TEST(DTypeCuda, AllF32PatternsMatchCvt) {
  VORTEX_REQUIRE_GPU();
  constexpr uint32_t kChunk = 1u << 26;
  uint16_t* d_bf16;
  uint8_t *d_e4m3, *d_e5m2;
  CUDA_OK(cudaMalloc(&d_bf16, kChunk * 2));
  CUDA_OK(cudaMalloc(&d_e4m3, kChunk));
  CUDA_OK(cudaMalloc(&d_e5m2, kChunk));
  std::vector<uint16_t> bf16(kChunk);
  std::vector<uint8_t> e4m3(kChunk), e5m2(kChunk);
  std::atomic<uint64_t> bad_bf16{0}, bad_e4m3{0}, bad_e5m2{0};
  std::atomic<int> printed{0};
  for (uint64_t first = 0; first < (1ull << 32); first += kChunk) {
    CUDA_OK(cudaMemset(d_bf16, 0xA5, kChunk * 2));  // poison: a kernel that writes nothing fails
    CUDA_OK(cudaMemset(d_e4m3, 0xA5, kChunk));
    CUDA_OK(cudaMemset(d_e5m2, 0xA5, kChunk));
    cvt_sweep_kernel<<<kChunk / 256, 256>>>(first, kChunk, d_bf16, d_e4m3, d_e5m2);
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaMemcpy(bf16.data(), d_bf16, kChunk * 2, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(e4m3.data(), d_e4m3, kChunk, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(e5m2.data(), d_e5m2, kChunk, cudaMemcpyDeviceToHost));
    parallel_for_ranges(kChunk, 0, 1, [&](size_t begin, size_t end) {
      for (size_t i = begin; i < end; ++i) {
        uint32_t u = static_cast<uint32_t>(first + i);
        float x = std::bit_cast<float>(u);
        uint16_t hb = bf16_bits_from_f32(x);
        uint8_t h4 = e4m3_from_f32(x), h5 = e5m2_from_f32(x);
        bool mismatch = false;
        if (hb != bf16[i]) {
          ++bad_bf16;
          mismatch = true;
        }
        if (h4 != e4m3[i]) {
          ++bad_e4m3;
          mismatch = true;
        }
        if (h5 != e5m2[i]) {
          ++bad_e5m2;
          mismatch = true;
        }
        if (mismatch && printed.fetch_add(1) < 10)
          std::printf(
              "mismatch x=0x%08x: bf16 host %04x gpu %04x | e4m3 host %02x gpu %02x | e5m2 host %02x gpu %02x\n", u, hb,
              bf16[i], h4, e4m3[i], h5, e5m2[i]);
      }
    });
  }
  cudaFree(d_bf16);
  cudaFree(d_e4m3);
  cudaFree(d_e5m2);
  EXPECT_EQ(bad_bf16.load(), 0u) << "cvt.rn.bf16.f32 vs bf16_bits_from_f32 over all 2^32 inputs";
  EXPECT_EQ(bad_e4m3.load(), 0u) << "cvt.rn.satfinite.e4m3x2.f32 vs e4m3_from_f32 over all 2^32 inputs";
  EXPECT_EQ(bad_e5m2.load(), 0u) << "cvt.rn.satfinite.e5m2x2.f32 vs e5m2_from_f32 over all 2^32 inputs";
}

TEST(DTypeCuda, Fp8DecodeMatchesCvt) {
  VORTEX_REQUIRE_GPU();
  float *d4, *d5;
  CUDA_OK(cudaMalloc(&d4, 256 * 4));
  CUDA_OK(cudaMalloc(&d5, 256 * 4));
  fp8_decode_kernel<<<1, 256>>>(d4, d5);
  CUDA_OK(cudaGetLastError());
  std::vector<float> g4(256), g5(256);
  CUDA_OK(cudaMemcpy(g4.data(), d4, 1024, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(g5.data(), d5, 1024, cudaMemcpyDeviceToHost));
  cudaFree(d4);
  cudaFree(d5);
  for (int c = 0; c < 256; ++c) {
    float h4 = f32_from_e4m3(static_cast<uint8_t>(c)), h5 = f32_from_e5m2(static_cast<uint8_t>(c));
    if (std::isnan(h4)) EXPECT_TRUE(std::isnan(g4[c])) << "e4m3 code " << c;
    else EXPECT_EQ(std::bit_cast<uint32_t>(h4), std::bit_cast<uint32_t>(g4[c])) << "e4m3 code " << c;
    if (std::isnan(h5)) EXPECT_TRUE(std::isnan(g5[c])) << "e5m2 code " << c;
    else EXPECT_EQ(std::bit_cast<uint32_t>(h5), std::bit_cast<uint32_t>(g5[c])) << "e5m2 code " << c;
  }
}

TEST(DTypeCuda, E2m1AndUe8m0MatchCvt) {
  VORTEX_REQUIRE_GPU();
  std::random_device rd;
  uint64_t seed = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  std::mt19937_64 rng(seed);
  std::vector<float> in;
  for (uint32_t b = 0; b < 65536; ++b) in.push_back(std::bit_cast<float>(b << 16));
  for (int i = 0; i < 4'000'000; ++i) in.push_back(std::bit_cast<float>(static_cast<uint32_t>(rng())));
  for (float t : {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 6.0f})
    for (float y : {t, std::nextafter(t, 0.0f), std::nextafter(t, 10.0f)}) {
      in.push_back(y);
      in.push_back(-y);
    }
  uint32_t n = static_cast<uint32_t>(in.size());
  float* d_in;
  uint8_t *d_e2, *d_s;
  int* d_compiled;
  CUDA_OK(cudaMalloc(&d_in, n * 4));
  CUDA_OK(cudaMalloc(&d_e2, n));
  CUDA_OK(cudaMalloc(&d_s, n));
  CUDA_OK(cudaMalloc(&d_compiled, 4));
  CUDA_OK(cudaMemset(d_e2, 0xA5, n));  // poison
  CUDA_OK(cudaMemset(d_s, 0xA5, n));
  CUDA_OK(cudaMemset(d_compiled, 0, 4));
  CUDA_OK(cudaMemcpy(d_in, in.data(), n * 4, cudaMemcpyHostToDevice));
  cvt_fp4_ue8m0_kernel<<<(n + 255) / 256, 256>>>(d_in, n, d_e2, d_s, d_compiled);
  CUDA_OK(cudaGetLastError());
  int compiled = 0;
  CUDA_OK(cudaMemcpy(&compiled, d_compiled, 4, cudaMemcpyDeviceToHost));
  std::vector<uint8_t> e2(n), s(n);
  CUDA_OK(cudaMemcpy(e2.data(), d_e2, n, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(s.data(), d_s, n, cudaMemcpyDeviceToHost));
  cudaFree(d_in);
  cudaFree(d_e2);
  cudaFree(d_s);
  cudaFree(d_compiled);
  if (!compiled)
    GTEST_SKIP() << "cvt.rn.satfinite.e2m1x2.f32 / cvt.rp.satfinite.ue8m0x2.f32 need an sm_100a or sm_120a "
                    "build; this binary has no such kernel for the present GPU";
  int printed = 0;
  uint64_t bad = 0;
  for (uint32_t i = 0; i < n; ++i) {
    uint8_t h2 = e2m1_from_f32(in[i]), hs = ue8m0_from_f32(in[i]);
    if (h2 != e2[i] || hs != s[i]) {
      ++bad;
      if (printed++ < 10)
        std::printf("mismatch x=0x%08x: e2m1 host %x gpu %x | ue8m0 host %02x gpu %02x\n",
                    std::bit_cast<uint32_t>(in[i]), h2, e2[i], hs, s[i]);
    }
  }
  EXPECT_EQ(bad, 0u) << "seed " << seed;
}

TEST(PhiloxCuda, DeviceMatchesHost) {
  VORTEX_REQUIRE_GPU();
  std::random_device rd;
  uint64_t seed = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  constexpr uint32_t kN = 1u << 22;
  const float scale = 0.037f, offset = -0.5f;
  float* d_values;
  uint32_t* d_words;
  CUDA_OK(cudaMalloc(&d_values, kN * 4));
  CUDA_OK(cudaMalloc(&d_words, kN * 16));
  CUDA_OK(cudaMemset(d_values, 0xFF, kN * 4));  // poison: NaN
  philox_kernel<<<kN / 256, 256>>>(seed, kN, scale, offset, d_values, d_words);
  CUDA_OK(cudaGetLastError());
  std::vector<float> values(kN);
  std::vector<uint32_t> words(4 * static_cast<size_t>(kN));
  CUDA_OK(cudaMemcpy(values.data(), d_values, kN * 4, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(words.data(), d_words, kN * 16, cudaMemcpyDeviceToHost));
  cudaFree(d_values);
  cudaFree(d_words);
  uint64_t bad = 0;
  for (uint32_t i = 0; i < kN; ++i) {
    float h = synthetic_value(seed, i, scale, offset);
    Philox4x32 r = philox_block(seed ^ 0x5555555555555555ull, 0xFFFFFFF0ull + i);
    bool ok = std::bit_cast<uint32_t>(h) == std::bit_cast<uint32_t>(values[i]) &&
              std::memcmp(r.v, &words[4 * static_cast<size_t>(i)], 16) == 0;
    if (!ok && bad++ < 5) ADD_FAILURE() << "element " << i << ": host " << h << " device " << values[i];
  }
  EXPECT_EQ(bad, 0u) << "seed " << seed;
}

}  // namespace
}  // namespace vortex
