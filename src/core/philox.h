// Philox4x32-10 (Salmon et al., SC'11): a counter-based generator. The same (key, counter) gives the
// same 128 bits on the host and on the GPU, independent of thread count or launch shape, which is
// what makes synthetic weights and noise identical across backends. Header-only, host + device.
// Known-answer vectors from the Random123 distribution are checked in tests/core/rng_test.cpp.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define VORTEX_HD __host__ __device__ __forceinline__
#else
#define VORTEX_HD inline
#endif

namespace vortex {

struct Philox4x32 {
  uint32_t v[4];
};

VORTEX_HD void philox_mulhilo(uint32_t a, uint32_t b, uint32_t& hi, uint32_t& lo) {
  uint64_t p = static_cast<uint64_t>(a) * b;
  hi = static_cast<uint32_t>(p >> 32);
  lo = static_cast<uint32_t>(p);
}

// 10 rounds of Philox4x32 on counter `ctr` with key `key`.
VORTEX_HD Philox4x32 philox4x32_10(Philox4x32 ctr, uint32_t key0, uint32_t key1) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, lo0, hi1, lo1;
    philox_mulhilo(kM0, ctr.v[0], hi0, lo0);
    philox_mulhilo(kM1, ctr.v[2], hi1, lo1);
    Philox4x32 next;
    next.v[0] = hi1 ^ ctr.v[1] ^ key0;
    next.v[1] = lo1;
    next.v[2] = hi0 ^ ctr.v[3] ^ key1;
    next.v[3] = lo0;
    ctr = next;
    key0 += kW0;
    key1 += kW1;
  }
  return ctr;
}

// Four 32-bit words for element group `index` of stream `seed`.
VORTEX_HD Philox4x32 philox_block(uint64_t seed, uint64_t index) {
  Philox4x32 ctr{{static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32), 0u, 0u}};
  return philox4x32_10(ctr, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
}

// Exact uniform in [-1, 1): (top 24 bits - 2^23) * 2^-23. Every step is exact in FP32.
VORTEX_HD float uniform_pm1_from_bits(uint32_t bits) {
  return static_cast<float>(static_cast<int32_t>(bits >> 8) - (1 << 23)) * (1.0f / 8388608.0f);
}

// offset + scale * u(word), each step rounded once in FP32 (no FMA).
VORTEX_HD float synthetic_value_from_word(uint32_t word, float scale, float offset) {
  float u = uniform_pm1_from_bits(word);
#if defined(__CUDA_ARCH__)
  return __fadd_rn(__fmul_rn(scale, u), offset);
#else
  volatile float p = scale * u;  // volatile: forbid contraction into an FMA
  return p + offset;
#endif
}

// Synthetic value for element `index`: word index % 4 of Philox block index / 4, through
// synthetic_value_from_word. Fills that walk whole blocks call synthetic_value_from_word on each word.
VORTEX_HD float synthetic_value(uint64_t seed, uint64_t index, float scale, float offset) {
  Philox4x32 r = philox_block(seed, index >> 2);
  return synthetic_value_from_word(r.v[index & 3], scale, offset);
}

}  // namespace vortex
