// H3's audio VAE encoder (diffusers AutoencoderKLMiniMaxH3Audio.encode, posterior mode), the FP32 CPU reference:
// the DAC waveform encoder (weight-normed conv1d, Snake1d activations, residual units at dilations 1/3/9, strided
// channel-doubling convolutions), pre_block (causal attention whose heads are mean-pooled and adaptively average-
// pooled to latent_channels, plus a GeGLU MLP) and mean_proj; and the Ref2VA soundtrack rows of
// MiniMaxH3Ref2VAReferenceEncoderStep (stereo as a batch of two, latents_mean/std, channel-major rows). The same
// program also runs on a Backend (src/backend/vae_ops.h: conv1d, conv1d_strided, snake, add, layer_norm_channels,
// pooled_causal_attention, gelu_tanh_mul), with channel-major [B, C, L] activations.
// Tested in tests/vae/audio_vae_encoder_test.cpp against diffusers (tests/vae/make_audio_encoder_fixtures.py) and,
// on CUDA, tests/vae/audio_vae_encoder_cuda_test.cpp.
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
  // backend != nullptr: the weights are uploaded to it and every encode runs its ops (it must outlive the encoder).
  // Each op is one FP64 evaluation rounded to FP32, the CPU reference's program: on the cpu backend the result is
  // the reference's byte for byte; on CUDA it differs only where libdevice's FP64 sin / tanh / exp round to another
  // FP32 value. backend == nullptr: the FP32 CPU reference.
  static Result<AudioVaeEncoder> load(const std::string& dir, Backend* backend);
  static Result<AudioVaeEncoder> from_source(const AudioVaeEncoderConfig& config, const VaeTensorSource& source,
                                             Backend* backend);

  const AudioVaeEncoderConfig& config() const { return config_; }
  Backend* backend() const { return backend_; }

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

  // The Backend program's weights (1x1 convolutions stand for the linears: [O, I, 1]).
  struct DeviceConv {
    Tensor weight, bias;  // [Co, Ci, K], [Co] f32 on the backend
    int stride = 1, padding = 0, dilation = 1;
  };
  struct DeviceNorm {
    Tensor weight, bias;  // [D] f32 on the backend
  };
  struct DeviceResidual {
    Tensor alpha1, alpha2;
    DeviceConv conv1, conv2;
  };
  struct DeviceBlock {
    std::vector<DeviceResidual> units;
    Tensor alpha;
    DeviceConv down;
  };
  struct DeviceWeights {
    DeviceConv conv_in, conv_out, mean_proj, proj, qkv, attn_proj, w0, w1, w2;
    std::vector<DeviceBlock> blocks;
    Tensor alpha_out;
    DeviceNorm norm1, norm2, norm3, mlp_norm;
  };
  Backend* backend_ = nullptr;
  std::shared_ptr<const DeviceWeights> device_;
  Status upload_weights();
  Result<Tensor> encode_backend(const Tensor& waveforms) const;  // [B, C, T] host f32
};

}  // namespace vortex
