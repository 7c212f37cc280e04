// M-RoPE tables of the conditioner (see mrope.h). transformers evaluates cos/sin with torch's FP32 kernels
// and rounds to BF16; here they are FP64 rounded to FP32, then to BF16 (as the DiT's RoPE tables), which
// differs from torch only where torch's FP32 result is off by an ulp at a BF16 rounding tie: the fixture's
// 48 x 16 transformers tables, at positions up to 3000, agree bit for bit (text_encoder_test.cpp).
#include "text_encoder/mrope.h"

#include <cmath>
#include <string>

#include "vortex/dtype.h"

namespace vortex {

Tensor text_mrope_positions(int64_t length) {
  Tensor p = Tensor::empty({3, length}, DType::kI32);  // [3, L] i32
  for (int axis = 0; axis < 3; ++axis)
    for (int64_t i = 0; i < length; ++i) p.data<int32_t>()[axis * length + i] = static_cast<int32_t>(i);
  return p;
}

int mrope_axis(const TextEncoderConfig& cfg, int j) {
  if (j % 3 == 1 && j < 3 * cfg.mrope_section[1]) return 1;
  if (j % 3 == 2 && j < 3 * cfg.mrope_section[2]) return 2;
  return 0;
}

std::vector<float> mrope_inv_freq(const TextEncoderConfig& cfg) {
  const int half = cfg.head_dim / 2;
  const float base = static_cast<float>(cfg.rope_theta);
  std::vector<float> inv(static_cast<size_t>(half));
  for (int k = 0; k < half; ++k) {
    const float e = static_cast<float>(2 * k) / static_cast<float>(cfg.head_dim);  // FP32 arange / dim
    const float p = static_cast<float>(std::pow(static_cast<double>(base), static_cast<double>(e)));
    inv[static_cast<size_t>(k)] = 1.0f / p;
  }
  return inv;
}

Result<RopeTables> make_mrope_tables(const TextEncoderConfig& cfg, const Tensor& positions) {
  VORTEX_RETURN_IF_ERROR(cfg.validate());
  if (!positions.defined() || positions.device() != Device::kCpu || positions.dtype() != DType::kI32 ||
      positions.ndim() != 2 || positions.dim(0) != 3 || !positions.is_contiguous())
    return invalid_argument("M-RoPE positions must be a contiguous host i32 [3, L] tensor, got " +
                            (positions.defined() ? positions.describe() : std::string("undefined")));
  const int64_t len = positions.dim(1);
  const int half = cfg.head_dim / 2;
  const std::vector<float> inv = mrope_inv_freq(cfg);
  RopeTables t;
  t.rope_dims = cfg.head_dim;
  t.cos = Tensor::empty({len, half}, DType::kBF16);  // [L, head_dim/2] bf16
  t.sin = Tensor::empty({len, half}, DType::kBF16);  // [L, head_dim/2] bf16
  const int32_t* pos = positions.data<int32_t>();
  for (int64_t i = 0; i < len; ++i) {
    for (int j = 0; j < half; ++j) {
      const int32_t p = pos[mrope_axis(cfg, j) * len + i];
      if (p < 0)
        return invalid_argument("M-RoPE position " + std::to_string(p) + " at row " + std::to_string(i) +
                                " is negative");
      const float freq = static_cast<float>(p) * inv[static_cast<size_t>(j)];  // FP32 multiply
      t.cos.data<uint16_t>()[i * half + j] =
          bf16_bits_from_f32(static_cast<float>(std::cos(static_cast<double>(freq))));
      t.sin.data<uint16_t>()[i * half + j] =
          bf16_bits_from_f32(static_cast<float>(std::sin(static_cast<double>(freq))));
    }
  }
  return t;
}

}  // namespace vortex
