// GemmOperands (see gemm_tune.h): device operands of one tuned GEMM, filled with seeded random values, and the
// FP64 reference of one output element for the tuner's sampled-error check. Exercised by
// tests/gemm/gemm_tune_test.cpp.
#include "measure/gemm_tune.h"

#include <cublasLt.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <ctime>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>

#include "gemm/fp8_reference.h"
#include "measure/gemm_tune_internal.h"
#include "profiling/evidence.h"
#include "vortex/dtype.h"

namespace vortex {

using gemm_tune_detail::is_fp8;
using gemm_tune_detail::out_elem_size;

// ---- operands ------------------------------------------------------------------------------------
GemmOperands::~GemmOperands() {
  for (void* p : allocations_) cudaFree(p);
}

Result<std::unique_ptr<GemmOperands>> GemmOperands::create(GemmPrecision precision, int64_t m, int64_t n, int64_t k,
                                                           uint64_t seed, cudaStream_t s) {
  std::unique_ptr<GemmOperands> ops(new GemmOperands());
  auto alloc = [&](size_t bytes) -> Result<void*> {
    void* p = nullptr;
    cudaError_t err = cudaMalloc(&p, std::max<size_t>(bytes, 256));
    if (err != cudaSuccess)
      return Status(ErrorCode::kOutOfMemory,
                    "cudaMalloc(" + std::to_string(bytes) + ") for GEMM operands: " + cudaGetErrorString(err));
    ops->allocations_.push_back(p);
    return p;
  };
  if (precision == GemmPrecision::kNvfp4)
    return unsupported(
        "gemm-tune does not tune the Blackwell FP4 GEMM yet (no FP4 operand generator); tune "
        "nvfp4_emulated on Hopper");
  GemmCall& c = ops->call_;
  c.precision = precision;
  c.m = precision == GemmPrecision::kFp8Blockwise ? (m + 3) / 4 * 4 : m;
  c.n = n;
  c.k = k;
  c.ldx = k;
  c.ldw = k;
  c.ldd = n;
  const size_t um = static_cast<size_t>(c.m), un = static_cast<size_t>(n), uk = static_cast<size_t>(k);
  VORTEX_ASSIGN_OR_RETURN(c.d, alloc(um * un * out_elem_size(precision)));
  if (precision == GemmPrecision::kF32) {
    VORTEX_ASSIGN_OR_RETURN(void* x, alloc(um * uk * 4));
    VORTEX_ASSIGN_OR_RETURN(void* w, alloc(un * uk * 4));
    VORTEX_RETURN_IF_ERROR(fill_uniform_f32_device(static_cast<float*>(x), c.m * k, seed, -1.f, 1.f, s));
    VORTEX_RETURN_IF_ERROR(fill_uniform_f32_device(static_cast<float*>(w), n * k, seed + 1, -1.f, 1.f, s));
    c.x = x;
    c.w = w;
  } else if (precision == GemmPrecision::kBf16 || precision == GemmPrecision::kNvfp4Emulated) {
    if (precision == GemmPrecision::kNvfp4Emulated) {
      // The emulation's plan: BF16 operands (exactly what dequantized NVFP4 operands are) and alpha = 1 on
      // the device, so the FP64 reference is the BF16 one.
      VORTEX_ASSIGN_OR_RETURN(void* alpha, alloc(256));
      const float one = 1.0f;
      VORTEX_TUNE_CUDA(cudaMemcpy(alpha, &one, sizeof(one), cudaMemcpyHostToDevice));
      c.alpha = static_cast<const float*>(alpha);
    }
    VORTEX_ASSIGN_OR_RETURN(void* x, alloc(um * uk * 2));
    VORTEX_ASSIGN_OR_RETURN(void* w, alloc(un * uk * 2));
    VORTEX_RETURN_IF_ERROR(fill_uniform_bf16_device(x, c.m * k, seed, 1.0f, s));
    VORTEX_RETURN_IF_ERROR(fill_uniform_bf16_device(w, n * k, seed + 1, 0.05f, s));
    c.x = x;
    c.w = w;
  } else {
    // Random bf16 source (freed below), quantized by the engine's own quantizers.
    void* src = nullptr;
    const size_t src_elems = std::max(um, un) * uk;
    VORTEX_TUNE_CUDA(cudaMalloc(&src, src_elems * 2));
    VORTEX_ASSIGN_OR_RETURN(void* xq, alloc(um * uk));
    VORTEX_ASSIGN_OR_RETURN(void* wq, alloc(un * uk));
    const int64_t groups = (k + 127) / 128;
    Status st = Status::Ok();
    if (precision == GemmPrecision::kFp8PerTensor) {
      VORTEX_ASSIGN_OR_RETURN(void* xs, alloc(256));
      VORTEX_ASSIGN_OR_RETURN(void* ws, alloc(256));
      VORTEX_ASSIGN_OR_RETURN(void* amax, alloc(256));
      st = fill_uniform_bf16_device(src, m * k, seed, 1.0f, s);
      if (st.ok())
        st = quantize_fp8_per_tensor(src, m, k, k, xq, static_cast<float*>(xs), static_cast<uint32_t*>(amax), s);
      if (st.ok()) st = fill_uniform_bf16_device(src, n * k, seed + 1, 0.05f, s);
      if (st.ok())
        st = quantize_fp8_per_tensor(src, n, k, k, wq, static_cast<float*>(ws), static_cast<uint32_t*>(amax), s);
      c.x_scale = static_cast<const float*>(xs);
      c.w_scale = static_cast<const float*>(ws);
    } else if (precision == GemmPrecision::kFp8RowScaled) {
      // Per-token activation scales and per-channel weight scales (any valid OUTER_VEC operand).
      VORTEX_ASSIGN_OR_RETURN(void* xs, alloc(um * 4));
      VORTEX_ASSIGN_OR_RETURN(void* ws, alloc(un * 4));
      st = fill_uniform_bf16_device(src, m * k, seed, 1.0f, s);
      if (st.ok()) st = quantize_fp8_per_row(src, m, k, k, xq, static_cast<float*>(xs), s);
      if (st.ok()) st = fill_uniform_bf16_device(src, n * k, seed + 1, 0.05f, s);
      if (st.ok()) st = quantize_fp8_per_row(src, n, k, k, wq, static_cast<float*>(ws), s);
      c.x_scale = static_cast<const float*>(xs);
      c.w_scale = static_cast<const float*>(ws);
    } else {
      VORTEX_ASSIGN_OR_RETURN(void* xs, alloc(static_cast<size_t>(groups) * um * 4));
      const int64_t wrows = (n + 127) / 128, wcols = fp8_block_scale_cols(k);
      VORTEX_ASSIGN_OR_RETURN(void* ws, alloc(static_cast<size_t>(wrows * wcols) * 4));
      VORTEX_ASSIGN_OR_RETURN(void* tmp_scales, alloc(static_cast<size_t>(groups) * un * 4));
      st = fill_uniform_bf16_device(src, m * k, seed, 1.0f, s);
      if (st.ok()) st = quantize_fp8_rowblock128(src, m, k, k, xq, static_cast<float*>(xs), c.m, s);
      if (st.ok()) st = fill_uniform_bf16_device(src, n * k, seed + 1, 0.05f, s);
      if (st.ok()) st = quantize_fp8_rowblock128(src, n, k, k, wq, static_cast<float*>(tmp_scales), n, s);
      if (st.ok()) st = fill_uniform_f32_device(static_cast<float*>(ws), wrows * wcols, seed + 2, 0.5f, 1.5f, s);
      c.x_scale = static_cast<const float*>(xs);
      c.w_scale = static_cast<const float*>(ws);
      ops->scale_ld_ = c.m;
    }
    cudaError_t sync = cudaStreamSynchronize(s);
    cudaFree(src);
    VORTEX_RETURN_IF_ERROR(st);
    VORTEX_TUNE_CUDA(sync);
    c.x = xq;
    c.w = wq;
  }
  VORTEX_TUNE_CUDA(cudaStreamSynchronize(s));
  return ops;
}

Result<double> GemmOperands::reference_f64(int64_t i, int64_t j) const {
  const GemmCall& c = call_;
  const size_t uk = static_cast<size_t>(c.k);
  const size_t es = c.precision == GemmPrecision::kF32 ? 4 : (is_fp8(c.precision) ? 1 : 2);
  std::vector<uint8_t> xr(uk * es), wr(uk * es);
  VORTEX_TUNE_CUDA(cudaMemcpy(xr.data(), static_cast<const char*>(c.x) + static_cast<size_t>(i * c.ldx) * es, uk * es,
                              cudaMemcpyDeviceToHost));
  VORTEX_TUNE_CUDA(cudaMemcpy(wr.data(), static_cast<const char*>(c.w) + static_cast<size_t>(j * c.ldw) * es, uk * es,
                              cudaMemcpyDeviceToHost));
  double acc = 0;
  if (c.precision == GemmPrecision::kF32) {
    const float* x = reinterpret_cast<const float*>(xr.data());
    const float* w = reinterpret_cast<const float*>(wr.data());
    for (size_t t = 0; t < uk; ++t) acc += static_cast<double>(x[t]) * static_cast<double>(w[t]);
  } else if (c.precision == GemmPrecision::kBf16 || c.precision == GemmPrecision::kNvfp4Emulated) {
    const uint16_t* x = reinterpret_cast<const uint16_t*>(xr.data());
    const uint16_t* w = reinterpret_cast<const uint16_t*>(wr.data());
    for (size_t t = 0; t < uk; ++t)
      acc += static_cast<double>(f32_from_bf16_bits(x[t])) * static_cast<double>(f32_from_bf16_bits(w[t]));
  } else if (c.precision == GemmPrecision::kFp8PerTensor) {
    float xs = 0, ws = 0;
    VORTEX_TUNE_CUDA(cudaMemcpy(&xs, c.x_scale, 4, cudaMemcpyDeviceToHost));
    VORTEX_TUNE_CUDA(cudaMemcpy(&ws, c.w_scale, 4, cudaMemcpyDeviceToHost));
    for (size_t t = 0; t < uk; ++t)
      acc += static_cast<double>(f32_from_e4m3(xr[t])) * static_cast<double>(f32_from_e4m3(wr[t]));
    acc *= static_cast<double>(xs) * static_cast<double>(ws);
  } else if (c.precision == GemmPrecision::kFp8RowScaled) {
    float xs = 0, ws = 0;
    VORTEX_TUNE_CUDA(cudaMemcpy(&xs, c.x_scale + i, 4, cudaMemcpyDeviceToHost));
    VORTEX_TUNE_CUDA(cudaMemcpy(&ws, c.w_scale + j, 4, cudaMemcpyDeviceToHost));
    for (size_t t = 0; t < uk; ++t)
      acc += static_cast<double>(f32_from_e4m3(xr[t])) * static_cast<double>(f32_from_e4m3(wr[t]));
    acc *= static_cast<double>(xs) * static_cast<double>(ws);
  } else {
    const int64_t groups = (c.k + 127) / 128, wcols = fp8_block_scale_cols(c.k);
    std::vector<float> xs(static_cast<size_t>(groups)), ws(static_cast<size_t>(wcols));
    VORTEX_TUNE_CUDA(cudaMemcpy2D(xs.data(), 4, c.x_scale + i, static_cast<size_t>(scale_ld_) * 4, 4,
                                  static_cast<size_t>(groups), cudaMemcpyDeviceToHost));
    VORTEX_TUNE_CUDA(
        cudaMemcpy(ws.data(), c.w_scale + (j / 128) * wcols, static_cast<size_t>(wcols) * 4, cudaMemcpyDeviceToHost));
    for (size_t t = 0; t < uk; ++t)
      acc += static_cast<double>(f32_from_e4m3(xr[t])) * static_cast<double>(f32_from_e4m3(wr[t])) *
             static_cast<double>(xs[t / 128]) * static_cast<double>(ws[t / 128]);
  }
  return acc;
}

}  // namespace vortex
