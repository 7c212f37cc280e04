// CudaBackend::linear_gelu_tanh and linear_residual: the vision tower's fc1 + GELU and its projections + residual
// add as one cuBLASLt BF16 GEMM each (gemm/gemm.h): GELU through CUBLASLT_EPILOGUE_GELU_BIAS, the residual as
// beta = 1 with C = D = x. The GEMM output is never rounded to BF16 before its tail, and the separate GELU and
// residual passes disappear. CPU programs in src/ref/encoder_ops.h; tested in tests/vision/vision_tower_cuda_test.cpp
// (VisionEpilogues) and through the tower; speed in bench/fl2va_encoders_bench.cpp.
#include <string>

#include "cuda/cuda_backend.h"
#include "gemm/gemm.h"

namespace vortex {
namespace {

Status check_bf16_matrix(const Tensor& t, const char* op, const char* name) {
  if (!t.defined() || t.device() != Device::kCuda || t.ndim() != 2 || t.dtype() != DType::kBF16 || t.stride(1) != 1)
    return invalid_argument(std::string(op) + ": " + name +
                            " must be a 2-D bf16 device tensor with unit column stride, got " +
                            (t.defined() ? t.describe() : "undefined"));
  return Status::Ok();
}

// The GemmCall of out[M, N] (+)= a[M, K] w[N, K]^T + bias, after the operand checks.
Result<GemmCall> epilogue_call(const Tensor& a, const LinearWeight& w, const Tensor* bias, const Tensor& out,
                               const char* op) {
  VORTEX_RETURN_IF_ERROR(check_bf16_matrix(a, op, "a"));
  VORTEX_RETURN_IF_ERROR(check_bf16_matrix(out, op, "out"));
  if (w.format != QuantFormat::kNone || w.lora)
    return invalid_argument(std::string(op) + ": needs a plain bf16 weight");
  VORTEX_RETURN_IF_ERROR(check_bf16_matrix(w.weight, op, "weight"));
  const int64_t m = a.dim(0), k = a.dim(1), n = out.dim(1);
  if (w.weight.dim(0) != n || w.weight.dim(1) != k || out.dim(0) != m)
    return invalid_argument(std::string(op) + ": weight " + w.weight.describe() + " does not map a " + a.describe() +
                            " onto " + out.describe());
  if (bias && (!bias->defined() || bias->device() != Device::kCuda || bias->dtype() != DType::kBF16 ||
               bias->numel() != n || !bias->is_contiguous()))
    return invalid_argument(std::string(op) + ": bias must be a contiguous [" + std::to_string(n) +
                            "] bf16 device vector, got " + (bias->defined() ? bias->describe() : "undefined"));
  GemmCall call;
  call.precision = GemmPrecision::kBf16;
  call.m = m;
  call.n = n;
  call.k = k;
  call.x = a.raw_data();
  call.ldx = a.stride(0);
  call.w = w.weight.raw_data();
  call.ldw = w.weight.stride(0);
  call.d = out.raw_data();
  call.ldd = out.stride(0);
  call.bias = bias ? bias->raw_data() : nullptr;
  return call;
}

}  // namespace

Status CudaBackend::linear_gelu_tanh(const Tensor& a, const LinearWeight& w, const Tensor* bias, Tensor& out) {
  VORTEX_ASSIGN_OR_RETURN(GemmCall call, epilogue_call(a, w, bias, out, "linear_gelu_tanh"));
  call.gelu = true;
  if (!gemm_) {
    VORTEX_ASSIGN_OR_RETURN(gemm_, GemmEngine::create(gemm_options()));
  }
  VORTEX_RETURN_IF_ERROR(gemm_->gemm(call, stream_));
  return after_op("linear_gelu_tanh");
}

Status CudaBackend::linear_residual(const Tensor& a, const LinearWeight& w, const Tensor* bias, Tensor& x) {
  VORTEX_ASSIGN_OR_RETURN(GemmCall call, epilogue_call(a, w, bias, x, "linear_residual"));
  call.accumulate = true;  // x = R(x + a w^T + b): C = D = x, beta = 1
  if (!gemm_) {
    VORTEX_ASSIGN_OR_RETURN(gemm_, GemmEngine::create(gemm_options()));
  }
  VORTEX_RETURN_IF_ERROR(gemm_->gemm(call, stream_));
  return after_op("linear_residual");
}

}  // namespace vortex
