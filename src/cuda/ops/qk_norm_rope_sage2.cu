// qk_norm_rope_sage2: qk_norm_rope's H3 path (head_dim 128, 4 lanes per head; qk_norm_rope.cuh) on Q and K in
// place, and in the same pass Sage2's Q quantization of the normed Q: INT8 groups of rows {r, r + 8} of each
// 16-row slab (scale amax/127 + 1e-7, round half away; sage2_quantize.cuh) into the Sage2Workspace layout of
// its mainloop, padding rows zero. A Q group needs only two rows, so the two 4-lane groups of a pair take rows
// r and r + 8 of one head and reduce the amax over 8 lanes; pairs run head-major (rows r .. r + 3 of one head
// per warp) so the INT8 stores of a warp fill whole 64-byte runs of the tiled layout. The K/V pre-pass stays
// separate (sage2_quantize_kv: K smoothing needs the mean over all tokens). E0 vs qk_norm_rope then
// sage2_quantize in tests/attention/qk_norm_rope_sage2_test.cpp; timed by bench/qk_norm_rope_sage2_bench.cpp.
#include <string>

#include "cuda/attention/sage2_attention.h"
#include "cuda/attention/sage2_quantize.cuh"
#include "cuda/ops/ops_internal.h"
#include "cuda/ops/qk_norm_rope.cuh"
#include "ref/sage2_attention.h"

namespace vortex {
namespace cuda_ops {
namespace {

// 4 warps per CTA: at 86 registers per thread (ptxas, sm_90a) a CTA of 8 warps fits twice on an SM (16 warps),
// one of 4 warps five times (20); memory-bound, so the higher occupancy (not measured against 8 warps).
constexpr int kFusedWarps = 4;

struct QkOperand {
  uint16_t* ptr;  // [rows, heads * 128] bf16 view, row stride ld
  int64_t ld;
  const uint16_t* weight;  // [128] bf16
};

struct QuantizedQ {
  int8_t* data;  // [heads, padded, 128] int8, Sage2Workspace layout
  float* scale;  // [heads, padded / 16 * 8] fp32
  int64_t padded;
  bool tiled;  // sage2_tiled_pos (wgmma) or rows permuted by sage2_qk_byte_pos (mma.sync)
};

// blockIdx.y == 1: K, one (row, head) item per 4-lane group (qk_norm_rope's quad kernel). blockIdx.y == 0: Q,
// groups 2i and 2i + 1 hold rows r and r + 8 of pair i = (head * padded / 16 + slab) * 8 + r, for every padded
// row (rows >= `rows` are not read or written in bf16; their INT8 bytes are zeros).
__global__ void __launch_bounds__(kFusedWarps * 32)
    qk_norm_rope_sage2_kernel(QkOperand q, QkOperand k, const uint16_t* __restrict__ cos, int64_t ldc,
                              const uint16_t* __restrict__ sin, int64_t lds, int64_t rows, int heads, int rope_dims,
                              float eps, QuantizedQ qq) {
  __shared__ uint4 normed[kFusedWarps][kQuadHeadsPerWarp][kQuadPitch];  // per warp: the groups' normalized heads
  const bool is_q = blockIdx.y == 0;
  const QkOperand p = is_q ? q : k;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int l = lane % kQuadLanes;
  const int64_t group = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kQuadLanes;
  const int64_t slabs = qq.padded / kSage2SlabQ;
  const int64_t items = is_q ? slabs * kSage2SlabQ * heads : rows * heads;  // Q: 2 groups per pair
  // Groups ascend with the lane, so a warp whose first group is past the end is past it entirely.
  if ((static_cast<int64_t>(blockIdx.x) * blockDim.x + warp * 32) / kQuadLanes >= items) return;
  const bool in_range = group < items;  // out-of-range lanes of the last warp stay in the shuffles
  int64_t row = 0, slab = 0;
  int h = 0, r = 0;
  if (is_q) {
    const int64_t pair = group / 2;
    r = static_cast<int>(pair % kSage2QGroupsPerSlab);
    slab = (pair / kSage2QGroupsPerSlab) % slabs;
    h = static_cast<int>(pair / (kSage2QGroupsPerSlab * slabs));
    row = slab * kSage2SlabQ + r + 8 * (group % 2);
  } else {
    row = group / heads;
    h = static_cast<int>(group % heads);
  }
  const bool real = in_range && row < rows;  // a token of the input (not padding)
  const int64_t at_row = real ? row : 0;
  uint4* xh = reinterpret_cast<uint4*>(p.ptr + at_row * p.ld + static_cast<int64_t>(real ? h : 0) * 128);
  uint4 x[kQuadChunks], wv[kQuadChunks], o[kQuadChunks];
#pragma unroll
  for (int m = 0; m < kQuadChunks; ++m) x[m] = real ? xh[l + 4 * m] : make_uint4(0, 0, 0, 0);
#pragma unroll
  for (int m = 0; m < kQuadChunks; ++m) wv[m] = __ldg(reinterpret_cast<const uint4*>(p.weight) + l + 4 * m);
  quad_head(x, wv, normed[warp][lane / kQuadLanes], cos + at_row * ldc, sin + at_row * lds, l, rope_dims / 8,
            rope_dims / 16, eps, o);
  if (real) {
#pragma unroll
    for (int m = 0; m < kQuadChunks; ++m) xh[l + 4 * m] = o[m];
  }
  if (!is_q) return;  // block-uniform

  // Sage2 Q group amax over rows r and r + 8 (8 lanes), from the bf16 values just written.
  float amax = 0.0f;
  if (real) {
#pragma unroll
    for (int m = 0; m < kQuadChunks; ++m)
#pragma unroll
      for (int k2 = 0; k2 < 4; ++k2)
        amax = fmaxf(amax, fmaxf(fabsf(bf16_lo(word(o[m], k2))), fabsf(bf16_hi(word(o[m], k2)))));
  }
#pragma unroll
  for (int off = 1; off < 2 * kQuadLanes; off *= 2) amax = fmaxf(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, off));
  if (!in_range) return;
  const float scale = sage2_int8_scale(amax);
  int8_t* head_out = qq.data + static_cast<int64_t>(h) * qq.padded * kSage2HeadDim;
#pragma unroll
  for (int m = 0; m < kQuadChunks; ++m) {
    const int c = l + 4 * m;  // elements 8c .. 8c + 7 of the row
    uint32_t packed[2] = {0u, 0u};
    if (real) {
#pragma unroll
      for (int k2 = 0; k2 < 4; ++k2) {
        const uint32_t w = word(o[m], k2);
        const uint32_t lo = static_cast<uint8_t>(sage2_int8(bf16_lo(w), scale));
        const uint32_t hi = static_cast<uint8_t>(sage2_int8(bf16_hi(w), scale));
        packed[k2 / 2] |= (lo | (hi << 8)) << (16 * (k2 % 2));  // element 8c + e at byte e % 4 of word e / 4
      }
    }
    if (qq.tiled) {  // 8 consecutive bytes inside one 16-byte core-matrix row
      *reinterpret_cast<uint2*>(head_out + sage2_tiled_pos(row, 8 * c)) = make_uint2(packed[0], packed[1]);
    } else {  // each run of 4 elements (d % 4 == 0) lands on 4 consecutive bytes
      *reinterpret_cast<uint32_t*>(head_out + row * kSage2HeadDim + sage2_qk_byte_pos(8 * c)) = packed[0];
      *reinterpret_cast<uint32_t*>(head_out + row * kSage2HeadDim + sage2_qk_byte_pos(8 * c + 4)) = packed[1];
    }
  }
  if (l == 0 && group % 2 == 0)  // one writer per group (the row-r group's first lane)
    qq.scale[(static_cast<int64_t>(h) * slabs + slab) * kSage2QGroupsPerSlab + r] = scale;
}

}  // namespace
}  // namespace cuda_ops

Status qk_norm_rope_sage2(Tensor& q, Tensor& k, const Tensor& q_weight, const Tensor& k_weight, float eps,
                          const Tensor* cos, const Tensor* sin, int rope_dims, int num_heads, int head_dim,
                          cudaStream_t stream, Sage2Workspace& ws) {
  using namespace cuda_ops;
  if (head_dim != kSage2HeadDim)
    return unsupported("qk_norm_rope_sage2: head_dim " + std::to_string(head_dim) +
                       " (the Sage2 kernels are written for 128); run qk_norm_rope + sage2_quantize_q");
  if (num_heads <= 0) return invalid_argument("qk_norm_rope_sage2: num_heads must be positive");
  VORTEX_ASSIGN_OR_RETURN(RowView qv, row_view(q, "qk_norm_rope_sage2 q"));
  VORTEX_ASSIGN_OR_RETURN(RowView kv, row_view(k, "qk_norm_rope_sage2 k"));
  VORTEX_RETURN_IF_ERROR(expect_dtype(qv, DType::kBF16, "qk_norm_rope_sage2 q"));
  VORTEX_RETURN_IF_ERROR(expect_dtype(kv, DType::kBF16, "qk_norm_rope_sage2 k"));
  const int64_t width = static_cast<int64_t>(num_heads) * head_dim;
  VORTEX_RETURN_IF_ERROR(expect_shape(qv, qv.rows, width, "qk_norm_rope_sage2 q"));
  VORTEX_RETURN_IF_ERROR(expect_shape(kv, qv.rows, width, "qk_norm_rope_sage2 k"));
  if (qv.rows <= 0) return invalid_argument("qk_norm_rope_sage2: q must have at least one row");
  VORTEX_ASSIGN_OR_RETURN(const void* qw,
                          device_vector(q_weight, head_dim, DType::kBF16, "qk_norm_rope_sage2 q_weight"));
  VORTEX_ASSIGN_OR_RETURN(const void* kw,
                          device_vector(k_weight, head_dim, DType::kBF16, "qk_norm_rope_sage2 k_weight"));
  if (!(eps >= 0.0f)) return invalid_argument("qk_norm_rope_sage2: eps must be >= 0");
  RowView cv{}, sv{};
  if ((cos == nullptr) != (sin == nullptr))
    return invalid_argument("qk_norm_rope_sage2: pass both cos and sin or neither");
  if (cos != nullptr) {
    if (rope_dims <= 0 || rope_dims % 2 != 0 || rope_dims > head_dim)
      return invalid_argument("qk_norm_rope_sage2: rope_dims must be even and in (0, head_dim], got " +
                              std::to_string(rope_dims));
    VORTEX_ASSIGN_OR_RETURN(cv, row_view(*cos, "qk_norm_rope_sage2 cos"));
    VORTEX_ASSIGN_OR_RETURN(sv, row_view(*sin, "qk_norm_rope_sage2 sin"));
    VORTEX_RETURN_IF_ERROR(expect_dtype(cv, DType::kBF16, "qk_norm_rope_sage2 cos"));
    VORTEX_RETURN_IF_ERROR(expect_dtype(sv, DType::kBF16, "qk_norm_rope_sage2 sin"));
    VORTEX_RETURN_IF_ERROR(expect_shape(cv, qv.rows, rope_dims / 2, "qk_norm_rope_sage2 cos"));
    VORTEX_RETURN_IF_ERROR(expect_shape(sv, qv.rows, rope_dims / 2, "qk_norm_rope_sage2 sin"));
  }
  const int used_rope = cos ? rope_dims : 0;
  RowView qwv{const_cast<void*>(qw), 1, head_dim, head_dim, DType::kBF16};
  RowView kwv{const_cast<void*>(kw), 1, head_dim, head_dim, DType::kBF16};
  bool vec = used_rope % 16 == 0 && vector_ok({&qv, &kv, &qwv, &kwv});
  if (vec && cos != nullptr) {  // cos/sin rows are read as 16-byte vectors too
    for (const RowView* v : {&cv, &sv})
      if (reinterpret_cast<uintptr_t>(v->ptr) % 16 != 0 || v->ld % 8 != 0) vec = false;
  }
  if (!vec)
    return unsupported(
        "qk_norm_rope_sage2: needs 16-byte aligned q/k/cos/sin rows (row strides % 8 == 0) and rope_dims % 16 == 0; "
        "run qk_norm_rope + sage2_quantize_q");
  VORTEX_RETURN_IF_ERROR(ws.reserve(num_heads, qv.rows));
  ws.q_pending_seq = 0;
  const int64_t q_groups = ws.padded * num_heads;  // 2 groups per (slab, r, head) pair
  const int64_t groups = std::max(q_groups, qv.rows * num_heads);
  constexpr int kGroupsPerBlock = kFusedWarps * 32 / kQuadLanes;
  const int64_t blocks = (groups + kGroupsPerBlock - 1) / kGroupsPerBlock;
  if (blocks > kMaxGridX) return invalid_argument("qk_norm_rope_sage2: tensor too large");
  QkOperand qo{static_cast<uint16_t*>(qv.ptr), qv.ld, static_cast<const uint16_t*>(qw)};
  QkOperand ko{static_cast<uint16_t*>(kv.ptr), kv.ld, static_cast<const uint16_t*>(kw)};
  const QuantizedQ qq{ws.q_int8, ws.q_scale, ws.padded, sage2_tiled_layout(ws.mainloop)};
  qk_norm_rope_sage2_kernel<<<dim3(static_cast<unsigned>(blocks), 2), kFusedWarps * 32, 0, stream>>>(
      qo, ko, static_cast<const uint16_t*>(cv.ptr), cv.ld, static_cast<const uint16_t*>(sv.ptr), sv.ld, qv.rows,
      num_heads, used_rope, eps, qq);
  VORTEX_CUDA_LAUNCH_CHECK("qk_norm_rope_sage2_kernel");
  ws.q_pending_seq = qv.rows;
  ws.q_pending_heads = num_heads;
  ws.q_pending_layout = ws.mainloop;
  return Status::Ok();
}

}  // namespace vortex
