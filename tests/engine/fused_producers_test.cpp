// The fused NVFP4 producers switch on the CPU (no device needed): `fused_nvfp4_producers=0|1` parsing and
// description, precision restated as a switch, the CPU backend reporting modulate_quantize / swiglu_quantize /
// linear_quantized as unsupported with a clear message, and the model taking the fused path only when the
// precision is nvfp4, the switch is on, the backend has the producers and the consumer weight is NVFP4
// (a CpuBackend subclass counts the fused calls), and run_block's wiring of the fused path (identity-quantizer
// CPU backend: fused block == eager block bytes). The GPU side is tests/engine/nvfp4_mode_test.cpp.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/workload.h"
#include "model/h3_model.h"
#include "model/h3_spec.h"
#include "ref/cpu_backend.h"
#include "vortex/config.h"

namespace vortex {
namespace {

uint64_t fresh_seed() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

TEST(FusedNvfp4Switch, ParsesAndDescribes) {
  ExecOptions o;
  EXPECT_FALSE(o.fused_nvfp4_producers);  // default off
  ASSERT_TRUE(apply_switches("fused_nvfp4_producers=1", o).ok());
  EXPECT_TRUE(o.fused_nvfp4_producers);
  ASSERT_TRUE(apply_switches("eager", o).ok());  // Component-1 presets leave it alone
  EXPECT_TRUE(o.fused_nvfp4_producers);
  ASSERT_TRUE(apply_switches("fused_nvfp4_producers=off", o).ok());
  EXPECT_FALSE(o.fused_nvfp4_producers);
  Status bad = apply_switches("fused_nvfp4_producers=maybe", o);
  EXPECT_EQ(bad.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("fused_nvfp4_producers"), std::string::npos) << bad.to_string();
  // describe_switches names it in precision nvfp4 (evidence rows of the other modes are unchanged).
  o.fused_nvfp4_producers = true;
  EXPECT_EQ(describe_switches(o).find("fused_nvfp4_producers"), std::string::npos);
  o.precision = Precision::kNvfp4;
  EXPECT_NE(describe_switches(o).find("precision=nvfp4,fused_nvfp4_producers=1"), std::string::npos)
      << describe_switches(o);
  // precision=... may only restate the loaded precision.
  EXPECT_TRUE(apply_switches("precision=nvfp4,fused_nvfp4_producers=0", o).ok());
  EXPECT_FALSE(o.fused_nvfp4_producers);
  Status change = apply_switches("precision=bf16", o);
  EXPECT_EQ(change.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(change.message().find("--precision bf16"), std::string::npos) << change.to_string();
  EXPECT_EQ(o.precision, Precision::kNvfp4);
}

TEST(FusedNvfp4Switch, CpuBackendReportsTheOpsUnsupported) {
  CpuBackend cpu(1);
  EXPECT_FALSE(cpu.has_quantized_producers(QuantFormat::kNvfp4));
  EXPECT_EQ(cpu.default_options().fused_nvfp4_producers, false);
  Tensor n = Tensor::empty({4, 16}, DType::kBF16), table = Tensor::empty({3, 96}, DType::kBF16);
  SegmentTable seg;
  seg.rows = 4;
  seg.segments.push_back(Segment{0, 4, 0});
  LinearWeight w;
  w.format = QuantFormat::kNvfp4;
  QuantizedActivation qa;
  Tensor out = Tensor::empty({4, 8}, DType::kBF16);
  const Status s1 = cpu.modulate_quantize(n, table, kShiftMsa, kScaleMsa, seg, w, qa);
  const Status s2 = cpu.swiglu_quantize(n, w, qa);
  const Status s3 = cpu.linear_quantized(qa, w, nullptr, out);
  int i = 0;
  for (const Status* s : {&s1, &s2, &s3}) {
    const char* op = i == 0 ? "modulate_quantize" : i == 1 ? "swiglu_quantize" : "linear_quantized";
    ++i;
    SCOPED_TRACE(op);
    EXPECT_EQ(s->code(), ErrorCode::kUnsupported);
    EXPECT_NE(s->message().find(op), std::string::npos) << s->to_string();
    EXPECT_NE(s->message().find("cpu"), std::string::npos) << s->to_string();
    EXPECT_NE(s->message().find("fused_nvfp4_producers=0"), std::string::npos) << s->to_string();
  }
}

// The CPU reference, counting calls of the fused producers; `claim` makes it report them as provided
// (their bodies stay the Backend defaults, i.e. kUnsupported), so the test sees where the model goes.
class CountingCpuBackend : public CpuBackend {
 public:
  explicit CountingCpuBackend(bool claim) : CpuBackend(2), claim_(claim) {}
  bool has_quantized_producers(QuantFormat f) const override { return claim_ && f == QuantFormat::kNvfp4; }
  Status modulate_quantize(const Tensor& n, const Tensor& table, int shift_chunk, int scale_chunk,
                           const SegmentTable& seg, const LinearWeight& consumer, QuantizedActivation& out) override {
    ++fused_calls;
    return Backend::modulate_quantize(n, table, shift_chunk, scale_chunk, seg, consumer, out);
  }
  Status swiglu_quantize(const Tensor& u, const LinearWeight& consumer, QuantizedActivation& out) override {
    ++fused_calls;
    return Backend::swiglu_quantize(u, consumer, out);
  }
  Status linear_quantized(const QuantizedActivation& x, const LinearWeight& w, const Tensor* bias,
                          Tensor& out) override {
    ++fused_calls;
    return Backend::linear_quantized(x, w, bias, out);
  }
  int fused_calls = 0;

 private:
  bool claim_;
};

struct TinyBlock {
  ModelConfig cfg = ModelConfig::h3_tiny();
  H3Weights weights;
  Tensor table, x;  // [9, 6D] bf16, [S, D] bf16
  SegmentTable seg;
};

void make_tiny_block(Backend& be, TinyBlock& t, uint64_t seed) {
  auto w = synthesize_weights(t.cfg, be, seed);
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  t.weights = std::move(w).value();
  const int64_t s = 37, d = t.cfg.hidden;
  auto table = be.alloc({9, 6 * d}, DType::kBF16);
  auto x = be.alloc({s, d}, DType::kBF16);
  ASSERT_TRUE(table.ok() && x.ok());
  t.table = *table;
  t.x = *x;
  ASSERT_TRUE(be.fill_synthetic(t.table, seed ^ 1, 0.25f, 0.0f).ok());
  ASSERT_TRUE(be.fill_synthetic(t.x, seed ^ 2, 2.0f, 0.0f).ok());
  t.seg.rows = s;
  t.seg.segments = {Segment{0, 12, 3}, Segment{12, s, 7}};
}

Result<Tensor> run_tiny_block(Backend& be, TinyBlock& t, const ExecOptions& opts, const H3BlockWeights& blk) {
  VORTEX_ASSIGN_OR_RETURN(BlockScratch sc, BlockScratch::allocate(be, t.cfg, t.x.dim(0)));
  VORTEX_ASSIGN_OR_RETURN(Tensor x, be.alloc(t.x.shape(), t.x.dtype()));
  VORTEX_RETURN_IF_ERROR(be.copy(t.x, x));
  VORTEX_RETURN_IF_ERROR(run_transformer_block(be, t.cfg, opts, blk, x, &t.table, &t.seg, nullptr, sc));
  return x;
}

TEST(FusedNvfp4Switch, ModelTakesTheFusedPathOnlyWhereItApplies) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  // BF16 weights: the switch (even in precision nvfp4, on a backend claiming the producers) changes nothing.
  CountingCpuBackend claiming(true);
  TinyBlock t;
  make_tiny_block(claiming, t, seed);
  ExecOptions off;
  off.precision = Precision::kNvfp4;
  ExecOptions on = off;
  on.fused_nvfp4_producers = true;
  auto a = run_tiny_block(claiming, t, off, t.weights.blocks[0]);
  auto b = run_tiny_block(claiming, t, on, t.weights.blocks[0]);
  ASSERT_TRUE(a.ok() && b.ok()) << (a.ok() ? b.status() : a.status()).to_string();
  EXPECT_EQ(std::memcmp(a->raw_data(), b->raw_data(), a->nbytes()), 0);
  EXPECT_EQ(claiming.fused_calls, 0) << "fused producers called for BF16 weights";

  // A QKV weight marked NVFP4 (the CPU cannot run it either way): the model goes to the fused producer
  // only on a backend that has it, with precision nvfp4 and the switch on.
  H3BlockWeights marked = t.weights.blocks[0];
  marked.attn_qkv_proj.format = QuantFormat::kNvfp4;
  Status st = run_tiny_block(claiming, t, on, marked).status();
  EXPECT_EQ(claiming.fused_calls, 1) << st.to_string();
  EXPECT_NE(st.to_string().find("modulate_quantize"), std::string::npos) << st.to_string();
  claiming.fused_calls = 0;
  ExecOptions on_bf16 = on;  // switch on, another precision
  on_bf16.precision = Precision::kBf16;
  for (const ExecOptions& opts : {off, on_bf16}) {
    st = run_tiny_block(claiming, t, opts, marked).status();
    EXPECT_EQ(claiming.fused_calls, 0) << st.to_string();
    EXPECT_EQ(st.to_string().find("modulate_quantize"), std::string::npos) << st.to_string();
  }
  CountingCpuBackend plain(false);  // the real CPU backend's answer: no producers
  TinyBlock t2;
  make_tiny_block(plain, t2, seed);
  H3BlockWeights marked2 = t2.weights.blocks[0];
  marked2.attn_qkv_proj.format = QuantFormat::kNvfp4;
  st = run_tiny_block(plain, t2, on, marked2).status();
  EXPECT_EQ(plain.fused_calls, 0) << st.to_string();
  EXPECT_EQ(st.code(), ErrorCode::kUnsupported) << st.to_string();  // the CPU linear's own NVFP4 message
  EXPECT_NE(st.to_string().find("qkv_proj"), std::string::npos) << st.to_string();
}

// The model's wiring of the fused path, checked on the CPU: a CpuBackend whose "quantizer" is the identity
// (the producers materialize the modulated / SwiGLU BF16 values with the reference ops and linear_quantized
// multiplies them in BF16; NVFP4-flagged weights run as their BF16 values). With it the fused and the eager
// block must give the same bytes, so wrong tables, chunks, norm weights, slots or buffers in run_block show.
class IdentityProducerCpuBackend : public CpuBackend {
 public:
  IdentityProducerCpuBackend() : CpuBackend(2) {}
  bool has_quantized_producers(QuantFormat f) const override { return f == QuantFormat::kNvfp4; }
  Status linear(const Tensor& x, const LinearWeight& w, const Tensor* bias, Tensor& out) override {
    LinearWeight plain = w;
    if (plain.format == QuantFormat::kNvfp4) plain.format = QuantFormat::kNone;  // BF16 values, flagged only
    return CpuBackend::linear(x, plain, bias, out);
  }
  Status modulate_quantize(const Tensor& n, const Tensor& table, int shift_chunk, int scale_chunk,
                           const SegmentTable& seg, const LinearWeight& consumer, QuantizedActivation& out) override {
    ++producer_calls;
    if (consumer.format != QuantFormat::kNvfp4) return invalid_argument("modulate_quantize: consumer is not nvfp4");
    VORTEX_ASSIGN_OR_RETURN(Tensor x, alloc(n.shape(), DType::kBF16));  // [S, D] bf16
    VORTEX_RETURN_IF_ERROR(copy(n, x));
    VORTEX_RETURN_IF_ERROR(modulate(x, table, shift_chunk, scale_chunk, seg));
    return fill(x, kFromModulate, out);
  }
  Status swiglu_quantize(const Tensor& u, const LinearWeight& consumer, QuantizedActivation& out) override {
    ++producer_calls;
    if (consumer.format != QuantFormat::kNvfp4) return invalid_argument("swiglu_quantize: consumer is not nvfp4");
    VORTEX_ASSIGN_OR_RETURN(Tensor m, alloc({u.dim(0), u.dim(1) / 2}, DType::kBF16));  // [S, F] bf16
    VORTEX_RETURN_IF_ERROR(swiglu(u, m));
    return fill(m, kFromSwiglu, out);
  }
  Status linear_quantized(const QuantizedActivation& x, const LinearWeight& w, const Tensor* bias,
                          Tensor& out) override {
    ++gemm_calls;
    producers_seen.push_back(x.generation);
    return linear(x.data, w, bias, out);
  }
  int producer_calls = 0, gemm_calls = 0;
  std::vector<uint64_t> producers_seen;  // which producer made each GEMM input (kFromModulate / kFromSwiglu)
  static constexpr uint64_t kFromModulate = 1, kFromSwiglu = 2;

 private:
  static Status fill(const Tensor& values, uint64_t producer, QuantizedActivation& out) {
    out = QuantizedActivation{};
    out.format = QuantFormat::kNvfp4;
    out.data = values;  // identity "quantization": the BF16 values themselves
    out.rows = values.dim(0);
    out.cols = values.dim(1);
    out.generation = producer;  // tags the producer (the CUDA backend's producer count)
    return Status::Ok();
  }
};

TEST(FusedNvfp4Switch, ModelWiringEqualsTheEagerBlockWithIdentityProducers) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  IdentityProducerCpuBackend be;
  TinyBlock t;
  make_tiny_block(be, t, seed);
  for (const bool fc2_nvfp4 : {true, false}) {
    SCOPED_TRACE(fc2_nvfp4 ? "FC2 nvfp4" : "FC2 bf16 fallback");
    H3BlockWeights blk = t.weights.blocks[1];
    for (LinearWeight* w : {&blk.attn_qkv_proj, &blk.attn_out_proj, &blk.mlp_fc1, &blk.mlp_fc2})
      w->format = QuantFormat::kNvfp4;
    if (!fc2_nvfp4) blk.mlp_fc2.format = QuantFormat::kNone;
    ExecOptions eager;
    eager.precision = Precision::kNvfp4;
    ExecOptions fused = eager;
    fused.fused_nvfp4_producers = true;
    for (const bool fused_norm_modulate : {false, true}) {
      eager.fused_norm_modulate = fused.fused_norm_modulate = fused_norm_modulate;
      be.producer_calls = be.gemm_calls = 0;
      be.producers_seen.clear();
      auto a = run_tiny_block(be, t, eager, blk);
      ASSERT_TRUE(a.ok()) << a.status().to_string();
      EXPECT_EQ(be.producer_calls + be.gemm_calls, 0);
      auto b = run_tiny_block(be, t, fused, blk);
      ASSERT_TRUE(b.ok()) << b.status().to_string();
      EXPECT_EQ(std::memcmp(a->raw_data(), b->raw_data(), a->nbytes()), 0)
          << "fused wiring differs from the eager block";
      EXPECT_EQ(be.producer_calls, fc2_nvfp4 ? 3 : 2);
      EXPECT_EQ(be.gemm_calls, fc2_nvfp4 ? 3 : 2);
      const uint64_t m = IdentityProducerCpuBackend::kFromModulate, sw = IdentityProducerCpuBackend::kFromSwiglu;
      EXPECT_EQ(be.producers_seen, (fc2_nvfp4 ? std::vector<uint64_t>{m, m, sw} : std::vector<uint64_t>{m, m}));
    }
  }
  // A refiner block (no AdaLN table): QKV/FC1 have nothing to modulate and stay eager; FC2 may fuse.
  H3BlockWeights blk = t.weights.blocks[0];
  for (LinearWeight* w : {&blk.attn_qkv_proj, &blk.attn_out_proj, &blk.mlp_fc1, &blk.mlp_fc2})
    w->format = QuantFormat::kNvfp4;
  ExecOptions fused;
  fused.precision = Precision::kNvfp4;
  fused.fused_nvfp4_producers = true;
  ExecOptions eager = fused;
  eager.fused_nvfp4_producers = false;
  Tensor out[2];
  for (int k = 0; k < 2; ++k) {
    be.producer_calls = be.gemm_calls = 0;
    auto sc = BlockScratch::allocate(be, t.cfg, t.x.dim(0));
    auto x = be.alloc(t.x.shape(), t.x.dtype());
    ASSERT_TRUE(sc.ok() && x.ok());
    ASSERT_TRUE(be.copy(t.x, *x).ok());
    Status st = run_transformer_block(be, t.cfg, k == 0 ? eager : fused, blk, *x, nullptr, nullptr, nullptr, *sc);
    ASSERT_TRUE(st.ok()) << st.to_string();
    out[k] = *x;
    EXPECT_EQ(be.producer_calls, k == 0 ? 0 : 1);  // only swiglu_quantize
  }
  EXPECT_EQ(std::memcmp(out[0].raw_data(), out[1].raw_data(), out[0].nbytes()), 0);
}

}  // namespace
}  // namespace vortex
