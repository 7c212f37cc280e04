// H3's video VAE decoder ("f16t4d24", diffusers AutoencoderKLMiniMaxH3.decode): latent de-normalization,
// post_quant_conv, the non-causal ViT decoder (registers + one zero token, 3-axis partial RoPE, QK-norm,
// SwiGLU, LayerScale residuals), unpatchify, the released spatial tiling with linear blends (on by default)
// and the temporal clips of 5 + 2 latent frames cross-faded over 5 pixel frames. Written once against the
// Backend; the numerical program (BF16 activations, FP32 residual stream and pinned modules) is
// docs/numerics.md "VAE decoders". Weights are named after the checkpoint keys (decoder.*, post_quant_conv.*).
// Tested in tests/vae/vae_parity_test.cpp (diffusers fixtures: PSNR, uint8 agreement) and
// tests/vae/vae_loader_test.cpp (tiling geometry, errors).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "vae/vae_checkpoint.h"
#include "vortex/status.h"
#include "vortex/tensor.h"

namespace vortex {

struct VideoVaeConfig {
  int latent_channels = 24;
  int out_channels = 3;
  int patch = 16;   // prod(spatial_downsample_factors): pixels per latent along H and W
  int patch_t = 4;  // prod(temporal_downsample_factors)
  int num_layers = 36;
  int heads = 32;
  int head_dim = 64;
  int registers = 4;
  int ffn_mult = 4;
  float rope_theta = 100.0f;
  float rope_dim_ratio = 0.75f;
  float norm_eps = 1e-5f;
  int clip_length = 17;
  int token_drop = 3;
  std::vector<float> latents_mean = std::vector<float>(24, 0.0f);
  std::vector<float> latents_std = std::vector<float>(24, 1.0f);
  // Spatial tiling as released (AutoencoderKLMiniMaxH3: use_tiling = True, 256 px tiles, >= 64 px overlap).
  bool tiling = true;
  int tile = 256, tile_overlap = 64;

  int dim() const { return heads * head_dim; }
  int ffn_dim() const { return dim() * ffn_mult; }
  int rope_dims() const { return static_cast<int>(head_dim * rope_dim_ratio); }
  int patch_values() const { return out_channels * patch_t * patch * patch; }  // proj_out width
  int frame_pre_padding() const { return ((-clip_length) % patch_t + patch_t) % patch_t; }
  int tokens_chunk_size() const { return (clip_length + patch_t - 1) / patch_t; }
  int token_overlap() const {
    int c = tokens_chunk_size();
    return ((-token_drop) % c + c) % c;
  }
  int frame_overlap() const { return std::max(token_overlap() * patch_t - frame_pre_padding(), 0); }

  Status validate() const;
  // diffusers config.json keys (missing keys keep the released values).
  static Result<VideoVaeConfig> from_json(const ConfigJson& cfg);
  // The official original layout: the MiniMaxH3VideoVAE wrapper config.json (latent normalization, clip and
  // tile geometry) and source/config.json (AutoencoderKLLegacy: vit_decoder_kwargs, space_down, time_down).
  static Result<VideoVaeConfig> from_original_json(const ConfigJson& wrapper, const ConfigJson& source);
  static VideoVaeConfig full();  // the released decoder (~2.4B parameters)
  static VideoVaeConfig tiny();  // released geometry, 2 layers of width 32 (demos, CLI tests)
};

// One ViT block: decoder.transformer_blocks.{i}.*
struct VideoVaeBlockWeights {
  Tensor norm1_weight;         // [D] f32
  LinearWeight attn_qkv;       // [3I, D] bf16: attn.to_q | to_k | to_v rows, fused at load
  Tensor attn_qkv_bias;        // [3I] bf16
  LinearWeight attn_to_out_0;  // [D, I] bf16
  Tensor attn_to_out_0_bias;   // [D] bf16
  Tensor scale1;               // [D] f32
  Tensor norm2_weight;         // [D] f32
  LinearWeight ff_net_0_proj;  // [2F, D] bf16, rows [gate | value] (the file stores [value | gate])
  Tensor ff_net_0_proj_bias;   // [2F] bf16, same order
  LinearWeight ff_net_2;       // [D, F] bf16
  Tensor ff_net_2_bias;        // [D] bf16
  Tensor scale2;               // [D] f32
};

struct VideoVaeWeights {
  LinearWeight post_quant_conv;    // [C, C] f32 (a 1x1x1 Conv3d)
  Tensor post_quant_conv_bias;     // [C] f32
  LinearWeight decoder_proj_in;    // [D, C] f32
  Tensor decoder_proj_in_bias;     // [D] f32
  Tensor decoder_register_tokens;  // [R, D] f32
  std::vector<VideoVaeBlockWeights> blocks;
  Tensor decoder_norm_out_weight;  // [D] f32
  Tensor decoder_norm_out_bias;    // [D] f32
  LinearWeight decoder_proj_out;   // [3 * pt * p * p, D] bf16
  Tensor decoder_proj_out_bias;    // [3 * pt * p * p] bf16
  Tensor zero_token;               // [1, D] f32 zeros (the appended all-zero token)
  Tensor qk_norm_ones;             // [head_dim] bf16 ones (norm_q / norm_k have no weight)
};

// Pixel-space tile layout of one axis (AutoencoderKLMiniMaxH3._split_tiles).
struct TileSplit {
  std::vector<int> starts, lengths, overlaps;
};
TileSplit split_tiles(int length, int tile, int min_overlap, int ratio);

struct VaeProgress {
  std::string stage;            // "video" | "audio"
  int64_t done = 0, total = 0;  // tile forwards (video) or stereo channels (audio)
};
using VaeProgressFn = std::function<void(const VaeProgress&)>;
// decode() calls it with its output [3, F, H, W] f32 each time frames [begin, end) are final (after each clip, in
// order, covering [0, F) once). decode() never writes those frames again, so the callee, or a thread it hands
// them to, may read them while the decode goes on (the tensor lives on in decode's result). An error stops the
// decode.
using VideoFramesFn = std::function<Status(const Tensor& video, int64_t begin, int64_t end)>;

// How the ViT blocks' four linear layers (to_qkv, to_out, ff.net.0, ff.net.2) are stored and multiplied: BF16 (the
// default program, docs/numerics.md "VAE decoders"), or, opt-in and E2, FP8 E4M3 with a scale per 128x128 weight
// block and per 1x128 activation block (cuBLASLt FP8 on sm_90; the CUDA backend only). The stem, the head and the
// attention stay as in the default program.
enum class VideoVaeLinears : uint8_t { kBf16, kFp8Blockwise };
const char* video_vae_linears_name(VideoVaeLinears linears);  // "bf16" | "fp8-blockwise"

class VideoVae {
 public:
  ~VideoVae();
  // Loads a VAE folder in the diffusers layout (config.json + diffusion_pytorch_model.safetensors[.index.json])
  // or the official original one (FL2VA/video_vae: config.json + source/config.json + source/model.safetensors);
  // the encoder's tensors are not read. Every decoder tensor is checked by name and shape, and a tensor
  // nothing reads is an error.
  static Result<std::unique_ptr<VideoVae>> load(const std::string& dir, Backend& backend,
                                                VideoVaeLinears linears = VideoVaeLinears::kBf16);
  // Deterministic synthetic weights with the real names and shapes (for demos and benchmarks).
  // The tensor source of synthetic(): every weight by name, deterministic in `seed` (vortex synth --snapshot tiny
  // writes its tensors into a VAE folder).
  static VaeTensorSource synthetic_source(uint64_t seed);
  static Result<std::unique_ptr<VideoVae>> synthetic(const VideoVaeConfig& cfg, Backend& backend, uint64_t seed,
                                                     VideoVaeLinears linears = VideoVaeLinears::kBf16);
  // Builds from any tensor source (the loader and the synthetic path both come through here). kFp8Blockwise on a
  // backend other than cuda is kUnsupported (checked before any weight is read).
  static Result<std::unique_ptr<VideoVae>> from_source(const VideoVaeConfig& cfg, const VaeTensorSource& src,
                                                       Backend& backend,
                                                       VideoVaeLinears linears = VideoVaeLinears::kBf16);

  const VideoVaeConfig& config() const { return cfg_; }
  VideoVaeConfig& mutable_config() { return cfg_; }  // tiling switches only
  int64_t parameter_count() const { return params_; }
  VideoVaeLinears linears() const { return linears_; }
  VaeLayout layout() const { return layout_; }  // of the folder loaded (kDiffusers for synthetic weights)

  // Checks a [C, T, H, W] f32 host tensor of normalized latents: shape, finiteness, decodable T.
  Status check_latents(const Tensor& latents) const;
  // Output frames of T latent frames (0 when T cannot be decoded).
  int64_t frames_for(int64_t latent_frames) const;
  // Tile forwards a decode of `latents` runs (for progress).
  int64_t tile_forwards(const Shape& latent_shape) const;
  // Normalized latents [C, T, H, W] f32 host -> ImageNet-space video [3, F, H * p, W * p] f32 host.
  Result<Tensor> decode(const Tensor& latents, const VaeProgressFn& progress = nullptr,
                        const VideoFramesFn& on_frames = nullptr);
  // One ViT forward: de-normalized latents [C, t, h, w] f32 host -> [3, t * pt, h * p, w * p] f32 host.
  Result<Tensor> decode_tile(const Tensor& z);

  // How decode() batches its tile forwards: consecutive tiles of one clip (one token shape) run as one
  // forward of up to max_batch_tiles tiles (0: no limit) and max_batch_rows token rows, so the GEMMs see
  // M = tiles * S rows; batched_attention: attention through Backend::attention_batched (one batched call on
  // CUDA) instead of one attention() per tile; fused_residual_norm: each LayerScale residual and the RMSNorm after
  // it in one op (Backend::scale_add_rms_norm_fp32) instead of two. Every setting gives the same bytes on the CPU
  // backend, and the fused and unfused ops give the same bytes on CUDA. policy_attention: the attention program the
  // backend's policy names (the owned sm_90a BF16 kernel on the H200, src/cuda/attention/bf16_attention.h) instead of
  // SDPA (cuDNN); both are E1 realizations of one BF16 program.
  struct Batching {
    int max_batch_tiles = 0;
    int64_t max_batch_rows = 65536;
    bool batched_attention = true;
    bool fused_residual_norm = true;
    bool policy_attention = true;
  };
  const Batching& batching() const { return batching_; }
  Status set_batching(const Batching& b);
  // Device memory of the activation workspace reserved by the last decode (bytes).
  int64_t workspace_bytes() const;

 private:
  struct Workspace;
  VideoVae(VideoVaeConfig cfg, Backend& backend);
  // Device activations for batches of up to `rows` token rows and an output buffer y of `y_rows` rows (one clip's
  // tiles), kept and reused; grown only for a larger batch or clip.
  Status reserve(int64_t rows, int64_t y_rows);
  // The page-locked host and device token rows of a decode (at least `rows` of them), kept and reused; the host rows
  // start as zeros (the register / zero-token rows are never written).
  Status reserve_tokens(int64_t rows);
  // The BF16 cos/sin tables of `batch` stacked t x h x w tiles ([batch * S, rope_dims / 2]), built once per shape.
  Result<const RopeTables*> rope_for(int64_t t, int64_t h, int64_t w, int64_t batch);
  // Queues one ViT forward of `batch` tiles of t x h x w tokens whose input rows are `tokens` [batch * S, C] f32
  // on the device (tile b's voxels in rows [b * S, b * S + t * h * w); the register and zero-token rows are
  // overwritten); `y` [batch * S, 3 * pt * p * p] bf16 (rows of the workspace's y) gets the output. No host
  // synchronization.
  Status forward_batch(const Tensor& tokens, int64_t batch, int64_t t, int64_t h, int64_t w, Tensor& y);

  VideoVaeConfig cfg_;
  Backend& backend_;
  VideoVaeWeights w_;
  int64_t params_ = 0;
  std::unique_ptr<Workspace> ws_;
  std::map<std::array<int64_t, 4>, RopeTables> rope_cache_;
  Batching batching_;
  VaeLayout layout_ = VaeLayout::kDiffusers;
  VideoVaeLinears linears_ = VideoVaeLinears::kBf16;
};

// ImageNet de-normalization, clamp and 8-bit conversion (MiniMaxH3VideoDecodeStep + VideoProcessor):
// v = clamp(fp32(fp32(x * std_c) + mean_c), 0, 1), u8 = round_half_even(fp32(v * 255)).
// decoded [3, F, H, W] f32 -> frames [F, H, W, 3] u8 (interleaved RGB, what the encoder and PNGs receive).
Result<Tensor> video_to_rgb8(const Tensor& decoded);
// Frames [begin, end) of `decoded` only -> [end - begin, H, W, 3] u8 (the same bytes as video_to_rgb8's rows),
// over `threads` threads.
Result<Tensor> video_to_rgb8(const Tensor& decoded, int64_t begin, int64_t end, int threads = 1);

}  // namespace vortex
