// CPU reference programs of the vision tower and video VAE encoder ops (see src/ref/encoder_ops.h). BF16 rows are
// read exactly into FP32; every FP32 product and sum is a separate rounded operation (volatile stops contraction);
// GroupNorm statistics are FP64 as in the FP32 encoder reference. Work is split over rows or output pixels only.
#include "ref/encoder_ops.h"

#include <cmath>
#include <string>

#include "ref/ref_internal.h"

namespace vortex::ref {
namespace {

inline float gelu_tanh_f32(float x) {
  const float c = 0.7978845608028654f;  // sqrt(2 / pi)
  volatile float cube = x * x * x;
  volatile float inner = x + 0.044715f * cube;
  volatile float t = std::tanh(c * inner);
  volatile float half = 0.5f * x;
  return half * (1.0f + t);
}
inline float gelu_erf_f32(float x) {
  volatile float e = std::erf(x * 0.7071067811865476f);
  volatile float half = 0.5f * x;
  return half * (1.0f + e);
}

inline int reflect(int i, int n) {
  if (i < 0) return -i;
  if (i >= n) return 2 * (n - 1) - i;
  return i;
}

}  // namespace

Status check_ndhwc(const Tensor& t, const char* what) {
  if (!t.defined() || t.ndim() != 5 || t.dtype() != DType::kF32 || !t.is_contiguous())
    return invalid_argument(std::string(what) + " must be a contiguous [B, T, H, W, C] f32 tensor, got " +
                            (t.defined() ? t.describe() : std::string("nothing")));
  return Status::Ok();
}

Status check_pad_causal_reflect(const Tensor& x, int front, int top, int bottom, int left, int right,
                                const Tensor& out) {
  VORTEX_RETURN_IF_ERROR(check_ndhwc(x, "pad_causal_reflect x"));
  VORTEX_RETURN_IF_ERROR(check_ndhwc(out, "pad_causal_reflect out"));
  const int64_t h = x.dim(2), w = x.dim(3);
  if (front < 0 || top < 0 || bottom < 0 || left < 0 || right < 0 || top >= h || bottom >= h || left >= w || right >= w)
    return invalid_argument("pad_causal_reflect: pads must be >= 0 and reflect pads smaller than the input");
  const Shape want{x.dim(0), x.dim(1) + front, h + top + bottom, w + left + right, x.dim(4)};
  if (out.shape() != want)
    return invalid_argument("pad_causal_reflect: out must be " + shape_to_string(want) + ", got " + out.describe());
  return Status::Ok();
}

Status check_group_norm_frames(const Tensor& x, const Tensor& weight, const Tensor& bias, int groups,
                               const Tensor& out) {
  VORTEX_RETURN_IF_ERROR(check_ndhwc(x, "group_norm_frames x"));
  VORTEX_RETURN_IF_ERROR(check_ndhwc(out, "group_norm_frames out"));
  if (out.shape() != x.shape()) return invalid_argument("group_norm_frames: out must have x's shape");
  const int64_t c = x.dim(4);
  if (groups <= 0 || c % groups)
    return invalid_argument("group_norm_frames: " + std::to_string(c) + " channels do not split into " +
                            std::to_string(groups) + " groups");
  for (const Tensor* t : {&weight, &bias})
    if (!t->defined() || t->dtype() != DType::kF32 || t->numel() != c || !t->is_contiguous())
      return invalid_argument("group_norm_frames: weight and bias must be contiguous [" + std::to_string(c) + "] f32");
  return Status::Ok();
}

Status check_conv3d(const Tensor& x, const Tensor& weight, const Tensor& bias, int stride_t, int stride_s,
                    const Tensor& out) {
  VORTEX_RETURN_IF_ERROR(check_ndhwc(x, "conv3d x"));
  VORTEX_RETURN_IF_ERROR(check_ndhwc(weight, "conv3d weight"));
  VORTEX_RETURN_IF_ERROR(check_ndhwc(out, "conv3d out"));
  const int64_t t = x.dim(1), h = x.dim(2), w = x.dim(3), ci = x.dim(4);
  const int64_t co = weight.dim(0), kt = weight.dim(1), kh = weight.dim(2), kw = weight.dim(3);
  if (weight.dim(4) != ci || stride_t < 1 || stride_s < 1 || kt > t || kh > h || kw > w)
    return invalid_argument("conv3d: weight " + weight.describe() + " does not fit x " + x.describe() +
                            " (channels last, strides >= 1, kernel no larger than the input)");
  if (!bias.defined() || bias.dtype() != DType::kF32 || bias.numel() != co || !bias.is_contiguous())
    return invalid_argument("conv3d: bias must be contiguous [" + std::to_string(co) + "] f32");
  const Shape want{x.dim(0), (t - kt) / stride_t + 1, (h - kh) / stride_s + 1, (w - kw) / stride_s + 1, co};
  if (out.shape() != want)
    return invalid_argument("conv3d: out must be " + shape_to_string(want) + ", got " + out.describe());
  return Status::Ok();
}

Status gelu(Tensor& x, bool tanh_approx, const RowRunner& run) {
  VORTEX_RETURN_IF_ERROR(check_rows(x, "gelu x", DType::kBF16, -1, -1));
  const int64_t s = x.dim(0), f = x.dim(1);
  run(s, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      uint16_t* xr = row_ptr<uint16_t>(x, r);
      for (int64_t i = 0; i < f; ++i) {
        const float v = f32_from_bf16_bits(xr[i]);
        xr[i] = bf16_bits_from_f32(tanh_approx ? gelu_tanh_f32(v) : gelu_erf_f32(v));
      }
    }
  });
  return Status::Ok();
}

Status rope_fp32(Tensor& x, const Tensor& cos, const Tensor& sin, int num_heads, int head_dim, const RowRunner& run) {
  if (num_heads <= 0 || head_dim <= 0 || head_dim % 2)
    return invalid_argument("rope_fp32: num_heads must be positive and head_dim positive and even");
  VORTEX_RETURN_IF_ERROR(check_rows(x, "rope_fp32 x", DType::kBF16, -1, static_cast<int64_t>(num_heads) * head_dim));
  const int64_t s = x.dim(0);
  for (const Tensor* t : {&cos, &sin})
    if (!t->defined() || t->dtype() != DType::kF32 || t->ndim() != 2 || t->dim(0) != s || t->dim(1) != head_dim ||
        !t->is_contiguous() || t->device() != Device::kCpu)
      return invalid_argument("rope_fp32: cos and sin must be contiguous host [" + std::to_string(s) + ", " +
                              std::to_string(head_dim) + "] f32, got " + (t->defined() ? t->describe() : "nothing"));
  const int half = head_dim / 2;
  run(s, [&](int64_t begin, int64_t end) {
    std::vector<float> v(static_cast<size_t>(head_dim));
    for (int64_t r = begin; r < end; ++r) {
      const float* cr = cos.data<float>() + r * head_dim;
      const float* sr = sin.data<float>() + r * head_dim;
      for (int h = 0; h < num_heads; ++h) {
        uint16_t* xr = row_ptr<uint16_t>(x, r) + static_cast<int64_t>(h) * head_dim;
        for (int i = 0; i < head_dim; ++i) v[static_cast<size_t>(i)] = f32_from_bf16_bits(xr[i]);
        for (int i = 0; i < head_dim; ++i) {
          const float rot = i < half ? -v[static_cast<size_t>(i + half)] : v[static_cast<size_t>(i - half)];
          volatile float a = v[static_cast<size_t>(i)] * cr[i];
          volatile float b = rot * sr[i];
          xr[i] = bf16_bits_from_f32(a + b);
        }
      }
    }
  });
  return Status::Ok();
}

Status pos_embed_add(Tensor& x, const Tensor& table, const Tensor& index, const Tensor& weight, const RowRunner& run) {
  VORTEX_RETURN_IF_ERROR(check_rows(x, "pos_embed_add x", DType::kBF16, -1, -1));
  const int64_t s = x.dim(0), d = x.dim(1);
  VORTEX_RETURN_IF_ERROR(check_rows(table, "pos_embed_add table", DType::kBF16, -1, d));
  if (!table.is_contiguous()) return invalid_argument("pos_embed_add: table must be contiguous");
  if (!index.defined() || index.dtype() != DType::kI32 || index.ndim() != 2 || index.dim(0) != s || index.dim(1) != 4 ||
      !index.is_contiguous() || !weight.defined() || weight.dtype() != DType::kF32 || weight.ndim() != 2 ||
      weight.dim(0) != s || weight.dim(1) != 4 || !weight.is_contiguous())
    return invalid_argument("pos_embed_add: index [S, 4] i32 and weight [S, 4] f32 must be contiguous with S = " +
                            std::to_string(s));
  const int64_t p = table.dim(0);
  for (int64_t i = 0; i < s * 4; ++i)
    if (index.data<int32_t>()[i] < 0 || index.data<int32_t>()[i] >= p)
      return invalid_argument("pos_embed_add: index " + std::to_string(index.data<int32_t>()[i]) +
                              " outside the table of " + std::to_string(p) + " rows");
  run(s, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      uint16_t* xr = row_ptr<uint16_t>(x, r);
      const int32_t* ir = index.data<int32_t>() + r * 4;
      const float* wr = weight.data<float>() + r * 4;
      for (int64_t j = 0; j < d; ++j) {
        volatile float acc = f32_from_bf16_bits(table.data<uint16_t>()[ir[0] * d + j]) * wr[0];
        for (int t = 1; t < 4; ++t) {
          volatile float prod = f32_from_bf16_bits(table.data<uint16_t>()[ir[t] * d + j]) * wr[t];
          acc = acc + prod;
        }
        const float pe = round_bf16(acc);
        xr[j] = bf16_bits_from_f32(f32_from_bf16_bits(xr[j]) + pe);
      }
    }
  });
  return Status::Ok();
}

Status pad_causal_reflect(const Tensor& x, int front, int top, int bottom, int left, int right, Tensor& out,
                          const RowRunner& run) {
  VORTEX_RETURN_IF_ERROR(check_pad_causal_reflect(x, front, top, bottom, left, right, out));
  const int64_t t = x.dim(1), h = x.dim(2), w = x.dim(3), c = x.dim(4);
  const int64_t to = out.dim(1), ho = out.dim(2), wo = out.dim(3);
  run(out.dim(0) * to * ho, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t i = row % ho, f = (row / ho) % to, bi = row / (ho * to);
      float* dst = out.data<float>() + row * wo * c;
      if (f < front) {
        std::fill(dst, dst + wo * c, 0.0f);
        continue;
      }
      const int64_t si = reflect(static_cast<int>(i - top), static_cast<int>(h));
      const float* src = x.data<float>() + (((bi * t + (f - front)) * h + si) * w) * c;
      for (int64_t j = 0; j < wo; ++j) {
        const int64_t sj = reflect(static_cast<int>(j - left), static_cast<int>(w));
        std::copy(src + sj * c, src + sj * c + c, dst + j * c);
      }
    }
  });
  return Status::Ok();
}

Status group_norm_frames(const Tensor& x, const Tensor& weight, const Tensor& bias, int groups, float eps, bool silu,
                         Tensor& out, const RowRunner& run) {
  VORTEX_RETURN_IF_ERROR(check_group_norm_frames(x, weight, bias, groups, out));
  const int64_t c = x.dim(4), frames = x.dim(0) * x.dim(1), hw = x.dim(2) * x.dim(3);
  const int64_t cg = c / groups;
  const float* wv = weight.data<float>();
  const float* bv = bias.data<float>();
  run(frames * groups, [&](int64_t begin, int64_t end) {
    for (int64_t job = begin; job < end; ++job) {
      const int64_t f = job / groups, g = job % groups;
      const float* xs = x.data<float>() + f * hw * c + g * cg;
      float* ys = out.data<float>() + f * hw * c + g * cg;
      double sum = 0.0, sq = 0.0;
      for (int64_t cc = 0; cc < cg; ++cc)
        for (int64_t p = 0; p < hw; ++p) sum += xs[p * c + cc];
      const double n = static_cast<double>(cg) * static_cast<double>(hw), mean = sum / n;
      for (int64_t cc = 0; cc < cg; ++cc)
        for (int64_t p = 0; p < hw; ++p) sq += (xs[p * c + cc] - mean) * (xs[p * c + cc] - mean);
      const float m = static_cast<float>(mean), rstd = static_cast<float>(1.0 / std::sqrt(sq / n + eps));
      for (int64_t p = 0; p < hw; ++p)
        for (int64_t cc = 0; cc < cg; ++cc) {
          const int64_t ch = g * cg + cc;
          volatile float d = xs[p * c + cc] - m;
          volatile float dr = d * rstd;
          volatile float dw = dr * wv[ch];
          float v = dw + bv[ch];
          if (silu) {
            volatile float den = 1.0f + std::exp(-v);
            v = v / den;
          }
          ys[p * c + cc] = v;
        }
    }
  });
  return Status::Ok();
}

Status conv3d(const Tensor& x, const Tensor& weight, const Tensor& bias, int stride_t, int stride_s, Tensor& out,
              const RowRunner& run) {
  VORTEX_RETURN_IF_ERROR(check_conv3d(x, weight, bias, stride_t, stride_s, out));
  const int64_t t = x.dim(1), h = x.dim(2), w = x.dim(3), ci = x.dim(4);
  const int64_t co = weight.dim(0), kt = weight.dim(1), kh = weight.dim(2), kw = weight.dim(3);
  const int64_t to = out.dim(1), ho = out.dim(2), wo = out.dim(3);
  const float* xp = x.data<float>();
  const float* wp = weight.data<float>();
  run(out.dim(0) * to * ho, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t i = row % ho, f = (row / ho) % to, bi = row / (ho * to);
      for (int64_t j = 0; j < wo; ++j)
        for (int64_t o = 0; o < co; ++o) {
          float s = 0.0f;
          for (int64_t c = 0; c < ci; ++c)
            for (int64_t a = 0; a < kt; ++a)
              for (int64_t p = 0; p < kh; ++p)
                for (int64_t q = 0; q < kw; ++q) {
                  const float xv =
                      xp[(((bi * t + f * stride_t + a) * h + i * stride_s + p) * w + j * stride_s + q) * ci + c];
                  volatile float prod = wp[(((o * kt + a) * kh + p) * kw + q) * ci + c] * xv;
                  s = s + prod;
                }
          out.data<float>()[(row * wo + j) * co + o] = s + bias.data<float>()[o];
        }
    }
  });
  return Status::Ok();
}

namespace {

// y[S, N] f32 = FP32(FP64 ascending-k sum of a w^T + b): linear() on the exact FP32 widening of a, w and the bias.
Result<Tensor> linear_f32_of_bf16(const Tensor& a, const LinearWeight& w, const Tensor* bias, int64_t out_cols,
                                  const char* op, const RowRunner& run) {
  VORTEX_RETURN_IF_ERROR(check_rows(a, "a", DType::kBF16, -1, -1).with_context(op));
  if (w.format != QuantFormat::kNone || !w.weight.defined() || w.weight.dtype() != DType::kBF16 ||
      w.weight.ndim() != 2 || w.weight.dim(0) != out_cols || w.weight.dim(1) != a.dim(1))
    return invalid_argument(std::string(op) + ": w must be a bf16 [" + std::to_string(out_cols) + ", " +
                            std::to_string(a.dim(1)) + "] weight, got " +
                            (w.weight.defined() ? w.weight.describe() : "nothing"));
  if (bias && (!bias->defined() || bias->dtype() != DType::kBF16 || bias->numel() != out_cols))
    return invalid_argument(std::string(op) + ": bias must be [" + std::to_string(out_cols) + "] bf16");
  auto widen = [](const Tensor& t) -> Result<Tensor> {
    Tensor f = Tensor::empty(t.shape(), DType::kF32);
    VORTEX_RETURN_IF_ERROR(cast(t, f));
    return f;
  };
  VORTEX_ASSIGN_OR_RETURN(Tensor af, widen(a));  // [S, K] f32, exact
  LinearWeight wf;
  VORTEX_ASSIGN_OR_RETURN(wf.weight, widen(w.weight));  // [N, K] f32, exact
  Tensor bf;
  if (bias) {
    VORTEX_ASSIGN_OR_RETURN(bf, widen(*bias));
  }
  Tensor y = Tensor::empty({a.dim(0), out_cols}, DType::kF32);  // [S, N] f32
  VORTEX_RETURN_IF_ERROR(linear(af, wf, bias ? &bf : nullptr, y, run).with_context(op));
  return y;
}

}  // namespace

Status linear_gelu_tanh(const Tensor& a, const LinearWeight& w, const Tensor* bias, Tensor& out, const RowRunner& run) {
  VORTEX_RETURN_IF_ERROR(check_rows(out, "linear_gelu_tanh out", DType::kBF16, a.defined() ? a.dim(0) : -1, -1));
  VORTEX_ASSIGN_OR_RETURN(Tensor y, linear_f32_of_bf16(a, w, bias, out.dim(1), "linear_gelu_tanh", run));
  const int64_t n = out.dim(1);
  run(out.dim(0), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* yr = y.data<float>() + r * n;
      uint16_t* o = row_ptr<uint16_t>(out, r);
      for (int64_t j = 0; j < n; ++j) o[j] = bf16_bits_from_f32(gelu_tanh_f32(yr[j]));
    }
  });
  return Status::Ok();
}

Status linear_residual(const Tensor& a, const LinearWeight& w, const Tensor* bias, Tensor& x, const RowRunner& run) {
  VORTEX_RETURN_IF_ERROR(check_rows(x, "linear_residual x", DType::kBF16, a.defined() ? a.dim(0) : -1, -1));
  VORTEX_ASSIGN_OR_RETURN(Tensor y, linear_f32_of_bf16(a, w, bias, x.dim(1), "linear_residual", run));
  const int64_t n = x.dim(1);
  run(x.dim(0), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* yr = y.data<float>() + r * n;
      uint16_t* xr = row_ptr<uint16_t>(x, r);
      for (int64_t j = 0; j < n; ++j) {
        volatile float sum = f32_from_bf16_bits(xr[j]) + yr[j];
        xr[j] = bf16_bits_from_f32(sum);
      }
    }
  });
  return Status::Ok();
}

}  // namespace vortex::ref
