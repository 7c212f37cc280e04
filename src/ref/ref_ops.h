// CPU reference ops: the BF16 program of docs/numerics.md as plain loops over host tensors (the oracle that
// every GPU kernel is checked against). One source file per op stem (src/ref/<stem>.cpp); a fused op is
// the composition of its unfused references. Each op validates shapes/dtypes/strides once and then runs
// its rows through a RowRunner (serial by default; CpuBackend passes its thread pool), so an output
// element is always computed by one thread in one fixed order: results never depend on the thread count.
// Tested in tests/ref/*_test.cpp against independent FP64 formulations and hand-picked exact values.
#pragma once

#include <cstdint>
#include <functional>

#include "backend/linear_weight.h"
#include "backend/segments.h"
#include "vortex/status.h"
#include "vortex/tensor.h"

namespace vortex::ref {

// Runs body(begin, end) over [0, rows) split into disjoint ranges (possibly concurrently).
using RowBody = std::function<void(int64_t begin, int64_t end)>;
using RowRunner = std::function<void(int64_t rows, const RowBody& body)>;
// Runs body(0, rows) on the calling thread.
void run_serial(int64_t rows, const RowBody& body);

// out[M,N] = x[M,K] @ W[N,K]^T (+ bias[N]).
//   bf16 x, bf16 W  -> bf16 out: FP64 sum in ascending k (BF16 products are exact in FP64), + bias, ONE
//                      rounding to BF16 (bf16_bits_from_f64).
//   f32 x, f32 W    -> f32 out: same with FP32 operands (FP32 products are exact in FP64), one rounding.
//   bf16 x, fp8_scaled W (f8e4m3 + f32 per-tensor weight_scale) -> bf16 out: W is first dequantized to BF16
//                      as R(fp32(fp8 * scale)) and then the bf16 program runs. This is ComfyUI's semantics
//                      on Hopper (comfy quant_ops: `qdata.to(bf16) * scale` with an FP32 0-dim scale,
//                      evaluated in FP32 opmath and rounded to BF16, then a BF16 GEMM).
//   nvfp4 W: kUnsupported on the CPU reference (dequantize with the NVFP4 reference first).
// x and out may be row-strided views (unit stride along the feature dim). Bias dtype = out dtype.
Status linear(const Tensor& x, const LinearWeight& w, const Tensor* bias, Tensor& out,
              const RowRunner& run = run_serial);

// Per row: ms = canonical_sum_squares(x) / n in FP64, r = (float)(1.0 / sqrt(ms + (double)eps)),
// out = R(fp32(fp32(x * r) * w)). x, out [S, D] bf16 (row-strided allowed), weight [D] bf16.
Status rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor& out, const RowRunner& run = run_serial);
// One row of rms_norm (shared by rms_norm and qk_norm_rope, so both run the same program).
// x, out: n BF16 values at unit stride (out may alias x); weight: n BF16 values.
void rms_norm_row(const uint16_t* x, const uint16_t* weight, int64_t n, float eps, uint16_t* out);

// transformers' Qwen3 RMSNorm: r as in rms_norm, out = R(fp32(R(fp32(x * r)) * w)) (two roundings).
Status rms_norm_two_rounding(const Tensor& x, const Tensor& weight, float eps, Tensor& out,
                             const RowRunner& run = run_serial);
void rms_norm_two_rounding_row(const uint16_t* x, const uint16_t* weight, int64_t n, float eps, uint16_t* out);

// In place: x = R(R(x * R(1 + scale)) + shift), scale/shift = table[seg.table_row(row), chunk * D : +D].
// x [S, D] bf16 (row-strided allowed); table [rows, C * D] bf16, C = number of chunks (6 or 2).
Status modulate(Tensor& x, const Tensor& table, int shift_chunk, int scale_chunk, const SegmentTable& seg,
                const RowRunner& run = run_serial);

// rms_norm into out, then modulate(out): literally the composition of the two references.
Status rms_norm_modulate(const Tensor& x, const Tensor& weight, float eps, const Tensor& table, int shift_chunk,
                         int scale_chunk, const SegmentTable& seg, Tensor& out, const RowRunner& run = run_serial);

// In place on q, k [S, heads * head_dim] bf16 (strided views of the QKV buffer, unit inner stride): per head,
// rms_norm_row over head_dim with q_weight / k_weight [head_dim], then if rope != nullptr rotate-half RoPE
// on dims < rope->rope_dims with half = rope_dims / 2, angle column j shared by dims j and j + half:
//   y[j] = R(R(x[j] * cos) + R(-x[j+half] * sin)),  y[j+half] = R(R(x[j+half] * cos) + R(x[j] * sin)).
// rope->cos / sin: [S, half] bf16 host tensors. Dims >= rope_dims pass unchanged (after the norm).
Status qk_norm_rope(Tensor& q, Tensor& k, const Tensor& q_weight, const Tensor& k_weight, float eps,
                    const RopeTables* rope, int num_heads, int head_dim, const RowRunner& run = run_serial);
// One head's rotate-half RoPE in place (the RoPE half of qk_norm_rope): x[0, 2*half) bf16, cos/sin rows [half].
void rope_head_row(uint16_t* x, const uint16_t* cos_row, const uint16_t* sin_row, int half);
// Qwen3's q/k norm + RoPE on one operand, in place: x [S, num_heads * head_dim] bf16 (strided view), per head
// rms_norm_two_rounding_row with weight [head_dim], then rope_head_row as in qk_norm_rope. One operand per
// call, so q and k may have different head counts (GQA).
Status head_norm_rope(Tensor& x, const Tensor& weight, float eps, const RopeTables* rope, int num_heads, int head_dim,
                      const RowRunner& run = run_serial);

// FP64-exact SDPA (the reference): per head and query, scores = (q . k) in FP64 (exact BF16 products),
// times 1/sqrt(head_dim) in FP64; softmax in FP64 (max-subtracted); out = sum_j p_j v_j / sum_j p_j in
// FP64, rounded ONCE to BF16. q, k, v [S, I] bf16 (row-strided views), out [S, I] bf16. Non-causal.
Status attention(const Tensor& q, const Tensor& k, const Tensor& v, int num_heads, int head_dim, Tensor& out,
                 const RowRunner& run = run_serial);
// The FP32 "same low-precision program" a flash kernel runs (for the two-reference rule): scores as FP32
// dot products (ascending d), scaled by fp32(1/sqrt(head_dim)); keys in blocks of `key_block` with an
// online max m and FP32 row sum l of the unrounded P = expf(s - m); P rounded to BF16 for the P.V product
// accumulated in FP32 and rescaled by expf(m_old - m_new) between blocks; out = R(acc / l).
// Causal grouped-query SDPA, the FP64-exact program of attention() with two changes: query head h reads
// kv head h / (num_heads / num_kv_heads) (transformers' repeat_kv), and query row i sees keys j <= i only
// (a decoder prefill; S_q == S_kv). q, out [S, num_heads * head_dim]; k, v [S, num_kv_heads * head_dim].
Status causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, int num_heads, int num_kv_heads,
                        int head_dim, Tensor& out, const RowRunner& run = run_serial);
Status attention_flash_fp32(const Tensor& q, const Tensor& k, const Tensor& v, int num_heads, int head_dim, Tensor& out,
                            int key_block = 128, const RowRunner& run = run_serial);

// In place: x = R(x + R(gate * a)), gate = table[seg.table_row(row), gate_chunk * D : +D];
// table == nullptr: x = R(x + a). x, a [S, D] bf16 (row-strided allowed).
Status gate_add(Tensor& x, const Tensor& a, const Tensor* table, int gate_chunk, const SegmentTable& seg,
                const RowRunner& run = run_serial);

// m[S, F] = R(R(silu(u[:, :F])) * u[:, F:]); silu(g) = g / (1 + exp(-g)) evaluated in FP64 and rounded once
// to BF16 (bf16_bits_from_f64); the product is an exact FP32 product rounded once. u [S, 2F] bf16.
Status swiglu(const Tensor& u, Tensor& m, const RowRunner& run = run_serial);
// The scalar SiLU of swiglu: BF16 bits of silu(g) for BF16 input bits.
uint16_t silu_bf16_bits(uint16_t g_bits);

// dst = convert(src): f32 -> bf16 (RNE, NaN -> 0x7FFF), bf16 -> f32 (exact), or a same-dtype copy.
// Same shape, any rank, either may be strided.
Status cast(const Tensor& src, Tensor& dst, const RowRunner& run = run_serial);

// ---- helpers shared by the op files ----
// Checks a 2-D host tensor of `dtype` with unit inner stride (row-strided views allowed); cols < 0: any.
Status check_rows(const Tensor& t, const char* what, DType dtype, int64_t rows, int64_t cols);
// Checks that a segment table covers `rows` rows and points inside a table of `table_rows` rows.
Status check_segments(const SegmentTable& seg, int64_t rows, int64_t table_rows);

// LoRA (src/ref/lora.cpp, docs/lora.md). Merge of one part into w [N, K] bf16 rows [row_offset, +rows):
//   kSingleRounding: W' = R(W + scale * sum_k B[i,k] A[k,j]) in FP64, ascending k, ONE rounding;
//   kPeft: d = fp32 FMA chain over ascending k, R(W + R(d * fp32(scale))) with an FP32 add (PEFT on the CPU).
// a [r, K] f32, b [rows, r] f32, contiguous.
Status lora_merge(Tensor& w, const Tensor& a, const Tensor& b, int64_t row_offset, double scale,
                  LoraMergeProgram program, const RowRunner& run = run_serial);
// Run-time branch: out = R(x W^T + bias + sum_p t_p B_p^T) with t_p = R(scale_p * x A_p^T) [M, r] BF16;
// x W^T, x A^T and t B^T each an FP64 sum in ascending k (or r), added unrounded, ONE final rounding.
// With every part's scale 0 the bytes equal linear(x, w, bias). BF16 W, x, A, B; W unquantized.
Status linear_lora(const Tensor& x, const LinearWeight& w, const Tensor* bias, const LoraBranch& lora, Tensor& out,
                   const RowRunner& run = run_serial);

}  // namespace vortex::ref
