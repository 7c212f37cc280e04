// Conv3dCudnn (see src/cuda/ops/encoder_ops.h): the video VAE encoder's convolutions through cuDNN's legacy
// convolution API on channels-last tensors. Per (input shape, filter shape, strides, math mode) the descriptors and
// the fastest algorithm that cudnnFindConvolutionForwardAlgorithmEx measures on the call's own buffers are kept; with
// allow_tf32 the search runs under CUDNN_TENSOR_OP_MATH (torch's default for cuDNN convolutions), without it under
// CUDNN_FMA_MATH.
// Every cuDNN status is checked. Tested in tests/cuda/encoder_ops_test.cpp against src/ref/encoder_ops.cpp.
#include <cudnn.h>

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "cuda/check.h"
#include "cuda/ops/encoder_ops.h"
#include "gemm/gemm.h"  // cuda_malloc_resource
#include "ref/encoder_ops.h"

namespace vortex::cuda_ops {
namespace {

Status cudnn_error(cudnnStatus_t st, const char* what) {
  char last[1024] = {0};
  cudnnGetLastErrorString(last, sizeof(last));
  return Status(ErrorCode::kCudnn, std::string("conv3d: ") + what + " failed: " + cudnnGetErrorString(st) +
                                       (last[0] ? std::string(" (") + last + ")" : std::string()));
}

#define VORTEX_CONV_CUDNN(expr, what)                                                       \
  do {                                                                                      \
    cudnnStatus_t vortex_conv_st_ = (expr);                                                 \
    if (vortex_conv_st_ != CUDNN_STATUS_SUCCESS) return cudnn_error(vortex_conv_st_, what); \
  } while (0)

struct Key {
  std::vector<int64_t> x, w;
  int st, ss;
  bool tf32;
  bool operator<(const Key& o) const { return std::tie(x, w, st, ss, tf32) < std::tie(o.x, o.w, o.st, o.ss, o.tf32); }
};

struct Plan {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr, b = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  cudnnConvolutionFwdAlgo_t algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  size_t workspace = 0;
  ~Plan() {
    if (x) cudnnDestroyTensorDescriptor(x);
    if (y) cudnnDestroyTensorDescriptor(y);
    if (b) cudnnDestroyTensorDescriptor(b);
    if (w) cudnnDestroyFilterDescriptor(w);
    if (conv) cudnnDestroyConvolutionDescriptor(conv);
  }
};

// NCDHW dimensions of a channels-last [B, T, H, W, C] tensor, as cuDNN's NHWC format takes them; with `planar`
// (one frame in and out) the 2-D NCHW dimensions [B * T, C, H, W], so single frames run as 2-D convolutions.
std::vector<int> ncdhw(const Tensor& t, bool planar) {
  if (planar)
    return {static_cast<int>(t.dim(0) * t.dim(1)), static_cast<int>(t.dim(4)), static_cast<int>(t.dim(2)),
            static_cast<int>(t.dim(3))};
  return {static_cast<int>(t.dim(0)), static_cast<int>(t.dim(4)), static_cast<int>(t.dim(1)),
          static_cast<int>(t.dim(2)), static_cast<int>(t.dim(3))};
}

class CudnnConv3d final : public Conv3dCudnn {
 public:
  ~CudnnConv3d() override {
    plans_.clear();
    workspace_.reset();
    if (handle_) cudnnDestroy(handle_);
  }
  Status init(std::shared_ptr<DeviceMemoryResource> memory) {
    memory_ = std::move(memory);
    VORTEX_CONV_CUDNN(cudnnCreate(&handle_), "cudnnCreate (is libcudnn.so.9 on the library path?)");
    return Status::Ok();
  }

  Status run(const Tensor& x, const Tensor& weight, const Tensor& bias, int stride_t, int stride_s, bool allow_tf32,
             Tensor& out, cudaStream_t stream) override {
    VORTEX_RETURN_IF_ERROR(ref::check_conv3d(x, weight, bias, stride_t, stride_s, out));
    for (const Tensor* t : {&x, &weight, &bias, static_cast<const Tensor*>(&out)})
      if (t->device() != Device::kCuda) return invalid_argument("conv3d: every operand must be a CUDA tensor");
    for (const Tensor* q : {&x, &weight, static_cast<const Tensor*>(&out)})
      if (q->numel() > INT32_MAX) return invalid_argument("conv3d: a tensor beyond 2^31 - 1 elements; split the batch");
    VORTEX_CONV_CUDNN(cudnnSetStream(handle_, stream), "cudnnSetStream");
    Key key{std::vector<int64_t>(x.shape().begin(), x.shape().end()),
            std::vector<int64_t>(weight.shape().begin(), weight.shape().end()), stride_t, stride_s, allow_tf32};
    auto it = plans_.find(key);
    if (it == plans_.end()) {
      VORTEX_ASSIGN_OR_RETURN(std::unique_ptr<Plan> plan, build(x, weight, out, stride_t, stride_s, allow_tf32));
      it = plans_.emplace(key, std::move(plan)).first;
    }
    Plan& p = *it->second;
    VORTEX_RETURN_IF_ERROR(
        workspace_.reserve(memory_, std::max<size_t>(p.workspace, 1)).with_context("conv3d workspace"));
    const float one = 1.0f, zero = 0.0f;
    VORTEX_CONV_CUDNN(cudnnConvolutionForward(handle_, &one, p.x, x.raw_data(), p.w, weight.raw_data(), p.conv, p.algo,
                                              workspace_.data(), p.workspace, &zero, p.y, out.raw_data()),
                      "cudnnConvolutionForward");
    VORTEX_CONV_CUDNN(cudnnAddTensor(handle_, &one, p.b, bias.raw_data(), &one, p.y, out.raw_data()),
                      "cudnnAddTensor (bias)");
    VORTEX_CUDA_LAUNCH_CHECK("cudnnConvolutionForward");
    return Status::Ok();
  }

 private:
  Result<std::unique_ptr<Plan>> build(const Tensor& x, const Tensor& weight, Tensor& out, int st, int ss, bool tf32) {
    auto p = std::make_unique<Plan>();
    VORTEX_CONV_CUDNN(cudnnCreateTensorDescriptor(&p->x), "cudnnCreateTensorDescriptor");
    VORTEX_CONV_CUDNN(cudnnCreateTensorDescriptor(&p->y), "cudnnCreateTensorDescriptor");
    VORTEX_CONV_CUDNN(cudnnCreateTensorDescriptor(&p->b), "cudnnCreateTensorDescriptor");
    VORTEX_CONV_CUDNN(cudnnCreateFilterDescriptor(&p->w), "cudnnCreateFilterDescriptor");
    VORTEX_CONV_CUDNN(cudnnCreateConvolutionDescriptor(&p->conv), "cudnnCreateConvolutionDescriptor");
    // One frame in and one out (the keyframe path): a 2-D convolution over [B, C, H, W].
    const bool planar = x.dim(1) == 1 && weight.dim(1) == 1;
    const int nd = planar ? 4 : 5, spatial = nd - 2;
    std::vector<int> xd = ncdhw(x, planar), yd = ncdhw(out, planar), wd = ncdhw(weight, planar), bd(nd, 1);
    bd[1] = yd[1];
    VORTEX_CONV_CUDNN(cudnnSetTensorNdDescriptorEx(p->x, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, nd, xd.data()), "x desc");
    VORTEX_CONV_CUDNN(cudnnSetTensorNdDescriptorEx(p->y, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, nd, yd.data()), "y desc");
    VORTEX_CONV_CUDNN(cudnnSetTensorNdDescriptorEx(p->b, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, nd, bd.data()),
                      "bias desc");
    VORTEX_CONV_CUDNN(cudnnSetFilterNdDescriptor(p->w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC, nd, wd.data()),
                      "filter desc");
    const int pad[3] = {0, 0, 0}, dil[3] = {1, 1, 1};
    const int stride3[3] = {st, ss, ss}, stride2[2] = {ss, ss};
    VORTEX_CONV_CUDNN(cudnnSetConvolutionNdDescriptor(p->conv, spatial, pad, planar ? stride2 : stride3, dil,
                                                      CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
                      "convolution desc");
    int out_dims[5] = {0};
    VORTEX_CONV_CUDNN(cudnnGetConvolutionNdForwardOutputDim(p->conv, p->x, p->w, nd, out_dims), "output dims");
    for (int i = 0; i < nd; ++i)
      if (out_dims[i] != yd[static_cast<size_t>(i)])
        return internal_error("conv3d: cuDNN's output shape differs from " + out.describe());
    VORTEX_CONV_CUDNN(cudnnSetConvolutionMathType(p->conv, tf32 ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH), "math type");
    // Measure the algorithms on the call's buffers with a workspace of up to 1 GiB.
    constexpr size_t kMaxWorkspace = size_t{1} << 30;
    VORTEX_RETURN_IF_ERROR(workspace_.reserve(memory_, kMaxWorkspace).with_context("conv3d search workspace"));
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int found = 0;
    VORTEX_CONV_CUDNN(cudnnFindConvolutionForwardAlgorithmEx(
                          handle_, p->x, x.raw_data(), p->w, weight.raw_data(), p->conv, p->y, out.raw_data(),
                          CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &found, perf, workspace_.data(), kMaxWorkspace),
                      "cudnnFindConvolutionForwardAlgorithmEx");
    for (int i = 0; i < found; ++i) {
      if (perf[i].status != CUDNN_STATUS_SUCCESS) continue;
      p->algo = perf[i].algo;
      p->workspace = perf[i].memory;
      // With TF32 allowed, run the algorithm in the math mode it was measured in; otherwise the descriptor keeps
      // CUDNN_FMA_MATH, the mode the search ran under.
      if (tf32)
        VORTEX_CONV_CUDNN(cudnnSetConvolutionMathType(p->conv, perf[i].mathType), "math type of the chosen algorithm");
      return p;
    }
    return unsupported("conv3d: cuDNN found no algorithm for x " + x.describe() + ", weight " + weight.describe() +
                       (tf32 ? "" : " in FP32 (FMA) math"));
  }

  cudnnHandle_t handle_ = nullptr;
  std::shared_ptr<DeviceMemoryResource> memory_;
  DeviceBuffer workspace_;
  std::map<Key, std::unique_ptr<Plan>> plans_;
};

}  // namespace

Result<std::unique_ptr<Conv3dCudnn>> Conv3dCudnn::create(std::shared_ptr<DeviceMemoryResource> memory) {
  auto c = std::make_unique<CudnnConv3d>();
  VORTEX_RETURN_IF_ERROR(c->init(memory ? std::move(memory) : cuda_malloc_resource()));
  return std::unique_ptr<Conv3dCudnn>(std::move(c));
}

}  // namespace vortex::cuda_ops
