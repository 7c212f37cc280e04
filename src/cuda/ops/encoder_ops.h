// CUDA kernels of the vision tower and video VAE encoder ops (EncoderOps in src/backend/encoder_ops.h),
// each against its CPU program in src/ref/encoder_ops.cpp: rope_fp32, pos_embed_add and pad_causal_reflect are
// E0 (the same IEEE operations in the same order); gelu evaluates tanhf/erff with CUDA's libdevice (within one BF16
// ulp of the CPU's libm); group_norm_frames sums its FP64 statistics in a tree (E1). conv3d (cuDNN) is in
// src/cuda/ops/conv3d_cudnn.cpp. Tested in tests/cuda/encoder_ops_test.cpp (label gpu).
#pragma once

#include <cuda_runtime.h>

#include <memory>

#include "core/device_buffer.h"
#include "vortex/status.h"
#include "vortex/tensor.h"

namespace vortex::cuda_ops {

Status gelu(Tensor& x, bool tanh_approx, cudaStream_t stream);
Status rope_fp32(Tensor& x, const Tensor& cos, const Tensor& sin, int num_heads, int head_dim, cudaStream_t stream);
Status pos_embed_add(Tensor& x, const Tensor& table, const Tensor& index, const Tensor& weight, cudaStream_t stream);
Status pad_causal_reflect(const Tensor& x, int front, int top, int bottom, int left, int right, Tensor& out,
                          cudaStream_t stream);
Status group_norm_frames(const Tensor& x, const Tensor& weight, const Tensor& bias, int groups, float eps, bool silu,
                         Tensor& out, cudaStream_t stream);

// conv3d through cuDNN's convolution (legacy API: cudnnConvolutionForward on NDHWC tensors and KTRSC filters, then
// cudnnAddTensor for the bias). One algorithm per (shapes, strides, math) found once with
// cudnnFindConvolutionForwardAlgorithmEx and cached; the workspace comes from the backend's allocator.
class Conv3dCudnn {
 public:
  virtual ~Conv3dCudnn() = default;
  static Result<std::unique_ptr<Conv3dCudnn>> create(std::shared_ptr<DeviceMemoryResource> memory);
  virtual Status run(const Tensor& x, const Tensor& weight, const Tensor& bias, int stride_t, int stride_s,
                     bool allow_tf32, Tensor& out, cudaStream_t stream) = 0;
};

}  // namespace vortex::cuda_ops
