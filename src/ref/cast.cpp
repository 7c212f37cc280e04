// Reference dtype conversion between views of any rank and strides: f32 -> bf16 (RNE, cvt.rn.bf16.f32),
// bf16 -> f32 (exact), or a same-dtype element copy. Used for the FP32 projections -> BF16 rows and the
// final BF16 rows -> FP32 heads. Tested in tests/ref/cast_test.cpp (round trips, ties, NaN, strided views).
#include <cstring>
#include <string>

#include "ref/ref_ops.h"

namespace vortex::ref {
namespace {

// Element offset (in elements) of outer index `o` over all dims but the last.
int64_t outer_offset(const Tensor& t, int64_t o) {
  int64_t off = 0;
  for (int d = t.ndim() - 2; d >= 0; --d) {
    const int64_t n = t.dim(d);
    off += (o % n) * t.stride(d);
    o /= n;
  }
  return off;
}

}  // namespace

Status cast(const Tensor& src, Tensor& dst, const RowRunner& run) {
  if (!src.defined() || !dst.defined()) return invalid_argument("cast: src and dst must be defined");
  if (src.device() != Device::kCpu || dst.device() != Device::kCpu)
    return invalid_argument("cast: the CPU reference takes host tensors, got " + src.describe() + " -> " +
                            dst.describe());
  if (src.shape() != dst.shape())
    return invalid_argument("cast: shapes differ: " + src.describe() + " -> " + dst.describe());
  const DType a = src.dtype(), b = dst.dtype();
  const bool f32_to_bf16 = a == DType::kF32 && b == DType::kBF16;
  const bool bf16_to_f32 = a == DType::kBF16 && b == DType::kF32;
  if (!f32_to_bf16 && !bf16_to_f32 && a != b)
    return unsupported("cast: only f32 <-> bf16 (or a same-dtype copy) is supported, got " + src.describe() + " -> " +
                       dst.describe());
  if (src.numel() == 0) return Status::Ok();
  const int64_t cols = src.ndim() == 0 ? 1 : src.dim(-1);
  const int64_t outer = src.numel() / cols;
  const int64_t scs = src.ndim() == 0 ? 1 : src.stride(-1);
  const int64_t dcs = dst.ndim() == 0 ? 1 : dst.stride(-1);
  const size_t esize = dtype_size(a);
  run(outer, [&](int64_t begin, int64_t end) {
    for (int64_t o = begin; o < end; ++o) {
      const int64_t so = outer_offset(src, o), d_o = outer_offset(dst, o);
      if (f32_to_bf16) {
        const float* s = static_cast<const float*>(src.raw_data()) + so;
        uint16_t* d = static_cast<uint16_t*>(dst.raw_data()) + d_o;
        for (int64_t j = 0; j < cols; ++j) d[j * dcs] = bf16_bits_from_f32(s[j * scs]);
      } else if (bf16_to_f32) {
        const uint16_t* s = static_cast<const uint16_t*>(src.raw_data()) + so;
        float* d = static_cast<float*>(dst.raw_data()) + d_o;
        for (int64_t j = 0; j < cols; ++j) d[j * dcs] = f32_from_bf16_bits(s[j * scs]);
      } else {
        const char* s = static_cast<const char*>(src.raw_data()) + static_cast<size_t>(so) * esize;
        char* d = static_cast<char*>(dst.raw_data()) + static_cast<size_t>(d_o) * esize;
        for (int64_t j = 0; j < cols; ++j)
          std::memcpy(d + static_cast<size_t>(j * dcs) * esize, s + static_cast<size_t>(j * scs) * esize, esize);
      }
    }
  });
  return Status::Ok();
}

}  // namespace vortex::ref
