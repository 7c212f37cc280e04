// RoPE cos/sin tables for a packed request (docs/numerics.md "The BF16 program"), computed once on the host
// and shared by every backend: inv_freq from the checkpoint (f32) or theta^(-k/L) in FP64 rounded to FP32;
// per row the angle vector [t*inv | h*inv | w*inv] with freq = fp32(fp32(pos) * inv_freq); cos/sin
// evaluated in FP64 on that FP32 freq, rounded to FP32, then to BF16 (two roundings, as specified).
// Tested in tests/model/packing_test.cpp against an independent per-element computation.
#include <cmath>
#include <string>

#include "model/packing.h"
#include "vortex/dtype.h"

namespace vortex {

Result<RopeTables> make_rope_tables(const ModelConfig& cfg, const PackedLayout& layout, const Tensor* inv_freq) {
  const int L = cfg.rope_inv_freq_len;
  if (L <= 0 || cfg.rope_dims() > cfg.head_dim) {
    return invalid_argument("rope_inv_freq_len " + std::to_string(L) + " gives " + std::to_string(cfg.rope_dims()) +
                            " rotated dims, which must be in (0, head_dim = " + std::to_string(cfg.head_dim) + "]");
  }
  std::vector<float> inv(static_cast<size_t>(L));  // [L] f32, shared by the t, h and w axes
  if (inv_freq != nullptr) {
    if (!inv_freq->defined() || inv_freq->device() != Device::kCpu || inv_freq->dtype() != DType::kF32 ||
        !inv_freq->is_contiguous() || inv_freq->numel() != L) {
      return invalid_argument("rope.inv_freq must be a contiguous host f32 tensor of " + std::to_string(L) +
                              " values (rope_inv_freq_len), got " +
                              (inv_freq->defined() ? inv_freq->describe() : std::string("undefined")));
    }
    const float* src = inv_freq->data<float>();
    for (int k = 0; k < L; ++k) {
      if (!std::isfinite(src[k])) {
        return format_error("rope.inv_freq[" + std::to_string(k) + "] is not finite; the checkpoint is corrupt");
      }
      inv[static_cast<size_t>(k)] = src[k];
    }
  } else {
    if (!(cfg.rope_theta > 0.0) || !std::isfinite(cfg.rope_theta)) {
      return invalid_argument("rope_theta must be a positive finite number, got " + std::to_string(cfg.rope_theta));
    }
    for (int k = 0; k < L; ++k) {
      inv[static_cast<size_t>(k)] =
          static_cast<float>(std::pow(cfg.rope_theta, -static_cast<double>(k) / static_cast<double>(L)));
    }
  }
  const int64_t S = static_cast<int64_t>(layout.positions.size());
  if (S != layout.geo.total_rows()) {
    return invalid_argument("layout has " + std::to_string(S) + " positions but its geometry has " +
                            std::to_string(layout.geo.total_rows()) + " rows (build it with pack_request)");
  }
  const int half = 3 * L;  // rope_dims / 2 angle columns
  RopeTables tables;
  tables.rope_dims = cfg.rope_dims();
  tables.cos = Tensor::empty({S, half}, DType::kBF16);  // [S, rope_dims/2] bf16
  tables.sin = Tensor::empty({S, half}, DType::kBF16);  // [S, rope_dims/2] bf16
  uint16_t* cos_out = tables.cos.data<uint16_t>();
  uint16_t* sin_out = tables.sin.data<uint16_t>();
  for (int64_t r = 0; r < S; ++r) {
    const auto& pos = layout.positions[static_cast<size_t>(r)];
    for (int axis = 0; axis < 3; ++axis) {
      const float p = static_cast<float>(pos[static_cast<size_t>(axis)]);  // FP64 -> FP32 (round to nearest)
      for (int k = 0; k < L; ++k) {
        const float freq = p * inv[static_cast<size_t>(k)];  // FP32 multiply
        const double f64 = static_cast<double>(freq);
        const size_t col = static_cast<size_t>(r) * static_cast<size_t>(half) + static_cast<size_t>(axis * L + k);
        cos_out[col] = bf16_bits_from_f32(static_cast<float>(std::cos(f64)));
        sin_out[col] = bf16_bits_from_f32(static_cast<float>(std::sin(f64)));
      }
    }
  }
  return tables;
}

}  // namespace vortex
