// vision_pixel_rows on the GPU (see src/cuda/ops/vision_prep.h): one thread per output element; the row gives
// the patch (merge-block order), the column the channel and the pixel inside the patch (the temporal index only
// repeats the frame). The u8 image is read through the read-only cache; the BF16 rows are written coalesced.
#include "cuda/ops/vae_common.cuh"
#include "cuda/ops/vision_prep.h"
#include "ref/vision_prep.h"

namespace vortex::cuda_ops {
namespace {

struct PixelNorm {
  float mean255[3], std255[3];
};

__global__ void __launch_bounds__(kEltThreads)
    vision_pixel_rows_kernel(const uint8_t* __restrict__ rgb, uint16_t* __restrict__ out, int64_t total, int width,
                             int cols, int patch, int tpp, int merge, int blocks_w, PixelNorm norm) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kEltThreads + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * kEltThreads) {
    const int64_t row = i / cols;
    const int col = static_cast<int>(i - row * cols);
    const int64_t ic = row % merge, ir = (row / merge) % merge, bc = (row / (merge * merge)) % blocks_w,
                  br = row / (static_cast<int64_t>(merge) * merge * blocks_w);
    const int c = col / tpp, in_patch = col % (patch * patch), py = in_patch / patch, px = in_patch % patch;
    const int64_t y = (br * merge + ir) * patch + py, x = (bc * merge + ic) * patch + px;
    const float v = static_cast<float>(__ldg(rgb + (y * width + x) * 3 + c));
    out[i] = f32_to_bf16(__fdiv_rn(__fsub_rn(v, norm.mean255[c]), norm.std255[c]));
  }
}

}  // namespace

Status vision_pixel_rows(const Tensor& rgb, const std::array<float, 3>& mean255, const std::array<float, 3>& std255,
                         int patch, int temporal_patch, int merge, Tensor& out, cudaStream_t stream) {
  VORTEX_RETURN_IF_ERROR(ref::check_vision_pixel_rows(rgb, std255, patch, temporal_patch, merge, out));
  if (rgb.device() != Device::kCuda) return invalid_argument("vision_pixel_rows: rgb and out must be CUDA tensors");
  const int64_t total = out.numel();
  if (rgb.dim(1) > INT32_MAX / 3 || out.dim(1) > INT32_MAX)
    return invalid_argument("vision_pixel_rows: the image is too wide");
  PixelNorm norm{};
  for (int c = 0; c < 3; ++c) {
    norm.mean255[c] = mean255[static_cast<size_t>(c)];
    norm.std255[c] = std255[static_cast<size_t>(c)];
  }
  const int64_t blocks = std::min<int64_t>((total + kEltThreads - 1) / kEltThreads, 1 << 20);
  const int grid_w = static_cast<int>(rgb.dim(1) / patch);
  vision_pixel_rows_kernel<<<static_cast<unsigned>(blocks), kEltThreads, 0, stream>>>(
      rgb.data<uint8_t>(), out.data<uint16_t>(), total, static_cast<int>(rgb.dim(1)), static_cast<int>(out.dim(1)),
      patch, temporal_patch * patch * patch, merge, grid_w / merge, norm);
  VORTEX_CUDA_LAUNCH_CHECK("vision_pixel_rows_kernel");
  return Status::Ok();
}

}  // namespace vortex::cuda_ops
