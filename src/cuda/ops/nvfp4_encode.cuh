// NVFP4 device encoders (comfy-kitchen's recipe, src/ref/nvfp4_quantize.h), shared by the producer kernels
// (nvfp4_quantize_kernels.cu) and the instruction probes (tools/nvfp4_probes.cu): the approximate instructions
// pinned with inline PTX (.approx.ftz as comfy-kitchen's fast-math build emits them), the E4M3 scale code and
// decoders, the E2M1 encoders (decision table, arithmetic, FP32-pipe), the per-block quantizers and g from amax.
// Every encoder is checked on the GPU against cuda_fp4.h / the host models on all 2^32 inputs
// (tests/cuda/nvfp4_quantize_test.cu through the probes); the producers built on them are E0 vs src/ref.
#pragma once

#include <cuda_fp16.h>
#include <cuda_fp4.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "cuda/ops/common.cuh"

namespace vortex::cuda_ops {

constexpr float kInv2688 = 0x1.861862p-12f;  // 0x39C30C31 = RN_f32(1/2688)

// ---- pinned instructions ------------------------------------------------------------------------------
__device__ __forceinline__ float rcp_approx_ftz(float x) {
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}
__device__ __forceinline__ float div_approx_ftz(float a, float b) {
  float r;
  asm("div.approx.ftz.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}
__device__ __forceinline__ float mul_ftz(float a, float b) {
  float r;
  asm("mul.rn.ftz.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}
__device__ __forceinline__ float min_ftz(float a, float b) {
  float r;
  asm("min.ftz.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}
// cvt.rn.satfinite.e4m3x2.f32 (sm_89+): RNE, saturate to 448, NaN -> 0x7F.
__device__ __forceinline__ uint8_t e4m3_code(float d) {
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(d, __NV_SATFINITE, __NV_E4M3));
}
// Exact E4M3 decode (positive codes; 0x7F/0xFF are NaN).
__device__ __forceinline__ float e4m3_value(uint8_t s) {
  const int exponent = (s >> 3) & 15, mantissa = s & 7;
  float v;
  if ((s & 0x7F) == 0x7F) v = __int_as_float(0x7FFFFFFF);
  else if (exponent == 0) v = static_cast<float>(mantissa) * 0x1p-9f;
  else v = __int_as_float(((exponent + 120) << 23) | (mantissa << 20));
  return (s & 0x80) ? -v : v;
}
// The same value through the hardware conversions (cvt.rn.f16x2.e4m3x2, exact, then f16 -> f32, exact): fewer
// integer instructions; equal to e4m3_value on all 256 codes (NaN codes give NaN; checked on the GPU by
// nvfp4_check_div_mul_e2m1).
__device__ __forceinline__ float e4m3_value_cvt(uint8_t s) {
  return __half2float(__half(__nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(s), __NV_E4M3)));
}
// E2M1 RNE satfinite, sign kept on zero, NaN -> 0x7: the decision table of §1.5 (equal to cuda_fp4.h's
// conversion on all 2^32 inputs: the E2M1 probe).
__device__ __forceinline__ uint32_t e2m1_code(float v) {
  if (v != v) return 0x7u;
  const uint32_t sign = (__float_as_uint(v) >> 28) & 0x8u;
  const float a = fabsf(v);
  const uint32_t c = a <= 0.25f   ? 0u
                     : a < 0.75f  ? 1u
                     : a <= 1.25f ? 2u
                     : a < 1.75f  ? 3u
                     : a <= 2.5f  ? 4u
                     : a < 3.5f   ? 5u
                     : a <= 5.0f  ? 6u
                                  : 7u;
  return sign | c;
}

// The same E2M1 code by arithmetic (fewer instructions than the 7-comparison table; the main path uses it):
// a = |v|, k = clamp(exponent(a), 0, 2), M = 2^(22 + k) has ulp 2^(k - 1), the grid step of E2M1 on
// [0, 2), [2, 4), [4, 8); fadd.rn(a, M) rounds a to that grid with ties to even, and the grid index n plus 2k is
// the code (saturated at 7). NaN -> 0x7 without sign. Equal to e2m1_code on all 2^32 inputs (checked on the GPU by
// nvfp4_check_div_mul_e2m1's E2M1 sweep against cuda_fp4.h, and on the host when written).
__device__ __forceinline__ uint32_t e2m1_code_arith(float v) {
  const uint32_t u = __float_as_uint(v), ua = u & 0x7FFFFFFFu;
  const uint32_t sign = ua > 0x7F800000u ? 0u : (u >> 28) & 0x8u;
  const int k = min(max(static_cast<int>(ua >> 23) - 127, 0), 2);
  const uint32_t mb = static_cast<uint32_t>(149 + k) << 23;  // bits of 2^(22 + k)
  const uint32_t n = __float_as_uint(__fadd_rn(__uint_as_float(ua), __uint_as_float(mb))) - mb;
  return sign | min(n + 2u * static_cast<uint32_t>(k), 7u);
}

// One 16-element block (bf16 bits) -> scale byte + 8 packed bytes (as two u32, byte order = memory order).
__device__ __forceinline__ uint8_t quantize_block(const uint16_t (&x)[16], float g, uint32_t (&packed)[2]) {
  int amax = -1;  // |x| max in bf16 with NaN-suppressing max (max.bf16); all-NaN -> NaN
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    const int mag = x[i] & 0x7FFF;
    amax = (mag <= 0x7F80 && mag > amax) ? mag : amax;
  }
  const float a = amax < 0 ? __int_as_float(0x7FFFFFFF) : bf16_to_f32(static_cast<uint16_t>(amax));
  const float d = min_ftz(div_approx_ftz(div_approx_ftz(a, 6.0f), g), 448.0f);
  const uint8_t s = e4m3_code(d);
  const float e = min_ftz(rcp_approx_ftz(mul_ftz(g, e4m3_value(s))), 0x1.fffffep127f);
#pragma unroll
  for (int w = 0; w < 2; ++w) {
    uint32_t word = 0;
#pragma unroll
    for (int k = 0; k < 4; ++k) {  // byte k of the word = elements 8w + 2k (high nibble), 8w + 2k + 1
      const uint32_t hi = e2m1_code(mul_ftz(e, bf16_to_f32(x[8 * w + 2 * k])));
      const uint32_t lo = e2m1_code(mul_ftz(e, bf16_to_f32(x[8 * w + 2 * k + 1])));
      word |= ((hi << 4) | lo) << (8 * k);
    }
    packed[w] = word;
  }
  return s;
}

// g = float(bf16_RNE(fp32(amax) * RN(1/2688))) (§1.2).
__device__ __forceinline__ float global_scale_from_amax(uint32_t a) {
  const float af = a > 0x7F80u ? __int_as_float(0x7FFFFFFF) : bf16_to_f32(static_cast<uint16_t>(a));
  return round_bf16(__fmul_rn(af, kInv2688));
}

// ---- E2M1 codes on the FP32 pipe (the main path's encoder) ----------------------------------------------
// Why: with e2m1_code_arith (~15 integer ops per element) the pack ran ~155 of ~235 instructions per lane and
// 16-byte chunk on the integer ALU pipe (half the issue rate): ALU-issue bound at ~60% of copy bandwidth
// (benchmarks/2026-11-29-h200-s8/run5-nvfp4-producer-variants.txt). Here, for |p| < 7 (p = e x),
//   code(|p|) = min(RN(2|p| + M), RN(|p| + M + 2), RN(|p|/2 + M + 4)) - M,   M = 2^23 (+ an even offset):
// the E2M1 grid is the code-space line 2a on [0, 2], a + 2 on [2, 4], a/2 + 4 on [4, 6] (a concave min); RN(y + M)
// = M + rint(y) with ties to even (M even), rint commutes with min, so this is the §1.5 decision table for every
// |p| < 7 (checked exhaustively on the host, and on the GPU by the E2M1 probe). Per element: FMUL + 3
// FFMA/FADD (FP32 pipe, full rate) + one 3-input integer min; the two codes of a byte and the four bytes combine
// with IMADs (the magic offsets cancel mod 2^32), the 8 sign bits come from the bf16 inputs with 4 PRMT + 2 LOP3
// (sign(p) = sign(x) when e > 0). Blocks outside that domain (a NaN/inf input, e <= 0 or NaN, max |p| >= 7, i.e.
// saturating or zero scales) take the exact per-element path (NaN-suppressing amax, e2m1_code_arith): the same
// bytes on every input.
constexpr float kMagicLo = 0x1p23f;    // bits 0x4B000000; RN(y + 2^23) = 2^23 + rint(y) for 0 <= y < 2^22
constexpr float kMagicHi = 0x1.Ap23f;  // bits 0x4B500000 (2^23 + 0x500000, even): 16 * 0x4B500000 + 0x4B000000 = 2^32

__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t selector) {
  uint32_t r;  // selector nibble bit 3 set: replicate the selected byte's top bit (generic prmt mode)
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(selector));
  return r;
}

// bits(m) + the E2M1 magnitude code of p, for non-NaN |p| < 7 (p already FTZ), m = kMagicLo or kMagicHi.
__device__ __forceinline__ uint32_t e2m1_code_fma(float p, float m) {
  const float a = fabsf(p);
  return __vimin3_u32(__float_as_uint(__fmaf_rn(a, 2.0f, m)), __float_as_uint(__fadd_rn(a, m + 2.0f)),
                      __float_as_uint(__fmaf_rn(a, 0.5f, m + 4.0f)));
}

// 8 elements (bf16 bits; element i = half i of v) -> 4 packed bytes, byte k = code(2k) << 4 | code(2k + 1).
// Exact: every element encoded like e2m1_code_arith(mul_ftz(e, x)) for non-NaN x.
__device__ __forceinline__ uint32_t encode8_exact(const uint4& v, float e) {
  const uint16_t* x = reinterpret_cast<const uint16_t*>(&v);
  uint32_t word = 0;
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const uint32_t hi = e2m1_code_arith(mul_ftz(e, bf16_to_f32(x[2 * k])));
    const uint32_t lo = e2m1_code_arith(mul_ftz(e, bf16_to_f32(x[2 * k + 1])));
    word |= ((hi << 4) | lo) << (8 * k);
  }
  return word;
}

// The same word when e > 0, max |e * x| < 7 and no x is NaN (the caller checks): FP32-pipe codes, signs from x.
__device__ __forceinline__ uint32_t encode8_in_domain(const uint4& v, float e) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
  uint32_t word = 0;
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const uint32_t hi = e2m1_code_fma(mul_ftz(e, __uint_as_float(w[k] << 16)), kMagicHi);          // element 2k
    const uint32_t lo = e2m1_code_fma(mul_ftz(e, __uint_as_float(w[k] & 0xFFFF0000u)), kMagicLo);  // 2k + 1
    word += (hi * 16u + lo) << (8 * k);  // hi * 16 + lo = byte k exactly (mod 2^32)
  }
  // Sign of element 2k = bit 15 of w[k] -> bit 8k + 7; of element 2k + 1 = bit 31 -> bit 8k + 3.
  const uint32_t sa = prmt(v.x, v.y, 0xFBD9u), sb = prmt(v.z, v.w, 0xFBD9u);  // [s0 s2 s1 s3], [s4 s6 s5 s7] x 0xFF
  word |= prmt(sa, sb, 0x5410u) & 0x80808080u;                                // s0 s2 s4 s6
  word |= prmt(sa, sb, 0x7632u) & 0x08080808u;                                // s1 s3 s5 s7
  return word;
}

// One 16-byte chunk (half a block; lanes 2i and 2i + 1 hold one block) -> 4 data bytes and the block's scale
// byte (0 for padding blocks). All 32 lanes call it together; the branch is warp-uniform (the exact path is
// right for every block, the fast one only inside its domain), so its shuffle needs no partial mask.
__device__ __forceinline__ uint32_t quantize_half_block_fma(const uint4& v, float g, bool block_valid,
                                                            uint32_t& scale_byte) {
  constexpr uint32_t kAbs = 0x7FFF7FFFu;
  uint32_t m2 = __vmaxu2(__vimax3_u16x2(v.x & kAbs, v.y & kAbs, v.z & kAbs), v.w & kAbs);
  m2 = __vmaxu2(m2, __shfl_xor_sync(0xFFFFFFFFu, m2, 1));   // the whole block
  const uint32_t a_bits = max(m2 << 16, m2 & 0xFFFF0000u);  // max |x| as fp32 bits; a NaN magnitude is largest
  float a = __uint_as_float(a_bits);
  float d = min_ftz(div_approx_ftz(div_approx_ftz(a, 6.0f), g), 448.0f);
  uint8_t s = e4m3_code(d);
  float e = min_ftz(rcp_approx_ftz(mul_ftz(g, e4m3_value_cvt(s))), 0x1.fffffep127f);
  uint32_t word;
  if (__all_sync(0xFFFFFFFFu, a_bits < 0x7F800000u && e > 0.0f && mul_ftz(e, a) < 7.0f)) {
    word = encode8_in_domain(v, e);  // no NaN/inf input: a is the NaN-suppressing amax, |e x| <= e a < 7
  } else {
    // Exact path. A NaN input: amax over the non-NaN magnitudes (max.bf16), -1 when all 16 are NaN.
    const uint16_t* x = reinterpret_cast<const uint16_t*>(&v);
    int amax = -1;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int mag = x[i] & 0x7FFF;
      amax = (mag <= 0x7F80 && mag > amax) ? mag : amax;
    }
    amax = max(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, 1));
    a = amax < 0 ? __int_as_float(0x7FFFFFFF) : bf16_to_f32(static_cast<uint16_t>(amax));
    d = min_ftz(div_approx_ftz(div_approx_ftz(a, 6.0f), g), 448.0f);
    s = e4m3_code(d);
    e = min_ftz(rcp_approx_ftz(mul_ftz(g, e4m3_value_cvt(s))), 0x1.fffffep127f);
    word = encode8_exact(v, e);
  }
  scale_byte = block_valid ? s : 0u;
  return word;
}

}  // namespace vortex::cuda_ops
