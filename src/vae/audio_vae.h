// H3's audio VAE decoder (diffusers AutoencoderKLMiniMaxH3Audio.decode): both stereo channels in one pass, latent
// de-normalization, dec_in_proj (1x1 conv), then BigVGAN: conv_pre, transposed-conv upsamplers, AMP blocks of
// anti-aliased SnakeBeta activations (2x Kaiser-sinc up/down sampling around each activation), the mean over the
// parallel resblocks, activation_post, conv_post (no bias) and a clamp to [-1, 1]. FP32 throughout, as diffusers
// pins it (docs/numerics.md "VAE decoders"; convolutions accumulate in FP32: conv1d_fp32). Weight-norm (weight_g,
// weight_v) is folded at load in FP64. Weights are named after the checkpoint keys (dec_in_proj.*, decoder.*). Tested
// in tests/vae/vae_parity_test.cpp (AudioParity) and tests/vae/vae_loader_test.cpp.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "vae/vae_checkpoint.h"
#include "vae/video_vae.h"
#include "vortex/status.h"
#include "vortex/tensor.h"

namespace vortex {

struct AudioVaeConfig {
  int latent_channels = 32;
  int latent_dim = 2048;
  int decoder_dim = 1024;
  std::vector<int> decoder_rates = {5, 5, 2, 2, 2, 2, 2};
  std::vector<int> decoder_kernel_sizes = {9, 9, 4, 4, 4, 4, 4};
  std::vector<int> resblock_kernel_sizes = {3, 7, 11};
  std::vector<std::vector<int>> resblock_dilation_sizes = {{1, 3, 5}, {1, 3, 5}, {1, 3, 5}};
  int sampling_rate = 32000;
  std::vector<float> latents_mean = std::vector<float>(32, 0.0f);
  std::vector<float> latents_std = std::vector<float>(32, 1.0f);
  // Anti-aliased activation (MiniMaxH3AudioActivation1d defaults): 2x resampling, 12-tap Kaiser-sinc.
  int act_ratio = 2, act_kernel = 12;

  int hop() const;  // samples per latent frame: prod(decoder_rates)
  Status validate() const;
  static Result<AudioVaeConfig> from_json(const ConfigJson& cfg);
  // The official original layout: the MiniMaxH3AudioVAE wrapper config.json and metadata.json's kwargs.
  static Result<AudioVaeConfig> from_original_json(const ConfigJson& wrapper, const ConfigJson& kwargs);
  static AudioVaeConfig full();  // the released decoder (~65M parameters)
  static AudioVaeConfig tiny();  // released rates and channels, narrow widths (demos, CLI tests)
};

// kaiser_sinc_filter1d(cutoff, half_width, kernel_size) of alias-free-torch, in FP64 rounded to FP32 [K].
std::vector<float> kaiser_sinc_filter(double cutoff, double half_width, int kernel_size);

struct AudioVaeActivationWeights {   // *.activations.{i} / decoder.activation_post
  Tensor act_alpha, act_beta;        // [C] f32, log-space
  Tensor upsample_filter;            // [K] f32
  Tensor downsample_lowpass_filter;  // [K] f32
};

struct AudioVaeAmpBlockWeights {  // decoder.resblocks.{i}
  int kernel = 3;
  std::vector<int> dilations;
  std::vector<Tensor> convs1_weight, convs1_bias;  // [C, C, K] f32 (weight-norm folded), [C]
  std::vector<Tensor> convs2_weight, convs2_bias;
  std::vector<AudioVaeActivationWeights> activations;  // 2 per dilation: before convs1[i], before convs2[i]
};

struct AudioVaeWeights {
  Tensor dec_in_proj_weight, dec_in_proj_bias;               // [latent_dim, C, 1], [latent_dim]
  Tensor decoder_conv_pre_weight, decoder_conv_pre_bias;     // [D0, latent_dim, 7], [D0]
  std::vector<Tensor> decoder_ups_weight, decoder_ups_bias;  // ups.{i}.0: [Ci, Ci / 2, K], [Ci / 2]
  std::vector<AudioVaeAmpBlockWeights> decoder_resblocks;
  AudioVaeActivationWeights decoder_activation_post;
  Tensor decoder_conv_post_weight;  // [1, C_last, 7], no bias
};

class AudioVae {
 public:
  // Loads a VAE folder in the diffusers layout or the official original one (FL2VA/audio_vae: config.json +
  // metadata.json + model.safetensors); checked as VideoVae::load checks.
  static Result<std::unique_ptr<AudioVae>> load(const std::string& dir, Backend& backend);
  // The tensor source of synthetic(): every weight by name, deterministic in `seed` (vortex synth --snapshot tiny
  // writes its tensors into a VAE folder).
  static VaeTensorSource synthetic_source(uint64_t seed);
  static Result<std::unique_ptr<AudioVae>> synthetic(const AudioVaeConfig& cfg, Backend& backend, uint64_t seed);
  // compute_filters: build the Kaiser-sinc filters instead of reading the `filter` buffers.
  static Result<std::unique_ptr<AudioVae>> from_source(const AudioVaeConfig& cfg, const VaeTensorSource& src,
                                                       Backend& backend, bool compute_filters);

  const AudioVaeConfig& config() const { return cfg_; }
  int64_t parameter_count() const { return params_; }
  VaeLayout layout() const { return layout_; }  // of the folder loaded (kDiffusers for synthetic weights)
  // [2, C, Ta] f32 host, finite, Ta >= 1.
  Status check_latents(const Tensor& latents) const;
  // Normalized latents [B, C, Ta] -> waveform [B, Ta * hop] f32 host in [-1, 1] (B = 2: left, right).
  Result<Tensor> decode(const Tensor& latents, const VaeProgressFn& progress = nullptr);

 private:
  AudioVae(AudioVaeConfig cfg, Backend& backend) : cfg_(std::move(cfg)), backend_(backend) {}
  Result<Tensor> activation(const Tensor& x, const AudioVaeActivationWeights& a);
  Result<Tensor> amp_block(const Tensor& x, const AudioVaeAmpBlockWeights& b);

  AudioVaeConfig cfg_;
  Backend& backend_;
  AudioVaeWeights w_;
  int64_t params_ = 0;
  VaeLayout layout_ = VaeLayout::kDiffusers;
};

}  // namespace vortex
