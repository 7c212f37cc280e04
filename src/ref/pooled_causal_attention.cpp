// Reference pre_block attention of the audio VAE encoder (diffusers MiniMaxH3AudioEncoder): causal attention per head
// over channel-major qkv [B, 3D, T], the key bias zero (folded into qkv by the caller), each head's output rounded to
// FP32, the heads mean-pooled (FP64 sum in head order, rounded) and adaptively average-pooled from the head width to
// C channels (FP64 sum over each bin, rounded). Scores, softmax and P.V run in FP64 as src/ref/vae_ops.h states.
// Rows are (signal, position). Tested in tests/ref/audio_encoder_ops_test.cpp and
// tests/cuda/audio_encoder_ops_test.cpp.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "ref/audio_encoder_internal.h"
#include "ref/ref_internal.h"
#include "ref/vae_ops.h"

namespace vortex::ref {

Status pooled_causal_attention(const Tensor& qkv, int heads, Tensor& out, const RowRunner& run) {
  VORTEX_ASSIGN_OR_RETURN(const int64_t hd, ref::check_pooled_attention(qkv, heads, out, Device::kCpu));
  const int64_t b_n = qkv.dim(0), t_n = qkv.dim(2), d = qkv.dim(1) / 3, c = out.dim(1);
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  run(b_n * t_n, [&](int64_t begin, int64_t end) {
    std::vector<double> p(static_cast<size_t>(t_n)), o(static_cast<size_t>(hd)), mean(static_cast<size_t>(hd));
    std::vector<float> head_out(static_cast<size_t>(hd));
    for (int64_t job = begin; job < end; ++job) {
      const int64_t b = job / t_n, i = job % t_n;
      const float* base = qkv.data<float>() + b * 3 * d * t_n;
      const float* q = base;                // q[ch * T + t]
      const float* kk = base + d * t_n;     // k
      const float* v = base + 2 * d * t_n;  // v
      std::fill(mean.begin(), mean.end(), 0.0);
      for (int64_t h = 0; h < heads; ++h) {
        double mx = -INFINITY;
        for (int64_t j = 0; j <= i; ++j) {
          double s = 0.0;
          for (int64_t e = 0; e < hd; ++e)
            s += static_cast<double>(q[(h * hd + e) * t_n + i]) * kk[(h * hd + e) * t_n + j];
          p[static_cast<size_t>(j)] = s * scale;
          mx = std::max(mx, p[static_cast<size_t>(j)]);
        }
        double sum = 0.0;
        for (int64_t j = 0; j <= i; ++j) sum += (p[static_cast<size_t>(j)] = std::exp(p[static_cast<size_t>(j)] - mx));
        std::fill(o.begin(), o.end(), 0.0);
        for (int64_t j = 0; j <= i; ++j) {
          const double w = p[static_cast<size_t>(j)] / sum;
          for (int64_t e = 0; e < hd; ++e) o[static_cast<size_t>(e)] += w * v[(h * hd + e) * t_n + j];
        }
        for (int64_t e = 0; e < hd; ++e)
          head_out[static_cast<size_t>(e)] = static_cast<float>(o[static_cast<size_t>(e)]);
        for (int64_t e = 0; e < hd; ++e) mean[static_cast<size_t>(e)] += head_out[static_cast<size_t>(e)];
      }
      std::vector<float> head_mean(static_cast<size_t>(hd));
      for (int64_t e = 0; e < hd; ++e)
        head_mean[static_cast<size_t>(e)] =
            static_cast<float>(mean[static_cast<size_t>(e)] / static_cast<double>(heads));
      float* op = out.data<float>() + b * c * t_n + i;
      for (int64_t oc = 0; oc < c; ++oc) {  // adaptive_avg_pool1d bins [floor(oc * hd / C), ceil((oc + 1) * hd / C))
        const int64_t lo = oc * hd / c, hi = ((oc + 1) * hd + c - 1) / c;
        double s = 0.0;
        for (int64_t e = lo; e < hi; ++e) s += head_mean[static_cast<size_t>(e)];
        op[oc * t_n] = static_cast<float>(s / static_cast<double>(hi - lo));
      }
    }
  });
  return Status::Ok();
}

}  // namespace vortex::ref
