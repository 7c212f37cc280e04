// Precision nvfp4 on the cuda backend (GPU label; skips visibly without a device): h3-tiny (synthetic) runs a
// full forward in nvfp4 mode and is finite; one block linear equals "quantize x on the CPU (comfy-kitchen
// encode) + FP64 dot of the dequantized operands" within E1 (two-reference rule); nvfp4-weight-only equals the
// BF16 GEMM on the host-expanded weight bit for bit; the FC2 switch values reach the weights; the fused
// NVFP4 producers (fused_nvfp4_producers) give the eager producers' GEMM inputs (NVFP4 bytes + g) and
// outputs bit for bit, and run_block / forward / 2-step trajectory are byte-identical with the switch on.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "cuda/cuda_backend.h"
#include "cuda/policy.h"
#include "engine/precision.h"
#include "engine/workload.h"
#include "gpu_test.h"
#include "io/quantized_layers.h"
#include "measure/bench.h"
#include "measure/gate.h"
#include "model/h3_model.h"
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

// precision nvfp4 needs the policy's NVFP4 GEMM path to run on this device. Under a forced policy it may not
// (VORTEX_POLICY=sm120 on an H200 selects cuBLASLt FP4, compiled and never run there): such a run skips with
// select_nvfp4's reason, which names the forced policy.
bool nvfp4_path_runs(std::string* why) {
  Result<DeviceInfo> dev = query_device(0);
  Result<GpuArch> forced = policy_from_env();
  if (!dev.ok() || !forced.ok()) return true;  // the test itself reports these
  Result<Nvfp4GemmPath> path = select_nvfp4(make_device_policy(dev->name, dev->cc_major, dev->cc_minor, *forced));
  if (path.ok()) return true;
  *why = path.status().message();
  return false;
}
#define VORTEX_REQUIRE_NVFP4_PATH()                                  \
  do {                                                               \
    std::string vortex_why_;                                         \
    if (!nvfp4_path_runs(&vortex_why_)) GTEST_SKIP() << vortex_why_; \
  } while (0)

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
  VORTEX_REQUIRE_NVFP4_PATH();
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
            const float b =
                ref::nvfp4_dequantized_value(qw->weight.data<uint8_t>(), qw->weight_scale.data<uint8_t>(), wl, j, t);
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

// One h3-tiny workload in precision nvfp4 (the given FC2 fallback; empty: the policy default).
Result<Workload> tiny_nvfp4_workload(const std::string& fc2) {
  WorkloadSpec spec;
  spec.config = "h3-tiny";
  spec.backend = "cuda";
  spec.width = 128;
  spec.height = 64;
  spec.frames = 9;
  spec.text_rows = 12;
  spec.weights_seed = testing::fresh_seed();
  spec.noise_seed = testing::fresh_seed();
  spec.precision = "nvfp4";
  if (!fc2.empty()) spec.switches = "nvfp4_fc2_fallback=" + fc2;
  return load_workload(spec, nullptr);
}

TEST(Nvfp4Mode, H3TinyForwardIsFinite) {
  VORTEX_REQUIRE_GPU();
  VORTEX_REQUIRE_NVFP4_PATH();
  for (const char* fc2 : {"", "weight-only"}) {
    SCOPED_TRACE(std::string("fc2 switch '") + fc2 + "'");
    auto w = tiny_nvfp4_workload(fc2);
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
                v->video.size(), v->audio.size(),
                std::sqrt(sum2 / static_cast<double>(v->video.size() + v->audio.size())));
  }
}

TEST(Nvfp4Mode, WeightOnlyEqualsBf16GemmOnTheExpandedWeight) {
  VORTEX_REQUIRE_GPU();
  VORTEX_REQUIRE_NVFP4_PATH();
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
  EXPECT_EQ(std::memcmp(h1.raw_data(), h2.raw_data(), h1.nbytes()), 0)
      << "weight-only is not the BF16 GEMM on R(e2m1*e4m3*g)";
  EXPECT_EQ(std::memcmp(to_host(*s.backend, w.weight).raw_data(), expanded->raw_data(), expanded->nbytes()), 0);
}

TEST(Nvfp4Mode, Fc2SwitchReachesTheWeights) {
  VORTEX_REQUIRE_GPU();
  VORTEX_REQUIRE_NVFP4_PATH();
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

// ---- fused NVFP4 producers ------------------------------------------------------------------------

Tensor upload_bf16(Backend& b, const std::vector<uint16_t>& v, Shape shape) {
  Tensor t = Tensor::empty(std::move(shape), DType::kBF16);
  std::memcpy(t.raw_data(), v.data(), v.size() * 2);
  auto d = b.upload(t);
  EXPECT_TRUE(d.ok()) << d.status().to_string();
  return d.ok() ? *d : Tensor();
}

// A device bf16 tensor filled with NaN bits (poison before a run).
Tensor poisoned_bf16(Backend& b, Shape shape) {
  const int64_t n = shape_numel(shape);
  return upload_bf16(b, std::vector<uint16_t>(static_cast<size_t>(n), 0xFFFF), std::move(shape));
}

bool same_bytes(Backend& b, const Tensor& x, const Tensor& y) {
  Tensor hx = to_host(b, x), hy = to_host(b, y);
  return hx.nbytes() == hy.nbytes() && std::memcmp(hx.raw_data(), hy.raw_data(), hx.nbytes()) == 0;
}

// One quantized activation's bytes on the host (data, scales, g: every byte, padding included), taken before
// the next producer call may reuse its scratch.
struct HostActivation {
  Tensor data, scales, global_scale;
  int64_t rows = 0, cols = 0;
  bool static_global_scale = false;
};
HostActivation to_host_activation(Backend& b, const QuantizedActivation& a) {
  EXPECT_EQ(a.format, QuantFormat::kNvfp4);
  return HostActivation{to_host(b, a.data),   to_host(b, a.scales), to_host(b, a.global_scale), a.rows, a.cols,
                        a.static_global_scale};
}
bool same_host_bytes(const Tensor& x, const Tensor& y) {
  return x.nbytes() == y.nbytes() && std::memcmp(x.raw_data(), y.raw_data(), x.nbytes()) == 0;
}

void expect_same_activation(const HostActivation& e, const HostActivation& f, const char* what) {
  SCOPED_TRACE(what);
  EXPECT_EQ(e.rows, f.rows);
  EXPECT_EQ(e.cols, f.cols);
  EXPECT_EQ(e.static_global_scale, f.static_global_scale);
  EXPECT_TRUE(same_host_bytes(e.data, f.data)) << "NVFP4 data bytes differ";
  EXPECT_TRUE(same_host_bytes(e.scales, f.scales)) << "E4M3 block scales differ";
  EXPECT_TRUE(same_host_bytes(e.global_scale, f.global_scale)) << "global scale g differs";
  const float g = f.global_scale.data<float>()[0];
  EXPECT_TRUE(std::isfinite(g) && g > 0.0f) << "g = " << g;
}

TEST(Nvfp4FusedProducers, GemmInputsAndOutputsEqualTheEagerProducers) {
  VORTEX_REQUIRE_GPU();
  VORTEX_REQUIRE_NVFP4_PATH();
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  ModeSetup s;
  ASSERT_TRUE(make_setup(s, seed));
  PrecisionOptions po;
  po.precision = "nvfp4";
  po.nvfp4_fc2 = "off";
  ASSERT_TRUE(apply_precision(s.weights, *s.backend, po).ok());
  auto* cuda = dynamic_cast<CudaBackend*>(s.backend.get());
  ASSERT_NE(cuda, nullptr);
  ASSERT_TRUE(cuda->has_quantized_producers(QuantFormat::kNvfp4));
  const ModelConfig& cfg = s.cfg;
  const H3BlockWeights& blk = s.weights.blocks[0];
  const int64_t d = cfg.hidden, f = cfg.ffn;
  for (int64_t rows : {int64_t{1}, int64_t{45}, int64_t{300}}) {
    SCOPED_TRACE("S " + std::to_string(rows));
    // AdaLN table [3 slots * 3, 6D] and three segments (a table row each).
    Tensor table = upload_bf16(*s.backend, random_bf16(static_cast<size_t>(9 * 6 * d), rng, 0.5f), {9, 6 * d});
    SegmentTable seg;
    seg.rows = rows;
    const int64_t a = rows / 3, b = 2 * rows / 3;
    for (auto [start, stop, row] : {std::tuple<int64_t, int64_t, int32_t>{0, a, 4}, {a, b, 0}, {b, rows, 8}})
      if (stop > start) seg.segments.push_back(Segment{start, stop, row});
    Tensor x = upload_bf16(*s.backend, random_bf16(static_cast<size_t>(rows * d), rng, 2.0f), {rows, d});
    Tensor n = poisoned_bf16(*s.backend, {rows, d});  // [S, D] RMSNorm output (unmodulated)
    ASSERT_TRUE(s.backend->rms_norm(x, blk.norm1_weight, cfg.norm_eps, n).ok());
    Tensor nm = poisoned_bf16(*s.backend, {rows, d});  // [S, D] modulated (eager)
    ASSERT_TRUE(s.backend->copy(n, nm).ok());
    ASSERT_TRUE(s.backend->modulate(nm, table, kShiftMsa, kScaleMsa, seg).ok());
    for (const LinearWeight* w : {&blk.attn_qkv_proj, &blk.mlp_fc1}) {
      SCOPED_TRACE(w == &blk.attn_qkv_proj ? "qkv" : "fc1");
      ASSERT_EQ(w->format, QuantFormat::kNvfp4);
      // Dynamic g, then the consumer's static input_scale (checkpoint layers).
      LinearWeight with_static = *w;
      Tensor is = Tensor::empty({1}, DType::kF32);
      is.data<float>()[0] = std::ldexp(1.0f + static_cast<float>(rng() % 1000) / 1000.0f, -7);
      auto isd = s.backend->upload(is);
      ASSERT_TRUE(isd.ok());
      with_static.input_scale = *isd;
      for (const LinearWeight* consumer : {w, static_cast<const LinearWeight*>(&with_static)}) {
        SCOPED_TRACE(consumer == w ? "dynamic g" : "static input_scale");
        QuantizedActivation eager, fused;
        Status st = cuda->quantize_nvfp4(nm, *consumer, eager);
        ASSERT_TRUE(st.ok()) << st.to_string();
        const HostActivation eager_bytes = to_host_activation(*s.backend, eager);
        st = cuda->modulate_quantize(n, table, kShiftMsa, kScaleMsa, seg, *consumer, fused);
        ASSERT_TRUE(st.ok()) << st.to_string();
        EXPECT_EQ(fused.static_global_scale, consumer != w);
        expect_same_activation(eager_bytes, to_host_activation(*s.backend, fused), "modulate -> nvfp4");
        // The fused producer wrote the scratch the eager view points into: that view is stale now.
        Tensor out_e = poisoned_bf16(*s.backend, {rows, w->out_features});
        Tensor out_f = poisoned_bf16(*s.backend, {rows, w->out_features});
        EXPECT_EQ(s.backend->linear_quantized(eager, *consumer, nullptr, out_e).code(), ErrorCode::kInvalidArgument);
        // The consumer must match how the activation was quantized.
        const LinearWeight* other = consumer == w ? &with_static : w;
        EXPECT_EQ(s.backend->linear_quantized(fused, *other, nullptr, out_f).code(), ErrorCode::kInvalidArgument);
        // GEMM outputs: linear_quantized of the fused activation, then eager linear() (quantizes again).
        st = s.backend->linear_quantized(fused, *consumer, nullptr, out_f);
        ASSERT_TRUE(st.ok()) << st.to_string();
        ASSERT_TRUE(s.backend->linear(nm, *consumer, nullptr, out_e).ok());
        EXPECT_TRUE(same_bytes(*s.backend, out_e, out_f)) << "GEMM outputs differ";
        // linear() re-used the scratch of the fused view: it is stale too.
        EXPECT_EQ(s.backend->linear_quantized(fused, *consumer, nullptr, out_f).code(), ErrorCode::kInvalidArgument);
      }
    }
    // FC2: swiglu(u) materialized + quantized vs swiglu_quantize(u).
    Tensor u = upload_bf16(*s.backend, random_bf16(static_cast<size_t>(rows * 2 * f), rng, 3.0f), {rows, 2 * f});
    Tensor m = poisoned_bf16(*s.backend, {rows, f});  // [S, F] bf16
    ASSERT_TRUE(s.backend->swiglu(u, m).ok());
    const LinearWeight& fc2 = blk.mlp_fc2;
    ASSERT_EQ(fc2.format, QuantFormat::kNvfp4);
    QuantizedActivation eager, fused;
    ASSERT_TRUE(cuda->quantize_nvfp4(m, fc2, eager).ok());
    Status st = cuda->swiglu_quantize(u, fc2, fused);
    ASSERT_TRUE(st.ok()) << st.to_string();
    // The FC2 producer has scratch of its own: both views stay alive (the model holds them at once).
    EXPECT_NE(eager.data.raw_data(), fused.data.raw_data());
    expect_same_activation(to_host_activation(*s.backend, eager), to_host_activation(*s.backend, fused),
                           "swiglu -> nvfp4");
    Tensor out_e = poisoned_bf16(*s.backend, {rows, d}), out_f = poisoned_bf16(*s.backend, {rows, d});
    ASSERT_TRUE(s.backend->linear(m, fc2, nullptr, out_e).ok());
    ASSERT_TRUE(s.backend->linear_quantized(fused, fc2, nullptr, out_f).ok());
    EXPECT_TRUE(same_bytes(*s.backend, out_e, out_f)) << "FC2 GEMM outputs differ";
  }
  // Wrong consumers are errors with a message, not silent fallbacks.
  QuantizedActivation qa;
  Tensor u = poisoned_bf16(*s.backend, {4, 2 * s.cfg.ffn});
  EXPECT_EQ(cuda->swiglu_quantize(u, blk.attn_qkv_proj, qa).code(), ErrorCode::kInvalidArgument);  // K mismatch
  LinearWeight bf16_fc2 = blk.mlp_fc2;
  bf16_fc2.format = QuantFormat::kNone;
  EXPECT_EQ(cuda->swiglu_quantize(u, bf16_fc2, qa).code(), ErrorCode::kInvalidArgument);  // not an NVFP4 consumer
}

TEST(Nvfp4FusedProducers, BlockForwardAndTrajectoryAreByteIdentical) {
  VORTEX_REQUIRE_GPU();
  VORTEX_REQUIRE_NVFP4_PATH();
  for (const char* fc2 : {"off", "weight-only"}) {
    SCOPED_TRACE(std::string("nvfp4_fc2_fallback=") + fc2);
    auto w = tiny_nvfp4_workload(fc2);
    ASSERT_TRUE(w.ok()) << w.status().to_string();
    const bool fc2_nvfp4 = std::string(fc2) == "off";
    // run_transformer_block on one input, switch off vs on, own scratch (to see which path ran).
    auto in = make_block_input(*w, 1, 12);
    ASSERT_TRUE(in.ok()) << in.status().to_string();
    Backend& be = *w->backend;
    const int64_t rows = in->x.dim(0);
    Tensor out[2], norm_out[2];
    bool swiglu_written[2] = {false, false};
    for (int k = 0; k < 2; ++k) {
      ExecOptions opts = w->model->options();
      opts.fused_nvfp4_producers = k == 1;
      auto sc = BlockScratch::allocate(be, w->cfg, rows);
      ASSERT_TRUE(sc.ok());
      for (Tensor* t : {&sc->qkv, &sc->attn_out, &sc->proj_out, &sc->norm_out, &sc->fc1_out, &sc->swiglu_out}) {
        Tensor p = poisoned_bf16(be, t->shape());
        ASSERT_TRUE(be.copy(p, *t).ok());
      }
      Tensor x = poisoned_bf16(be, in->x.shape());
      ASSERT_TRUE(be.copy(in->x, x).ok());
      Status st = run_transformer_block(be, w->cfg, opts, w->model->weights().blocks[1], x, &in->tables.block_tables[1],
                                        &in->tables.block_segments, nullptr, *sc);
      ASSERT_TRUE(st.ok()) << st.to_string();
      out[k] = to_host(be, x);
      norm_out[k] = to_host(be, sc->norm_out);
      Tensor sw = to_host(be, sc->swiglu_out);
      for (int64_t i = 0; i < sw.numel(); ++i)
        swiglu_written[k] = swiglu_written[k] || sw.data<uint16_t>()[i] != 0xFFFF;
    }
    EXPECT_EQ(std::memcmp(out[0].raw_data(), out[1].raw_data(), out[0].nbytes()), 0) << "block output differs";
    // Which path ran: the fused one leaves the unmodulated RMSNorm in norm_out and never writes m.
    EXPECT_NE(std::memcmp(norm_out[0].raw_data(), norm_out[1].raw_data(), norm_out[0].nbytes()), 0)
        << "the fused QKV/FC1 producers did not run";
    EXPECT_TRUE(swiglu_written[0]);
    EXPECT_EQ(swiglu_written[1], !fc2_nvfp4) << "FC2: fused producer expected only when FC2 is NVFP4";
    // The gate itself: blocks, one full forward and the 2-step trajectory, weights loaded once.
    GateOptions g;
    g.a = "precision=nvfp4,fused_nvfp4_producers=0";
    g.b = "precision=nvfp4,fused_nvfp4_producers=1";
    g.steps = 3;
    g.skip_full_trajectory = true;
    auto verdict = run_gate(*w, g);
    ASSERT_TRUE(verdict.ok()) << verdict.status().to_string();
    EXPECT_TRUE((*verdict)["pass"].get<bool>()) << verdict->dump(2);
    EXPECT_NE((*verdict)["b"].get<std::string>().find("fused_nvfp4_producers=1"), std::string::npos);
  }
}

}  // namespace
}  // namespace vortex
