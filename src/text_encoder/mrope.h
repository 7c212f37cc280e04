// Qwen3-VL interleaved M-RoPE tables for the conditioner: positions are a [3, L] (t, h, w) array; frequency
// column j of head_dim / 2 takes its position from axis h when j % 3 == 1 and j < 3 * section[1], from w
// when j % 3 == 2 and j < 3 * section[2], else from t (transformers' Qwen3VLTextRotaryEmbedding
// .recomposition_frequencies). Text tokens have (t, h, w) = (i, i, i). Tested in
// tests/text_encoder/text_encoder_test.cpp against transformers' own tables (fixtures/hidden_states).
#pragma once

#include <cstdint>
#include <vector>

#include "backend/segments.h"
#include "text_encoder/text_encoder_config.h"
#include "vortex/status.h"
#include "vortex/tensor.h"

namespace vortex {

// [3, L] i32 host tensor with every axis = 0, 1, ..., L-1 (a text-only prompt).
Tensor text_mrope_positions(int64_t length);
// Which axis (0 t, 1 h, 2 w) frequency column j reads.
int mrope_axis(const TextEncoderConfig& cfg, int j);
// inv_freq[k] = fp32(1 / fp32(theta ^ fp32(2k / head_dim))) as transformers computes it in FP32 (pow via FP64,
// rounded once), k < head_dim / 2.
std::vector<float> mrope_inv_freq(const TextEncoderConfig& cfg);
// cos/sin [L, head_dim / 2] bf16 host tables, rope_dims = head_dim: freq = fp32(fp32(pos) * inv_freq[j]),
// cos = R(fp32(cos_fp64(freq))) (likewise sin). positions: [3, L] i32 host, values >= 0.
Result<RopeTables> make_mrope_tables(const TextEncoderConfig& cfg, const Tensor& positions);

}  // namespace vortex
