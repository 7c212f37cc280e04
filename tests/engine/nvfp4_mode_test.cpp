// Precision nvfp4 on the cuda backend (GPU label; skips visibly without a device): h3-tiny (synthetic) runs a
// full forward in nvfp4 mode and is finite; one block linear equals "quantize x on the CPU (comfy-kitchen
// encode) + FP64 dot of the dequantized operands" within E1 (two-reference rule); nvfp4-weight-only equals the
// BF16 GEMM on the host-expanded weight bit for bit; the FC2 switch values reach the weights.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "engine/precision.h"
#include "engine/workload.h"
#include "gemm/gpu_test_util.h"
#include "io/quantized_layers.h"
#include "model/h3_spec.h"
#include "ref/nvfp4_quantize.h"
#include "vortex/config.h"
#include "vortex/dtype.h"

namespace vortex {
namespace {

using testing::TwoReference;

Tensor to_host(Backend& b, const Tensor& t) {
  Tensor h = Tensor::empty(t.shape(), t.dtype());
  Status st = b.download(t, h);
  EXPECT_TRUE(st.ok()) << st.to_string();
  return h;
}

std::vector<uint16_t> random_bf16(size_t n, std::mt19937_64& rng, float sd) {
  std::normal_distribution<float> nd(0.0f, sd);
  std::vector<uint16_t> v(n);
  for (auto& x : v) x = bf16_bits_from_f32(nd(rng));
  return v;
}

struct ModeSetup {
  ModelConfig cfg = ModelConfig::h3_tiny();
  std::unique_ptr<Backend> backend;
  H3Weights weights;
};

bool make_setup(ModeSetup& s, uint64_t seed) {
  auto b = make_backend("cuda", 0);
  EXPECT_TRUE(b.ok()) << b.status().to_string();
  if (!b.ok()) return false;
  s.backend = std::move(b).value();
  auto w = synthesize_weights(s.cfg, *s.backend, seed);
  EXPECT_TRUE(w.ok()) << w.status().to_string();
  if (!w.ok()) return false;
  s.weights = std::move(w).value();
  return true;
}

TEST(Nvfp4Mode, LinearMatchesCpuQuantizedFp64Dot) {
  VORTEX_REQUIRE_GPU();
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  ModeSetup s;
  ASSERT_TRUE(make_setup(s, seed));
  // Host copies of the BF16 originals, then the mode.
  std::vector<Tensor> originals;
  for (const LinearWeight* w : {&s.weights.blocks[0].attn_qkv_proj, &s.weights.blocks[0].mlp_fc2})
    originals.push_back(to_host(*s.backend, w->weight));
  PrecisionOptions po;
  po.precision = "nvfp4";
  po.nvfp4_fc2 = "off";
  Status st = apply_precision(s.weights, *s.backend, po);
  ASSERT_TRUE(st.ok()) << st.to_string();
  auto table = ref::RcpApproxTable::default_table();
  ASSERT_TRUE(table.ok()) << table.status().to_string() << " (set VORTEX_DATA_DIR to the repository's data/)";
  ref::Nvfp4Options qopt;
  qopt.rcp = table->get();
  int idx = 0;
  for (const LinearWeight* w : {&s.weights.blocks[0].attn_qkv_proj, &s.weights.blocks[0].mlp_fc2}) {
    SCOPED_TRACE(idx == 0 ? "qkv" : "fc2");
    ASSERT_EQ(w->format, QuantFormat::kNvfp4);
    const int64_t n = w->out_features, k = w->in_features;
    // The device weight is exactly the host reference quantization of the original.
    auto qw = quantize_weight_nvfp4(originals[static_cast<size_t>(idx++)], true);
    ASSERT_TRUE(qw.ok()) << qw.status().to_string();
    Tensor dev_data = to_host(*s.backend, w->weight), dev_scales = to_host(*s.backend, w->weight_scale);
    ASSERT_EQ(std::memcmp(dev_data.raw_data(), qw->weight.raw_data(), dev_data.nbytes()), 0);
    ASSERT_EQ(std::memcmp(dev_scales.raw_data(), qw->weight_scale.raw_data(), dev_scales.nbytes()), 0);
    const ref::Nvfp4Layout wl = ref::nvfp4_layout(n, k);
    const float gw = qw->weight_scale_2.data<float>()[0];
    for (int64_t m : {1, 37, 300}) {
      SCOPED_TRACE("M " + std::to_string(m));
      const std::vector<uint16_t> xh = random_bf16(static_cast<size_t>(m * k), rng, 1.0f);
      Tensor xt = Tensor::empty({m, k}, DType::kBF16);
      std::memcpy(xt.raw_data(), xh.data(), xh.size() * 2);
      auto xd = s.backend->upload(xt);
      ASSERT_TRUE(xd.ok()) << xd.status().to_string();
      auto od = s.backend->alloc({m, n}, DType::kBF16);
      ASSERT_TRUE(od.ok());
      Tensor poison = Tensor::empty({m, n}, DType::kBF16);
      for (int64_t i = 0; i < m * n; ++i) poison.data<uint16_t>()[i] = 0xFFFF;  // NaN
      auto pd = s.backend->upload(poison);
      ASSERT_TRUE(pd.ok());
      ASSERT_TRUE(s.backend->copy(*pd, *od).ok());
      st = s.backend->linear(*xd, *w, nullptr, *od);
      ASSERT_TRUE(st.ok()) << st.to_string();
      Tensor oh = to_host(*s.backend, *od);
      // CPU: the same activation bytes the GPU producer must emit (E0), then FP64 / FP32-program dots.
      const float gx = ref::nvfp4_global_scale_from_amax(ref::bf16_abs_max_bits(xh.data(), m, k, k));
      const ref::Nvfp4Layout xl = ref::nvfp4_layout(m, k);
      std::vector<uint8_t> xdata(xl.data_bytes()), xscales(xl.scale_bytes());
      ASSERT_TRUE(ref::nvfp4_quantize(xh.data(), m, k, k, gx, qopt, xdata.data(), xscales.data()).ok());
      const float alpha = gx * gw;
      TwoReference tr;
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double ref = 0;
          float acc = 0;
          for (int64_t t = 0; t < k; ++t) {
            const float a = ref::nvfp4_dequantized_value(xdata.data(), xscales.data(), xl, i, t);
            const float b = ref::nvfp4_dequantized_value(qw->weight.data<uint8_t>(), qw->weight_scale.data<uint8_t>(), wl, j, t);
            ref += static_cast<double>(a) * b;
            acc += a * b;
          }
          tr.add(f32_from_bf16_bits(oh.data<uint16_t>()[i * n + j]), round_bf16(alpha * acc),
                 static_cast<double>(gx) * static_cast<double>(gw) * ref);
        }
      std::printf("[nvfp4 mode linear N=%lld K=%lld M=%lld] %s\n", static_cast<long long>(n), static_cast<long long>(k),
                  static_cast<long long>(m), tr.summary().c_str());
      EXPECT_TRUE(tr.passes(1e-5, 1e-6)) << tr.summary();
    }
  }
}

TEST(Nvfp4Mode, H3TinyForwardIsFinite) {
  VORTEX_REQUIRE_GPU();
  for (const char* fc2 : {"", "weight-only"}) {
    SCOPED_TRACE(std::string("fc2 switch '") + fc2 + "'");
    WorkloadSpec spec;
    spec.config = "h3-tiny";
    spec.backend = "cuda";
    spec.width = 128;
    spec.height = 64;
    spec.frames = 9;
    spec.text_rows = 12;
    spec.weights_seed = testing::fresh_seed();
    spec.precision = "nvfp4";
    if (*fc2) spec.switches = std::string("nvfp4_fc2_fallback=") + fc2;
    auto w = load_workload(spec, nullptr);
    ASSERT_TRUE(w.ok()) << w.status().to_string();
    ASSERT_EQ(w->model != nullptr, true);
    auto v = w->model->forward(w->noise, 0.9, 0.8);
    ASSERT_TRUE(v.ok()) << v.status().to_string();
    int64_t bad = 0;
    double sum2 = 0;
    for (const std::vector<float>* s : {&v->video, &v->audio})
      for (float f : *s) {
        bad += !std::isfinite(f);
        sum2 += static_cast<double>(f) * f;
      }
    EXPECT_EQ(bad, 0);
    EXPECT_GT(sum2, 0.0);
    std::printf("[nvfp4 h3-tiny forward fc2=%s] %zu video + %zu audio values, rms %.4g\n", *fc2 ? fc2 : "default",
                v->video.size(), v->audio.size(), std::sqrt(sum2 / static_cast<double>(v->video.size() + v->audio.size())));
  }
}

TEST(Nvfp4Mode, WeightOnlyEqualsBf16GemmOnTheExpandedWeight) {
  VORTEX_REQUIRE_GPU();
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  ModeSetup s;
  ASSERT_TRUE(make_setup(s, seed));
  Tensor original = to_host(*s.backend, s.weights.blocks[1].mlp_fc1.weight);  // [2F, D] bf16
  ASSERT_TRUE(apply_precision(s.weights, *s.backend, "nvfp4-weight-only", 4).ok());
  const LinearWeight& w = s.weights.blocks[1].mlp_fc1;
  ASSERT_EQ(w.format, QuantFormat::kNone);
  auto q = quantize_weight_nvfp4(original, true);
  ASSERT_TRUE(q.ok()) << q.status().to_string();
  auto expanded = dequantize_linear_bf16(*q);
  ASSERT_TRUE(expanded.ok());
  LinearWeight host_expanded;
  auto up = s.backend->upload(*expanded);
  ASSERT_TRUE(up.ok());
  host_expanded.weight = *up;
  const int64_t n = original.dim(0), k = original.dim(1), m = 53;
  const std::vector<uint16_t> xh = random_bf16(static_cast<size_t>(m * k), rng, 1.0f);
  Tensor xt = Tensor::empty({m, k}, DType::kBF16);
  std::memcpy(xt.raw_data(), xh.data(), xh.size() * 2);
  auto xd = s.backend->upload(xt);
  auto o1 = s.backend->alloc({m, n}, DType::kBF16), o2 = s.backend->alloc({m, n}, DType::kBF16);
  ASSERT_TRUE(xd.ok() && o1.ok() && o2.ok());
  ASSERT_TRUE(s.backend->linear(*xd, w, nullptr, *o1).ok());
  ASSERT_TRUE(s.backend->linear(*xd, host_expanded, nullptr, *o2).ok());
  Tensor h1 = to_host(*s.backend, *o1), h2 = to_host(*s.backend, *o2);
  EXPECT_EQ(std::memcmp(h1.raw_data(), h2.raw_data(), h1.nbytes()), 0) << "weight-only is not the BF16 GEMM on R(e2m1*e4m3*g)";
  EXPECT_EQ(std::memcmp(to_host(*s.backend, w.weight).raw_data(), expanded->raw_data(), expanded->nbytes()), 0);
}

TEST(Nvfp4Mode, Fc2SwitchReachesTheWeights) {
  VORTEX_REQUIRE_GPU();
  ModeSetup s;
  ASSERT_TRUE(make_setup(s, testing::fresh_seed()));
  Tensor fc2_before = to_host(*s.backend, s.weights.blocks[0].mlp_fc2.weight);
  PrecisionOptions po;
  po.precision = "nvfp4";
  po.nvfp4_fc2 = "bf16";
  ASSERT_TRUE(apply_precision(s.weights, *s.backend, po).ok());
  for (const auto& b : s.weights.blocks) {
    EXPECT_EQ(b.attn_qkv_proj.format, QuantFormat::kNvfp4);
    EXPECT_EQ(b.attn_out_proj.format, QuantFormat::kNvfp4);
    EXPECT_EQ(b.mlp_fc1.format, QuantFormat::kNvfp4);
    EXPECT_EQ(b.mlp_fc2.format, QuantFormat::kNone);
  }
  Tensor fc2_after = to_host(*s.backend, s.weights.blocks[0].mlp_fc2.weight);
  EXPECT_EQ(std::memcmp(fc2_before.raw_data(), fc2_after.raw_data(), fc2_before.nbytes()), 0);
  ModeSetup s2;
  ASSERT_TRUE(make_setup(s2, testing::fresh_seed()));
  po.nvfp4_fc2 = "sometimes";
  EXPECT_EQ(apply_precision(s2.weights, *s2.backend, po).code(), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace vortex
