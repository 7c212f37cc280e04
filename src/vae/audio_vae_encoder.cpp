// The audio VAE encoder's FP32 CPU reference (see audio_vae_encoder.h). Activations are channel-major [C, L] f32
// vectors of one mono waveform. Every op evaluates in FP64 and rounds its output to FP32 once (convolution and
// linear sums in (input channel, tap) order, LayerNorm statistics, the attention softmax and P.V); convolutions and
// linears parallelise over output channels or rows, so the result does not depend on the thread count.
#include "vae/audio_vae_encoder.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "core/parallel.h"

namespace vortex {
namespace {

struct Sig {
  int64_t c = 0, l = 0;
  std::vector<float> v;  // [c, l]
  float* row(int64_t ci) { return v.data() + ci * l; }
  const float* row(int64_t ci) const { return v.data() + ci * l; }
};

Sig make_sig(int64_t c, int64_t l) { return Sig{c, l, std::vector<float>(static_cast<size_t>(c * l))}; }

// F.conv1d(x, w, b, stride, padding, dilation) with zero padding.
Sig conv1d(const Sig& x, const Tensor& weight, const Tensor& bias, int stride, int padding, int dilation) {
  const int64_t co_n = weight.dim(0), ci_n = weight.dim(1), k_n = weight.dim(2);
  const int64_t lo = (x.l + 2 * padding - dilation * (k_n - 1) - 1) / stride + 1;
  Sig y = make_sig(co_n, lo);
  const float* wp = weight.data<float>();
  const float* bp = bias.data<float>();
  parallel_for_ranges(static_cast<size_t>(co_n), 0, 1, [&](size_t begin, size_t end) {
    std::vector<double> acc(static_cast<size_t>(lo));
    for (size_t co = begin; co < end; ++co) {
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t ci = 0; ci < ci_n; ++ci) {
        const float* in = x.row(ci);
        for (int64_t k = 0; k < k_n; ++k) {
          const double wv = wp[(static_cast<int64_t>(co) * ci_n + ci) * k_n + k];
          const int64_t off = k * dilation - padding;
          for (int64_t t = 0; t < lo; ++t) {
            const int64_t i = t * stride + off;
            if (i >= 0 && i < x.l) acc[static_cast<size_t>(t)] += wv * in[i];
          }
        }
      }
      float* out = y.row(static_cast<int64_t>(co));
      const double b = bp[co];
      for (int64_t t = 0; t < lo; ++t) out[t] = static_cast<float>(acc[static_cast<size_t>(t)] + b);
    }
  });
  return y;
}

// Snake1d: x + (alpha + 1e-9)^-1 * sin(alpha * x)^2, per channel.
Sig snake(const Sig& x, const Tensor& alpha) {
  Sig y = make_sig(x.c, x.l);
  const float* a = alpha.data<float>();
  for (int64_t c = 0; c < x.c; ++c) {
    const double ac = a[c], inv = 1.0 / (ac + 1e-9);
    const float* in = x.row(c);
    float* out = y.row(c);
    for (int64_t t = 0; t < x.l; ++t) {
      const double s = std::sin(ac * in[t]);
      out[t] = static_cast<float>(in[t] + inv * s * s);
    }
  }
  return y;
}

void add_into(Sig& x, const Sig& r) {
  for (size_t i = 0; i < x.v.size(); ++i) x.v[i] = static_cast<float>(static_cast<double>(x.v[i]) + r.v[i]);
}

// Row-major [S, D] helpers for pre_block.
struct Rows {
  int64_t s = 0, d = 0;
  std::vector<float> v;
  float* row(int64_t i) { return v.data() + i * d; }
  const float* row(int64_t i) const { return v.data() + i * d; }
};

Rows make_rows(int64_t s, int64_t d) { return Rows{s, d, std::vector<float>(static_cast<size_t>(s * d))}; }

Rows layer_norm(const Rows& x, const Tensor& w, const Tensor& b) {
  Rows y = make_rows(x.s, x.d);
  for (int64_t i = 0; i < x.s; ++i) {
    const float* r = x.row(i);
    double mean = 0.0, var = 0.0;
    for (int64_t j = 0; j < x.d; ++j) mean += r[j];
    mean /= static_cast<double>(x.d);
    for (int64_t j = 0; j < x.d; ++j) var += (r[j] - mean) * (r[j] - mean);
    var /= static_cast<double>(x.d);
    const double inv = 1.0 / std::sqrt(var + 1e-5);
    float* o = y.row(i);
    for (int64_t j = 0; j < x.d; ++j)
      o[j] = static_cast<float>((r[j] - mean) * inv * w.data<float>()[j] + b.data<float>()[j]);
  }
  return y;
}

// x [S, I] @ w[O, I]^T + bias (bias may be null: bias_values then given per output).
Rows linear(const Rows& x, const Tensor& w, const float* bias) {
  const int64_t o_n = w.dim(0), i_n = w.dim(1);
  Rows y = make_rows(x.s, o_n);
  const float* wp = w.data<float>();
  parallel_for_ranges(static_cast<size_t>(x.s), 0, 1, [&](size_t begin, size_t end) {
    for (size_t s = begin; s < end; ++s) {
      const float* r = x.row(static_cast<int64_t>(s));
      float* out = y.row(static_cast<int64_t>(s));
      for (int64_t o = 0; o < o_n; ++o) {
        double acc = 0.0;
        const float* wr = wp + o * i_n;
        for (int64_t i = 0; i < i_n; ++i) acc += static_cast<double>(wr[i]) * r[i];
        out[o] = static_cast<float>(acc + (bias != nullptr ? bias[o] : 0.0));
      }
    }
  });
  return y;
}

double gelu_tanh(double x) { return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))); }

}  // namespace

int AudioVaeEncoderConfig::hop() const {
  return std::accumulate(encoder_rates.begin(), encoder_rates.end(), 1, std::multiplies<int>());
}

Status AudioVaeEncoderConfig::validate() const {
  auto bad = [](const std::string& m) { return invalid_argument("audio VAE encoder config: " + m); };
  if (encoder_dim <= 0 || latent_dim <= 0 || latent_channels <= 0 || num_attention_heads <= 0)
    return bad("channel and head counts must be positive");
  if (encoder_rates.empty()) return bad("encoder_rates must be a non-empty list");
  for (int r : encoder_rates)
    if (r <= 0) return bad("encoder_rates must be positive");
  if (latent_dim % num_attention_heads != 0) return bad("latent_dim must be a multiple of num_attention_heads");
  if (latent_dim % latent_channels != 0) return bad("latent_dim must be a multiple of latent_channels");
  if (static_cast<int>(latents_mean.size()) != latent_channels ||
      static_cast<int>(latents_std.size()) != latent_channels)
    return bad("latents_mean / latents_std need " + std::to_string(latent_channels) + " values");
  for (float s : latents_std)
    if (!(s > 0.0f)) return bad("latents_std must be positive");
  if (sampling_rate <= 0) return bad("sampling_rate must be positive");
  return Status::Ok();
}

Result<AudioVaeEncoderConfig> AudioVaeEncoderConfig::from_json(const ConfigJson& j) {
  AudioVaeEncoderConfig c;
  VORTEX_ASSIGN_OR_RETURN(c.encoder_dim, j.get_int({"encoder_dim"}, c.encoder_dim));
  VORTEX_ASSIGN_OR_RETURN(c.encoder_rates, j.get_ints("encoder_rates", c.encoder_rates));
  VORTEX_ASSIGN_OR_RETURN(c.latent_dim, j.get_int({"latent_dim"}, c.latent_dim));
  VORTEX_ASSIGN_OR_RETURN(c.latent_channels, j.get_int({"latent_channels"}, c.latent_channels));
  VORTEX_ASSIGN_OR_RETURN(c.num_attention_heads, j.get_int({"num_attention_heads"}, c.num_attention_heads));
  VORTEX_ASSIGN_OR_RETURN(c.sampling_rate, j.get_int({"sampling_rate"}, c.sampling_rate));
  VORTEX_RETURN_IF_ERROR(read_latent_stats(j, c.latent_channels, c.latents_mean, c.latents_std));
  VORTEX_RETURN_IF_ERROR(c.validate().with_context(j.label()));
  return c;
}

Result<AudioVaeEncoder> AudioVaeEncoder::from_source(const AudioVaeEncoderConfig& config,
                                                     const VaeTensorSource& source) {
  VORTEX_RETURN_IF_ERROR(config.validate());
  AudioVaeEncoder e;
  e.config_ = config;
  auto conv = [&](const std::string& name, int64_t co, int64_t ci, int k, int stride, int padding,
                  int dilation) -> Result<Conv> {
    Conv c;
    VORTEX_ASSIGN_OR_RETURN(c.weight, read_weight_norm_conv(source, name, {co, ci, k}));
    VORTEX_ASSIGN_OR_RETURN(c.bias, source(name + ".bias", {co}));
    c.stride = stride;
    c.padding = padding;
    c.dilation = dilation;
    return c;
  };
  auto vec = [&](const std::string& name, int64_t n) { return source(name, {n}); };
  auto alpha = [&](const std::string& name, int64_t ch) -> Result<Tensor> {
    VORTEX_ASSIGN_OR_RETURN(Tensor t, source(name, {1, ch, 1}));
    return t.reshape({ch});
  };
  auto norm = [&](const std::string& name, int64_t d) -> Result<Norm> {
    Norm n;
    VORTEX_ASSIGN_OR_RETURN(n.weight, vec(name + ".weight", d));
    VORTEX_ASSIGN_OR_RETURN(n.bias, vec(name + ".bias", d));
    return n;
  };
  auto lin = [&](const std::string& name, int64_t o, int64_t i) -> Result<Linear> {
    Linear l;
    VORTEX_ASSIGN_OR_RETURN(l.weight, source(name + ".weight", {o, i}));
    VORTEX_ASSIGN_OR_RETURN(l.bias, vec(name + ".bias", o));
    return l;
  };
  int64_t d = config.encoder_dim;
  VORTEX_ASSIGN_OR_RETURN(e.conv_in_, conv("encoder.block.0", d, 1, 7, 1, 3, 1));
  size_t idx = 1;
  for (int stride : config.encoder_rates) {
    const std::string p = "encoder.block." + std::to_string(idx++) + ".block.";
    Block b;
    const int dilations[3] = {1, 3, 9};
    for (int u = 0; u < 3; ++u) {
      const std::string r = p + std::to_string(u) + ".block.";
      Residual res;
      VORTEX_ASSIGN_OR_RETURN(res.alpha1, alpha(r + "0.alpha", d));
      VORTEX_ASSIGN_OR_RETURN(res.conv1, conv(r + "1", d, d, 7, 1, 3 * dilations[u], dilations[u]));
      VORTEX_ASSIGN_OR_RETURN(res.alpha2, alpha(r + "2.alpha", d));
      VORTEX_ASSIGN_OR_RETURN(res.conv2, conv(r + "3", d, d, 1, 1, 0, 1));
      b.units.push_back(std::move(res));
    }
    VORTEX_ASSIGN_OR_RETURN(b.alpha, alpha(p + "3.alpha", d));
    VORTEX_ASSIGN_OR_RETURN(b.down, conv(p + "4", 2 * d, d, 2 * stride, stride, (stride + 1) / 2, 1));
    d *= 2;
    e.blocks_.push_back(std::move(b));
  }
  VORTEX_ASSIGN_OR_RETURN(e.alpha_out_, alpha("encoder.block." + std::to_string(idx) + ".alpha", d));
  VORTEX_ASSIGN_OR_RETURN(e.conv_out_,
                          conv("encoder.block." + std::to_string(idx + 1), config.latent_dim, d, 3, 1, 1, 1));
  const int64_t ld = config.latent_dim, c = config.latent_channels;
  VORTEX_ASSIGN_OR_RETURN(e.norm1_, norm("pre_block.norm1", ld));
  VORTEX_ASSIGN_OR_RETURN(e.norm2_, norm("pre_block.norm2", c));
  VORTEX_ASSIGN_OR_RETURN(e.norm3_, norm("pre_block.norm3", ld));
  VORTEX_ASSIGN_OR_RETURN(e.qkv_weight_, source("pre_block.attn.qkv.weight", {3 * ld, ld}));
  VORTEX_ASSIGN_OR_RETURN(e.q_bias_, vec("pre_block.attn.q_bias", ld));
  VORTEX_ASSIGN_OR_RETURN(e.v_bias_, vec("pre_block.attn.v_bias", ld));
  VORTEX_ASSIGN_OR_RETURN(e.attn_proj_, lin("pre_block.attn.proj", c, c));
  VORTEX_ASSIGN_OR_RETURN(e.proj_, lin("pre_block.proj", c, ld));
  VORTEX_ASSIGN_OR_RETURN(e.mlp_norm_, norm("pre_block.mlp.norm", c));
  VORTEX_ASSIGN_OR_RETURN(e.w0_, lin("pre_block.mlp.w0", 2 * c, c));
  VORTEX_ASSIGN_OR_RETURN(e.w1_, lin("pre_block.mlp.w1", 2 * c, c));
  VORTEX_ASSIGN_OR_RETURN(e.w2_, lin("pre_block.mlp.w2", c, 2 * c));
  VORTEX_ASSIGN_OR_RETURN(Tensor mw, source("mean_proj.weight", {c, c, 1}));
  e.mean_proj_.weight = mw;
  VORTEX_ASSIGN_OR_RETURN(e.mean_proj_.bias, vec("mean_proj.bias", c));
  return e;
}

Result<AudioVaeEncoder> AudioVaeEncoder::from_source(const AudioVaeEncoderConfig& config, const VaeTensorSource& source,
                                                     Backend* backend) {
  VORTEX_ASSIGN_OR_RETURN(AudioVaeEncoder e, from_source(config, source));
  if (backend == nullptr) return e;
  e.backend_ = backend;
  VORTEX_RETURN_IF_ERROR(e.upload_weights().with_context("audio VAE encoder: uploading the weights to the " +
                                                         std::string(backend->name()) + " backend"));
  return e;
}

Result<AudioVaeEncoder> AudioVaeEncoder::load(const std::string& dir, Backend* backend) {
  VORTEX_ASSIGN_OR_RETURN(AudioVaeEncoder e, load(dir));
  if (backend == nullptr) return e;
  e.backend_ = backend;
  VORTEX_RETURN_IF_ERROR(e.upload_weights().with_context("audio VAE encoder: uploading the weights to the " +
                                                         std::string(backend->name()) + " backend"));
  return e;
}

Result<AudioVaeEncoder> AudioVaeEncoder::load(const std::string& dir) {
  VORTEX_ASSIGN_OR_RETURN(VaeFolder folder,
                          open_vae_folder(dir, "audio VAE encoder", "MiniMaxH3AudioVAE", ConfigKind::kAudioVae));
  if (folder.layout != VaeLayout::kDiffusers)
    return unsupported("audio VAE encoder: " + dir +
                       " is the original layout (FL2VA/audio_vae, Ref2VA/audio_vae); the encoder reads the diffusers "
                       "layout, the snapshot's top-level audio_vae/ folder");
  VORTEX_ASSIGN_OR_RETURN(const AudioVaeEncoderConfig config, AudioVaeEncoderConfig::from_json(folder.config));
  return from_source(config, folder_tensor_source(folder));
}

Result<Tensor> AudioVaeEncoder::encode_one(const float* samples, int64_t n) const {
  const int64_t hop = config_.hop();
  Sig x = make_sig(1, (n + hop - 1) / hop * hop);  // right-padded with zeros to a whole hop
  std::memcpy(x.v.data(), samples, static_cast<size_t>(n) * sizeof(float));
  auto run_conv = [](const Sig& in, const Conv& c) {
    return conv1d(in, c.weight, c.bias, c.stride, c.padding, c.dilation);
  };
  x = run_conv(x, conv_in_);
  for (const Block& b : blocks_) {
    for (const Residual& u : b.units) {
      Sig r = run_conv(snake(run_conv(snake(x, u.alpha1), u.conv1), u.alpha2), u.conv2);
      // The dilated convolution keeps the length (padding 3 * dilation), so the shortcut is never cropped.
      add_into(x, r);
    }
    x = run_conv(snake(x, b.alpha), b.down);
  }
  x = run_conv(snake(x, alpha_out_), conv_out_);  // [latent_dim, T]

  // pre_block on rows [T, latent_dim].
  const int64_t t_n = x.l, ld = x.c, c = config_.latent_channels, heads = config_.num_attention_heads;
  const int64_t hd = ld / heads;
  Rows h = make_rows(t_n, ld);
  for (int64_t t = 0; t < t_n; ++t)
    for (int64_t j = 0; j < ld; ++j) h.row(t)[j] = x.row(j)[t];
  Rows direct = linear(layer_norm(h, norm3_.weight, norm3_.bias), proj_.weight, proj_.bias.data<float>());  // [T, C]
  std::vector<float> qkv_bias(static_cast<size_t>(3 * ld), 0.0f);  // (q_bias, zero_k_bias, v_bias)
  std::memcpy(qkv_bias.data(), q_bias_.data<float>(), static_cast<size_t>(ld) * sizeof(float));
  std::memcpy(qkv_bias.data() + 2 * ld, v_bias_.data<float>(), static_cast<size_t>(ld) * sizeof(float));
  const Rows qkv = linear(layer_norm(h, norm1_.weight, norm1_.bias), qkv_weight_, qkv_bias.data());  // [T, 3D]
  // Causal SDPA per head, scale 1/sqrt(hd); the head outputs [T, H, hd] are rounded, mean-pooled over heads
  // and adaptively average-pooled from hd to C.
  Rows attn = make_rows(t_n, hd * heads);
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  parallel_for_ranges(static_cast<size_t>(t_n * heads), 0, 1, [&](size_t begin, size_t end) {
    std::vector<double> p(static_cast<size_t>(t_n)), o(static_cast<size_t>(hd));
    for (size_t job = begin; job < end; ++job) {
      const int64_t i = static_cast<int64_t>(job) / heads, hh = static_cast<int64_t>(job) % heads;
      const float* q = qkv.row(i) + hh * hd;
      double mx = -INFINITY;
      for (int64_t j = 0; j <= i; ++j) {
        const float* k = qkv.row(j) + ld + hh * hd;
        double s = 0.0;
        for (int64_t e = 0; e < hd; ++e) s += static_cast<double>(q[e]) * k[e];
        p[static_cast<size_t>(j)] = s * scale;
        mx = std::max(mx, p[static_cast<size_t>(j)]);
      }
      double sum = 0.0;
      for (int64_t j = 0; j <= i; ++j) sum += (p[static_cast<size_t>(j)] = std::exp(p[static_cast<size_t>(j)] - mx));
      std::fill(o.begin(), o.end(), 0.0);
      for (int64_t j = 0; j <= i; ++j) {
        const float* v = qkv.row(j) + 2 * ld + hh * hd;
        const double w = p[static_cast<size_t>(j)] / sum;
        for (int64_t e = 0; e < hd; ++e) o[static_cast<size_t>(e)] += w * v[e];
      }
      float* out = attn.row(i) + hh * hd;
      for (int64_t e = 0; e < hd; ++e) out[e] = static_cast<float>(o[static_cast<size_t>(e)]);
    }
  });
  Rows pooled = make_rows(t_n, c);
  for (int64_t t = 0; t < t_n; ++t) {
    std::vector<double> mean(static_cast<size_t>(hd), 0.0);
    for (int64_t hh = 0; hh < heads; ++hh)
      for (int64_t e = 0; e < hd; ++e) mean[static_cast<size_t>(e)] += attn.row(t)[hh * hd + e];
    std::vector<float> head_mean(static_cast<size_t>(hd));
    for (int64_t e = 0; e < hd; ++e)
      head_mean[static_cast<size_t>(e)] = static_cast<float>(mean[static_cast<size_t>(e)] / heads);
    for (int64_t o = 0; o < c; ++o) {  // adaptive_avg_pool1d bins [floor(o * hd / C), ceil((o + 1) * hd / C))
      const int64_t lo = o * hd / c, hi = ((o + 1) * hd + c - 1) / c;
      double s = 0.0;
      for (int64_t e = lo; e < hi; ++e) s += head_mean[static_cast<size_t>(e)];
      pooled.row(t)[o] = static_cast<float>(s / static_cast<double>(hi - lo));
    }
  }
  const Rows attn_out = linear(pooled, attn_proj_.weight, attn_proj_.bias.data<float>());
  Rows y = make_rows(t_n, c);
  for (size_t i = 0; i < y.v.size(); ++i) y.v[i] = static_cast<float>(static_cast<double>(direct.v[i]) + attn_out.v[i]);
  const Rows z = layer_norm(layer_norm(y, norm2_.weight, norm2_.bias), mlp_norm_.weight, mlp_norm_.bias);
  const Rows a = linear(z, w0_.weight, w0_.bias.data<float>());
  const Rows g = linear(z, w1_.weight, w1_.bias.data<float>());
  Rows gated = make_rows(t_n, 2 * c);
  for (size_t i = 0; i < gated.v.size(); ++i)
    gated.v[i] = static_cast<float>(static_cast<float>(gelu_tanh(a.v[i])) * static_cast<double>(g.v[i]));
  const Rows mlp = linear(gated, w2_.weight, w2_.bias.data<float>());
  for (size_t i = 0; i < y.v.size(); ++i) y.v[i] = static_cast<float>(static_cast<double>(y.v[i]) + mlp.v[i]);

  // mean_proj, a 1x1 convolution, back to [C, T].
  const Tensor mw = mean_proj_.weight.reshape({c, c}).value();
  const Rows m = linear(y, mw, mean_proj_.bias.data<float>());
  Tensor out = Tensor::empty({c, t_n}, DType::kF32);
  for (int64_t t = 0; t < t_n; ++t)
    for (int64_t o = 0; o < c; ++o) out.data<float>()[o * t_n + t] = m.row(t)[o];
  return out;
}

Result<Tensor> AudioVaeEncoder::encode_mean(const Tensor& waveforms) const {
  if (!waveforms.defined() || waveforms.ndim() != 2 || waveforms.dtype() != DType::kF32 || !waveforms.is_contiguous() ||
      waveforms.device() != Device::kCpu || waveforms.dim(0) < 1 || waveforms.dim(1) < 1)
    return invalid_argument(
        "audio VAE encoder: waveforms must be a contiguous host [B, N] f32 tensor with B, N >= 1, "
        "got " +
        (waveforms.defined() ? waveforms.describe() : std::string("nothing")));
  const int64_t b_n = waveforms.dim(0), n = waveforms.dim(1);
  for (int64_t i = 0; i < b_n * n; ++i)
    if (!std::isfinite(waveforms.data<float>()[i]))
      return invalid_argument("audio VAE encoder: waveform sample " + std::to_string(i) + " is not finite");
  if (backend_ != nullptr) return encode_backend(waveforms);
  const int64_t c = config_.latent_channels, t_n = (n + config_.hop() - 1) / config_.hop();
  Tensor out = Tensor::empty({b_n, c, t_n}, DType::kF32);
  for (int64_t b = 0; b < b_n; ++b) {
    VORTEX_ASSIGN_OR_RETURN(Tensor one, encode_one(waveforms.data<float>() + b * n, n));
    std::memcpy(out.data<float>() + b * c * t_n, one.data<float>(), static_cast<size_t>(c * t_n) * sizeof(float));
  }
  return out;
}

Result<Tensor> AudioVaeEncoder::encode_condition(const Tensor& stereo) const {
  if (!stereo.defined() || stereo.ndim() != 2 || stereo.dim(0) != 2)
    return invalid_argument("audio VAE encoder: a soundtrack must be stereo [2, N], got " +
                            (stereo.defined() ? stereo.describe() : std::string("nothing")));
  VORTEX_ASSIGN_OR_RETURN(const Tensor mean, encode_mean(stereo));  // [2, C, T]
  const int64_t c = mean.dim(1), t_n = mean.dim(2);
  Tensor rows = Tensor::empty({2 * t_n, c}, DType::kF32);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t t = 0; t < t_n; ++t)
      for (int64_t o = 0; o < c; ++o) {
        const float v = mean.data<float>()[(b * c + o) * t_n + t];
        // (latents - mean) / std in FP32, as the step computes it.
        rows.data<float>()[(b * t_n + t) * c + o] =
            (v - config_.latents_mean[static_cast<size_t>(o)]) / config_.latents_std[static_cast<size_t>(o)];
      }
  return rows;
}

// ---- The Backend program: the reference above, op for op, on channel-major [B, C, L] stacks. ----

Status AudioVaeEncoder::upload_weights() {
  Backend& be = *backend_;
  auto device = std::make_shared<DeviceWeights>();
  auto up = [&](const Tensor& host) -> Result<Tensor> { return be.upload(host); };
  auto conv = [&](const Conv& c) -> Result<DeviceConv> {
    DeviceConv d;
    VORTEX_ASSIGN_OR_RETURN(d.weight, up(c.weight));
    VORTEX_ASSIGN_OR_RETURN(d.bias, up(c.bias));
    d.stride = c.stride;
    d.padding = c.padding;
    d.dilation = c.dilation;
    return d;
  };
  auto one_by_one = [&](const Tensor& w, const Tensor& b) -> Result<DeviceConv> {  // a linear [O, I] as [O, I, 1]
    DeviceConv d;
    VORTEX_ASSIGN_OR_RETURN(const Tensor w3, w.reshape({w.dim(0), w.dim(1), 1}));
    VORTEX_ASSIGN_OR_RETURN(d.weight, up(w3));
    VORTEX_ASSIGN_OR_RETURN(d.bias, up(b));
    return d;
  };
  auto norm = [&](const Norm& n) -> Result<DeviceNorm> {
    DeviceNorm d;
    VORTEX_ASSIGN_OR_RETURN(d.weight, up(n.weight));
    VORTEX_ASSIGN_OR_RETURN(d.bias, up(n.bias));
    return d;
  };
  DeviceWeights& w = *device;
  VORTEX_ASSIGN_OR_RETURN(w.conv_in, conv(conv_in_));
  for (const Block& b : blocks_) {
    DeviceBlock db;
    for (const Residual& r : b.units) {
      DeviceResidual dr;
      VORTEX_ASSIGN_OR_RETURN(dr.alpha1, up(r.alpha1));
      VORTEX_ASSIGN_OR_RETURN(dr.alpha2, up(r.alpha2));
      VORTEX_ASSIGN_OR_RETURN(dr.conv1, conv(r.conv1));
      VORTEX_ASSIGN_OR_RETURN(dr.conv2, conv(r.conv2));
      db.units.push_back(std::move(dr));
    }
    VORTEX_ASSIGN_OR_RETURN(db.alpha, up(b.alpha));
    VORTEX_ASSIGN_OR_RETURN(db.down, conv(b.down));
    w.blocks.push_back(std::move(db));
  }
  VORTEX_ASSIGN_OR_RETURN(w.alpha_out, up(alpha_out_));
  VORTEX_ASSIGN_OR_RETURN(w.conv_out, conv(conv_out_));
  VORTEX_ASSIGN_OR_RETURN(w.norm1, norm(norm1_));
  VORTEX_ASSIGN_OR_RETURN(w.norm2, norm(norm2_));
  VORTEX_ASSIGN_OR_RETURN(w.norm3, norm(norm3_));
  VORTEX_ASSIGN_OR_RETURN(w.mlp_norm, norm(mlp_norm_));
  const int64_t ld = config_.latent_dim;
  Tensor qkv_bias = Tensor::zeros({3 * ld}, DType::kF32);  // (q_bias, the zero key bias, v_bias)
  std::memcpy(qkv_bias.data<float>(), q_bias_.data<float>(), static_cast<size_t>(ld) * sizeof(float));
  std::memcpy(qkv_bias.data<float>() + 2 * ld, v_bias_.data<float>(), static_cast<size_t>(ld) * sizeof(float));
  VORTEX_ASSIGN_OR_RETURN(w.qkv, one_by_one(qkv_weight_, qkv_bias));
  VORTEX_ASSIGN_OR_RETURN(w.proj, one_by_one(proj_.weight, proj_.bias));
  VORTEX_ASSIGN_OR_RETURN(w.attn_proj, one_by_one(attn_proj_.weight, attn_proj_.bias));
  VORTEX_ASSIGN_OR_RETURN(w.w0, one_by_one(w0_.weight, w0_.bias));
  VORTEX_ASSIGN_OR_RETURN(w.w1, one_by_one(w1_.weight, w1_.bias));
  VORTEX_ASSIGN_OR_RETURN(w.w2, one_by_one(w2_.weight, w2_.bias));
  VORTEX_ASSIGN_OR_RETURN(w.mean_proj, conv(mean_proj_));
  device_ = std::move(device);
  return Status::Ok();
}

Result<Tensor> AudioVaeEncoder::encode_backend(const Tensor& waveforms) const {
  Backend& be = *backend_;
  const DeviceWeights& w = *device_;
  const int64_t b_n = waveforms.dim(0), n = waveforms.dim(1), hop = config_.hop();
  const int64_t c = config_.latent_channels, ld = config_.latent_dim;
  Tensor padded = Tensor::zeros({b_n, 1, (n + hop - 1) / hop * hop}, DType::kF32);  // right-padded to a whole hop
  for (int64_t b = 0; b < b_n; ++b)
    std::memcpy(padded.data<float>() + b * padded.dim(2), waveforms.data<float>() + b * n,
                static_cast<size_t>(n) * sizeof(float));
  auto alloc = [&](int64_t ch, int64_t len) { return be.alloc({b_n, ch, len}, DType::kF32); };  // [B, ch, len] f32
  auto rows = [](const Tensor& t) { return t.reshape({t.dim(0) * t.dim(1), t.dim(2)}); };       // [B * ch, len]
  auto run_conv = [&](const Tensor& x, const DeviceConv& cv) -> Result<Tensor> {
    const int64_t k = cv.weight.dim(2), lout = (x.dim(2) + 2 * cv.padding - cv.dilation * (k - 1) - 1) / cv.stride + 1;
    VORTEX_ASSIGN_OR_RETURN(Tensor out, alloc(cv.weight.dim(0), lout));
    if (cv.stride == 1) VORTEX_RETURN_IF_ERROR(be.conv1d(x, cv.weight, &cv.bias, cv.dilation, cv.padding, out));
    else VORTEX_RETURN_IF_ERROR(be.conv1d_strided(x, cv.weight, cv.bias, cv.stride, cv.dilation, cv.padding, out));
    return out;
  };
  auto snake_of = [&](const Tensor& x, const Tensor& alpha) -> Result<Tensor> {  // a snaked copy of x
    VORTEX_ASSIGN_OR_RETURN(Tensor y, alloc(x.dim(1), x.dim(2)));
    VORTEX_ASSIGN_OR_RETURN(const Tensor xr, rows(x));
    VORTEX_ASSIGN_OR_RETURN(Tensor yr, rows(y));
    VORTEX_RETURN_IF_ERROR(be.copy(xr, yr));
    VORTEX_RETURN_IF_ERROR(be.snake(yr, alpha));
    return y;
  };
  auto add_into = [&](const Tensor& x, const Tensor& r) -> Status {
    VORTEX_ASSIGN_OR_RETURN(Tensor xr, rows(x));
    VORTEX_ASSIGN_OR_RETURN(const Tensor rr, rows(r));
    return be.add(xr, rr, 1.0f);
  };
  VORTEX_ASSIGN_OR_RETURN(const Tensor wave, be.upload(padded));
  VORTEX_ASSIGN_OR_RETURN(Tensor x, run_conv(wave, w.conv_in));  // [B, d, L]
  for (const DeviceBlock& blk : w.blocks) {
    for (const DeviceResidual& u : blk.units) {
      VORTEX_ASSIGN_OR_RETURN(const Tensor s1, snake_of(x, u.alpha1));
      VORTEX_ASSIGN_OR_RETURN(Tensor r1, run_conv(s1, u.conv1));
      VORTEX_ASSIGN_OR_RETURN(Tensor r1_rows, rows(r1));
      VORTEX_RETURN_IF_ERROR(be.snake(r1_rows, u.alpha2));
      VORTEX_ASSIGN_OR_RETURN(const Tensor r2, run_conv(r1, u.conv2));
      VORTEX_RETURN_IF_ERROR(add_into(x, r2));
    }
    VORTEX_ASSIGN_OR_RETURN(const Tensor s, snake_of(x, blk.alpha));
    VORTEX_ASSIGN_OR_RETURN(x, run_conv(s, blk.down));  // [B, 2d, L / stride]
  }
  {
    VORTEX_ASSIGN_OR_RETURN(Tensor xr, rows(x));
    VORTEX_RETURN_IF_ERROR(be.snake(xr, w.alpha_out));
  }
  VORTEX_ASSIGN_OR_RETURN(const Tensor h, run_conv(x, w.conv_out));  // [B, latent_dim, T]
  const int64_t t_n = h.dim(2);
  constexpr double kEps = 1e-5;
  // pre_block: proj(norm3(h)) + attn_proj(pool(attention(qkv(norm1(h))))), then + w2(gelu(w0(z)) * w1(z)) with
  // z = mlp_norm(norm2(y)); mean_proj.
  VORTEX_ASSIGN_OR_RETURN(Tensor normed, alloc(ld, t_n));  // [B, latent_dim, T]
  VORTEX_RETURN_IF_ERROR(be.layer_norm_channels(h, w.norm3.weight, w.norm3.bias, kEps, normed));
  VORTEX_ASSIGN_OR_RETURN(Tensor y, run_conv(normed, w.proj));  // [B, C, T]
  VORTEX_RETURN_IF_ERROR(be.layer_norm_channels(h, w.norm1.weight, w.norm1.bias, kEps, normed));
  VORTEX_ASSIGN_OR_RETURN(const Tensor qkv, run_conv(normed, w.qkv));  // [B, 3 latent_dim, T]
  VORTEX_ASSIGN_OR_RETURN(Tensor pooled, alloc(c, t_n));               // [B, C, T]
  VORTEX_RETURN_IF_ERROR(be.pooled_causal_attention(qkv, config_.num_attention_heads, pooled));
  VORTEX_ASSIGN_OR_RETURN(const Tensor attn, run_conv(pooled, w.attn_proj));
  VORTEX_RETURN_IF_ERROR(add_into(y, attn));
  VORTEX_ASSIGN_OR_RETURN(Tensor z, alloc(c, t_n));
  VORTEX_RETURN_IF_ERROR(be.layer_norm_channels(y, w.norm2.weight, w.norm2.bias, kEps, z));
  VORTEX_RETURN_IF_ERROR(be.layer_norm_channels(z, w.mlp_norm.weight, w.mlp_norm.bias, kEps, z));
  VORTEX_ASSIGN_OR_RETURN(Tensor a, run_conv(z, w.w0));        // [B, 2C, T]
  VORTEX_ASSIGN_OR_RETURN(const Tensor g, run_conv(z, w.w1));  // [B, 2C, T]
  VORTEX_RETURN_IF_ERROR(be.gelu_tanh_mul(a, g, a));
  VORTEX_ASSIGN_OR_RETURN(const Tensor mlp, run_conv(a, w.w2));
  VORTEX_RETURN_IF_ERROR(add_into(y, mlp));
  VORTEX_ASSIGN_OR_RETURN(const Tensor mean, run_conv(y, w.mean_proj));  // [B, C, T]
  Tensor out = Tensor::empty({b_n, c, t_n}, DType::kF32);
  VORTEX_RETURN_IF_ERROR(be.download(mean, out));
  VORTEX_RETURN_IF_ERROR(be.synchronize());
  return out;
}

}  // namespace vortex
