// Sage2 quantization pre-pass on the GPU: K token mean (canonical FP64 order) and V channel amax,
// Q/K INT8 with Sage2 SM90 per-thread groups, V^T per-channel FP8 E4M3 — reading the strided Q/K/V
// views of the [S, 3*7168] QKV buffer directly, writing the layouts the sm90 mainloop loads.
// Every FP operation is the correctly rounded form the CPU reference (src/ref/sage2_attention.cpp)
// uses, so bytes and scales are E0; checked in tests/attention/sage2_sm90_test.cpp. Split as sage2_quantize_q and
// sage2_quantize_kv so qk_norm_rope_sage2 (src/cuda/ops) can write Q in the norm pass and leave K/V to the K/V half.
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <string>

#include "cuda/attention/sage2_attention.h"
#include "cuda/attention/sage2_quantize.cuh"
#include "cuda/check.h"
#include "ref/sage2_attention.h"

namespace vortex {
namespace {

constexpr int kD = kSage2HeadDim;

// ---- kernels -------------------------------------------------------------------------------------

// Per (chunk of 256 tokens, head): FP64 sum of K and amax of |V| per channel, tokens ascending.
// Thread c owns channel c. k_sum [H, chunks, 128] fp64, v_amax [H, chunks, 128] fp32.
__global__ void __launch_bounds__(kD)
    sage2_k_sum_v_amax_kernel(const __nv_bfloat16* __restrict__ k, int64_t k_stride,
                              const __nv_bfloat16* __restrict__ v, int64_t v_stride, int64_t seq, int chunks,
                              double* __restrict__ k_sum, float* __restrict__ v_amax) {
  const int chunk = blockIdx.x, h = blockIdx.y, c = threadIdx.x;
  const int64_t s0 = static_cast<int64_t>(chunk) * kSage2MeanChunk;
  const int64_t s1 = min(seq, s0 + kSage2MeanChunk);
  double sum = 0.0;
  float amax = 0.0f;
  for (int64_t s = s0; s < s1; ++s) {
    sum += static_cast<double>(__bfloat162float(k[s * k_stride + h * kD + c]));
    amax = fmaxf(amax, fabsf(__bfloat162float(v[s * v_stride + h * kD + c])));
  }
  const int64_t o = (static_cast<int64_t>(h) * chunks + chunk) * kD + c;
  k_sum[o] = sum;
  v_amax[o] = amax;
}

// Per head: k_mean = bf16_rn(sum / S) (FP64, chunks ascending); v amax floored, v_scale = amax/448,
// v_mult = 448/amax (FP32, correctly rounded).
__global__ void __launch_bounds__(kD)
    sage2_k_mean_v_scale_kernel(const double* __restrict__ k_sum, const float* __restrict__ v_amax, int64_t seq,
                                int chunks, uint16_t* __restrict__ k_mean, float* __restrict__ v_scale,
                                float* __restrict__ v_mult) {
  const int h = blockIdx.x, c = threadIdx.x;
  double total = 0.0;
  float amax = 0.0f;
  for (int i = 0; i < chunks; ++i) {
    const int64_t o = (static_cast<int64_t>(h) * chunks + i) * kD + c;
    total += k_sum[o];
    amax = fmaxf(amax, v_amax[o]);
  }
  const __nv_bfloat16 mean = __double2bfloat16(total / static_cast<double>(seq));
  k_mean[h * kD + c] = __bfloat16_as_ushort(mean);
  amax = fmaxf(amax, kSage2VAmaxFloor);
  v_scale[h * kD + c] = __fdiv_rn(amax, kSage2Fp8Max);
  v_mult[h * kD + c] = __fdiv_rn(kSage2Fp8Max, amax);
}

// Q (kIsK = false) or K (kIsK = true) to INT8 for one 128-row tile of one head; thread = row.
// Q groups: rows {r, r+8} of each 16-row slab (64 per tile); K groups: rows with (row mod 8)/2 = t
// (4 per tile = one 128-key block). K is bf16_rn(k - k_mean) first. kTiled = false: output rows
// permuted over the head dim by sage2_qk_byte_pos (mma.sync mainloop); true: natural head-dim order
// in sage2_tiled_pos core matrices (wgmma mainloop). Rows >= seq are written as zeros.
template <bool kIsK, bool kTiled>
__global__ void __launch_bounds__(128)
    sage2_quant_int8_kernel(const __nv_bfloat16* __restrict__ x, int64_t x_stride, int64_t seq, int64_t padded,
                            const uint16_t* __restrict__ k_mean, int8_t* __restrict__ out, float* __restrict__ scales) {
  __shared__ unsigned int group_amax[64];
  const int tile = blockIdx.x, h = blockIdx.y, tid = threadIdx.x;
  const int64_t row = static_cast<int64_t>(tile) * 128 + tid;
  const int group = kIsK ? (tid % 8) / 2 : (tid / 16) * 8 + (tid % 8);
  if (tid < 64) group_amax[tid] = 0u;
  __syncthreads();

  float vals[kD];  // [128] fp32 values of this row (K: after smoothing)
  if (row < seq) {
    const uint4* src = reinterpret_cast<const uint4*>(x + row * x_stride + h * kD);
#pragma unroll
    for (int i = 0; i < kD / 8; ++i) {
      const uint4 w = src[i];
      const uint32_t words[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        vals[i * 8 + 2 * j] = __uint_as_float(words[j] << 16);
        vals[i * 8 + 2 * j + 1] = __uint_as_float(words[j] & 0xFFFF0000u);
      }
    }
    if constexpr (kIsK) {
#pragma unroll
      for (int c = 0; c < kD; ++c) {
        const float mean = __uint_as_float(static_cast<uint32_t>(k_mean[h * kD + c]) << 16);
        vals[c] = __bfloat162float(__float2bfloat16_rn(__fsub_rn(vals[c], mean)));
      }
    }
  } else {
#pragma unroll
    for (int c = 0; c < kD; ++c) vals[c] = 0.0f;
  }
  float amax = 0.0f;
#pragma unroll
  for (int c = 0; c < kD; ++c) amax = fmaxf(amax, fabsf(vals[c]));
  atomicMax(&group_amax[group], __float_as_uint(amax));  // non-negative floats order as integers
  __syncthreads();
  const float scale = sage2_int8_scale(__uint_as_float(group_amax[group]));

  uint32_t packed[kD / 4];
#pragma unroll
  for (int i = 0; i < kD / 4; ++i) packed[i] = 0u;
  if (row < seq) {
#pragma unroll
    for (int c = 0; c < kD; ++c) {
      const int pos = kTiled ? c : sage2_qk_byte_pos(c);
      packed[pos / 4] |= static_cast<uint32_t>(static_cast<uint8_t>(sage2_int8(vals[c], scale))) << (8 * (pos % 4));
    }
  }
  int8_t* head_out = out + static_cast<int64_t>(h) * padded * kD;
#pragma unroll
  for (int i = 0; i < kD / 16; ++i) {
    // 16-byte chunk i of the row: contiguous in both layouts.
    const int64_t at = kTiled ? sage2_tiled_pos(row, 16 * i) : row * kD + 16 * i;
    *reinterpret_cast<uint4*>(head_out + at) =
        make_uint4(packed[4 * i], packed[4 * i + 1], packed[4 * i + 2], packed[4 * i + 3]);
  }

  if constexpr (kIsK) {
    if (tid < 8 && tid % 2 == 0)  // one writer per group t = tid/2
      scales[(static_cast<int64_t>(h) * (padded / kSage2BlockK) + tile) * kSage2KGroupsPerBlock + tid / 2] = scale;
  } else {
    if (tid % 16 < 8)
      scales[(static_cast<int64_t>(h) * (padded / kSage2SlabQ) + tile * 8 + tid / 16) * kSage2QGroupsPerSlab +
             tid % 8] = scale;
  }
}

// V^T to FP8 for one 128-token block of one head: thread = channel. kTiled: the block's keys at
// sage2_v_slot_pos in sage2_tiled_v_pos core matrices (wgmma mainloop); otherwise a channel row with
// the keys at sage2_v_byte_pos (mma.sync mainloop). Tokens >= seq are zeros.
template <bool kTiled>
__global__ void __launch_bounds__(128)
    sage2_quant_v_kernel(const __nv_bfloat16* __restrict__ v, int64_t v_stride, int64_t seq, int64_t padded,
                         const float* __restrict__ v_mult, uint8_t* __restrict__ out) {
  __shared__ __align__(16) __nv_bfloat16 tile_bf16[128][kD];  // [128 tokens, 128 ch] bf16
  const int tile = blockIdx.x, h = blockIdx.y, tid = threadIdx.x;
  for (int i = tid; i < 128 * kD / 8; i += 128) {
    const int tok = i / (kD / 8), part = i % (kD / 8);
    const int64_t s = static_cast<int64_t>(tile) * 128 + tok;
    uint4 w = make_uint4(0u, 0u, 0u, 0u);
    if (s < seq) w = reinterpret_cast<const uint4*>(v + s * v_stride + h * kD)[part];
    reinterpret_cast<uint4*>(&tile_bf16[tok][0])[part] = w;
  }
  __syncthreads();
  const float mult = v_mult[h * kD + tid];
  uint32_t packed[32];
#pragma unroll
  for (int i = 0; i < 32; ++i) packed[i] = 0u;
#pragma unroll
  for (int tok = 0; tok < 128; ++tok) {
    const float x = __fmul_rn(__bfloat162float(tile_bf16[tok][tid]), mult);
    const uint32_t b = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
    const int pos = kTiled ? sage2_v_slot_pos(tok) : sage2_v_byte_pos(tok);
    packed[pos / 4] |= b << (8 * (pos % 4));
  }
  uint8_t* head_out = out + static_cast<int64_t>(h) * kD * padded;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int64_t at = kTiled ? static_cast<int64_t>(tile) * 16384 + sage2_tiled_pos(tid, 16 * i)
                              : static_cast<int64_t>(tid) * padded + static_cast<int64_t>(tile) * 128 + 16 * i;
    *reinterpret_cast<uint4*>(head_out + at) =
        make_uint4(packed[4 * i], packed[4 * i + 1], packed[4 * i + 2], packed[4 * i + 3]);
  }
}

// ---- validation ------------------------------------------------------------------------------------

Status validate_view(const Tensor& t, const char* name, int64_t seq, int heads) {
  const std::string n = name;
  if (!t.defined()) return invalid_argument("sage2: " + n + " is undefined");
  if (t.device() != Device::kCuda)
    return invalid_argument("sage2: " + n + " must be a CUDA tensor, got " + t.describe());
  if (t.dtype() != DType::kBF16) return invalid_argument("sage2: " + n + " must be bf16, got " + t.describe());
  if (t.ndim() != 2) return invalid_argument("sage2: " + n + " must be 2-D [S, heads*128], got " + t.describe());
  if (t.dim(0) != seq)
    return invalid_argument("sage2: " + n + " has " + std::to_string(t.dim(0)) + " rows, q has " + std::to_string(seq));
  if (t.dim(1) < static_cast<int64_t>(heads) * kD)
    return invalid_argument("sage2: " + n + " " + t.describe() +
                            " is narrower than heads*128 = " + std::to_string(heads * kD));
  if (t.stride(1) != 1) return invalid_argument("sage2: " + n + " needs unit column stride, got " + t.describe());
  if (t.stride(0) % 8 != 0 || t.stride(0) < t.dim(1))
    return invalid_argument("sage2: " + n + " row stride " + std::to_string(t.stride(0)) +
                            " must be >= its width and a multiple of 8 elements (16-byte rows)");
  if (reinterpret_cast<uintptr_t>(t.raw_data()) % 16 != 0)
    return invalid_argument("sage2: " + n + " data must be 16-byte aligned (view offset is not)");
  return Status::Ok();
}

// K mean / V scale reductions, then K INT8 and V FP8 into ws (already reserved for heads x seq).
Status launch_quantize_kv(const Tensor& k, const Tensor& v, int heads, cudaStream_t stream, Sage2Workspace& ws) {
  const int64_t seq = ws.seq, padded = ws.padded;
  const int chunks = static_cast<int>((seq + kSage2MeanChunk - 1) / kSage2MeanChunk);
  const int tiles = static_cast<int>(padded / 128);
  const auto* kp = static_cast<const __nv_bfloat16*>(k.raw_data());
  const auto* vp = static_cast<const __nv_bfloat16*>(v.raw_data());
  sage2_k_sum_v_amax_kernel<<<dim3(chunks, heads), kD, 0, stream>>>(kp, k.stride(0), vp, v.stride(0), seq, chunks,
                                                                    ws.k_partial_sum, ws.v_partial_amax);
  VORTEX_CUDA_LAUNCH_CHECK("sage2_k_sum_v_amax_kernel");
  sage2_k_mean_v_scale_kernel<<<heads, kD, 0, stream>>>(ws.k_partial_sum, ws.v_partial_amax, seq, chunks, ws.k_mean,
                                                        ws.v_scale, ws.v_mult);
  VORTEX_CUDA_LAUNCH_CHECK("sage2_k_mean_v_scale_kernel");
  if (sage2_tiled_layout(ws.mainloop)) {
    sage2_quant_int8_kernel<true, true>
        <<<dim3(tiles, heads), 128, 0, stream>>>(kp, k.stride(0), seq, padded, ws.k_mean, ws.k_int8, ws.k_scale);
    VORTEX_CUDA_LAUNCH_CHECK("sage2_quant_int8_kernel<K, tiled>");
    sage2_quant_v_kernel<true>
        <<<dim3(tiles, heads), 128, 0, stream>>>(vp, v.stride(0), seq, padded, ws.v_mult, ws.v_fp8);
    VORTEX_CUDA_LAUNCH_CHECK("sage2_quant_v_kernel<tiled>");
  } else {
    sage2_quant_int8_kernel<true, false>
        <<<dim3(tiles, heads), 128, 0, stream>>>(kp, k.stride(0), seq, padded, ws.k_mean, ws.k_int8, ws.k_scale);
    VORTEX_CUDA_LAUNCH_CHECK("sage2_quant_int8_kernel<K>");
    sage2_quant_v_kernel<false>
        <<<dim3(tiles, heads), 128, 0, stream>>>(vp, v.stride(0), seq, padded, ws.v_mult, ws.v_fp8);
    VORTEX_CUDA_LAUNCH_CHECK("sage2_quant_v_kernel");
  }
  ws.quantized_for = ws.mainloop;
  return Status::Ok();
}

}  // namespace

Status sage2_quantize_q(const Tensor& q, int heads, int head_dim, cudaStream_t stream, Sage2Workspace& ws) {
  if (head_dim != kD)
    return unsupported("sage2: head_dim " + std::to_string(head_dim) + " is not supported (only 128)");
  if (heads <= 0) return invalid_argument("sage2: heads must be positive, got " + std::to_string(heads));
  if (!q.defined() || q.ndim() != 2 || q.dim(0) <= 0)
    return invalid_argument("sage2: q must be a non-empty 2-D [S, heads*128] tensor");
  const int64_t seq = q.dim(0);
  VORTEX_RETURN_IF_ERROR(validate_view(q, "q", seq, heads));
  VORTEX_RETURN_IF_ERROR(ws.reserve(heads, seq));
  ws.q_pending_seq = 0;
  const int tiles = static_cast<int>(ws.padded / 128);
  const auto* qp = static_cast<const __nv_bfloat16*>(q.raw_data());
  if (sage2_tiled_layout(ws.mainloop)) {
    sage2_quant_int8_kernel<false, true>
        <<<dim3(tiles, heads), 128, 0, stream>>>(qp, q.stride(0), seq, ws.padded, nullptr, ws.q_int8, ws.q_scale);
    VORTEX_CUDA_LAUNCH_CHECK("sage2_quant_int8_kernel<Q, tiled>");
  } else {
    sage2_quant_int8_kernel<false, false>
        <<<dim3(tiles, heads), 128, 0, stream>>>(qp, q.stride(0), seq, ws.padded, nullptr, ws.q_int8, ws.q_scale);
    VORTEX_CUDA_LAUNCH_CHECK("sage2_quant_int8_kernel<Q>");
  }
  ws.q_pending_seq = seq;
  ws.q_pending_heads = heads;
  ws.q_pending_layout = ws.mainloop;
  return Status::Ok();
}

Status sage2_quantize(const Tensor& q, const Tensor& k, const Tensor& v, int heads, int head_dim, cudaStream_t stream,
                      Sage2Workspace& ws) {
  if (q.defined() && q.ndim() == 2 && q.dim(0) > 0 && head_dim == kD && heads > 0) {  // all views before any work
    VORTEX_RETURN_IF_ERROR(validate_view(k, "k", q.dim(0), heads));
    VORTEX_RETURN_IF_ERROR(validate_view(v, "v", q.dim(0), heads));
  }
  VORTEX_RETURN_IF_ERROR(sage2_quantize_q(q, heads, head_dim, stream, ws));
  return sage2_quantize_kv(k, v, heads, head_dim, stream, ws);
}

Status sage2_quantize_kv(const Tensor& k, const Tensor& v, int heads, int head_dim, cudaStream_t stream,
                         Sage2Workspace& ws) {
  if (head_dim != kD)
    return unsupported("sage2: head_dim " + std::to_string(head_dim) + " is not supported (only 128)");
  if (!k.defined() || k.ndim() != 2 || k.dim(0) <= 0)
    return invalid_argument("sage2: k must be a non-empty 2-D [S, heads*128] tensor");
  const int64_t seq = k.dim(0);
  if (ws.q_pending_seq != seq || ws.q_pending_heads != heads || ws.q_pending_layout != ws.mainloop || ws.seq != seq ||
      ws.heads != heads)
    return invalid_argument("sage2: the workspace holds no quantized Q for " + std::to_string(seq) + " tokens x " +
                            std::to_string(heads) + " heads in the " + sage2_mainloop_name(ws.mainloop) +
                            " layout; call qk_norm_rope_sage2 or sage2_quantize_q first");
  VORTEX_RETURN_IF_ERROR(validate_view(k, "k", seq, heads));
  VORTEX_RETURN_IF_ERROR(validate_view(v, "v", seq, heads));
  ws.q_pending_seq = 0;  // consumed: a later call needs a fresh Q
  return launch_quantize_kv(k, v, heads, stream, ws);
}

}  // namespace vortex
