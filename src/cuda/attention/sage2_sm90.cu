// Sage2 wgmma mainloop for sm_90a (compiled only for sm_90a: the vortex_cuda_sm90 object library): a
// warp-specialized wgmma m64n128k32 kernel (producer warp + cp.async.bulk/mbarrier ring, two consumer
// warpgroups). Same program as the mma.sync mainloop (sage2_attention.cu) and sage2_attention_reference
// (src/ref/sage2_attention.h); tested in tests/attention/sage2_sm90_test.cpp (two-reference rule),
// timed by bench/sage2_bench.cpp.
#include "cuda/attention/hopper_sm90.cuh"
#include "cuda/attention/sage2_kernel_common.cuh"
#include "cuda/check.h"

// wgmma, setmaxnreg and the mbarrier transaction counts exist only on sm_90a: any other device pass of this
// file (a misconfigured build) gets a kernel that traps instead of a ptxas error.
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define VORTEX_SAGE2_WGMMA_BODY 0
#else
#define VORTEX_SAGE2_WGMMA_BODY 1
#endif

namespace vortex::sage2_detail {
namespace {

using namespace hopper;

#if VORTEX_SAGE2_WGMMA_BODY
// S (+)= A B^T, A = Q [64 rows x 32 bytes] and B = K [128 keys x 32 bytes], both from shared memory.
__device__ __forceinline__ void wgmma_qk_s8_ss(int (&acc)[16][4], uint64_t a_desc, uint64_t b_desc, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, "
      "%14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, "
      "%36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, "
      "%58, %59, %60, %61, %62, %63}, %64, %65, p;\n}\n"
      : "+r"(acc[0][0]), "+r"(acc[0][1]), "+r"(acc[0][2]), "+r"(acc[0][3]), "+r"(acc[1][0]), "+r"(acc[1][1]),
        "+r"(acc[1][2]), "+r"(acc[1][3]), "+r"(acc[2][0]), "+r"(acc[2][1]), "+r"(acc[2][2]), "+r"(acc[2][3]),
        "+r"(acc[3][0]), "+r"(acc[3][1]), "+r"(acc[3][2]), "+r"(acc[3][3]), "+r"(acc[4][0]), "+r"(acc[4][1]),
        "+r"(acc[4][2]), "+r"(acc[4][3]), "+r"(acc[5][0]), "+r"(acc[5][1]), "+r"(acc[5][2]), "+r"(acc[5][3]),
        "+r"(acc[6][0]), "+r"(acc[6][1]), "+r"(acc[6][2]), "+r"(acc[6][3]), "+r"(acc[7][0]), "+r"(acc[7][1]),
        "+r"(acc[7][2]), "+r"(acc[7][3]), "+r"(acc[8][0]), "+r"(acc[8][1]), "+r"(acc[8][2]), "+r"(acc[8][3]),
        "+r"(acc[9][0]), "+r"(acc[9][1]), "+r"(acc[9][2]), "+r"(acc[9][3]), "+r"(acc[10][0]), "+r"(acc[10][1]),
        "+r"(acc[10][2]), "+r"(acc[10][3]), "+r"(acc[11][0]), "+r"(acc[11][1]), "+r"(acc[11][2]), "+r"(acc[11][3]),
        "+r"(acc[12][0]), "+r"(acc[12][1]), "+r"(acc[12][2]), "+r"(acc[12][3]), "+r"(acc[13][0]), "+r"(acc[13][1]),
        "+r"(acc[13][2]), "+r"(acc[13][3]), "+r"(acc[14][0]), "+r"(acc[14][1]), "+r"(acc[14][2]), "+r"(acc[14][3]),
        "+r"(acc[15][0]), "+r"(acc[15][1]), "+r"(acc[15][2]), "+r"(acc[15][3])
      : "l"(a_desc), "l"(b_desc), "r"(accumulate));
}

__device__ __forceinline__ void wgmma_pv_e4m3(float (&acc)[16][4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                              uint64_t b_desc, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, "
      "%13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, "
      "%35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, "
      "%57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, p, 1, 1;\n}\n"
      : "+f"(acc[0][0]), "+f"(acc[0][1]), "+f"(acc[0][2]), "+f"(acc[0][3]), "+f"(acc[1][0]), "+f"(acc[1][1]),
        "+f"(acc[1][2]), "+f"(acc[1][3]), "+f"(acc[2][0]), "+f"(acc[2][1]), "+f"(acc[2][2]), "+f"(acc[2][3]),
        "+f"(acc[3][0]), "+f"(acc[3][1]), "+f"(acc[3][2]), "+f"(acc[3][3]), "+f"(acc[4][0]), "+f"(acc[4][1]),
        "+f"(acc[4][2]), "+f"(acc[4][3]), "+f"(acc[5][0]), "+f"(acc[5][1]), "+f"(acc[5][2]), "+f"(acc[5][3]),
        "+f"(acc[6][0]), "+f"(acc[6][1]), "+f"(acc[6][2]), "+f"(acc[6][3]), "+f"(acc[7][0]), "+f"(acc[7][1]),
        "+f"(acc[7][2]), "+f"(acc[7][3]), "+f"(acc[8][0]), "+f"(acc[8][1]), "+f"(acc[8][2]), "+f"(acc[8][3]),
        "+f"(acc[9][0]), "+f"(acc[9][1]), "+f"(acc[9][2]), "+f"(acc[9][3]), "+f"(acc[10][0]), "+f"(acc[10][1]),
        "+f"(acc[10][2]), "+f"(acc[10][3]), "+f"(acc[11][0]), "+f"(acc[11][1]), "+f"(acc[11][2]), "+f"(acc[11][3]),
        "+f"(acc[12][0]), "+f"(acc[12][1]), "+f"(acc[12][2]), "+f"(acc[12][3]), "+f"(acc[13][0]), "+f"(acc[13][1]),
        "+f"(acc[13][2]), "+f"(acc[13][3]), "+f"(acc[14][0]), "+f"(acc[14][1]), "+f"(acc[14][2]), "+f"(acc[14][3]),
        "+f"(acc[15][0]), "+f"(acc[15][1]), "+f"(acc[15][2]), "+f"(acc[15][3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(b_desc), "r"(accumulate));
}

// Shared-memory matrix descriptor, no swizzle (K-major 8-row x 16-byte core matrices): LBO = bytes
// between core matrices adjacent along K, SBO = bytes between 8-row groups along M/N.
__device__ __forceinline__ uint64_t smem_desc(const void* smem_ptr, uint32_t lbo, uint32_t sbo) {
  const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(smem_ptr));
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (static_cast<uint64_t>(lbo >> 4) << 16) |
         (static_cast<uint64_t>(sbo >> 4) << 32);
}

// ---- warp-specialized wgmma mainloop ----------------------------------------------------------------
// CTA = 128 query rows of one head, 3 warpgroups: two consumers (warpgroup g owns rows 64g..64g+63;
// warp w the 16-row slab tile*8 + w, as in the mma.sync kernel, so Q scale groups and accumulator
// fragments are the same) and a producer whose first thread streams the Q tile (16 KB, once) and a
// ring of kStages {K, V^T} tile pairs (32 KB each) with cp.async.bulk. A full barrier per stage counts
// the bytes in (complete_tx), an empty barrier per stage counts the 8 consumer warps out.
// Inside each consumer the softmax of block j overlaps the PV GEMM of block j-1 (FlashAttention-3's
// intra-warpgroup pipelining): per iteration it issues QK(j) and PV(j-1) back to back, waits for QK(j)
// only, computes P(j) in FP32 while the tensor cores run PV(j-1), then folds PV(j-1) into O and packs
// P(j) to FP8 (after PV(j-1) has read P(j-1): packing earlier made ptxas serialize the wgmmas, C7513).
// Live registers (S, the PV accumulator, O, P: ~230) exceed the 168 that 3 warps per SM sub-partition
// allow, so the producer warpgroup gives its registers away: setmaxnreg 24 / 240 (R237 used, no local
// memory). Measured on the H200 (benchmarks/2026-11-29-h200-sage2-s7/): 827-834 TOPS vs
// 744 without the overlap; 3 stages = 2 stages; ping-pong turns between the warpgroups cost 2-7%.
// benchmarks/2026-11-29-h200-s9/: descriptors from a base plus constants and I2FP conversion, 928 TOPS (vs 839 in the
// same run); the softmax now runs ~480 instructions per warp and key block against ~1,024 tensor cycles per warpgroup
// pair.
constexpr uint32_t kCoreLbo = 128, kCoreSbo = 1024;  // sage2_tiled_pos: LBO along K, SBO per 8 rows
constexpr int kTileBytes16K = 16384;                 // one 128-row x 128-byte tiled operand tile
constexpr int kWsConsumerWarpgroups = 2;
constexpr int kWsStages = 2;
constexpr int kWsThreads = kWsConsumerWarpgroups * 128 + 128;
constexpr int kWsSmemBytes = kTileBytes16K + kWsStages * 2 * kTileBytes16K + 256;  // Q, ring, barriers

// Global -> shared bulk copy (async proxy) that signals `bar` with its byte count on completion.
__device__ __forceinline__ void bulk_load(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dst),
               "l"(src), "r"(bytes), "r"(bar)
               : "memory");
}

__global__ void __launch_bounds__(kWsThreads, 1) sage2_attention_wgmma_kernel(const Sage2Params prm) {
  constexpr int kStages = kWsStages;
  extern __shared__ __align__(128) uint8_t smem[];
  const int tile = blockIdx.x, h = blockIdx.y;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int64_t P = prm.padded;
  const int blocks = static_cast<int>(P / kBlockK);
  uint8_t* const q_tile = smem;
  auto k_tile = [&](int s) { return smem + kTileBytes16K + s * 2 * kTileBytes16K; };
  auto v_tile = [&](int s) { return smem + kTileBytes16K + s * 2 * kTileBytes16K + kTileBytes16K; };
  uint64_t* const bars = reinterpret_cast<uint64_t*>(smem + kTileBytes16K + kStages * 2 * kTileBytes16K);
  const uint32_t q_full = smem_u32(&bars[0]);
  auto full = [&](int s) { return smem_u32(&bars[1 + s]); };
  auto empty = [&](int s) { return smem_u32(&bars[1 + kStages + s]); };
  const int8_t* k_head = prm.k + static_cast<int64_t>(h) * P * kD;
  const uint8_t* v_head = prm.v + static_cast<int64_t>(h) * kD * P;
  auto load_kv = [&](int j) {  // one thread: block j into stage j % kStages
    const int s = j % kStages;
    mbar_arrive_expect_tx(full(s), 2 * kTileBytes16K);
    bulk_load(smem_u32(k_tile(s)), k_head + static_cast<int64_t>(j) * kTileBytes16K, kTileBytes16K, full(s));
    bulk_load(smem_u32(v_tile(s)), v_head + static_cast<int64_t>(j) * kTileBytes16K, kTileBytes16K, full(s));
  };
  if (tid == 0) {
    mbar_init(q_full, 1);
    for (int s = 0; s < kStages; ++s) {
      mbar_init(full(s), 1);
      mbar_init(empty(s), kWsConsumerWarpgroups * 4);  // one arrival per consumer warp
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  // The warp no longer reads stage jb % kStages (block jb): one arrival on its empty barrier.
  auto release_stage = [&](int jb) {
    __syncwarp();
    if (lane == 0) mbar_arrive(empty(jb % kStages));
  };

  if (warp >= kWsConsumerWarpgroups * 4) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 24;\n" ::: "memory");
    if (warp == kWsConsumerWarpgroups * 4 && lane == 0) {
      mbar_arrive_expect_tx(q_full, kTileBytes16K);
      bulk_load(smem_u32(q_tile), prm.q + (static_cast<int64_t>(h) * P + static_cast<int64_t>(tile) * 128) * kD,
                kTileBytes16K, q_full);
      for (int j = 0; j < blocks; ++j) {
        if (j >= kStages) mbar_wait(empty(j % kStages), ((j / kStages) + 1) & 1);
        load_kv(j);
      }
    }
    return;
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 240;\n" ::: "memory");

  // The warpgroup index through a shuffle so that ptxas knows it is warp-uniform (CUTLASS's
  // canonical_warp_group_idx) and keeps the wgmma descriptors in uniform registers.
  const int wg = __shfl_sync(0xffffffffu, warp / 4, 0), r = lane / 4, t = lane % 4;
  const int64_t slab = static_cast<int64_t>(tile) * 8 + warp;
  const int64_t row0 = slab * 16 + r;
  const float q_scale = prm.q_scale[(static_cast<int64_t>(h) * (P / 16) + slab) * 8 + r];
  const float c0 = (1.0f / sqrtf(static_cast<float>(kD))) * kSage2Log2e;
  const float* k_scale_head = prm.k_scale + static_cast<int64_t>(h) * blocks * kSage2KGroupsPerBlock;
  const uint8_t* q_rows = q_tile + wg * 8192;

  float o[16][4];
#pragma unroll
  for (int nt = 0; nt < 16; ++nt) o[nt][0] = o[nt][1] = o[nt][2] = o[nt][3] = 0.0f;
  float m_r = kSage2MaskValue, m_r8 = kSage2MaskValue, d_r = 1.0f, d_r8 = 1.0f;

  // Descriptor of (tile base + kk * 256 bytes) = base descriptor + kk * 16 (the address field is bytes >> 4;
  // shared addresses < 256 KB never carry out of it); stage s adds s * 2 * 16 KB >> 4. Built per wgmma from
  // the address, the descriptors cost ~70 uniform-datapath instructions per key block (SASS,
  // benchmarks/2026-11-29-h200-s9/).
  const uint64_t q_desc0 = smem_desc(q_rows, kCoreLbo, kCoreSbo);
  const uint64_t k_desc0 = smem_desc(k_tile(0), kCoreLbo, kCoreSbo);
  const uint64_t v_desc0 = smem_desc(v_tile(0), kCoreLbo, kCoreSbo);
  constexpr uint64_t kKkStep = (2 * kCoreLbo) >> 4, kStageStep = (2 * kTileBytes16K) >> 4;
  auto issue_qk = [&](int(&acc)[16][4], int s) {
#pragma unroll
    for (int kk = 0; kk < 4; ++kk)
      wgmma_qk_s8_ss(acc, q_desc0 + kk * kKkStep, k_desc0 + s * kStageStep + kk * kKkStep, kk > 0 ? 1 : 0);
    wgmma_commit();
  };
  auto issue_pv = [&](float(&blk)[16][4], const uint32_t(&pa)[4][4], int s) {
#pragma unroll
    for (int kk = 0; kk < 4; ++kk)
      wgmma_pv_e4m3(blk, pa[kk][0], pa[kk][1], pa[kk][2], pa[kk][3], v_desc0 + s * kStageStep + kk * kKkStep,
                    kk > 0 ? 1 : 0);
    wgmma_commit();
  };
  auto fold = [&](const float(&blk)[16][4], float a_r, float a_r8) {
    if (__all_sync(0xffffffffu, a_r == 1.0f && a_r8 == 1.0f)) {
#pragma unroll
      for (int nt = 0; nt < 16; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) o[nt][e] = __fadd_rn(o[nt][e], blk[nt][e]);
    } else {
#pragma unroll
      for (int nt = 0; nt < 16; ++nt) {
        o[nt][0] = __fadd_rn(__fmul_rn(o[nt][0], a_r), blk[nt][0]);
        o[nt][1] = __fadd_rn(__fmul_rn(o[nt][1], a_r), blk[nt][1]);
        o[nt][2] = __fadd_rn(__fmul_rn(o[nt][2], a_r8), blk[nt][2]);
        o[nt][3] = __fadd_rn(__fmul_rn(o[nt][3], a_r8), blk[nt][3]);
      }
    }
  };

  // Accumulators are never zeroed: the first wgmma of each GEMM runs with scale-d = 0.
  int acc[16][4];
  float blk[16][4];
  uint32_t pa_prev[4][4];
  float alpha_prev_r, alpha_prev_r8;
  // K scale of the block being softmaxed, loaded one iteration ahead (a global load at the point of
  // use stalled every block on L2 latency: ncu long-scoreboard 0.64 cycles per issued instruction).
  float ks = k_scale_head[t];
  // Prologue: S(0), its softmax and P(0).
  mbar_wait(q_full, 0);
  mbar_wait(full(0), 0);
  {
    fence_operands(acc);
    wgmma_fence();
    issue_qk(acc, 0);
    wgmma_wait<0>();
    fence_operands(acc);
    float p[16][4];
    online_softmax_probs(acc, blocks == 1, 0, t, prm.seq, c0, q_scale * ks, m_r, m_r8, d_r, d_r8, alpha_prev_r,
                         alpha_prev_r8, p);
    pack_p(p, pa_prev);
  }
  float ks_next = blocks > 1 ? k_scale_head[kSage2KGroupsPerBlock + t] : 0.0f;
  // Key block j >= 1: QK(j) and PV(j-1) issued together as two groups; ptxas places the PV wait right
  // after the QK wait (SASS, benchmarks/2026-11-29-h200-s8/), so the softmax overlaps the other warpgroup's GEMMs
  // rather than this warpgroup's PV (a shared-memory-P variant that overlaps both measured slower). P(j) goes into the
  // A registers only after PV(j-1) has been waited for: the PTX rule for register A operands; written
  // earlier, ptxas coalesced the next P with the in-flight A registers (SASS, benchmarks/2026-11-29-h200-s8/). The last
  // block (masked keys) is peeled off: with its branch inside the loop ptxas spilled 28 bytes.
  auto key_block = [&](int j, auto last_block) {
    constexpr bool kLast = decltype(last_block)::value;
    const int s = j % kStages, s_prev = (j - 1) % kStages;
    ks = ks_next;
    if (!kLast && j + 1 < blocks) ks_next = k_scale_head[(j + 1) * kSage2KGroupsPerBlock + t];
    mbar_wait(full(s), (j / kStages) & 1);
    fence_operands(acc);
    fence_operands(blk);
    fence_operands(pa_prev);
    wgmma_fence();
    issue_qk(acc, s);                                               // group: QK(j)
    issue_pv(blk, pa_prev, s_prev);                                 // group: PV(j-1)
    asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");  // QK(j) done; PV(j-1) runs on
    fence_operands(acc);
    float alpha_r, alpha_r8;
    float p[16][4];
    if constexpr (kLast) {
      online_softmax_probs(acc, true, static_cast<int64_t>(j) * kBlockK, t, prm.seq, c0, q_scale * ks, m_r, m_r8, d_r,
                           d_r8, alpha_r, alpha_r8, p);
    } else {
      online_softmax_probs_full(acc, c0 * (q_scale * ks), m_r, m_r8, d_r, d_r8, alpha_r, alpha_r8, p);
    }
    wgmma_wait<0>();  // PV(j-1) done
    fence_operands(blk);
    fence_operands(pa_prev);
    release_stage(j - 1);  // the warp's reads of stage s_prev are complete
    fold(blk, alpha_prev_r, alpha_prev_r8);
    pack_p(p, pa_prev);
    alpha_prev_r = alpha_r;
    alpha_prev_r8 = alpha_r8;
  };
  for (int j = 1; j < blocks - 1; ++j) key_block(j, std::false_type{});
  if (blocks > 1) key_block(blocks - 1, std::true_type{});
  {
    const int s_last = (blocks - 1) % kStages;
    fence_operands(blk);
    fence_operands(pa_prev);
    wgmma_fence();
    issue_pv(blk, pa_prev, s_last);
    wgmma_wait<0>();
    fence_operands(blk);
    fence_operands(pa_prev);
    release_stage(blocks - 1);
    fold(blk, alpha_prev_r, alpha_prev_r8);
  }
  store_output(o, d_r, d_r8, row0, t, prm.v_scale + h * kD, prm.out, prm.out_stride, prm.seq, h);
}
#else
constexpr int kWsThreads = 384;
constexpr int kWsSmemBytes = 16384 * 5 + 256;
__global__ void sage2_attention_wgmma_kernel(const Sage2Params) { __trap(); }
#endif

}  // namespace

Status launch_sage2_wgmma(const Sage2Params& prm, dim3 grid, cudaStream_t stream, Sage2Workspace& ws) {
  if (!ws.wgmma_smem_configured) {
    VORTEX_CUDA_CHECK(
        cudaFuncSetAttribute(sage2_attention_wgmma_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kWsSmemBytes));
    ws.wgmma_smem_configured = true;
  }
  sage2_attention_wgmma_kernel<<<grid, kWsThreads, kWsSmemBytes, stream>>>(prm);
  VORTEX_CUDA_LAUNCH_CHECK("sage2_attention_wgmma_kernel");
  return Status::Ok();
}

}  // namespace vortex::sage2_detail
