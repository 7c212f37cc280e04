// Qwen3-VL image processor and vision tower, FP32 CPU reference (see vision_tower.h). Activations are host
// [N, D] f32 rows. Linear layers accumulate in FP32 in input order, LayerNorm statistics are FP64, attention
// runs a numerically stable softmax in FP32. Token order is transformers': 2x2 merge blocks, row-major over
// blocks, so four consecutive rows form one merged token.
#include "vision/vision_tower.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/parallel.h"

namespace vortex {
namespace {

// y[n, o] = sum_i x[n, i] w[o, i] + b[o]
std::vector<float> linear(const std::vector<float>& x, int64_t n, const Tensor& w, const Tensor& b) {
  const int64_t out = w.dim(0), in = w.dim(1);
  std::vector<float> y(static_cast<size_t>(n * out));
  const float* wp = w.data<float>();
  const float* bp = b.data<float>();
  parallel_for_ranges(static_cast<size_t>(n), 0, 1, [&](size_t begin, size_t end) {
    for (size_t r = begin; r < end; ++r) {
      const float* xr = x.data() + r * static_cast<size_t>(in);
      for (int64_t o = 0; o < out; ++o) {
        const float* wr = wp + o * in;
        float s = 0.0f;
        for (int64_t i = 0; i < in; ++i) s += xr[i] * wr[i];
        y[r * static_cast<size_t>(out) + static_cast<size_t>(o)] = s + bp[o];
      }
    }
  });
  return y;
}

std::vector<float> layer_norm(const std::vector<float>& x, int64_t d, const Tensor& w, const Tensor& b) {
  std::vector<float> y(x.size());
  const int64_t n = static_cast<int64_t>(x.size()) / d;
  for (int64_t r = 0; r < n; ++r) {
    const float* xr = x.data() + r * d;
    double mean = 0, var = 0;
    for (int64_t i = 0; i < d; ++i) mean += xr[i];
    mean /= static_cast<double>(d);
    for (int64_t i = 0; i < d; ++i) var += (xr[i] - mean) * (xr[i] - mean);
    var /= static_cast<double>(d);
    const float m = static_cast<float>(mean), rstd = static_cast<float>(1.0 / std::sqrt(var + 1e-6));
    for (int64_t i = 0; i < d; ++i)
      y[static_cast<size_t>(r * d + i)] = (xr[i] - m) * rstd * w.data<float>()[i] + b.data<float>()[i];
  }
  return y;
}

inline float gelu_tanh(float x) {
  const float c = 0.7978845608028654f;  // sqrt(2 / pi)
  return 0.5f * x * (1.0f + std::tanh(c * (x + 0.044715f * x * x * x)));
}
inline float gelu_erf(float x) { return 0.5f * x * (1.0f + std::erf(x * 0.7071067811865476f)); }

}  // namespace

Result<VisionProcessorConfig> VisionProcessorConfig::from_json(const ConfigJson& cfg) {
  VisionProcessorConfig c;
  if (cfg.has("size")) {
    VORTEX_ASSIGN_OR_RETURN(const ConfigJson size, cfg.object("size"));
    VORTEX_ASSIGN_OR_RETURN(c.min_pixels, size.get_int({"shortest_edge"}, static_cast<int>(c.min_pixels)));
    VORTEX_ASSIGN_OR_RETURN(c.max_pixels, size.get_int({"longest_edge"}, static_cast<int>(c.max_pixels)));
  }
  VORTEX_ASSIGN_OR_RETURN(c.patch, cfg.get_int({"patch_size"}, c.patch));
  VORTEX_ASSIGN_OR_RETURN(c.temporal_patch, cfg.get_int({"temporal_patch_size"}, c.temporal_patch));
  VORTEX_ASSIGN_OR_RETURN(c.merge, cfg.get_int({"merge_size"}, c.merge));
  for (const char* key : {"image_mean", "image_std"}) {
    if (!cfg.has(key)) continue;
    VORTEX_ASSIGN_OR_RETURN(const std::vector<double> v, cfg.get_numbers(key, {}));
    if (v.size() != 3) return format_error(cfg.label() + ": '" + key + "' needs 3 numbers");
    for (int i = 0; i < 3; ++i) (key[6] == 'm' ? c.mean : c.std)[i] = static_cast<float>(v[static_cast<size_t>(i)]);
  }
  if (c.patch <= 0 || c.temporal_patch <= 0 || c.merge <= 0 || c.min_pixels <= 0 || c.max_pixels < c.min_pixels)
    return format_error(cfg.label() + ": patch, merge and pixel limits must be positive");
  for (int i = 0; i < 3; ++i)
    if (!(c.std[i] > 0)) return format_error(cfg.label() + ": image_std must be positive");
  for (const char* key : {"do_resize", "do_rescale", "do_normalize"}) {
    VORTEX_ASSIGN_OR_RETURN(const bool on, cfg.get_bool(key, true));
    if (!on) return unsupported(cfg.label() + ": " + key + " false is not what the release uses");
  }
  return c;
}

Result<std::pair<int, int>> smart_resize(int height, int width, const VisionProcessorConfig& cfg) {
  if (height <= 0 || width <= 0) return invalid_argument("smart_resize: the image has no pixels");
  if (static_cast<double>(std::max(height, width)) / std::min(height, width) > 200)
    return invalid_argument("smart_resize: absolute aspect ratio must be smaller than 200");
  const int f = cfg.patch * cfg.merge;
  auto py_round = [](double v) { return static_cast<int64_t>(std::nearbyint(v)); };
  int64_t h = py_round(static_cast<double>(height) / f) * f, w = py_round(static_cast<double>(width) / f) * f;
  if (h * w > cfg.max_pixels) {
    const double beta = std::sqrt(static_cast<double>(height) * width / static_cast<double>(cfg.max_pixels));
    h = std::max<int64_t>(f, static_cast<int64_t>(std::floor(height / beta / f)) * f);
    w = std::max<int64_t>(f, static_cast<int64_t>(std::floor(width / beta / f)) * f);
  } else if (h * w < cfg.min_pixels) {
    const double beta = std::sqrt(static_cast<double>(cfg.min_pixels) / (static_cast<double>(height) * width));
    h = static_cast<int64_t>(std::ceil(height * beta / f)) * f;
    w = static_cast<int64_t>(std::ceil(width * beta / f)) * f;
  }
  return std::pair<int, int>{static_cast<int>(h), static_cast<int>(w)};
}

namespace {

// The checks preprocess_image and image_input share; returns the grid in a VisionInput without rows.
Result<VisionInput> image_grid(const RgbImage& image, const VisionProcessorConfig& cfg) {
  if (image.width <= 0 || image.height <= 0 || image.rgb.size() != static_cast<size_t>(image.width) * image.height * 3)
    return invalid_argument("preprocess_image: not a valid RGB image");
  VORTEX_ASSIGN_OR_RETURN(auto size, smart_resize(image.height, image.width, cfg));
  if (size.first != image.height || size.second != image.width)
    return unsupported("the vision processor would resize " + std::to_string(image.width) + "x" +
                       std::to_string(image.height) + " to " + std::to_string(size.second) + "x" +
                       std::to_string(size.first) +
                       "; only images it passes through unresized are supported (fl2va keyframes on a canvas "
                       "of multiples of " +
                       std::to_string(cfg.patch * cfg.merge) + ")");
  VisionInput in;
  in.grid_h = image.height / cfg.patch;
  in.grid_w = image.width / cfg.patch;
  // The processor's fused rescale + normalize: (x - 255 mean) / (255 std) in FP32.
  for (int c = 0; c < 3; ++c) {
    in.mean255[static_cast<size_t>(c)] = cfg.mean[c] * 255.0f;
    in.std255[static_cast<size_t>(c)] = cfg.std[c] * 255.0f;
  }
  return in;
}

// The processor's FP32 rows of a u8 [H, W, 3] image: rows (block_row, block_col, in_row, in_col); columns
// (channel, t, py, px), the frame repeated over t. out: [grid_h * grid_w, 3 tp p p].
void pixel_rows_f32(const uint8_t* rgb, int width, int grid_h, int grid_w, int p, int m, int tp,
                    const std::array<float, 3>& mean255, const std::array<float, 3>& std255, float* out) {
  for (int br = 0; br < grid_h / m; ++br)
    for (int bc = 0; bc < grid_w / m; ++bc)
      for (int ir = 0; ir < m; ++ir)
        for (int ic = 0; ic < m; ++ic) {
          const int y0 = (br * m + ir) * p, x0 = (bc * m + ic) * p;
          for (int c = 0; c < 3; ++c)
            for (int t = 0; t < tp; ++t)
              for (int py = 0; py < p; ++py)
                for (int px = 0; px < p; ++px) {
                  const uint8_t v = rgb[(static_cast<size_t>(y0 + py) * width + x0 + px) * 3 + c];
                  *out++ = (static_cast<float>(v) - mean255[static_cast<size_t>(c)]) / std255[static_cast<size_t>(c)];
                }
        }
}

}  // namespace

Result<VisionInput> preprocess_image(const RgbImage& image, const VisionProcessorConfig& cfg) {
  VORTEX_ASSIGN_OR_RETURN(VisionInput in, image_grid(image, cfg));
  in.pixel_values = Tensor::empty({in.rows(), 3LL * cfg.temporal_patch * cfg.patch * cfg.patch}, DType::kF32);
  pixel_rows_f32(image.rgb.data(), image.width, in.grid_h, in.grid_w, cfg.patch, cfg.merge, cfg.temporal_patch,
                 in.mean255, in.std255, in.pixel_values.data<float>());
  return in;
}

Result<VisionInput> image_input(const RgbImage& image, const VisionProcessorConfig& cfg) {
  VORTEX_ASSIGN_OR_RETURN(VisionInput in, image_grid(image, cfg));
  in.rgb = Tensor::empty({image.height, image.width, 3}, DType::kU8);  // [H, W, 3] u8
  std::memcpy(in.rgb.raw_data(), image.rgb.data(), image.rgb.size());
  return in;
}

Status VisionConfig::validate() const {
  if (depth <= 0 || hidden <= 0 || heads <= 0 || hidden % heads || intermediate <= 0 || patch <= 0 ||
      temporal_patch <= 0 || merge <= 0 || out_hidden <= 0 || num_positions <= 0 || in_channels != 3)
    return format_error("vision config: sizes must be positive, hidden a multiple of num_heads, in_channels 3");
  if (head_dim() % 4) return format_error("vision config: the 2-D rotary needs a head_dim divisible by 4");
  const int side = static_cast<int>(std::lround(std::sqrt(static_cast<double>(num_positions))));
  if (side * side != num_positions) return format_error("vision config: num_position_embeddings must be a square");
  for (int d : deepstack)
    if (d < 0 || d >= depth) return format_error("vision config: deepstack_visual_indexes must be block indices");
  return Status::Ok();
}

Result<VisionConfig> VisionConfig::from_json(const ConfigJson& root) {
  VORTEX_RETURN_IF_ERROR(root.expect_kind(ConfigKind::kTextEncoder));
  ConfigJson cfg = root;
  if (root.has("vision_config")) {
    VORTEX_ASSIGN_OR_RETURN(cfg, root.object("vision_config"));
  }
  VisionConfig c;
  VORTEX_ASSIGN_OR_RETURN(c.depth, cfg.get_int({"depth"}, c.depth));
  VORTEX_ASSIGN_OR_RETURN(c.hidden, cfg.get_int({"hidden_size"}, c.hidden));
  VORTEX_ASSIGN_OR_RETURN(c.heads, cfg.get_int({"num_heads"}, c.heads));
  VORTEX_ASSIGN_OR_RETURN(c.intermediate, cfg.get_int({"intermediate_size"}, c.intermediate));
  VORTEX_ASSIGN_OR_RETURN(c.in_channels, cfg.get_int({"in_channels"}, c.in_channels));
  VORTEX_ASSIGN_OR_RETURN(c.patch, cfg.get_int({"patch_size"}, c.patch));
  VORTEX_ASSIGN_OR_RETURN(c.temporal_patch, cfg.get_int({"temporal_patch_size"}, c.temporal_patch));
  VORTEX_ASSIGN_OR_RETURN(c.merge, cfg.get_int({"spatial_merge_size"}, c.merge));
  VORTEX_ASSIGN_OR_RETURN(c.out_hidden, cfg.get_int({"out_hidden_size"}, c.out_hidden));
  VORTEX_ASSIGN_OR_RETURN(c.num_positions, cfg.get_int({"num_position_embeddings"}, c.num_positions));
  VORTEX_ASSIGN_OR_RETURN(c.deepstack, cfg.get_ints("deepstack_visual_indexes", c.deepstack));
  if (cfg.has("rope_parameters")) {
    VORTEX_ASSIGN_OR_RETURN(const ConfigJson rope, cfg.object("rope_parameters"));
    VORTEX_ASSIGN_OR_RETURN(c.rope_theta, rope.get_number({"rope_theta"}, c.rope_theta));
  }
  VORTEX_ASSIGN_OR_RETURN(const std::string act, cfg.get_string("hidden_act", "gelu_pytorch_tanh"));
  if (act != "gelu_pytorch_tanh")
    return unsupported(cfg.label() + ": hidden_act \"" + act + "\" (the release's is gelu_pytorch_tanh)");
  VORTEX_RETURN_IF_ERROR(c.validate().with_context(cfg.label()));
  return c;
}

VisionGridTables vision_grid_tables(const VisionConfig& c, int gh, int gw) {
  const int64_t n = static_cast<int64_t>(gh) * gw, m = c.merge;
  // Token k's (row, col) on the patch grid, from the merge-block order.
  std::vector<int> rows(static_cast<size_t>(n)), colv(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) {
    const int64_t blocks_w = gw / m, ic = k % m, ir = (k / m) % m, bc = (k / (m * m)) % blocks_w,
                  br = k / (m * m * blocks_w);
    rows[static_cast<size_t>(k)] = static_cast<int>(br * m + ir);
    colv[static_cast<size_t>(k)] = static_cast<int>(bc * m + ic);
  }
  VisionGridTables g;
  // Learned positions, bilinear with align_corners over the side x side grid (FP32 as transformers computes).
  const int side = static_cast<int>(std::lround(std::sqrt(static_cast<double>(c.num_positions))));
  auto taps = [&](int index, int size, int* t, float* w) {
    const float src =
        static_cast<float>(index) * static_cast<float>(side - 1) / static_cast<float>(std::max(size - 1, 1));
    const float fl = std::floor(src);
    for (int o = 0; o < 2; ++o) {
      t[o] = std::clamp(static_cast<int>(fl) + o, 0, side - 1);
      w[o] = std::max(0.0f, 1.0f - std::abs(src - fl - static_cast<float>(o)));
    }
  };
  g.tap_index.resize(static_cast<size_t>(n * 4));
  g.tap_weight.resize(static_cast<size_t>(n * 4));
  for (int64_t k = 0; k < n; ++k) {
    int th[2], tw[2];
    float wh[2], ww[2];
    taps(rows[static_cast<size_t>(k)], gh, th, wh);
    taps(colv[static_cast<size_t>(k)], gw, tw, ww);
    for (int a = 0; a < 2; ++a)
      for (int b = 0; b < 2; ++b) {
        g.tap_index[static_cast<size_t>(k * 4 + a * 2 + b)] = th[a] * side + tw[b];
        g.tap_weight[static_cast<size_t>(k * 4 + a * 2 + b)] = wh[a] * ww[b];
      }
  }
  // 2-D rotary: head_dim / 4 frequencies, angles (h freqs | w freqs) repeated over both halves.
  const int hd = c.head_dim(), q4 = hd / 4;
  std::vector<float> inv(static_cast<size_t>(q4));
  for (int i = 0; i < q4; ++i)
    inv[static_cast<size_t>(i)] =
        1.0f / static_cast<float>(std::pow(c.rope_theta, static_cast<float>(2 * i) / static_cast<float>(hd / 2)));
  g.cos.resize(static_cast<size_t>(n * hd));
  g.sin.resize(static_cast<size_t>(n * hd));
  for (int64_t k = 0; k < n; ++k)
    for (int i = 0; i < hd; ++i) {
      const int f = i % (hd / 2);
      const float angle = f < q4 ? static_cast<float>(rows[static_cast<size_t>(k)]) * inv[static_cast<size_t>(f)]
                                 : static_cast<float>(colv[static_cast<size_t>(k)]) * inv[static_cast<size_t>(f - q4)];
      g.cos[static_cast<size_t>(k * hd + i)] = std::cos(angle);
      g.sin[static_cast<size_t>(k * hd + i)] = std::sin(angle);
    }
  return g;
}

Result<VisionTower> VisionTower::from_source(const VisionConfig& cfg, const VaeTensorSource& source,
                                             const std::string& prefix) {
  VORTEX_RETURN_IF_ERROR(cfg.validate());
  VisionTower t;
  t.cfg_ = cfg;
  const int64_t d = cfg.hidden, md = static_cast<int64_t>(cfg.merge) * cfg.merge * d;
  auto linear_w = [&](const std::string& name, int64_t out, int64_t in) -> Result<Linear> {
    Linear l;
    VORTEX_ASSIGN_OR_RETURN(l.w, source(prefix + name + ".weight", {out, in}));
    VORTEX_ASSIGN_OR_RETURN(l.b, source(prefix + name + ".bias", {out}));
    return l;
  };
  auto norm_w = [&](const std::string& name, int64_t n) -> Result<Norm> {
    Norm l;
    VORTEX_ASSIGN_OR_RETURN(l.w, source(prefix + name + ".weight", {n}));
    VORTEX_ASSIGN_OR_RETURN(l.b, source(prefix + name + ".bias", {n}));
    return l;
  };
  VORTEX_ASSIGN_OR_RETURN(Tensor pe,
                          source(prefix + "patch_embed.proj.weight", {d, 3, cfg.temporal_patch, cfg.patch, cfg.patch}));
  VORTEX_ASSIGN_OR_RETURN(t.patch_embed_.w, pe.reshape({d, 3LL * cfg.temporal_patch * cfg.patch * cfg.patch}));
  VORTEX_ASSIGN_OR_RETURN(t.patch_embed_.b, source(prefix + "patch_embed.proj.bias", {d}));
  VORTEX_ASSIGN_OR_RETURN(t.pos_embed_, source(prefix + "pos_embed.weight", {cfg.num_positions, d}));
  for (int i = 0; i < cfg.depth; ++i) {
    const std::string b = "blocks." + std::to_string(i) + ".";
    Block blk;
    VORTEX_ASSIGN_OR_RETURN(blk.norm1, norm_w(b + "norm1", d));
    VORTEX_ASSIGN_OR_RETURN(blk.norm2, norm_w(b + "norm2", d));
    VORTEX_ASSIGN_OR_RETURN(blk.qkv, linear_w(b + "attn.qkv", 3 * d, d));
    VORTEX_ASSIGN_OR_RETURN(blk.proj, linear_w(b + "attn.proj", d, d));
    VORTEX_ASSIGN_OR_RETURN(blk.fc1, linear_w(b + "mlp.linear_fc1", cfg.intermediate, d));
    VORTEX_ASSIGN_OR_RETURN(blk.fc2, linear_w(b + "mlp.linear_fc2", d, cfg.intermediate));
    t.blocks_.push_back(std::move(blk));
  }
  auto merger = [&](const std::string& name, bool post) -> Result<Merger> {
    Merger mg;
    mg.postshuffle = post;
    VORTEX_ASSIGN_OR_RETURN(mg.norm, norm_w(name + ".norm", post ? md : d));
    VORTEX_ASSIGN_OR_RETURN(mg.fc1, linear_w(name + ".linear_fc1", md, md));
    VORTEX_ASSIGN_OR_RETURN(mg.fc2, linear_w(name + ".linear_fc2", cfg.out_hidden, md));
    return mg;
  };
  VORTEX_ASSIGN_OR_RETURN(t.merger_, merger("merger", false));
  for (size_t k = 0; k < cfg.deepstack.size(); ++k) {
    VORTEX_ASSIGN_OR_RETURN(Merger mg, merger("deepstack_merger_list." + std::to_string(k), true));
    t.deepstack_.push_back(std::move(mg));
  }
  return t;
}

Status VisionTower::check_input(const VisionInput& in) const {
  const VisionConfig& c = cfg_;
  const int64_t cols = 3LL * c.temporal_patch * c.patch * c.patch;
  if (in.grid_t != 1 || in.grid_h <= 0 || in.grid_w <= 0 || in.grid_h % c.merge || in.grid_w % c.merge)
    return invalid_argument("vision tower: one image with positive grid sides divisible by " + std::to_string(c.merge) +
                            " (grid " + std::to_string(in.grid_h) + " x " + std::to_string(in.grid_w) + ")");
  if (!in.pixel_values.defined()) {
    if (!in.rgb.defined() || in.rgb.dtype() != DType::kU8 || in.rgb.device() != Device::kCpu ||
        !in.rgb.is_contiguous() || in.rgb.ndim() != 3 || in.rgb.dim(0) != static_cast<int64_t>(in.grid_h) * c.patch ||
        in.rgb.dim(1) != static_cast<int64_t>(in.grid_w) * c.patch || in.rgb.dim(2) != 3)
      return invalid_argument("vision tower: without pixel_values, rgb must be a host [" +
                              std::to_string(in.grid_h * c.patch) + ", " + std::to_string(in.grid_w * c.patch) +
                              ", 3] u8 image");
    for (float s : in.std255)
      if (!(s > 0.0f)) return invalid_argument("vision tower: std255 must be positive");
    return Status::Ok();
  }
  if (in.pixel_values.ndim() != 2 || in.pixel_values.dim(1) != cols || in.pixel_values.dtype() != DType::kF32 ||
      !in.pixel_values.is_contiguous() || in.pixel_values.dim(0) != in.rows())
    return invalid_argument("vision tower: pixel_values must be [grid_h * grid_w, " + std::to_string(cols) +
                            "] f32 for one image");
  return Status::Ok();
}

Result<VisionTower::Output> VisionTower::forward(const VisionInput& in) const {
  VORTEX_RETURN_IF_ERROR(check_input(in));
  if (backend_ != nullptr) return forward_backend(std::vector<VisionInput>{in}, true);
  const VisionConfig& c = cfg_;
  const int64_t cols = 3LL * c.temporal_patch * c.patch * c.patch;
  const int64_t n = in.rows(), d = c.hidden, m = c.merge;
  const int gh = in.grid_h, gw = in.grid_w;
  std::vector<float> px(static_cast<size_t>(n * cols));  // [N, 3 T P P] f32
  if (in.pixel_values.defined()) std::memcpy(px.data(), in.pixel_values.data<float>(), px.size() * sizeof(float));
  else
    pixel_rows_f32(in.rgb.data<uint8_t>(), static_cast<int>(in.rgb.dim(1)), gh, gw, c.patch, c.merge, c.temporal_patch,
                   in.mean255, in.std255, px.data());
  std::vector<float> x = linear(px, n, patch_embed_.w, patch_embed_.b);  // [N, D]

  const VisionGridTables grid = vision_grid_tables(c, gh, gw);
  // Learned positions: x += sum of the four taps (FP32, in tap order).
  const float* pos = pos_embed_.data<float>();
  for (int64_t k = 0; k < n; ++k) {
    const int32_t* ti = grid.tap_index.data() + k * 4;
    const float* tw = grid.tap_weight.data() + k * 4;
    for (int64_t j = 0; j < d; ++j) {
      float s = 0.0f;
      for (int t = 0; t < 4; ++t) s += pos[ti[t] * d + j] * tw[t];
      x[static_cast<size_t>(k * d + j)] += s;
    }
  }
  const int hd = c.head_dim();
  const std::vector<float>& cosv = grid.cos;
  const std::vector<float>& sinv = grid.sin;

  auto merge_tokens = [&](const std::vector<float>& h, const Merger& mg) {
    const int64_t md = m * m * d, nm = n / (m * m);
    std::vector<float> z =
        mg.postshuffle ? layer_norm(h, md, mg.norm.w, mg.norm.b) : layer_norm(h, d, mg.norm.w, mg.norm.b);
    std::vector<float> a = linear(z, nm, mg.fc1.w, mg.fc1.b);
    for (float& v : a) v = gelu_erf(v);
    std::vector<float> o = linear(a, nm, mg.fc2.w, mg.fc2.b);
    Tensor t = Tensor::empty({nm, c.out_hidden}, DType::kF32);
    std::memcpy(t.data<float>(), o.data(), o.size() * sizeof(float));
    return t;
  };

  Output out;
  const int heads = c.heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  for (size_t li = 0; li < blocks_.size(); ++li) {
    const Block& blk = blocks_[li];
    std::vector<float> qkv = linear(layer_norm(x, d, blk.norm1.w, blk.norm1.b), n, blk.qkv.w, blk.qkv.b);  // [N, 3D]
    // Rotary on q and k: x * cos + rotate_half(x) * sin per head.
    for (int64_t k = 0; k < n; ++k)
      for (int part = 0; part < 2; ++part)
        for (int h = 0; h < heads; ++h) {
          float* v = qkv.data() + k * 3 * d + part * d + h * hd;
          std::vector<float> r(v, v + hd);
          for (int i = 0; i < hd; ++i) {
            const float rot = i < hd / 2 ? -r[static_cast<size_t>(i + hd / 2)] : r[static_cast<size_t>(i - hd / 2)];
            v[i] = r[static_cast<size_t>(i)] * cosv[static_cast<size_t>(k * hd + i)] +
                   rot * sinv[static_cast<size_t>(k * hd + i)];
          }
        }
    std::vector<float> att(static_cast<size_t>(n * d));
    parallel_for_ranges(static_cast<size_t>(n * heads), 0, 1, [&](size_t begin, size_t end) {
      std::vector<float> s(static_cast<size_t>(n));
      for (size_t job = begin; job < end; ++job) {
        const int64_t qi = static_cast<int64_t>(job) / heads, h = static_cast<int64_t>(job) % heads;
        const float* q = qkv.data() + qi * 3 * d + h * hd;
        float mx = -INFINITY;
        for (int64_t kj = 0; kj < n; ++kj) {
          const float* kv = qkv.data() + kj * 3 * d + d + h * hd;
          float dot = 0.0f;
          for (int i = 0; i < hd; ++i) dot += q[i] * kv[i];
          s[static_cast<size_t>(kj)] = dot * scale;
          mx = std::max(mx, s[static_cast<size_t>(kj)]);
        }
        float sum = 0.0f;
        for (int64_t kj = 0; kj < n; ++kj)
          sum += (s[static_cast<size_t>(kj)] = std::exp(s[static_cast<size_t>(kj)] - mx));
        float* o = att.data() + qi * d + h * hd;
        std::fill(o, o + hd, 0.0f);
        for (int64_t kj = 0; kj < n; ++kj) {
          const float p = s[static_cast<size_t>(kj)] / sum;
          const float* v = qkv.data() + kj * 3 * d + 2 * d + h * hd;
          for (int i = 0; i < hd; ++i) o[i] += p * v[i];
        }
      }
    });
    std::vector<float> y = linear(att, n, blk.proj.w, blk.proj.b);
    for (size_t i = 0; i < x.size(); ++i) x[i] += y[i];
    std::vector<float> hmid = linear(layer_norm(x, d, blk.norm2.w, blk.norm2.b), n, blk.fc1.w, blk.fc1.b);
    for (float& v : hmid) v = gelu_tanh(v);
    y = linear(hmid, n, blk.fc2.w, blk.fc2.b);
    for (size_t i = 0; i < x.size(); ++i) x[i] += y[i];
    for (size_t k = 0; k < c.deepstack.size(); ++k)
      if (c.deepstack[k] == static_cast<int>(li)) out.deepstack.push_back(merge_tokens(x, deepstack_[k]));
  }
  out.last_hidden = Tensor::empty({n, d}, DType::kF32);
  std::memcpy(out.last_hidden.data<float>(), x.data(), x.size() * sizeof(float));
  out.merged = merge_tokens(x, merger_);
  return out;
}

// ---- the BF16 program on a Backend ----

Result<VisionTower> VisionTower::from_source(const VisionConfig& cfg, const VaeTensorSource& source, Backend* backend,
                                             const std::string& prefix) {
  VORTEX_ASSIGN_OR_RETURN(VisionTower t, from_source(cfg, source, prefix));
  if (backend == nullptr) return t;
  Backend& be = *backend;
  auto st = std::make_shared<DeviceState>();
  // Weights rounded to BF16 once (transformers' BF16 model); norm parameters as FP32 copies of those BF16 values.
  auto linear = [&](Linear& host) -> Result<DeviceLinear> {
    DeviceLinear l;
    VORTEX_ASSIGN_OR_RETURN(l.w.weight, be.upload(to_bf16_host(host.w)));
    l.w.out_features = host.w.dim(0);
    l.w.in_features = host.w.dim(1);
    VORTEX_ASSIGN_OR_RETURN(l.b, be.upload(to_bf16_host(host.b)));
    host = Linear{};  // the host copy is not kept
    return l;
  };
  auto norm = [&](Norm& host) -> Result<DeviceNorm> {
    DeviceNorm nm;
    for (auto [src, dst] : {std::pair<Tensor*, Tensor*>{&host.w, &nm.w}, {&host.b, &nm.b}}) {
      Tensor r = Tensor::empty(src->shape(), DType::kF32);
      for (int64_t i = 0; i < src->numel(); ++i) r.data<float>()[i] = round_bf16(src->data<float>()[i]);
      VORTEX_ASSIGN_OR_RETURN(*dst, be.upload(r));
    }
    host = Norm{};
    return nm;
  };
  auto merger = [&](Merger& host) -> Result<DeviceMerger> {
    DeviceMerger mg;
    mg.postshuffle = host.postshuffle;
    VORTEX_ASSIGN_OR_RETURN(mg.norm, norm(host.norm));
    VORTEX_ASSIGN_OR_RETURN(mg.fc1, linear(host.fc1));
    VORTEX_ASSIGN_OR_RETURN(mg.fc2, linear(host.fc2));
    return mg;
  };
  VORTEX_ASSIGN_OR_RETURN(st->patch_embed, linear(t.patch_embed_));
  VORTEX_ASSIGN_OR_RETURN(st->pos_table, be.upload(to_bf16_host(t.pos_embed_)));
  t.pos_embed_ = Tensor();
  for (Block& blk : t.blocks_) {
    DeviceBlock db;
    VORTEX_ASSIGN_OR_RETURN(db.norm1, norm(blk.norm1));
    VORTEX_ASSIGN_OR_RETURN(db.norm2, norm(blk.norm2));
    VORTEX_ASSIGN_OR_RETURN(db.qkv, linear(blk.qkv));
    VORTEX_ASSIGN_OR_RETURN(db.proj, linear(blk.proj));
    VORTEX_ASSIGN_OR_RETURN(db.fc1, linear(blk.fc1));
    VORTEX_ASSIGN_OR_RETURN(db.fc2, linear(blk.fc2));
    st->blocks.push_back(std::move(db));
  }
  t.blocks_.clear();
  VORTEX_ASSIGN_OR_RETURN(st->merger, merger(t.merger_));
  for (Merger& mg : t.deepstack_) {
    VORTEX_ASSIGN_OR_RETURN(DeviceMerger dm, merger(mg));
    st->deepstack.push_back(std::move(dm));
  }
  t.deepstack_.clear();
  t.backend_ = backend;
  t.device_ = std::move(st);
  return t;
}

Result<VisionTower::Output> VisionTower::forward_device(const VisionInput& in) const {
  return forward_device(std::vector<VisionInput>{in});
}

Result<const VisionTower::DeviceGrid*> VisionTower::device_grid(const std::vector<VisionInput>& inputs) const {
  DeviceState& st = *device_;
  std::vector<std::pair<int, int>> key;
  for (const VisionInput& in : inputs) key.emplace_back(in.grid_h, in.grid_w);
  std::lock_guard<std::mutex> lock(st.grid_mutex);
  auto it = st.grids.find(key);
  if (it != st.grids.end()) return &it->second;
  // The images' tables stacked in input order: [sum N, 4] taps, [sum N, head_dim] rotary.
  VisionGridTables all;
  for (const auto& [gh, gw] : key) {
    const VisionGridTables g = vision_grid_tables(cfg_, gh, gw);
    all.tap_index.insert(all.tap_index.end(), g.tap_index.begin(), g.tap_index.end());
    all.tap_weight.insert(all.tap_weight.end(), g.tap_weight.begin(), g.tap_weight.end());
    all.cos.insert(all.cos.end(), g.cos.begin(), g.cos.end());
    all.sin.insert(all.sin.end(), g.sin.begin(), g.sin.end());
  }
  Backend& be = *backend_;
  const int64_t n = static_cast<int64_t>(all.tap_index.size() / 4), hd = cfg_.head_dim();
  DeviceGrid dg;
  // Page-locked copies queued on the backend's stream (upload_async), no wait on the host.
  auto up = [&](const void* data, size_t bytes, const Shape& shape, DType dtype) -> Result<Tensor> {
    VORTEX_ASSIGN_OR_RETURN(Tensor h, be.alloc_host(shape, dtype));
    std::memcpy(h.raw_data(), data, bytes);
    VORTEX_ASSIGN_OR_RETURN(Tensor d, be.alloc(shape, dtype));
    VORTEX_RETURN_IF_ERROR(be.upload_async(h, d));
    dg.host.push_back(std::move(h));
    return d;
  };
  VORTEX_ASSIGN_OR_RETURN(dg.tap_index, up(all.tap_index.data(), all.tap_index.size() * 4, {n, 4}, DType::kI32));
  VORTEX_ASSIGN_OR_RETURN(dg.tap_weight, up(all.tap_weight.data(), all.tap_weight.size() * 4, {n, 4}, DType::kF32));
  VORTEX_ASSIGN_OR_RETURN(dg.cos, up(all.cos.data(), all.cos.size() * 4, {n, hd}, DType::kF32));
  VORTEX_ASSIGN_OR_RETURN(dg.sin, up(all.sin.data(), all.sin.size() * 4, {n, hd}, DType::kF32));
  return &st.grids.emplace(std::move(key), std::move(dg)).first->second;
}

Result<Tensor> VisionTower::upload_pixels(const std::vector<VisionInput>& inputs, int64_t rows) const {
  Backend& be = *backend_;
  DeviceState& st = *device_;
  const int64_t cols = 3LL * cfg_.temporal_patch * cfg_.patch * cfg_.patch;
  VORTEX_ASSIGN_OR_RETURN(Tensor px, be.alloc({rows, cols}, DType::kBF16));  // [sum N, 3 T P P]
  int64_t f32_rows = 0, u8_bytes = 0;
  for (const VisionInput& in : inputs) {
    if (in.pixel_values.defined()) f32_rows += in.rows();
    else u8_bytes += in.rgb.numel();
  }
  std::lock_guard<std::mutex> lock(st.staging_mutex);
  // The last upload from the staging rows must have been read before they are rewritten.
  VORTEX_RETURN_IF_ERROR(be.wait_host(st.staging_fence.get()));
  st.staging_fence.reset();
  if (f32_rows > 0 && (!st.staging.defined() || st.staging.dim(0) < f32_rows)) {
    VORTEX_ASSIGN_OR_RETURN(st.staging, be.alloc_host({f32_rows, cols}, DType::kBF16));
  }
  if (u8_bytes > 0 && (!st.staging_u8.defined() || st.staging_u8.dim(0) < u8_bytes)) {
    VORTEX_ASSIGN_OR_RETURN(st.staging_u8, be.alloc_host({u8_bytes}, DType::kU8));
  }
  int64_t at = 0, staged_rows = 0, staged_bytes = 0;
  for (const VisionInput& in : inputs) {
    const int64_t n = in.rows();
    VORTEX_ASSIGN_OR_RETURN(Tensor dst, px.narrow(0, at, n));  // [N, 3 T P P] bf16 rows of this image
    if (in.pixel_values.defined()) {
      // The processor's FP32 values rounded to BF16 (RNE), as transformers casts pixel_values to the model's dtype;
      // spread over the host threads (the result does not depend on their number).
      VORTEX_ASSIGN_OR_RETURN(Tensor host, st.staging.narrow(0, staged_rows, n));  // [N, 3 T P P] bf16
      const float* src = in.pixel_values.data<float>();
      uint16_t* out = host.data<uint16_t>();
      parallel_for_ranges(static_cast<size_t>(n * cols), 0, 1, [&](size_t begin, size_t end) {
        for (size_t i = begin; i < end; ++i) out[i] = bf16_bits_from_f32(src[i]);
      });
      VORTEX_RETURN_IF_ERROR(be.upload_async(host, dst));
      staged_rows += n;
    } else {
      // The u8 image (3 bytes a pixel) up, the rows built on the device (Backend::vision_pixel_rows).
      const int64_t bytes = in.rgb.numel();
      VORTEX_ASSIGN_OR_RETURN(Tensor flat, st.staging_u8.narrow(0, staged_bytes, bytes));
      VORTEX_ASSIGN_OR_RETURN(Tensor host, flat.reshape(in.rgb.shape()));  // [H, W, 3] u8
      std::memcpy(host.raw_data(), in.rgb.raw_data(), static_cast<size_t>(bytes));
      VORTEX_ASSIGN_OR_RETURN(Tensor img, be.alloc(in.rgb.shape(), DType::kU8));
      VORTEX_RETURN_IF_ERROR(be.upload_async(host, img));
      VORTEX_RETURN_IF_ERROR(
          be.vision_pixel_rows(img, in.mean255, in.std255, cfg_.patch, cfg_.temporal_patch, cfg_.merge, dst));
      staged_bytes += bytes;
    }
    at += n;
  }
  VORTEX_ASSIGN_OR_RETURN(st.staging_fence, be.fence_compute());
  return px;
}

Result<VisionTower::Output> VisionTower::forward_device(const std::vector<VisionInput>& inputs) const {
  if (backend_ == nullptr) return invalid_argument("VisionTower::forward_device needs a tower loaded with a backend");
  if (inputs.empty()) return invalid_argument("vision tower: no image");
  for (const VisionInput& in : inputs) VORTEX_RETURN_IF_ERROR(check_input(in));
  Backend& be = *backend_;
  const DeviceState& st = *device_;
  const VisionConfig& c = cfg_;
  const int64_t d = c.hidden, m2 = static_cast<int64_t>(c.merge) * c.merge, hd = c.head_dim();
  int64_t n = 0;  // rows of all images
  bool same_size = true;
  for (const VisionInput& in : inputs) {
    n += in.rows();
    same_size = same_size && in.rows() == inputs.front().rows();
  }
  const int64_t nm = n / m2;
  const DeviceGrid* grid = nullptr;
  Tensor x;  // [sum N, D] bf16
  {
    BackendRegion region(be, "vision.patch_embed");
    VORTEX_ASSIGN_OR_RETURN(grid, device_grid(inputs));
    // Patch embedding: the pixels in BF16 through the BF16 GEMM (transformers' Conv3d on BF16 patches).
    VORTEX_ASSIGN_OR_RETURN(Tensor px, upload_pixels(inputs, n));  // [sum N, 3 T P P] bf16
    VORTEX_ASSIGN_OR_RETURN(x, be.alloc({n, d}, DType::kBF16));
    VORTEX_RETURN_IF_ERROR(be.linear(px, st.patch_embed.w, &st.patch_embed.b, x));
    VORTEX_RETURN_IF_ERROR(be.pos_embed_add(x, st.pos_table, grid->tap_index, grid->tap_weight));
  }

  VORTEX_ASSIGN_OR_RETURN(Tensor h, be.alloc({n, d}, DType::kBF16));        // normed rows
  VORTEX_ASSIGN_OR_RETURN(Tensor qkv, be.alloc({n, 3 * d}, DType::kBF16));  // [N, 3D]
  VORTEX_ASSIGN_OR_RETURN(Tensor att, be.alloc({n, d}, DType::kBF16));
  // The fused program (fc1 + GELU, projection + residual in the GEMM epilogues) where the backend has it.
  const bool fused = fused_epilogues_ && be.has_vision_epilogues();
  Tensor y;  // [N, D] bf16: the unfused program's GEMM outputs before their residual add
  if (!fused) {
    VORTEX_ASSIGN_OR_RETURN(y, be.alloc({n, d}, DType::kBF16));
  }
  VORTEX_ASSIGN_OR_RETURN(Tensor mid, be.alloc({n, c.intermediate}, DType::kBF16));  // [N, I]
  VORTEX_ASSIGN_OR_RETURN(Tensor qk, qkv.narrow(1, 0, 2 * d));                       // [N, 2D] view: q and k
  VORTEX_ASSIGN_OR_RETURN(Tensor q, qkv.narrow(1, 0, d));                            // [N, D] views
  VORTEX_ASSIGN_OR_RETURN(Tensor k, qkv.narrow(1, d, d));
  VORTEX_ASSIGN_OR_RETURN(Tensor v, qkv.narrow(1, 2 * d, d));
  const SegmentTable no_segments;
  // The BF16 program: through Vortex's own kernel where the backend's policy runs it (sm_90: head_dim 72 included,
  // src/cuda/attention/bf16_attention.h), else the backend's SDPA (cuDNN; the cpu backend's reference).
  ExecOptions opts;
  opts.attention =
      be.default_options().attention == AttentionKind::kBf16Owned ? AttentionKind::kBf16Owned : AttentionKind::kSdpa;

  // Attention within each image: one batched call over equal-sized images, else one call per image's rows.
  auto attention = [&]() -> Status {
    if (same_size)
      return be.attention_batched(q, k, v, static_cast<int64_t>(inputs.size()), c.heads, static_cast<int>(hd), att,
                                  opts);
    int64_t at = 0;
    for (const VisionInput& in : inputs) {
      const int64_t rows = in.rows();
      VORTEX_ASSIGN_OR_RETURN(Tensor qi, q.narrow(0, at, rows));
      VORTEX_ASSIGN_OR_RETURN(Tensor ki, k.narrow(0, at, rows));
      VORTEX_ASSIGN_OR_RETURN(Tensor vi, v.narrow(0, at, rows));
      VORTEX_ASSIGN_OR_RETURN(Tensor oi, att.narrow(0, at, rows));
      VORTEX_RETURN_IF_ERROR(be.attention(qi, ki, vi, c.heads, static_cast<int>(hd), oi, opts));
      at += rows;
    }
    return Status::Ok();
  };
  // LayerNorm reads the BF16 rows exactly into FP32 (Backend::layer_norm on bf16 x: no FP32 copy of the rows).
  auto layer_norm = [&](const Tensor& rows, const DeviceNorm& nm_w, Tensor& out) -> Status {
    return be.layer_norm(rows, nm_w.w, nm_w.b, 1e-6f, out);
  };
  // A merger on x: LayerNorm over D (then rows regrouped by 2x2 blocks) or over the regrouped 4D rows, fc1, exact
  // GELU, fc2 -> [sum N / 4, out_hidden] bf16. Merge blocks never straddle two images (each has N % 4 == 0).
  auto merge = [&](const DeviceMerger& mg) -> Result<Tensor> {
    BackendRegion region(be, "vision.merger");
    VORTEX_ASSIGN_OR_RETURN(Tensor xg, x.reshape({nm, m2 * d}));  // [N/4, 4D]
    VORTEX_ASSIGN_OR_RETURN(Tensor hn, be.alloc({n, d}, DType::kBF16));
    VORTEX_ASSIGN_OR_RETURN(Tensor hg, hn.reshape({nm, m2 * d}));
    if (mg.postshuffle) {
      VORTEX_RETURN_IF_ERROR(layer_norm(xg, mg.norm, hg));
    } else {
      VORTEX_RETURN_IF_ERROR(layer_norm(x, mg.norm, hn));
    }
    VORTEX_ASSIGN_OR_RETURN(Tensor a, be.alloc({nm, m2 * d}, DType::kBF16));
    VORTEX_RETURN_IF_ERROR(be.linear(hg, mg.fc1.w, &mg.fc1.b, a));
    VORTEX_RETURN_IF_ERROR(be.gelu(a, false));
    VORTEX_ASSIGN_OR_RETURN(Tensor o, be.alloc({nm, c.out_hidden}, DType::kBF16));
    VORTEX_RETURN_IF_ERROR(be.linear(a, mg.fc2.w, &mg.fc2.b, o));
    return o;
  };

  Output out;
  for (size_t li = 0; li < st.blocks.size(); ++li) {
    const DeviceBlock& blk = st.blocks[li];
    {
      BackendRegion region(be, "vision.norm1_qkv_rope");
      VORTEX_RETURN_IF_ERROR(layer_norm(x, blk.norm1, h));
      VORTEX_RETURN_IF_ERROR(be.linear(h, blk.qkv.w, &blk.qkv.b, qkv));
      // q and k rotated in one pass: the [N, 2D] view as 2 * heads heads sharing each row's cos/sin.
      VORTEX_RETURN_IF_ERROR(be.rope_fp32(qk, grid->cos, grid->sin, 2 * c.heads, static_cast<int>(hd)));
    }
    {
      BackendRegion region(be, "vision.attention");
      VORTEX_RETURN_IF_ERROR(attention());
    }
    {
      BackendRegion region(be, "vision.proj_residual");
      if (fused) {
        VORTEX_RETURN_IF_ERROR(be.linear_residual(att, blk.proj.w, &blk.proj.b, x));
      } else {
        VORTEX_RETURN_IF_ERROR(be.linear(att, blk.proj.w, &blk.proj.b, y));
        VORTEX_RETURN_IF_ERROR(be.gate_add(x, y, nullptr, 0, no_segments));
      }
    }
    {
      BackendRegion region(be, "vision.mlp");
      VORTEX_RETURN_IF_ERROR(layer_norm(x, blk.norm2, h));
      if (fused) {
        VORTEX_RETURN_IF_ERROR(be.linear_gelu_tanh(h, blk.fc1.w, &blk.fc1.b, mid));
        VORTEX_RETURN_IF_ERROR(be.linear_residual(mid, blk.fc2.w, &blk.fc2.b, x));
      } else {
        VORTEX_RETURN_IF_ERROR(be.linear(h, blk.fc1.w, &blk.fc1.b, mid));
        VORTEX_RETURN_IF_ERROR(be.gelu(mid, true));
        VORTEX_RETURN_IF_ERROR(be.linear(mid, blk.fc2.w, &blk.fc2.b, y));
        VORTEX_RETURN_IF_ERROR(be.gate_add(x, y, nullptr, 0, no_segments));
      }
    }
    for (size_t t = 0; t < c.deepstack.size(); ++t)
      if (c.deepstack[t] == static_cast<int>(li)) {
        VORTEX_ASSIGN_OR_RETURN(Tensor f, merge(st.deepstack[t]));
        out.deepstack.push_back(std::move(f));
      }
  }
  VORTEX_ASSIGN_OR_RETURN(out.merged, merge(st.merger));
  out.last_hidden = x;
  return out;
}

Result<VisionTower::Output> VisionTower::forward(const std::vector<VisionInput>& inputs, bool with_last_hidden) const {
  if (inputs.empty()) return invalid_argument("vision tower: no image");
  for (const VisionInput& in : inputs) VORTEX_RETURN_IF_ERROR(check_input(in));
  if (backend_ != nullptr) return forward_backend(inputs, with_last_hidden);
  // The FP32 reference, one image after another, outputs stacked in input order.
  std::vector<Output> parts;
  for (const VisionInput& in : inputs) {
    VORTEX_ASSIGN_OR_RETURN(Output o, forward(in));
    parts.push_back(std::move(o));
  }
  auto stack = [&](auto pick) {
    int64_t rows = 0;
    for (const Output& o : parts) rows += pick(o).dim(0);
    Tensor t = Tensor::empty({rows, pick(parts.front()).dim(1)}, DType::kF32);
    size_t at = 0;
    for (const Output& o : parts) {
      std::memcpy(t.data<float>() + at, pick(o).template data<float>(), pick(o).nbytes());
      at += static_cast<size_t>(pick(o).numel());
    }
    return t;
  };
  Output out;
  if (with_last_hidden) out.last_hidden = stack([](const Output& o) -> const Tensor& { return o.last_hidden; });
  out.merged = stack([](const Output& o) -> const Tensor& { return o.merged; });
  for (size_t i = 0; i < parts.front().deepstack.size(); ++i)
    out.deepstack.push_back(stack([i](const Output& o) -> const Tensor& { return o.deepstack[i]; }));
  return out;
}

Result<VisionTower::Output> VisionTower::forward_backend(const std::vector<VisionInput>& inputs,
                                                         bool with_last_hidden) const {
  VORTEX_ASSIGN_OR_RETURN(Output dev, forward_device(inputs));
  Backend& be = *backend_;
  DeviceState& st = *device_;
  std::vector<Tensor*> outs = {&dev.merged};
  for (Tensor& f : dev.deepstack) outs.push_back(&f);
  if (with_last_hidden) outs.push_back(&dev.last_hidden);
  else dev.last_hidden = Tensor();
  int64_t total = 0;
  for (const Tensor* t : outs) total += t->numel();
  std::lock_guard<std::mutex> lock(st.out_mutex);
  if (!st.out_staging.defined() || st.out_staging.numel() < total) {
    VORTEX_ASSIGN_OR_RETURN(st.out_staging, be.alloc_host({total}, DType::kBF16));
  }
  // Every output queued as one BF16 copy into the page-locked staging, then one wait for them all.
  std::vector<Tensor> staged;
  std::vector<uint64_t> tickets;
  int64_t at = 0;
  for (const Tensor* t : outs) {
    VORTEX_ASSIGN_OR_RETURN(Tensor flat, st.out_staging.narrow(0, at, t->numel()));
    VORTEX_ASSIGN_OR_RETURN(Tensor host, flat.reshape(t->shape()));
    VORTEX_ASSIGN_OR_RETURN(uint64_t ticket, be.download_async(*t, host));
    staged.push_back(std::move(host));
    tickets.push_back(ticket);
    at += t->numel();
  }
  for (uint64_t ticket : tickets) VORTEX_RETURN_IF_ERROR(be.wait_download(ticket));
  // BF16 -> FP32 host (exact), spread over the host threads.
  for (size_t i = 0; i < outs.size(); ++i) {
    Tensor f = Tensor::empty(outs[i]->shape(), DType::kF32);
    const uint16_t* src = staged[i].data<uint16_t>();
    float* dst = f.data<float>();
    parallel_for_ranges(static_cast<size_t>(f.numel()), 0, 1, [&](size_t begin, size_t end) {
      for (size_t j = begin; j < end; ++j) dst[j] = f32_from_bf16_bits(src[j]);
    });
    *outs[i] = std::move(f);
  }
  return dev;
}

}  // namespace vortex
