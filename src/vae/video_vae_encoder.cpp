// The video VAE encoder's FP32 CPU reference (see video_vae_encoder.h). Activations are host [C, T, H, W]
// f32 tensors (batch 1). conv3d is a direct loop nest accumulating in FP32 over (ci, kt, kh, kw) in that
// order, bias added last, with causal zero frames skipped rather than multiplied; it parallelises over output
// channels, so the result does not depend on the thread count. GroupNorm statistics are FP64.
#include "vae/video_vae_encoder.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "core/parallel.h"

namespace vortex {
namespace {

// ---- ops on [C, T, H, W] ----

struct Act {
  int c = 0, t = 0, h = 0, w = 0;
  std::vector<float> v;
  float* at(int ci, int ti) { return v.data() + (static_cast<size_t>(ci) * t + ti) * h * w; }
  const float* at(int ci, int ti) const { return v.data() + (static_cast<size_t>(ci) * t + ti) * h * w; }
};

Act make_act(int c, int t, int h, int w) {
  return Act{c, t, h, w, std::vector<float>(static_cast<size_t>(c) * t * h * w)};
}

// F.pad(mode="reflect") index map for one axis.
inline int reflect(int i, int n) {
  if (i < 0) return -i;
  if (i >= n) return 2 * (n - 1) - i;
  return i;
}

// Spatial pad (top, bottom, left, right) by reflection.
Act pad_reflect(const Act& x, int top, int bottom, int left, int right) {
  Act y = make_act(x.c, x.t, x.h + top + bottom, x.w + left + right);
  for (int c = 0; c < x.c; ++c)
    for (int t = 0; t < x.t; ++t) {
      const float* s = x.at(c, t);
      float* d = y.at(c, t);
      for (int i = 0; i < y.h; ++i) {
        const int si = reflect(i - top, x.h);
        for (int j = 0; j < y.w; ++j)
          d[static_cast<size_t>(i) * y.w + j] = s[static_cast<size_t>(si) * x.w + reflect(j - left, x.w)];
      }
    }
  return y;
}

// F.conv3d(x, w, b, stride=(st, ss, ss), padding=0) over x with `zero_front` causal zero frames prepended
// (not materialised: taps that read them are skipped).
Act conv3d(const Act& x, int zero_front, const Tensor& weight, const Tensor& bias, int st, int ss) {
  const int co_n = static_cast<int>(weight.dim(0)), ci_n = static_cast<int>(weight.dim(1));
  const int kt = static_cast<int>(weight.dim(2)), kh = static_cast<int>(weight.dim(3)),
            kw = static_cast<int>(weight.dim(4));
  const int tp = x.t + zero_front;
  const int to_n = (tp - kt) / st + 1, ho_n = (x.h - kh) / ss + 1, wo_n = (x.w - kw) / ss + 1;
  Act y = make_act(co_n, to_n, ho_n, wo_n);
  const float* wp = weight.data<float>();
  const float* bp = bias.data<float>();
  parallel_for_ranges(static_cast<size_t>(co_n), 0, 1, [&](size_t begin, size_t end) {
    std::vector<float> row(static_cast<size_t>(wo_n));
    for (size_t co = begin; co < end; ++co) {
      for (int to = 0; to < to_n; ++to) {
        float* out = y.at(static_cast<int>(co), to);
        std::fill(out, out + static_cast<size_t>(ho_n) * wo_n, 0.0f);
        for (int ci = 0; ci < ci_n; ++ci)
          for (int a = 0; a < kt; ++a) {
            const int ti = to * st + a - zero_front;
            if (ti < 0) continue;
            const float* in = x.at(ci, ti);
            for (int b = 0; b < kh; ++b)
              for (int c = 0; c < kw; ++c) {
                const float wv = wp[((((co * ci_n) + ci) * kt + a) * kh + b) * kw + c];
                for (int ho = 0; ho < ho_n; ++ho) {
                  const float* src = in + static_cast<size_t>(ho * ss + b) * x.w + c;
                  float* dst = out + static_cast<size_t>(ho) * wo_n;
                  if (ss == 1) {
                    for (int wo = 0; wo < wo_n; ++wo) dst[wo] += wv * src[wo];
                  } else {
                    for (int wo = 0; wo < wo_n; ++wo) dst[wo] += wv * src[static_cast<size_t>(wo) * ss];
                  }
                }
              }
          }
        const float bv = bp[co];
        for (size_t i = 0; i < static_cast<size_t>(ho_n) * wo_n; ++i) out[i] += bv;
      }
    }
  });
  return y;
}

// MiniMaxH3VideoGroupNorm (statistics per frame and group), optionally followed by SiLU.
Act group_norm(const Act& x, int groups, float eps, const Tensor& weight, const Tensor& bias, bool silu) {
  Act y = make_act(x.c, x.t, x.h, x.w);
  const int cg = x.c / groups;
  const size_t hw = static_cast<size_t>(x.h) * x.w;
  const float* wv = weight.data<float>();
  const float* bv = bias.data<float>();
  for (int t = 0; t < x.t; ++t)
    for (int g = 0; g < groups; ++g) {
      double sum = 0.0, sq = 0.0;
      for (int c = g * cg; c < (g + 1) * cg; ++c) {
        const float* s = x.at(c, t);
        for (size_t i = 0; i < hw; ++i) sum += s[i];
      }
      const double n = static_cast<double>(cg) * hw;
      const double mean = sum / n;
      for (int c = g * cg; c < (g + 1) * cg; ++c) {
        const float* s = x.at(c, t);
        for (size_t i = 0; i < hw; ++i) sq += (s[i] - mean) * (s[i] - mean);
      }
      const float m = static_cast<float>(mean);
      const float rstd = static_cast<float>(1.0 / std::sqrt(sq / n + eps));
      for (int c = g * cg; c < (g + 1) * cg; ++c) {
        const float* s = x.at(c, t);
        float* d = y.at(c, t);
        for (size_t i = 0; i < hw; ++i) {
          float v = (s[i] - m) * rstd * wv[c] + bv[c];
          if (silu) v = v / (1.0f + std::exp(-v));
          d[i] = v;
        }
      }
    }
  return y;
}

Act slice_hw(const Act& x, int top, int h, int left, int w) {
  Act y = make_act(x.c, x.t, h, w);
  for (int c = 0; c < x.c; ++c)
    for (int t = 0; t < x.t; ++t)
      for (int i = 0; i < h; ++i)
        std::memcpy(y.at(c, t) + static_cast<size_t>(i) * w, x.at(c, t) + static_cast<size_t>(i + top) * x.w + left,
                    sizeof(float) * static_cast<size_t>(w));
  return y;
}

Act from_tensor(const Tensor& x) {
  Act a = make_act(static_cast<int>(x.dim(0)), static_cast<int>(x.dim(1)), static_cast<int>(x.dim(2)),
                   static_cast<int>(x.dim(3)));
  std::memcpy(a.v.data(), x.data<float>(), a.v.size() * sizeof(float));
  return a;
}

Tensor to_tensor(const Act& a) {
  Tensor t = Tensor::empty({a.c, a.t, a.h, a.w}, DType::kF32);
  std::memcpy(t.data<float>(), a.v.data(), a.v.size() * sizeof(float));
  return t;
}

// AutoencoderKLMiniMaxH3._split_tiles.
struct Tiles {
  std::vector<int> starts, overlaps;
  int size = 0;
};
Tiles split_tiles(int length, int tile, int min_overlap, int ratio) {
  Tiles t;
  if (tile >= length) return Tiles{{0}, {}, length};
  int n = (length + tile - 1) / tile;
  while (tile * n - min_overlap * (n - 1) - length < 0) ++n;
  t.overlaps.assign(static_cast<size_t>(n - 1), min_overlap);
  int sum = 0;
  for (int o : t.overlaps) sum += o;
  const int remaining = tile * n - sum - length;
  for (int i = 0; i < remaining / ratio; ++i) t.overlaps[static_cast<size_t>(i % (n - 1))] += ratio;
  t.starts.push_back(0);
  for (int i = 0; i < n - 1; ++i) t.starts.push_back(t.starts.back() + tile - t.overlaps[static_cast<size_t>(i)]);
  t.size = tile;
  return t;
}

// _blend along H (dim -2, vertical) or W (dim -1): b's leading `extent` entries become a's trailing ones
// weighted by 1 - p/e and b's by p/e, in FP32 as torch computes them.
Act blend(const Act& a, const Act& b, int extent, bool vertical) {
  Act out = b;
  const int e = std::min({vertical ? a.h : a.w, vertical ? b.h : b.w, extent});
  for (int c = 0; c < b.c; ++c)
    for (int t = 0; t < b.t; ++t)
      for (int p = 0; p < e; ++p) {
        const float pe = static_cast<float>(p) / static_cast<float>(e);
        const float wa = 1.0f - pe, wb = pe;
        if (vertical) {
          const float* ra = a.at(c, t) + static_cast<size_t>(a.h - e + p) * a.w;
          float* ro = out.at(c, t) + static_cast<size_t>(p) * b.w;
          const float* rb = b.at(c, t) + static_cast<size_t>(p) * b.w;
          for (int j = 0; j < b.w; ++j) ro[j] = ra[j] * wa + rb[j] * wb;
        } else {
          for (int i = 0; i < b.h; ++i) {
            out.at(c, t)[static_cast<size_t>(i) * b.w + p] =
                a.at(c, t)[static_cast<size_t>(i) * a.w + a.w - e + p] * wa +
                b.at(c, t)[static_cast<size_t>(i) * b.w + p] * wb;
          }
        }
      }
  return out;
}

// IEEE binary16 rounding (nearest even), including subnormals and overflow to infinity.
uint16_t f16_bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u) return static_cast<uint16_t>(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u : 0));
  if (absx >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds past 65504
  const int exp = static_cast<int>(absx >> 23) - 127;
  if (exp < -14) {  // subnormal half: value = m * 2^-24
    if (exp < -25) return static_cast<uint16_t>(sign);
    const uint32_t mant = (absx & 0x7fffffu) | 0x800000u;
    const int shift = -exp - 14 + 13;  // bits dropped from the 24-bit significand
    uint32_t q = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1))) ++q;
    return static_cast<uint16_t>(sign | q);
  }
  uint32_t h = ((static_cast<uint32_t>(exp + 15)) << 10) | ((absx >> 13) & 0x3ffu);
  const uint32_t rem = absx & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) ++h;
  return static_cast<uint16_t>(sign | h);
}

float f32_from_f16_bits(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  float v;
  if (e == 0) v = std::ldexp(static_cast<float>(m), -24);
  else if (e == 31) v = m ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
  else v = std::ldexp(static_cast<float>(m | 0x400u), static_cast<int>(e) - 25);
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  bits |= sign;
  std::memcpy(&v, &bits, 4);
  return v;
}

}  // namespace

float round_to_f16(float x) { return f32_from_f16_bits(f16_bits(x)); }

namespace {

inline uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// The Cephes single-precision log of avx_mathfun.h (log256_ps), which ATen's AVX2 normal_fill calls, one lane:
// the same float operations in the same order, fused where the compiler of torch's AVX2 kernels fuses a
// multiply into the following add (std::fma below; found by matching torch 2.15's output bit for bit on
// 96768 draws, tests/vae/video_vae_encoder_test.cpp).
float cephes_logf(float x) {
  if (x <= 0.0f) return std::numeric_limits<float>::quiet_NaN();
  x = std::max(x, float_of(0x00800000u));  // smallest normal
  int e_bits = static_cast<int>(bits_of(x) >> 23);
  x = float_of((bits_of(x) & ~0x7f800000u) | bits_of(0.5f));
  float e = static_cast<float>(e_bits - 0x7f);
  e = e + 1.0f;
  const bool below = x < 0.707106781186547524f;
  const float tmp0 = below ? x : 0.0f;
  x = x - 1.0f;
  e = e - (below ? 1.0f : 0.0f);
  x = x + tmp0;
  const float z = x * x;
  float y = 7.0376836292E-2f;
  for (float p : {-1.1514610310E-1f, 1.1676998740E-1f, -1.2420140846E-1f, 1.4249322787E-1f, -1.6668057665E-1f,
                  2.0000714765E-1f, -2.4999993993E-1f, 3.3333331174E-1f}) {
    y = std::fma(y, x, p);
  }
  y = y * x;
  y = std::fma(y, z, e * -2.12194440e-4f);
  y = std::fma(-z, 0.5f, y);
  x = x + y;
  x = std::fma(e, 0.693359375f, x);
  return x;
}

// sincos256_ps of avx_mathfun.h, one lane (Cephes range reduction by pi/4 in three parts, two polynomials).
void cephes_sincosf(float x, float* s, float* c) {
  uint32_t sign_sin = bits_of(x) & 0x80000000u;
  x = float_of(bits_of(x) & 0x7fffffffu);
  float y = x * 1.27323954473516f;
  int j = static_cast<int>(y);
  j = (j + 1) & ~1;
  y = static_cast<float>(j);
  const uint32_t swap_sign_sin = static_cast<uint32_t>(j & 4) << 29;
  const bool sin_poly = (j & 2) == 0;
  x = std::fma(y, -0.78515625f, x);
  x = std::fma(y, -2.4187564849853515625e-4f, x);
  x = std::fma(y, -3.77489497744594108e-8f, x);
  const uint32_t sign_cos = static_cast<uint32_t>(~(j - 2) & 4) << 29;
  sign_sin ^= swap_sign_sin;
  const float z = x * x;
  float yc = 2.443315711809948E-005f;
  yc = std::fma(yc, z, -1.388731625493765E-003f);
  yc = std::fma(yc, z, 4.166664568298827E-002f);
  yc = yc * z;
  yc = std::fma(yc, z, -(z * 0.5f));
  yc = yc + 1.0f;
  float ys = -1.9515295891E-4f;
  ys = std::fma(ys, z, 8.3321608736E-3f);
  ys = std::fma(ys, z, -1.6666654611E-1f);
  ys = ys * z;
  ys = std::fma(ys, x, x);
  const float sv = sin_poly ? ys : yc, cv = sin_poly ? yc : ys;
  *s = float_of(bits_of(sv) ^ sign_sin);
  *c = float_of(bits_of(cv) ^ sign_cos);
}

}  // namespace

std::vector<float> torch_cpu_randn(uint64_t seed, size_t n) {
  std::mt19937 engine(static_cast<uint32_t>(seed));
  auto uniform = [&engine] { return static_cast<float>((engine() & ((1u << 24) - 1)) * (1.0 / (1u << 24))); };
  // normal_fill_16_AVX2: u1 = 1 - u in (0, 1], radius = sqrt(-2 log u1), theta = float(2 pi) * u2.
  auto fill16 = [](float* d) {
    const float two_pi = static_cast<float>(2.0 * M_PI);
    for (int j = 0; j < 8; ++j) {
      const float u1 = 1.0f - d[j], u2 = d[j + 8];
      const float radius = std::sqrt(-2.0f * cephes_logf(u1));
      float sn, cs;
      cephes_sincosf(two_pi * u2, &sn, &cs);
      d[j] = radius * cs;
      d[j + 8] = radius * sn;
    }
  };
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = uniform();
  for (size_t i = 0; i + 16 <= n; i += 16) fill16(out.data() + i);
  if (n % 16 != 0 && n >= 16) {
    float* tail = out.data() + n - 16;
    for (int i = 0; i < 16; ++i) tail[i] = uniform();
    fill16(tail);
  }
  return out;
}

int VideoVaeEncoderConfig::spatial_ratio() const {
  int r = 1;
  for (int f : spatial_down) r *= f;
  return r;
}
int VideoVaeEncoderConfig::temporal_ratio() const {
  int r = 1;
  for (int f : temporal_down) r *= f;
  return r;
}

Status VideoVaeEncoderConfig::validate() const {
  const size_t n = block_out_channels.size();
  if (n == 0 || spatial_down.size() != n || temporal_down.size() != n)
    return format_error(
        "video VAE config: block_out_channels, spatial_downsample_factors and "
        "temporal_downsample_factors must be non-empty lists of one length");
  if (in_channels <= 0 || latent_channels <= 0 || layers_per_block <= 0 || groups <= 0 || clip_length <= 0 ||
      token_drop < 0)
    return format_error("video VAE config: channel, layer, group and clip counts must be positive");
  for (size_t i = 0; i < n; ++i) {
    if (block_out_channels[i] <= 0 || block_out_channels[i] % groups)
      return format_error("video VAE config: block_out_channels[" + std::to_string(i) +
                          "] = " + std::to_string(block_out_channels[i]) +
                          " is not a positive multiple of norm_num_groups " + std::to_string(groups));
    if (spatial_down[i] < 1 || spatial_down[i] > 2 || temporal_down[i] < 1 || temporal_down[i] > 2)
      return format_error("video VAE config: downsample factors must be 1 or 2");
  }
  if (latents_mean.size() != static_cast<size_t>(latent_channels) ||
      latents_std.size() != static_cast<size_t>(latent_channels))
    return format_error("video VAE config: latents_mean and latents_std need latent_channels entries");
  for (float s : latents_std)
    if (!(s > 0)) return format_error("video VAE config: latents_std entries must be positive");
  if (tiling && (tile <= 0 || tile_overlap < 0 || tile_overlap >= tile || tile % spatial_ratio()))
    return format_error(
        "video VAE config: tile geometry must be positive, overlap < tile, tile a multiple of "
        "the spatial compression");
  return Status::Ok();
}

Result<VideoVaeEncoderConfig> VideoVaeEncoderConfig::from_json(const ConfigJson& cfg) {
  VideoVaeEncoderConfig c;
  VORTEX_ASSIGN_OR_RETURN(c.in_channels, cfg.get_int({"in_channels"}, c.in_channels));
  VORTEX_ASSIGN_OR_RETURN(c.latent_channels, cfg.get_int({"latent_channels"}, c.latent_channels));
  VORTEX_ASSIGN_OR_RETURN(c.block_out_channels, cfg.get_ints("block_out_channels", c.block_out_channels));
  VORTEX_ASSIGN_OR_RETURN(c.layers_per_block, cfg.get_int({"layers_per_block"}, c.layers_per_block));
  VORTEX_ASSIGN_OR_RETURN(c.spatial_down, cfg.get_ints("spatial_downsample_factors", c.spatial_down));
  VORTEX_ASSIGN_OR_RETURN(c.temporal_down, cfg.get_ints("temporal_downsample_factors", c.temporal_down));
  VORTEX_ASSIGN_OR_RETURN(c.groups, cfg.get_int({"norm_num_groups"}, c.groups));
  VORTEX_ASSIGN_OR_RETURN(const double eps, cfg.get_number({"norm_eps"}, c.eps));
  c.eps = static_cast<float>(eps);
  VORTEX_ASSIGN_OR_RETURN(c.clip_length, cfg.get_int({"clip_length"}, c.clip_length));
  VORTEX_ASSIGN_OR_RETURN(c.token_drop, cfg.get_int({"token_drop"}, c.token_drop));
  const size_t n = static_cast<size_t>(std::max(c.latent_channels, 0));
  VORTEX_ASSIGN_OR_RETURN(const std::vector<double> mean, cfg.get_numbers("latents_mean", std::vector<double>(n, 0.0)));
  VORTEX_ASSIGN_OR_RETURN(const std::vector<double> std, cfg.get_numbers("latents_std", std::vector<double>(n, 1.0)));
  c.latents_mean.assign(mean.begin(), mean.end());
  c.latents_std.assign(std.begin(), std.end());
  VORTEX_ASSIGN_OR_RETURN(const std::string padding, cfg.get_string("spatial_padding_mode", "reflect"));
  if (padding != "reflect")
    return unsupported(cfg.label() + ": spatial_padding_mode \"" + padding + "\" (only \"reflect\", the release's)");
  VORTEX_RETURN_IF_ERROR(c.validate().with_context(cfg.label()));
  return c;
}

Result<VideoVaeEncoder> VideoVaeEncoder::from_source(const VideoVaeEncoderConfig& config, const VaeTensorSource& source,
                                                     Backend* backend) {
  VORTEX_RETURN_IF_ERROR(config.validate());
  VideoVaeEncoder e;
  e.config_ = config;
  auto conv = [&](const std::string& name, int co, int ci, int k) -> Result<Conv> {
    Conv c;
    VORTEX_ASSIGN_OR_RETURN(c.weight, source(name + ".weight", {co, ci, k, k, k}));
    VORTEX_ASSIGN_OR_RETURN(c.bias, source(name + ".bias", {co}));
    return c;
  };
  auto norm = [&](const std::string& name, int ch) -> Result<Norm> {
    Norm n;
    VORTEX_ASSIGN_OR_RETURN(n.weight, source(name + ".weight", {ch}));
    VORTEX_ASSIGN_OR_RETURN(n.bias, source(name + ".bias", {ch}));
    return n;
  };
  const auto& ch = config.block_out_channels;
  VORTEX_ASSIGN_OR_RETURN(e.conv_in_, conv("encoder.conv_in", ch[0], config.in_channels, 3));
  for (size_t i = 0; i < ch.size(); ++i) {
    Level level;
    level.spatial = config.spatial_down[i];
    level.temporal = config.temporal_down[i];
    const std::string p = "encoder.down_blocks." + std::to_string(i);
    for (int j = 0; j < config.layers_per_block; ++j) {
      const int cin = j == 0 ? (i == 0 ? ch[0] : ch[i - 1]) : ch[i];
      const std::string r = p + ".resnets." + std::to_string(j);
      Resnet res;
      VORTEX_ASSIGN_OR_RETURN(res.norm1, norm(r + ".norm1", cin));
      VORTEX_ASSIGN_OR_RETURN(res.conv1, conv(r + ".conv1", ch[i], cin, 3));
      VORTEX_ASSIGN_OR_RETURN(res.norm2, norm(r + ".norm2", ch[i]));
      VORTEX_ASSIGN_OR_RETURN(res.conv2, conv(r + ".conv2", ch[i], ch[i], 3));
      if (cin != ch[i]) {
        VORTEX_ASSIGN_OR_RETURN(res.shortcut, conv(r + ".conv_shortcut", ch[i], cin, 1));
      }
      level.resnets.push_back(std::move(res));
    }
    if (level.spatial * level.temporal > 1) {
      VORTEX_ASSIGN_OR_RETURN(level.down, conv(p + ".downsamplers.0.conv", ch[i], ch[i], 3));
    }
    e.levels_.push_back(std::move(level));
  }
  VORTEX_ASSIGN_OR_RETURN(e.norm_out_, norm("encoder.norm_out", ch.back()));
  VORTEX_ASSIGN_OR_RETURN(e.conv_out_, conv("encoder.conv_out", 2 * config.latent_channels, ch.back(), 3));
  VORTEX_ASSIGN_OR_RETURN(e.quant_conv_, conv("quant_conv", 2 * config.latent_channels, 2 * config.latent_channels, 1));
  if (backend == nullptr) return e;
  // The backend's channels-last copies; the host weights are not kept.
  Backend& be = *backend;
  auto dw = std::make_shared<DeviceWeights>();
  auto up_conv = [&](Conv& c) -> Result<DeviceConv> {
    DeviceConv d;
    if (!c.weight.defined()) return d;
    const int64_t co = c.weight.dim(0), ci = c.weight.dim(1), kt = c.weight.dim(2), kh = c.weight.dim(3),
                  kw = c.weight.dim(4);
    Tensor full = Tensor::empty({co, kt, kh, kw, ci}, DType::kF32),
           last = Tensor::empty({co, 1, kh, kw, ci}, DType::kF32);
    const float* src = c.weight.data<float>();
    for (int64_t o = 0; o < co; ++o)
      for (int64_t i = 0; i < ci; ++i)
        for (int64_t a = 0; a < kt; ++a)
          for (int64_t p = 0; p < kh * kw; ++p) {
            const float v = src[((o * ci + i) * kt + a) * kh * kw + p];
            full.data<float>()[((o * kt + a) * kh * kw + p) * ci + i] = v;
            if (a == kt - 1) last.data<float>()[(o * kh * kw + p) * ci + i] = v;
          }
    VORTEX_ASSIGN_OR_RETURN(d.full, be.upload(full));
    VORTEX_ASSIGN_OR_RETURN(d.last, be.upload(last));
    VORTEX_ASSIGN_OR_RETURN(d.bias, be.upload(c.bias));
    c = Conv{};
    return d;
  };
  auto up_norm = [&](Norm& n) -> Result<Norm> {
    Norm d;
    VORTEX_ASSIGN_OR_RETURN(d.weight, be.upload(n.weight));
    VORTEX_ASSIGN_OR_RETURN(d.bias, be.upload(n.bias));
    n = Norm{};
    return d;
  };
  VORTEX_ASSIGN_OR_RETURN(dw->conv_in, up_conv(e.conv_in_));
  for (Level& level : e.levels_) {
    DeviceLevel dl;
    dl.spatial = level.spatial;
    dl.temporal = level.temporal;
    for (Resnet& r : level.resnets) {
      DeviceResnet dr;
      VORTEX_ASSIGN_OR_RETURN(dr.norm1, up_norm(r.norm1));
      VORTEX_ASSIGN_OR_RETURN(dr.norm2, up_norm(r.norm2));
      VORTEX_ASSIGN_OR_RETURN(dr.conv1, up_conv(r.conv1));
      VORTEX_ASSIGN_OR_RETURN(dr.conv2, up_conv(r.conv2));
      VORTEX_ASSIGN_OR_RETURN(dr.shortcut, up_conv(r.shortcut));
      dl.resnets.push_back(std::move(dr));
    }
    VORTEX_ASSIGN_OR_RETURN(dl.down, up_conv(level.down));
    dw->levels.push_back(std::move(dl));
  }
  e.levels_.clear();
  VORTEX_ASSIGN_OR_RETURN(dw->norm_out, up_norm(e.norm_out_));
  VORTEX_ASSIGN_OR_RETURN(dw->conv_out, up_conv(e.conv_out_));
  VORTEX_ASSIGN_OR_RETURN(dw->quant_conv, up_conv(e.quant_conv_));
  e.backend_ = backend;
  e.device_ = std::move(dw);
  return e;
}

Result<VideoVaeEncoder> VideoVaeEncoder::load(const std::string& vae_dir, Backend* backend) {
  VORTEX_ASSIGN_OR_RETURN(VaeFolder folder,
                          open_vae_folder(vae_dir, "video VAE encoder", "MiniMaxH3VideoVAE", ConfigKind::kVideoVae));
  if (folder.layout != VaeLayout::kDiffusers)
    return unsupported("video VAE encoder: " + vae_dir +
                       " is the original layout (FL2VA/video_vae); the encoder reads the diffusers layout, the "
                       "snapshot's top-level vae/ folder");
  VORTEX_ASSIGN_OR_RETURN(const VideoVaeEncoderConfig config, VideoVaeEncoderConfig::from_json(folder.config));
  return from_source(config, folder_tensor_source(folder), backend);
}

Result<Tensor> VideoVaeEncoder::encode_tile(const Tensor& xt) const {
  // MiniMaxH3VideoCausalConv3d with spatial padding 1 (reflect) and temporal padding 2 (zeros in front).
  auto causal3 = [](const Act& x, const Conv& c) {
    return conv3d(pad_reflect(x, 1, 1, 1, 1), 2, c.weight, c.bias, 1, 1);
  };
  Act h = causal3(from_tensor(xt), conv_in_);
  for (const Level& level : levels_) {
    for (const Resnet& r : level.resnets) {
      Act y = causal3(group_norm(h, config_.groups, config_.eps, r.norm1.weight, r.norm1.bias, true), r.conv1);
      y = causal3(group_norm(y, config_.groups, config_.eps, r.norm2.weight, r.norm2.bias, true), r.conv2);
      const Act res = r.shortcut.weight.defined() ? conv3d(h, 0, r.shortcut.weight, r.shortcut.bias, 1, 1) : h;
      for (size_t i = 0; i < y.v.size(); ++i) y.v[i] = res.v[i] + y.v[i];
      h = std::move(y);
    }
    if (level.down.weight.defined()) {
      // MiniMaxH3VideoDownsample3d: a spatial stride of 2 pads bottom/right by one (reflect) first.
      if (level.spatial == 2) {
        if (h.h < 2 || h.w < 2)
          return invalid_argument("video VAE encoder: a feature map of " + std::to_string(h.h) + "x" +
                                  std::to_string(h.w) + " is too small to downsample (the input is too small)");
        h = pad_reflect(h, 0, 1, 0, 1);
      }
      h = conv3d(h, 2, level.down.weight, level.down.bias, level.temporal, level.spatial);
    }
  }
  h = causal3(group_norm(h, config_.groups, config_.eps, norm_out_.weight, norm_out_.bias, true), conv_out_);
  h = conv3d(h, 0, quant_conv_.weight, quant_conv_.bias, 1, 1);
  return to_tensor(h);
}

Result<std::vector<Tensor>> VideoVaeEncoder::encode_tiles(const std::vector<Tensor>& tiles) const {
  std::vector<Tensor> out;
  if (backend_ == nullptr) {
    for (const Tensor& t : tiles) {
      VORTEX_ASSIGN_OR_RETURN(Tensor m, encode_tile(t));
      out.push_back(std::move(m));
    }
    return out;
  }
  Backend& be = *backend_;
  const int64_t c = tiles[0].dim(0), t = tiles[0].dim(1), h = tiles[0].dim(2), w = tiles[0].dim(3);
  // Tiles per batch: the first level's activation [B, T, h, w, block_out_channels[0]] f32 stays within 2 GiB.
  const int64_t per_tile = t * h * w * config_.block_out_channels[0] * 4;
  const int64_t per_batch = std::max<int64_t>(1, (int64_t{2} << 30) / std::max<int64_t>(per_tile, 1));
  const int64_t plane = h * w;
  for (size_t first = 0; first < tiles.size(); first += static_cast<size_t>(per_batch)) {
    const int64_t b = std::min<int64_t>(per_batch, static_cast<int64_t>(tiles.size() - first));
    Tensor xh = Tensor::empty({b, t, h, w, c}, DType::kF32);  // channels last
    for (int64_t i = 0; i < b; ++i) {
      const float* src = tiles[first + static_cast<size_t>(i)].data<float>();  // [C, T, h, w]
      float* dst = xh.data<float>() + i * t * plane * c;
      for (int64_t ch = 0; ch < c; ++ch)
        for (int64_t p = 0; p < t * plane; ++p) dst[p * c + ch] = src[ch * t * plane + p];
    }
    VORTEX_ASSIGN_OR_RETURN(Tensor xd, be.upload(xh));
    VORTEX_ASSIGN_OR_RETURN(Tensor md, encode_batch_device(xd));  // [B, T', h', w', 2C]
    Tensor mh = Tensor::empty(md.shape(), DType::kF32);
    VORTEX_RETURN_IF_ERROR(be.download(md, mh));
    const int64_t co = mh.dim(4), to = mh.dim(1), mplane = mh.dim(2) * mh.dim(3);
    for (int64_t i = 0; i < b; ++i) {
      Tensor m = Tensor::empty({co, to, mh.dim(2), mh.dim(3)}, DType::kF32);  // [2C, T', h', w']
      const float* src = mh.data<float>() + i * to * mplane * co;
      for (int64_t ch = 0; ch < co; ++ch)
        for (int64_t p = 0; p < to * mplane; ++p) m.data<float>()[ch * to * mplane + p] = src[p * co + ch];
      out.push_back(std::move(m));
    }
  }
  return out;
}

Result<Tensor> VideoVaeEncoder::encode_batch_device(const Tensor& x) const {
  Backend& be = *backend_;
  const DeviceWeights& dw = *device_;
  const VideoVaeEncoderConfig& cfg = config_;
  // conv3d over `in` with `front` causal zero frames and a spatial reflect pad; a single frame whose only
  // real tap is the last one runs that tap alone.
  auto conv = [&](const Tensor& in, const DeviceConv& c, int front, int top, int bottom, int left, int right,
                  int stride_t, int stride_s) -> Result<Tensor> {
    const Tensor* w = &c.full;
    const int64_t kt = c.full.dim(1);
    if (in.dim(1) == 1 && front == kt - 1) {  // one frame: taps over the zero frames add exact zeros
      w = &c.last;
      front = 0;
      stride_t = 1;
    }
    Tensor src = in;
    if (front || top || bottom || left || right) {
      VORTEX_ASSIGN_OR_RETURN(
          src, be.alloc({in.dim(0), in.dim(1) + front, in.dim(2) + top + bottom, in.dim(3) + left + right, in.dim(4)},
                        DType::kF32));
      VORTEX_RETURN_IF_ERROR(be.pad_causal_reflect(in, front, top, bottom, left, right, src));
    }
    const int64_t kh = w->dim(2), kw = w->dim(3), wk = w->dim(1);
    VORTEX_ASSIGN_OR_RETURN(Tensor out,
                            be.alloc({src.dim(0), (src.dim(1) - wk) / stride_t + 1, (src.dim(2) - kh) / stride_s + 1,
                                      (src.dim(3) - kw) / stride_s + 1, w->dim(0)},
                                     DType::kF32));
    VORTEX_RETURN_IF_ERROR(be.conv3d(src, *w, c.bias, stride_t, stride_s, cfg.device_tf32, out));
    return out;
  };
  // MiniMaxH3VideoCausalConv3d: reflect pad 1 in space, two zero frames in front.
  auto causal3 = [&](const Tensor& in, const DeviceConv& c) { return conv(in, c, 2, 1, 1, 1, 1, 1, 1); };
  auto norm_silu = [&](const Tensor& in, const Norm& n) -> Result<Tensor> {
    VORTEX_ASSIGN_OR_RETURN(Tensor out, be.alloc(in.shape(), DType::kF32));
    VORTEX_RETURN_IF_ERROR(be.group_norm_frames(in, n.weight, n.bias, cfg.groups, cfg.eps, true, out));
    return out;
  };
  auto rows = [](const Tensor& t) { return t.reshape({t.numel() / t.dim(4), t.dim(4)}); };  // [B T H W, C]

  VORTEX_ASSIGN_OR_RETURN(Tensor h, causal3(x, dw.conv_in));
  for (const DeviceLevel& level : dw.levels) {
    for (const DeviceResnet& r : level.resnets) {
      VORTEX_ASSIGN_OR_RETURN(Tensor a, norm_silu(h, r.norm1));
      VORTEX_ASSIGN_OR_RETURN(Tensor y, causal3(a, r.conv1));
      VORTEX_ASSIGN_OR_RETURN(a, norm_silu(y, r.norm2));
      VORTEX_ASSIGN_OR_RETURN(y, causal3(a, r.conv2));
      Tensor res = h;
      if (r.shortcut.full.defined()) {
        VORTEX_ASSIGN_OR_RETURN(res, conv(h, r.shortcut, 0, 0, 0, 0, 0, 1, 1));
      }
      VORTEX_ASSIGN_OR_RETURN(Tensor y2, rows(y));
      VORTEX_ASSIGN_OR_RETURN(Tensor r2, rows(res));
      VORTEX_RETURN_IF_ERROR(be.add(y2, r2, 1.0f));  // y = y + res
      h = std::move(y);
    }
    if (level.down.full.defined()) {
      // MiniMaxH3VideoDownsample3d: a spatial stride of 2 pads bottom/right by one (reflect) first.
      if (level.spatial == 2 && (h.dim(2) < 2 || h.dim(3) < 2))
        return invalid_argument("video VAE encoder: a feature map of " + std::to_string(h.dim(2)) + "x" +
                                std::to_string(h.dim(3)) + " is too small to downsample (the input is too small)");
      const int pad = level.spatial == 2 ? 1 : 0;
      VORTEX_ASSIGN_OR_RETURN(h, conv(h, level.down, 2, 0, pad, 0, pad, level.temporal, level.spatial));
    }
  }
  VORTEX_ASSIGN_OR_RETURN(Tensor a, norm_silu(h, dw.norm_out));
  VORTEX_ASSIGN_OR_RETURN(h, causal3(a, dw.conv_out));
  return conv(h, dw.quant_conv, 0, 0, 0, 0, 0, 1, 1);
}

Result<Tensor> VideoVaeEncoder::encode_clip(const Tensor& x) const {
  const int height = static_cast<int>(x.dim(2)), width = static_cast<int>(x.dim(3));
  if (!config_.tiling) {
    VORTEX_ASSIGN_OR_RETURN(std::vector<Tensor> one, encode_tiles({x}));
    return std::move(one[0]);
  }
  const int ratio = config_.spatial_ratio();
  const Tiles ty = split_tiles(height, config_.tile, config_.tile_overlap, ratio);
  const Tiles tx = split_tiles(width, config_.tile, config_.tile_overlap, ratio);
  const Act xa = from_tensor(x);
  std::vector<Tensor> inputs;
  for (int y0 : ty.starts)
    for (int x0 : tx.starts) inputs.push_back(to_tensor(slice_hw(xa, y0, ty.size, x0, tx.size)));
  VORTEX_ASSIGN_OR_RETURN(std::vector<Tensor> encoded, encode_tiles(inputs));
  std::vector<std::vector<Act>> tiles;
  for (size_t i = 0, k = 0; i < ty.starts.size(); ++i) {
    std::vector<Act> row;
    for (size_t j = 0; j < tx.starts.size(); ++j) row.push_back(from_tensor(encoded[k++]));
    tiles.push_back(std::move(row));
  }
  // _stitch_tiles in latent space: blend with the raw neighbours above and to the left, crop the overlaps.
  std::vector<int> oy, ox;
  for (int o : ty.overlaps) oy.push_back(o / ratio);
  for (int o : tx.overlaps) ox.push_back(o / ratio);
  std::vector<std::vector<Act>> done(tiles.size());
  int out_h = 0, out_w = 0;
  for (size_t i = 0; i < tiles.size(); ++i)
    for (size_t j = 0; j < tiles[i].size(); ++j) {
      Act t = tiles[i][j];
      if (i > 0) t = blend(tiles[i - 1][j], t, oy[i - 1], true);
      if (j > 0) t = blend(tiles[i][j - 1], t, ox[j - 1], false);
      const int h = i + 1 < tiles.size() ? t.h - oy[i] : t.h;
      const int w = j + 1 < tiles[i].size() ? t.w - ox[j] : t.w;
      done[i].push_back(slice_hw(t, 0, h, 0, w));
      if (i == 0) out_w += w;
      if (j == 0) out_h += h;
    }
  const Act& first = done[0][0];
  Act out = make_act(first.c, first.t, out_h, out_w);
  int y0 = 0;
  for (auto& row : done) {
    int x0 = 0;
    for (const Act& t : row) {
      for (int c = 0; c < t.c; ++c)
        for (int f = 0; f < t.t; ++f)
          for (int i = 0; i < t.h; ++i)
            std::memcpy(out.at(c, f) + static_cast<size_t>(y0 + i) * out_w + x0,
                        t.at(c, f) + static_cast<size_t>(i) * t.w, sizeof(float) * static_cast<size_t>(t.w));
      x0 += t.w;
    }
    y0 += row[0].h;
  }
  return to_tensor(out);
}

Result<Tensor> VideoVaeEncoder::moments(const Tensor& x) const {
  if (!x.defined() || x.ndim() != 4 || x.dtype() != DType::kF32 || !x.is_contiguous() ||
      x.dim(0) != config_.in_channels || x.dim(1) < 1)
    return invalid_argument("video VAE encoder: pixels must be a contiguous [" + std::to_string(config_.in_channels) +
                            ", F, H, W] f32 tensor, got " + (x.defined() ? x.describe() : std::string("nothing")));
  const int ratio = config_.spatial_ratio();
  if (x.dim(2) % ratio || x.dim(3) % ratio)
    return invalid_argument("video VAE encoder: height and width must be multiples of " + std::to_string(ratio) +
                            ", got " + std::to_string(x.dim(2)) + "x" + std::to_string(x.dim(3)));
  const int frames = static_cast<int>(x.dim(1));
  if (frames == 1) return encode_clip(x);
  // Whole clips, the last frame repeated; each clip encoded alone; token_drop trailing latent frames dropped.
  const int clip = config_.clip_length;
  const int padded = (frames + clip - 1) / clip * clip;
  const int64_t c = x.dim(0), h = x.dim(2), w = x.dim(3);
  const size_t plane = static_cast<size_t>(h * w);
  std::vector<Act> parts;
  for (int k = 0; k < padded / clip; ++k) {
    Tensor piece = Tensor::empty({c, clip, h, w}, DType::kF32);
    for (int64_t ci = 0; ci < c; ++ci)
      for (int f = 0; f < clip; ++f) {
        const int src = std::min(k * clip + f, frames - 1);
        std::memcpy(piece.data<float>() + (ci * clip + f) * plane, x.data<float>() + (ci * frames + src) * plane,
                    plane * sizeof(float));
      }
    VORTEX_ASSIGN_OR_RETURN(Tensor m, encode_clip(piece));
    parts.push_back(from_tensor(m));
  }
  int total = 0;
  for (const Act& p : parts) total += p.t;
  const int keep = total - config_.token_drop;
  if (keep < 1) return invalid_argument("video VAE encoder: too few frames for token_drop");
  Act out = make_act(parts[0].c, keep, parts[0].h, parts[0].w);
  int t = 0;
  for (const Act& p : parts)
    for (int f = 0; f < p.t && t < keep; ++f, ++t)
      for (int ci = 0; ci < p.c; ++ci)
        std::memcpy(out.at(ci, t), p.at(ci, f), sizeof(float) * static_cast<size_t>(p.h) * p.w);
  return to_tensor(out);
}

Result<Tensor> VideoVaeEncoder::encode_condition(const Tensor& pixels, uint64_t seed) const {
  if (!pixels.defined() || pixels.ndim() != 4 || pixels.dtype() != DType::kU8 || !pixels.is_contiguous() ||
      pixels.dim(0) != 3)
    return invalid_argument("video VAE encoder: condition pixels must be a contiguous [3, F, H, W] u8 tensor, got " +
                            (pixels.defined() ? pixels.describe() : std::string("nothing")));
  static constexpr float kMean[3] = {0.485f, 0.456f, 0.406f}, kStd[3] = {0.229f, 0.224f, 0.225f};
  Tensor x = Tensor::empty(pixels.shape(), DType::kF32);
  const size_t per = static_cast<size_t>(pixels.numel() / 3);
  for (int c = 0; c < 3; ++c)
    for (size_t i = 0; i < per; ++i)
      x.data<float>()[c * per + i] =
          (static_cast<float>(pixels.data<uint8_t>()[c * per + i]) / 255.0f - kMean[c]) / kStd[c];
  VORTEX_ASSIGN_OR_RETURN(Tensor m, moments(x));
  const int64_t lc = config_.latent_channels;
  const size_t n = static_cast<size_t>(m.numel() / 2), per_c = n / static_cast<size_t>(lc);
  if (n < 16) return unsupported("video VAE encoder: fewer than 16 latent values (torch draws those differently)");
  const std::vector<float> noise = torch_cpu_randn(seed, n);
  Tensor out = Tensor::empty({lc, m.dim(1), m.dim(2), m.dim(3)}, DType::kF32);
  const float* mp = m.data<float>();
  for (int64_t c = 0; c < lc; ++c)
    for (size_t i = 0; i < per_c; ++i) {
      const size_t k = static_cast<size_t>(c) * per_c + i;
      const float mean = mp[k];
      const float logvar = std::clamp(mp[n + k], -30.0f, 20.0f);
      const float stdv = std::exp(0.5f * logvar);
      const float sample = round_to_f16(mean + stdv * noise[k]);
      out.data<float>()[k] =
          (sample - config_.latents_mean[static_cast<size_t>(c)]) / config_.latents_std[static_cast<size_t>(c)];
    }
  return out;
}

}  // namespace vortex
