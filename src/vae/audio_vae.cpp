// Audio VAE decoder (see audio_vae.h): the BigVGAN forward on the Backend, both stereo channels in one pass
// ([B, C, L] stacks: the convolutions take the batch, the per-channel ops see [B * C, L] rows).
#include "vae/audio_vae.h"

#include <cmath>
#include <cstring>
#include <numeric>

#include "ref/vae_ops.h"

namespace vortex {
namespace {

double bessel_i0(double x) {  // power series; converges quickly for the betas used here (< 10)
  double sum = 1.0, term = 1.0;
  for (int k = 1; k < 200; ++k) {
    term *= (x / (2.0 * k)) * (x / (2.0 * k));
    sum += term;
    if (term < 1e-18 * sum) break;
  }
  return sum;
}

std::pair<float, float> synthetic_init(const std::string& name, const Shape& shape) {
  auto ends_with = [&](const char* s) {
    const size_t n = std::strlen(s);
    return name.size() >= n && name.compare(name.size() - n, n, s) == 0;
  };
  (void)shape;
  if (ends_with("weight_g")) return {0.2f, 1.0f};  // folded rows of norm ~1
  if (ends_with(".alpha") || ends_with(".beta")) return {0.3f, 0.0f};
  if (ends_with("bias")) return {0.02f, 0.0f};
  if (ends_with("dec_in_proj.weight")) return {static_cast<float>(std::sqrt(3.0 / shape[1])), 0.0f};
  return {1.0f, 0.0f};
}

}  // namespace

std::vector<float> kaiser_sinc_filter(double cutoff, double half_width, int kernel_size) {
  const int half = kernel_size / 2;
  const double atten = 2.285 * (half - 1) * M_PI * (4 * half_width) + 7.95;
  double beta = 0.0;
  if (atten > 50.0) beta = 0.1102 * (atten - 8.7);
  else if (atten >= 21.0) beta = 0.5842 * std::pow(atten - 21.0, 0.4) + 0.07886 * (atten - 21.0);
  std::vector<double> f(static_cast<size_t>(kernel_size));
  double sum = 0.0;
  for (int n = 0; n < kernel_size; ++n) {
    const double r = kernel_size > 1 ? 2.0 * n / (kernel_size - 1) - 1.0 : 0.0;
    const double window = bessel_i0(beta * std::sqrt(std::max(0.0, 1.0 - r * r))) / bessel_i0(beta);
    const double time = kernel_size % 2 == 0 ? (n - half) + 0.5 : n - half;
    const double arg = 2.0 * cutoff * time;
    const double sinc = arg == 0.0 ? 1.0 : std::sin(M_PI * arg) / (M_PI * arg);
    f[static_cast<size_t>(n)] = 2.0 * cutoff * window * sinc;
    sum += f[static_cast<size_t>(n)];
  }
  std::vector<float> out(f.size());
  for (size_t i = 0; i < f.size(); ++i) out[i] = static_cast<float>(f[i] / sum);
  return out;
}

int AudioVaeConfig::hop() const {
  return std::accumulate(decoder_rates.begin(), decoder_rates.end(), 1, std::multiplies<int>());
}

Status AudioVaeConfig::validate() const {
  auto bad = [](const std::string& m) { return invalid_argument("audio VAE config: " + m); };
  if (latent_channels <= 0 || latent_dim <= 0 || decoder_dim <= 0) return bad("channel counts must be positive");
  if (decoder_rates.empty() || decoder_rates.size() != decoder_kernel_sizes.size())
    return bad("decoder_rates and decoder_kernel_sizes must be non-empty lists of one length");
  if (decoder_dim % (1 << decoder_rates.size()) != 0)
    return bad("decoder_dim must halve " + std::to_string(decoder_rates.size()) + " times");
  for (size_t i = 0; i < decoder_rates.size(); ++i)
    if (decoder_rates[i] <= 0 || decoder_kernel_sizes[i] < decoder_rates[i])
      return bad("each kernel size must be >= its rate");
  if (resblock_kernel_sizes.empty() || resblock_kernel_sizes.size() != resblock_dilation_sizes.size())
    return bad("resblock_kernel_sizes and resblock_dilation_sizes must be non-empty lists of one length");
  if (static_cast<int>(latents_mean.size()) != latent_channels ||
      static_cast<int>(latents_std.size()) != latent_channels)
    return bad("latents_mean / latents_std need " + std::to_string(latent_channels) + " values");
  if (sampling_rate <= 0) return bad("sampling_rate must be positive");
  return Status::Ok();
}

Result<AudioVaeConfig> AudioVaeConfig::from_json(const ConfigJson& j) {
  AudioVaeConfig c;
  VORTEX_ASSIGN_OR_RETURN(c.latent_channels, j.get_int({"latent_channels"}, c.latent_channels));
  VORTEX_ASSIGN_OR_RETURN(c.latent_dim, j.get_int({"latent_dim"}, c.latent_dim));
  VORTEX_ASSIGN_OR_RETURN(c.decoder_dim, j.get_int({"decoder_dim"}, c.decoder_dim));
  VORTEX_ASSIGN_OR_RETURN(c.decoder_rates, j.get_ints("decoder_rates", c.decoder_rates));
  VORTEX_ASSIGN_OR_RETURN(c.decoder_kernel_sizes, j.get_ints("decoder_kernel_sizes", c.decoder_kernel_sizes));
  VORTEX_ASSIGN_OR_RETURN(c.resblock_kernel_sizes, j.get_ints("resblock_kernel_sizes", c.resblock_kernel_sizes));
  if (j.has("resblock_dilation_sizes")) {
    const nlohmann::json& v = j.json()["resblock_dilation_sizes"];
    if (!v.is_array())
      return format_error(j.label() + ": 'resblock_dilation_sizes' must be a list of lists of integers");
    c.resblock_dilation_sizes.clear();
    for (const auto& row : v) {
      VORTEX_ASSIGN_OR_RETURN(const ConfigJson wrap,
                              ConfigJson::from_object({{"resblock_dilation_sizes", row}}, j.label()));
      VORTEX_ASSIGN_OR_RETURN(auto d, wrap.get_ints("resblock_dilation_sizes", {}));
      c.resblock_dilation_sizes.push_back(d);
    }
  }
  VORTEX_ASSIGN_OR_RETURN(c.sampling_rate, j.get_int({"sampling_rate"}, c.sampling_rate));
  VORTEX_RETURN_IF_ERROR(read_latent_stats(j, c.latent_channels, c.latents_mean, c.latents_std));
  VORTEX_RETURN_IF_ERROR(c.validate());
  return c;
}

AudioVaeConfig AudioVaeConfig::full() { return AudioVaeConfig{}; }

AudioVaeConfig AudioVaeConfig::tiny() {
  AudioVaeConfig c;  // the released rates (hop 800, 32 kHz) and latent channels at narrow widths
  c.latent_dim = 64;
  c.decoder_dim = 256;
  return c;
}

Result<AudioVaeConfig> AudioVaeConfig::from_original_json(const ConfigJson& wrapper_config,
                                                          const ConfigJson& kwargs_config) {
  const nlohmann::json& wrapper = wrapper_config.json();
  const nlohmann::json& kwargs = kwargs_config.json();
  // metadata.json's constructor kwargs + the MiniMaxH3AudioVAE wrapper, cross-checked where they repeat each
  // other, with the kernel sizes the reference derives from the rates (2u for even u, 2u - 1 for odd u) and
  // its fixed resblock tables (diffusers' conversion script, get_audio_vae_config).
  if (kwargs.contains("decoder_type") && kwargs["decoder_type"] != "bigvgan")
    return invalid_argument("metadata.json: decoder_type " + kwargs["decoder_type"].dump() +
                            "; only the BigVGAN decoder is supported");
  nlohmann::json j = nlohmann::json::object();
  auto copy = [&](const nlohmann::json& from, const char* key, const char* as) {
    if (from.contains(key)) j[as] = from[key];
  };
  copy(kwargs, "vae_latent_channels", "latent_channels");
  copy(kwargs, "latent_dim", "latent_dim");
  copy(kwargs, "decoder_dim", "decoder_dim");
  copy(kwargs, "decoder_rates", "decoder_rates");
  copy(kwargs, "sample_rate", "sampling_rate");
  copy(wrapper, "latents_mean", "latents_mean");
  copy(wrapper, "latents_std", "latents_std");
  for (const auto& [w, k] :
       {std::pair<const char*, const char*>{"latent_channels", "vae_latent_channels"}, {"sample_rate", "sample_rate"}})
    if (wrapper.contains(w) && kwargs.contains(k) && wrapper[w] != kwargs[k])
      return format_error(std::string("config.json says ") + w + " " + wrapper[w].dump() + ", metadata.json " + k +
                          " " + kwargs[k].dump());
  if (!wrapper.contains("latents_mean") || !wrapper.contains("latents_std"))
    return format_error("config.json has no latents_mean / latents_std (the per-channel latent normalization)");
  VORTEX_ASSIGN_OR_RETURN(ConfigJson renamed,
                          ConfigJson::from_object(j, wrapper_config.label() + " + " + kwargs_config.label()));
  VORTEX_ASSIGN_OR_RETURN(std::vector<int> rates, renamed.get_ints("decoder_rates", AudioVaeConfig{}.decoder_rates));
  nlohmann::json kernels = nlohmann::json::array();
  for (int u : rates) kernels.push_back(2 * u - (u % 2));
  j["decoder_kernel_sizes"] = kernels;
  VORTEX_ASSIGN_OR_RETURN(renamed, ConfigJson::from_object(std::move(j), renamed.label()));
  return from_json(renamed);
}

Result<std::unique_ptr<AudioVae>> AudioVae::load(const std::string& dir, Backend& backend) {
  VORTEX_ASSIGN_OR_RETURN(VaeFolder folder,
                          open_vae_folder(dir, "audio VAE (--audio-vae)", "MiniMaxH3AudioVAE", ConfigKind::kAudioVae));
  // The original layout's key names are diffusers' own (the conversion is an identity on names).
  auto cfg = folder.layout == VaeLayout::kOriginal
                 ? AudioVaeConfig::from_original_json(folder.config, folder.source_config)
                 : AudioVaeConfig::from_json(folder.config);
  if (!cfg.ok()) return cfg.status().with_context("audio VAE " + dir);
  auto vae = from_source(*cfg, folder_tensor_source(folder), backend, false);
  if (!vae.ok()) return vae.status().with_context("audio VAE " + dir);
  // The encoder, its causal-attention projection and the posterior heads are not read by decode.
  const std::vector<std::string> ignored = {"encoder.", "pre_block.", "mean_proj.", "logs_proj."};
  VORTEX_RETURN_IF_ERROR(check_unexpected_vae_tensors(folder, ignored).with_context("audio VAE " + dir));
  (*vae)->layout_ = folder.layout;
  return vae;
}

VaeTensorSource AudioVae::synthetic_source(uint64_t seed) { return synthetic_tensor_source(seed, synthetic_init); }

Result<std::unique_ptr<AudioVae>> AudioVae::synthetic(const AudioVaeConfig& cfg, Backend& backend, uint64_t seed) {
  return from_source(cfg, synthetic_tensor_source(seed, synthetic_init), backend, true);
}

Result<std::unique_ptr<AudioVae>> AudioVae::from_source(const AudioVaeConfig& cfg, const VaeTensorSource& src,
                                                        Backend& backend, bool compute_filters) {
  VORTEX_RETURN_IF_ERROR(cfg.validate());
  std::unique_ptr<AudioVae> vae(new AudioVae(cfg, backend));
  int64_t params = 0;
  auto get = [&](const std::string& name, const Shape& shape) -> Result<Tensor> {
    VORTEX_ASSIGN_OR_RETURN(Tensor t, src(name, shape));
    params += t.numel();
    return t;
  };
  auto up = [&](const Tensor& t) { return backend.upload(t); };
  // weight-norm (torch.nn.utils.weight_norm, dim 0), folded in FP64 (read_weight_norm_conv).
  auto conv_weight = [&](const std::string& base, const Shape& shape) -> Result<Tensor> {
    VORTEX_ASSIGN_OR_RETURN(Tensor wt, read_weight_norm_conv(src, base, shape, &params));
    return up(wt);
  };
  auto filter = [&](const std::string& name, double cutoff, double half_width) -> Result<Tensor> {
    const int k = cfg.act_kernel;
    if (!compute_filters) {
      VORTEX_ASSIGN_OR_RETURN(Tensor t, get(name, {1, 1, k}));
      VORTEX_ASSIGN_OR_RETURN(Tensor flat, t.reshape({k}));
      return up(flat);
    }
    const std::vector<float> f = kaiser_sinc_filter(cutoff, half_width, k);
    Tensor t = Tensor::empty({k}, DType::kF32);
    std::memcpy(t.raw_data(), f.data(), f.size() * sizeof(float));
    return up(t);
  };
  auto activation = [&](const std::string& base, int64_t ch) -> Result<AudioVaeActivationWeights> {
    AudioVaeActivationWeights a;
    VORTEX_ASSIGN_OR_RETURN(Tensor al, get(base + ".act.alpha", {ch}));
    VORTEX_ASSIGN_OR_RETURN(a.act_alpha, up(al));
    VORTEX_ASSIGN_OR_RETURN(Tensor be, get(base + ".act.beta", {ch}));
    VORTEX_ASSIGN_OR_RETURN(a.act_beta, up(be));
    const double r = cfg.act_ratio;
    VORTEX_ASSIGN_OR_RETURN(a.upsample_filter, filter(base + ".upsample.filter", 0.5 / r, 0.6 / r));
    VORTEX_ASSIGN_OR_RETURN(a.downsample_lowpass_filter, filter(base + ".downsample.lowpass.filter", 0.5 / r, 0.6 / r));
    return a;
  };
  AudioVaeWeights& w = vae->w_;
  const int64_t c = cfg.latent_channels, ld = cfg.latent_dim, d0 = cfg.decoder_dim;
  VORTEX_ASSIGN_OR_RETURN(Tensor dw, get("dec_in_proj.weight", {ld, c, 1}));
  VORTEX_ASSIGN_OR_RETURN(w.dec_in_proj_weight, up(dw));
  VORTEX_ASSIGN_OR_RETURN(Tensor db, get("dec_in_proj.bias", {ld}));
  VORTEX_ASSIGN_OR_RETURN(w.dec_in_proj_bias, up(db));
  VORTEX_ASSIGN_OR_RETURN(w.decoder_conv_pre_weight, conv_weight("decoder.conv_pre", {d0, ld, 7}));
  VORTEX_ASSIGN_OR_RETURN(Tensor pb, get("decoder.conv_pre.bias", {d0}));
  VORTEX_ASSIGN_OR_RETURN(w.decoder_conv_pre_bias, up(pb));
  int64_t ch = d0;
  for (size_t i = 0; i < cfg.decoder_rates.size(); ++i) {
    const std::string base = "decoder.ups." + std::to_string(i) + ".0";
    VORTEX_ASSIGN_OR_RETURN(Tensor uw, conv_weight(base, {ch, ch / 2, cfg.decoder_kernel_sizes[i]}));
    w.decoder_ups_weight.push_back(uw);
    VORTEX_ASSIGN_OR_RETURN(Tensor ub, get(base + ".bias", {ch / 2}));
    VORTEX_ASSIGN_OR_RETURN(Tensor ubd, up(ub));
    w.decoder_ups_bias.push_back(ubd);
    ch /= 2;
    for (size_t j = 0; j < cfg.resblock_kernel_sizes.size(); ++j) {
      const size_t idx = i * cfg.resblock_kernel_sizes.size() + j;
      const std::string rb = "decoder.resblocks." + std::to_string(idx);
      AudioVaeAmpBlockWeights b;
      b.kernel = cfg.resblock_kernel_sizes[j];
      b.dilations = cfg.resblock_dilation_sizes[j];
      for (size_t di = 0; di < b.dilations.size(); ++di) {
        const std::string n = std::to_string(di);
        VORTEX_ASSIGN_OR_RETURN(Tensor c1, conv_weight(rb + ".convs1." + n, {ch, ch, b.kernel}));
        VORTEX_ASSIGN_OR_RETURN(Tensor c1b, get(rb + ".convs1." + n + ".bias", {ch}));
        VORTEX_ASSIGN_OR_RETURN(Tensor c2, conv_weight(rb + ".convs2." + n, {ch, ch, b.kernel}));
        VORTEX_ASSIGN_OR_RETURN(Tensor c2b, get(rb + ".convs2." + n + ".bias", {ch}));
        VORTEX_ASSIGN_OR_RETURN(Tensor c1bd, up(c1b));
        VORTEX_ASSIGN_OR_RETURN(Tensor c2bd, up(c2b));
        b.convs1_weight.push_back(c1);
        b.convs1_bias.push_back(c1bd);
        b.convs2_weight.push_back(c2);
        b.convs2_bias.push_back(c2bd);
      }
      for (size_t ai = 0; ai < 2 * b.dilations.size(); ++ai) {
        VORTEX_ASSIGN_OR_RETURN(auto a, activation(rb + ".activations." + std::to_string(ai), ch));
        b.activations.push_back(std::move(a));
      }
      w.decoder_resblocks.push_back(std::move(b));
    }
  }
  VORTEX_ASSIGN_OR_RETURN(w.decoder_activation_post, activation("decoder.activation_post", ch));
  VORTEX_ASSIGN_OR_RETURN(w.decoder_conv_post_weight, conv_weight("decoder.conv_post", {1, ch, 7}));
  vae->params_ = params;
  return vae;
}

Status AudioVae::check_latents(const Tensor& z) const {
  if (!z.defined() || z.ndim() != 3 || z.dtype() != DType::kF32 || !z.is_contiguous() || z.device() != Device::kCpu)
    return invalid_argument("audio latents must be a contiguous host [2, " + std::to_string(cfg_.latent_channels) +
                            ", Ta] f32 tensor, got " + (z.defined() ? z.describe() : std::string("nothing")));
  if (z.dim(0) != 2)
    return invalid_argument("audio latents must hold 2 stereo channels ([2, C, Ta]), got " + z.describe());
  if (z.dim(1) != cfg_.latent_channels)
    return invalid_argument("audio latents have " + std::to_string(z.dim(1)) + " channels; this VAE takes " +
                            std::to_string(cfg_.latent_channels) + " ([2, C, Ta])");
  if (z.dim(2) < 1) return invalid_argument("audio latents have no frames: " + z.describe());
  const float* v = z.data<float>();
  for (int64_t i = 0; i < z.numel(); ++i)
    if (!std::isfinite(v[i]))
      return invalid_argument("audio latents contain a non-finite value (" + std::to_string(v[i]) + " at flat index " +
                              std::to_string(i) + ")");
  return Status::Ok();
}

namespace {

// The [B * C, L] row view of a contiguous [B, C, L] stack (for the per-channel ops).
Result<Tensor> stacked_rows(const Tensor& t) { return t.reshape({t.dim(0) * t.dim(1), t.dim(2)}); }

}  // namespace

Result<Tensor> AudioVae::activation(const Tensor& x, const AudioVaeActivationWeights& a) {
  const int64_t b = x.dim(0), ch = x.dim(1), l = x.dim(2);
  VORTEX_ASSIGN_OR_RETURN(Tensor out, backend_.alloc({b, ch, l}, DType::kF32));  // [B, C, L] f32
  VORTEX_ASSIGN_OR_RETURN(Tensor x_rows, stacked_rows(x));
  VORTEX_ASSIGN_OR_RETURN(Tensor out_rows, stacked_rows(out));
  BackendRegion reg(backend_, "audio.activation");
  VORTEX_RETURN_IF_ERROR(backend_.activation1d(x_rows, a.act_alpha, a.act_beta, a.upsample_filter,
                                               a.downsample_lowpass_filter, cfg_.act_ratio, out_rows));
  return out;
}

Result<Tensor> AudioVae::amp_block(const Tensor& x_in, const AudioVaeAmpBlockWeights& b) {
  const int64_t bs = x_in.dim(0), ch = x_in.dim(1), l = x_in.dim(2);
  VORTEX_ASSIGN_OR_RETURN(Tensor x, backend_.alloc({bs, ch, l}, DType::kF32));   // [B, C, L] f32
  VORTEX_ASSIGN_OR_RETURN(Tensor r1, backend_.alloc({bs, ch, l}, DType::kF32));  // [B, C, L] f32
  for (size_t i = 0; i < b.dilations.size(); ++i) {
    const int d = b.dilations[i];
    // x = x + convs2(act(convs1(act(x)))): the residual add runs in convs2's epilogue, x_in -> x for the first
    // dilation, then in place on x.
    const Tensor& src = i == 0 ? x_in : x;
    VORTEX_ASSIGN_OR_RETURN(Tensor a1, activation(src, b.activations[2 * i]));
    {
      BackendRegion reg(backend_, "audio.conv1d");
      VORTEX_RETURN_IF_ERROR(
          backend_.conv1d_fp32(a1, b.convs1_weight[i], &b.convs1_bias[i], d, (b.kernel * d - d) / 2, r1));
    }
    VORTEX_ASSIGN_OR_RETURN(Tensor a2, activation(r1, b.activations[2 * i + 1]));
    BackendRegion reg(backend_, "audio.conv1d");
    VORTEX_RETURN_IF_ERROR(
        backend_.conv1d_fp32_residual(a2, b.convs2_weight[i], &b.convs2_bias[i], 1, (b.kernel - 1) / 2, src, x));
  }
  return x;
}

Result<Tensor> AudioVae::decode(const Tensor& latents, const VaeProgressFn& progress) {
  VORTEX_RETURN_IF_ERROR(check_latents(latents));
  const int64_t batch = latents.dim(0), c = latents.dim(1), ta = latents.dim(2);
  const int64_t samples = ta * cfg_.hop();
  const size_t nk = cfg_.resblock_kernel_sizes.size();
  Tensor zin = Tensor::empty({batch, c, ta}, DType::kF32);  // [B, C, Ta] f32, de-normalized
  for (int64_t bi = 0; bi < batch; ++bi)
    for (int64_t ci = 0; ci < c; ++ci)
      for (int64_t t = 0; t < ta; ++t) {
        volatile float sv = latents.data<float>()[(bi * c + ci) * ta + t] * cfg_.latents_std[static_cast<size_t>(ci)];
        zin.data<float>()[(bi * c + ci) * ta + t] = sv + cfg_.latents_mean[static_cast<size_t>(ci)];
      }
  // Level-1 regions (bench/audio_decode_bench.cpp --breakdown) time each op family on the device timeline.
  Tensor z;
  {
    BackendRegion reg(backend_, "audio.upload");
    VORTEX_ASSIGN_OR_RETURN(z, backend_.upload(zin));
  }
  VORTEX_ASSIGN_OR_RETURN(Tensor h0, backend_.alloc({batch, cfg_.latent_dim, ta}, DType::kF32));  // [B, latent_dim, Ta]
  VORTEX_ASSIGN_OR_RETURN(Tensor h, backend_.alloc({batch, cfg_.decoder_dim, ta}, DType::kF32));  // [B, D0, Ta]
  {
    BackendRegion reg(backend_, "audio.conv_in");
    VORTEX_RETURN_IF_ERROR(
        backend_.conv1d_fp32(z, w_.dec_in_proj_weight, &w_.dec_in_proj_bias, 1, 0, h0).with_context("dec_in_proj"));
    VORTEX_RETURN_IF_ERROR(backend_.conv1d_fp32(h0, w_.decoder_conv_pre_weight, &w_.decoder_conv_pre_bias, 1, 3, h)
                               .with_context("conv_pre"));
  }
  for (size_t i = 0; i < cfg_.decoder_rates.size(); ++i) {
    const int r = cfg_.decoder_rates[i], k = cfg_.decoder_kernel_sizes[i];
    const int64_t lo = ref::conv_transpose1d_out_length(h.dim(2), k, r, (k - r) / 2);
    VORTEX_ASSIGN_OR_RETURN(Tensor hu, backend_.alloc({batch, h.dim(1) / 2, lo}, DType::kF32));  // [B, Ci / 2, L * r]
    {
      BackendRegion reg(backend_, "audio.conv_transpose1d");
      VORTEX_RETURN_IF_ERROR(
          backend_.conv_transpose1d(h, w_.decoder_ups_weight[i], &w_.decoder_ups_bias[i], r, (k - r) / 2, hu)
              .with_context("ups." + std::to_string(i)));
    }
    Tensor acc;
    for (size_t j = 0; j < nk; ++j) {
      VORTEX_ASSIGN_OR_RETURN(Tensor blk, amp_block(hu, w_.decoder_resblocks[i * nk + j]));
      if (j == 0) {
        acc = blk;
        continue;
      }
      // The mean over the parallel resblocks: sum in order, times fp32(1 / n) on the last add.
      VORTEX_ASSIGN_OR_RETURN(Tensor acc_rows, stacked_rows(acc));
      VORTEX_ASSIGN_OR_RETURN(Tensor blk_rows, stacked_rows(blk));
      BackendRegion reg(backend_, "audio.add");
      VORTEX_RETURN_IF_ERROR(backend_.add(acc_rows, blk_rows, j + 1 == nk ? 1.0f / static_cast<float>(nk) : 1.0f));
    }
    h = acc;
  }
  VORTEX_ASSIGN_OR_RETURN(Tensor act, activation(h, w_.decoder_activation_post));
  VORTEX_ASSIGN_OR_RETURN(Tensor y, backend_.alloc({batch, 1, h.dim(2)}, DType::kF32));  // [B, 1, samples]
  {
    BackendRegion reg(backend_, "audio.conv1d");
    VORTEX_RETURN_IF_ERROR(
        backend_.conv1d_fp32(act, w_.decoder_conv_post_weight, nullptr, 1, 3, y).with_context("conv_post"));
  }
  if (y.dim(2) != samples)
    return internal_error("audio VAE produced " + std::to_string(y.dim(2)) + " samples, expected " +
                          std::to_string(samples));
  Tensor out = Tensor::empty({batch, samples}, DType::kF32);
  VORTEX_ASSIGN_OR_RETURN(Tensor y_rows, y.reshape({batch, samples}));
  {
    BackendRegion reg(backend_, "audio.download");
    VORTEX_RETURN_IF_ERROR(backend_.download(y_rows, out));
  }
  for (int64_t i = 0; i < batch * samples; ++i) {
    float& v = out.data<float>()[i];
    v = std::min(1.0f, std::max(-1.0f, v));
  }
  if (progress) progress({"audio", batch, batch});
  return out;
}

}  // namespace vortex
