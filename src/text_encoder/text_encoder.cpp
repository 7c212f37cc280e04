// The conditioner's forward (the BF16 program of docs/numerics.md "Text encoder"), per decoder layer:
//   n = RMSNorm(x); q, k, v = R(n Wq^T), R(n Wk^T), R(n Wv^T)        [q | k | v] columns of one buffer
//   q, k = head_norm_rope(q | k) (per-head RMSNorm, interleaved M-RoPE); o = causal GQA SDPA
//   x = R(x + R(o Wo^T)); n = RMSNorm(x); u = [R(n Wg^T) | R(n Wu^T)]; x = R(x + R(R(R(silu) * up) Wd^T))
// then the final norm only for hidden_states[num_layers]. The embedding rows are gathered on the host.
#include "text_encoder/text_encoder.h"

#include <cstring>
#include <filesystem>

#include "core/config_json.h"
#include "text_encoder/mrope.h"

namespace vortex {

namespace fs = std::filesystem;

bool is_qwen3_vl_config(const std::string& path) {
  const fs::path p(path);
  std::error_code ec;
  if (!fs::is_regular_file(p, ec)) return false;
  Result<ConfigJson> j = ConfigJson::read_file(p.string());
  if (!j.ok()) return false;
  if (j->kind() == ConfigKind::kTextEncoder || j->has("text_config")) return true;
  Result<std::string> model_type = j->get_string("model_type", "");
  return model_type.ok() && *model_type == "qwen3_vl_text";
}

Result<std::string> text_encoder_folder(const std::string& dir) {
  const fs::path d(dir);
  if (is_qwen3_vl_config((d / "config.json").string())) return d.string();
  if (is_qwen3_vl_config((d / "text_encoder" / "config.json").string())) return (d / "text_encoder").string();
  return not_found(dir + " is not a Qwen3-VL folder: neither " + (d / "config.json").string() + " nor " +
                   (d / "text_encoder" / "config.json").string() + " is a Qwen3-VL config.json");
}

Result<int> pipeline_text_layer(const std::string& dir) {
  std::vector<fs::path> candidates;
  for (const fs::path& base : {fs::path(dir), fs::path(dir).parent_path()})
    for (const char* name : {"model_index.json", "modular_model_index.json"}) candidates.push_back(base / name);
  for (const fs::path& p : candidates) {
    std::error_code ec;
    if (!fs::is_regular_file(p, ec)) continue;
    VORTEX_ASSIGN_OR_RETURN(const ConfigJson j, ConfigJson::read_file(p.string()));
    if (j.has("text_encoder_layer")) return j.require_int("text_encoder_layer", 0, 1 << 20);
    if (j.kind() == ConfigKind::kPipeline) return kH3TextEncoderLayer;
  }
  return not_found("no pipeline config (model_index.json of a MiniMaxH3 pipeline, or one with text_encoder_layer) in " +
                   dir + " or its parent; pass --text-layer K");
}

Result<std::unique_ptr<TextEncoder>> TextEncoder::load(const std::string& dir, Backend& backend, int layers_needed,
                                                       const TextEncoderLoadProgressFn& progress,
                                                       const std::atomic<bool>* cancel) {
  VORTEX_ASSIGN_OR_RETURN(std::string folder, text_encoder_folder(dir));
  VORTEX_ASSIGN_OR_RETURN(TextEncoderConfig cfg,
                          TextEncoderConfig::from_file((fs::path(folder) / "config.json").string()));
  VORTEX_ASSIGN_OR_RETURN(TextEncoderWeights w,
                          load_text_encoder_weights(folder, cfg, layers_needed, backend, progress, cancel));
  return std::unique_ptr<TextEncoder>(new TextEncoder(cfg, backend, std::move(w)));
}

Result<std::unique_ptr<TextEncoder>> TextEncoder::synthesize(const TextEncoderConfig& config, Backend& backend,
                                                             uint64_t seed, int layers) {
  VORTEX_ASSIGN_OR_RETURN(TextEncoderWeights w, synthesize_text_encoder_weights(config, layers, seed, backend));
  return std::unique_ptr<TextEncoder>(new TextEncoder(config, backend, std::move(w)));
}

Result<Tensor> TextEncoder::encode(const std::vector<int32_t>& ids, int layer_index, const TextEncodeControl& control) {
  return encode(ids, text_mrope_positions(static_cast<int64_t>(ids.size())), layer_index, nullptr, control);
}

Result<Tensor> TextEncoder::encode(const std::vector<int32_t>& ids, const Tensor& positions, int layer_index,
                                   const VisionEmbeddings* vision, const TextEncodeControl& control) {
  const TextEncoderConfig& c = config_;
  if (ids.empty()) return invalid_argument("text encoder: no token ids");
  if (layer_index < 0 || layer_index > c.num_layers)
    return invalid_argument("text encoder: hidden_states[" + std::to_string(layer_index) +
                            "] does not exist; valid are 0.." + std::to_string(c.num_layers) + " (0 = embedding, " +
                            std::to_string(c.num_layers) + " = after the final norm)");
  if (layer_index > layers_loaded() || (layer_index == c.num_layers && !weights_.norm_weight.defined()))
    return invalid_argument("text encoder: hidden_states[" + std::to_string(layer_index) + "] needs " +
                            std::to_string(layer_index) + " decoder layers" +
                            (layer_index == c.num_layers ? " and the final norm" : "") + "; only " +
                            std::to_string(layers_loaded()) + " were loaded");
  const int64_t len = static_cast<int64_t>(ids.size()), d = c.hidden, f = c.ffn;
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= c.vocab)
      return invalid_argument("text encoder: token id " + std::to_string(ids[i]) + " at position " + std::to_string(i) +
                              " is outside the vocabulary [0, " + std::to_string(c.vocab) + ")");
  if (positions.defined() && positions.ndim() == 2 && positions.dim(1) != len)
    return invalid_argument("text encoder: positions are " + positions.describe() + " for " + std::to_string(len) +
                            " ids");
  if (vision) {
    const int64_t n = static_cast<int64_t>(vision->rows.size());
    for (size_t i = 0; i < vision->rows.size(); ++i)
      if (vision->rows[i] < 0 || vision->rows[i] >= len || (i > 0 && vision->rows[i] <= vision->rows[i - 1]))
        return invalid_argument("text encoder: vision rows must be ascending row indices below " + std::to_string(len));
    // FP32 host rows, or BF16 rows on this backend's device; tokens and features in the same form.
    const bool on_device = vision->tokens.defined() && vision->tokens.dtype() == DType::kBF16;
    auto fits = [&](const Tensor& t) {
      return t.defined() && t.is_contiguous() && t.ndim() == 2 && t.dim(0) == n && t.dim(1) == d &&
             (on_device ? t.device() == backend_.device() && t.dtype() == DType::kBF16
                        : t.device() == Device::kCpu && t.dtype() == DType::kF32);
    };
    const std::string want =
        on_device ? "bf16 on the text encoder's device (" + std::string(backend_.name()) + ")" : "f32 on the host";
    if (!fits(vision->tokens))
      return invalid_argument("text encoder: vision tokens must be [" + std::to_string(n) + ", " + std::to_string(d) +
                              "] " + want + ", got " + vision->tokens.describe());
    for (const Tensor& t : vision->deepstack)
      if (!fits(t))
        return invalid_argument("text encoder: a DeepStack feature must be " + want + ", got " + t.describe());
  }
  VORTEX_ASSIGN_OR_RETURN(RopeTables rope, make_mrope_tables(c, positions));
  Backend& be = backend_;
  if (be.device() != Device::kCpu) {  // the tables are host tensors; the ops read them on the backend's device
    VORTEX_ASSIGN_OR_RETURN(rope.cos, be.upload(rope.cos));
    VORTEX_ASSIGN_OR_RETURN(rope.sin, be.upload(rope.sin));
  }

  // hidden_states[0]: the embedding rows, gathered on the host.
  Tensor x_host = Tensor::empty({len, d}, DType::kBF16);  // [L, D] bf16
  const uint16_t* table = weights_.embed_tokens_weight.data<uint16_t>();
  for (int64_t i = 0; i < len; ++i)
    std::memcpy(x_host.data<uint16_t>() + i * d, table + static_cast<int64_t>(ids[static_cast<size_t>(i)]) * d,
                static_cast<size_t>(d) * 2);
  if (layer_index == 0 && vision == nullptr) return x_host;
  VORTEX_ASSIGN_OR_RETURN(Tensor x, be.upload(x_host));  // [L, D] bf16 residual stream

  // The vision rows as runs of consecutive image-pad rows (one per image): (index into the vision rows, length).
  std::vector<std::pair<int64_t, int64_t>> runs;
  const size_t num_deep = vision ? vision->deepstack.size() : 0;
  Tensor tokens;                       // [n, D] bf16 on the backend
  std::vector<Tensor> deep(num_deep);  // each [n, D] bf16 on the backend
  if (vision) {
    const std::vector<int64_t>& rows = vision->rows;
    for (size_t r = 0; r < rows.size(); ++r) {
      if (r > 0 && rows[r] == rows[r - 1] + 1) ++runs.back().second;
      else runs.emplace_back(static_cast<int64_t>(r), 1);
    }
    // FP32 host rows are rounded to BF16 on the host and uploaded; BF16 rows on this backend are read where they are.
    auto on_backend = [&](const Tensor& t) -> Result<Tensor> {
      if (t.dtype() == DType::kBF16) return t;
      Tensor h = Tensor::empty(t.shape(), DType::kBF16);  // [n, D] bf16
      const float* src = t.data<float>();
      uint16_t* dst = h.data<uint16_t>();
      for (int64_t i = 0; i < t.numel(); ++i) dst[i] = bf16_bits_from_f32(src[i]);
      return be.upload(h);
    };
    VORTEX_ASSIGN_OR_RETURN(tokens, on_backend(vision->tokens));
    for (size_t i = 0; i < num_deep && static_cast<int>(i) < layer_index; ++i) {
      VORTEX_ASSIGN_OR_RETURN(deep[i], on_backend(vision->deepstack[i]));
    }
    // The vision tokens in place of the image-pad embeddings (masked_scatter into the BF16 rows): one copy a run.
    for (const auto& [r0, count] : runs) {
      VORTEX_ASSIGN_OR_RETURN(Tensor src, tokens.narrow(0, r0, count));
      VORTEX_ASSIGN_OR_RETURN(Tensor dst, x.narrow(0, rows[static_cast<size_t>(r0)], count));
      VORTEX_RETURN_IF_ERROR(be.copy(src, dst));
    }
  }
  if (layer_index == 0) {
    Tensor out = Tensor::empty({len, d}, DType::kBF16);  // [L, D] bf16 host
    VORTEX_RETURN_IF_ERROR(be.download(x, out));
    return out;
  }
  // DeepStack feature i added at the vision rows only (Qwen3VLTextModel._deepstack_process): x = R(x + f), a run
  // at a time; the other rows are not touched.
  auto add_deepstack = [&](size_t i) -> Status {
    for (const auto& [r0, count] : runs) {
      VORTEX_ASSIGN_OR_RETURN(Tensor f, deep[i].narrow(0, r0, count));
      VORTEX_ASSIGN_OR_RETURN(Tensor xv, x.narrow(0, vision->rows[static_cast<size_t>(r0)], count));
      VORTEX_RETURN_IF_ERROR(be.gate_add(xv, f, nullptr, 0, SegmentTable{}));
    }
    return Status::Ok();
  };

  const int64_t qw = c.q_width(), kvw = c.kv_width(), width = qw + 2 * kvw;
  VORTEX_ASSIGN_OR_RETURN(Tensor norm_out, be.alloc({len, d}, DType::kBF16));           // [L, D]
  VORTEX_ASSIGN_OR_RETURN(Tensor qkv, be.alloc({len, width}, DType::kBF16));            // [L, qw + 2 kvw], [q | k | v]
  VORTEX_ASSIGN_OR_RETURN(Tensor attn, be.alloc({len, qw}, DType::kBF16));              // [L, H * hd]
  VORTEX_ASSIGN_OR_RETURN(Tensor proj, be.alloc({len, d}, DType::kBF16));               // [L, D]
  VORTEX_ASSIGN_OR_RETURN(Tensor up, be.alloc({len, 2 * f}, DType::kBF16));             // [L, 2F], [gate | up]
  VORTEX_ASSIGN_OR_RETURN(Tensor act, be.alloc({len, f}, DType::kBF16));                // [L, F]
  VORTEX_ASSIGN_OR_RETURN(Tensor q, qkv.as_strided({len, qw}, {width, 1}, 0));          // [L, H * hd] view
  VORTEX_ASSIGN_OR_RETURN(Tensor k, qkv.as_strided({len, kvw}, {width, 1}, qw));        // [L, H_kv * hd] view
  VORTEX_ASSIGN_OR_RETURN(Tensor v, qkv.as_strided({len, kvw}, {width, 1}, qw + kvw));  // [L, H_kv * hd] view
  VORTEX_ASSIGN_OR_RETURN(Tensor gate, up.as_strided({len, f}, {2 * f, 1}, 0));         // [L, F] view
  VORTEX_ASSIGN_OR_RETURN(Tensor upv, up.as_strided({len, f}, {2 * f, 1}, f));          // [L, F] view
  const SegmentTable no_segments;
  const int layers_run = layer_index == c.num_layers ? c.num_layers : layer_index;
  // The backend polls the cancel flag inside long ops too; an op it cut short leaves undefined outputs, so a
  // cancel seen at the end discards the result.
  auto stop = [&] { return control.cancel != nullptr && control.cancel->load(std::memory_order_relaxed); };
  struct CancelScope {
    Backend& b;
    ~CancelScope() { b.set_cancel_flag(nullptr); }
  } scope{be};
  be.set_cancel_flag(control.cancel);
  for (int i = 0; i < layers_run; ++i) {
    if (stop())
      return cancelled("cancelled while encoding the prompt (before text encoder layer " + std::to_string(i) + ")");
    const TextEncoderLayerWeights& l = weights_.layers[static_cast<size_t>(i)];
    const std::string at = "text encoder layer " + std::to_string(i);
    VORTEX_RETURN_IF_ERROR(be.rms_norm_two_rounding(x, l.input_layernorm_weight, c.rms_norm_eps, norm_out)
                               .with_context(at + " input_layernorm"));
    VORTEX_RETURN_IF_ERROR(be.linear(norm_out, l.self_attn_q_proj, nullptr, q).with_context(at + " q_proj"));
    VORTEX_RETURN_IF_ERROR(be.linear(norm_out, l.self_attn_k_proj, nullptr, k).with_context(at + " k_proj"));
    VORTEX_RETURN_IF_ERROR(be.linear(norm_out, l.self_attn_v_proj, nullptr, v).with_context(at + " v_proj"));
    VORTEX_RETURN_IF_ERROR(
        be.head_norm_rope(q, l.self_attn_q_norm_weight, c.rms_norm_eps, &rope, c.num_heads, c.head_dim)
            .with_context(at + " q_norm + rope"));
    VORTEX_RETURN_IF_ERROR(
        be.head_norm_rope(k, l.self_attn_k_norm_weight, c.rms_norm_eps, &rope, c.num_kv_heads, c.head_dim)
            .with_context(at + " k_norm + rope"));
    VORTEX_RETURN_IF_ERROR(
        be.causal_attention(q, k, v, c.num_heads, c.num_kv_heads, c.head_dim, attn).with_context(at + " attention"));
    VORTEX_RETURN_IF_ERROR(be.linear(attn, l.self_attn_o_proj, nullptr, proj).with_context(at + " o_proj"));
    VORTEX_RETURN_IF_ERROR(be.gate_add(x, proj, nullptr, 0, no_segments).with_context(at + " attention residual"));
    VORTEX_RETURN_IF_ERROR(be.rms_norm_two_rounding(x, l.post_attention_layernorm_weight, c.rms_norm_eps, norm_out)
                               .with_context(at + " post_attention_layernorm"));
    VORTEX_RETURN_IF_ERROR(be.linear(norm_out, l.mlp_gate_proj, nullptr, gate).with_context(at + " gate_proj"));
    VORTEX_RETURN_IF_ERROR(be.linear(norm_out, l.mlp_up_proj, nullptr, upv).with_context(at + " up_proj"));
    VORTEX_RETURN_IF_ERROR(be.swiglu(up, act).with_context(at + " silu(gate) * up"));
    VORTEX_RETURN_IF_ERROR(be.linear(act, l.mlp_down_proj, nullptr, proj).with_context(at + " down_proj"));
    VORTEX_RETURN_IF_ERROR(be.gate_add(x, proj, nullptr, 0, no_segments).with_context(at + " mlp residual"));
    // DeepStack: x = R(x + feature) at the vision rows. hidden_states[i + 1] is recorded before it, so the last
    // layer run for an intermediate state skips it.
    if (static_cast<size_t>(i) < num_deep && (i + 1 < layers_run || layer_index == c.num_layers))
      VORTEX_RETURN_IF_ERROR(add_deepstack(static_cast<size_t>(i)).with_context(at + " DeepStack"));
    if (control.on_layer) control.on_layer(i + 1, layers_run);
  }
  if (layer_index == c.num_layers) {
    VORTEX_RETURN_IF_ERROR(
        be.rms_norm_two_rounding(x, weights_.norm_weight, c.rms_norm_eps, norm_out).with_context("text encoder norm"));
    x = norm_out;
  }
  if (stop()) return cancelled("cancelled while encoding the prompt");
  Tensor out = Tensor::empty({len, d}, DType::kBF16);  // [L, D] bf16 host
  VORTEX_RETURN_IF_ERROR(be.download(x, out));
  if (stop()) return cancelled("cancelled while encoding the prompt");
  return out;
}

}  // namespace vortex
