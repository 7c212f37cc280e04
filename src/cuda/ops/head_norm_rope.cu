// head_norm_rope: in place on ONE strided view x [S, heads * head_dim] (q or k columns of the conditioner's
// [q | k | v] buffer): per head transformers' Qwen3 q_norm / k_norm, n = R(fp32(R(fp32(x * r)) * w)) with the
// canonical FP64 sum of squares over head_dim, then qk_norm_rope's rotate-half RoPE y = R(R(n * cos) + R(rot(n) *
// sin)), rot = [-n2, n1], on dims < rope_dims. One operand per call, so q (64 heads) and k (8 heads) of GQA each
// take one launch. One warp per (row, head), the head staged in shared memory (the scalar path of
// qk_norm_rope.cu: at the conditioner's 500 x 72 heads of 128 the op moves ~18 MB, a few microseconds).
// E0 against ref::head_norm_rope in tests/cuda/text_encoder_ops_test.cpp.
#include "cuda/ops/ops_internal.h"
#include "cuda/ops/row_kernels.cuh"

namespace vortex::cuda_ops {
namespace {

constexpr int kMaxHeadDim = 256;
constexpr int kWarpsPerBlock = 8;

__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    head_norm_rope_kernel(uint16_t* x, int64_t ldx, const uint16_t* __restrict__ weight,
                          const uint16_t* __restrict__ cos, int64_t ldc, const uint16_t* __restrict__ sin, int64_t lds,
                          int64_t rows, int heads, int hd, int rope_dims, float eps) {
  __shared__ float normed[kWarpsPerBlock][kMaxHeadDim];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t item = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + warp;
  if (item >= rows * heads) return;  // the whole warp exits together; only warp-level sync below
  const int64_t row = item / heads;
  const int h = static_cast<int>(item % heads);
  uint16_t* xh = x + row * ldx + static_cast<int64_t>(h) * hd;  // [hd] bf16, this head
  float* nv = normed[warp];
  for (int j = lane; j < hd; j += 32) nv[j] = bf16_to_f32(xh[j]);
  __syncwarp();
  const double ss = warp_canonical_sum_squares(hd, [&](int j) { return static_cast<double>(nv[j]); });
  const float rinv = inverse_rms(ss, hd, eps);
  __syncwarp();
  for (int j = lane; j < hd; j += 32) {
    const float n1 = round_bf16(__fmul_rn(nv[j], rinv));  // first rounding: R(fp32(x * r))
    nv[j] = round_bf16(__fmul_rn(n1, bf16_to_f32(weight[j])));
  }
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

}  // namespace

Status head_norm_rope(Tensor& x, const Tensor& weight, float eps, const Tensor* cos, const Tensor* sin, int rope_dims,
                      int num_heads, int head_dim, cudaStream_t stream) {
  VORTEX_ASSIGN_OR_RETURN(RowView xv, row_view(x, "head_norm_rope x"));
  VORTEX_RETURN_IF_ERROR(expect_dtype(xv, DType::kBF16, "head_norm_rope x"));
  if (num_heads <= 0 || head_dim <= 0 || head_dim > kMaxHeadDim)
    return unsupported("head_norm_rope: head_dim must be in [1, " + std::to_string(kMaxHeadDim) + "], got " +
                       std::to_string(head_dim) + " (heads " + std::to_string(num_heads) + ")");
  VORTEX_RETURN_IF_ERROR(expect_shape(xv, xv.rows, static_cast<int64_t>(num_heads) * head_dim, "head_norm_rope x"));
  VORTEX_ASSIGN_OR_RETURN(const void* w, device_vector(weight, head_dim, DType::kBF16, "head_norm_rope weight"));
  if (!(eps >= 0.0f)) return invalid_argument("head_norm_rope: eps must be >= 0");
  if ((cos == nullptr) != (sin == nullptr)) return invalid_argument("head_norm_rope: pass both cos and sin or neither");
  RowView cv{}, sv{};
  if (cos != nullptr) {
    if (rope_dims <= 0 || rope_dims % 2 != 0 || rope_dims > head_dim)
      return invalid_argument("head_norm_rope: rope_dims must be even and in (0, head_dim], got " +
                              std::to_string(rope_dims));
    VORTEX_ASSIGN_OR_RETURN(cv, row_view(*cos, "head_norm_rope cos"));
    VORTEX_ASSIGN_OR_RETURN(sv, row_view(*sin, "head_norm_rope sin"));
    VORTEX_RETURN_IF_ERROR(expect_dtype(cv, DType::kBF16, "head_norm_rope cos"));
    VORTEX_RETURN_IF_ERROR(expect_dtype(sv, DType::kBF16, "head_norm_rope sin"));
    VORTEX_RETURN_IF_ERROR(expect_shape(cv, xv.rows, rope_dims / 2, "head_norm_rope cos"));
    VORTEX_RETURN_IF_ERROR(expect_shape(sv, xv.rows, rope_dims / 2, "head_norm_rope sin"));
  }
  if (xv.rows == 0) return Status::Ok();
  const int64_t blocks = (xv.rows * num_heads + kWarpsPerBlock - 1) / kWarpsPerBlock;
  if (blocks > kMaxGridX) return invalid_argument("head_norm_rope: tensor too large");
  head_norm_rope_kernel<<<static_cast<unsigned>(blocks), kWarpsPerBlock * 32, 0, stream>>>(
      static_cast<uint16_t*>(xv.ptr), xv.ld, static_cast<const uint16_t*>(w), static_cast<const uint16_t*>(cv.ptr),
      cv.ld, static_cast<const uint16_t*>(sv.ptr), sv.ld, xv.rows, num_heads, head_dim, cos ? rope_dims : 0, eps);
  VORTEX_CUDA_LAUNCH_CHECK("head_norm_rope_kernel");
  return Status::Ok();
}

}  // namespace vortex::cuda_ops
