// Device probes of the NVFP4 approximate instructions and encoders (see tools/nvfp4_probes.cu). Used by
// tests/cuda/nvfp4_quantize_test.cu and tools/approx_probe.cu; not part of the library.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "vortex/status.h"

namespace vortex::nvfp4_probes {

// out[m] = bits of rcp.approx.ftz.f32(1 + m * 2^-23), m < 2^23.
Status nvfp4_probe_rcp_binade(uint32_t* out, cudaStream_t stream);
// Exhaustive check of ref::rcp_approx_ftz_model_bits over all 2^32 inputs against the instruction.
// counters (device u64 [2]): [0] += mismatches (NaN == NaN), [1] = one mismatching input + 1 (0: none).
Status nvfp4_check_rcp_model(const uint32_t* binade, unsigned long long* counters, cudaStream_t stream);
// div.approx.ftz.f32(a, b) vs mul_ftz model(a, rcp model(b)) on `pairs` Philox pairs (seed) plus edge
// patterns; mul.rn.ftz.f32 vs the ref::mul_ftz model (flush inputs; tiny after 24-bit rounding -> signed zero)
// on pairs whose products straddle FLT_MIN; the device E2M1 encoders (comparison table and arithmetic on all
// 2^32 inputs, the FP32-pipe encoder on every non-NaN |v| < 7: its domain) vs cuda_fp4.h's
// __nv_cvt_float_to_fp4, both device E4M3 scale decoders on all 256 codes, and the in-domain packed-word encoder
// vs the exact one on `pairs` random in-domain chunks (counted with the e2m1 checks; their input field is then
// 2^32 + code or 2^33 + chunk index). counters (device u64 [6]): div mismatches, one div pair index + 1,
// mul mismatches, one mul pair index + 1, e2m1 mismatches, one e2m1 input + 1 (the index/input fields are 0
// when there is no mismatch).
Status nvfp4_check_div_mul_e2m1(const uint32_t* binade, uint64_t seed, uint64_t pairs, unsigned long long* counters,
                                cudaStream_t stream);

}  // namespace vortex::nvfp4_probes
