// causal_attention: the conditioner's causal grouped-query SDPA, out[S, H*hd] = R(softmax_causal(q k^T / sqrt(hd)) v),
// query head h reading kv head h / (H / H_kv), on strided q, k, v views of the [q | k | v] buffer (no layout copies).
// An own kernel (cuDNN's unified SDPA operation has no causal or GQA attribute in the backend API this project
// uses): one 256-thread block per (16-query tile, q head), K/V in 64-key tiles through shared memory, FP32 dot
// products in ascending d, FP32 online softmax (P kept in FP32, not rounded), FP32 P.V, one rounding to BF16.
// Query row i reads keys j <= i only; tiles past the tile's last query are never loaded. head_dim <= 128, even.
// E1 by the two-reference rule (FP64 reference, CPU FP32 same program) in tests/cuda/text_encoder_ops_test.cpp.
#include <cmath>

#include "cuda/check.h"
#include "cuda/ops/common.cuh"
#include "cuda/ops/ops_internal.h"

namespace vortex::cuda_ops {
namespace {

constexpr int kMaxHd = 128;
constexpr int kQTile = 16;     // queries per block
constexpr int kKTile = 64;     // keys per shared-memory tile
constexpr int kThreads = 256;  // 16 lanes per query
constexpr int kLanesPerQuery = kThreads / kQTile;
constexpr int kKeysPerLane = kKTile / kLanesPerQuery;  // 4
constexpr int kQPitch = kMaxHd + 4;                    // floats; rows of the two half-warps on different banks
constexpr int kKPitchWords = kMaxHd / 2 + 1;           // bf16x2 words; 65: the 16 lanes' key rows on distinct banks
constexpr int kVPitchWords = kMaxHd / 2;
constexpr int kPPitch = kKTile + 1;

struct HeadView {
  const uint16_t* ptr;  // [S, heads * hd] bf16, row stride ld (elements)
  int64_t ld;
};

__device__ __forceinline__ float lo_f32(uint32_t w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float hi_f32(uint32_t w) { return __uint_as_float(w & 0xFFFF0000u); }

__global__ void __launch_bounds__(kThreads)
    causal_attention_kernel(HeadView q, HeadView k, HeadView v, uint16_t* out, int64_t ldo, int64_t s, int group,
                            int hd, float scale) {
  __shared__ float qs[kQTile][kQPitch];          // [16, hd] f32, this tile's queries
  __shared__ uint32_t ks[kKTile][kKPitchWords];  // [64, hd] bf16 pairs
  __shared__ uint32_t vs[kKTile][kVPitchWords];  // [64, hd] bf16 pairs
  __shared__ float ps[kQTile][kPPitch];          // [16, 64] f32 probabilities of the tile
  const int t = threadIdx.x;
  const int qi = t / kLanesPerQuery, sub = t % kLanesPerQuery;
  const int h = blockIdx.y, kvh = h / group;
  const int64_t q0 = static_cast<int64_t>(blockIdx.x) * kQTile;
  const int64_t i = q0 + qi;               // this lane's query row
  const int64_t last = i < s ? i : s - 1;  // rows past S mirror row S-1 (never stored)
  const int words = hd / 2;

  for (int e = t; e < kQTile * words; e += kThreads) {
    const int r = e / words, c = e % words;
    const int64_t row = q0 + r < s ? q0 + r : s - 1;
    const uint32_t w = *reinterpret_cast<const uint32_t*>(q.ptr + row * q.ld + static_cast<int64_t>(h) * hd + 2 * c);
    qs[r][2 * c] = lo_f32(w);
    qs[r][2 * c + 1] = hi_f32(w);
  }

  float m = -INFINITY, l = 0.0f;
  float acc[kMaxHd / 32][2];  // d = 2 * sub + 32 * mm + {0, 1}
#pragma unroll
  for (int mm = 0; mm < kMaxHd / 32; ++mm) acc[mm][0] = acc[mm][1] = 0.0f;

  const int64_t keys = (q0 + kQTile < s ? q0 + kQTile : s);  // keys 0 .. keys-1 can be visible to this tile
  for (int64_t k0 = 0; k0 < keys; k0 += kKTile) {
    __syncthreads();  // the previous tile's K/V/P reads are done (and qs is written before the first tile)
    for (int e = t; e < kKTile * words; e += kThreads) {
      const int r = e / words, c = e % words;
      const int64_t row = k0 + r;
      uint32_t kw = 0, vw = 0;
      if (row < s) {
        kw = *reinterpret_cast<const uint32_t*>(k.ptr + row * k.ld + static_cast<int64_t>(kvh) * hd + 2 * c);
        vw = *reinterpret_cast<const uint32_t*>(v.ptr + row * v.ld + static_cast<int64_t>(kvh) * hd + 2 * c);
      }
      ks[r][c] = kw;
      vs[r][c] = vw;
    }
    __syncthreads();
    // Scores of keys k0 + sub + 16 * n for this lane's query.
    float sc[kKeysPerLane];
#pragma unroll
    for (int n = 0; n < kKeysPerLane; ++n) sc[n] = 0.0f;
    for (int c = 0; c < words; ++c) {
      const float qa = qs[qi][2 * c], qb = qs[qi][2 * c + 1];
#pragma unroll
      for (int n = 0; n < kKeysPerLane; ++n) {
        const uint32_t kw = ks[sub + kLanesPerQuery * n][c];
        sc[n] = __fmaf_rn(qa, lo_f32(kw), sc[n]);
        sc[n] = __fmaf_rn(qb, hi_f32(kw), sc[n]);
      }
    }
    float tile_max = -INFINITY;
#pragma unroll
    for (int n = 0; n < kKeysPerLane; ++n) {
      const int64_t j = k0 + sub + kLanesPerQuery * n;
      sc[n] = j <= last ? __fmul_rn(sc[n], scale) : -INFINITY;
      tile_max = fmaxf(tile_max, sc[n]);
    }
#pragma unroll
    for (int off = kLanesPerQuery / 2; off >= 1; off /= 2)
      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xFFFFFFFFu, tile_max, off));
    // Key 0 is visible to every row and lies in the first tile, so m_new is finite from the first tile on.
    const float m_new = fmaxf(m, tile_max);
    const float corr = expf(m - m_new);  // exp(-inf) = 0 on the first tile
    float tile_sum = 0.0f;
#pragma unroll
    for (int n = 0; n < kKeysPerLane; ++n) {
      const float p = sc[n] == -INFINITY ? 0.0f : expf(sc[n] - m_new);
      ps[qi][sub + kLanesPerQuery * n] = p;
      tile_sum += p;
    }
#pragma unroll
    for (int off = kLanesPerQuery / 2; off >= 1; off /= 2) tile_sum += __shfl_xor_sync(0xFFFFFFFFu, tile_sum, off);
    l = l * corr + tile_sum;
    m = m_new;
    __syncthreads();  // ps complete
    const int nk = static_cast<int>(keys - k0 < kKTile ? keys - k0 : kKTile);
#pragma unroll
    for (int mm = 0; mm < kMaxHd / 32; ++mm) {
      acc[mm][0] *= corr;
      acc[mm][1] *= corr;
    }
    for (int j = 0; j < nk; ++j) {
      const float p = ps[qi][j];
#pragma unroll
      for (int mm = 0; mm < kMaxHd / 32; ++mm) {
        const int c = sub + kLanesPerQuery * mm;  // word index: d = 2c, 2c + 1
        if (c < words) {
          const uint32_t vw = vs[j][c];
          acc[mm][0] = __fmaf_rn(p, lo_f32(vw), acc[mm][0]);
          acc[mm][1] = __fmaf_rn(p, hi_f32(vw), acc[mm][1]);
        }
      }
    }
  }
  if (i >= s) return;
  uint16_t* orow = out + i * ldo + static_cast<int64_t>(h) * hd;
#pragma unroll
  for (int mm = 0; mm < kMaxHd / 32; ++mm) {
    const int c = sub + kLanesPerQuery * mm;
    if (c < words) {
      orow[2 * c] = f32_to_bf16(__fdiv_rn(acc[mm][0], l));
      orow[2 * c + 1] = f32_to_bf16(__fdiv_rn(acc[mm][1], l));
    }
  }
}

Status check_pairs(const RowView& v, const char* what) {
  if (reinterpret_cast<uintptr_t>(v.ptr) % 4 != 0 || v.ld % 2 != 0)
    return invalid_argument(std::string("causal_attention: ") + what +
                            " must be 4-byte aligned with an even row stride (read as bf16 pairs)");
  return Status::Ok();
}

}  // namespace

Status causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, int num_heads, int num_kv_heads,
                        int head_dim, Tensor& out, cudaStream_t stream) {
  if (num_heads <= 0 || num_kv_heads <= 0 || head_dim <= 0)
    return invalid_argument("causal_attention: num_heads, num_kv_heads and head_dim must be positive");
  if (num_heads % num_kv_heads != 0)
    return invalid_argument("causal_attention: num_heads " + std::to_string(num_heads) +
                            " must be a multiple of num_kv_heads " + std::to_string(num_kv_heads));
  if (head_dim > kMaxHd || head_dim % 2 != 0)
    return unsupported("causal_attention: head_dim must be even and <= " + std::to_string(kMaxHd) + " on CUDA, got " +
                       std::to_string(head_dim));
  VORTEX_ASSIGN_OR_RETURN(RowView qv, row_view(q, "causal_attention q"));
  VORTEX_ASSIGN_OR_RETURN(RowView kv, row_view(k, "causal_attention k"));
  VORTEX_ASSIGN_OR_RETURN(RowView vv, row_view(v, "causal_attention v"));
  VORTEX_ASSIGN_OR_RETURN(RowView ov, row_view(out, "causal_attention out"));
  const RowView* views[4] = {&qv, &kv, &vv, &ov};
  const char* names[4] = {"q", "k", "v", "out"};
  for (int n = 0; n < 4; ++n) {
    VORTEX_RETURN_IF_ERROR(
        expect_dtype(*views[n], DType::kBF16, (std::string("causal_attention ") + names[n]).c_str()));
    VORTEX_RETURN_IF_ERROR(check_pairs(*views[n], names[n]));
  }
  const int64_t s = qv.rows, inner = static_cast<int64_t>(num_heads) * head_dim;
  const int64_t kv_inner = static_cast<int64_t>(num_kv_heads) * head_dim;
  if (s == 0) return invalid_argument("causal_attention: no rows");
  VORTEX_RETURN_IF_ERROR(expect_shape(qv, s, inner, "causal_attention q"));
  VORTEX_RETURN_IF_ERROR(expect_shape(kv, s, kv_inner, "causal_attention k"));
  VORTEX_RETURN_IF_ERROR(expect_shape(vv, s, kv_inner, "causal_attention v"));
  VORTEX_RETURN_IF_ERROR(expect_shape(ov, s, inner, "causal_attention out"));
  const int64_t tiles = (s + kQTile - 1) / kQTile;
  if (tiles > kMaxGridX || num_heads > 65535) return invalid_argument("causal_attention: tensor too large");
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim)));
  causal_attention_kernel<<<dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(num_heads)), kThreads, 0,
                            stream>>>(
      HeadView{static_cast<const uint16_t*>(qv.ptr), qv.ld}, HeadView{static_cast<const uint16_t*>(kv.ptr), kv.ld},
      HeadView{static_cast<const uint16_t*>(vv.ptr), vv.ld}, static_cast<uint16_t*>(ov.ptr), ov.ld, s,
      num_heads / num_kv_heads, head_dim, scale);
  VORTEX_CUDA_LAUNCH_CHECK("causal_attention_kernel");
  return Status::Ok();
}

}  // namespace vortex::cuda_ops
