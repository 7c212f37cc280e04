// Run-time switches that select between exact-equivalent (E0) or approximate (E2) programs, as enums: they
// arrive by one route (parse_* at the CLI / serve / workload edge, print with *_name), so no op compares
// strings. Each has a per-architecture default (the CUDA policy table, src/cuda/policy.h); the CPU backend
// ignores the performance switches. Tested in tests/engine/precision_test.cpp (parse/print round trips).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "vortex/status.h"

namespace vortex {

// Which attention program: kSdpa = the BF16 program (cuDNN SDPA on CUDA), kSage2 = INT8 QK / FP8 PV (E2),
// kBf16Owned = the BF16 program through Vortex's own sm_90a kernel where it runs (sm_90, head_dim 128, 72 or 64; cuDNN
// SDPA elsewhere), E1 like cuDNN and the sm90 policy default (src/cuda/attention/bf16_attention.h,
// src/cuda/policy.cpp).
enum class AttentionKind : uint8_t { kSdpa, kSage2, kBf16Owned };
// GEMM operand precision: bf16 (the BF16 program), fp8 (per-tensor W8A8, E2), nvfp4 (W4A4, E2),
// nvfp4-weight-only (NVFP4 weights expanded to BF16, as ComfyUI on Hopper).
enum class Precision : uint8_t { kBf16, kFp8, kNvfp4, kNvfp4WeightOnly };
// What FC2 runs in precision nvfp4: kW4A4 ("off": like the other GEMMs), kWeightOnly, kBf16.
enum class Nvfp4Fc2 : uint8_t { kW4A4, kWeightOnly, kBf16 };
// Whether a denoiser step runs as one captured CUDA graph (src/model/step_graph.h): kOff = eager launches,
// kOn = capture and replay wherever the backend can, kAuto = on for requests of at most
// ExecOptions::cuda_graph_auto_max_rows packed rows. E0 either way (the same kernels on the same buffers).
enum class CudaGraphMode : uint8_t { kOff, kOn, kAuto };

const char* attention_name(AttentionKind a);  // "sdpa" | "sage2" | "bf16-owned"
Result<AttentionKind> parse_attention(std::string_view name);
const char* precision_name(Precision p);  // "bf16" | "fp8" | "nvfp4" | "nvfp4-weight-only"
Result<Precision> parse_precision(std::string_view name);
const char* nvfp4_fc2_name(Nvfp4Fc2 f);  // "off" | "weight-only" | "bf16"
Result<Nvfp4Fc2> parse_nvfp4_fc2(std::string_view name);
const char* cuda_graph_name(CudaGraphMode m);  // "off" | "on" | "auto"
Result<CudaGraphMode> parse_cuda_graph(std::string_view name);

struct ExecOptions {
  bool fused_norm_modulate = false;  // Component 1: rms_norm_modulate instead of rms_norm + modulate
  bool fused_gate_add = false;       // Component 1: one gate_add kernel
  AttentionKind attention = AttentionKind::kSdpa;
  Precision precision = Precision::kBf16;  // GEMM operand precision (E2 if not bf16)
  bool debug_sync = false;                 // synchronize and check after every op
  // precision nvfp4 only: QKV/FC1 activations quantized straight from the RMSNorm output with the
  // modulation recomputed (modulate_quantize), FC2's from the FC1 output with SwiGLU recomputed
  // (swiglu_quantize); E0 vs the eager producers. Used only where backend.has_quantized_producers().
  bool fused_nvfp4_producers = false;
  // precision nvfp4 only: what FC2 runs (the policy default; applied to the weights at load).
  Nvfp4Fc2 nvfp4_fc2 = Nvfp4Fc2::kW4A4;
  // precision fp8 only (E2 vs linear + gate_add): out_proj + gate_msa and FC2 + gate_mlp as one row-scaled
  // FP8 GEMM per AdaLN segment that adds into x in its epilogue. Used only where backend.has_gate_epilogue(w).
  bool fp8_gate_epilogue = false;
  // attention sage2 only (E0 vs qk_norm_rope + attention): Sage2's Q INT8 quantization written by the
  // qk_norm_rope pass (qk_norm_rope_sage2); the attention pre-pass then quantizes K/V only. Used only where
  // backend.has_fused_q_quantize().
  bool fused_q_quantize = false;
  // Denoiser steps as CUDA graphs (warm-up step eager, next step captured, later steps replayed). Off by
  // default until bench/step_graph_bench.cpp has measured where it pays; kAuto uses the row limit below.
  CudaGraphMode cuda_graph = CudaGraphMode::kOff;
  // kAuto: capture requests of at most this many packed rows (h3.c's development size, 512x512 x 22 frames,
  // is about 2K rows; the limit is provisional until the step-graph benchmark sets it).
  int64_t cuda_graph_auto_max_rows = 4096;
  // Every step's AdaLN tables computed before step 1 (Pipeline::run -> H3Model::precompute_adaln; E0 with the
  // per-step tables). Off: each step computes its own (the per-step program, kept for A/B runs).
  bool adaln_ahead = true;

  bool operator==(const ExecOptions&) const = default;  // a captured step graph is keyed by the whole set
};

}  // namespace vortex
