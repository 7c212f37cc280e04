// H3Model: the whole H3 forward written once against Backend (docs/numerics.md "The BF16 program"; the
// block's op order is run_transformer_block's). The time MLP runs on the host (FP64 transcendentals and accumulation,
// rounded to FP32 — identical on every machine and for every backend); everything else is Backend ops.
// Tested in tests/model/h3_model_test.cpp (h3-tiny forward shapes/finiteness, fused == unfused bytes,
// thread-count determinism, one block vs an independent FP64 re-implementation); the fused NVFP4
// producers in tests/engine/nvfp4_mode_test.cpp (GPU) and tests/engine/fused_producers_test.cpp (CPU).
#include "model/h3_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

namespace vortex {
namespace {

LinearWeight plain_linear(const Tensor& weight) {
  LinearWeight w;
  w.weight = weight;
  w.out_features = weight.defined() ? weight.dim(0) : 0;
  w.in_features = weight.defined() && weight.ndim() == 2 ? weight.dim(1) : 0;
  return w;
}

// Host FP32 linear: out[m, n] = fp32(sum_k x[m,k] * W[n,k] + b[n]) with the sum in FP64, ascending k.
// (FP32 products are exact in FP64; the same program as the CPU reference's f32 linear.)
std::vector<float> host_linear_f32(const std::vector<float>& x, int64_t m, const Tensor& w, const Tensor& b) {
  const int64_t n = w.dim(0), k = w.dim(1);
  const float* wp = w.data<float>();
  const float* bp = b.data<float>();
  std::vector<float> out(static_cast<size_t>(m * n));
  for (int64_t r = 0; r < m; ++r)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0.0;
      for (int64_t i = 0; i < k; ++i) acc += static_cast<double>(x[static_cast<size_t>(r * k + i)]) * wp[j * k + i];
      acc += bp[j];
      out[static_cast<size_t>(r * n + j)] = static_cast<float>(acc);
    }
  return out;
}

// A linear call site: the plain op, or the run-time LoRA branch when one is attached (src/lora).
Status linear_call(Backend& backend, const Tensor& x, const LinearWeight& w, const Tensor* bias, Tensor& out) {
  if (w.lora) return backend.linear_lora(x, w, bias, *w.lora, out);
  return backend.linear(x, w, bias, out);
}

float silu_f32(float v) {
  const double d = v;
  return static_cast<float>(d / (1.0 + std::exp(-d)));
}

Status check_host_f32(const Tensor& t, const char* name, Shape shape) {
  if (!t.defined()) return invalid_argument(std::string(name) + " is missing from the weights");
  if (t.dtype() != DType::kF32 || t.shape() != shape)
    return invalid_argument(std::string(name) + " must be " + shape_to_string(shape) + " f32, got " + t.describe());
  return Status::Ok();
}

Result<Tensor> download_copy(Backend& backend, const Tensor& t) {
  Tensor host = Tensor::empty(t.shape(), t.dtype());
  VORTEX_RETURN_IF_ERROR(backend.download(t, host));
  return host;
}

Result<Tensor> host_tensor_from(const std::vector<float>& v, Shape shape) {
  if (static_cast<int64_t>(v.size()) != shape_numel(shape))
    return invalid_argument("latent vector has " + std::to_string(v.size()) + " values but the request needs " +
                            shape_to_string(shape) + " = " + std::to_string(shape_numel(shape)));
  Tensor t = Tensor::empty(std::move(shape), DType::kF32);
  if (!v.empty()) std::memcpy(t.raw_data(), v.data(), v.size() * sizeof(float));
  return t;
}

}  // namespace

// ---- BlockScratch -----------------------------------------------------------------------------

Result<BlockScratch> BlockScratch::allocate(Backend& backend, const ModelConfig& cfg, int64_t rows) {
  BlockScratch s;
  const int64_t d = cfg.hidden, inner = cfg.inner(), f = cfg.ffn;
  VORTEX_ASSIGN_OR_RETURN(s.qkv, backend.alloc({rows, 3 * inner}, DType::kBF16));
  VORTEX_ASSIGN_OR_RETURN(s.attn_out, backend.alloc({rows, inner}, DType::kBF16));
  VORTEX_ASSIGN_OR_RETURN(s.proj_out, backend.alloc({rows, d}, DType::kBF16));
  VORTEX_ASSIGN_OR_RETURN(s.norm_out, backend.alloc({rows, d}, DType::kBF16));
  VORTEX_ASSIGN_OR_RETURN(s.fc1_out, backend.alloc({rows, 2 * f}, DType::kBF16));
  VORTEX_ASSIGN_OR_RETURN(s.swiglu_out, backend.alloc({rows, f}, DType::kBF16));
  return s;
}

Result<BlockScratch> BlockScratch::first_rows(int64_t rows) const {
  BlockScratch s;
  VORTEX_ASSIGN_OR_RETURN(s.qkv, qkv.narrow(0, 0, rows));
  VORTEX_ASSIGN_OR_RETURN(s.attn_out, attn_out.narrow(0, 0, rows));
  VORTEX_ASSIGN_OR_RETURN(s.proj_out, proj_out.narrow(0, 0, rows));
  VORTEX_ASSIGN_OR_RETURN(s.norm_out, norm_out.narrow(0, 0, rows));
  VORTEX_ASSIGN_OR_RETURN(s.fc1_out, fc1_out.narrow(0, 0, rows));
  VORTEX_ASSIGN_OR_RETURN(s.swiglu_out, swiglu_out.narrow(0, 0, rows));
  return s;
}

// ---- Ulysses sequence parallelism ------------------------------------------------------------

Status check_sequence_parallel(const ModelConfig& cfg, int world, int64_t rows) {
  if (world < 1)
    return invalid_argument("sequence parallelism: the world size must be >= 1, got " + std::to_string(world));
  if (rows < world)
    return invalid_argument("sequence parallelism over " + std::to_string(world) +
                            " ranks needs at least one packed row per rank; the request has " + std::to_string(rows) +
                            " rows");
  return Status::Ok();
}

namespace {

// Steps 4-5 on the [S, I] views q, k, v of heads `heads`: per-head Q/K RMSNorm + RoPE in place, then
// o = R(attention(q, k, v)) into out [S, I]. With fused_q_quantize where the backend offers it
// (has_fused_q_quantize: Sage2 attention), the attention program's Q quantization runs in the norm pass and
// the attention reads it: the same bytes of q, k and out as the two unfused ops.
Status norm_rope_attention(Backend& backend, const ModelConfig& cfg, const ExecOptions& opts,
                           const H3BlockWeights& block, const RopeTables* rope, Tensor& q, Tensor& k, const Tensor& v,
                           int heads, Tensor& out) {
  const int hd = cfg.head_dim;
  if (backend.has_fused_q_quantize(q.dim(0), heads, hd, opts)) {
    QuantizedQuery qq;
    {
      BackendRegion region(backend, "qk_norm_rope");
      VORTEX_RETURN_IF_ERROR(backend
                                 .qk_norm_rope_quantize_q(q, k, block.attn_q_norm_weight, block.attn_k_norm_weight,
                                                          cfg.qk_norm_eps, rope, heads, hd, opts, qq)
                                 .with_context("qk_norm_rope + Q quantization (fused_q_quantize)"));
    }
    BackendRegion region(backend, "attention");
    return backend.attention_quantized_q(qq, k, v, heads, hd, out, opts)
        .with_context("attention on the pre-quantized Q (fused_q_quantize)");
  }
  {
    BackendRegion region(backend, "qk_norm_rope");
    VORTEX_RETURN_IF_ERROR(
        backend.qk_norm_rope(q, k, block.attn_q_norm_weight, block.attn_k_norm_weight, cfg.qk_norm_eps, rope, heads, hd)
            .with_context("qk_norm_rope"));
  }
  BackendRegion region(backend, "attention");
  return backend.attention(q, k, v, heads, hd, out, opts).with_context("attention");
}

// Steps 4-5 under Ulysses: qkv [rows_r, 3I] of my rows -> all-to-all -> [S, 3 I_r] of my heads ->
// q/k norm + RoPE + attention on all rows -> all-to-all back -> attn_out [rows_r, I] of my rows.
// Heads are independent in steps 4-5 and every op here is per (row, head), so the bytes equal the
// single-rank program's.
Status ulysses_attention(Backend& backend, const ModelConfig& cfg, const ExecOptions& opts, const H3BlockWeights& block,
                         const RopeTables* rope, BlockScratch& sc, UlyssesPlan& sp) {
  const int u = sp.world();
  const int64_t inner = cfg.inner(), hd = cfg.head_dim;
  const int64_t s_me = sp.my_rows().size(), s_all = sp.rows.back().end;
  const int64_t i_me = sp.my_heads().size() * hd;
  std::vector<Tensor> send(static_cast<size_t>(u)), recv(static_cast<size_t>(u));
  {
    BackendRegion region(backend, "sp_pack");
    int64_t off = 0;
    for (int j = 0; j < u; ++j) {
      const Span& hj = sp.heads[static_cast<size_t>(j)];
      const int64_t ij = hj.size() * hd;
      VORTEX_ASSIGN_OR_RETURN(Tensor flat, sp.send.narrow(0, off, s_me * 3 * ij));
      VORTEX_ASSIGN_OR_RETURN(send[static_cast<size_t>(j)], flat.reshape({s_me, 3 * ij}));  // [rows_r, 3 I_j]
      off += s_me * 3 * ij;
      if (ij == 0) continue;
      for (int part = 0; part < 3; ++part) {  // q, k, v columns of heads j
        VORTEX_ASSIGN_OR_RETURN(Tensor src,
                                sc.qkv.as_strided({s_me, ij}, {3 * inner, 1}, part * inner + hj.begin * hd));
        VORTEX_ASSIGN_OR_RETURN(Tensor dst,
                                send[static_cast<size_t>(j)].as_strided({s_me, ij}, {3 * ij, 1}, part * ij));
        VORTEX_RETURN_IF_ERROR(backend.copy(src, dst));
      }
    }
    for (int j = 0; j < u; ++j) {
      const Span& rj = sp.rows[static_cast<size_t>(j)];
      VORTEX_ASSIGN_OR_RETURN(recv[static_cast<size_t>(j)],
                              sp.qkv_heads.narrow(0, rj.begin, rj.size()));  // [rows_j, 3 I_r]
    }
  }
  {
    BackendRegion region(backend, "sp_all_to_all_qkv");
    VORTEX_RETURN_IF_ERROR(sp.comm->all_to_all(send, recv).with_context("all-to-all of q/k/v (rows -> heads)"));
  }
  if (i_me > 0) {
    const int heads_me = static_cast<int>(sp.my_heads().size());
    VORTEX_ASSIGN_OR_RETURN(Tensor q, sp.qkv_heads.as_strided({s_all, i_me}, {3 * i_me, 1}, 0));     // [S, I_r] view
    VORTEX_ASSIGN_OR_RETURN(Tensor k, sp.qkv_heads.as_strided({s_all, i_me}, {3 * i_me, 1}, i_me));  // [S, I_r] view
    VORTEX_ASSIGN_OR_RETURN(Tensor v,
                            sp.qkv_heads.as_strided({s_all, i_me}, {3 * i_me, 1}, 2 * i_me));  // [S, I_r] view
    VORTEX_RETURN_IF_ERROR(norm_rope_attention(backend, cfg, opts, block, rope, q, k, v, heads_me, sp.attn_heads));
  }
  int64_t off = 0;
  for (int j = 0; j < u; ++j) {
    const Span& rj = sp.rows[static_cast<size_t>(j)];
    const int64_t ij = sp.heads[static_cast<size_t>(j)].size() * hd;
    VORTEX_ASSIGN_OR_RETURN(send[static_cast<size_t>(j)],
                            sp.attn_heads.narrow(0, rj.begin, rj.size()));  // [rows_j, I_r]
    VORTEX_ASSIGN_OR_RETURN(Tensor flat, sp.recv.narrow(0, off, s_me * ij));
    VORTEX_ASSIGN_OR_RETURN(recv[static_cast<size_t>(j)], flat.reshape({s_me, ij}));  // [rows_r, I_j]
    off += s_me * ij;
  }
  {
    BackendRegion region(backend, "sp_all_to_all_out");
    VORTEX_RETURN_IF_ERROR(
        sp.comm->all_to_all(send, recv).with_context("all-to-all of the attention output (heads -> rows)"));
  }
  BackendRegion region(backend, "sp_unpack");
  for (int j = 0; j < u; ++j) {
    const Span& hj = sp.heads[static_cast<size_t>(j)];
    if (hj.size() == 0) continue;
    VORTEX_ASSIGN_OR_RETURN(Tensor dst, sc.attn_out.as_strided({s_me, hj.size() * hd}, {inner, 1}, hj.begin * hd));
    VORTEX_RETURN_IF_ERROR(backend.copy(recv[static_cast<size_t>(j)], dst));
  }
  return Status::Ok();
}

}  // namespace

// ---- one block ----------------------------------------------------------------------------------

Status run_transformer_block(Backend& backend, const ModelConfig& cfg, const ExecOptions& opts,
                             const H3BlockWeights& block, Tensor& x, const Tensor* table, const SegmentTable* segments,
                             const RopeTables* rope, BlockScratch& scratch, UlyssesPlan* sp) {
  if ((table == nullptr) != (segments == nullptr))
    return invalid_argument("run_transformer_block: pass both the AdaLN table and its segments, or neither (refiner)");
  const int64_t s = x.dim(0), inner = cfg.inner();
  const int heads = cfg.num_heads;
  backend.configure(opts);  // run-time switches that are not op arguments (e.g. fused_gate_add on CUDA)
  VORTEX_ASSIGN_OR_RETURN(BlockScratch sc, scratch.first_rows(s));
  const SegmentTable no_segments;
  const SegmentTable& seg = segments ? *segments : no_segments;

  // 1-2. n = modulate(RMSNorm1(x), shift_msa, scale_msa)            // [S, D] bf16
  auto norm_modulate = [&](const Tensor& weight, int shift_chunk, int scale_chunk) -> Status {
    if (table == nullptr) return backend.rms_norm(x, weight, cfg.norm_eps, sc.norm_out);
    if (opts.fused_norm_modulate)
      return backend.rms_norm_modulate(x, weight, cfg.norm_eps, *table, shift_chunk, scale_chunk, seg, sc.norm_out);
    VORTEX_RETURN_IF_ERROR(backend.rms_norm(x, weight, cfg.norm_eps, sc.norm_out));
    return backend.modulate(sc.norm_out, *table, shift_chunk, scale_chunk, seg);
  };
  // Each step runs inside a profiling region (level 1: `vortex bench block` components; free otherwise).
  auto timed = [&](const char* name, auto&& op) -> Status {
    BackendRegion region(backend, name);
    return op();
  };
  // Fused NVFP4 producers (precision nvfp4, switch on, backend provides them, consumer weight NVFP4):
  // the modulated / SwiGLU BF16 tensors are never written; the producer quantizes straight into
  // backend scratch (E0 vs the eager "materialize, then linear() quantizes" program).
  const bool fused_q = opts.precision == Precision::kNvfp4 && opts.fused_nvfp4_producers &&
                       backend.has_quantized_producers(QuantFormat::kNvfp4);
  auto fused_input = [&](const LinearWeight& w) {
    return fused_q && table != nullptr && w.format == QuantFormat::kNvfp4 && !w.lora;
  };
  // n = RMSNorm(x) [S, D] bf16 (unmodulated) -> modulate_quantize -> the NVFP4 GEMM.
  auto norm_quantize_linear = [&](const Tensor& norm_weight, int shift_chunk, int scale_chunk, const char* norm_region,
                                  const char* linear_region, const LinearWeight& w, Tensor& out) -> Status {
    VORTEX_RETURN_IF_ERROR(
        timed(norm_region, [&] { return backend.rms_norm(x, norm_weight, cfg.norm_eps, sc.norm_out); }));
    return timed(linear_region, [&]() -> Status {
      QuantizedActivation qa;
      VORTEX_RETURN_IF_ERROR(backend.modulate_quantize(sc.norm_out, *table, shift_chunk, scale_chunk, seg, w, qa));
      return backend.linear_quantized(qa, w, nullptr, out);
    });
  };
  if (fused_input(block.attn_qkv_proj)) {
    // 1-3 fused: qkv = R(q(modulate(RMSNorm1(x))) @ Wqkv^T)              // [S, 3I] bf16, [q | k | v]
    VORTEX_RETURN_IF_ERROR(norm_quantize_linear(block.norm1_weight, kShiftMsa, kScaleMsa, "norm1_modulate", "qkv",
                                                block.attn_qkv_proj, sc.qkv)
                               .with_context("norm1 + qkv_proj (fused nvfp4 producer)"));
  } else {
    VORTEX_RETURN_IF_ERROR(timed("norm1_modulate", [&] {
                             return norm_modulate(block.norm1_weight, kShiftMsa, kScaleMsa);
                           }).with_context("norm1"));
    // 3. qkv = R(n @ Wqkv^T)                                            // [S, 3I] bf16, [q | k | v]
    VORTEX_RETURN_IF_ERROR(timed("qkv", [&] {
                             return linear_call(backend, sc.norm_out, block.attn_qkv_proj, nullptr, sc.qkv);
                           }).with_context("qkv_proj"));
  }
  if (sp != nullptr) {
    VORTEX_RETURN_IF_ERROR(ulysses_attention(backend, cfg, opts, block, rope, sc, *sp));
  } else {
    VORTEX_ASSIGN_OR_RETURN(Tensor q, sc.qkv.as_strided({s, inner}, {3 * inner, 1}, 0));          // [S, I] view
    VORTEX_ASSIGN_OR_RETURN(Tensor k, sc.qkv.as_strided({s, inner}, {3 * inner, 1}, inner));      // [S, I] view
    VORTEX_ASSIGN_OR_RETURN(Tensor v, sc.qkv.as_strided({s, inner}, {3 * inner, 1}, 2 * inner));  // [S, I] view
    // 4. per-head Q/K RMSNorm, then RoPE (main blocks only); 5. o = R(SDPA(q, k, v))  // [S, I] bf16, token-major
    VORTEX_RETURN_IF_ERROR(norm_rope_attention(backend, cfg, opts, block, rope, q, k, v, heads, sc.attn_out));
  }
  // Gated residual in the FP8 GEMM epilogue (switch fp8_gate_epilogue, E2): x = R(x + gate * (q(in) @ q(W)^T)).
  auto gate_epilogue = [&](const LinearWeight& w) {
    return opts.fp8_gate_epilogue && table != nullptr && backend.has_gate_epilogue(w);
  };
  if (gate_epilogue(block.attn_out_proj)) {
    // 6-7 fused: x = R(x + (s_o * s_w * gate_msa) * q(o) @ q(Wout)^T)   // x [S, D] bf16, in place
    VORTEX_RETURN_IF_ERROR(timed("out_proj", [&] {
                             return backend.linear_gate_residual(sc.attn_out, block.attn_out_proj, x, *table, kGateMsa,
                                                                 seg);
                           }).with_context("out_proj + gate_msa (fp8 gate epilogue)"));
  } else {
    // 6. a = R(o @ Wout^T)                                              // [S, D] bf16
    VORTEX_RETURN_IF_ERROR(timed("out_proj", [&] {
                             return linear_call(backend, sc.attn_out, block.attn_out_proj, nullptr, sc.proj_out);
                           }).with_context("out_proj"));
    // 7. x = R(x + R(gate_msa * a))  (refiner: x = R(x + a))
    // fused_gate_add is applied inside the backend (Backend::configure above); the model calls gate_add.
    VORTEX_RETURN_IF_ERROR(timed("gate_msa", [&] {
                             return backend.gate_add(x, sc.proj_out, table, kGateMsa, seg);
                           }).with_context("gate_add msa"));
  }
  if (fused_input(block.mlp_fc1)) {
    // 8-9 fused: u = R(q(modulate(RMSNorm2(x))) @ Wfc1^T)               // [S, 2F] bf16
    VORTEX_RETURN_IF_ERROR(norm_quantize_linear(block.norm2_weight, kShiftMlp, kScaleMlp, "norm2_modulate", "fc1",
                                                block.mlp_fc1, sc.fc1_out)
                               .with_context("norm2 + fc1 (fused nvfp4 producer)"));
  } else {
    // 8. n = modulate(RMSNorm2(x), shift_mlp, scale_mlp)
    VORTEX_RETURN_IF_ERROR(timed("norm2_modulate", [&] {
                             return norm_modulate(block.norm2_weight, kShiftMlp, kScaleMlp);
                           }).with_context("norm2"));
    // 9. u = R(n @ Wfc1^T) [S, 2F]
    VORTEX_RETURN_IF_ERROR(timed("fc1", [&] {
                             return linear_call(backend, sc.norm_out, block.mlp_fc1, nullptr, sc.fc1_out);
                           }).with_context("fc1"));
  }
  if (fused_q && block.mlp_fc2.format == QuantFormat::kNvfp4 && !block.mlp_fc2.lora) {
    // 9-10 fused: f = R(q(R(R(silu(gate)) * value)) @ Wfc2^T) [S, D]; m is never written.
    VORTEX_RETURN_IF_ERROR(timed("fc2", [&]() -> Status {
                             QuantizedActivation qa;
                             VORTEX_RETURN_IF_ERROR(backend.swiglu_quantize(sc.fc1_out, block.mlp_fc2, qa));
                             return backend.linear_quantized(qa, block.mlp_fc2, nullptr, sc.proj_out);
                           }).with_context("swiglu + fc2 (fused nvfp4 producer)"));
  } else {
    // m = R(R(silu(gate)) * value) [S, F]
    VORTEX_RETURN_IF_ERROR(
        timed("swiglu", [&] { return backend.swiglu(sc.fc1_out, sc.swiglu_out); }).with_context("swiglu"));
    if (gate_epilogue(block.mlp_fc2)) {
      // 10 + gate fused: x = R(x + (s_m * s_w * gate_mlp) * q(m) @ q(Wfc2)^T)   // x [S, D] bf16, in place
      return timed("fc2",
                   [&] { return backend.linear_gate_residual(sc.swiglu_out, block.mlp_fc2, x, *table, kGateMlp, seg); })
          .with_context("fc2 + gate_mlp (fp8 gate epilogue)");
    }
    // 10. f = R(m @ Wfc2^T) [S, D]  (FC2 weight-only / bf16 fallback keeps the BF16 m)
    VORTEX_RETURN_IF_ERROR(timed("fc2", [&] {
                             return linear_call(backend, sc.swiglu_out, block.mlp_fc2, nullptr, sc.proj_out);
                           }).with_context("fc2"));
  }
  // x = R(x + R(gate_mlp * f))
  VORTEX_RETURN_IF_ERROR(timed("gate_mlp", [&] {
                           return backend.gate_add(x, sc.proj_out, table, kGateMlp, seg);
                         }).with_context("gate_add mlp"));
  return Status::Ok();
}

// ---- time embedding (host) ----------------------------------------------------------------------

std::vector<float> timestep_sinusoid(int freq_dim, float t) {
  const int half = freq_dim / 2;
  std::vector<float> emb(static_cast<size_t>(freq_dim), 0.0f);
  for (int k = 0; k < half; ++k) {
    const float freq = static_cast<float>(std::exp(-std::log(10000.0) * k / half));
    const float arg = t * freq;  // FP32 product, as the reference's t[:, None] * freqs[None]
    emb[static_cast<size_t>(k)] = static_cast<float>(std::cos(static_cast<double>(arg)));
    emb[static_cast<size_t>(half + k)] = static_cast<float>(std::sin(static_cast<double>(arg)));
  }
  return emb;
}

Result<Tensor> adaln_input_host(const ModelConfig& cfg, const TimeEmbedderHost& te,
                                const std::vector<float>& timesteps) {
  const int64_t m = static_cast<int64_t>(timesteps.size());
  VORTEX_RETURN_IF_ERROR(
      check_host_f32(te.proj_in_weight, "time_embedder.proj_in.weight", {cfg.time_embed_hidden, cfg.freq_dim}));
  VORTEX_RETURN_IF_ERROR(check_host_f32(te.proj_in_bias, "time_embedder.proj_in.bias", {cfg.time_embed_hidden}));
  VORTEX_RETURN_IF_ERROR(
      check_host_f32(te.proj_out_weight, "time_embedder.proj_out.weight", {cfg.time_embed_dim, cfg.time_embed_hidden}));
  VORTEX_RETURN_IF_ERROR(check_host_f32(te.proj_out_bias, "time_embedder.proj_out.bias", {cfg.time_embed_dim}));
  std::vector<float> emb;  // [M, freq_dim] f32
  for (float t : timesteps) {
    std::vector<float> e = timestep_sinusoid(cfg.freq_dim, t);
    emb.insert(emb.end(), e.begin(), e.end());
  }
  std::vector<float> h = host_linear_f32(emb, m, te.proj_in_weight, te.proj_in_bias);  // [M, hidden_te] f32
  for (float& v : h) v = silu_f32(v);
  std::vector<float> temb = host_linear_f32(h, m, te.proj_out_weight, te.proj_out_bias);  // [M, E] f32
  Tensor out = Tensor::empty({m, cfg.time_embed_dim}, DType::kBF16);                      // [M, E] bf16
  uint16_t* o = out.data<uint16_t>();
  for (size_t i = 0; i < temb.size(); ++i) o[i] = bf16_bits_from_f32(silu_f32(temb[i]));
  return out;
}

// ---- H3Model ------------------------------------------------------------------------------------

H3Model::H3Model(ModelConfig cfg, Backend& backend, H3Weights weights, ExecOptions opts)
    : cfg_(std::move(cfg)), backend_(backend), weights_(std::move(weights)), opts_(std::move(opts)) {}

Status H3Model::prepare(const PackedLayout& layout, const Tensor& text, const Tensor& condition_rows,
                        const Tensor& reference_audio_rows) {
  const int64_t l = layout.geo.text_rows, s = layout.geo.total_rows();
  const int64_t nc = layout.geo.condition_rows();
  // Conditioning rows by kind: visual (keyframes, image and video references) and reference audio.
  int64_t nac = 0;
  for (const ReferenceBlock& r : layout.geo.references) nac += r.audio_rows();
  const int64_t nvc = nc - nac;
  const std::string what = layout.geo.references.empty()
                               ? std::to_string(layout.geo.keyframes.size()) + " keyframe(s)"
                               : std::to_string(layout.geo.references.size()) + " reference(s)";
  auto rows_ok = [](const Tensor& t, int64_t n, int64_t width) {
    if (n == 0) return !t.defined() || t.numel() == 0;
    return t.defined() && t.ndim() == 2 && t.dim(0) == n && t.dim(1) == width && t.dtype() == DType::kF32 &&
           t.device() == Device::kCpu && t.is_contiguous();
  };
  if (!rows_ok(condition_rows, nvc, int64_t{cfg_.in_channels} * 4))
    return invalid_argument("prepare: the layout has " + what + " with " + std::to_string(nvc) +
                            " visual conditioning rows: condition_rows must be a host [" + std::to_string(nvc) + ", " +
                            std::to_string(cfg_.in_channels * 4) + "] f32 tensor" + (nvc == 0 ? " or none" : "") +
                            ", got " + (condition_rows.defined() ? condition_rows.describe() : "undefined"));
  if (!rows_ok(reference_audio_rows, nac, int64_t{cfg_.audio_in_channels}))
    return invalid_argument("prepare: the layout has " + what + " with " + std::to_string(nac) +
                            " reference audio rows: reference_audio_rows must be a host [" + std::to_string(nac) +
                            ", " + std::to_string(cfg_.audio_in_channels) + "] f32 tensor" +
                            (nac == 0 ? " or none" : "") + ", got " +
                            (reference_audio_rows.defined() ? reference_audio_rows.describe() : "undefined"));
  if (static_cast<int64_t>(layout.modality.size()) != s)
    return invalid_argument("prepare: the packed layout is inconsistent (build it with pack_request)");
  if (!text.defined() || text.ndim() != 2 || text.dim(0) != l || text.device() != Device::kCpu ||
      (text.dtype() != DType::kF32 && text.dtype() != DType::kBF16))
    return invalid_argument("prepare: text must be a host [" + std::to_string(l) + ", " +
                            std::to_string(cfg_.text_dim) + "] (raw) or [" + std::to_string(l) + ", " +
                            std::to_string(cfg_.hidden) + "] (refined) f32/bf16 tensor, got " +
                            (text.defined() ? text.describe() : "undefined"));
  const bool refined = text.dim(1) == cfg_.hidden;
  if (!refined && text.dim(1) != cfg_.text_dim)
    return invalid_argument("prepare: text width " + std::to_string(text.dim(1)) + " is neither text_dim " +
                            std::to_string(cfg_.text_dim) + " (raw Qwen3-VL states) nor hidden " +
                            std::to_string(cfg_.hidden) + " (already refined)");
  if (static_cast<int>(weights_.blocks.size()) != cfg_.num_layers)
    return invalid_argument("prepare: the weights hold " + std::to_string(weights_.blocks.size()) +
                            " blocks but the config has " + std::to_string(cfg_.num_layers));
  layout_ = layout;

  if (!prepared_) {
    VORTEX_ASSIGN_OR_RETURN(time_host_.proj_in_weight, download_copy(backend_, weights_.time_embedder_proj_in_weight));
    VORTEX_ASSIGN_OR_RETURN(time_host_.proj_in_bias, download_copy(backend_, weights_.time_embedder_proj_in_bias));
    VORTEX_ASSIGN_OR_RETURN(time_host_.proj_out_weight,
                            download_copy(backend_, weights_.time_embedder_proj_out_weight));
    VORTEX_ASSIGN_OR_RETURN(time_host_.proj_out_bias, download_copy(backend_, weights_.time_embedder_proj_out_bias));
  }

  // RoPE tables: host BF16 cos/sin from the checkpoint's inv_freq (else computed), uploaded once.
  Tensor inv_freq_host;
  if (weights_.rope_inv_freq.defined()) {
    VORTEX_ASSIGN_OR_RETURN(inv_freq_host, download_copy(backend_, weights_.rope_inv_freq));
  }
  VORTEX_ASSIGN_OR_RETURN(RopeTables host_rope,
                          make_rope_tables(cfg_, layout_, inv_freq_host.defined() ? &inv_freq_host : nullptr));
  rope_.rope_dims = host_rope.rope_dims;
  VORTEX_ASSIGN_OR_RETURN(rope_.cos, backend_.upload(host_rope.cos));  // [S, rope_dims/2] bf16
  VORTEX_ASSIGN_OR_RETURN(rope_.sin, backend_.upload(host_rope.sin));  // [S, rope_dims/2] bf16

  if (sequence_parallel()) {
    // Each rank keeps its own rows of the residual stream and block activations; the head-parallel
    // buffers hold all S rows of its heads (docs/multi_gpu.md "Memory").
    const int u = comm_->size();
    VORTEX_RETURN_IF_ERROR(check_sequence_parallel(cfg_, u, s));
    sp_ = UlyssesPlan{};
    sp_.comm = comm_;
    for (int j = 0; j < u; ++j) {
      sp_.rows.push_back(even_split(s, u, j));
      sp_.heads.push_back(even_split(cfg_.num_heads, u, j));
    }
    const int64_t s_me = sp_.my_rows().size(), i_me = sp_.my_heads().size() * cfg_.head_dim, inner = cfg_.inner();
    VORTEX_ASSIGN_OR_RETURN(sp_.send, backend_.alloc({s_me * 3 * inner}, DType::kBF16));
    VORTEX_ASSIGN_OR_RETURN(sp_.qkv_heads, backend_.alloc({s, 3 * i_me}, DType::kBF16));  // [S, 3 I_r]
    VORTEX_ASSIGN_OR_RETURN(sp_.attn_heads, backend_.alloc({s, i_me}, DType::kBF16));     // [S, I_r]
    VORTEX_ASSIGN_OR_RETURN(sp_.recv, backend_.alloc({s_me * inner}, DType::kBF16));
    VORTEX_ASSIGN_OR_RETURN(x_shard_, backend_.alloc({s_me, cfg_.hidden}, DType::kBF16));  // [rows_r, D]
    VORTEX_ASSIGN_OR_RETURN(final_norm_, backend_.alloc({s, cfg_.hidden}, DType::kBF16));  // [S, D]
    // The refiner runs on all L text rows on every rank (its blocks are not split).
    VORTEX_ASSIGN_OR_RETURN(scratch_, BlockScratch::allocate(backend_, cfg_, std::max(s_me, l)));
  } else {
    sp_ = UlyssesPlan{};
    x_shard_ = Tensor();
    final_norm_ = Tensor();
    VORTEX_ASSIGN_OR_RETURN(scratch_, BlockScratch::allocate(backend_, cfg_, s));
  }
  // The single-GPU step workspace (StepWorkspace): tables sized for the distinct timesteps a step can have (video,
  // audio, visual conditioning, and reference audio at 1.0 when the layout has it), I/O rows for this layout. Any
  // captured step graph refers to the previous buffers: the generation drops it.
  ++workspace_generation_;
  graph_.reset();
  ws_ = StepWorkspace{};
  if (!sequence_parallel()) {
    const int64_t d = cfg_.hidden, slots = nac > 0 ? 4 : 3;
    VORTEX_ASSIGN_OR_RETURN(ws_.silu_temb, backend_.alloc({slots, cfg_.time_embed_dim}, DType::kBF16));
    for (int i = 0; i < cfg_.num_layers; ++i) {
      VORTEX_ASSIGN_OR_RETURN(Tensor t, backend_.alloc({slots, 18 * d}, DType::kBF16));  // [slots, 18D] bf16
      ws_.block_table_store.push_back(t);
    }
    VORTEX_ASSIGN_OR_RETURN(ws_.final_table_store, backend_.alloc({slots, 2 * d}, DType::kBF16));  // [slots, 2D]
    VORTEX_ASSIGN_OR_RETURN(ws_.packed, backend_.alloc({s, d}, DType::kBF16));                     // [S, D] bf16
    VORTEX_ASSIGN_OR_RETURN(ws_.io, StepIo::allocate(backend_, cfg_, layout_.geo, weights_, &scratch_.fc1_out));
  }
  VORTEX_RETURN_IF_ERROR(backend_.warm_up(opts_));  // engines now, not inside the first step

  // Conditioning rows, projected once into [Nc, D] bf16 in packed order: keyframe rows (fl2va) and the reference
  // blocks' visual rows (ref2va) by the same video_patch_proj as the generated video rows, reference audio rows by
  // audio_patch_proj (F32 GEMM, then BF16). Each run of one modality takes the next rows of its input.
  condition_embedded_ = Tensor();
  if (nc > 0) {
    VORTEX_ASSIGN_OR_RETURN(condition_embedded_, backend_.alloc({nc, cfg_.hidden}, DType::kBF16));  // [Nc, D] bf16
    struct Source {
      const Tensor* rows;
      const Tensor* weight;
      const Tensor* bias;
      const char* name;
      Tensor embedded;  // [n, D] bf16
      int64_t next = 0;
    };
    Source sources[2] = {
        {&condition_rows, &weights_.video_patch_proj_weight, &weights_.video_patch_proj_bias,
         "video_patch_proj (conditioning rows)", Tensor()},
        {&reference_audio_rows, &weights_.audio_patch_proj_weight, &weights_.audio_patch_proj_bias,
         "audio_patch_proj (reference audio rows)", Tensor()},
    };
    for (Source& src : sources) {
      const int64_t n = src.rows->defined() ? src.rows->dim(0) : 0;
      if (n == 0) continue;
      VORTEX_ASSIGN_OR_RETURN(Tensor rows_dev, backend_.upload(*src.rows));                 // [n, 4C] / [n, Ca] f32
      VORTEX_ASSIGN_OR_RETURN(Tensor proj, backend_.alloc({n, cfg_.hidden}, DType::kF32));  // [n, D] f32
      VORTEX_RETURN_IF_ERROR(
          backend_.linear(rows_dev, plain_linear(*src.weight), src.bias, proj).with_context(src.name));
      if (n == nc) {  // every conditioning row is of this kind: cast in place
        VORTEX_RETURN_IF_ERROR(backend_.cast(proj, condition_embedded_));
        break;
      }
      VORTEX_ASSIGN_OR_RETURN(src.embedded, backend_.alloc({n, cfg_.hidden}, DType::kBF16));  // [n, D] bf16
      VORTEX_RETURN_IF_ERROR(backend_.cast(proj, src.embedded));
    }
    if (sources[0].embedded.defined() || sources[1].embedded.defined()) {
      const int64_t c0 = layout_.geo.condition_start();
      for (int64_t i = 0; i < nc;) {
        const Modality m = layout_.modality[static_cast<size_t>(c0 + i)];
        int64_t j = i;
        while (j < nc && layout_.modality[static_cast<size_t>(c0 + j)] == m) ++j;
        Source& src = sources[m == Modality::kAudio ? 1 : 0];
        VORTEX_ASSIGN_OR_RETURN(Tensor from, src.embedded.narrow(0, src.next, j - i));
        VORTEX_ASSIGN_OR_RETURN(Tensor to, condition_embedded_.narrow(0, i, j - i));
        VORTEX_RETURN_IF_ERROR(backend_.copy(from, to));
        src.next += j - i;
        i = j;
      }
    }
  }

  // Text: upload as BF16 rows; raw states go through condition_proj -> refiner blocks -> final_norm.
  if (l == 0) {  // no text rows: nothing to refine (attention over zero keys is undefined)
    text_refined_ = Tensor();
    prepared_ = true;
    return Status::Ok();
  }
  VORTEX_ASSIGN_OR_RETURN(Tensor text_dev, backend_.upload(text));
  if (text.dtype() == DType::kF32) {
    VORTEX_ASSIGN_OR_RETURN(Tensor text_bf16, backend_.alloc(text.shape(), DType::kBF16));
    VORTEX_RETURN_IF_ERROR(backend_.cast(text_dev, text_bf16));
    text_dev = text_bf16;
  }
  if (refined) {
    text_refined_ = text_dev;  // [L, D] bf16
  } else {
    VORTEX_ASSIGN_OR_RETURN(Tensor h, backend_.alloc({l, cfg_.hidden}, DType::kBF16));  // [L, D] bf16
    VORTEX_RETURN_IF_ERROR(
        backend_.linear(text_dev, plain_linear(weights_.condition_proj_weight), &weights_.condition_proj_bias, h)
            .with_context("condition_proj"));
    for (size_t i = 0; i < weights_.token_refiner_blocks.size(); ++i)
      VORTEX_RETURN_IF_ERROR(run_transformer_block(backend_, cfg_, opts_, weights_.token_refiner_blocks[i], h, nullptr,
                                                   nullptr, nullptr, scratch_)
                                 .with_context("token_refiner.blocks." + std::to_string(i)));
    VORTEX_ASSIGN_OR_RETURN(text_refined_, backend_.alloc({l, cfg_.hidden}, DType::kBF16));
    VORTEX_RETURN_IF_ERROR(
        backend_.rms_norm(h, weights_.token_refiner_final_norm_weight, cfg_.final_norm_eps, text_refined_)
            .with_context("token_refiner.final_norm"));
  }
  prepared_ = true;
  return Status::Ok();
}

// The host part of a step's conditioning: distinct timesteps (sorted), the slots of video, audio and keyframe rows,
// and the segment tables that map rows to AdaLN table rows.
Result<std::vector<float>> H3Model::step_timesteps(double sigma_v, double sigma_a) const {
  if (!(sigma_v >= 0.0 && sigma_v <= 1.0) || !(sigma_a >= 0.0 && sigma_a <= 1.0))
    return invalid_argument("sigmas must lie in [0, 1], got video " + std::to_string(sigma_v) + ", audio " +
                            std::to_string(sigma_a));
  const float tv = static_cast<float>(1.0 - sigma_v);
  std::vector<float> t = {tv, static_cast<float>(1.0 - sigma_a)};
  if (has_visual_conditioning()) t.push_back(keyframe_timestep(tv));
  if (has_reference_audio()) t.push_back(kReferenceAudioTimestep);
  std::sort(t.begin(), t.end());
  t.erase(std::unique(t.begin(), t.end()), t.end());
  return t;
}

Status H3Model::step_conditioning(double sigma_v, double sigma_a, StepTables& st) const {
  VORTEX_ASSIGN_OR_RETURN(st.timesteps, step_timesteps(sigma_v, sigma_a));
  const float tv = static_cast<float>(1.0 - sigma_v), ta = static_cast<float>(1.0 - sigma_a);
  auto slot_of = [&st](float t) {
    return static_cast<int>(std::find(st.timesteps.begin(), st.timesteps.end(), t) - st.timesteps.begin());
  };
  st.video_slot = slot_of(tv);
  st.audio_slot = slot_of(ta);
  st.condition_slot = has_visual_conditioning() ? slot_of(keyframe_timestep(tv)) : st.video_slot;
  st.reference_audio_slot = has_reference_audio() ? slot_of(kReferenceAudioTimestep) : st.audio_slot;
  st.block_segments = layout_.block_segments(st.video_slot, st.audio_slot, st.condition_slot, st.reference_audio_slot);
  st.final_segments = layout_.final_segments(st.video_slot, st.audio_slot, st.condition_slot, st.reference_audio_slot);
  st.shard_segments =
      sp_.comm != nullptr ? st.block_segments.slice(sp_.my_rows().begin, sp_.my_rows().end) : SegmentTable{};
  return Status::Ok();
}

// ---- AdaLN tables ahead of sampling --------------------------------------------------------------

Result<Tensor> move_to_host(Backend& backend, const Tensor& t) {
  VORTEX_ASSIGN_OR_RETURN(Tensor host, backend.alloc_host(t.shape(), t.dtype()));
  VORTEX_RETURN_IF_ERROR(backend.download(t, host));
  return host;
}

const AdalnTableEntry* H3Model::find_adaln_entry(const std::vector<float>& timesteps) {
  if (adaln_entries_generation_ != weights_generation_) {
    drop_adaln_pending();
    adaln_entries_.clear();
  }
  for (const AdalnTableEntry& e : adaln_entries_)
    if (e.timesteps == timesteps) return &e;
  return nullptr;
}

Status H3Model::compute_adaln_entries(const std::vector<std::vector<float>>& sets) {
  if (sets.empty()) return Status::Ok();
  VORTEX_RETURN_IF_ERROR(finish_adaln_pending());
  if (adaln_entries_generation_ != weights_generation_) adaln_entries_.clear();
  adaln_entries_generation_ = weights_generation_;
  const size_t first = adaln_entries_.size();
  std::vector<Tensor> silu(sets.size());  // per entry [M, E] bf16 on the backend
  for (size_t e = 0; e < sets.size(); ++e) {
    VORTEX_ASSIGN_OR_RETURN(Tensor silu_host, adaln_input_host(cfg_, time_host_, sets[e]));  // [M, E] bf16
    VORTEX_ASSIGN_OR_RETURN(silu[e], backend_.upload(silu_host));
  }
  for (size_t e = 0; e < sets.size(); ++e) {
    AdalnTableEntry entry;
    entry.timesteps = sets[e];
    entry.blocks.resize(static_cast<size_t>(cfg_.num_layers));  // filled block by block
    adaln_entries_.push_back(std::move(entry));
    adaln_pending_.push_back(first + e);
  }
  adaln_pending_silu_ = std::move(silu);
  adaln_next_block_ = 0;
  // Weights still arriving: each block's tables are computed once it has arrived, before its first use
  // (fill_pending_tables); else all of them now.
  if (arrivals_) return Status::Ok();
  return finish_adaln_pending();
}

Status H3Model::finish_adaln_pending() {
  if (adaln_pending_.empty()) return Status::Ok();
  Status s = Status::Ok();
  while (s.ok() && adaln_next_block_ < cfg_.num_layers) {
    s = await_weights(adaln_next_block_);
    if (s.ok()) s = compute_adaln_block(adaln_next_block_, adaln_upload_);
  }
  if (s.ok()) s = await_weights(cfg_.num_layers);
  if (s.ok()) s = compute_adaln_final();
  if (s.ok()) s = release_adaln_upload();
  if (!s.ok()) drop_adaln_pending();
  return s;
}

Status H3Model::release_adaln_upload() {
  if (!adaln_upload_.defined()) return Status::Ok();
  // Freed: wait for the GEMMs that read it (another thread's allocation may reuse the memory at once).
  Status s = backend_.synchronize();
  adaln_upload_ = Tensor();
  return s;
}

void H3Model::drop_adaln_pending() {
  if (!adaln_pending_.empty()) adaln_entries_.resize(adaln_pending_.front());  // the pending entries are the last ones
  adaln_pending_.clear();
  adaln_pending_silu_.clear();
  (void)release_adaln_upload();  // after an error: the error that got here is the one reported
}

Status H3Model::compute_adaln_block(int i, Tensor& staged) {
  const int64_t d = cfg_.hidden;
  const H3BlockWeights& b = weights_.blocks[static_cast<size_t>(i)];
  Tensor w = b.adaln_proj_linear_weight;
  if (adaln_disk_) {  // w is staging buffer i % 2: free once the upload (or GEMM) that last read it has passed
    VORTEX_RETURN_IF_ERROR(backend_.wait_host(adaln_staging_read_[i % 2].get()));
    VORTEX_RETURN_IF_ERROR(adaln_disk_->read("blocks." + std::to_string(i) + ".adaln_proj.linear.weight", w));
  }
  if (w.device() != backend_.device()) {
    if (!staged.defined()) {
      VORTEX_ASSIGN_OR_RETURN(staged, backend_.alloc(w.shape(), w.dtype()));
    }
    // Ordered after the previous block's GEMMs, which read the same buffer.
    VORTEX_RETURN_IF_ERROR(
        backend_.upload_async(w, staged).with_context("blocks." + std::to_string(i) + ".adaln_proj (upload)"));
    if (adaln_disk_) {
      VORTEX_ASSIGN_OR_RETURN(adaln_staging_read_[i % 2], backend_.fence_compute());
    }
    w = staged;
  }
  LinearWeight adaln = plain_linear(w);
  adaln.lora = b.adaln_proj_lora;
  for (size_t k = 0; k < adaln_pending_.size(); ++k) {
    AdalnTableEntry& entry = adaln_entries_[adaln_pending_[k]];
    const int64_t m = static_cast<int64_t>(entry.timesteps.size());
    VORTEX_ASSIGN_OR_RETURN(Tensor out, backend_.alloc({m, 18 * d}, DType::kBF16));  // [M, 18D] bf16
    VORTEX_RETURN_IF_ERROR(linear_call(backend_, adaln_pending_silu_[k], adaln, &b.adaln_proj_linear_bias, out)
                               .with_context("blocks." + std::to_string(i) + ".adaln_proj"));
    entry.blocks[static_cast<size_t>(i)] = out;
  }
  adaln_next_block_ = i + 1;
  return Status::Ok();
}

Status H3Model::compute_adaln_final() {
  const int64_t d = cfg_.hidden;
  LinearWeight final_adaln = plain_linear(weights_.final_layer_adaln_proj_linear_weight);
  final_adaln.lora = weights_.final_layer_adaln_proj_lora;
  for (size_t k = 0; k < adaln_pending_.size(); ++k) {
    AdalnTableEntry& entry = adaln_entries_[adaln_pending_[k]];
    const int64_t m = static_cast<int64_t>(entry.timesteps.size());
    VORTEX_ASSIGN_OR_RETURN(entry.final_table, backend_.alloc({m, 2 * d}, DType::kBF16));  // [M, 2D] bf16
    VORTEX_RETURN_IF_ERROR(linear_call(backend_, adaln_pending_silu_[k], final_adaln,
                                       &weights_.final_layer_adaln_proj_linear_bias, entry.final_table)
                               .with_context("final_layer.adaln_proj"));
  }
  adaln_pending_.clear();
  adaln_pending_silu_.clear();
  return Status::Ok();
}

Status H3Model::fill_pending_tables(int i) {
  const bool final_layer = i == cfg_.num_layers;
  if (final_layer ? !ws_.tables_final_pending : i < ws_.tables_pending_from) return Status::Ok();
  // A host-resident projection goes through adaln_upload_, one device buffer reused block after block (each upload is
  // ordered after the previous block's GEMMs on the same stream) and freed once the last pending block is done.
  Status s = Status::Ok();
  while (s.ok() && !adaln_pending_.empty() && adaln_next_block_ <= std::min(i, cfg_.num_layers - 1)) {
    s = await_weights(adaln_next_block_);
    if (s.ok()) s = compute_adaln_block(adaln_next_block_, adaln_upload_);
  }
  if (s.ok() && adaln_next_block_ >= cfg_.num_layers) s = release_adaln_upload();
  if (s.ok() && final_layer && !adaln_pending_.empty()) {
    s = await_weights(cfg_.num_layers);
    if (s.ok()) s = compute_adaln_final();
  }
  if (!s.ok()) {
    drop_adaln_pending();
    return s;
  }
  const AdalnTableEntry& entry = adaln_entries_[ws_.entry_index];
  if (final_layer) {
    ws_.tables_final_pending = false;
    return backend_.copy(entry.final_table, ws_.tables.final_table);
  }
  return backend_.copy(entry.blocks[static_cast<size_t>(i)], ws_.block_adaln_out[static_cast<size_t>(i)]);
}

Status H3Model::set_arrivals(std::shared_ptr<WeightArrivals> arrivals) {
  if (comm_ != nullptr) return invalid_argument("set_arrivals: sequence-parallel steps need every weight in place");
  if (stream_from_ >= 0) return invalid_argument("set_arrivals: streamed blocks need every weight in place");
  arrivals_ = std::move(arrivals);
  arrived_ = arrivals_ ? -2 : cfg_.num_layers;
  return Status::Ok();
}

Status H3Model::await_weights(int group) {
  if (!arrivals_) return Status::Ok();
  group = std::min(group, cfg_.num_layers);
  while (arrived_ < group) {
    VORTEX_RETURN_IF_ERROR(arrivals_->await(arrived_ + 1, weights_));
    ++arrived_;
  }
  if (arrived_ >= cfg_.num_layers) arrivals_.reset();  // every group in place
  return Status::Ok();
}

Status H3Model::precompute_adaln(const std::vector<std::pair<double, double>>& sigmas) {
  if (!prepared_) return invalid_argument("precompute_adaln: call prepare() first");
  VORTEX_RETURN_IF_ERROR(finish_adaln_pending());  // entries begun before are complete before any is pruned
  std::vector<std::vector<float>> needed;
  for (const auto& [sv, sa] : sigmas) {
    VORTEX_ASSIGN_OR_RETURN(std::vector<float> t, step_timesteps(sv, sa));
    if (std::find(needed.begin(), needed.end(), t) == needed.end()) needed.push_back(std::move(t));
  }
  if (adaln_entries_generation_ != weights_generation_) adaln_entries_.clear();
  std::erase_if(adaln_entries_, [&](const AdalnTableEntry& e) {
    return std::find(needed.begin(), needed.end(), e.timesteps) == needed.end();
  });
  std::vector<std::vector<float>> missing;
  for (std::vector<float>& t : needed)
    if (find_adaln_entry(t) == nullptr) missing.push_back(std::move(t));
  return compute_adaln_entries(missing);
}

bool H3Model::adaln_weights_on_host() const {
  if (backend_.device() == Device::kCpu) return false;
  for (const H3BlockWeights& b : weights_.blocks)
    if (b.adaln_proj_linear_weight.defined() && b.adaln_proj_linear_weight.device() == Device::kCpu) return true;
  return false;
}

const char* adaln_weight_place_name(AdalnWeightPlace place) {
  switch (place) {
    case AdalnWeightPlace::kDevice:
      return "device";
    case AdalnWeightPlace::kHost:
      return "host";
    case AdalnWeightPlace::kDisk:
      return "disk";
  }
  return "device";
}

AdalnWeightPlace H3Model::adaln_weight_place() const {
  if (adaln_disk_) return AdalnWeightPlace::kDisk;
  return adaln_weights_on_host() ? AdalnWeightPlace::kHost : AdalnWeightPlace::kDevice;
}

uint64_t H3Model::adaln_weight_bytes() const {
  uint64_t n = 0;
  for (const H3BlockWeights& b : weights_.blocks)
    if (b.adaln_proj_linear_weight.defined()) n += b.adaln_proj_linear_weight.nbytes();
  return n;
}

Status H3Model::place_adaln_weights(AdalnWeightPlace place, std::shared_ptr<WeightFileReader> from_disk) {
  if (place == AdalnWeightPlace::kDisk) {
    if (!from_disk) return invalid_argument("place_adaln_weights: the disk placement needs a weight reader");
    if (weights_.blocks.empty()) return Status::Ok();
    const Tensor& first = weights_.blocks.front().adaln_proj_linear_weight;
    for (size_t i = 0; i < weights_.blocks.size(); ++i) {
      const Tensor& w = weights_.blocks[i].adaln_proj_linear_weight;
      if (w.shape() != first.shape() || w.dtype() != first.dtype())
        return internal_error("place_adaln_weights: blocks." + std::to_string(i) +
                              ".adaln_proj.linear.weight differs in shape or dtype from block 0's");
    }
    for (int k = 0; k < 2; ++k) {
      if (!adaln_staging_[k].defined()) {
        VORTEX_ASSIGN_OR_RETURN(adaln_staging_[k], backend_.alloc_host(first.shape(), first.dtype()));
      }
      adaln_staging_read_[k].reset();
    }
    for (size_t i = 0; i < weights_.blocks.size(); ++i)
      weights_.blocks[i].adaln_proj_linear_weight = adaln_staging_[i % 2];  // the placeholders go
    adaln_disk_ = std::move(from_disk);
    ++weights_generation_;
    return backend_.release_cached_memory();
  }
  if (adaln_disk_) return invalid_argument("place_adaln_weights: the projections are read from disk");
  if (backend_.device() == Device::kCpu) return Status::Ok();  // the device is the host
  for (size_t i = 0; i < weights_.blocks.size(); ++i) {
    Tensor& w = weights_.blocks[i].adaln_proj_linear_weight;
    if (!w.defined()) continue;
    const std::string what = "blocks." + std::to_string(i) + ".adaln_proj.linear.weight";
    if (place == AdalnWeightPlace::kHost && w.device() != Device::kCpu) {
      Result<Tensor> host = move_to_host(backend_, w);
      if (!host.ok()) return host.status().with_context(what + " to host memory");
      w = std::move(host).value();
    } else if (place == AdalnWeightPlace::kDevice && w.device() == Device::kCpu) {
      VORTEX_ASSIGN_OR_RETURN(w, backend_.upload(w));
    }
  }
  ++weights_generation_;  // a captured step graph may have read the old copies
  if (place == AdalnWeightPlace::kHost) return backend_.release_cached_memory();
  return Status::Ok();
}

Result<StepTables> H3Model::make_step_tables(double sigma_v, double sigma_a) {
  if (!prepared_) return invalid_argument("make_step_tables: call prepare() first");
  StepTables st;
  VORTEX_RETURN_IF_ERROR(step_conditioning(sigma_v, sigma_a, st));
  const int64_t m = static_cast<int64_t>(st.timesteps.size()), d = cfg_.hidden;
  const AdalnTableEntry* entry = find_adaln_entry(st.timesteps);
  if (entry == nullptr && adaln_off_device()) {
    VORTEX_RETURN_IF_ERROR(compute_adaln_entries({st.timesteps}));
    entry = find_adaln_entry(st.timesteps);
  }
  if (entry != nullptr) {  // precomputed: views of the entry (the same bytes the GEMMs below would write)
    for (const Tensor& t : entry->blocks) {
      VORTEX_ASSIGN_OR_RETURN(Tensor rows, t.reshape({3 * m, 6 * d}));  // [3M, 6D]: row slot*3 + modality
      st.block_tables.push_back(rows);
    }
    st.final_table = entry->final_table;  // [M, 2D]
    return st;
  }

  VORTEX_ASSIGN_OR_RETURN(Tensor silu_host, adaln_input_host(cfg_, time_host_, st.timesteps));  // [M, E] bf16
  VORTEX_ASSIGN_OR_RETURN(Tensor silu_temb, backend_.upload(silu_host));
  for (int i = 0; i < cfg_.num_layers; ++i) {
    const H3BlockWeights& b = weights_.blocks[static_cast<size_t>(i)];
    VORTEX_ASSIGN_OR_RETURN(Tensor table, backend_.alloc({m, 18 * d}, DType::kBF16));  // [M, 18D] bf16
    LinearWeight adaln = plain_linear(b.adaln_proj_linear_weight);
    adaln.lora = b.adaln_proj_lora;
    VORTEX_RETURN_IF_ERROR(linear_call(backend_, silu_temb, adaln, &b.adaln_proj_linear_bias, table)
                               .with_context("blocks." + std::to_string(i) + ".adaln_proj"));
    VORTEX_ASSIGN_OR_RETURN(Tensor rows, table.reshape({3 * m, 6 * d}));  // [3M, 6D]: row slot*3 + modality
    st.block_tables.push_back(rows);
  }
  VORTEX_ASSIGN_OR_RETURN(st.final_table, backend_.alloc({m, 2 * d}, DType::kBF16));  // [M, 2D] bf16
  LinearWeight final_adaln = plain_linear(weights_.final_layer_adaln_proj_linear_weight);
  final_adaln.lora = weights_.final_layer_adaln_proj_lora;
  VORTEX_RETURN_IF_ERROR(
      linear_call(backend_, silu_temb, final_adaln, &weights_.final_layer_adaln_proj_linear_bias, st.final_table)
          .with_context("final_layer.adaln_proj"));
  return st;
}

// ---- streamed blocks -----------------------------------------------------------------------------

namespace {

// The tensors a streamed block keeps in host memory: its four GEMM weights with their scales, in a fixed order.
template <typename Block>  // H3BlockWeights, const or not
auto streamed_tensors(Block& b) {
  std::vector<decltype(&b.attn_qkv_proj.weight)> out;
  for (auto* w : {&b.attn_qkv_proj, &b.attn_out_proj, &b.mlp_fc1, &b.mlp_fc2})
    for (auto* t : {&w->weight, &w->weight_scale, &w->weight_scale_2, &w->input_scale})
      if (t->defined()) out.push_back(t);
  return out;
}

// The h3_tensor_specs names of a BF16 block's four GEMM weights, in streamed_tensors() order.
std::vector<std::string> streamed_weight_names(int block) {
  const std::string p = "blocks." + std::to_string(block) + ".";
  return {p + "attn.qkv_proj.weight", p + "attn.out_proj.weight", p + "mlp.fc1.weight", p + "mlp.fc2.weight"};
}

}  // namespace

Status H3Model::stream_blocks(int first, std::shared_ptr<WeightFileReader> from_disk) {
  const int layers = cfg_.num_layers;
  if (first < 0 || first > layers)
    return invalid_argument("stream_blocks: first streamed block " + std::to_string(first) + " outside [0, " +
                            std::to_string(layers) + "]");
  if (comm_ != nullptr) return unsupported("stream_blocks: streamed blocks run single-GPU steps only");
  if (stream_from_ >= 0)
    return invalid_argument("stream_blocks: blocks already stream from block " + std::to_string(stream_from_));
  if (first == layers) return Status::Ok();
  if (from_disk) {
    // Two staging sets shaped like block `first`'s weights; every streamed block's tensors become its slot's set.
    const auto shape_of = streamed_tensors(weights_.blocks[static_cast<size_t>(first)]);
    for (int b = first; b < layers; ++b) {
      const H3BlockWeights& w = weights_.blocks[static_cast<size_t>(b)];
      for (const LinearWeight* l : {&w.attn_qkv_proj, &w.attn_out_proj, &w.mlp_fc1, &w.mlp_fc2})
        if (l->format != QuantFormat::kNone || l->weight_scale.defined() || l->input_scale.defined())
          return unsupported("stream_blocks: blocks stream from disk as the file stores them, in BF16; block " +
                             std::to_string(b) + " holds quantized weights (stream them from host memory)");
      const auto t = streamed_tensors(w);
      if (t.size() != shape_of.size())
        return internal_error("stream_blocks: block " + std::to_string(b) + " has another set of GEMM tensors");
      for (size_t k = 0; k < t.size(); ++k)
        if (t[k]->shape() != shape_of[k]->shape() || t[k]->dtype() != shape_of[k]->dtype())
          return internal_error("stream_blocks: block " + std::to_string(b) + "'s GEMM weights differ in shape");
    }
    for (std::vector<Tensor>& set : disk_staging_) {
      set.clear();
      for (const Tensor* t : shape_of) {
        VORTEX_ASSIGN_OR_RETURN(Tensor h, backend_.alloc_host(t->shape(), t->dtype()));
        set.push_back(h);
      }
    }
    for (int b = first; b < layers; ++b) {
      const auto t = streamed_tensors(weights_.blocks[static_cast<size_t>(b)]);
      for (size_t k = 0; k < t.size(); ++k) *t[k] = disk_staging_[(b - first) % 2][k];  // the placeholders go
    }
    blocks_disk_ = std::move(from_disk);
  }
  for (int b = first; b < layers; ++b) {
    for (Tensor* t : streamed_tensors(weights_.blocks[static_cast<size_t>(b)])) {
      if (t->device() == Device::kCpu) continue;  // already in host memory (or the cpu backend's device)
      Result<Tensor> host = move_to_host(backend_, *t);
      if (!host.ok()) return host.status().with_context("blocks." + std::to_string(b) + " to host memory");
      *t = std::move(host).value();
    }
  }
  for (StreamSlot& slot : stream_slots_) {
    slot = StreamSlot{};
    for (Tensor* t : streamed_tensors(weights_.blocks[static_cast<size_t>(first)])) {
      VORTEX_ASSIGN_OR_RETURN(Tensor d, backend_.alloc(t->shape(), t->dtype()));
      slot.device.push_back(d);
    }
  }
  stream_from_ = first;
  ++weights_generation_;  // a captured step graph read the resident copies
  return backend_.release_cached_memory();
}

uint64_t H3Model::streamed_bytes_per_step() const {
  if (stream_from_ < 0 || cfg_.num_layers - stream_from_ <= 2) return 0;  // two blocks stay in their slots
  uint64_t n = 0;
  for (int b = stream_from_; b < cfg_.num_layers; ++b)
    for (const Tensor* t : streamed_tensors(weights_.blocks[static_cast<size_t>(b)])) n += t->nbytes();
  return n;
}

Status H3Model::prefetch_block(int b) {
  StreamSlot& slot = stream_slots_[(b - stream_from_) % 2];
  if (slot.held == b) return Status::Ok();  // on its way, or still there from the last step
  const auto host = streamed_tensors(weights_.blocks[static_cast<size_t>(b)]);
  if (host.size() != slot.device.size())
    return internal_error("stream: block " + std::to_string(b) + " has another set of GEMM tensors than its slot");
  std::vector<std::pair<Tensor, Tensor>> copies;
  for (size_t k = 0; k < host.size(); ++k) copies.emplace_back(*host[k], slot.device[k]);
  slot.held = -1;      // a failed copy leaves nothing the next step could trust
  if (blocks_disk_) {  // host[] is this slot's staging set: rewritten once its last upload has passed
    VORTEX_RETURN_IF_ERROR(backend_.wait_host(slot.ready.get()));
    const std::vector<std::string> names = streamed_weight_names(b);
    for (size_t k = 0; k < copies.size(); ++k) VORTEX_RETURN_IF_ERROR(blocks_disk_->read(names[k], copies[k].first));
  }
  VORTEX_ASSIGN_OR_RETURN(slot.ready, backend_.copy_async(copies, slot.done.get()));
  slot.held = b;
  return Status::Ok();
}

Result<H3BlockWeights> H3Model::block_weights_for_step(int index) {
  H3BlockWeights w = weights_.blocks[static_cast<size_t>(index)];
  if (stream_from_ < 0 || index < stream_from_) return w;
  VORTEX_RETURN_IF_ERROR(prefetch_block(index));  // a no-op when the previous blocks started it
  StreamSlot& slot = stream_slots_[(index - stream_from_) % 2];
  VORTEX_RETURN_IF_ERROR(backend_.wait(slot.ready.get()));
  const auto dst = streamed_tensors(w);
  for (size_t k = 0; k < dst.size(); ++k) *dst[k] = slot.device[k];
  return w;
}

Status H3Model::run_block(int index, Tensor& x, const StepTables& tables) {
  if (index < 0 || index >= cfg_.num_layers || static_cast<size_t>(index) >= tables.block_tables.size())
    return invalid_argument("run_block: block " + std::to_string(index) + " outside [0, " +
                            std::to_string(cfg_.num_layers) + ")");
  VORTEX_ASSIGN_OR_RETURN(const H3BlockWeights w, block_weights_for_step(index));
  VORTEX_RETURN_IF_ERROR(run_transformer_block(backend_, cfg_, opts_, w, x,
                                               &tables.block_tables[static_cast<size_t>(index)], &tables.block_segments,
                                               &rope_, scratch_)
                             .with_context("blocks." + std::to_string(index)));
  if (stream_from_ < 0 || index < stream_from_) return Status::Ok();
  // The slot is free once this block's kernels have run: the block two ahead uploads into it meanwhile.
  StreamSlot& slot = stream_slots_[(index - stream_from_) % 2];
  VORTEX_ASSIGN_OR_RETURN(slot.done, backend_.fence_compute());
  if (index + 2 < cfg_.num_layers) VORTEX_RETURN_IF_ERROR(prefetch_block(index + 2));
  return Status::Ok();
}

Status H3Model::run_block_shard(int index, Tensor& x_shard, const StepTables& tables) {
  if (stream_from_ >= 0) return unsupported("run_block_shard: streamed blocks run single-GPU steps only");
  if (sp_.comm == nullptr)
    return invalid_argument("run_block_shard: sequence parallelism is off (prepare() with a communicator first)");
  if (index < 0 || index >= cfg_.num_layers || static_cast<size_t>(index) >= tables.block_tables.size())
    return invalid_argument("run_block_shard: block " + std::to_string(index) + " outside [0, " +
                            std::to_string(cfg_.num_layers) + ")");
  return run_transformer_block(backend_, cfg_, opts_, weights_.blocks[static_cast<size_t>(index)], x_shard,
                               &tables.block_tables[static_cast<size_t>(index)], &tables.shard_segments, &rope_,
                               scratch_, &sp_)
      .with_context("blocks." + std::to_string(index) + " (rank " + std::to_string(sp_.rank()) + " of " +
                    std::to_string(sp_.world()) + ")");
}

Result<StepIo> StepIo::allocate(Backend& backend, const ModelConfig& cfg, const RequestGeometry& g,
                                const H3Weights& weights, const Tensor* f32_rows) {
  StepIo io;
  const int64_t d = cfg.hidden;
  // The heads' rows; the spec's when the weight has not arrived yet (overlapped loading: H3Model::set_arrivals).
  auto out_dim = [](const Tensor& w, int64_t spec) { return w.defined() ? w.dim(0) : spec; };
  VORTEX_ASSIGN_OR_RETURN(io.video_in, backend.alloc({g.video_rows, int64_t{cfg.in_channels} * 4}, DType::kF32));
  VORTEX_ASSIGN_OR_RETURN(io.audio_in, backend.alloc({g.audio_rows, int64_t{cfg.audio_in_channels}}, DType::kF32));
  VORTEX_ASSIGN_OR_RETURN(
      io.video_out,
      backend.alloc({g.video_rows, out_dim(weights.final_layer_video_out_weight, cfg.video_patch_dim())}, DType::kF32));
  VORTEX_ASSIGN_OR_RETURN(
      io.audio_out,
      backend.alloc({g.audio_rows, out_dim(weights.final_layer_audio_out_weight, cfg.audio_in_channels)}, DType::kF32));
  const size_t video_bytes = static_cast<size_t>(g.video_rows * d) * sizeof(float);
  const size_t audio_offset = (video_bytes + 255) / 256 * 256;
  const size_t need = audio_offset + static_cast<size_t>(g.audio_rows * d) * sizeof(float);
  if (f32_rows != nullptr && f32_rows->defined() && f32_rows->is_contiguous() && f32_rows->nbytes() >= need &&
      f32_rows->byte_offset() % 256 == 0) {
    const std::shared_ptr<Storage>& st = f32_rows->storage();
    io.video_f32 = Tensor::from_storage(st, f32_rows->byte_offset(), {g.video_rows, d}, DType::kF32);
    io.audio_f32 = Tensor::from_storage(st, f32_rows->byte_offset() + audio_offset, {g.audio_rows, d}, DType::kF32);
    return io;
  }
  VORTEX_ASSIGN_OR_RETURN(io.video_f32, backend.alloc({g.video_rows, d}, DType::kF32));
  VORTEX_ASSIGN_OR_RETURN(io.audio_f32, backend.alloc({g.audio_rows, d}, DType::kF32));
  return io;
}

// Host latents -> patchified rows in io.video_in / io.audio_in (host work and uploads).
Status H3Model::upload_inputs(const AvLatents& x, StepIo& io) {
  const RequestGeometry& g = layout_.geo;
  VORTEX_ASSIGN_OR_RETURN(Tensor video_lat,
                          host_tensor_from(x.video, {cfg_.in_channels, g.latent_frames, g.latent_h, g.latent_w}));
  VORTEX_ASSIGN_OR_RETURN(Tensor audio_lat, host_tensor_from(x.audio, {2, cfg_.audio_in_channels, g.audio_latents}));
  VORTEX_ASSIGN_OR_RETURN(Tensor video_rows, patchify_video(cfg_, video_lat));  // [Nv, 96] f32
  VORTEX_ASSIGN_OR_RETURN(Tensor audio_rows, audio_to_rows(audio_lat));         // [Na, 32] f32
  if (video_rows.dim(0) > 0) VORTEX_RETURN_IF_ERROR(backend_.upload_to(video_rows, io.video_in));
  if (audio_rows.dim(0) > 0) VORTEX_RETURN_IF_ERROR(backend_.upload_to(audio_rows, io.audio_in));
  return Status::Ok();
}

// Packed input rows [S, D] bf16: projected video/audio rows + refined text (device work only).
Status H3Model::project_inputs(const StepIo& io, Tensor& packed) {
  const RequestGeometry& g = layout_.geo;
  struct Input {
    const Tensor* rows;
    Tensor proj;
    const Tensor* weight;
    const Tensor* bias;
    int64_t start;
    const char* name;
  };
  Input inputs[] = {
      {&io.audio_in, io.audio_f32, &weights_.audio_patch_proj_weight, &weights_.audio_patch_proj_bias, g.audio_start(),
       "audio_patch_proj"},
      {&io.video_in, io.video_f32, &weights_.video_patch_proj_weight, &weights_.video_patch_proj_bias, g.video_start(),
       "video_patch_proj"},
  };
  for (Input& in : inputs) {
    const int64_t n = in.rows->dim(0);
    if (n == 0) continue;
    VORTEX_RETURN_IF_ERROR(
        backend_.linear(*in.rows, plain_linear(*in.weight), in.bias, in.proj).with_context(in.name));  // [N, D] f32
    VORTEX_ASSIGN_OR_RETURN(Tensor dst, packed.narrow(0, in.start, n));  // [N, D] bf16 rows of the packed buffer
    VORTEX_RETURN_IF_ERROR(backend_.cast(in.proj, dst));
  }
  if (g.text_rows > 0) {
    VORTEX_ASSIGN_OR_RETURN(Tensor dst, packed.narrow(0, g.text_start(), g.text_rows));
    VORTEX_RETURN_IF_ERROR(backend_.copy(text_refined_, dst));
  }
  if (g.condition_rows() > 0) {  // the keyframe rows, projected once by prepare()
    VORTEX_ASSIGN_OR_RETURN(Tensor dst, packed.narrow(0, g.condition_start(), g.condition_rows()));
    VORTEX_RETURN_IF_ERROR(backend_.copy(condition_embedded_, dst));
  }
  return Status::Ok();
}

Result<Tensor> H3Model::embed_inputs(const AvLatents& x) {
  if (!prepared_) return invalid_argument("embed_inputs: call prepare() first");
  VORTEX_ASSIGN_OR_RETURN(StepIo io, StepIo::allocate(backend_, cfg_, layout_.geo, weights_));
  VORTEX_ASSIGN_OR_RETURN(Tensor packed,
                          backend_.alloc({layout_.geo.total_rows(), cfg_.hidden}, DType::kBF16));  // [S, D] bf16
  VORTEX_RETURN_IF_ERROR(upload_inputs(x, io));
  VORTEX_RETURN_IF_ERROR(project_inputs(io, packed));
  return packed;
}

// Final layer + FP32 heads into io.video_out / io.audio_out (device work only).
Status H3Model::final_layer_device(const Tensor& x, const StepTables& tables, StepIo& io) {
  const RequestGeometry& g = layout_.geo;
  backend_.configure(opts_);
  // [S, D] bf16: the block scratch, or under sequence parallelism (whose scratch holds one rank's rows)
  // its own buffer.
  Tensor n = final_norm_;
  if (sp_.comm == nullptr) {
    VORTEX_ASSIGN_OR_RETURN(BlockScratch sc, scratch_.first_rows(x.dim(0)));
    n = sc.norm_out;
  }
  if (opts_.fused_norm_modulate) {
    VORTEX_RETURN_IF_ERROR(backend_.rms_norm_modulate(x, weights_.final_layer_norm_weight, cfg_.final_norm_eps,
                                                      tables.final_table, 0, 1, tables.final_segments, n));
  } else {
    VORTEX_RETURN_IF_ERROR(backend_.rms_norm(x, weights_.final_layer_norm_weight, cfg_.final_norm_eps, n));
    VORTEX_RETURN_IF_ERROR(backend_.modulate(n, tables.final_table, 0, 1, tables.final_segments));
  }
  auto head = [&](int64_t start, int64_t rows, const Tensor& w, const Tensor& b, Tensor& xf, Tensor& out,
                  const char* name) -> Status {
    VORTEX_ASSIGN_OR_RETURN(Tensor src, n.narrow(0, start, rows));            // [N, D] bf16
    VORTEX_RETURN_IF_ERROR(backend_.cast(src, xf));                           // [N, D] f32
    return backend_.linear(xf, plain_linear(w), &b, out).with_context(name);  // [N, C] f32
  };
  VORTEX_RETURN_IF_ERROR(head(g.video_start(), g.video_rows, weights_.final_layer_video_out_weight,
                              weights_.final_layer_video_out_bias, io.video_f32, io.video_out,
                              "final_layer.video_out"));
  return head(g.audio_start(), g.audio_rows, weights_.final_layer_audio_out_weight, weights_.final_layer_audio_out_bias,
              io.audio_f32, io.audio_out, "final_layer.audio_out");
}

Result<AvLatents> H3Model::download_heads(const StepIo& io) {
  const RequestGeometry& g = layout_.geo;
  VORTEX_ASSIGN_OR_RETURN(Tensor video_rows, download_copy(backend_, io.video_out));
  VORTEX_ASSIGN_OR_RETURN(Tensor audio_rows, download_copy(backend_, io.audio_out));
  VORTEX_ASSIGN_OR_RETURN(Tensor video, unpatchify_video(cfg_, g, video_rows));  // [C, T, H, W] f32
  VORTEX_ASSIGN_OR_RETURN(Tensor audio, rows_to_audio(cfg_, g, audio_rows));     // [2, C, Ta] f32
  AvLatents out;
  out.video.assign(video.data<float>(), video.data<float>() + video.numel());
  out.audio.assign(audio.data<float>(), audio.data<float>() + audio.numel());
  return out;
}

Result<AvLatents> H3Model::final_layer(const Tensor& x, const StepTables& tables) {
  if (!prepared_) return invalid_argument("final_layer: call prepare() first");
  VORTEX_ASSIGN_OR_RETURN(StepIo io, StepIo::allocate(backend_, cfg_, layout_.geo, weights_));
  VORTEX_RETURN_IF_ERROR(final_layer_device(x, tables, io));
  return download_heads(io);
}

// ---- the single-GPU step ------------------------------------------------------------------------

Status H3Model::stage_step(const AvLatents& x, double sigma_v, double sigma_a) {
  ws_.staged = false;
  if (!prepared_) return invalid_argument("stage_step: call prepare() with the request layout and text first");
  if (sp_.comm != nullptr) return invalid_argument("stage_step: sequence parallel runs go through forward()");
  StepTables& st = ws_.tables;
  VORTEX_RETURN_IF_ERROR(step_conditioning(sigma_v, sigma_a, st));
  const int64_t m = static_cast<int64_t>(st.timesteps.size()), d = cfg_.hidden;
  // Table views of the stores (no device allocation): [M, 18D] for adaln_proj, [3M, 6D] for the blocks.
  st.block_tables.clear();
  ws_.block_adaln_out.clear();
  for (int i = 0; i < cfg_.num_layers; ++i) {
    VORTEX_ASSIGN_OR_RETURN(Tensor out, ws_.block_table_store[static_cast<size_t>(i)].narrow(0, 0, m));
    VORTEX_ASSIGN_OR_RETURN(Tensor rows, out.reshape({3 * m, 6 * d}));  // row slot*3 + modality
    ws_.block_adaln_out.push_back(out);
    st.block_tables.push_back(rows);
  }
  VORTEX_ASSIGN_OR_RETURN(st.final_table, ws_.final_table_store.narrow(0, 0, m));  // [M, 2D]
  const AdalnTableEntry* entry = find_adaln_entry(st.timesteps);
  if (entry == nullptr && adaln_off_device()) {  // the step cannot run the GEMMs on host weights
    VORTEX_RETURN_IF_ERROR(compute_adaln_entries({st.timesteps}));
    entry = find_adaln_entry(st.timesteps);
  }
  ws_.tables_ahead = entry != nullptr;
  ws_.tables_pending_from = cfg_.num_layers;
  ws_.tables_final_pending = false;
  if (entry != nullptr) {  // precomputed tables into the stores the step reads (device copies, before the step)
    ws_.entry_index = static_cast<size_t>(entry - adaln_entries_.data());
    // An entry whose later blocks are still arriving: run_step_device fills those (fill_pending_tables).
    const bool pending =
        std::find(adaln_pending_.begin(), adaln_pending_.end(), ws_.entry_index) != adaln_pending_.end();
    ws_.tables_pending_from = pending ? adaln_next_block_ : cfg_.num_layers;
    ws_.tables_final_pending = pending;
    for (int i = 0; i < ws_.tables_pending_from; ++i)
      VORTEX_RETURN_IF_ERROR(
          backend_.copy(entry->blocks[static_cast<size_t>(i)], ws_.block_adaln_out[static_cast<size_t>(i)]));
    if (!pending) VORTEX_RETURN_IF_ERROR(backend_.copy(entry->final_table, st.final_table));
  } else {
    VORTEX_ASSIGN_OR_RETURN(Tensor silu_host, adaln_input_host(cfg_, time_host_, st.timesteps));  // [M, E] bf16
    VORTEX_ASSIGN_OR_RETURN(Tensor silu_dst, ws_.silu_temb.narrow(0, 0, m));
    VORTEX_RETURN_IF_ERROR(backend_.upload_to(silu_host, silu_dst));
  }
  VORTEX_RETURN_IF_ERROR(upload_inputs(x, ws_.io));
  ws_.staged = true;
  return Status::Ok();
}

Status H3Model::run_step_device(const std::atomic<bool>* cancel) {
  StepTables& st = ws_.tables;
  const int64_t m = static_cast<int64_t>(st.timesteps.size());
  backend_.configure(opts_);
  VORTEX_ASSIGN_OR_RETURN(Tensor silu_temb, ws_.silu_temb.narrow(0, 0, m));  // [M, E] bf16
  VORTEX_RETURN_IF_ERROR(await_weights(-1));  // overlapped loading: the embeddings before the first block
  if (!ws_.tables_ahead) {
    BackendRegion region(backend_, "adaln");
    VORTEX_RETURN_IF_ERROR(await_weights(cfg_.num_layers));  // every projection before the step's first GEMM
    for (int i = 0; i < cfg_.num_layers; ++i) {
      const H3BlockWeights& b = weights_.blocks[static_cast<size_t>(i)];
      LinearWeight adaln = plain_linear(b.adaln_proj_linear_weight);
      adaln.lora = b.adaln_proj_lora;
      VORTEX_RETURN_IF_ERROR(linear_call(backend_, silu_temb, adaln, &b.adaln_proj_linear_bias,
                                         ws_.block_adaln_out[static_cast<size_t>(i)])
                                 .with_context("blocks." + std::to_string(i) + ".adaln_proj"));
    }
    LinearWeight final_adaln = plain_linear(weights_.final_layer_adaln_proj_linear_weight);
    final_adaln.lora = weights_.final_layer_adaln_proj_lora;
    VORTEX_RETURN_IF_ERROR(
        linear_call(backend_, silu_temb, final_adaln, &weights_.final_layer_adaln_proj_linear_bias, st.final_table)
            .with_context("final_layer.adaln_proj"));
  }
  if (stream_from_ >= 0) {  // the first two streamed blocks upload while the step embeds and runs resident blocks
    VORTEX_RETURN_IF_ERROR(prefetch_block(stream_from_));
    if (stream_from_ + 1 < cfg_.num_layers) VORTEX_RETURN_IF_ERROR(prefetch_block(stream_from_ + 1));
  }
  {
    BackendRegion region(backend_, "embed");
    VORTEX_RETURN_IF_ERROR(project_inputs(ws_.io, ws_.packed));
  }
  for (int i = 0; i < cfg_.num_layers; ++i) {
    if (cancel != nullptr && cancel->load(std::memory_order_relaxed))
      return cancelled("cancelled before block " + std::to_string(i));
    // Overlapped loading: block i's weights, and its tables when they were waiting for them (no-ops otherwise).
    VORTEX_RETURN_IF_ERROR(await_weights(i));
    VORTEX_RETURN_IF_ERROR(fill_pending_tables(i));
    VORTEX_RETURN_IF_ERROR(run_block(i, ws_.packed, st));
  }
  if (cancel != nullptr && cancel->load(std::memory_order_relaxed))
    return cancelled("cancelled before the final layer");
  VORTEX_RETURN_IF_ERROR(await_weights(cfg_.num_layers));
  VORTEX_RETURN_IF_ERROR(fill_pending_tables(cfg_.num_layers));
  BackendRegion region(backend_, "final");
  return final_layer_device(ws_.packed, st, ws_.io);
}

Status H3Model::run_step(const std::atomic<bool>* cancel) {
  if (!ws_.staged) return invalid_argument("run_step: call stage_step() first");
  const StepTables& st = ws_.tables;
  StepGraphKey key;
  key.workspace_generation = workspace_generation_;
  key.weights_generation = weights_generation_;
  key.rows = layout_.geo.total_rows();
  key.slots = static_cast<int>(st.timesteps.size());
  key.video_slot = st.video_slot;
  key.audio_slot = st.audio_slot;
  key.condition_slot = st.condition_slot;
  key.reference_audio_slot = st.reference_audio_slot;
  key.tables_ahead = ws_.tables_ahead;
  key.options = opts_;
  std::string why_not;
  bool eligible = cuda_graph_wanted(opts_, key.rows);
  if (eligible) {
    if (!backend_.supports_graphs()) why_not = "the " + std::string(backend_.name()) + " backend has no graph capture";
    else if (opts_.debug_sync) why_not = "debug_sync synchronizes after every op";
    else if (backend_.region_level() >= 0) why_not = "profiling regions are on";
    else if (stream_from_ >= 0) why_not = "streamed blocks upload on a second stream between blocks";
    else if (arrivals_ != nullptr) why_not = "weights still arriving (overlapped loading): the step waits per block";
    eligible = why_not.empty();
  }
  const StepGraphAction action = planner_.next(key, eligible, why_not, graph_ && backend_.graph_current(*graph_));
  if (!planner_.holds_graph()) graph_.reset();
  last_action_ = action;
  auto cancel_requested = [cancel] { return cancel != nullptr && cancel->load(std::memory_order_relaxed); };
  switch (action) {
    case StepGraphAction::kEager:
    case StepGraphAction::kWarmUp:
      return run_step_device(cancel);
    case StepGraphAction::kCapture: {
      if (cancel_requested()) return cancelled("cancelled before the step");
      Status begin = backend_.begin_capture();
      if (!begin.ok()) {
        planner_.capture_failed("capture not started: " + begin.to_string());
        last_action_ = StepGraphAction::kEager;
        return run_step_device(cancel);
      }
      // Recorded, not run: the replay below runs it (a failed op leaves nothing run, so the step reruns eagerly).
      Status work = run_step_device(nullptr);
      Result<std::unique_ptr<Backend::Graph>> graph = backend_.end_capture();
      if (!work.ok() || !graph.ok()) {
        planner_.capture_failed("capture failed: " + (!work.ok() ? work : graph.status()).to_string());
        last_action_ = StepGraphAction::kEager;
        return run_step_device(cancel);
      }
      graph_ = std::move(graph).value();
      planner_.captured();
      return backend_.replay(*graph_);
    }
    case StepGraphAction::kReplay:
      if (cancel_requested()) return cancelled("cancelled before the step");
      return backend_.replay(*graph_);
  }
  return internal_error("run_step: unknown step graph action");
}

Result<AvLatents> H3Model::finish_step() {
  if (!ws_.staged) return invalid_argument("finish_step: call stage_step() and run_step() first");
  return download_heads(ws_.io);
}

Result<AvLatents> H3Model::forward(const AvLatents& x, double sigma_v, double sigma_a,
                                   const std::atomic<bool>* cancel) {
  if (!prepared_) return invalid_argument("forward: call prepare() with the request layout and text first");
  if (sp_.comm == nullptr) {  // one GPU: the step workspace, eager or a replayed graph
    // The backend polls `cancel` inside long ops too (Backend::set_cancel_flag); an op it cut short leaves
    // undefined outputs, so a cancel seen after the step discards the step.
    struct CancelScope {
      Backend& b;
      ~CancelScope() { b.set_cancel_flag(nullptr); }
    } scope{backend_};
    backend_.set_cancel_flag(cancel);
    VORTEX_RETURN_IF_ERROR(stage_step(x, sigma_v, sigma_a));
    VORTEX_RETURN_IF_ERROR(run_step(cancel));
    Result<AvLatents> out = finish_step();
    if (cancel != nullptr && cancel->load(std::memory_order_relaxed)) return cancelled("cancelled during the step");
    return out;
  }
  auto cancel_requested = [cancel] { return cancel != nullptr && cancel->load(std::memory_order_relaxed); };
  VORTEX_ASSIGN_OR_RETURN(StepTables tables, make_step_tables(sigma_v, sigma_a));
  VORTEX_ASSIGN_OR_RETURN(Tensor h, embed_inputs(x));  // [S, D] bf16
  // Sequence parallel: every rank embeds all rows (the same bytes everywhere), keeps its own, runs the
  // blocks on them, and the all-gather rebuilds h for the final layer, which every rank runs whole so
  // the sampler state stays identical on every rank.
  const Span mine = sp_.my_rows();
  VORTEX_ASSIGN_OR_RETURN(Tensor h_mine, h.narrow(0, mine.begin, mine.size()));
  VORTEX_RETURN_IF_ERROR(backend_.copy(h_mine, x_shard_));
  for (int i = 0; i < cfg_.num_layers; ++i) {
    // A rank that stops here leaves its peers' next collective to fail (abort or timeout).
    if (cancel_requested()) return cancelled("cancelled before block " + std::to_string(i));
    VORTEX_RETURN_IF_ERROR(run_block_shard(i, x_shard_, tables));
  }
  std::vector<Tensor> parts;
  for (const Span& r : sp_.rows) {
    VORTEX_ASSIGN_OR_RETURN(Tensor part, h.narrow(0, r.begin, r.size()));  // [rows_j, D], contiguous
    parts.push_back(part);
  }
  VORTEX_RETURN_IF_ERROR(sp_.comm->all_gather(x_shard_, parts).with_context("all-gather of the residual stream"));
  if (cancel_requested()) return cancelled("cancelled before the final layer");
  return final_layer(h, tables);
}

}  // namespace vortex
