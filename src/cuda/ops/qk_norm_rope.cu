// qk_norm_rope: per-head RMSNorm (canonical FP64 reduction over head_dim, one rounding) then
// rotate-half RoPE y = R(R(x * cos) + R(rot(x) * sin)) on dims < rope_dims (docs/numerics.md), IN PLACE
// on strided Q/K views of the [S, 3 * I] QKV buffer (row stride 3 * I, head h at column h * head_dim), so
// the attention backend reads the result without layout copies. head_dim 128 (H3; 16-byte aligned views, rope_dims
// % 16 == 0 or no RoPE): 4 lanes per head, 4 16-byte chunks each; head_dim 64 (the video VAE's): 2 lanes per head,
// 4 chunks each; head_dim 256: hd/8 lanes per head; other shapes: one warp per (row, head) through shared memory. H200
// at [37810, 56 x 128] Q+K, rope 96: 0.725 ms = 71.8% of copy BW; measured slower: hd/8 lanes 1.057, 2 heads per 4
// lanes 0.807, bulk-copy ring 0.770 ms (benchmarks/2026-11-29-h200-s7-bw/ops_bench.log). E0 vs the CPU reference in
// tests/cuda/ops_test.cpp (all 3 paths).
#include "cuda/ops/ops_internal.h"
#include "cuda/ops/qk_norm_rope.cuh"
#include "cuda/ops/row_kernels.cuh"

namespace vortex::cuda_ops {
namespace {

constexpr int kMaxHeadDim = 256;
constexpr int kWarpsPerBlock = 8;

struct QkOperand {
  uint16_t* ptr;  // [rows, heads * hd] bf16 view, row stride ld
  int64_t ld;
  const uint16_t* weight;  // [hd] bf16
};

__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    qk_norm_rope_kernel(QkOperand q, QkOperand k, const uint16_t* __restrict__ cos, int64_t ldc,
                        const uint16_t* __restrict__ sin, int64_t lds, int64_t rows, int heads, int hd, int rope_dims,
                        float eps) {
  __shared__ float normed[kWarpsPerBlock][kMaxHeadDim];
  const QkOperand p = blockIdx.y == 0 ? q : k;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t item = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + warp;
  if (item >= rows * heads) return;  // whole warp exits together; only warp-level sync below
  const int64_t row = item / heads;
  const int h = static_cast<int>(item % heads);
  uint16_t* xh = p.ptr + row * p.ld + static_cast<int64_t>(h) * hd;  // [hd] bf16, this head
  float* nv = normed[warp];
  for (int j = lane; j < hd; j += 32) nv[j] = bf16_to_f32(xh[j]);
  __syncwarp();
  const double ss = warp_canonical_sum_squares(hd, [&](int j) { return static_cast<double>(nv[j]); });
  const float rinv = inverse_rms(ss, hd, eps);
  __syncwarp();
  for (int j = lane; j < hd; j += 32) nv[j] = norm_value(nv[j], rinv, bf16_to_f32(p.weight[j]));
  __syncwarp();
  const int half = rope_dims / 2;
  for (int j = lane; j < hd; j += 32) {
    float y = nv[j];
    if (cos != nullptr && j < rope_dims) {
      const int c = j < half ? j : j - half;  // angle column shared by dims c and c + half
      const float cs = bf16_to_f32(cos[row * ldc + c]);
      const float sn = bf16_to_f32(sin[row * lds + c]);
      const float rot = j < half ? -nv[j + half] : nv[j - half];  // rot = [-x2, x1]
      y = round_bf16(__fadd_rn(round_bf16(__fmul_rn(y, cs)), round_bf16(__fmul_rn(rot, sn))));
    }
    xh[j] = f32_to_bf16(y);
  }
}

// ---- 16-byte path -------------------------------------------------------------------------------------
constexpr int kQkItems = 2;  // (row, head) items per lane group, loaded together for memory in flight

// Canonical sum of squares of one head held by a group of kT = hd / 8 lanes (lane q of the group holds
// elements 8q .. 8q + 7 = canonical lanes 8q + i, each lane's only element since hd <= 256). Canonical
// lanes >= hd are +0.0, so tree steps w >= hd add +0.0 to a sum >= +0: exact no-ops, skipped. Steps
// hd/2 .. 8 pair lane q with q + w / 8 (shuffle inside the group), then w = 4, 2, 1 inside the lane.
template <int kT>
__device__ __forceinline__ double group_canonical_sum_squares(const uint4& x) {
  double acc[8];
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const double lo = static_cast<double>(bf16_lo(word(x, k))), hi = static_cast<double>(bf16_hi(word(x, k)));
    acc[2 * k] = __dmul_rn(lo, lo);
    acc[2 * k + 1] = __dmul_rn(hi, hi);
  }
#pragma unroll
  for (int off = kT / 2; off >= 1; off /= 2) {
#pragma unroll
    for (int i = 0; i < 8; ++i) acc[i] = __dadd_rn(acc[i], __shfl_down_sync(0xFFFFFFFFu, acc[i], off, kT));
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) acc[i] = __dadd_rn(acc[i], acc[i + 4]);
#pragma unroll
  for (int i = 0; i < 2; ++i) acc[i] = __dadd_rn(acc[i], acc[i + 2]);
  return __shfl_sync(0xFFFFFFFFu, __dadd_rn(acc[0], acc[1]), 0, kT);
}

template <int kT>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    qk_norm_rope_vec_kernel(QkOperand q, QkOperand k, const uint16_t* __restrict__ cos, int64_t ldc,
                            const uint16_t* __restrict__ sin, int64_t lds, int64_t rows, int heads, int rope_dims,
                            float eps) {
  constexpr int kHd = 8 * kT;
  const QkOperand p = blockIdx.y == 0 ? q : k;
  const int sub = threadIdx.x % kT;  // chunk of the head
  const int64_t group = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kT;
  const int64_t items = rows * heads;
  const int half = rope_dims / 2;
  uint4 x[kQkItems], c[kQkItems], s[kQkItems];
  uint16_t* xh[kQkItems];
#pragma unroll
  for (int it = 0; it < kQkItems; ++it) {  // issue every load first; invalid items keep their lanes in the shuffles
    const int64_t item = group * kQkItems + it;
    const bool valid = item < items;
    const int64_t row = valid ? item / heads : 0;
    const int h = valid ? static_cast<int>(item % heads) : 0;
    xh[it] = valid ? p.ptr + row * p.ld + static_cast<int64_t>(h) * kHd + 8 * sub : nullptr;  // 8 bf16 of the head
    x[it] = valid ? *reinterpret_cast<const uint4*>(xh[it]) : make_uint4(0, 0, 0, 0);
    c[it] = s[it] = make_uint4(0, 0, 0, 0);
    if (valid && 8 * sub < rope_dims) {
      const int col = 8 * sub < half ? 8 * sub : 8 * sub - half;  // angle column shared by dims col and col + half
      c[it] = *reinterpret_cast<const uint4*>(cos + row * ldc + col);
      s[it] = *reinterpret_cast<const uint4*>(sin + row * lds + col);
    }
  }
  const uint4 wv = *reinterpret_cast<const uint4*>(p.weight + 8 * sub);
  // rot = [-x2, x1]: chunk sub pairs with chunk sub +- half / 8 of the same head.
  const bool rope = 8 * sub < rope_dims, first = 8 * sub < half;
  const int partner = (threadIdx.x & 31) - sub + (!rope ? sub : first ? sub + half / 8 : sub - half / 8);
#pragma unroll
  for (int it = 0; it < kQkItems; ++it) {
    const float rinv = inverse_rms(group_canonical_sum_squares<kT>(x[it]), kHd, eps);
    uint4 n;  // normalized: R(fp32(fp32(x * r) * w))
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      const uint32_t xw = word(x[it], w), ww = word(wv, w);
      set_word(n, w,
               f32x2_to_bf16x2(__fmul_rn(__fmul_rn(bf16_lo(xw), rinv), bf16_lo(ww)),
                               __fmul_rn(__fmul_rn(bf16_hi(xw), rinv), bf16_hi(ww))));
    }
    uint4 o = n;
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      const uint32_t other = __shfl_sync(0xFFFFFFFFu, word(n, w), partner);
      if (rope) {
        const float rlo = first ? -bf16_lo(other) : bf16_lo(other), rhi = first ? -bf16_hi(other) : bf16_hi(other);
        const uint32_t nw = word(n, w), cw = word(c[it], w), sw = word(s[it], w);
        const uint32_t a = f32x2_to_bf16x2(__fmul_rn(bf16_lo(nw), bf16_lo(cw)), __fmul_rn(bf16_hi(nw), bf16_hi(cw)));
        const uint32_t b = f32x2_to_bf16x2(__fmul_rn(rlo, bf16_lo(sw)), __fmul_rn(rhi, bf16_hi(sw)));
        set_word(o, w, f32x2_to_bf16x2(__fadd_rn(bf16_lo(a), bf16_lo(b)), __fadd_rn(bf16_hi(a), bf16_hi(b))));
      }
    }
    if (xh[it] != nullptr) *reinterpret_cast<uint4*>(xh[it]) = o;
  }
}

template <int kT>
Status launch_qk_vec(const QkOperand& qo, const QkOperand& ko, const RowView& cv, const RowView& sv, int64_t rows,
                     int heads, int rope_dims, float eps, cudaStream_t stream) {
  constexpr int kGroupsPerBlock = kWarpsPerBlock * 32 / kT;
  const int64_t groups = (rows * heads + kQkItems - 1) / kQkItems;
  const int64_t blocks = (groups + kGroupsPerBlock - 1) / kGroupsPerBlock;
  if (blocks > kMaxGridX) return invalid_argument("qk_norm_rope: tensor too large");
  qk_norm_rope_vec_kernel<kT><<<dim3(static_cast<unsigned>(blocks), 2), kWarpsPerBlock * 32, 0, stream>>>(
      qo, ko, static_cast<const uint16_t*>(cv.ptr), cv.ld, static_cast<const uint16_t*>(sv.ptr), sv.ld, rows, heads,
      rope_dims, eps);
  VORTEX_CUDA_LAUNCH_CHECK("qk_norm_rope_vec_kernel");
  return Status::Ok();
}

// One (row, head) item per 4-lane group (2 items per group measured slower).
__global__ void __launch_bounds__(kQuadWarps * 32)
    qk_norm_rope_quad_kernel(QkOperand q, QkOperand k, const uint16_t* __restrict__ cos, int64_t ldc,
                             const uint16_t* __restrict__ sin, int64_t lds, int64_t rows, int heads, int rope_dims,
                             float eps) {
  __shared__ uint4 normed[kQuadWarps][kQuadHeadsPerWarp][kQuadPitch];  // per warp: the groups' normalized heads
  const QkOperand p = blockIdx.y == 0 ? q : k;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int l = lane % kQuadLanes;
  const int64_t item = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kQuadLanes;
  const bool valid = item < rows * heads;  // invalid items keep their lanes in the shuffles
  const int64_t row = valid ? item / heads : 0;
  const int h = valid ? static_cast<int>(item % heads) : 0;
  uint4* xh = reinterpret_cast<uint4*>(p.ptr + row * p.ld + static_cast<int64_t>(h) * 128);  // [16] uint4, the head
  uint4 x[kQuadChunks], wv[kQuadChunks], o[kQuadChunks];
#pragma unroll
  for (int m = 0; m < kQuadChunks; ++m) x[m] = valid ? xh[l + 4 * m] : make_uint4(0, 0, 0, 0);
#pragma unroll
  for (int m = 0; m < kQuadChunks; ++m) wv[m] = __ldg(reinterpret_cast<const uint4*>(p.weight) + l + 4 * m);
  quad_head(x, wv, normed[warp][lane / kQuadLanes], cos + row * ldc, sin + row * lds, l, rope_dims / 8, rope_dims / 16,
            eps, o);
  if (!valid) return;
#pragma unroll
  for (int m = 0; m < kQuadChunks; ++m) xh[l + 4 * m] = o[m];
}

Status launch_qk_quad(const QkOperand& qo, const QkOperand& ko, const RowView& cv, const RowView& sv, int64_t rows,
                      int heads, int rope_dims, float eps, cudaStream_t stream) {
  constexpr int kGroupsPerBlock = kQuadWarps * 32 / kQuadLanes;
  const int64_t blocks = (rows * heads + kGroupsPerBlock - 1) / kGroupsPerBlock;
  if (blocks > kMaxGridX) return invalid_argument("qk_norm_rope: tensor too large");
  qk_norm_rope_quad_kernel<<<dim3(static_cast<unsigned>(blocks), 2), kQuadWarps * 32, 0, stream>>>(
      qo, ko, static_cast<const uint16_t*>(cv.ptr), cv.ld, static_cast<const uint16_t*>(sv.ptr), sv.ld, rows, heads,
      rope_dims, eps);
  VORTEX_CUDA_LAUNCH_CHECK("qk_norm_rope_quad_kernel");
  return Status::Ok();
}

// ---- head_dim 64 path: 2 lanes per head (the video VAE decoder's 32 heads of 64) -----------------------------
// Lane l of a head's pair holds chunks c = l + 2 m (m < 4, elements 8 c + i): the canonical steps w = 32 and 16
// pair chunks m, m + 2 and m, m + 1 inside the lane, only w = 8 crosses lanes (one shuffle level on 8 doubles); RoPE
// partners (chunk c +- rope_dims / 16) come through a per-warp shared-memory copy of the normalized head, as in
// quad_head (qk_norm_rope.cuh).
constexpr int kPairLanes = 2;   // lanes per head
constexpr int kPairChunks = 4;  // 16-byte chunks per lane (hd = 64)
constexpr int kPairWarps = 8;
constexpr int kPairPitch = 10;  // uint4 per group row in shared memory: 8 chunks + 32 B pad (bank spread)
constexpr int kPairHeadsPerWarp = 32 / kPairLanes;

__global__ void __launch_bounds__(kPairWarps * 32)
    qk_norm_rope_pair_kernel(QkOperand q, QkOperand k, const uint16_t* __restrict__ cos, int64_t ldc,
                             const uint16_t* __restrict__ sin, int64_t lds, int64_t rows, int heads, int rope_dims,
                             float eps) {
  __shared__ uint4 normed[kPairWarps][kPairHeadsPerWarp][kPairPitch];  // per warp: the pairs' normalized heads
  const QkOperand p = blockIdx.y == 0 ? q : k;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int l = lane % kPairLanes;
  const int64_t item = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kPairLanes;
  const bool valid = item < rows * heads;  // invalid items keep their lanes in the shuffles
  const int64_t row = valid ? item / heads : 0;
  const int h = valid ? static_cast<int>(item % heads) : 0;
  uint4* xh = reinterpret_cast<uint4*>(p.ptr + row * p.ld + static_cast<int64_t>(h) * 64);  // [8] uint4, the head
  uint4 x[kPairChunks], wv[kPairChunks], o[kPairChunks];
#pragma unroll
  for (int m = 0; m < kPairChunks; ++m) x[m] = valid ? xh[l + 2 * m] : make_uint4(0, 0, 0, 0);
#pragma unroll
  for (int m = 0; m < kPairChunks; ++m) wv[m] = __ldg(reinterpret_cast<const uint4*>(p.weight) + l + 2 * m);
  // Canonical sum of squares: lane t = 8 c + i holds one square; w = 64 adds +0.0 (skipped).
  double a[2][8];
#pragma unroll
  for (int m = 0; m < 2; ++m) {
#pragma unroll
    for (int k2 = 0; k2 < 4; ++k2) {
      const uint32_t w0 = word(x[m], k2), w2 = word(x[m + 2], k2);
      const double l0 = bf16_lo(w0), h0 = bf16_hi(w0), l2 = bf16_lo(w2), h2 = bf16_hi(w2);
      a[m][2 * k2] = __dadd_rn(__dmul_rn(l0, l0), __dmul_rn(l2, l2));  // w = 32: t += t + 32
      a[m][2 * k2 + 1] = __dadd_rn(__dmul_rn(h0, h0), __dmul_rn(h2, h2));
    }
  }
  double b[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) b[i] = __dadd_rn(a[0][i], a[1][i]);  // w = 16: chunk m = 0 += m = 1
#pragma unroll
  for (int i = 0; i < 8; ++i) b[i] = __dadd_rn(b[i], __shfl_down_sync(0xFFFFFFFFu, b[i], 1, kPairLanes));  // w = 8
#pragma unroll
  for (int i = 0; i < 4; ++i) b[i] = __dadd_rn(b[i], b[i + 4]);  // w = 4
#pragma unroll
  for (int i = 0; i < 2; ++i) b[i] = __dadd_rn(b[i], b[i + 2]);                      // w = 2
  const double ss = __shfl_sync(0xFFFFFFFFu, __dadd_rn(b[0], b[1]), 0, kPairLanes);  // w = 1, from lane 0
  const float rinv = inverse_rms(ss, 64, eps);
#pragma unroll
  for (int m = 0; m < kPairChunks; ++m) {  // n = R(fp32(fp32(x * r) * w))
#pragma unroll
    for (int k2 = 0; k2 < 4; ++k2) {
      const uint32_t xw = word(x[m], k2), ww = word(wv[m], k2);
      set_word(o[m], k2,
               f32x2_to_bf16x2(__fmul_rn(__fmul_rn(bf16_lo(xw), rinv), bf16_lo(ww)),
                               __fmul_rn(__fmul_rn(bf16_hi(xw), rinv), bf16_hi(ww))));
    }
  }
  const int rope_chunks = rope_dims / 8, half_chunks = rope_dims / 16;
  if (rope_chunks > 0) {
    uint4* mine = normed[warp][lane / kPairLanes];
    const uint16_t* cos_row = cos + row * ldc;
    const uint16_t* sin_row = sin + row * lds;
#pragma unroll
    for (int m = 0; m < kPairChunks; ++m) mine[l + 2 * m] = o[m];
    __syncwarp();
#pragma unroll
    for (int m = 0; m < kPairChunks; ++m) {
      const int c = l + 2 * m;
      if (c < rope_chunks) {
        const bool first = c < half_chunks;
        const int col = first ? c : c - half_chunks;  // angle chunk shared by chunks col and col + half
        const uint4 cw4 = __ldg(reinterpret_cast<const uint4*>(cos_row) + col);
        const uint4 sw4 = __ldg(reinterpret_cast<const uint4*>(sin_row) + col);
        const uint4 other = mine[first ? c + half_chunks : c - half_chunks];  // rot = [-x2, x1]
        uint4 r;
#pragma unroll
        for (int k2 = 0; k2 < 4; ++k2) {
          const uint32_t ow = word(other, k2), nw = word(o[m], k2), cw = word(cw4, k2), sw = word(sw4, k2);
          const float rlo = first ? -bf16_lo(ow) : bf16_lo(ow), rhi = first ? -bf16_hi(ow) : bf16_hi(ow);
          const uint32_t a2 = f32x2_to_bf16x2(__fmul_rn(bf16_lo(nw), bf16_lo(cw)), __fmul_rn(bf16_hi(nw), bf16_hi(cw)));
          const uint32_t b2 = f32x2_to_bf16x2(__fmul_rn(rlo, bf16_lo(sw)), __fmul_rn(rhi, bf16_hi(sw)));
          set_word(r, k2, f32x2_to_bf16x2(__fadd_rn(bf16_lo(a2), bf16_lo(b2)), __fadd_rn(bf16_hi(a2), bf16_hi(b2))));
        }
        o[m] = r;
      }
    }
  }
  if (!valid) return;
#pragma unroll
  for (int m = 0; m < kPairChunks; ++m) xh[l + 2 * m] = o[m];
}

Status launch_qk_pair(const QkOperand& qo, const QkOperand& ko, const RowView& cv, const RowView& sv, int64_t rows,
                      int heads, int rope_dims, float eps, cudaStream_t stream) {
  constexpr int kGroupsPerBlock = kPairWarps * 32 / kPairLanes;
  const int64_t blocks = (rows * heads + kGroupsPerBlock - 1) / kGroupsPerBlock;
  if (blocks > kMaxGridX) return invalid_argument("qk_norm_rope: tensor too large");
  qk_norm_rope_pair_kernel<<<dim3(static_cast<unsigned>(blocks), 2), kPairWarps * 32, 0, stream>>>(
      qo, ko, static_cast<const uint16_t*>(cv.ptr), cv.ld, static_cast<const uint16_t*>(sv.ptr), sv.ld, rows, heads,
      rope_dims, eps);
  VORTEX_CUDA_LAUNCH_CHECK("qk_norm_rope_pair_kernel");
  return Status::Ok();
}

}  // namespace

Status qk_norm_rope(Tensor& q, Tensor& k, const Tensor& q_weight, const Tensor& k_weight, float eps, const Tensor* cos,
                    const Tensor* sin, int rope_dims, int num_heads, int head_dim, cudaStream_t stream) {
  VORTEX_ASSIGN_OR_RETURN(RowView qv, row_view(q, "qk_norm_rope q"));
  VORTEX_ASSIGN_OR_RETURN(RowView kv, row_view(k, "qk_norm_rope k"));
  VORTEX_RETURN_IF_ERROR(expect_dtype(qv, DType::kBF16, "qk_norm_rope q"));
  VORTEX_RETURN_IF_ERROR(expect_dtype(kv, DType::kBF16, "qk_norm_rope k"));
  if (num_heads <= 0 || head_dim <= 0 || head_dim > kMaxHeadDim || head_dim % 2 != 0)
    return unsupported("qk_norm_rope: head_dim must be even and <= " + std::to_string(kMaxHeadDim) + ", got " +
                       std::to_string(head_dim) + " (heads " + std::to_string(num_heads) + ")");
  const int64_t width = static_cast<int64_t>(num_heads) * head_dim;
  VORTEX_RETURN_IF_ERROR(expect_shape(qv, qv.rows, width, "qk_norm_rope q"));
  VORTEX_RETURN_IF_ERROR(expect_shape(kv, qv.rows, width, "qk_norm_rope k"));
  VORTEX_ASSIGN_OR_RETURN(const void* qw, device_vector(q_weight, head_dim, DType::kBF16, "qk_norm_rope q_weight"));
  VORTEX_ASSIGN_OR_RETURN(const void* kw, device_vector(k_weight, head_dim, DType::kBF16, "qk_norm_rope k_weight"));
  if (!(eps >= 0.0f)) return invalid_argument("qk_norm_rope: eps must be >= 0");
  RowView cv{}, sv{};
  if ((cos == nullptr) != (sin == nullptr)) return invalid_argument("qk_norm_rope: pass both cos and sin or neither");
  if (cos != nullptr) {
    if (rope_dims <= 0 || rope_dims % 2 != 0 || rope_dims > head_dim)
      return invalid_argument("qk_norm_rope: rope_dims must be even and in (0, head_dim], got " +
                              std::to_string(rope_dims));
    VORTEX_ASSIGN_OR_RETURN(cv, row_view(*cos, "qk_norm_rope cos"));
    VORTEX_ASSIGN_OR_RETURN(sv, row_view(*sin, "qk_norm_rope sin"));
    VORTEX_RETURN_IF_ERROR(expect_dtype(cv, DType::kBF16, "qk_norm_rope cos"));
    VORTEX_RETURN_IF_ERROR(expect_dtype(sv, DType::kBF16, "qk_norm_rope sin"));
    VORTEX_RETURN_IF_ERROR(expect_shape(cv, qv.rows, rope_dims / 2, "qk_norm_rope cos"));
    VORTEX_RETURN_IF_ERROR(expect_shape(sv, qv.rows, rope_dims / 2, "qk_norm_rope sin"));
  }
  if (qv.rows == 0) return Status::Ok();
  QkOperand qo{static_cast<uint16_t*>(qv.ptr), qv.ld, static_cast<const uint16_t*>(qw)};
  QkOperand ko{static_cast<uint16_t*>(kv.ptr), kv.ld, static_cast<const uint16_t*>(kw)};
  const int used_rope = cos ? rope_dims : 0;
  RowView qwv{const_cast<void*>(qw), 1, head_dim, head_dim, DType::kBF16};
  RowView kwv{const_cast<void*>(kw), 1, head_dim, head_dim, DType::kBF16};
  bool vec = (head_dim == 64 || head_dim == 128 || head_dim == 256) && (used_rope / 2) % 8 == 0 &&
             vector_ok({&qv, &kv, &qwv, &kwv});
  if (vec && cos != nullptr) {  // cos/sin rows are read as 16-byte vectors too: aligned base and ld
    for (const RowView* v : {&cv, &sv})
      if (reinterpret_cast<uintptr_t>(v->ptr) % 16 != 0 || v->ld % 8 != 0) vec = false;
  }
  if (vec) {  // (used_rope / 2) % 8 == 0, so used_rope is a multiple of 16: the 128 and 64 paths cover it
    if (head_dim == 128) return launch_qk_quad(qo, ko, cv, sv, qv.rows, num_heads, used_rope, eps, stream);
    if (head_dim == 64) return launch_qk_pair(qo, ko, cv, sv, qv.rows, num_heads, used_rope, eps, stream);
    return launch_qk_vec<32>(qo, ko, cv, sv, qv.rows, num_heads, used_rope, eps, stream);
  }
  const int64_t blocks = (qv.rows * num_heads + kWarpsPerBlock - 1) / kWarpsPerBlock;
  if (blocks > kMaxGridX) return invalid_argument("qk_norm_rope: tensor too large");
  qk_norm_rope_kernel<<<dim3(static_cast<unsigned>(blocks), 2), kWarpsPerBlock * 32, 0, stream>>>(
      qo, ko, static_cast<const uint16_t*>(cv.ptr), cv.ld, static_cast<const uint16_t*>(sv.ptr), sv.ld, qv.rows,
      num_heads, head_dim, cos ? rope_dims : 0, eps);
  VORTEX_CUDA_LAUNCH_CHECK("qk_norm_rope_kernel");
  return Status::Ok();
}

}  // namespace vortex::cuda_ops
