// CudaBackend::linear_lora: the run-time LoRA branch (docs/lora.md "Run-time path") as ref::linear_lora's program
// with cuBLASLt GEMMs. Both realizations keep the reference's rounding boundaries, t_p = R(scale_p * x A_p^T) (the
// down-projection into FP32, then the FP64 scale and one rounding to BF16) and one rounding of the output, and sum
// x W^T + sum_p t_p B_p^T unrounded in one FP32 accumulation:
//   kConcatK (default): one BF16 GEMM over K' = K + R (R = sum of ranks, padded to 8) on operands assembled per
//     call, x' = [x | t_1 .. t_p | 0] [S, K'] and W' = [W | B~_1 .. B~_p | 0] [N, K'] (B~_p: B_p on the part's rows,
//     zero elsewhere), bias in the epilogue: y = R(x' W'^T + bias);
//   kFp32Accumulator: acc = x W^T [S, N] f32 (GemmPrecision::kBf16F32Out), acc[:, rows_p] += t_p B_p^T (beta = 1),
//     y = R(acc + bias) (the add in FP64).
// The sums run in cuBLASLt's FP32 order instead of the reference's FP64 ascending order, so the contract is E1
// (docs/numerics.md two-reference rule). Tested in tests/cuda/lora_linear_test.cpp (both programs); timed against the
// plain linear and each other in bench/lora_runtime_bench.cpp.
#include <cmath>
#include <string>

#include "cuda/check.h"

#include "cuda/cuda_backend.h"
#include "cuda/ops/lora_linear.h"
#include "gemm/gemm.h"

namespace vortex {
namespace {

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

Status check_device_matrix(const Tensor& t, const char* what, int64_t rows, int64_t cols, bool contiguous) {
  const bool ok = t.defined() && t.device() == Device::kCuda && t.ndim() == 2 && t.dtype() == DType::kBF16 &&
                  t.stride(1) == 1 && (!contiguous || t.is_contiguous()) && (rows < 0 || t.dim(0) == rows) &&
                  (cols < 0 || t.dim(1) == cols);
  if (ok) return Status::Ok();
  return invalid_argument(std::string("linear_lora: ") + what + " must be a " + (contiguous ? "contiguous " : "") +
                          "device [" + (rows >= 0 ? std::to_string(rows) : std::string("rows")) + ", " +
                          (cols >= 0 ? std::to_string(cols) : std::string("cols")) + "] bf16 tensor" +
                          (contiguous ? "" : " with unit column stride") + ", got " +
                          (t.defined() ? t.describe() + " on " + device_name(t.device()) : std::string("undefined")));
}

// t_p = R(scale_p * x A_p^T) [M, r] bf16 into dst at leading dimension ld: the down-projection into FP32 scratch,
// then the FP64 scale and one rounding (both programs).
Status down_project(GemmEngine& gemm, CudaBackend& be, const Tensor& x, const LoraBranchPart& p,
                    const std::string& part, uint16_t* dst, int64_t ld) {
  const int64_t m = x.dim(0), k = x.dim(1), r = p.a.dim(0);
  const int64_t ld32 = (r + 3) / 4 * 4;                                   // 16-byte rows
  VORTEX_ASSIGN_OR_RETURN(Tensor t32, be.alloc({m, ld32}, DType::kF32));  // [M, r] f32 at ld32, x A^T unrounded
  GemmCall down;
  down.precision = GemmPrecision::kBf16F32Out;
  down.m = m;
  down.n = r;
  down.k = k;
  down.x = x.raw_data();
  down.ldx = x.stride(0);
  down.w = p.a.raw_data();
  down.ldw = k;
  down.d = t32.raw_data();
  down.ldd = ld32;
  VORTEX_RETURN_IF_ERROR(gemm.gemm(down, be.stream()).with_context(part + ": x A^T"));
  return cuda_ops::lora_scale_round(static_cast<const float*>(t32.raw_data()), ld32, m, r, p.scale, dst, ld,
                                    be.stream());
}

// x' = [x | t_1 .. t_p | 0], W' = [W | B~_1 .. B~_p | 0], y = R(x' W'^T + bias): one GEMM, one rounding.
Status lora_linear_concat(GemmEngine& gemm, CudaBackend& be, const Tensor& x, const LinearWeight& w, const Tensor* bias,
                          const LoraBranch& lora, Tensor& out) {
  const int64_t m = x.dim(0), k = x.dim(1), n = w.weight.dim(0);
  int64_t ranks = 0;
  for (const LoraBranchPart& p : lora.parts) ranks += p.a.dim(0);
  // K' a multiple of 8 (16-byte rows) when K is; the padding columns are zero in both operands.
  const int64_t kc = k + (ranks + 7) / 8 * 8;
  cudaStream_t stream = be.stream();
  VORTEX_ASSIGN_OR_RETURN(Tensor xc, be.alloc({m, kc}, DType::kBF16));  // [S, K'] bf16: [x | t | 0]
  VORTEX_ASSIGN_OR_RETURN(Tensor wc, be.alloc({n, kc}, DType::kBF16));  // [N, K'] bf16: [W | B~ | 0]
  char* xcp = static_cast<char*>(xc.raw_data());
  char* wcp = static_cast<char*>(wc.raw_data());
  const size_t row_c = static_cast<size_t>(kc) * 2;
  VORTEX_CUDA_CHECK(cudaMemcpy2DAsync(xcp, row_c, x.raw_data(), static_cast<size_t>(x.stride(0)) * 2,
                                      static_cast<size_t>(k) * 2, static_cast<size_t>(m), cudaMemcpyDeviceToDevice,
                                      stream));
  VORTEX_CUDA_CHECK(cudaMemcpy2DAsync(wcp, row_c, w.weight.raw_data(), static_cast<size_t>(w.weight.stride(0)) * 2,
                                      static_cast<size_t>(k) * 2, static_cast<size_t>(n), cudaMemcpyDeviceToDevice,
                                      stream));
  VORTEX_CUDA_CHECK(
      cudaMemset2DAsync(xcp + k * 2, row_c, 0, static_cast<size_t>(kc - k) * 2, static_cast<size_t>(m), stream));
  VORTEX_CUDA_CHECK(
      cudaMemset2DAsync(wcp + k * 2, row_c, 0, static_cast<size_t>(kc - k) * 2, static_cast<size_t>(n), stream));
  int64_t col = k;
  for (size_t i = 0; i < lora.parts.size(); ++i) {
    const LoraBranchPart& p = lora.parts[i];
    const int64_t r = p.a.dim(0), rows = p.b.dim(0);
    const std::string part = "linear_lora part " + std::to_string(i);
    // t = R(scale * x A^T) straight into its columns of x'.
    VORTEX_RETURN_IF_ERROR(down_project(gemm, be, x, p, part, reinterpret_cast<uint16_t*>(xcp + col * 2), kc));
    if (rows > 0)  // B on the part's rows of W' (the other rows of these columns stay zero)
      VORTEX_CUDA_CHECK(cudaMemcpy2DAsync(wcp + (p.row_offset * kc + col) * 2, row_c, p.b.raw_data(),
                                          static_cast<size_t>(r) * 2, static_cast<size_t>(r) * 2,
                                          static_cast<size_t>(rows), cudaMemcpyDeviceToDevice, stream));
    col += r;
  }
  GemmCall call;
  call.precision = GemmPrecision::kBf16;
  call.m = m;
  call.n = n;
  call.k = kc;
  call.x = xcp;
  call.ldx = kc;
  call.w = wcp;
  call.ldw = kc;
  call.d = out.raw_data();
  call.ldd = out.stride(0);
  call.bias = bias ? bias->raw_data() : nullptr;
  return gemm.gemm(call, stream).with_context("linear_lora: [x | t] [W | B]^T");
}

// acc = x W^T (FP32), acc[:, rows_p] += t_p B_p^T (beta = 1), y = R(acc + bias).
Status lora_linear_fp32_accumulator(GemmEngine& gemm, CudaBackend& be, const Tensor& x, const LinearWeight& w,
                                    const Tensor* bias, const LoraBranch& lora, Tensor& out) {
  const int64_t m = x.dim(0), k = x.dim(1), n = w.weight.dim(0);
  VORTEX_ASSIGN_OR_RETURN(Tensor acc, be.alloc({m, n}, DType::kF32));  // [M, N] f32, the one accumulator
  float* accp = static_cast<float*>(acc.raw_data());
  GemmCall base;
  base.precision = GemmPrecision::kBf16F32Out;
  base.m = m;
  base.n = n;
  base.k = k;
  base.x = x.raw_data();
  base.ldx = x.stride(0);
  base.w = w.weight.raw_data();
  base.ldw = w.weight.stride(0);
  base.d = accp;
  base.ldd = n;
  VORTEX_RETURN_IF_ERROR(gemm.gemm(base, be.stream()).with_context("linear_lora: x W^T"));
  for (size_t i = 0; i < lora.parts.size(); ++i) {
    const LoraBranchPart& p = lora.parts[i];
    const int64_t r = p.a.dim(0), rows = p.b.dim(0);
    if (rows == 0) continue;
    const std::string part = "linear_lora part " + std::to_string(i);
    const int64_t ld16 = (r + 7) / 8 * 8;                                    // 16-byte rows
    VORTEX_ASSIGN_OR_RETURN(Tensor t16, be.alloc({m, ld16}, DType::kBF16));  // [M, r] bf16 at ld16, R(s x A^T)
    VORTEX_RETURN_IF_ERROR(down_project(gemm, be, x, p, part, static_cast<uint16_t*>(t16.raw_data()), ld16));
    GemmCall up;
    up.precision = GemmPrecision::kBf16F32Out;
    up.m = m;
    up.n = rows;
    up.k = r;
    up.x = t16.raw_data();
    up.ldx = ld16;
    up.w = p.b.raw_data();
    up.ldw = r;
    float* cols = accp + p.row_offset;
    if (aligned16(cols) && n % 4 == 0) {
      // In place on the part's columns of the accumulator: acc[:, rows_p] += t B^T (beta = 1, FP32).
      up.d = cols;
      up.ldd = n;
      up.accumulate = true;
      VORTEX_RETURN_IF_ERROR(gemm.gemm(up, be.stream()).with_context(part + ": acc += t B^T"));
    } else {
      // Columns that are not 16-byte aligned: t B^T into its own FP32 buffer, then one FP32 add per element
      // (the same single FP32 addition the in-place beta = 1 epilogue performs).
      VORTEX_ASSIGN_OR_RETURN(Tensor u, be.alloc({m, rows}, DType::kF32));  // [M, rows] f32
      up.d = u.raw_data();
      up.ldd = rows;
      VORTEX_RETURN_IF_ERROR(gemm.gemm(up, be.stream()).with_context(part + ": t B^T"));
      VORTEX_RETURN_IF_ERROR(
          cuda_ops::lora_add_columns(cols, n, static_cast<const float*>(u.raw_data()), m, rows, be.stream()));
    }
  }
  VORTEX_RETURN_IF_ERROR(
      cuda_ops::lora_round_output(accp, m, n, bias ? static_cast<const uint16_t*>(bias->raw_data()) : nullptr,
                                  static_cast<uint16_t*>(out.raw_data()), out.stride(0), be.stream()));
  return Status::Ok();
}

}  // namespace

Status CudaBackend::linear_lora(const Tensor& x, const LinearWeight& w, const Tensor* bias, const LoraBranch& lora,
                                Tensor& out) {
  if (w.format != QuantFormat::kNone)
    return unsupported(std::string("linear_lora: the run-time LoRA branch on a ") + quant_format_name(w.format) +
                       " weight is not implemented; merge the LoRA before quantizing (--lora-mode merge)");
  VORTEX_RETURN_IF_ERROR(check_device_matrix(x, "x", -1, -1, false));
  const int64_t m = x.dim(0), k = x.dim(1);
  VORTEX_RETURN_IF_ERROR(check_device_matrix(w.weight, "W", -1, k, false));
  const int64_t n = w.weight.dim(0);
  VORTEX_RETURN_IF_ERROR(check_device_matrix(out, "out", m, n, false));
  if (bias && (!bias->defined() || bias->device() != Device::kCuda || bias->dtype() != DType::kBF16 ||
               bias->numel() != n || !bias->is_contiguous()))
    return invalid_argument("linear_lora: bias must be a contiguous device [" + std::to_string(n) +
                            "] bf16 tensor, got " + (bias->defined() ? bias->describe() : std::string("undefined")));
  for (size_t i = 0; i < lora.parts.size(); ++i) {
    const LoraBranchPart& p = lora.parts[i];
    const std::string part = "branch part " + std::to_string(i);
    VORTEX_RETURN_IF_ERROR(check_device_matrix(p.a, (part + " A [r, K]").c_str(), -1, k, true));
    const int64_t r = p.a.dim(0);
    if (r < 1) return invalid_argument("linear_lora: " + part + " has rank 0");
    VORTEX_RETURN_IF_ERROR(check_device_matrix(p.b, (part + " B [rows, r] (r = A's rows)").c_str(), -1, r, true));
    if (p.row_offset < 0 || p.row_offset + p.b.dim(0) > n)
      return invalid_argument("linear_lora: " + part + " rows [" + std::to_string(p.row_offset) + ", " +
                              std::to_string(p.row_offset + p.b.dim(0)) + ") fall outside the layer's " +
                              std::to_string(n) + " rows");
    if (!std::isfinite(p.scale)) return invalid_argument("linear_lora: " + part + " has a non-finite scale");
  }
  if (lora.parts.empty()) return linear(x, w, bias, out);  // R(x W^T + bias): the same program without a branch
  if (m == 0 || n == 0) return Status::Ok();
  if (!gemm_) {
    VORTEX_ASSIGN_OR_RETURN(gemm_, GemmEngine::create(gemm_options()));
  }
  // kConcatK only for 16-byte output rows: with N = 100 (tests/cuda/lora_linear_test.cpp) its output matched the
  // one-rounding reference in 71% of bytes at rel-L2 2.3e-3 vs FP64 (the reference: 1.7e-3, as from a second
  // rounding), while the FP32-accumulator program matched in 100%.
  const bool aligned_out = n % 8 == 0 && out.stride(0) % 8 == 0 && aligned16(out.raw_data());
  VORTEX_RETURN_IF_ERROR(lora_program_ == LoraProgram::kConcatK && aligned_out
                             ? lora_linear_concat(*gemm_, *this, x, w, bias, lora, out)
                             : lora_linear_fp32_accumulator(*gemm_, *this, x, w, bias, lora, out));
  return after_op("linear_lora");
}

}  // namespace vortex
