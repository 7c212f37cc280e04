// CPU reference of the Sage2 SM90 attention program: quantization pre-pass (E0 contract for the CUDA
// quantization kernels) and the attention program on the quantized bytes (same-program reference).
// Every FP32 operation is written out one rounding at a time (-ffp-contract=off; fma explicit) in the
// order the kernels use. Tested in tests/attention/sage2_ref_test.cpp (and against the GPU in
// tests/attention/sage2_sm90_test.cpp).
#include "ref/sage2_attention.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "vortex/dtype.h"

namespace vortex {
namespace {

float load_bf16(Sage2HostInput in, int64_t s, int h, int c) {
  return f32_from_bf16_bits(in.data[s * in.row_stride + static_cast<int64_t>(h) * kSage2HeadDim + c]);
}

// Sage2 Triton per-thread INT8: scale = amax/127 + 1e-7, round half away from zero by +-0.5, trunc.
float int8_group_scale(float amax) { return (amax / 127.0f) + 1e-7f; }
int8_t int8_quantize(float x, float scale) {
  float y = x / scale;
  y = y + (y >= 0.0f ? 0.5f : -0.5f);
  return static_cast<int8_t>(std::trunc(y));
}

Status check_quantize_args(const char* what, int64_t seq, int heads) {
  if (seq <= 0 || heads <= 0)
    return invalid_argument(std::string(what) + ": seq and heads must be positive (got seq=" + std::to_string(seq) +
                            ", heads=" + std::to_string(heads) + ")");
  return Status::Ok();
}

// Sizes `out` for seq x heads (no-op when it already has them) and returns P.
int64_t shape_quantized(Sage2Quantized& out, int64_t seq, int heads) {
  constexpr int D = kSage2HeadDim;
  out.seq = seq;
  out.heads = heads;
  out.padded = sage2_padded_tokens(seq);
  const int64_t P = out.padded;
  out.q.resize(static_cast<size_t>(heads * P * D));
  out.q_scale.resize(static_cast<size_t>(heads * (P / kSage2SlabQ) * kSage2QGroupsPerSlab));
  out.k_mean.resize(static_cast<size_t>(heads * D));
  out.k.resize(static_cast<size_t>(heads * P * D));
  out.k_scale.resize(static_cast<size_t>(heads * (P / kSage2BlockK) * kSage2KGroupsPerBlock));
  out.v.resize(static_cast<size_t>(heads * D * P));
  out.v_scale.resize(static_cast<size_t>(heads * D));
  return P;
}

bool same_shape(const Sage2Quantized& out, int64_t seq, int heads) { return out.seq == seq && out.heads == heads; }

}  // namespace

Status sage2_quantize_q_reference(Sage2HostInput q, int64_t seq, int heads, Sage2Quantized& out) {
  VORTEX_RETURN_IF_ERROR(check_quantize_args("sage2_quantize_q_reference", seq, heads));
  if (!q.data) return invalid_argument("sage2_quantize_q_reference: null input pointer");
  constexpr int D = kSage2HeadDim;
  if (!same_shape(out, seq, heads)) out = Sage2Quantized{};
  const int64_t P = shape_quantized(out, seq, heads);
  std::fill(out.q.begin(), out.q.end(), 0);
  for (int h = 0; h < heads; ++h) {
    // Q groups: rows {r, r+8} of each 16-row slab.
    for (int64_t slab = 0; slab < P / kSage2SlabQ; ++slab) {
      for (int r = 0; r < kSage2QGroupsPerSlab; ++r) {
        const int64_t rows[2] = {slab * kSage2SlabQ + r, slab * kSage2SlabQ + r + 8};
        float amax = 0.0f;
        for (int64_t row : rows)
          if (row < seq)
            for (int c = 0; c < D; ++c) amax = std::max(amax, std::fabs(load_bf16(q, row, h, c)));
        const float scale = int8_group_scale(amax);
        out.q_scale[static_cast<size_t>((h * (P / kSage2SlabQ) + slab) * kSage2QGroupsPerSlab + r)] = scale;
        for (int64_t row : rows)
          if (row < seq)
            for (int c = 0; c < D; ++c)
              out.q[static_cast<size_t>((h * P + row) * D + c)] = int8_quantize(load_bf16(q, row, h, c), scale);
      }
    }
  }
  return Status::Ok();
}

Status sage2_quantize_kv_reference(Sage2HostInput k, Sage2HostInput v, int64_t seq, int heads, Sage2Quantized& out) {
  VORTEX_RETURN_IF_ERROR(check_quantize_args("sage2_quantize_kv_reference", seq, heads));
  if (!k.data || !v.data) return invalid_argument("sage2_quantize_kv_reference: null input pointer");
  constexpr int D = kSage2HeadDim;
  if (!same_shape(out, seq, heads)) out = Sage2Quantized{};
  const int64_t P = shape_quantized(out, seq, heads);
  std::fill(out.k.begin(), out.k.end(), 0);
  std::fill(out.v.begin(), out.v.end(), 0);

  std::vector<float> kc(static_cast<size_t>(P * D));  // [P, 128] bf16(K - mean) of one head, as fp32
  for (int h = 0; h < heads; ++h) {
    // K mean: canonical FP64 order (chunks of kSage2MeanChunk tokens, then chunks in order).
    for (int c = 0; c < D; ++c) {
      double total = 0.0;
      for (int64_t s0 = 0; s0 < seq; s0 += kSage2MeanChunk) {
        double chunk = 0.0;
        for (int64_t s = s0; s < std::min<int64_t>(seq, s0 + kSage2MeanChunk); ++s)
          chunk += static_cast<double>(load_bf16(k, s, h, c));
        total += chunk;
      }
      out.k_mean[static_cast<size_t>(h * D + c)] = bf16_bits_from_f64(total / static_cast<double>(seq));
    }
    std::fill(kc.begin(), kc.end(), 0.0f);
    for (int64_t s = 0; s < seq; ++s)
      for (int c = 0; c < D; ++c)
        kc[static_cast<size_t>(s * D + c)] =
            round_bf16(load_bf16(k, s, h, c) - f32_from_bf16_bits(out.k_mean[static_cast<size_t>(h * D + c)]));
    // K groups: per 128-key block, keys with (idx mod 8) in {2t, 2t+1}.
    for (int64_t blk = 0; blk < P / kSage2BlockK; ++blk) {
      for (int t = 0; t < kSage2KGroupsPerBlock; ++t) {
        float amax = 0.0f;
        for (int64_t key = blk * kSage2BlockK; key < (blk + 1) * kSage2BlockK; ++key)
          if ((key % 8) / 2 == t && key < seq)
            for (int c = 0; c < D; ++c) amax = std::max(amax, std::fabs(kc[static_cast<size_t>(key * D + c)]));
        const float scale = int8_group_scale(amax);
        out.k_scale[static_cast<size_t>((h * (P / kSage2BlockK) + blk) * kSage2KGroupsPerBlock + t)] = scale;
        for (int64_t key = blk * kSage2BlockK; key < (blk + 1) * kSage2BlockK; ++key)
          if ((key % 8) / 2 == t && key < seq)
            for (int c = 0; c < D; ++c)
              out.k[static_cast<size_t>((h * P + key) * D + c)] =
                  int8_quantize(kc[static_cast<size_t>(key * D + c)], scale);
      }
    }
    // V per channel over the real tokens.
    for (int c = 0; c < D; ++c) {
      float amax = 0.0f;
      for (int64_t s = 0; s < seq; ++s) amax = std::max(amax, std::fabs(load_bf16(v, s, h, c)));
      amax = std::max(amax, kSage2VAmaxFloor);
      const float mult = kSage2Fp8Max / amax;
      out.v_scale[static_cast<size_t>(h * D + c)] = amax / kSage2Fp8Max;
      for (int64_t s = 0; s < seq; ++s)
        out.v[static_cast<size_t>((h * D + c) * P + s)] = e4m3_from_f32(load_bf16(v, s, h, c) * mult);
    }
  }
  return Status::Ok();
}

Result<Sage2Quantized> sage2_quantize_reference(Sage2HostInput q, Sage2HostInput k, Sage2HostInput v, int64_t seq,
                                                int heads) {
  VORTEX_RETURN_IF_ERROR(check_quantize_args("sage2_quantize_reference", seq, heads));
  Sage2Quantized out;
  VORTEX_RETURN_IF_ERROR(sage2_quantize_q_reference(q, seq, heads, out));
  VORTEX_RETURN_IF_ERROR(sage2_quantize_kv_reference(k, v, seq, heads, out));
  return out;
}

std::vector<float> sage2_attention_reference(const Sage2Quantized& quant, int head, const std::vector<int64_t>& rows) {
  constexpr int D = kSage2HeadDim;
  const int64_t P = quant.padded, seq = quant.seq;
  const int64_t blocks = P / kSage2BlockK;
  const float sm_scale = 1.0f / std::sqrt(static_cast<float>(D));
  const float c0 = sm_scale * kSage2Log2e;
  const int8_t* qh = quant.q.data() + static_cast<size_t>(head) * P * D;
  const int8_t* kh = quant.k.data() + static_cast<size_t>(head) * P * D;
  const uint8_t* vh = quant.v.data() + static_cast<size_t>(head) * D * P;
  const float* ksc = quant.k_scale.data() + static_cast<size_t>(head) * blocks * kSage2KGroupsPerBlock;
  const float* vsc = quant.v_scale.data() + static_cast<size_t>(head) * D;

  std::vector<float> out(rows.size() * D);
  std::vector<float> x(kSage2BlockK), p(kSage2BlockK), o(D);
  std::vector<double> blk(D);
  for (size_t ri = 0; ri < rows.size(); ++ri) {
    const int64_t i = rows[ri];
    const float qs =
        quant.q_scale[static_cast<size_t>((head * (P / kSage2SlabQ) + i / kSage2SlabQ) * kSage2QGroupsPerSlab + i % 8)];
    float m = kSage2MaskValue, d = 1.0f;
    std::fill(o.begin(), o.end(), 0.0f);
    for (int64_t j = 0; j < blocks; ++j) {
      const bool last = j == blocks - 1;
      for (int kk = 0; kk < kSage2BlockK; ++kk) {
        const int64_t key = j * kSage2BlockK + kk;
        int32_t acc = 0;
        for (int c = 0; c < D; ++c) acc += static_cast<int32_t>(qh[i * D + c]) * static_cast<int32_t>(kh[key * D + c]);
        x[static_cast<size_t>(kk)] = static_cast<float>(acc);  // exact: |acc| < 2^24
      }
      // Per group t (the keys one GPU thread owns): candidate max, then the row max over groups.
      float cand = -INFINITY;
      float c[kSage2KGroupsPerBlock];
      for (int t = 0; t < kSage2KGroupsPerBlock; ++t) {
        const float dq = qs * ksc[j * kSage2KGroupsPerBlock + t];
        float gmax = -INFINITY;
        for (int kk = 0; kk < kSage2BlockK; ++kk) {
          if ((kk % 8) / 2 != t) continue;
          if (last) {
            const int64_t key = j * kSage2BlockK + kk;
            x[static_cast<size_t>(kk)] = key < seq ? x[static_cast<size_t>(kk)] * dq : kSage2MaskValue;
          }
          gmax = std::max(gmax, x[static_cast<size_t>(kk)]);
        }
        c[t] = last ? c0 : c0 * dq;
        cand = std::max(cand, std::fmaf(gmax, c[t], -kSage2Delta));
      }
      const float m_new = std::max(m, cand);
      const float alpha = std::exp2f(m - m_new);
      float psum = 0.0f;
      for (int kk = 0; kk < kSage2BlockK; ++kk) {
        p[static_cast<size_t>(kk)] = std::exp2f(std::fmaf(x[static_cast<size_t>(kk)], c[(kk % 8) / 2], -m_new));
        psum += p[static_cast<size_t>(kk)];
      }
      d = d * alpha + psum;
      std::fill(blk.begin(), blk.end(), 0.0);
      for (int kk = 0; kk < kSage2BlockK; ++kk) {
        const double pq = f32_from_e4m3(e4m3_from_f32(p[static_cast<size_t>(kk)]));
        if (pq == 0.0) continue;
        const int64_t key = j * kSage2BlockK + kk;
        for (int ch = 0; ch < D; ++ch)
          blk[static_cast<size_t>(ch)] += pq * static_cast<double>(f32_from_e4m3(vh[ch * P + key]));
      }
      for (int ch = 0; ch < D; ++ch)
        o[static_cast<size_t>(ch)] =
            o[static_cast<size_t>(ch)] * alpha + static_cast<float>(blk[static_cast<size_t>(ch)]);
      m = m_new;
    }
    const float inv_d = 1.0f / d;
    for (int ch = 0; ch < D; ++ch)
      out[ri * D + static_cast<size_t>(ch)] = round_bf16((o[static_cast<size_t>(ch)] * inv_d) * vsc[ch]);
  }
  return out;
}

std::vector<double> attention_fp64_reference(Sage2HostInput q, Sage2HostInput k, Sage2HostInput v, int64_t seq,
                                             int head, const std::vector<int64_t>& rows) {
  constexpr int D = kSage2HeadDim;
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  std::vector<double> kd(static_cast<size_t>(seq * D)), vd(static_cast<size_t>(seq * D));
  for (int64_t s = 0; s < seq; ++s)
    for (int c = 0; c < D; ++c) {
      kd[static_cast<size_t>(s * D + c)] = load_bf16(k, s, head, c);
      vd[static_cast<size_t>(s * D + c)] = load_bf16(v, s, head, c);
    }
  std::vector<double> out(rows.size() * D, 0.0), logits(static_cast<size_t>(seq)), qd(D);
  for (size_t ri = 0; ri < rows.size(); ++ri) {
    for (int c = 0; c < D; ++c) qd[static_cast<size_t>(c)] = load_bf16(q, rows[ri], head, c);
    double mx = -INFINITY;
    for (int64_t s = 0; s < seq; ++s) {
      double acc = 0.0;
      for (int c = 0; c < D; ++c) acc += qd[static_cast<size_t>(c)] * kd[static_cast<size_t>(s * D + c)];
      logits[static_cast<size_t>(s)] = acc * scale;
      mx = std::max(mx, acc * scale);
    }
    double den = 0.0;
    for (int64_t s = 0; s < seq; ++s) {
      const double e = std::exp(logits[static_cast<size_t>(s)] - mx);
      den += e;
      for (int c = 0; c < D; ++c) out[ri * D + static_cast<size_t>(c)] += e * vd[static_cast<size_t>(s * D + c)];
    }
    for (int c = 0; c < D; ++c) out[ri * D + static_cast<size_t>(c)] /= den;
  }
  return out;
}

}  // namespace vortex
