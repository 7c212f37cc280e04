// The weights' finiteness scan (see weights_finite.h).
#include "model/weights_finite.h"

#include <cstring>
#include <utility>
#include <vector>

#include "model/h3_spec.h"

namespace vortex {
namespace {

// First index whose bits have an all-ones exponent (`mask` the exponent field); -1 when none.
template <typename U>
int64_t first_all_ones_exponent(const void* data, int64_t n, U mask) {
  const U* p = static_cast<const U*>(data);
  for (int64_t i = 0; i < n; ++i)
    if (static_cast<U>(p[i] & mask) == mask) return i;
  return -1;
}

}  // namespace

std::optional<int64_t> first_non_finite(const Tensor& host) {
  const int64_t n = host.numel();
  if (n == 0) return std::nullopt;
  const void* d = host.raw_data();
  int64_t i = -1;
  switch (host.dtype()) {
    case DType::kF64:
      i = first_all_ones_exponent<uint64_t>(d, n, 0x7FF0000000000000ull);
      break;
    case DType::kF32:
      i = first_all_ones_exponent<uint32_t>(d, n, 0x7F800000u);
      break;
    case DType::kF16:
      i = first_all_ones_exponent<uint16_t>(d, n, 0x7C00u);
      break;
    case DType::kBF16:
      i = first_all_ones_exponent<uint16_t>(d, n, 0x7F80u);
      break;
    case DType::kF8E4M3: {  // E4M3FN: only S.1111.111 is NaN (no Inf)
      const uint8_t* p = static_cast<const uint8_t*>(d);
      for (int64_t k = 0; k < n && i < 0; ++k)
        if ((p[k] & 0x7F) == 0x7F) i = k;
      break;
    }
    case DType::kF8E5M2:
      i = first_all_ones_exponent<uint8_t>(d, n, 0x7C);
      break;
    case DType::kF8E8M0: {  // 0xFF is NaN
      const uint8_t* p = static_cast<const uint8_t*>(d);
      for (int64_t k = 0; k < n && i < 0; ++k)
        if (p[k] == 0xFF) i = k;
      break;
    }
    default:
      break;
  }
  if (i < 0) return std::nullopt;
  return i;
}

Status check_weights_finite(H3Weights& weights, Backend& backend, const std::string& what, const std::string& advice) {
  std::vector<std::pair<std::string, Tensor*>> tensors;
  for (auto& [name, t] : h3_tensor_slots(weights)) {
    if (!t->defined() || t->dtype() == DType::kU8) continue;  // absent, or packed FP4 (no NaN encoding)
    tensors.emplace_back(name, t);
  }
  for (auto& [name, lw] : h3_linear_slots(weights)) {
    tensors.emplace_back(name + ".weight_scale", &lw->weight_scale);
    tensors.emplace_back(name + ".weight_scale_2", &lw->weight_scale_2);
    tensors.emplace_back(name + ".input_scale", &lw->input_scale);
  }
  Tensor staging;  // host copy of a device (or strided) tensor, reused while the size fits
  for (const auto& [name, t] : tensors) {
    if (!t->defined() || t->numel() == 0) continue;
    const Tensor* host = t;
    Tensor copy;
    if (t->device() != Device::kCpu || !t->is_contiguous()) {
      copy = Tensor::empty(t->shape(), t->dtype());
      VORTEX_RETURN_IF_ERROR(backend.download(*t, copy).with_context("scanning " + name + " for NaN/Inf"));
      host = &copy;
    }
    if (std::optional<int64_t> bad = first_non_finite(*host)) {
      return format_error(what + ": tensor '" + name + "' (" + t->describe() +
                          ") holds a non-finite value (NaN or Inf) at element " + std::to_string(*bad) + "; " + advice);
    }
  }
  return Status::Ok();
}

}  // namespace vortex
