// Helpers for the CUDA op tests: backends (the skip of tests/gpu_test.h without a device), seeded random BF16
// data with adversarial modes, guarded device buffers (output poisoned before the run, padding and a
// sentinel tail checked untouched after it) and byte comparison with readable mismatch reports.
// Used by tests/cuda/ops_test.cpp.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "cuda/cuda_backend.h"
#include "gpu_test.h"
#include "ref/cpu_backend.h"
#include "vortex/dtype.h"
#include "vortex/tensor.h"

namespace vortex::cuda_test {

constexpr uint16_t kPoisonBf16 = 0xFFBF;  // a NaN payload no kernel produces (canonical NaN is 0x7FFF)
constexpr uint32_t kPoisonF32 = 0xFFBADBADu;
constexpr int64_t kGuardElements = 64;  // sentinel tail after every output

// Creates the CUDA backend, or the Status saying why it cannot (the caller skips only for "no device").
inline Result<std::unique_ptr<CudaBackend>> create_cuda() { return CudaBackend::create(0); }

// Sets `backend_ptr` to a CUDA backend on device 0; skips (VORTEX_SKIP_NO_GPU) without a device and fails on
// any other reason (an unsupported GPU is a failure, not a skip).
#define VORTEX_REQUIRE_CUDA(backend_ptr)                 \
  do {                                                   \
    auto vortex_b_ = ::vortex::cuda_test::create_cuda(); \
    VORTEX_SKIP_NO_GPU_OR_FAIL(vortex_b_.status());      \
    backend_ptr = std::move(vortex_b_).value();          \
  } while (0)

#define ASSERT_OK(expr)                                                      \
  do {                                                                       \
    ::vortex::Status vortex_st_ = (expr);                                    \
    ASSERT_TRUE(vortex_st_.ok()) << #expr << ": " << vortex_st_.to_string(); \
  } while (0)

using ::vortex::testing::fresh_seed;

enum class Fill {
  kNormal,        // N(0, 1)-ish
  kDynamicRange,  // magnitudes 2^-60 .. 2^60 within a row
  kSpecial,       // mix of +-0, denormals, +-inf, NaN, ties-prone odd mantissas, normal values
  kOddMantissa,   // every value has an odd BF16 mantissa (x * 1.5 lands on a BF16 tie)
};

inline uint16_t random_bf16(std::mt19937_64& rng, Fill fill) {
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  switch (fill) {
    case Fill::kNormal: {
      uint16_t b = bf16_bits_from_f32(normal(rng));
      return b;
    }
    case Fill::kDynamicRange: {
      std::uniform_int_distribution<int> e(-60, 60);
      return bf16_bits_from_f32(std::ldexp(uni(rng), e(rng)));
    }
    case Fill::kSpecial: {
      std::uniform_int_distribution<int> pick(0, 9);
      switch (pick(rng)) {
        case 0:
          return 0x0000;  // +0
        case 1:
          return 0x8000;  // -0
        case 2:
          return static_cast<uint16_t>(0x0001 + (rng() % 0x7F));  // positive denormal
        case 3:
          return static_cast<uint16_t>(0x8001 + (rng() % 0x7F));  // negative denormal
        case 4:
          return (rng() & 1) ? 0x7F80 : 0xFF80;  // +-inf
        case 5:
          return (rng() & 1) ? 0x7FC0 : 0xFFC1;  // NaNs
        default:
          return static_cast<uint16_t>(bf16_bits_from_f32(normal(rng)) | 1u);
      }
    }
    case Fill::kOddMantissa:
      return static_cast<uint16_t>(bf16_bits_from_f32(std::ldexp(uni(rng), static_cast<int>(rng() % 8))) | 1u);
  }
  return 0;
}

// Host [rows, cols] bf16.
inline Tensor random_host_bf16(Shape shape, std::mt19937_64& rng, Fill fill) {
  Tensor t = Tensor::empty(shape, DType::kBF16);
  uint16_t* p = t.data<uint16_t>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = random_bf16(rng, fill);
  return t;
}

// A device buffer [rows * ld + guard] holding a [rows, cols] view at row stride ld; everything outside
// the view is poison. `init` (host [rows, cols], contiguous) fills the view, else the view is poison too.
struct Guarded {
  Tensor buffer;  // [rows * ld + kGuardElements] on the device
  Tensor view;    // [rows, cols], row stride ld
  int64_t rows = 0, cols = 0, ld = 0;
  DType dtype = DType::kBF16;
};

inline void poison_fill(Tensor& host) {
  if (host.dtype() == DType::kBF16) {
    uint16_t* p = host.data<uint16_t>();
    for (int64_t i = 0; i < host.numel(); ++i) p[i] = kPoisonBf16;
  } else if (host.dtype() == DType::kF32) {
    uint32_t* p = static_cast<uint32_t*>(host.raw_data());
    for (int64_t i = 0; i < host.numel(); ++i) p[i] = kPoisonF32;
  } else {
    std::memset(host.raw_data(), 0xA5, host.nbytes());
  }
}

inline Result<Guarded> make_guarded(CudaBackend& gpu, int64_t rows, int64_t cols, int64_t ld, DType dtype,
                                    const Tensor* init) {
  Guarded g;
  g.rows = rows;
  g.cols = cols;
  g.ld = ld;
  g.dtype = dtype;
  Tensor host = Tensor::empty({rows * ld + kGuardElements}, dtype);
  poison_fill(host);
  const size_t es = dtype_size(dtype);
  if (init != nullptr)
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(static_cast<char*>(host.raw_data()) + r * ld * es,
                  static_cast<const char*>(init->raw_data()) + r * cols * es, cols * es);
  VORTEX_ASSIGN_OR_RETURN(g.buffer, gpu.upload(host));
  VORTEX_ASSIGN_OR_RETURN(g.view, g.buffer.as_strided({rows, cols}, {ld, 1}));
  return g;
}

// Downloads the whole buffer; returns the view's contents as host [rows, cols] and checks that every
// element outside the view still holds the poison (no out-of-bounds writes).
inline Result<Tensor> read_guarded(CudaBackend& gpu, const Guarded& g, std::string* oob_report) {
  Tensor host = Tensor::empty(g.buffer.shape(), g.dtype);
  VORTEX_RETURN_IF_ERROR(gpu.download(g.buffer, host));
  Tensor poison = Tensor::empty({1}, g.dtype);
  poison_fill(poison);
  const size_t es = dtype_size(g.dtype);
  const char* h = static_cast<const char*>(host.raw_data());
  int64_t bad = 0, first = -1;
  const int64_t n = g.rows * g.ld + kGuardElements;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t r = i / g.ld, c = i % g.ld;
    const bool inside = r < g.rows && c < g.cols;
    if (!inside && std::memcmp(h + i * es, poison.raw_data(), es) != 0) {
      if (first < 0) first = i;
      ++bad;
    }
  }
  if (bad > 0)
    *oob_report = std::to_string(bad) + " element(s) outside the output view were written (first at flat index " +
                  std::to_string(first) + ")";
  Tensor out = Tensor::empty({g.rows, g.cols}, g.dtype);
  for (int64_t r = 0; r < g.rows; ++r)
    std::memcpy(static_cast<char*>(out.raw_data()) + r * g.cols * es, h + r * g.ld * es, g.cols * es);
  return out;
}

// Byte comparison of two host tensors of the same dtype/shape (contiguous); "" when identical.
inline std::string compare_bytes(const Tensor& expect, const Tensor& got, int max_report = 8) {
  if (expect.nbytes() != got.nbytes()) return "size differs: " + expect.describe() + " vs " + got.describe();
  const size_t es = dtype_size(expect.dtype());
  const int64_t n = expect.numel();
  const int64_t cols = expect.ndim() >= 1 ? expect.dim(-1) : 1;
  int64_t bad = 0;
  std::ostringstream s;
  for (int64_t i = 0; i < n; ++i) {
    const char* a = static_cast<const char*>(expect.raw_data()) + i * es;
    const char* b = static_cast<const char*>(got.raw_data()) + i * es;
    if (std::memcmp(a, b, es) == 0) continue;
    if (bad < max_report) {
      s << "  [" << i / cols << ", " << i % cols << "] expect 0x" << std::hex;
      if (es == 2) {
        uint16_t x, y;
        std::memcpy(&x, a, 2);
        std::memcpy(&y, b, 2);
        s << x << " got 0x" << y << std::dec << " (" << f32_from_bf16_bits(x) << " vs " << f32_from_bf16_bits(y)
          << ")\n";
      } else if (es == 4) {
        uint32_t x, y;
        std::memcpy(&x, a, 4);
        std::memcpy(&y, b, 4);
        s << x << " got 0x" << y << std::dec << "\n";
      } else {
        s << static_cast<int>(static_cast<uint8_t>(*a)) << " got 0x" << static_cast<int>(static_cast<uint8_t>(*b))
          << std::dec << "\n";
      }
    }
    ++bad;
  }
  if (bad == 0) return "";
  return std::to_string(bad) + " of " + std::to_string(n) + " elements differ:\n" + s.str();
}

// Segments over `rows` rows into `table_rows` table rows, random cut points (at least one segment).
inline SegmentTable random_segments(int64_t rows, int32_t table_rows, std::mt19937_64& rng) {
  SegmentTable seg;
  seg.rows = rows;
  int64_t start = 0;
  while (start < rows) {
    const int64_t len = 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(std::max<int64_t>(1, rows / 3 + 1)));
    const int64_t stop = std::min(rows, start + len);
    seg.segments.push_back({start, stop, static_cast<int32_t>(rng() % static_cast<uint64_t>(table_rows))});
    start = stop;
  }
  return seg;
}

}  // namespace vortex::cuda_test
