// Vision tower and video VAE encoder kernels (see src/cuda/ops/encoder_ops.h). BF16 rows: gelu, rope_fp32 (one
// thread per rotary pair, so the in-place update reads both halves before writing), pos_embed_add. Channels-last
// f32 activations: pad_causal_reflect (a block row per output row) and group_norm_frames (one block per frame and
// group: an FP64 sum, an FP64 sum of squared deviations, then the FP32 affine and SiLU).
#include "cuda/ops/encoder_ops.h"
#include "cuda/ops/vae_common.cuh"
#include "ref/encoder_ops.h"

namespace vortex::cuda_ops {
namespace {

__global__ void __launch_bounds__(kEltThreads)
    gelu_kernel(uint16_t* __restrict__ x, int64_t ldx, int rows, int cols, bool tanh_approx) {
  for (int r = blockIdx.y; r < rows; r += gridDim.y)
    for (int c = blockIdx.x * kEltThreads + threadIdx.x; c < cols; c += gridDim.x * kEltThreads) {
      uint16_t& e = x[static_cast<int64_t>(r) * ldx + c];
      const float v = bf16_to_f32(e);
      float y;
      if (tanh_approx) {
        const float cube = __fmul_rn(__fmul_rn(v, v), v);
        const float inner = __fadd_rn(v, __fmul_rn(0.044715f, cube));
        const float t = tanhf(__fmul_rn(0.7978845608028654f, inner));
        y = __fmul_rn(__fmul_rn(0.5f, v), __fadd_rn(1.0f, t));
      } else {
        const float t = erff(__fmul_rn(v, 0.7071067811865476f));
        y = __fmul_rn(__fmul_rn(0.5f, v), __fadd_rn(1.0f, t));
      }
      e = f32_to_bf16(y);
    }
}

__global__ void __launch_bounds__(kEltThreads)
    rope_kernel(uint16_t* __restrict__ x, int64_t ldx, const float* __restrict__ cs, const float* __restrict__ sn,
                int rows, int heads, int head_dim) {
  const int half = head_dim / 2, pairs = heads * half;
  for (int r = blockIdx.y; r < rows; r += gridDim.y)
    for (int p = blockIdx.x * kEltThreads + threadIdx.x; p < pairs; p += gridDim.x * kEltThreads) {
      const int h = p / half, i = p % half;
      uint16_t* xh = x + static_cast<int64_t>(r) * ldx + static_cast<int64_t>(h) * head_dim;
      const float* cr = cs + static_cast<int64_t>(r) * head_dim;
      const float* sr = sn + static_cast<int64_t>(r) * head_dim;
      const float a = bf16_to_f32(xh[i]), b = bf16_to_f32(xh[i + half]);
      // out[i] = a cos[i] + (-b) sin[i]; out[i + half] = b cos[i + half] + a sin[i + half].
      const float lo = __fadd_rn(__fmul_rn(a, cr[i]), __fmul_rn(-b, sr[i]));
      const float hi = __fadd_rn(__fmul_rn(b, cr[i + half]), __fmul_rn(a, sr[i + half]));
      xh[i] = f32_to_bf16(lo);
      xh[i + half] = f32_to_bf16(hi);
    }
}

__global__ void __launch_bounds__(kEltThreads)
    pos_embed_kernel(uint16_t* __restrict__ x, int64_t ldx, const uint16_t* __restrict__ table,
                     const int32_t* __restrict__ index, const float* __restrict__ weight, int rows, int d) {
  for (int r = blockIdx.y; r < rows; r += gridDim.y)
    for (int j = blockIdx.x * kEltThreads + threadIdx.x; j < d; j += gridDim.x * kEltThreads) {
      const int32_t* ir = index + static_cast<int64_t>(r) * 4;
      const float* wr = weight + static_cast<int64_t>(r) * 4;
      float acc = __fmul_rn(bf16_to_f32(table[static_cast<int64_t>(ir[0]) * d + j]), wr[0]);
      for (int t = 1; t < 4; ++t)
        acc = __fadd_rn(acc, __fmul_rn(bf16_to_f32(table[static_cast<int64_t>(ir[t]) * d + j]), wr[t]));
      uint16_t& e = x[static_cast<int64_t>(r) * ldx + j];
      e = f32_to_bf16(__fadd_rn(bf16_to_f32(e), round_bf16(acc)));
    }
}

__device__ __forceinline__ int reflect_index(int i, int n) { return i < 0 ? -i : (i >= n ? 2 * (n - 1) - i : i); }

// blockIdx.y strides over output rows (b, frame, i), threads over the row's wo * c elements.
__global__ void __launch_bounds__(kEltThreads)
    pad_kernel(const float* __restrict__ x, float* __restrict__ out, int64_t rows, int t, int h, int w, int c,
               int front, int top, int left, int to, int ho, int wo) {
  const int row_elems = wo * c;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const int i = static_cast<int>(r % ho), f = static_cast<int>((r / ho) % to);
    const int64_t b = r / (static_cast<int64_t>(ho) * to);
    float* dst = out + r * row_elems;
    const float* src =
        f < front ? nullptr : x + ((b * t + (f - front)) * h + reflect_index(i - top, h)) * static_cast<int64_t>(w) * c;
    for (int e = blockIdx.x * kEltThreads + threadIdx.x; e < row_elems; e += gridDim.x * kEltThreads) {
      if (src == nullptr) {
        dst[e] = 0.0f;
      } else {
        const int j = e / c, ch = e - j * c;
        dst[e] = src[reflect_index(j - left, w) * c + ch];
      }
    }
  }
}

constexpr int kNormThreads = 256;

__device__ __forceinline__ double block_sum_f64(double v, double* shared) {
  for (int o = 16; o >= 1; o /= 2) v = __dadd_rn(v, __shfl_down_sync(0xFFFFFFFFu, v, o));
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < kNormThreads / 32 ? shared[lane] : 0.0;
    for (int o = 16; o >= 1; o /= 2) v = __dadd_rn(v, __shfl_down_sync(0xFFFFFFFFu, v, o));
    if (lane == 0) shared[0] = v;
  }
  __syncthreads();
  const double total = shared[0];
  __syncthreads();
  return total;
}

// Calls fn(offset of the element in the frame, channel within the group) for this thread's share of one group's
// [hw, cg] elements: with cg dividing the block, thread t always reads channel t % cg of pixels t / cg + i * (256 / cg)
// (no divisions in the loop); otherwise element k is pixel k / cg, channel k % cg.
template <typename Fn>
__device__ __forceinline__ void for_group_elements(int64_t hw, int c, int cg, Fn fn) {
  if (kNormThreads % cg == 0) {
    const int j = threadIdx.x % cg, step = kNormThreads / cg;
    for (int64_t p = threadIdx.x / cg; p < hw; p += step) fn(p * c + j, j);
  } else {
    for (int64_t k = threadIdx.x; k < hw * cg; k += kNormThreads) fn((k / cg) * c + k % cg, static_cast<int>(k % cg));
  }
}

// One block per (frame, group).
__global__ void __launch_bounds__(kNormThreads)
    group_norm_kernel(const float* __restrict__ x, float* __restrict__ out, const float* __restrict__ w,
                      const float* __restrict__ b, int64_t hw, int c, int groups, float eps, bool silu) {
  __shared__ double shared[kNormThreads / 32];
  const int64_t frame = blockIdx.x / groups;
  const int g = blockIdx.x % groups, cg = c / groups;
  const float* xs = x + frame * hw * c + static_cast<int64_t>(g) * cg;
  float* ys = out + frame * hw * c + static_cast<int64_t>(g) * cg;
  const double n = static_cast<double>(hw) * cg;
  double s = 0.0;
  for_group_elements(hw, c, cg, [&](int64_t at, int) { s = __dadd_rn(s, static_cast<double>(xs[at])); });
  const double mean = __ddiv_rn(block_sum_f64(s, shared), n);
  double q = 0.0;
  for_group_elements(hw, c, cg, [&](int64_t at, int) {
    const double d = __dsub_rn(static_cast<double>(xs[at]), mean);
    q = __fma_rn(d, d, q);
  });
  const double var = __ddiv_rn(block_sum_f64(q, shared), n);
  const float m = __double2float_rn(mean);
  const float rstd = __double2float_rn(__ddiv_rn(1.0, __dsqrt_rn(__dadd_rn(var, static_cast<double>(eps)))));
  for_group_elements(hw, c, cg, [&](int64_t at, int j) {
    const int ch = g * cg + j;
    float v = __fadd_rn(__fmul_rn(__fmul_rn(__fsub_rn(xs[at], m), rstd), w[ch]), b[ch]);
    if (silu) v = __fdiv_rn(v, __fadd_rn(1.0f, expf(-v)));
    ys[at] = v;
  });
}

Status check_device_ndhwc(const Tensor& t, const char* what) {
  VORTEX_RETURN_IF_ERROR(ref::check_ndhwc(t, what));
  if (t.device() != Device::kCuda) return invalid_argument(std::string(what) + " must be a CUDA tensor");
  return Status::Ok();
}

}  // namespace

Status gelu(Tensor& x, bool tanh_approx, cudaStream_t stream) {
  VORTEX_ASSIGN_OR_RETURN(RowView xv, vae_rows(x, "gelu x", DType::kBF16, -1, -1));
  if (xv.rows == 0 || xv.cols == 0) return Status::Ok();
  gelu_kernel<<<elementwise_grid(xv.rows, xv.cols), kEltThreads, 0, stream>>>(
      static_cast<uint16_t*>(xv.ptr), xv.ld, static_cast<int>(xv.rows), static_cast<int>(xv.cols), tanh_approx);
  VORTEX_CUDA_LAUNCH_CHECK("gelu_kernel");
  return Status::Ok();
}

Status rope_fp32(Tensor& x, const Tensor& cos, const Tensor& sin, int num_heads, int head_dim, cudaStream_t stream) {
  if (num_heads <= 0 || head_dim <= 0 || head_dim % 2)
    return invalid_argument("rope_fp32: num_heads must be positive and head_dim positive and even");
  VORTEX_ASSIGN_OR_RETURN(RowView xv,
                          vae_rows(x, "rope_fp32 x", DType::kBF16, -1, static_cast<int64_t>(num_heads) * head_dim));
  VORTEX_ASSIGN_OR_RETURN(const void* cp, device_vector(cos, xv.rows * head_dim, DType::kF32, "rope_fp32 cos"));
  VORTEX_ASSIGN_OR_RETURN(const void* sp, device_vector(sin, xv.rows * head_dim, DType::kF32, "rope_fp32 sin"));
  if (xv.rows == 0) return Status::Ok();
  rope_kernel<<<elementwise_grid(xv.rows, static_cast<int64_t>(num_heads) * head_dim / 2), kEltThreads, 0, stream>>>(
      static_cast<uint16_t*>(xv.ptr), xv.ld, static_cast<const float*>(cp), static_cast<const float*>(sp),
      static_cast<int>(xv.rows), num_heads, head_dim);
  VORTEX_CUDA_LAUNCH_CHECK("rope_kernel");
  return Status::Ok();
}

Status pos_embed_add(Tensor& x, const Tensor& table, const Tensor& index, const Tensor& weight, cudaStream_t stream) {
  VORTEX_ASSIGN_OR_RETURN(RowView xv, vae_rows(x, "pos_embed_add x", DType::kBF16, -1, -1));
  VORTEX_ASSIGN_OR_RETURN(RowView tv, vae_rows(table, "pos_embed_add table", DType::kBF16, -1, xv.cols));
  if (tv.ld != tv.cols) return invalid_argument("pos_embed_add: table must be contiguous");
  VORTEX_ASSIGN_OR_RETURN(const void* ip, device_vector(index, xv.rows * 4, DType::kI32, "pos_embed_add index"));
  VORTEX_ASSIGN_OR_RETURN(const void* wp, device_vector(weight, xv.rows * 4, DType::kF32, "pos_embed_add weight"));
  if (xv.rows == 0 || xv.cols == 0) return Status::Ok();
  // Indices are built by the caller from the grid (src/vision/vision_tower.cpp) and checked on the host there.
  pos_embed_kernel<<<elementwise_grid(xv.rows, xv.cols), kEltThreads, 0, stream>>>(
      static_cast<uint16_t*>(xv.ptr), xv.ld, static_cast<const uint16_t*>(tv.ptr), static_cast<const int32_t*>(ip),
      static_cast<const float*>(wp), static_cast<int>(xv.rows), static_cast<int>(xv.cols));
  VORTEX_CUDA_LAUNCH_CHECK("pos_embed_kernel");
  return Status::Ok();
}

Status pad_causal_reflect(const Tensor& x, int front, int top, int bottom, int left, int right, Tensor& out,
                          cudaStream_t stream) {
  VORTEX_RETURN_IF_ERROR(ref::check_pad_causal_reflect(x, front, top, bottom, left, right, out));
  VORTEX_RETURN_IF_ERROR(check_device_ndhwc(x, "pad_causal_reflect x"));
  VORTEX_RETURN_IF_ERROR(check_device_ndhwc(out, "pad_causal_reflect out"));
  const int64_t t = x.dim(1), h = x.dim(2), w = x.dim(3), c = x.dim(4);
  const Shape& want = out.shape();
  const int64_t rows = want[0] * want[1] * want[2], row_elems = want[3] * c;
  if (rows == 0 || row_elems == 0) return Status::Ok();
  if (row_elems > INT32_MAX) return invalid_argument("pad_causal_reflect: a row beyond 2^31 - 1 elements");
  pad_kernel<<<elementwise_grid(rows, row_elems), kEltThreads, 0, stream>>>(
      x.data<float>(), out.data<float>(), rows, static_cast<int>(t), static_cast<int>(h), static_cast<int>(w),
      static_cast<int>(c), front, top, left, static_cast<int>(want[1]), static_cast<int>(want[2]),
      static_cast<int>(want[3]));
  VORTEX_CUDA_LAUNCH_CHECK("pad_kernel");
  return Status::Ok();
}

Status group_norm_frames(const Tensor& x, const Tensor& weight, const Tensor& bias, int groups, float eps, bool silu,
                         Tensor& out, cudaStream_t stream) {
  VORTEX_RETURN_IF_ERROR(ref::check_group_norm_frames(x, weight, bias, groups, out));
  VORTEX_RETURN_IF_ERROR(check_device_ndhwc(x, "group_norm_frames x"));
  VORTEX_RETURN_IF_ERROR(check_device_ndhwc(out, "group_norm_frames out"));
  const int64_t c = x.dim(4), frames = x.dim(0) * x.dim(1), hw = x.dim(2) * x.dim(3);
  VORTEX_ASSIGN_OR_RETURN(const void* wp, device_vector(weight, c, DType::kF32, "group_norm_frames weight"));
  VORTEX_ASSIGN_OR_RETURN(const void* bp, device_vector(bias, c, DType::kF32, "group_norm_frames bias"));
  if (frames * groups > INT32_MAX) return invalid_argument("group_norm_frames: too many frames");
  if (frames == 0 || hw == 0) return Status::Ok();
  group_norm_kernel<<<static_cast<unsigned>(frames * groups), kNormThreads, 0, stream>>>(
      x.data<float>(), out.data<float>(), static_cast<const float*>(wp), static_cast<const float*>(bp), hw,
      static_cast<int>(c), groups, eps, silu);
  VORTEX_CUDA_LAUNCH_CHECK("group_norm_kernel");
  return Status::Ok();
}

}  // namespace vortex::cuda_ops
