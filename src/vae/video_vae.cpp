// Video VAE decoder (see video_vae.h). The tile forward runs on the Backend; tiling, blending, the temporal
// cross-fade and unpatchify are host data movement on FP32 pixels with diffusers' _decode / _decode_clip /
// _stitch_tiles / _blend arithmetic (the blend weights are FP32 like the decoded tiles), every output pixel
// written once.
#include "vae/video_vae.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <thread>

#include "core/parallel.h"
#include "gemm/fp8_reference.h"

namespace vortex {
namespace {

constexpr float kImagenetMean[3] = {0.485f, 0.456f, 0.406f};
constexpr float kImagenetStd[3] = {0.229f, 0.224f, 0.225f};

// Host FP32 video [c, f, h, w], the unit the stitching code works on.
struct Video {
  int c = 0, f = 0, h = 0, w = 0;
  std::vector<float> v;
  Video() = default;
  Video(int c_, int f_, int h_, int w_) : c(c_), f(f_), h(h_), w(w_), v(static_cast<size_t>(c_) * f_ * h_ * w_) {}
  float& at(int ci, int fi, int y, int x) { return v[((static_cast<size_t>(ci) * f + fi) * h + y) * w + x]; }
  float at(int ci, int fi, int y, int x) const { return v[((static_cast<size_t>(ci) * f + fi) * h + y) * w + x]; }
};

Tensor tensor_from_video(const Video& v) {
  Tensor t = Tensor::empty({v.c, v.f, v.h, v.w}, DType::kF32);
  std::memcpy(t.raw_data(), v.v.data(), v.v.size() * sizeof(float));
  return t;
}

std::pair<float, float> synthetic_init(const std::string& name, const Shape& shape) {
  auto ends_with = [&](const char* s) {
    const size_t n = std::strlen(s);
    return name.size() >= n && name.compare(name.size() - n, n, s) == 0;
  };
  if (ends_with("register_tokens")) return {1.0f, 0.0f};
  if (ends_with("scale1") || ends_with("scale2")) return {0.1f, 0.0f};
  if (name.find("norm") != std::string::npos && ends_with("weight")) return {0.1f, 1.0f};
  if (ends_with("bias")) return {0.02f, 0.0f};
  const double k = shape.size() >= 2 ? static_cast<double>(shape_numel(shape) / shape[0]) : 1.0;
  return {static_cast<float>(std::sqrt(3.0 / k)), 0.0f};  // uniform with variance 1/K
}

}  // namespace

Status VideoVaeConfig::validate() const {
  auto bad = [](const std::string& m) { return invalid_argument("video VAE config: " + m); };
  if (latent_channels <= 0 || out_channels <= 0 || patch <= 0 || patch_t <= 0)
    return bad("channels and patch sizes must be positive");
  if (num_layers <= 0 || heads <= 0 || head_dim <= 0 || ffn_mult <= 0 || registers < 0)
    return bad("decoder sizes must be positive");
  if (rope_dims() % 6 != 0 || rope_dims() > head_dim)
    return bad("rope dims " + std::to_string(rope_dims()) +
               " (head_dim * rope_dim_ratio) must be a multiple of 6 and <= head_dim");
  if (static_cast<int>(latents_mean.size()) != latent_channels ||
      static_cast<int>(latents_std.size()) != latent_channels)
    return bad("latents_mean / latents_std need " + std::to_string(latent_channels) + " values");
  if (clip_length <= 0 || token_drop < 0) return bad("clip_length must be positive and token_drop >= 0");
  if (tile <= 0 || tile % patch != 0 || tile_overlap < 0 || tile_overlap % patch != 0 || tile_overlap >= tile)
    return bad("tile (" + std::to_string(tile) + ") and overlap (" + std::to_string(tile_overlap) +
               ") must be multiples of the " + std::to_string(patch) + "-pixel patch, overlap < tile");
  return Status::Ok();
}

Result<VideoVaeConfig> VideoVaeConfig::from_json(const ConfigJson& j) {
  VideoVaeConfig c;
  VORTEX_ASSIGN_OR_RETURN(c.latent_channels, j.get_int({"latent_channels"}, c.latent_channels));
  VORTEX_ASSIGN_OR_RETURN(c.out_channels, j.get_int({"out_channels"}, c.out_channels));
  VORTEX_ASSIGN_OR_RETURN(auto sf, j.get_ints("spatial_downsample_factors", {2, 2, 2, 2, 1, 1}));
  VORTEX_ASSIGN_OR_RETURN(auto tf, j.get_ints("temporal_downsample_factors", {1, 2, 2, 1, 1, 1}));
  c.patch = std::accumulate(sf.begin(), sf.end(), 1, std::multiplies<int>());
  c.patch_t = std::accumulate(tf.begin(), tf.end(), 1, std::multiplies<int>());
  VORTEX_ASSIGN_OR_RETURN(c.num_layers, j.get_int({"decoder_num_layers"}, c.num_layers));
  VORTEX_ASSIGN_OR_RETURN(c.heads, j.get_int({"decoder_num_attention_heads"}, c.heads));
  VORTEX_ASSIGN_OR_RETURN(c.head_dim, j.get_int({"decoder_attention_head_dim"}, c.head_dim));
  VORTEX_ASSIGN_OR_RETURN(c.registers, j.get_int({"decoder_num_register_tokens"}, c.registers));
  VORTEX_ASSIGN_OR_RETURN(c.ffn_mult, j.get_int({"decoder_ffn_mult"}, c.ffn_mult));
  VORTEX_ASSIGN_OR_RETURN(const double rope_theta, j.get_number({"decoder_rope_theta"}, c.rope_theta));
  VORTEX_ASSIGN_OR_RETURN(const double rope_dim_ratio, j.get_number({"decoder_rope_dim_ratio"}, c.rope_dim_ratio));
  VORTEX_ASSIGN_OR_RETURN(const double norm_eps, j.get_number({"decoder_norm_eps"}, c.norm_eps));
  c.rope_theta = static_cast<float>(rope_theta);
  c.rope_dim_ratio = static_cast<float>(rope_dim_ratio);
  c.norm_eps = static_cast<float>(norm_eps);
  VORTEX_ASSIGN_OR_RETURN(c.clip_length, j.get_int({"clip_length"}, c.clip_length));
  VORTEX_ASSIGN_OR_RETURN(c.token_drop, j.get_int({"token_drop"}, c.token_drop));
  VORTEX_RETURN_IF_ERROR(read_latent_stats(j, c.latent_channels, c.latents_mean, c.latents_std));
  VORTEX_RETURN_IF_ERROR(c.validate());
  return c;
}

VideoVaeConfig VideoVaeConfig::full() { return VideoVaeConfig{}; }

VideoVaeConfig VideoVaeConfig::tiny() {
  VideoVaeConfig c;  // the released geometry (patches, clips, tiling) at a width the CPU decodes in seconds
  c.num_layers = 2;
  c.heads = 2;
  c.head_dim = 16;
  return c;
}

TileSplit split_tiles(int length, int tile, int min_overlap, int ratio) {
  TileSplit s;
  if (tile >= length) {
    s.starts = {0};
    s.lengths = {length};
    return s;
  }
  int n = (length + tile - 1) / tile;
  while (tile * n - min_overlap * (n - 1) - length < 0) ++n;
  s.overlaps.assign(static_cast<size_t>(n - 1), min_overlap);
  const int remaining = tile * n - min_overlap * (n - 1) - length;
  for (int i = 0; i < remaining / ratio; ++i) s.overlaps[static_cast<size_t>(i % (n - 1))] += ratio;
  s.starts = {0};
  for (int i = 0; i < n - 1; ++i) s.starts.push_back(s.starts.back() + tile - s.overlaps[static_cast<size_t>(i)]);
  s.lengths.assign(static_cast<size_t>(n), tile);
  return s;
}

Result<VideoVaeConfig> VideoVaeConfig::from_original_json(const ConfigJson& wrapper_config,
                                                          const ConfigJson& source_config) {
  const nlohmann::json& wrapper = wrapper_config.json();
  const nlohmann::json& source = source_config.json();
  // The original AutoencoderKLLegacy config (source/config.json) and the MiniMaxH3VideoVAE wrapper, mapped
  // field for field as diffusers' conversion script documents; options the port bakes in must have their
  // released value.
  auto need = [&](const nlohmann::json& j, const char* key, const nlohmann::json& want) -> Status {
    if (j.contains(key) && j[key] != want)
      return invalid_argument(std::string("source/config.json: '") + key + "' is " + j[key].dump() + "; only " +
                              want.dump() + " (the released decoder) is supported");
    return Status::Ok();
  };
  VORTEX_RETURN_IF_ERROR(need(source, "use_vit_decoder", true));
  VORTEX_RETURN_IF_ERROR(need(source, "causal_decoder", false));
  nlohmann::json vit = source.contains("vit_decoder_kwargs") ? source["vit_decoder_kwargs"] : nlohmann::json::object();
  if (!vit.is_object()) return format_error("source/config.json: 'vit_decoder_kwargs' must be an object");
  VORTEX_RETURN_IF_ERROR(need(vit, "norm_type", "rms_norm"));
  VORTEX_RETURN_IF_ERROR(need(vit, "qk_norm_type", "rms_norm"));
  VORTEX_RETURN_IF_ERROR(need(vit, "qk_norm_affine", false));
  VORTEX_RETURN_IF_ERROR(need(vit, "ffn_use_gated", true));
  VORTEX_RETURN_IF_ERROR(need(vit, "ffn_activation_fn", "silu"));
  nlohmann::json j = nlohmann::json::object();  // the diffusers spelling, then the shared reader
  auto copy = [&](const nlohmann::json& from, const char* key, const char* as) {
    if (from.contains(key)) j[as] = from[key];
  };
  copy(source, "embed_dim", "latent_channels");
  copy(source, "out_ch", "out_channels");
  copy(source, "space_down", "spatial_downsample_factors");
  copy(source, "time_down", "temporal_downsample_factors");
  copy(vit, "num_layers", "decoder_num_layers");
  copy(vit, "heads", "decoder_num_attention_heads");
  copy(vit, "dim_head", "decoder_attention_head_dim");
  copy(vit, "rope_theta", "decoder_rope_theta");
  copy(vit, "rope_dim_ratio", "decoder_rope_dim_ratio");
  copy(wrapper, "vae_clip_length", "clip_length");
  copy(wrapper, "vae_token_drop", "token_drop");
  copy(wrapper, "latents_mean", "latents_mean");
  copy(wrapper, "latents_std", "latents_std");
  if (wrapper.contains("latent_channels") && j.contains("latent_channels") &&
      wrapper["latent_channels"] != j["latent_channels"])
    return format_error("config.json says latent_channels " + wrapper["latent_channels"].dump() +
                        ", source/config.json embed_dim " + j["latent_channels"].dump());
  if (!wrapper.contains("latents_mean") || !wrapper.contains("latents_std"))
    return format_error("config.json has no latents_mean / latents_std (the per-channel latent normalization)");
  VORTEX_ASSIGN_OR_RETURN(
      const ConfigJson renamed,
      ConfigJson::from_object(std::move(j), wrapper_config.label() + " + " + source_config.label()));
  VORTEX_ASSIGN_OR_RETURN(VideoVaeConfig c, from_json(renamed));
  VORTEX_ASSIGN_OR_RETURN(c.tile, wrapper_config.get_int({"vae_tile_size"}, c.tile));
  VORTEX_ASSIGN_OR_RETURN(c.tile_overlap, wrapper_config.get_int({"vae_tile_overlap_min"}, c.tile_overlap));
  VORTEX_ASSIGN_OR_RETURN(const int tiling, wrapper_config.get_int({"vae_decoder_tiling"}, 1));
  c.tiling = tiling != 0;
  VORTEX_RETURN_IF_ERROR(c.validate());
  return c;
}

namespace {

// The original layout (FL2VA/video_vae/source/model.safetensors) read under diffusers' names, inverting
// nothing but what diffusers' conversion script does: decoder.x_embedder -> decoder.proj_in, attn.to_out ->
// attn.to_out.0, ff.w2 -> ff.net.2; the per-head interleaved attn.to_qkv [h: q k v] split into to_q / to_k /
// to_v; ff.w1 [gate; up] -> ff.net.0.proj [up; gate]. No transposes.
VaeTensorSource original_video_source(const VaeFolder& folder, const VideoVaeConfig& cfg) {
  const VaeFolder* f = &folder;
  return [f, cfg](const std::string& name, const Shape& shape) -> Result<Tensor> {
    auto replace = [](std::string s, const std::string& from, const std::string& to) {
      const size_t at = s.find(from);
      if (at != std::string::npos) s.replace(at, from.size(), to);
      return s;
    };
    for (const char* part : {".attn.to_q.", ".attn.to_k.", ".attn.to_v."}) {
      const size_t at = name.find(part);
      if (at == std::string::npos) continue;
      const int which = part[9] == 'q' ? 0 : part[9] == 'k' ? 1 : 2;
      const std::string file_name = name.substr(0, at) + ".attn.to_qkv." + name.substr(at + std::strlen(part));
      Shape fused = shape;
      fused[0] *= 3;
      VORTEX_ASSIGN_OR_RETURN(Tensor qkv, read_vae_tensor(*f, file_name, fused));  // [3I, ...] per-head interleaved
      Tensor out = Tensor::empty(shape, DType::kF32);                              // [I, ...]
      const int64_t hd = cfg.head_dim, row = shape_numel(shape) / shape[0];
      for (int64_t h = 0; h < cfg.heads; ++h)
        std::memcpy(out.data<float>() + h * hd * row, qkv.data<float>() + (h * 3 + which) * hd * row,
                    static_cast<size_t>(hd * row) * sizeof(float));
      return out;
    }
    if (name.find(".ff.net.0.proj.") != std::string::npos) {
      VORTEX_ASSIGN_OR_RETURN(Tensor w1, read_vae_tensor(*f, replace(name, ".ff.net.0.proj.", ".ff.w1."), shape));
      const int64_t half = shape_numel(shape) / 2;  // [gate; up] -> [up; gate]
      Tensor out = Tensor::empty(shape, DType::kF32);
      std::memcpy(out.data<float>(), w1.data<float>() + half, static_cast<size_t>(half) * sizeof(float));
      std::memcpy(out.data<float>() + half, w1.data<float>(), static_cast<size_t>(half) * sizeof(float));
      return out;
    }
    std::string file_name = replace(name, "decoder.proj_in.", "decoder.x_embedder.");
    file_name = replace(file_name, ".attn.to_out.0.", ".attn.to_out.");
    file_name = replace(file_name, ".ff.net.2.", ".ff.w2.");
    return read_vae_tensor(*f, file_name, shape);
  };
}

}  // namespace

const char* video_vae_linears_name(VideoVaeLinears linears) {
  return linears == VideoVaeLinears::kFp8Blockwise ? "fp8-blockwise" : "bf16";
}

Result<std::unique_ptr<VideoVae>> VideoVae::load(const std::string& dir, Backend& backend, VideoVaeLinears linears) {
  VORTEX_ASSIGN_OR_RETURN(VaeFolder folder,
                          open_vae_folder(dir, "video VAE (--vae)", "MiniMaxH3VideoVAE", ConfigKind::kVideoVae));
  const bool original = folder.layout == VaeLayout::kOriginal;
  auto cfg = original ? VideoVaeConfig::from_original_json(folder.config, folder.source_config)
                      : VideoVaeConfig::from_json(folder.config);
  if (!cfg.ok()) return cfg.status().with_context("video VAE " + dir);
  auto vae = from_source(*cfg, original ? original_video_source(folder, *cfg) : folder_tensor_source(folder), backend,
                         linears);
  if (!vae.ok()) return vae.status().with_context("video VAE " + dir);
  // Encoder-side tensors are not read; decoder.mask_token is a training-only buffer the decoder never uses.
  const std::vector<std::string> ignored = {"encoder.", "quant_conv.", "decoder.mask_token"};
  VORTEX_RETURN_IF_ERROR(check_unexpected_vae_tensors(folder, ignored).with_context("video VAE " + dir));
  (*vae)->layout_ = folder.layout;
  return vae;
}

VaeTensorSource VideoVae::synthetic_source(uint64_t seed) { return synthetic_tensor_source(seed, synthetic_init); }

Result<std::unique_ptr<VideoVae>> VideoVae::synthetic(const VideoVaeConfig& cfg, Backend& backend, uint64_t seed,
                                                      VideoVaeLinears linears) {
  return from_source(cfg, synthetic_tensor_source(seed, synthetic_init), backend, linears);
}

Result<std::unique_ptr<VideoVae>> VideoVae::from_source(const VideoVaeConfig& cfg, const VaeTensorSource& src,
                                                        Backend& backend, VideoVaeLinears linears) {
  VORTEX_RETURN_IF_ERROR(cfg.validate());
  const bool fp8 = linears == VideoVaeLinears::kFp8Blockwise;
  if (fp8 && backend.name() != std::string_view("cuda"))
    return unsupported("the FP8 video VAE linears (fp8-blockwise) run on the cuda backend only, not on " +
                       std::string(backend.name()));
  std::unique_ptr<VideoVae> vae(new VideoVae(cfg, backend));
  vae->linears_ = linears;
  const int64_t c = cfg.latent_channels, d = cfg.dim(), f = cfg.ffn_dim(), p = cfg.patch_values();
  int64_t params = 0;
  auto get = [&](const std::string& name, const Shape& shape) -> Result<Tensor> {
    VORTEX_ASSIGN_OR_RETURN(Tensor t, src(name, shape));
    params += t.numel();
    return t;
  };
  auto up_f32 = [&](const Tensor& host, const Shape& shape) -> Result<Tensor> {
    VORTEX_ASSIGN_OR_RETURN(Tensor r, host.reshape(shape));
    return backend.upload(r);
  };
  auto up_bf16 = [&](const Tensor& host) { return backend.upload(to_bf16_host(host)); };
  // A block linear [N, K] f32 host -> BF16 on the backend, or FP8 E4M3 with 128x128 block scales (rounded to BF16
  // first, then quantized: quantize_weight_fp8).
  auto block_linear = [&](const Tensor& host) -> Result<LinearWeight> {
    LinearWeight lw;
    lw.out_features = host.dim(0);
    lw.in_features = host.dim(1);
    if (!fp8) {
      VORTEX_ASSIGN_OR_RETURN(lw.weight, up_bf16(host));
      return lw;
    }
    const int64_t n = host.dim(0), k = host.dim(1);
    const Tensor bf16 = to_bf16_host(host);
    Tensor q = Tensor::empty({n, k}, DType::kF8E4M3);                                        // [N, K] e4m3
    Tensor scales = Tensor::empty({(n + 127) / 128, fp8_block_scale_cols(k)}, DType::kF32);  // [N/128, L4] f32
    // 128-row slabs are independent blocks: quantized on all cores, the same bytes as one call over the matrix.
    const int64_t slabs = (n + 127) / 128, cols = fp8_block_scale_cols(k);
    const int threads = static_cast<int>(std::min(16u, std::max(1u, std::thread::hardware_concurrency())));
    parallel_for_ranges(static_cast<size_t>(slabs), threads, 1, [&](size_t b0, size_t b1) {
      for (size_t b = b0; b < b1; ++b) {
        const int64_t r0 = static_cast<int64_t>(b) * 128, rows = std::min<int64_t>(128, n - r0);
        quantize_fp8_block128x128_ref(bf16.data<uint16_t>() + r0 * k, rows, k, q.data<uint8_t>() + r0 * k,
                                      scales.data<float>() + static_cast<int64_t>(b) * cols);
      }
    });
    VORTEX_ASSIGN_OR_RETURN(lw.weight, backend.upload(q));
    VORTEX_ASSIGN_OR_RETURN(lw.weight_scale, backend.upload(scales));
    lw.format = QuantFormat::kFp8Scaled;
    return lw;
  };
  auto linear_weight = [](Tensor w) {
    LinearWeight lw;
    lw.out_features = w.dim(0);
    lw.in_features = w.dim(1);
    lw.weight = std::move(w);
    return lw;
  };
  VideoVaeWeights& w = vae->w_;
  {
    VORTEX_ASSIGN_OR_RETURN(Tensor t, get("post_quant_conv.weight", {c, c, 1, 1, 1}));
    VORTEX_ASSIGN_OR_RETURN(Tensor u, up_f32(t, {c, c}));
    w.post_quant_conv = linear_weight(u);
    VORTEX_ASSIGN_OR_RETURN(Tensor b, get("post_quant_conv.bias", {c}));
    VORTEX_ASSIGN_OR_RETURN(w.post_quant_conv_bias, backend.upload(b));
    VORTEX_ASSIGN_OR_RETURN(Tensor pw, get("decoder.proj_in.weight", {d, c}));
    VORTEX_ASSIGN_OR_RETURN(Tensor pu, backend.upload(pw));
    w.decoder_proj_in = linear_weight(pu);
    VORTEX_ASSIGN_OR_RETURN(Tensor pb, get("decoder.proj_in.bias", {d}));
    VORTEX_ASSIGN_OR_RETURN(w.decoder_proj_in_bias, backend.upload(pb));
    VORTEX_ASSIGN_OR_RETURN(Tensor reg, get("decoder.register_tokens", {1, cfg.registers, d}));
    VORTEX_ASSIGN_OR_RETURN(w.decoder_register_tokens, up_f32(reg, {cfg.registers, d}));
  }
  for (int i = 0; i < cfg.num_layers; ++i) {
    const std::string pre = "decoder.transformer_blocks." + std::to_string(i) + ".";
    VideoVaeBlockWeights b;
    VORTEX_ASSIGN_OR_RETURN(Tensor n1, get(pre + "norm1.weight", {d}));
    VORTEX_ASSIGN_OR_RETURN(b.norm1_weight, backend.upload(n1));
    VORTEX_ASSIGN_OR_RETURN(Tensor n2, get(pre + "norm2.weight", {d}));
    VORTEX_ASSIGN_OR_RETURN(b.norm2_weight, backend.upload(n2));
    VORTEX_ASSIGN_OR_RETURN(Tensor s1, get(pre + "scale1", {d}));
    VORTEX_ASSIGN_OR_RETURN(b.scale1, backend.upload(s1));
    VORTEX_ASSIGN_OR_RETURN(Tensor s2, get(pre + "scale2", {d}));
    VORTEX_ASSIGN_OR_RETURN(b.scale2, backend.upload(s2));
    // Fused QKV [q | k | v] rows so one GEMM produces all three.
    Tensor qkv = Tensor::empty({3 * d, d}, DType::kF32), qkv_b = Tensor::empty({3 * d}, DType::kF32);
    const char* parts[3] = {"attn.to_q", "attn.to_k", "attn.to_v"};
    for (int j = 0; j < 3; ++j) {
      VORTEX_ASSIGN_OR_RETURN(Tensor pw, get(pre + parts[j] + ".weight", {d, d}));
      VORTEX_ASSIGN_OR_RETURN(Tensor pb, get(pre + parts[j] + ".bias", {d}));
      std::memcpy(qkv.data<float>() + j * d * d, pw.raw_data(), static_cast<size_t>(d * d) * 4);
      std::memcpy(qkv_b.data<float>() + j * d, pb.raw_data(), static_cast<size_t>(d) * 4);
    }
    VORTEX_ASSIGN_OR_RETURN(b.attn_qkv, block_linear(qkv));
    VORTEX_ASSIGN_OR_RETURN(b.attn_qkv_bias, up_bf16(qkv_b));
    VORTEX_ASSIGN_OR_RETURN(Tensor ow, get(pre + "attn.to_out.0.weight", {d, d}));
    VORTEX_ASSIGN_OR_RETURN(b.attn_to_out_0, block_linear(ow));
    VORTEX_ASSIGN_OR_RETURN(Tensor ob, get(pre + "attn.to_out.0.bias", {d}));
    VORTEX_ASSIGN_OR_RETURN(b.attn_to_out_0_bias, up_bf16(ob));
    // diffusers' SwiGLU reads [value | gate]; the swiglu op takes [gate | value]: swap the halves.
    VORTEX_ASSIGN_OR_RETURN(Tensor f1, get(pre + "ff.net.0.proj.weight", {2 * f, d}));
    VORTEX_ASSIGN_OR_RETURN(Tensor f1b, get(pre + "ff.net.0.proj.bias", {2 * f}));
    Tensor f1s = Tensor::empty({2 * f, d}, DType::kF32), f1bs = Tensor::empty({2 * f}, DType::kF32);
    std::memcpy(f1s.data<float>(), f1.data<float>() + f * d, static_cast<size_t>(f * d) * 4);
    std::memcpy(f1s.data<float>() + f * d, f1.data<float>(), static_cast<size_t>(f * d) * 4);
    std::memcpy(f1bs.data<float>(), f1b.data<float>() + f, static_cast<size_t>(f) * 4);
    std::memcpy(f1bs.data<float>() + f, f1b.data<float>(), static_cast<size_t>(f) * 4);
    VORTEX_ASSIGN_OR_RETURN(b.ff_net_0_proj, block_linear(f1s));
    VORTEX_ASSIGN_OR_RETURN(b.ff_net_0_proj_bias, up_bf16(f1bs));
    VORTEX_ASSIGN_OR_RETURN(Tensor f2, get(pre + "ff.net.2.weight", {d, f}));
    VORTEX_ASSIGN_OR_RETURN(b.ff_net_2, block_linear(f2));
    VORTEX_ASSIGN_OR_RETURN(Tensor f2b, get(pre + "ff.net.2.bias", {d}));
    VORTEX_ASSIGN_OR_RETURN(b.ff_net_2_bias, up_bf16(f2b));
    w.blocks.push_back(std::move(b));
  }
  VORTEX_ASSIGN_OR_RETURN(Tensor nw, get("decoder.norm_out.weight", {d}));
  VORTEX_ASSIGN_OR_RETURN(w.decoder_norm_out_weight, backend.upload(nw));
  VORTEX_ASSIGN_OR_RETURN(Tensor nb, get("decoder.norm_out.bias", {d}));
  VORTEX_ASSIGN_OR_RETURN(w.decoder_norm_out_bias, backend.upload(nb));
  VORTEX_ASSIGN_OR_RETURN(Tensor po, get("decoder.proj_out.weight", {p, d}));
  VORTEX_ASSIGN_OR_RETURN(Tensor po_d, up_bf16(po));
  w.decoder_proj_out = linear_weight(po_d);
  VORTEX_ASSIGN_OR_RETURN(Tensor pob, get("decoder.proj_out.bias", {p}));
  VORTEX_ASSIGN_OR_RETURN(w.decoder_proj_out_bias, up_bf16(pob));
  VORTEX_ASSIGN_OR_RETURN(w.zero_token, backend.upload(Tensor::zeros({1, d}, DType::kF32)));
  Tensor ones = Tensor::empty({cfg.head_dim}, DType::kBF16);
  for (int i = 0; i < cfg.head_dim; ++i) ones.data<uint16_t>()[i] = bf16_bits_from_f32(1.0f);
  VORTEX_ASSIGN_OR_RETURN(w.qk_norm_ones, backend.upload(ones));
  vae->params_ = params;
  return vae;
}

int64_t VideoVae::frames_for(int64_t t) const {
  const int64_t tcs = cfg_.tokens_chunk_size(), drop = cfg_.token_drop;
  const int64_t num_tokens = t + drop, pad = ((-num_tokens) % tcs + tcs) % tcs;
  const int64_t chunks = (num_tokens + pad) / tcs - (drop > 0 ? 1 : 0);
  if (t <= 0 || chunks < 1) return 0;
  int64_t frames = 0;
  const int64_t clip_frames = (tcs + cfg_.token_overlap()) * cfg_.patch_t;
  bool have_overlap = false;
  int64_t overlap_frames = 0;
  for (int64_t i = 0; i < chunks; ++i) {
    for (int64_t j = 0; j < (drop > 0 ? 2 : 1); ++j) {
      const int64_t start = j * tcs * cfg_.patch_t;
      const int64_t n =
          std::max<int64_t>(0, std::min(clip_frames, start + tcs * cfg_.patch_t) - start - cfg_.frame_pre_padding());
      if (j == 0) frames += n;
      else {
        have_overlap = true;
        overlap_frames = n;
      }
    }
  }
  if (have_overlap) frames += overlap_frames;
  const int64_t tail = cfg_.clip_length % cfg_.patch_t;
  for (int64_t k = 0; k < pad; ++k) frames -= (tail && (t + k) % tcs == 0) ? tail : cfg_.patch_t;
  return frames;
}

int64_t VideoVae::tile_forwards(const Shape& s) const {
  const int64_t t = s[1];
  const int64_t tcs = cfg_.tokens_chunk_size(), num_tokens = t + cfg_.token_drop;
  const int64_t pad = ((-num_tokens) % tcs + tcs) % tcs;
  const int64_t chunks = (num_tokens + pad) / tcs - (cfg_.token_drop > 0 ? 1 : 0);
  if (!cfg_.tiling) return chunks;
  const int hp = static_cast<int>(s[2]) * cfg_.patch, wp = static_cast<int>(s[3]) * cfg_.patch;
  return chunks * static_cast<int64_t>(split_tiles(hp, cfg_.tile, cfg_.tile_overlap, cfg_.patch).starts.size() *
                                       split_tiles(wp, cfg_.tile, cfg_.tile_overlap, cfg_.patch).starts.size());
}

Status VideoVae::check_latents(const Tensor& z) const {
  if (!z.defined() || z.ndim() != 4)
    return invalid_argument("video latents must be [" + std::to_string(cfg_.latent_channels) + ", T, H, W] f32, got " +
                            (z.defined() ? z.describe() : std::string("nothing")));
  if (z.dtype() != DType::kF32 || !z.is_contiguous() || z.device() != Device::kCpu)
    return invalid_argument("video latents must be a contiguous host f32 tensor, got " + z.describe());
  if (z.dim(0) != cfg_.latent_channels)
    return invalid_argument("video latents have " + std::to_string(z.dim(0)) + " channels; this VAE takes " +
                            std::to_string(cfg_.latent_channels) + " ([C, T, H, W], channel-major)");
  if (z.dim(2) <= 0 || z.dim(3) <= 0) return invalid_argument("video latents have an empty frame: " + z.describe());
  int64_t min_frames = 1;
  while (frames_for(min_frames) <= 0 && min_frames < 1000) ++min_frames;
  if (frames_for(z.dim(1)) <= 0)
    return invalid_argument("video latents have " + std::to_string(z.dim(1)) + " latent frames; the VAE decodes " +
                            "clips of " + std::to_string(cfg_.tokens_chunk_size()) + " + " +
                            std::to_string(cfg_.token_overlap()) + " and needs at least " + std::to_string(min_frames) +
                            " (5n + 2 frames as `vortex generate` writes them)");
  const float* v = z.data<float>();
  for (int64_t i = 0; i < z.numel(); ++i)
    if (!std::isfinite(v[i]))
      return invalid_argument("video latents contain a non-finite value (" + std::to_string(v[i]) + " at flat index " +
                              std::to_string(i) + "); the generation diverged or the file is corrupt");
  return Status::Ok();
}

// Device activations of one batched forward, sized once for the largest batch of a decode and reused (views of
// the first rows); y holds one clip's tile forwards, which the clip's stitch reads before the next clip's forwards
// overwrite them (backend order). The stitch buffers are sized per output geometry and kept.
struct VideoVae::Workspace {
  int64_t rows = 0;    // row capacity of one forward (tiles * S)
  int64_t y_rows = 0;  // row capacity of y (a clip's tiles * S)
  Tensor pq;           // [rows, C] f32
  Tensor x;            // [rows, D] f32 residual stream
  Tensor nrm, qkv, o, a, u, m;
  Tensor y;  // [y_rows, 3 * pt * p * p] bf16
  // Stitch buffers (flat f32, viewed as [C, frames, H, W]): one clip's output frames on the backend, the cross-fade
  // frames of the previous and the current clip, and two host copies of the output frames (Backend::alloc_host:
  // page-locked on CUDA) so clip k's copy-out runs while clip k - 1's frames are handed over.
  int64_t clip_elems = 0, fade_elems = 0;
  Tensor clip_out, fade[2], clip_host[2];
  Tensor fade_host;  // the last clip's cross-fade frames (page-locked), copied out behind its output frames
  // Every tile's input rows of one decode: a page-locked host copy (Backend::alloc_host) and the device copy; a
  // batch's rows are gathered into the host copy and uploaded (Backend::upload_async) just before its forward.
  int64_t token_rows = 0;
  Tensor tokens_host, tokens_dev;  // [token_rows, C] f32
  int64_t bytes = 0;
};

VideoVae::VideoVae(VideoVaeConfig cfg, Backend& backend) : cfg_(std::move(cfg)), backend_(backend) {}
VideoVae::~VideoVae() = default;

Status VideoVae::set_batching(const Batching& b) {
  if (b.max_batch_tiles < 0 || b.max_batch_rows < 1)
    return invalid_argument("video VAE batching: max_batch_tiles must be >= 0 (0 = no limit) and max_batch_rows >= 1");
  batching_ = b;
  return Status::Ok();
}

int64_t VideoVae::workspace_bytes() const { return ws_ ? ws_->bytes : 0; }

Status VideoVae::reserve_tokens(int64_t rows) {
  if (!ws_) return internal_error("video VAE: reserve_tokens before reserve");
  Workspace& w = *ws_;
  if (w.token_rows >= rows) return Status::Ok();
  const int64_t c = cfg_.latent_channels;
  w.bytes -= w.token_rows * c * 4;
  w.tokens_host = Tensor(), w.tokens_dev = Tensor(), w.token_rows = 0;
  VORTEX_ASSIGN_OR_RETURN(w.tokens_host, backend_.alloc_host({rows, c}, DType::kF32));  // [rows, C] f32
  std::memset(w.tokens_host.raw_data(), 0, static_cast<size_t>(rows * c) * sizeof(float));
  VORTEX_ASSIGN_OR_RETURN(w.tokens_dev, backend_.alloc({rows, c}, DType::kF32));  // [rows, C] f32
  w.token_rows = rows;
  w.bytes += rows * c * 4;
  return Status::Ok();
}

Status VideoVae::reserve(int64_t s, int64_t y_rows) {
  if (ws_ && ws_->rows >= s && ws_->y_rows >= y_rows) return Status::Ok();
  if (ws_) s = std::max(s, ws_->rows), y_rows = std::max(y_rows, ws_->y_rows);
  ws_.reset();  // the old buffers go back to the allocator before the larger ones are taken
  Backend& be = backend_;
  const int64_t c = cfg_.latent_channels, d = cfg_.dim(), f = cfg_.ffn_dim(), pv = cfg_.patch_values();
  auto w = std::make_unique<Workspace>();
  w->rows = s;
  w->y_rows = y_rows;
  VORTEX_ASSIGN_OR_RETURN(w->pq, be.alloc({s, c}, DType::kF32));
  VORTEX_ASSIGN_OR_RETURN(w->x, be.alloc({s, d}, DType::kF32));
  VORTEX_ASSIGN_OR_RETURN(w->nrm, be.alloc({s, d}, DType::kBF16));      // [S, D] bf16
  VORTEX_ASSIGN_OR_RETURN(w->qkv, be.alloc({s, 3 * d}, DType::kBF16));  // [S, 3I] bf16
  VORTEX_ASSIGN_OR_RETURN(w->o, be.alloc({s, d}, DType::kBF16));        // [S, I] bf16
  VORTEX_ASSIGN_OR_RETURN(w->a, be.alloc({s, d}, DType::kBF16));        // [S, D] bf16
  VORTEX_ASSIGN_OR_RETURN(w->u, be.alloc({s, 2 * f}, DType::kBF16));    // [S, 2F] bf16, [gate | value]
  VORTEX_ASSIGN_OR_RETURN(w->m, be.alloc({s, f}, DType::kBF16));        // [S, F] bf16
  VORTEX_ASSIGN_OR_RETURN(w->y, be.alloc({y_rows, pv}, DType::kBF16));  // [y_rows, 3 * pt * p * p] bf16
  w->bytes = s * (c * 4 + d * 4 + 3 * d * 2 + 3 * d * 2 + 2 * f * 2 + f * 2) + y_rows * pv * 2;
  ws_ = std::move(w);
  return Status::Ok();
}

// RoPE: per axis coordinate 2 * ((i + 0.5) / size) - 1 in FP32, angle = fp32(fp32(2 pi * pos) * inv_freq),
// columns [t freqs | h freqs | w freqs]; registers and the zero token sit at 0 (cos 1, sin 0). One tile's table
// repeated `batch` times; built once per (shape, batch) and kept on the backend.
Result<const RopeTables*> VideoVae::rope_for(int64_t t, int64_t h, int64_t wd, int64_t batch) {
  const std::array<int64_t, 4> key = {t, h, wd, batch};
  auto it = rope_cache_.find(key);
  if (it != rope_cache_.end()) return &it->second;
  const int64_t n = t * h * wd, s = n + cfg_.registers + 1;
  const int rd = cfg_.rope_dims(), half = rd / 2, nf = rd / 6;
  RopeTables rope;
  rope.rope_dims = rd;
  std::vector<float> inv_freq(static_cast<size_t>(nf));
  for (int k = 0; k < nf; ++k) {
    const float e = static_cast<float>(static_cast<double>(k) * (6.0 / rd));
    const float pw = static_cast<float>(std::pow(static_cast<double>(cfg_.rope_theta), static_cast<double>(e)));
    inv_freq[static_cast<size_t>(k)] = 1.0f / pw;
  }
  Tensor cos_t = Tensor::empty({batch * s, half}, DType::kBF16), sin_t = Tensor::empty({batch * s, half}, DType::kBF16);
  const float two_pi = static_cast<float>(2.0 * M_PI);
  const int64_t sizes[3] = {t, h, wd};
  for (int64_t i = 0; i < s; ++i) {
    int64_t idx[3] = {0, 0, 0};
    if (i < n) idx[0] = i / (h * wd), idx[1] = (i / wd) % h, idx[2] = i % wd;
    for (int a = 0; a < 3; ++a) {
      float pos = 0.0f;
      if (i < n) {
        volatile float q = (static_cast<float>(idx[a]) + 0.5f) / static_cast<float>(sizes[a]);
        pos = 2.0f * q - 1.0f;
      }
      for (int k = 0; k < nf; ++k) {
        volatile float sp = two_pi * pos;
        const float ang = sp * inv_freq[static_cast<size_t>(k)];
        const size_t col = static_cast<size_t>(i * half + a * nf + k);
        cos_t.data<uint16_t>()[col] = bf16_bits_from_f32(static_cast<float>(std::cos(static_cast<double>(ang))));
        sin_t.data<uint16_t>()[col] = bf16_bits_from_f32(static_cast<float>(std::sin(static_cast<double>(ang))));
      }
    }
  }
  const size_t tile_elems = static_cast<size_t>(s * half);
  for (int64_t b = 1; b < batch; ++b) {
    std::memcpy(cos_t.data<uint16_t>() + b * tile_elems, cos_t.data<uint16_t>(), tile_elems * 2);
    std::memcpy(sin_t.data<uint16_t>() + b * tile_elems, sin_t.data<uint16_t>(), tile_elems * 2);
  }
  VORTEX_ASSIGN_OR_RETURN(rope.cos, backend_.upload(cos_t));
  VORTEX_ASSIGN_OR_RETURN(rope.sin, backend_.upload(sin_t));
  return &rope_cache_.emplace(key, std::move(rope)).first->second;
}

Status VideoVae::forward_batch(const Tensor& tokens, int64_t batch, int64_t t, int64_t h, int64_t wd, Tensor& y) {
  Backend& be = backend_;
  const int64_t n = t * h * wd, r = cfg_.registers, s = n + r + 1, rows = batch * s;
  const int64_t d = cfg_.dim();
  if (!ws_ || ws_->rows < rows)
    return internal_error("video VAE: workspace not reserved for " + std::to_string(rows) + " rows");
  if (tokens.ndim() != 2 || tokens.dim(0) != rows || tokens.dim(1) != cfg_.latent_channels)
    return internal_error("video VAE: batch tokens " + tokens.describe() + " are not [" + std::to_string(rows) + ", " +
                          std::to_string(cfg_.latent_channels) + "]");
  VORTEX_ASSIGN_OR_RETURN(const RopeTables* rope, rope_for(t, h, wd, batch));
  Workspace& w = *ws_;
  // post_quant_conv and proj_in over every row (the register / zero-token rows are overwritten below).
  VORTEX_ASSIGN_OR_RETURN(Tensor pq, w.pq.narrow(0, 0, rows));  // [B * S, C] f32
  VORTEX_ASSIGN_OR_RETURN(Tensor x, w.x.narrow(0, 0, rows));    // [B * S, D] f32 residual stream
  {
    BackendRegion stem(be, "vae.stem");
    VORTEX_RETURN_IF_ERROR(
        be.linear(tokens, w_.post_quant_conv, &w_.post_quant_conv_bias, pq).with_context("post_quant_conv"));
    VORTEX_RETURN_IF_ERROR(be.linear(pq, w_.decoder_proj_in, &w_.decoder_proj_in_bias, x).with_context("proj_in"));
    for (int64_t b = 0; b < batch; ++b) {
      if (r > 0) {
        VORTEX_ASSIGN_OR_RETURN(Tensor xr, x.narrow(0, b * s + n, r));
        VORTEX_RETURN_IF_ERROR(be.copy(w_.decoder_register_tokens, xr));
      }
      VORTEX_ASSIGN_OR_RETURN(Tensor xz, x.narrow(0, b * s + n + r, 1));
      VORTEX_RETURN_IF_ERROR(be.copy(w_.zero_token, xz));
    }
  }
  VORTEX_ASSIGN_OR_RETURN(Tensor nrm, w.nrm.narrow(0, 0, rows));  // [B * S, D] bf16
  VORTEX_ASSIGN_OR_RETURN(Tensor qkv, w.qkv.narrow(0, 0, rows));  // [B * S, 3I] bf16
  VORTEX_ASSIGN_OR_RETURN(Tensor o, w.o.narrow(0, 0, rows));      // [B * S, I] bf16
  VORTEX_ASSIGN_OR_RETURN(Tensor a, w.a.narrow(0, 0, rows));      // [B * S, D] bf16
  VORTEX_ASSIGN_OR_RETURN(Tensor u, w.u.narrow(0, 0, rows));      // [B * S, 2F] bf16
  VORTEX_ASSIGN_OR_RETURN(Tensor m, w.m.narrow(0, 0, rows));      // [B * S, F] bf16
  VORTEX_ASSIGN_OR_RETURN(Tensor q, qkv.as_strided({rows, d}, {3 * d, 1}, 0));
  VORTEX_ASSIGN_OR_RETURN(Tensor k, qkv.as_strided({rows, d}, {3 * d, 1}, d));
  VORTEX_ASSIGN_OR_RETURN(Tensor v, qkv.as_strided({rows, d}, {3 * d, 1}, 2 * d));
  ExecOptions opts;  // attention: the policy's BF16 kernel (kBf16Owned on sm_90) or SDPA
  opts.attention = batching_.policy_attention && be.default_options().attention == AttentionKind::kBf16Owned
                       ? AttentionKind::kBf16Owned
                       : AttentionKind::kSdpa;
  const bool fused = batching_.fused_residual_norm;
  // Level-1 regions (vae_decode_bench --breakdown) time each op family on the device timeline.
  if (!w_.blocks.empty() && fused) {
    BackendRegion reg(be, "vae.rms_norm");
    VORTEX_RETURN_IF_ERROR(be.rms_norm_fp32(x, w_.blocks[0].norm1_weight, cfg_.norm_eps, nrm).with_context("block 0"));
  }
  for (size_t i = 0; i < w_.blocks.size(); ++i) {
    const VideoVaeBlockWeights& bw = w_.blocks[i];
    const std::string ctx = "video VAE block " + std::to_string(i);
    if (!fused) {
      BackendRegion reg(be, "vae.rms_norm");
      VORTEX_RETURN_IF_ERROR(be.rms_norm_fp32(x, bw.norm1_weight, cfg_.norm_eps, nrm).with_context(ctx));
    }
    {
      BackendRegion reg(be, "vae.gemm_qkv");
      VORTEX_RETURN_IF_ERROR(be.linear(nrm, bw.attn_qkv, &bw.attn_qkv_bias, qkv).with_context(ctx));
    }
    {
      BackendRegion reg(be, "vae.qk_norm_rope");
      VORTEX_RETURN_IF_ERROR(
          be.qk_norm_rope(q, k, w_.qk_norm_ones, w_.qk_norm_ones, cfg_.norm_eps, rope, cfg_.heads, cfg_.head_dim)
              .with_context(ctx));
    }
    {
      BackendRegion reg(be, "vae.attention");
      VORTEX_RETURN_IF_ERROR((batching_.batched_attention
                                  ? be.attention_batched(q, k, v, batch, cfg_.heads, cfg_.head_dim, o, opts)
                                  : be.attention_per_sequence(q, k, v, batch, cfg_.heads, cfg_.head_dim, o, opts))
                                 .with_context(ctx));
    }
    {
      BackendRegion reg(be, "vae.gemm_out");
      VORTEX_RETURN_IF_ERROR(be.linear(o, bw.attn_to_out_0, &bw.attn_to_out_0_bias, a).with_context(ctx));
    }
    if (fused) {  // x += a * scale1, nrm = norm2(x) in one pass
      BackendRegion reg(be, "vae.residual_norm");
      VORTEX_RETURN_IF_ERROR(
          be.scale_add_rms_norm_fp32(x, a, bw.scale1, bw.norm2_weight, cfg_.norm_eps, nrm).with_context(ctx));
    } else {
      BackendRegion reg(be, "vae.residual_norm");
      VORTEX_RETURN_IF_ERROR(be.scale_add(x, a, bw.scale1).with_context(ctx));
      VORTEX_RETURN_IF_ERROR(be.rms_norm_fp32(x, bw.norm2_weight, cfg_.norm_eps, nrm).with_context(ctx));
    }
    {
      BackendRegion reg(be, "vae.gemm_ff1");
      VORTEX_RETURN_IF_ERROR(be.linear(nrm, bw.ff_net_0_proj, &bw.ff_net_0_proj_bias, u).with_context(ctx));
    }
    {
      BackendRegion reg(be, "vae.swiglu");
      VORTEX_RETURN_IF_ERROR(be.swiglu(u, m).with_context(ctx));
    }
    {
      BackendRegion reg(be, "vae.gemm_ff2");
      VORTEX_RETURN_IF_ERROR(be.linear(m, bw.ff_net_2, &bw.ff_net_2_bias, a).with_context(ctx));
    }
    BackendRegion reg(be, "vae.residual_norm");
    if (fused && i + 1 < w_.blocks.size()) {  // x += a * scale2, nrm = the next block's norm1(x) in one pass
      VORTEX_RETURN_IF_ERROR(
          be.scale_add_rms_norm_fp32(x, a, bw.scale2, w_.blocks[i + 1].norm1_weight, cfg_.norm_eps, nrm)
              .with_context(ctx));
    } else {
      VORTEX_RETURN_IF_ERROR(be.scale_add(x, a, bw.scale2).with_context(ctx));
    }
  }
  BackendRegion head(be, "vae.head");
  VORTEX_RETURN_IF_ERROR(be.layer_norm(x, w_.decoder_norm_out_weight, w_.decoder_norm_out_bias, cfg_.norm_eps, nrm)
                             .with_context("video VAE norm_out"));
  if (y.ndim() != 2 || y.dim(0) != rows || y.dim(1) != cfg_.patch_values())
    return internal_error("video VAE: batch output " + y.describe() + " is not [" + std::to_string(rows) + ", " +
                          std::to_string(cfg_.patch_values()) + "]");
  VORTEX_RETURN_IF_ERROR(be.linear(nrm, w_.decoder_proj_out, &w_.decoder_proj_out_bias, y).with_context("proj_out"));
  return Status::Ok();
}

namespace {

// Unpatchify: token (ti, hi, wi) value ((ch * pt + a) * p + b) * p + cc -> pixel (ch, ti*pt + a, hi*p + b, wi*p + cc).
// src: one tile's rows of y [S, pv = 3 * pt * p * p] bf16 host (the first t * h * w rows are the voxel tokens)
// -> Video [3, t*pt, h*p, w*p].
Video unpatchify(const uint16_t* src, int64_t pv, int64_t t, int64_t h, int64_t wd, int64_t oc, int64_t pt, int64_t p,
                 int threads) {
  const int64_t n = t * h * wd;
  Video out(static_cast<int>(oc), static_cast<int>(t * pt), static_cast<int>(h * p), static_cast<int>(wd * p));
  const int64_t fo = t * pt, ho = h * p, wo = wd * p;
  parallel_for_ranges(static_cast<size_t>(n), threads, 1, [&](size_t begin, size_t end) {
    for (int64_t i = static_cast<int64_t>(begin); i < static_cast<int64_t>(end); ++i) {
      const int64_t ti = i / (h * wd), hi = (i / wd) % h, wi = i % wd;
      for (int64_t ch = 0; ch < oc; ++ch)
        for (int64_t aa = 0; aa < pt; ++aa)
          for (int64_t bb = 0; bb < p; ++bb) {
            float* dst = &out.v[static_cast<size_t>(((ch * fo + ti * pt + aa) * ho + hi * p + bb) * wo + wi * p)];
            const uint16_t* row = src + i * pv + ((ch * pt + aa) * p + bb) * p;
            for (int64_t cc = 0; cc < p; ++cc) dst[cc] = f32_from_bf16_bits(row[cc]);
          }
    }
  });
  return out;
}

}  // namespace

Result<Tensor> VideoVae::decode_tile(const Tensor& z) {
  if (!z.defined() || z.ndim() != 4 || z.dtype() != DType::kF32 || !z.is_contiguous() ||
      z.dim(0) != cfg_.latent_channels)
    return invalid_argument("decode_tile: expected contiguous host [" + std::to_string(cfg_.latent_channels) +
                            ", t, h, w] f32 latents, got " + (z.defined() ? z.describe() : std::string("nothing")));
  const int64_t c = cfg_.latent_channels, t = z.dim(1), h = z.dim(2), wd = z.dim(3);
  const int64_t n = t * h * wd, s = n + cfg_.registers + 1;
  VORTEX_RETURN_IF_ERROR(reserve(s, s));
  Tensor tok = Tensor::zeros({s, c}, DType::kF32);  // [S, C] f32: voxels in (t, h, w) order, channels last
  for (int64_t ci = 0; ci < c; ++ci)
    for (int64_t i = 0; i < n; ++i) tok.data<float>()[i * c + ci] = z.data<float>()[ci * n + i];
  VORTEX_ASSIGN_OR_RETURN(Tensor tok_d, backend_.upload(tok));
  VORTEX_ASSIGN_OR_RETURN(Tensor y, ws_->y.narrow(0, 0, s));  // [S, 3 * pt * p * p] bf16
  VORTEX_RETURN_IF_ERROR(forward_batch(tok_d, 1, t, h, wd, y));
  Tensor yh = Tensor::empty({s, cfg_.patch_values()}, DType::kBF16);
  VORTEX_RETURN_IF_ERROR(backend_.download(y, yh));
  return tensor_from_video(
      unpatchify(yh.data<uint16_t>(), yh.dim(1), t, h, wd, cfg_.out_channels, cfg_.patch_t, cfg_.patch, 1));
}

// The whole decode in one pass over the tiles (clips in order, tiles row-major), equal value for value to
// diffusers' _decode / _decode_clip / _stitch_tiles / _blend composition (the blends read the ORIGINAL tile above
// and to the left, then crop; each clip's first chunk cross-fades with the previous clip's overlap chunk; the
// padded frames are cropped at the end), but with every pixel written once. A clip's tile forwards and its stitch
// (Backend::video_stitch_clip: unpatchify, tile blends, temporal cross-fade) run on the backend; its output frames are
// copied into a page-locked host buffer behind them, and the host moves clip k - 1's frames into the result while the
// backend runs clip k.
Result<Tensor> VideoVae::decode(const Tensor& latents, const VaeProgressFn& progress, const VideoFramesFn& on_frames) {
  VORTEX_RETURN_IF_ERROR(check_latents(latents));
  const int64_t c = latents.dim(0), t = latents.dim(1), h = latents.dim(2), w = latents.dim(3);
  const int64_t tcs = cfg_.tokens_chunk_size(), drop = cfg_.token_drop, ratio = cfg_.patch_t;
  const int64_t chunk_frames = tcs * ratio, pre = cfg_.frame_pre_padding();
  const int64_t num_tokens = t + drop, pad = ((-num_tokens) % tcs + tcs) % tcs;
  const int64_t chunks = (num_tokens + pad) / tcs - (drop > 0 ? 1 : 0);
  // De-normalize (latent * std + mean, FP32) and repeat the last frame `pad` times.
  const int threads = static_cast<int>(std::min(8u, std::max(1u, std::thread::hardware_concurrency())));
  Tensor z = Tensor::empty({c, t + pad, h, w}, DType::kF32);
  parallel_for_ranges(static_cast<size_t>(c * (t + pad)), threads, 1, [&](size_t p0, size_t p1) {
    for (size_t p = p0; p < p1; ++p) {
      const int64_t ci = static_cast<int64_t>(p) / (t + pad), ti = static_cast<int64_t>(p) % (t + pad);
      for (int64_t i = 0; i < h * w; ++i) {
        volatile float sv = latents.data<float>()[(ci * t + std::min(ti, t - 1)) * h * w + i] * cfg_.latents_std[ci];
        z.data<float>()[(ci * (t + pad) + ti) * h * w + i] = sv + cfg_.latents_mean[ci];
      }
    }
  });
  // Spatial tiles in pixels (one tile when tiling is off) and each row/column's kept extent and offset.
  const int ps = cfg_.patch;
  const int hp = static_cast<int>(h) * ps, wp = static_cast<int>(w) * ps;
  TileSplit ys, xs;
  if (cfg_.tiling) {
    ys = split_tiles(hp, cfg_.tile, cfg_.tile_overlap, ps);
    xs = split_tiles(wp, cfg_.tile, cfg_.tile_overlap, ps);
  } else {
    ys.starts = {0}, ys.lengths = {hp};
    xs.starts = {0}, xs.lengths = {wp};
  }
  const int ny = static_cast<int>(ys.starts.size()), nx = static_cast<int>(xs.starts.size());
  std::vector<int> kept_h(ny), kept_w(nx), y_off(ny + 1, 0), x_off(nx + 1, 0);
  for (int i = 0; i < ny; ++i) {
    kept_h[i] = ys.lengths[i] - (i + 1 < ny ? ys.overlaps[i] : 0);
    y_off[i + 1] = y_off[i] + kept_h[i];
  }
  for (int j = 0; j < nx; ++j) {
    kept_w[j] = xs.lengths[j] - (j + 1 < nx ? xs.overlaps[j] : 0);
    x_off[j + 1] = x_off[j] + kept_w[j];
  }
  if (y_off[ny] != hp || x_off[nx] != wp)
    return internal_error("video VAE: tiles cover " + std::to_string(y_off[ny]) + "x" + std::to_string(x_off[nx]) +
                          " pixels of " + std::to_string(hp) + "x" + std::to_string(wp));
  // Temporal layout: clip i decodes latent frames [i * tcs, + len); its chunk 0 frames [f00, fe0) go to the output
  // (cross-faded with the previous overlap), its chunk 1 frames [f01, fe1) become the next overlap.
  struct Clip {
    int64_t start, len, frames, f00, fe0, f01, fe1, out_offset;
  };
  std::vector<Clip> clips;
  int64_t out_total = 0, last_overlap = 0;
  for (int64_t i = 0; i < chunks; ++i) {
    Clip cl;
    cl.start = i * tcs;
    cl.len = std::min<int64_t>(tcs + cfg_.token_overlap(), t + pad - cl.start);
    cl.frames = cl.len * ratio;
    cl.fe0 = std::min(cl.frames, chunk_frames);
    cl.f00 = std::min(cl.fe0, pre);
    cl.fe1 = std::min(cl.frames, 2 * chunk_frames);
    cl.f01 = std::min(cl.fe1, chunk_frames + pre);
    if (drop == 0) cl.f01 = cl.fe1 = 0;
    cl.out_offset = out_total;
    out_total += cl.fe0 - cl.f00;
    last_overlap = cl.fe1 - cl.f01;
    clips.push_back(cl);
  }
  if (drop > 0) out_total += last_overlap;
  int64_t pad_frames = 0;
  const int64_t tail = cfg_.clip_length % ratio;
  for (int64_t k = 0; k < pad; ++k) pad_frames += (tail && (t + k) % tcs == 0) ? tail : ratio;
  const int64_t out_frames = out_total - pad_frames;
  if (out_frames != frames_for(t) || out_frames <= 0)
    return internal_error("video VAE: the clip layout gives " + std::to_string(out_frames) +
                          " frames, frames_for says " + std::to_string(frames_for(t)));
  const int oc = cfg_.out_channels;
  Tensor out = Tensor::empty({oc, out_frames, hp, wp}, DType::kF32);
  float* outp = out.data<float>();
  auto out_at = [&](int ch, int64_t f, int64_t y, int64_t x) -> float& {
    return outp[((static_cast<int64_t>(ch) * out_frames + f) * hp + y) * wp + x];
  };

  struct Job {
    int clip, i, j;
  };
  std::vector<Job> jobs;
  for (int ci = 0; ci < static_cast<int>(clips.size()); ++ci)
    for (int i = 0; i < ny; ++i)
      for (int j = 0; j < nx; ++j) jobs.push_back({ci, i, j});
  // Batches: runs of consecutive tiles of one token shape (a clip's tiles), capped by the Batching limits.
  struct Batch {
    size_t first = 0, count = 0;
    int64_t t = 0, h = 0, w = 0, s = 0, row0 = 0;  // tile shape in latents, tokens per tile, first input row
  };
  std::vector<Batch> batches;
  int64_t total_rows = 0, max_rows = 0;
  for (size_t k = 0; k < jobs.size(); ++k) {
    const Job& jb = jobs[k];
    const int64_t lt = clips[jb.clip].len, lh = ys.lengths[jb.i] / ps, lw = xs.lengths[jb.j] / ps;
    const int64_t s_tile = lt * lh * lw + cfg_.registers + 1;
    const bool joins =
        !batches.empty() && jobs[batches.back().first].clip == jb.clip && batches.back().t == lt &&
        batches.back().h == lh && batches.back().w == lw &&
        (batching_.max_batch_tiles == 0 || batches.back().count < static_cast<size_t>(batching_.max_batch_tiles)) &&
        (static_cast<int64_t>(batches.back().count) + 1) * s_tile <= batching_.max_batch_rows;
    if (joins) {
      ++batches.back().count;
    } else {
      batches.push_back(Batch{k, 1, lt, lh, lw, s_tile, total_rows});
    }
    total_rows += s_tile;
    max_rows = std::max<int64_t>(max_rows, static_cast<int64_t>(batches.back().count) * s_tile);
  }
  // y holds a clip's tiles: every tile of a clip has one token shape (split_tiles gives equal tile lengths).
  int64_t clip_rows = 0;
  for (const Clip& cl : clips)
    clip_rows =
        std::max<int64_t>(clip_rows, static_cast<int64_t>(ny) * nx *
                                         (cl.len * (ys.lengths[0] / ps) * (xs.lengths[0] / ps) + cfg_.registers + 1));
  for (int i = 0; i < ny; ++i)
    if (ys.lengths[static_cast<size_t>(i)] != ys.lengths[0])
      return internal_error("video VAE: tile rows of unequal height");
  for (int j = 0; j < nx; ++j)
    if (xs.lengths[static_cast<size_t>(j)] != xs.lengths[0])
      return internal_error("video VAE: tile columns of unequal width");
  if (ny > VideoStitchClip::kMaxTiles || nx > VideoStitchClip::kMaxTiles)
    return invalid_argument("video VAE: " + std::to_string(ny) + " x " + std::to_string(nx) +
                            " tiles per frame; at most " + std::to_string(VideoStitchClip::kMaxTiles) +
                            " per axis (raise the tile size)");
  VORTEX_RETURN_IF_ERROR(reserve(max_rows, clip_rows));
  VORTEX_RETURN_IF_ERROR(reserve_tokens(total_rows));
  // A batch's input rows [S, C] per tile (voxels in (t, h, w) order, channels last; the register / zero-token rows
  // stay 0 from reserve_tokens), gathered into the page-locked rows [row0, row0 + count * S) just before the batch is
  // queued (the backend runs the previous batches meanwhile) and uploaded in stream order. Each row of the host copy
  // is written once per decode, and a decode returns only after its last copy-out, so no upload reads a row that a
  // later gather rewrites.
  auto upload_batch = [&](const Batch& bt) -> Result<Tensor> {
    parallel_for_ranges(bt.count, threads, 1, [&](size_t q0, size_t q1) {
      for (size_t q = q0; q < q1; ++q) {
        const Job& jb = jobs[bt.first + q];
        const Clip& cl = clips[jb.clip];
        const int64_t y0 = ys.starts[jb.i] / ps, x0 = xs.starts[jb.j] / ps, zt = t + pad;
        float* dst = ws_->tokens_host.data<float>() + (bt.row0 + static_cast<int64_t>(q) * bt.s) * c;
        for (int64_t ti = 0; ti < bt.t; ++ti)
          for (int64_t y = 0; y < bt.h; ++y)
            for (int64_t x = 0; x < bt.w; ++x) {
              const int64_t row = (ti * bt.h + y) * bt.w + x;
              for (int64_t ch = 0; ch < c; ++ch)
                dst[row * c + ch] = z.data<float>()[((ch * zt + cl.start + ti) * h + y0 + y) * w + x0 + x];
            }
      }
    });
    const int64_t rows = static_cast<int64_t>(bt.count) * bt.s;
    VORTEX_ASSIGN_OR_RETURN(Tensor host, ws_->tokens_host.narrow(0, bt.row0, rows));  // [B * S, C] f32
    VORTEX_ASSIGN_OR_RETURN(Tensor dev, ws_->tokens_dev.narrow(0, bt.row0, rows));    // [B * S, C] f32
    VORTEX_RETURN_IF_ERROR(backend_.upload_async(host, dev));
    return dev;
  };
  // Stitch buffers for this output geometry: a clip's output frames (chunk 0) and cross-fade frames (chunk 1).
  const int64_t plane = static_cast<int64_t>(hp) * wp;
  int64_t n0_max = 0, n1_max = 0;
  for (const Clip& cl : clips) n0_max = std::max(n0_max, cl.fe0 - cl.f00), n1_max = std::max(n1_max, cl.fe1 - cl.f01);
  Workspace& ws = *ws_;
  if (ws.clip_elems < oc * n0_max * plane || ws.fade_elems < oc * n1_max * plane) {
    ws.clip_out = Tensor(), ws.fade[0] = Tensor(), ws.fade[1] = Tensor(), ws.fade_host = Tensor();
    ws.clip_host[0] = Tensor(), ws.clip_host[1] = Tensor();
    ws.bytes -= (ws.clip_elems + 2 * ws.fade_elems) * 4;
    ws.clip_elems = std::max<int64_t>(1, oc * n0_max * plane),
    ws.fade_elems = std::max<int64_t>(1, oc * n1_max * plane);
    VORTEX_ASSIGN_OR_RETURN(ws.clip_out, backend_.alloc({ws.clip_elems}, DType::kF32));
    for (Tensor& f : ws.fade) {
      VORTEX_ASSIGN_OR_RETURN(f, backend_.alloc({ws.fade_elems}, DType::kF32));
    }
    for (Tensor& hc : ws.clip_host) {
      VORTEX_ASSIGN_OR_RETURN(hc, backend_.alloc_host({ws.clip_elems}, DType::kF32));
    }
    VORTEX_ASSIGN_OR_RETURN(ws.fade_host, backend_.alloc_host({ws.fade_elems}, DType::kF32));
    ws.bytes += (ws.clip_elems + 2 * ws.fade_elems) * 4;
  }
  // [C, n, H, W] f32 view of the first elements of a flat stitch buffer.
  auto frames_view = [&](const Tensor& flat, int64_t n) -> Result<Tensor> {
    if (n == 0) return Tensor();
    return flat.as_strided({oc, n, hp, wp}, {n * plane, plane, wp, 1}, 0);
  };
  VideoStitchClip g;
  g.channels = oc, g.patch = ps, g.patch_t = static_cast<int>(ratio);
  g.tile_h = ys.lengths[0] / ps, g.tile_w = xs.lengths[0] / ps;
  g.ny = ny, g.nx = nx;
  for (int i = 0; i <= ny; ++i) g.y_off[i] = y_off[static_cast<size_t>(i)];
  for (int j = 0; j <= nx; ++j) g.x_off[j] = x_off[static_cast<size_t>(j)];
  for (int i = 1; i < ny; ++i) g.blend_y[i] = std::min(ys.lengths[0], ys.overlaps[static_cast<size_t>(i - 1)]);
  for (int j = 1; j < nx; ++j) g.blend_x[j] = std::min(xs.lengths[0], xs.overlaps[static_cast<size_t>(j - 1)]);

  const int64_t total = static_cast<int64_t>(jobs.size()), tiles_per_clip = static_cast<int64_t>(ny) * nx;
  int64_t final_frames = 0, emitted = 0;  // frames [0, final_frames) of `out` are written, [0, emitted) handed over
  auto emit = [&]() -> Status {
    if (!on_frames || final_frames <= emitted) return Status::Ok();
    VORTEX_RETURN_IF_ERROR(on_frames(out, emitted, final_frames));
    emitted = final_frames;
    return Status::Ok();
  };
  uint64_t ticket[2] = {0, 0}, fade_ticket = 0;
  // The frames of `out` that clip ci writes ([out_offset, + kept); the last clip also the closing cross-fade frames)
  // are touched once while the backend runs clip ci, so that moving them in later (the last clip's move is on the
  // critical path) does not take the page faults of fresh memory.
  auto prefault = [&](size_t ci) {
    const Clip& cl = clips[ci];
    const int64_t f0 = std::min(cl.out_offset, out_frames);
    const int64_t f1 = ci + 1 == clips.size() ? out_frames : std::min(out_frames, cl.out_offset + cl.fe0 - cl.f00);
    if (f1 <= f0) return;
    parallel_for_ranges(static_cast<size_t>(oc * (f1 - f0)), threads, 1, [&](size_t b0, size_t b1) {
      for (size_t cf = b0; cf < b1; ++cf) {
        const int64_t ch = static_cast<int64_t>(cf) / (f1 - f0), q = static_cast<int64_t>(cf) % (f1 - f0);
        std::memset(&out_at(static_cast<int>(ch), f0 + q, 0, 0), 0, static_cast<size_t>(plane) * sizeof(float));
      }
    });
  };
  // Clip ci's output frames are in clip_host[ci % 2] once its ticket passes: move the kept ones into `out`.
  auto finish = [&](size_t ci) -> Status {
    const Clip& cl = clips[ci];
    VORTEX_RETURN_IF_ERROR(backend_.wait_download(ticket[ci % 2]));
    const int64_t n0 = cl.fe0 - cl.f00, keep = std::max<int64_t>(0, std::min(n0, out_frames - cl.out_offset));
    const float* src = ws.clip_host[ci % 2].data<float>();
    parallel_for_ranges(static_cast<size_t>(oc * keep), threads, 1, [&](size_t b0, size_t b1) {
      for (size_t cf = b0; cf < b1; ++cf) {
        const int64_t ch = static_cast<int64_t>(cf) / keep, q = static_cast<int64_t>(cf) % keep;
        std::memcpy(&out_at(static_cast<int>(ch), cl.out_offset + q, 0, 0), src + (ch * n0 + q) * plane,
                    static_cast<size_t>(plane) * sizeof(float));
      }
    });
    final_frames = std::min<int64_t>(out_frames, cl.out_offset + n0);
    if (progress)  // the clip's tiles, one report each (they complete together: one stitch, one copy-out)
      for (int64_t k = static_cast<int64_t>(ci) * tiles_per_clip;
           k < std::min<int64_t>(total, static_cast<int64_t>(ci + 1) * tiles_per_clip); ++k)
        progress({"video", k + 1, total});
    return emit();
  };
  size_t bi = 0;
  for (size_t ci = 0; ci < clips.size(); ++ci) {
    const Clip& cl = clips[ci];
    const int64_t s_tile = cl.len * g.tile_h * g.tile_w + cfg_.registers + 1;
    // The clip's batches, each into its tiles' rows of y.
    for (; bi < batches.size() && jobs[batches[bi].first].clip == static_cast<int>(ci); ++bi) {
      const Batch& bt = batches[bi];
      const int64_t rows = static_cast<int64_t>(bt.count) * bt.s;
      const int64_t first = static_cast<int64_t>(bt.first) - static_cast<int64_t>(ci) * tiles_per_clip;
      VORTEX_ASSIGN_OR_RETURN(Tensor in, upload_batch(bt));
      VORTEX_ASSIGN_OR_RETURN(Tensor yb, ws.y.narrow(0, first * s_tile, rows));  // [B * S, pv] bf16
      VORTEX_RETURN_IF_ERROR(forward_batch(in, static_cast<int64_t>(bt.count), bt.t, bt.h, bt.w, yb));
    }
    g.tile_t = static_cast<int>(cl.len), g.rows_per_tile = s_tile;
    g.f00 = static_cast<int>(cl.f00), g.fe0 = static_cast<int>(cl.fe0);
    g.f01 = static_cast<int>(cl.f01), g.fe1 = static_cast<int>(cl.fe1);
    const int64_t n0 = cl.fe0 - cl.f00, n1 = cl.fe1 - cl.f01;
    const int64_t prev_n1 = ci > 0 ? clips[ci - 1].fe1 - clips[ci - 1].f01 : 0;
    g.cross_fade = static_cast<int>(ci > 0 ? std::min<int64_t>({prev_n1, n0, cfg_.frame_overlap()}) : 0);
    VORTEX_ASSIGN_OR_RETURN(Tensor yc, ws.y.narrow(0, 0, tiles_per_clip * s_tile));  // [ny * nx * S, pv] bf16
    VORTEX_ASSIGN_OR_RETURN(Tensor prev, frames_view(ws.fade[(ci + 1) % 2], prev_n1));
    VORTEX_ASSIGN_OR_RETURN(Tensor next, frames_view(ws.fade[ci % 2], n1));
    VORTEX_ASSIGN_OR_RETURN(Tensor clip_out, frames_view(ws.clip_out, n0));
    if (!clip_out.defined()) return internal_error("video VAE: clip " + std::to_string(ci) + " has no output frames");
    {
      BackendRegion reg(backend_, "vae.stitch");
      VORTEX_RETURN_IF_ERROR(
          backend_.video_stitch_clip(yc, g, prev, clip_out, next).with_context("video VAE clip " + std::to_string(ci)));
    }
    VORTEX_ASSIGN_OR_RETURN(Tensor host, frames_view(ws.clip_host[ci % 2], n0));
    {
      BackendRegion reg(backend_, "vae.copy_out");
      VORTEX_ASSIGN_OR_RETURN(ticket[ci % 2], backend_.download_async(clip_out, host));
      if (ci + 1 == clips.size() && drop > 0 && n1 > 0) {  // the closing cross-fade frames, behind the last clip's
        VORTEX_ASSIGN_OR_RETURN(Tensor fade_h, frames_view(ws.fade_host, n1));
        VORTEX_ASSIGN_OR_RETURN(fade_ticket, backend_.download_async(next, fade_h));
      }
    }
    if (ci > 0) VORTEX_RETURN_IF_ERROR(finish(ci - 1));
    prefault(ci);  // the backend runs clip ci meanwhile
  }
  VORTEX_RETURN_IF_ERROR(finish(clips.size() - 1));
  const int64_t last_n1 = clips.back().fe1 - clips.back().f01;
  if (drop > 0 && last_n1 > 0) {  // the last clip's cross-fade frames close the video
    const int64_t base = clips.back().out_offset + (clips.back().fe0 - clips.back().f00);
    const int64_t keep = std::max<int64_t>(0, std::min(last_n1, out_frames - base));
    VORTEX_RETURN_IF_ERROR(backend_.wait_download(fade_ticket));
    if (keep > 0) {
      const float* fade_h = ws.fade_host.data<float>();  // [C, n1, H, W] f32
      for (int ch = 0; ch < oc; ++ch)
        std::memcpy(&out_at(ch, base, 0, 0), fade_h + ch * last_n1 * plane,
                    static_cast<size_t>(keep * plane) * sizeof(float));
    }
  }
  final_frames = out_frames;
  VORTEX_RETURN_IF_ERROR(emit());
  return out;
}

Result<Tensor> video_to_rgb8(const Tensor& decoded) {
  if (!decoded.defined() || decoded.ndim() != 4)
    return invalid_argument("video_to_rgb8: expected a contiguous [3, F, H, W] f32 tensor, got " +
                            (decoded.defined() ? decoded.describe() : std::string("nothing")));
  return video_to_rgb8(decoded, 0, decoded.dim(1), 1);
}

Result<Tensor> video_to_rgb8(const Tensor& decoded, int64_t begin, int64_t end, int threads) {
  if (!decoded.defined() || decoded.ndim() != 4 || decoded.dim(0) != 3 || decoded.dtype() != DType::kF32 ||
      !decoded.is_contiguous())
    return invalid_argument("video_to_rgb8: expected a contiguous [3, F, H, W] f32 tensor, got " +
                            (decoded.defined() ? decoded.describe() : std::string("nothing")));
  const int64_t f = decoded.dim(1), h = decoded.dim(2), w = decoded.dim(3), plane = f * h * w, fp = h * w;
  if (begin < 0 || end > f || begin > end)
    return invalid_argument("video_to_rgb8: frames [" + std::to_string(begin) + ", " + std::to_string(end) +
                            ") are outside the " + std::to_string(f) + " decoded frames");
  Tensor out = Tensor::empty({end - begin, h, w, 3}, DType::kU8);
  const float* src = decoded.data<float>();
  uint8_t* dst = out.data<uint8_t>();
  parallel_for_ranges(static_cast<size_t>(end - begin), std::max(1, threads), 1, [&](size_t b0, size_t b1) {
    for (size_t fi = b0; fi < b1; ++fi)
      for (int ch = 0; ch < 3; ++ch) {
        const float* s = src + ch * plane + (begin + static_cast<int64_t>(fi)) * fp;
        uint8_t* d = dst + static_cast<int64_t>(fi) * fp * 3;
        for (int64_t i = 0; i < fp; ++i) {
          volatile float sv = s[i] * kImagenetStd[ch];
          float v = sv + kImagenetMean[ch];
          v = std::isnan(v) ? 0.0f : std::min(1.0f, std::max(0.0f, v));
          volatile float s255 = v * 255.0f;
          d[i * 3 + ch] = static_cast<uint8_t>(std::nearbyint(static_cast<float>(s255)));  // ties to even
        }
      }
  });
  return out;
}

}  // namespace vortex
