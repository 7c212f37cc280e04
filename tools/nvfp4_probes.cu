// Device probes of the approximate instructions and encoders the NVFP4 producers depend on (docs/numerics.md
// "Rules that make E0 possible"): the rcp.approx.ftz.f32 binade table, exhaustive checks of the host models
// (src/ref/nvfp4_quantize.h) against the instructions, and of the device encoders (src/cuda/ops/nvfp4_encode.cuh)
// against cuda_fp4.h. Not part of the library: linked by tests/cuda/nvfp4_quantize_test.cu and
// tools/approx_probe.cu (nvfp4_approx_probe, run by scripts/nvfp4-probe.sh).
#include "tools/nvfp4_probes.h"

#include "core/philox.h"
#include "cuda/check.h"
#include "cuda/ops/nvfp4_encode.cuh"
#include "ref/nvfp4_quantize.h"

namespace vortex::nvfp4_probes {
namespace {

using namespace vortex::cuda_ops;

__global__ void rcp_binade_kernel(uint32_t* out) {
  const uint32_t m = blockIdx.x * blockDim.x + threadIdx.x;
  if (m < ref::kRcpBinadeSize) out[m] = __float_as_uint(rcp_approx_ftz(__uint_as_float(0x3F800000u | m)));
}

__device__ __forceinline__ bool same_result(uint32_t a, uint32_t b) {
  const bool nan_a = (a & 0x7FFFFFFFu) > 0x7F800000u, nan_b = (b & 0x7FFFFFFFu) > 0x7F800000u;
  return nan_a || nan_b ? nan_a && nan_b : a == b;
}
__device__ __forceinline__ void record(unsigned long long* count, unsigned long long* example, uint64_t what) {
  atomicAdd(count, 1ull);
  atomicCAS(example, 0ull, static_cast<unsigned long long>(what) + 1ull);
}
__device__ __forceinline__ float flush_model(float x) { return fabsf(x) < 0x1p-126f ? copysignf(0.0f, x) : x; }
// The host model of mul.rn.ftz (ref::mul_ftz): flush inputs; exact product in FP64; below FLT_MIN it becomes
// +-FLT_MIN when it rounds there on the 24-bit grid (>= FLT_MIN - 2^-151), else a signed zero.
__device__ __forceinline__ float mul_ftz_model(float a, float b) {
  const double exact = __dmul_rn(static_cast<double>(flush_model(a)), static_cast<double>(flush_model(b)));
  if (!(fabs(exact) < 0x1p-126)) return __double2float_rn(exact);
  const float sign = copysignf(1.0f, __double2float_rn(exact));
  return fabs(exact) >= 0x1p-126 - 0x1p-151 ? sign * 0x1p-126f : sign * 0.0f;
}

__global__ void rcp_check_kernel(const uint32_t* binade, unsigned long long* counters) {
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < (uint64_t{1} << 32);
       i += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    const uint32_t x = static_cast<uint32_t>(i);
    const uint32_t hw = __float_as_uint(rcp_approx_ftz(__uint_as_float(x)));
    if (!same_result(hw, ref::rcp_approx_ftz_model_bits(x, binade))) record(&counters[0], &counters[1], x);
  }
}

__device__ __forceinline__ uint32_t moderate(uint32_t w) {  // exponent field in [100, 154], random sign/mantissa
  return (w & 0x807FFFFFu) | ((100u + (w >> 23) % 55u) << 23);
}

__global__ void div_mul_e2m1_check_kernel(const uint32_t* binade, uint64_t seed, uint64_t pairs,
                                          unsigned long long* counters) {
  constexpr uint32_t kSpecial[] = {0x00000000u, 0x80000000u, 0x00000001u, 0x007FFFFFu, 0x00800000u, 0x3F800000u,
                                   0x40C00000u, 0x7E800000u, 0x7EC00000u, 0x7F000000u, 0x7F7FFFFFu, 0x7F800000u,
                                   0xFF800000u, 0x7FC00000u, 0x00800001u, 0x3E2AAAABu};
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  const uint64_t first = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x;
  for (uint64_t i = first; i < pairs; i += stride) {
    const Philox4x32 w = philox_block(seed, i);
    uint32_t a = w.v[0], b = w.v[1];
    switch (i % 4) {
      case 1:
        a = moderate(a);
        break;
      case 2:
        a = moderate(a);
        b = moderate(b);
        break;
      case 3:
        b = kSpecial[w.v[2] % 16] ^ (w.v[3] & 0x80000000u);
        break;
      default:
        break;
    }
    const float fa = __uint_as_float(a), fb = __uint_as_float(b);
    const float hw = div_approx_ftz(fa, fb);
    const float model = mul_ftz_model(fa, __uint_as_float(ref::rcp_approx_ftz_model_bits(b, binade)));
    if (!same_result(__float_as_uint(hw), __float_as_uint(model))) record(&counters[0], &counters[1], i);
    // mul.ftz near the FLT_MIN boundary: a = 2^-63 * (1 + m), b = FLT_MIN / a +- 8 ulps, random signs.
    const float ma = __uint_as_float((64u << 23) | (w.v[2] & 0x7FFFFFu) | (w.v[3] & 0x80000000u));
    const float mb = __uint_as_float(__float_as_uint(__fdiv_rn(0x1p-126f, fabsf(ma))) + (w.v[3] & 15u) - 8u) *
                     ((w.v[3] & 0x40000000u) ? -1.0f : 1.0f);
    if (!same_result(__float_as_uint(mul_ftz(ma, mb)), __float_as_uint(mul_ftz_model(ma, mb))))
      record(&counters[2], &counters[3], i);
  }
  for (uint64_t i = first; i < (uint64_t{1} << 32); i += stride) {
    const float x = __uint_as_float(static_cast<uint32_t>(i));
    const uint32_t want = __nv_cvt_float_to_fp4(x, __NV_E2M1, cudaRoundNearest) & 0xFu;
    bool bad = e2m1_code(x) != want || e2m1_code_arith(x) != want;
    if (fabsf(x) < 7.0f) {  // the FP32-pipe encoder's domain (false for NaN), both magic offsets
      const uint32_t sign = (static_cast<uint32_t>(i) >> 28) & 0x8u;
      bad = bad || (sign | (e2m1_code_fma(x, kMagicLo) - 0x4B000000u)) != want ||
            (sign | (e2m1_code_fma(x, kMagicHi) - 0x4B500000u)) != want;
    }
    if (bad) record(&counters[4], &counters[5], i);
  }
  // E4M3 scale decoders on all 256 codes (input field 2^32 + code).
  if (first < 256 && !same_result(__float_as_uint(e4m3_value(static_cast<uint8_t>(first))),
                                  __float_as_uint(e4m3_value_cvt(static_cast<uint8_t>(first)))))
    record(&counters[4], &counters[5], (uint64_t{1} << 32) + first);
  // Packed words: encode8_in_domain == encode8_exact wherever the pack kernel takes the fast branch, on random chunks
  // of bf16 with exponents 2^-7 .. 2^2 and e from 0.5 to 1 times 7 / max|x| (input field 2^33 + pair index).
  for (uint64_t i = first; i < pairs; i += stride) {
    const Philox4x32 w = philox_block(seed ^ 0x5EED5EEDull, i), m = philox_block(seed ^ 0xE2E2E2E2ull, i);
    uint32_t q[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {  // two bf16 per word: sign, exponent 120 + (0..9), 7 mantissa bits
      const uint32_t lo = (w.v[k] & 0x807Fu) | ((120u + (w.v[k] >> 16) % 10u) << 7);
      const uint32_t hi = ((m.v[k] & 0x807Fu) | ((120u + (m.v[k] >> 16) % 10u) << 7)) << 16;
      q[k] = hi | lo;
    }
    const uint4 v = make_uint4(q[0], q[1], q[2], q[3]);
    float a = 0.0f;
    for (int k = 0; k < 4; ++k)
      a = fmaxf(a, fmaxf(fabsf(__uint_as_float(q[k] << 16)), fabsf(__uint_as_float(q[k] & 0xFFFF0000u))));
    const float e = __fdiv_rn(7.0f, a) * (0.5f + 0.5f * static_cast<float>(w.v[0] & 0xFFFFu) * 0x1p-16f);
    if (e > 0.0f && mul_ftz(e, a) < 7.0f && encode8_in_domain(v, e) != encode8_exact(v, e))
      record(&counters[4], &counters[5], (uint64_t{1} << 33) + i);
  }
}

}  // namespace

Status nvfp4_probe_rcp_binade(uint32_t* out, cudaStream_t stream) {
  rcp_binade_kernel<<<ref::kRcpBinadeSize / 256, 256, 0, stream>>>(out);
  VORTEX_CUDA_LAUNCH_CHECK("rcp_binade_kernel");
  return Status::Ok();
}

Status nvfp4_check_rcp_model(const uint32_t* binade, unsigned long long* counters, cudaStream_t stream) {
  VORTEX_CUDA_CHECK(cudaMemsetAsync(counters, 0, 2 * sizeof(unsigned long long), stream));
  rcp_check_kernel<<<8192, 256, 0, stream>>>(binade, counters);
  VORTEX_CUDA_LAUNCH_CHECK("rcp_check_kernel");
  return Status::Ok();
}

Status nvfp4_check_div_mul_e2m1(const uint32_t* binade, uint64_t seed, uint64_t pairs, unsigned long long* counters,
                                cudaStream_t stream) {
  VORTEX_CUDA_CHECK(cudaMemsetAsync(counters, 0, 6 * sizeof(unsigned long long), stream));
  div_mul_e2m1_check_kernel<<<8192, 256, 0, stream>>>(binade, seed, pairs, counters);
  VORTEX_CUDA_LAUNCH_CHECK("div_mul_e2m1_check_kernel");
  return Status::Ok();
}

}  // namespace vortex::nvfp4_probes
