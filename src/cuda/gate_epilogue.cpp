// CudaBackend::linear_gate_residual: an H3 block's gated residual x = x + gate * (a @ W^T) fused into the FP8
// GEMM (ExecOptions::fp8_gate_epilogue, E2). Per AdaLN segment: a's rows quantized per row (one scale per
// token), w_scale = fp32(s_w * gate) per output channel, and one cuBLASLt kFp8RowScaled GEMM with C = D = x,
// beta = 1 (gemm/gemm.h) — the GEMM output and gate * out are never rounded to BF16 and the separate
// gate_add pass disappears. Tested in tests/cuda/gate_epilogue_test.cpp (E1 vs FP64 of this program, E2 vs
// linear + gate_add); speed in bench/fp8_gemm_bench.cpp (gated_residual_unfused vs gated_residual_epilogue).
#include <string>

#include "cuda/cuda_backend.h"
#include "gemm/gemm.h"

namespace vortex {
namespace {

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

}  // namespace

bool CudaBackend::has_gate_epilogue(const LinearWeight& w) const {
  const bool sm90_or_later = info_.facts.arch != GpuArch::kUnknown && info_.facts.has_fp8_mma;
  return sm90_or_later && w.format == QuantFormat::kFp8Scaled && w.weight.defined() &&
         w.weight.dtype() == DType::kF8E4M3 && w.weight_scale.defined() && w.weight_scale.numel() == 1 &&
         w.weight_scale.dtype() == DType::kF32 && !w.input_scale.defined() && !w.lora;
}

Status CudaBackend::linear_gate_residual(const Tensor& a, const LinearWeight& w, Tensor& x, const Tensor& table,
                                         int gate_chunk, const SegmentTable& seg) {
  if (!has_gate_epilogue(w))
    return invalid_argument(
        "linear_gate_residual: needs a per-tensor fp8_scaled weight without input_scale or LoRA "
        "on sm_90+; got " +
        std::string(quant_format_name(w.format)) + " " + w.weight.describe());
  auto matrix = [](const Tensor& t, const char* name) -> Status {
    if (!t.defined() || t.device() != Device::kCuda || t.ndim() != 2 || t.dtype() != DType::kBF16 || t.stride(1) != 1)
      return invalid_argument(std::string("linear_gate_residual: ") + name +
                              " must be a 2-D bf16 device tensor with unit column stride, got " +
                              (t.defined() ? t.describe() : "undefined"));
    return Status::Ok();
  };
  VORTEX_RETURN_IF_ERROR(matrix(a, "a"));
  VORTEX_RETURN_IF_ERROR(matrix(x, "x"));
  VORTEX_RETURN_IF_ERROR(matrix(table, "table"));
  const int64_t s = a.dim(0), k = a.dim(1), n = x.dim(1), lda = a.stride(0), ldx = x.stride(0);
  if (w.weight.ndim() != 2 || w.weight.dim(0) != n || w.weight.dim(1) != k || w.weight.stride(1) != 1)
    return invalid_argument("linear_gate_residual: weight " + w.weight.describe() + " does not map a " + a.describe() +
                            " onto x " + x.describe());
  if (x.dim(0) != s || seg.rows != s)
    return invalid_argument("linear_gate_residual: a has " + std::to_string(s) + " rows, x " +
                            std::to_string(x.dim(0)) + ", the segments " + std::to_string(seg.rows));
  if (table.dim(1) % n != 0 || gate_chunk < 0 || gate_chunk >= table.dim(1) / n)
    return invalid_argument("linear_gate_residual: gate chunk " + std::to_string(gate_chunk) + " outside the table " +
                            table.describe() + " of hidden size " + std::to_string(n));
  // Per-row quantizer and cuBLASLt FP8: 16-byte rows and pointers, K % 16 (checked again where used).
  if (k % 16 || lda % 16 || n % 8 || ldx % 8 || !aligned16(a.raw_data()) || !aligned16(x.raw_data()))
    return invalid_argument(
        "linear_gate_residual: needs K and a's row stride multiples of 16, N and x's row stride "
        "multiples of 8 and 16-byte aligned a and x; got a " +
        a.describe() + ", x " + x.describe());
  VORTEX_RETURN_IF_ERROR(seg.validate(table.dim(0)));
  if (!gemm_) {
    VORTEX_ASSIGN_OR_RETURN(gemm_, GemmEngine::create());
  }
  const int64_t nseg = static_cast<int64_t>(seg.segments.size());
  // Scratch: q [S, K] e4m3 | per-row scales, each segment's run starting 16-byte aligned | w scales [nseg, N].
  VORTEX_ASSIGN_OR_RETURN(Tensor q, alloc({s, k}, DType::kF8E4M3));             // [S, K] e4m3
  VORTEX_ASSIGN_OR_RETURN(Tensor a_scale, alloc({s + 4 * nseg}, DType::kF32));  // [S + 4 nseg] f32
  VORTEX_ASSIGN_OR_RETURN(Tensor w_scale, alloc({nseg, n}, DType::kF32));       // [nseg, N] f32
  char* qp = static_cast<char*>(q.raw_data());
  float* asp = static_cast<float*>(a_scale.raw_data());
  float* wsp = static_cast<float*>(w_scale.raw_data());
  const char* ap = static_cast<const char*>(a.raw_data());
  char* xp = static_cast<char*>(x.raw_data());
  const char* tp = static_cast<const char*>(table.raw_data());
  int64_t scale_offset = 0;
  for (int64_t i = 0; i < nseg; ++i) {
    const Segment& sg = seg.segments[static_cast<size_t>(i)];
    const int64_t rows = sg.stop - sg.start;
    VORTEX_RETURN_IF_ERROR(
        quantize_fp8_per_row(ap + sg.start * lda * 2, rows, k, lda, qp + sg.start * k, asp + scale_offset, stream_));
    const char* gate = tp + (static_cast<int64_t>(sg.table_row) * table.stride(0) + gate_chunk * n) * 2;
    VORTEX_RETURN_IF_ERROR(
        fp8_gate_scale_vector(static_cast<const float*>(w.weight_scale.raw_data()), gate, n, wsp + i * n, stream_));
    GemmCall call;
    call.precision = GemmPrecision::kFp8RowScaled;
    call.m = rows;
    call.n = n;
    call.k = k;
    call.x = qp + sg.start * k;
    call.ldx = k;
    call.w = w.weight.raw_data();
    call.ldw = w.weight.stride(0);
    call.d = xp + sg.start * ldx * 2;
    call.ldd = ldx;
    call.x_scale = asp + scale_offset;
    call.w_scale = wsp + i * n;
    call.accumulate = true;  // x += ..., in place
    VORTEX_RETURN_IF_ERROR(
        gemm_->gemm(call, stream_).with_context("linear_gate_residual segment " + std::to_string(i)));
    scale_offset += (rows + 3) / 4 * 4;
  }
  return after_op("linear_gate_residual");
}

}  // namespace vortex
