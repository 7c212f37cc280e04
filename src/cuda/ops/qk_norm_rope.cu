// qk_norm_rope: per-head RMSNorm (canonical FP64 reduction over head_dim, one rounding) then
// rotate-half RoPE y = R(R(x * cos) + R(rot(x) * sin)) on dims < rope_dims (NUMERICS.md step 4), IN PLACE
// on strided Q/K views of the [S, 3 * I] QKV buffer (row stride 3 * I, head h at column h * head_dim), so
// the attention backend reads the result without layout copies. One warp per (row, head); the warp
// emulates the 256 canonical lanes. E0 against the CPU reference in tests/cuda/ops_test.cpp.
#include "cuda/ops/ops_internal.h"
#include "cuda/ops/row_kernels.cuh"

namespace vortex::cuda_ops {
namespace {

constexpr int kMaxHeadDim = 256;
constexpr int kWarpsPerBlock = 8;

struct QkOperand {
  uint16_t* ptr;           // [rows, heads * hd] bf16 view, row stride ld
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

}  // namespace

Status qk_norm_rope(Tensor& q, Tensor& k, const Tensor& q_weight, const Tensor& k_weight, float eps,
                    const Tensor* cos, const Tensor* sin, int rope_dims, int num_heads, int head_dim,
                    cudaStream_t stream) {
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
      return invalid_argument("qk_norm_rope: rope_dims must be even and in (0, head_dim], got " + std::to_string(rope_dims));
    VORTEX_ASSIGN_OR_RETURN(cv, row_view(*cos, "qk_norm_rope cos"));
    VORTEX_ASSIGN_OR_RETURN(sv, row_view(*sin, "qk_norm_rope sin"));
    VORTEX_RETURN_IF_ERROR(expect_dtype(cv, DType::kBF16, "qk_norm_rope cos"));
    VORTEX_RETURN_IF_ERROR(expect_dtype(sv, DType::kBF16, "qk_norm_rope sin"));
    VORTEX_RETURN_IF_ERROR(expect_shape(cv, qv.rows, rope_dims / 2, "qk_norm_rope cos"));
    VORTEX_RETURN_IF_ERROR(expect_shape(sv, qv.rows, rope_dims / 2, "qk_norm_rope sin"));
  }
  if (qv.rows == 0) return Status::Ok();
  const int64_t blocks = (qv.rows * num_heads + kWarpsPerBlock - 1) / kWarpsPerBlock;
  if (blocks > kMaxGridX) return invalid_argument("qk_norm_rope: tensor too large");
  QkOperand qo{static_cast<uint16_t*>(qv.ptr), qv.ld, static_cast<const uint16_t*>(qw)};
  QkOperand ko{static_cast<uint16_t*>(kv.ptr), kv.ld, static_cast<const uint16_t*>(kw)};
  qk_norm_rope_kernel<<<dim3(static_cast<unsigned>(blocks), 2), kWarpsPerBlock * 32, 0, stream>>>(
      qo, ko, static_cast<const uint16_t*>(cv.ptr), cv.ld, static_cast<const uint16_t*>(sv.ptr), sv.ld, qv.rows,
      num_heads, head_dim, cos ? rope_dims : 0, eps);
  VORTEX_CUDA_LAUNCH_CHECK("qk_norm_rope_kernel");
  return Status::Ok();
}

}  // namespace vortex::cuda_ops
