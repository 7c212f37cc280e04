// H3's video VAE encoder (diffusers AutoencoderKLMiniMaxH3.encode + encode_vae_condition), the FP32 CPU
// reference: causal 3D CNN (MiniMaxH3VideoEncoder3d: reflect-padded causal conv3d, per-frame GroupNorm, SiLU,
// ResNet blocks, strided downsampling), quant_conv, the released spatial tiling with linear blends in latent
// space, the 17-frame temporal clips with token_drop, and the conditioning recipe: ImageNet-normalized pixels,
// the posterior sampled under torch's CPU generator seeded 42, rounded to float16, then latents_mean/std.
// Weights: the diffusers layout's encoder.* and quant_conv.* keys. Tested in
// tests/vae/video_vae_encoder_test.cpp against diffusers fixtures (tests/vae/make_vae_encoder_fixtures.py).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "vae/vae_checkpoint.h"
#include "vortex/status.h"
#include "vortex/tensor.h"

namespace vortex {

struct VideoVaeEncoderConfig {
  int in_channels = 3;
  int latent_channels = 24;
  std::vector<int> block_out_channels = {128, 256, 256, 512, 512, 1024};
  int layers_per_block = 2;
  std::vector<int> spatial_down = {2, 2, 2, 2, 1, 1};
  std::vector<int> temporal_down = {1, 2, 2, 1, 1, 1};
  int groups = 32;
  float eps = 1e-6f;
  int clip_length = 17;
  int token_drop = 3;
  std::vector<float> latents_mean = std::vector<float>(24, 0.0f);
  std::vector<float> latents_std = std::vector<float>(24, 1.0f);
  // Spatial tiling as released (use_tiling = True, 256 px tiles, >= 64 px overlap).
  bool tiling = true;
  int tile = 256, tile_overlap = 64;
  // The backend path (not a config.json key): conv3d may round its operands to TF32 on the device, as torch does
  // for cuDNN convolutions of FP32 tensors by default (torch.backends.cudnn.allow_tf32 = True). false: FP32 FMA math.
  bool device_tf32 = true;

  int spatial_ratio() const;
  int temporal_ratio() const;
  Status validate() const;
  // diffusers config.json keys (missing keys keep the released values).
  static Result<VideoVaeEncoderConfig> from_json(const ConfigJson& cfg);
};

class VideoVaeEncoder {
 public:
  // The diffusers layout (the snapshot's vae/ folder, or save_pretrained). The original layout
  // (FL2VA/video_vae) is refused with a message saying which folder to pass.
  // backend != nullptr: the encoder runs on that backend (it must outlive the encoder); nullptr: the FP32 CPU
  // reference. The backend program is diffusers' (the encoder and quant_conv are pinned to FP32 by
  // _keep_in_fp32_modules, whatever the pipeline's dtype): FP32 activations channels-last, conv3d with FP32
  // accumulation (TF32 operands on CUDA unless device_tf32 is false), GroupNorm with FP64 statistics. A single frame
  // runs each causal convolution as its last temporal tap alone (the taps over the two causal zero frames add
  // exact zeros in the reference and are skipped); tiles of one clip run as one batch. Tiling, blending, clips and
  // the posterior sample stay on the host, the noise from torch_cpu_randn. Tested in
  // tests/vae/video_vae_encoder_test.cpp (cpu backend) and tests/vae/video_vae_encoder_cuda_test.cpp.
  static Result<VideoVaeEncoder> load(const std::string& vae_dir, Backend* backend = nullptr);
  static Result<VideoVaeEncoder> from_source(const VideoVaeEncoderConfig& config, const VaeTensorSource& source,
                                             Backend* backend = nullptr);
  Backend* backend() const { return backend_; }

  const VideoVaeEncoderConfig& config() const { return config_; }
  VideoVaeEncoderConfig& mutable_config() { return config_; }

  // vae.encode(x).latent_dist.parameters: x [3, F, H, W] f32 ImageNet-normalized pixels -> [2C, T, h, w].
  // One frame goes through the (tiled) spatial encoder alone; more frames in clip_length clips, the last frame
  // repeated up to a whole clip, token_drop trailing latent frames dropped.
  Result<Tensor> moments(const Tensor& x) const;

  // encode_vae_condition: u8 pixels [3, F, H, W] -> normalized conditioning latents [C, T, h, w] f32.
  Result<Tensor> encode_condition(const Tensor& pixels_u8, uint64_t seed = 42) const;

 private:
  struct Conv {
    Tensor weight;  // [Co, Ci, kt, kh, kw] f32
    Tensor bias;    // [Co] f32
  };
  struct Norm {
    Tensor weight, bias;  // [C] f32
  };
  struct Resnet {
    Norm norm1, norm2;
    Conv conv1, conv2, shortcut;  // shortcut undefined when channels do not change
  };
  struct Level {
    std::vector<Resnet> resnets;
    Conv down;  // undefined without downsampling
    int spatial = 1, temporal = 1;
  };
  VideoVaeEncoderConfig config_;
  Conv conv_in_, conv_out_, quant_conv_;
  std::vector<Level> levels_;
  Norm norm_out_;
  // The backend's copies: every convolution channels-last [Co, kt, kh, kw, Ci] f32, and its last temporal tap
  // [Co, 1, kh, kw, Ci] (single frames); norms [C] f32.
  struct DeviceConv {
    Tensor full, last, bias;
  };
  struct DeviceResnet {
    Norm norm1, norm2;
    DeviceConv conv1, conv2, shortcut;  // shortcut.full undefined when channels do not change
  };
  struct DeviceLevel {
    std::vector<DeviceResnet> resnets;
    DeviceConv down;
    int spatial = 1, temporal = 1;
  };
  struct DeviceWeights {
    DeviceConv conv_in, conv_out, quant_conv;
    std::vector<DeviceLevel> levels;
    Norm norm_out;
  };
  Backend* backend_ = nullptr;
  std::shared_ptr<const DeviceWeights> device_;

  Result<Tensor> encode_clip(const Tensor& x) const;  // tiled
  Result<Tensor> encode_tile(const Tensor& x) const;  // quant_conv(encoder(x))
  // quant_conv(encoder(tile)) of each [3, T, h, w] tile (all the same shape): encode_tile on the CPU reference,
  // batched on the backend.
  Result<std::vector<Tensor>> encode_tiles(const std::vector<Tensor>& tiles) const;
  // The backend forward of a channels-last batch x [B, T, H, W, 3] -> [B, T', h, w, 2C].
  Result<Tensor> encode_batch_device(const Tensor& x) const;
};

// torch.randn(n, generator=torch.Generator().manual_seed(seed)) on the CPU, float32, bit for bit: mt19937,
// 24-bit uniforms, Box-Muller over blocks of 16 (the last block redrawn when n is not a multiple of 16) with
// avx_mathfun's Cephes log and sincos, as ATen's AVX2 normal_fill computes it for a contiguous float tensor
// of n >= 16 elements (the kernel x86 CPUs with AVX2 or AVX-512 run). n < 16 is not this algorithm in torch.
std::vector<float> torch_cpu_randn(uint64_t seed, size_t n);

// IEEE binary16 round to nearest even, back to float (torch's .to(torch.float16).float()).
float round_to_f16(float x);

}  // namespace vortex
