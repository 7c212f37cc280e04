// Sage2 attention entry points and the mma.sync mainloop (every built architecture: m16n8k32 INT8 and FP8
// mma.sync exist from sm_89 on): INT8 QK^T (s32), exp2 online softmax with the 8.807 offset, FP8 P from
// registers, FP8 PV into a fresh accumulator per 128-key block added into FP32 (two-level), epilogue
// R((O / d) * v_scale) to BF16 token-major [S, heads*128]. 8 warps x 16 rows, K/V double-buffered with
// cp.async. The wgmma mainloop (sm_90a) is in sage2_sm90.cu; which one runs is the caller's choice
// (select_attention, src/cuda/policy.h). Same program as sage2_attention_reference
// (src/ref/sage2_attention.h); tested in tests/attention/sage2_sm90_test.cpp (two-reference rule), timed by
// bench/sage2_bench.cpp.
#include <string>

#include "cuda/attention/sage2_kernel_common.cuh"
#include "cuda/check.h"

namespace vortex {
namespace sage2_detail {

__global__ void __launch_bounds__(kThreads, 1) sage2_attention_mma_kernel(const Sage2Params prm) {
  extern __shared__ __align__(128) uint8_t smem[];
  const int tile = blockIdx.x, h = blockIdx.y;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int r = lane / 4, t = lane % 4;
  const int64_t P = prm.padded;
  const int blocks = static_cast<int>(P / kBlockK);

  const int8_t* k_head = prm.k + static_cast<int64_t>(h) * P * kD;
  const uint8_t* v_head = prm.v + static_cast<int64_t>(h) * kD * P;
  auto k_tile = [&](int stage) { return smem + stage * 2 * kTileBytes; };
  auto v_tile = [&](int stage) { return smem + stage * 2 * kTileBytes + kTileBytes; };
  auto load_block = [&](int stage, int j) {
    const int8_t* ksrc = k_head + static_cast<int64_t>(j) * kBlockK * kD;  // [128 keys, 128] contiguous
    const uint8_t* vsrc = v_head + static_cast<int64_t>(j) * kBlockK;      // 128 rows at stride P
#pragma unroll
    for (int u = 0; u < (128 * 8) / kThreads; ++u) {
      const int i = tid + u * kThreads, row = i / 8, part = i % 8;
      cp_async16(k_tile(stage) + row * kSmemRow + part * 16, ksrc + row * kD + part * 16);
      cp_async16(v_tile(stage) + row * kSmemRow + part * 16, vsrc + static_cast<int64_t>(row) * P + part * 16);
    }
  };

  load_block(0, 0);
  cp_async_commit();

  // This thread's Q fragments: rows r and r+8 of the warp's slab, its 32 permuted bytes each.
  const int64_t slab = static_cast<int64_t>(tile) * kWarps + warp;
  const int64_t row0 = slab * 16 + r;
  uint32_t qa[8], qb[8];
  {
    const uint4* pa = reinterpret_cast<const uint4*>(prm.q + (static_cast<int64_t>(h) * P + row0) * kD + 32 * t);
    const uint4* pb = reinterpret_cast<const uint4*>(prm.q + (static_cast<int64_t>(h) * P + row0 + 8) * kD + 32 * t);
    const uint4 a0 = pa[0], a1 = pa[1], b0 = pb[0], b1 = pb[1];
    qa[0] = a0.x;
    qa[1] = a0.y;
    qa[2] = a0.z;
    qa[3] = a0.w;
    qa[4] = a1.x;
    qa[5] = a1.y;
    qa[6] = a1.z;
    qa[7] = a1.w;
    qb[0] = b0.x;
    qb[1] = b0.y;
    qb[2] = b0.z;
    qb[3] = b0.w;
    qb[4] = b1.x;
    qb[5] = b1.y;
    qb[6] = b1.z;
    qb[7] = b1.w;
  }
  const float q_scale = prm.q_scale[(static_cast<int64_t>(h) * (P / 16) + slab) * 8 + r];  // rows r and r+8
  const float c0 = (1.0f / sqrtf(static_cast<float>(kD))) * kSage2Log2e;
  const float* k_scale_head = prm.k_scale + static_cast<int64_t>(h) * blocks * kSage2KGroupsPerBlock;

  float o[16][4];  // [16 channel tiles][c0..c3]: rows r (0,1) and r+8 (2,3), channels nt*8 + 2t + {0,1}
#pragma unroll
  for (int nt = 0; nt < 16; ++nt) o[nt][0] = o[nt][1] = o[nt][2] = o[nt][3] = 0.0f;
  float m_r = kSage2MaskValue, m_r8 = kSage2MaskValue, d_r = 1.0f, d_r8 = 1.0f;

  for (int j = 0; j < blocks; ++j) {
    const int stage = j % kStages;
    if (j + 1 < blocks) {
      load_block((j + 1) % kStages, j + 1);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();

    // ---- S = Q K^T (int32, exact) ----
    int acc[16][4];
#pragma unroll
    for (int nt = 0; nt < 16; ++nt) {
      acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0;
      const uint4* kp = reinterpret_cast<const uint4*>(k_tile(stage) + (nt * 8 + r) * kSmemRow + 32 * t);
      const uint4 k0 = kp[0], k1 = kp[1];
      const uint32_t kb[8] = {k0.x, k0.y, k0.z, k0.w, k1.x, k1.y, k1.z, k1.w};
#pragma unroll
      for (int kk = 0; kk < 4; ++kk)
        mma_s8(acc[nt], qa[2 * kk], qb[2 * kk], qa[2 * kk + 1], qb[2 * kk + 1], kb[2 * kk], kb[2 * kk + 1]);
    }

    // ---- online softmax (research §1.7 steps 2-7) -> FP8 P fragments ----
    float alpha_r, alpha_r8;
    uint32_t pa[4][4];
    online_softmax_block(acc, j == blocks - 1, static_cast<int64_t>(j) * kBlockK, t, prm.seq, c0,
                         q_scale * k_scale_head[j * kSage2KGroupsPerBlock + t], m_r, m_r8, d_r, d_r8, alpha_r, alpha_r8,
                         pa);

    // ---- O = O * alpha + (P V)_block: fresh FP32 accumulator per 128-key block ----
#pragma unroll
    for (int nt = 0; nt < 16; ++nt) {
      const uint4* vp = reinterpret_cast<const uint4*>(v_tile(stage) + (nt * 8 + r) * kSmemRow + 32 * t);
      const uint4 v0 = vp[0], v1 = vp[1];
      const uint32_t vb[8] = {v0.x, v0.y, v0.z, v0.w, v1.x, v1.y, v1.z, v1.w};
      float blk[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
      for (int kk = 0; kk < 4; ++kk)
        mma_e4m3(blk, pa[kk][0], pa[kk][1], pa[kk][2], pa[kk][3], vb[2 * kk], vb[2 * kk + 1]);
      o[nt][0] = __fadd_rn(__fmul_rn(o[nt][0], alpha_r), blk[0]);
      o[nt][1] = __fadd_rn(__fmul_rn(o[nt][1], alpha_r), blk[1]);
      o[nt][2] = __fadd_rn(__fmul_rn(o[nt][2], alpha_r8), blk[2]);
      o[nt][3] = __fadd_rn(__fmul_rn(o[nt][3], alpha_r8), blk[3]);
    }
    __syncthreads();  // everyone is done with `stage` before it is refilled
  }

  store_output(o, d_r, d_r8, row0, t, prm.v_scale + h * kD, prm.out, prm.out_stride, prm.seq, h);
}

}  // namespace sage2_detail

Status sage2_attention_quantized(Tensor& out, cudaStream_t stream, Sage2Workspace& ws) {
  if (ws.seq <= 0 || !ws.q_int8) return invalid_argument("sage2: workspace is empty; call sage2_quantize first");
  if (!out.defined() || out.device() != Device::kCuda || out.dtype() != DType::kBF16 || out.ndim() != 2)
    return invalid_argument("sage2: out must be a 2-D bf16 CUDA tensor [S, heads*128]");
  if (out.dim(0) != ws.seq || out.dim(1) < static_cast<int64_t>(ws.heads) * sage2_detail::kD || out.stride(1) != 1 ||
      out.stride(0) % 2 != 0 || reinterpret_cast<uintptr_t>(out.raw_data()) % 4 != 0)
    return invalid_argument("sage2: out " + out.describe() + " must be [" + std::to_string(ws.seq) +
                            ", >= " + std::to_string(ws.heads * sage2_detail::kD) +
                            "] with unit column stride, even row stride, 4-byte aligned");
  if (ws.quantized_for != ws.mainloop)
    return invalid_argument(std::string("sage2: the workspace was quantized for the ") +
                            sage2_mainloop_name(ws.quantized_for) + " mainloop, not " +
                            sage2_mainloop_name(ws.mainloop) + "; call sage2_quantize again");
  const sage2_detail::Sage2Params prm{ws.q_int8,
                                      ws.q_scale,
                                      ws.k_int8,
                                      ws.k_scale,
                                      ws.v_fp8,
                                      ws.v_scale,
                                      static_cast<__nv_bfloat16*>(out.raw_data()),
                                      out.stride(0),
                                      ws.seq,
                                      ws.padded};
  const dim3 grid(static_cast<unsigned>(ws.padded / sage2_detail::kBlockQ), static_cast<unsigned>(ws.heads));
  switch (ws.mainloop) {
    case Sage2Mainloop::kWgmma:
#if defined(VORTEX_HAVE_SM90_KERNELS)
      return sage2_detail::launch_sage2_wgmma(prm, grid, stream, ws);
#else
      return unsupported(
          "sage2: the wgmma mainloop is sm_90a code and this build has no sm_90a kernels "
          "(VORTEX_CUDA_ARCHS); the mma.sync mainloop runs on every built architecture");
#endif
    case Sage2Mainloop::kMmaSync:
      if (!ws.mma_smem_configured) {
        VORTEX_CUDA_CHECK(cudaFuncSetAttribute(sage2_detail::sage2_attention_mma_kernel,
                                               cudaFuncAttributeMaxDynamicSharedMemorySize, sage2_detail::kSmemBytes));
        ws.mma_smem_configured = true;
      }
      sage2_detail::sage2_attention_mma_kernel<<<grid, sage2_detail::kThreads, sage2_detail::kSmemBytes, stream>>>(prm);
      VORTEX_CUDA_LAUNCH_CHECK("sage2_attention_mma_kernel");
      return Status::Ok();
  }
  return internal_error("sage2: unknown mainloop");
}

Status sage2_attention(const Tensor& q, const Tensor& k, const Tensor& v, int heads, int head_dim, Tensor& out,
                       cudaStream_t stream, Sage2Workspace& ws) {
  VORTEX_RETURN_IF_ERROR(sage2_quantize(q, k, v, heads, head_dim, stream, ws));
  return sage2_attention_quantized(out, stream, ws);
}

}  // namespace vortex
