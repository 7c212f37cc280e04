// FP8 weight quantization at load (host): per tensor or 128x128 blocks with the exact dtype.h E4M3
// conversion (gemm/fp8_reference.cpp). Produces a host LinearWeight in the kFp8Scaled format whose
// weight_scale shape tells GemmEngine::linear which scaling to run. Tested in tests/gemm/gemm_test.cpp.
#include <string>

#include "gemm/fp8_reference.h"
#include "gemm/gemm.h"

namespace vortex {

Result<LinearWeight> quantize_weight_fp8(const Tensor& w, Fp8Scaling scaling) {
  if (!w.defined() || w.device() != Device::kCpu || w.dtype() != DType::kBF16 || w.ndim() != 2 || !w.is_contiguous())
    return invalid_argument("quantize_weight_fp8 needs a contiguous host [N, K] bf16 tensor, got " +
                            (w.defined() ? w.describe() : std::string("undefined")));
  const int64_t n = w.dim(0), k = w.dim(1);
  LinearWeight out;
  out.format = QuantFormat::kFp8Scaled;
  out.out_features = n;
  out.in_features = k;
  out.weight = Tensor::empty({n, k}, DType::kF8E4M3);  // [N, K] e4m3
  const auto* src = w.data<uint16_t>();
  auto* q = out.weight.data<uint8_t>();
  if (scaling == Fp8Scaling::kPerTensor) {
    out.weight_scale = Tensor::empty({1}, DType::kF32);
    out.weight_scale.data<float>()[0] = quantize_fp8_per_tensor_ref(src, n, k, k, q);
  } else {
    out.weight_scale = Tensor::empty({(n + 127) / 128, fp8_block_scale_cols(k)}, DType::kF32);  // [N/128, L4]
    quantize_fp8_block128x128_ref(src, n, k, q, out.weight_scale.data<float>());
  }
  return out;
}

}  // namespace vortex
