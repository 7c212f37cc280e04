// H3's audio VAE encoder (diffusers AutoencoderKLMiniMaxH3Audio.encode, posterior mode), the FP32 CPU reference:
// the DAC waveform encoder (weight-normed conv1d, Snake1d activations, residual units at dilations 1/3/9, strided
// channel-doubling convolutions), pre_block (causal attention whose heads are mean-pooled and adaptively average-
// pooled to latent_channels, plus a GeGLU MLP) and mean_proj; and the Ref2VA soundtrack rows of
// MiniMaxH3Ref2VAReferenceEncoderStep (stereo as a batch of two, latents_mean/std, channel-major rows).
// Tested in tests/vae/audio_vae_encoder_test.cpp against diffusers (tests/vae/make_audio_encoder_fixtures.py).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "vae/vae_checkpoint.h"
#include "vortex/status.h"
#include "vortex/tensor.h"

namespace vortex {

struct AudioVaeEncoderConfig {
  int encoder_dim = 64;
  std::vector<int> encoder_rates = {2, 4, 4, 5, 5};
  int latent_dim = 2048;
  int latent_channels = 32;
  int num_attention_heads = 8;
  int sampling_rate = 32000;
  std::vector<float> latents_mean = std::vector<float>(32, 0.0f);
  std::vector<float> latents_std = std::vector<float>(32, 1.0f);

  int hop() const;  // samples per latent frame: prod(encoder_rates) (800 released)
  Status validate() const;
  // diffusers audio_vae/config.json keys (missing keys keep the released values).
  static Result<AudioVaeEncoderConfig> from_json(const ConfigJson& cfg);
};

class AudioVaeEncoder {
 public:
  // The diffusers layout (the snapshot's top-level audio_vae/ folder). The original layout (FL2VA/audio_vae,
  // Ref2VA/audio_vae) is refused with a message naming the folder to pass.
  static Result<AudioVaeEncoder> load(const std::string& dir);
  static Result<AudioVaeEncoder> from_source(const AudioVaeEncoderConfig& config, const VaeTensorSource& source);

  const AudioVaeEncoderConfig& config() const { return config_; }

  // encode(x[:, None]).latent_dist.mode(): waveforms [B, N] f32 (N >= 1) -> posterior mean [B, C, ceil(N / hop)],
  // each waveform right-padded with zeros to a whole hop first.
  Result<Tensor> encode_mean(const Tensor& waveforms) const;

  // The Ref2VA reference step's rows for one soundtrack: stereo [2, N] f32 at sampling_rate -> [2 * T, C] f32,
  // ((mean^T - latents_mean) / latents_std), the left channel's T rows then the right's.
  Result<Tensor> encode_condition(const Tensor& stereo) const;

 private:
  struct Conv {
    Tensor weight;  // [Co, Ci, K] f32 (weight norm folded)
    Tensor bias;    // [Co] f32
    int stride = 1, padding = 0, dilation = 1;
  };
  struct Linear {
    Tensor weight;  // [O, I] f32
    Tensor bias;    // [O] f32
  };
  struct Norm {
    Tensor weight, bias;  // [D] f32
  };
  struct Residual {
    Tensor alpha1, alpha2;  // Snake1d [C]
    Conv conv1, conv2;      // k7 dilated, k1
  };
  struct Block {
    std::vector<Residual> units;  // dilations 1, 3, 9
    Tensor alpha;                 // Snake1d before the strided conv
    Conv down;                    // k = 2 * stride, padding ceil(stride / 2)
  };
  AudioVaeEncoderConfig config_;
  Conv conv_in_, conv_out_, mean_proj_;
  std::vector<Block> blocks_;
  Tensor alpha_out_;
  // pre_block
  Norm norm1_, norm2_, norm3_, mlp_norm_;
  Tensor qkv_weight_, q_bias_, v_bias_;  // [3D, D], [D], [D]
  Linear attn_proj_, proj_, w0_, w1_, w2_;

  Result<Tensor> encode_one(const float* samples, int64_t n) const;  // [C, T]
};

}  // namespace vortex
