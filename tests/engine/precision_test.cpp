// Precision modes at load on the CPU backend (no GPU needed): nvfp4-weight-only expands every main-block GEMM
// weight to exactly R(e2m1 * (e4m3 * g)) of the reference-quantized weight (refiner untouched); the NVFP4 weight
// quantizer emits the CPU reference's comfy-kitchen bytes with g = amax/2688; nvfp4 (W4A4) refuses a non-CUDA
// backend with a message naming the alternative; unknown names and FC2 switch values are rejected.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "engine/precision.h"
#include "engine/workload.h"
#include "io/quantized_layers.h"
#include "model/h3_spec.h"
#include "ref/nvfp4_quantize.h"
#include "vortex/config.h"
#include "vortex/dtype.h"

#if defined(VORTEX_WITH_CUDA)
#include "cuda/policy.h"
#endif

namespace vortex {
namespace {

uint64_t fresh_seed() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

std::vector<uint8_t> bytes_of(const Tensor& t) {
  std::vector<uint8_t> v(t.nbytes());
  std::memcpy(v.data(), t.raw_data(), v.size());
  return v;
}

TEST(Precision, Names) {
  for (const char* n : {"bf16", "fp8", "nvfp4", "nvfp4-weight-only"}) {
    EXPECT_TRUE(is_precision_name(n)) << n;
    ASSERT_TRUE(parse_precision(n).ok()) << n;
    EXPECT_STREQ(precision_name(*parse_precision(n)), n);  // parse and print round-trip at the edge
  }
  EXPECT_EQ(parse_precision("fp4").status().code(), ErrorCode::kInvalidArgument);
  for (const char* n : {"sdpa", "sage2", "bf16-owned"}) EXPECT_STREQ(attention_name(*parse_attention(n)), n);
  EXPECT_EQ(parse_attention("flash9").status().code(), ErrorCode::kInvalidArgument);
  for (const char* n : {"off", "weight-only", "bf16"}) EXPECT_STREQ(nvfp4_fc2_name(*parse_nvfp4_fc2(n)), n);
  for (const char* n : {"", "fp4", "nvfp4_weight_only", "BF16"}) EXPECT_FALSE(is_precision_name(n)) << n;
}

TEST(Precision, QuantizeWeightNvfp4MatchesTheReferenceBytes) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 0.03f);
  const int64_t n = 200, k = 144;  // ragged against the 128-row scale tiles and 4-block scale columns
  Tensor w = Tensor::empty({n, k}, DType::kBF16);
  for (int64_t i = 0; i < n * k; ++i) w.data<uint16_t>()[i] = bf16_bits_from_f32(nd(rng));
  auto q = quantize_weight_nvfp4(w, true);
  ASSERT_TRUE(q.ok()) << q.status().to_string();
  EXPECT_EQ(q->format, QuantFormat::kNvfp4);
  EXPECT_EQ(q->out_features, n);
  EXPECT_EQ(q->in_features, k);
  EXPECT_EQ(q->weight.shape(), nvfp4_weight_shape(n, k));
  EXPECT_EQ(q->weight_scale.shape(), nvfp4_weight_scale_shape(n, k));
  const float g = ref::nvfp4_global_scale_from_amax(ref::bf16_abs_max_bits(w.data<uint16_t>(), n, k, k));
  EXPECT_EQ(q->weight_scale_2.data<float>()[0], g);
  auto table = ref::RcpApproxTable::default_table();
  ASSERT_TRUE(table.ok()) << table.status().to_string();
  ref::Nvfp4Options opt;
  opt.rcp = table->get();
  const ref::Nvfp4Layout L = ref::nvfp4_layout(n, k);
  std::vector<uint8_t> data(L.data_bytes()), scales(L.scale_bytes());
  ASSERT_TRUE(ref::nvfp4_quantize(w.data<uint16_t>(), n, k, k, g, opt, data.data(), scales.data()).ok());
  EXPECT_EQ(bytes_of(q->weight), data);
  EXPECT_EQ(bytes_of(q->weight_scale), scales);
  // A device or non-bf16 input is refused with the expected shape in the message.
  Tensor f = Tensor::empty({4, 16}, DType::kF32);
  EXPECT_EQ(quantize_weight_nvfp4(f).status().code(), ErrorCode::kInvalidArgument);
}

TEST(Precision, WeightOnlyExpandsEveryMainBlockGemmExactly) {
  const ModelConfig cfg = ModelConfig::h3_tiny();
  auto backend = make_backend("cpu", 2);
  ASSERT_TRUE(backend.ok()) << backend.status().to_string();
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("weights seed " + std::to_string(seed));
  auto weights = synthesize_weights(cfg, **backend, seed);
  ASSERT_TRUE(weights.ok()) << weights.status().to_string();
  std::vector<std::vector<uint8_t>> before, refiner_before;
  for (const auto& b : weights->blocks)
    for (const LinearWeight* w : {&b.attn_qkv_proj, &b.attn_out_proj, &b.mlp_fc1, &b.mlp_fc2})
      before.push_back(bytes_of(w->weight));
  for (const auto& b : weights->token_refiner_blocks) refiner_before.push_back(bytes_of(b.attn_qkv_proj.weight));
  Status st = apply_precision(*weights, **backend, "nvfp4-weight-only", 4);
  ASSERT_TRUE(st.ok()) << st.to_string();
  size_t i = 0;
  int64_t changed = 0;
  for (const auto& b : weights->blocks) {
    for (const LinearWeight* w : {&b.attn_qkv_proj, &b.attn_out_proj, &b.mlp_fc1, &b.mlp_fc2}) {
      ASSERT_EQ(w->format, QuantFormat::kNone);
      ASSERT_EQ(w->weight.dtype(), DType::kBF16);
      const std::vector<uint8_t>& src = before[i++];
      Tensor host = Tensor::empty(w->weight.shape(), DType::kBF16);
      std::memcpy(host.raw_data(), src.data(), src.size());
      auto q = quantize_weight_nvfp4(host, true);
      ASSERT_TRUE(q.ok()) << q.status().to_string();
      auto expanded = dequantize_linear_bf16(*q);
      ASSERT_TRUE(expanded.ok()) << expanded.status().to_string();
      ASSERT_EQ(bytes_of(w->weight), bytes_of(*expanded)) << "block weight " << i - 1;
      changed += bytes_of(w->weight) != src;
    }
  }
  EXPECT_EQ(changed, static_cast<int64_t>(before.size())) << "every weight should move onto the NVFP4 grid";
  for (size_t r = 0; r < weights->token_refiner_blocks.size(); ++r)
    EXPECT_EQ(bytes_of(weights->token_refiner_blocks[r].attn_qkv_proj.weight), refiner_before[r]) << "refiner changed";
}

TEST(Precision, Nvfp4W4A4NeedsCuda) {
  const ModelConfig cfg = ModelConfig::h3_tiny();
  auto backend = make_backend("cpu", 2);
  ASSERT_TRUE(backend.ok()) << backend.status().to_string();
  auto weights = synthesize_weights(cfg, **backend, 7);
  ASSERT_TRUE(weights.ok()) << weights.status().to_string();
  Status st = apply_precision(*weights, **backend, "nvfp4", 2);
  EXPECT_EQ(st.code(), ErrorCode::kUnsupported) << st.to_string();
  EXPECT_NE(st.to_string().find("nvfp4-weight-only"), std::string::npos) << st.to_string();
  st = apply_precision(*weights, **backend, "int4", 2);
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument) << st.to_string();
}

TEST(Precision, Bf16RefusesNvfp4CheckpointLayers) {
  const ModelConfig cfg = ModelConfig::h3_tiny();
  auto backend = make_backend("cpu", 2);
  ASSERT_TRUE(backend.ok()) << backend.status().to_string();
  auto weights = synthesize_weights(cfg, **backend, 11);
  ASSERT_TRUE(weights.ok()) << weights.status().to_string();
  EXPECT_TRUE(apply_precision(*weights, **backend, "bf16", 2).ok());
  // Stand in for a loaded NVFP4 checkpoint layer (host tensors on the cpu backend).
  LinearWeight& fc1 = weights->blocks[0].mlp_fc1;
  Tensor host = Tensor::empty(fc1.weight.shape(), DType::kBF16);
  ASSERT_TRUE((*backend)->download(fc1.weight, host).ok());
  auto q = quantize_weight_nvfp4(host, false);
  ASSERT_TRUE(q.ok()) << q.status().to_string();
  fc1 = *q;
  Status st = apply_precision(*weights, **backend, "bf16", 2);
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument) << st.to_string();
  EXPECT_NE(st.to_string().find("nvfp4-weight-only"), std::string::npos) << st.to_string();
  // weight-only expands a stored NVFP4 layer exactly (no re-quantization).
  auto expanded = dequantize_linear_bf16(*q);
  ASSERT_TRUE(expanded.ok());
  ASSERT_TRUE(apply_precision(*weights, **backend, "nvfp4-weight-only", 2).ok());
  EXPECT_EQ(fc1.format, QuantFormat::kNone);
  EXPECT_EQ(bytes_of(fc1.weight), bytes_of(*expanded));
}

#if defined(VORTEX_WITH_CUDA)
TEST(Precision, Fc2FallbackPolicyDefaultIsW4a4Everywhere) {
  for (GpuArch a : {GpuArch::kSm90, GpuArch::kSm100, GpuArch::kSm120, GpuArch::kSm121})
    EXPECT_EQ(policy_exec_options(a).nvfp4_fc2, Nvfp4Fc2::kW4A4) << gpu_arch_name(a);
}
#endif

// fused_q_quantize (E0, attention sage2 only): parsed as a 0|1 switch, named in the description of sage2 runs only
// (evidence labels of the other modes are unchanged), off by default.
TEST(Switches, FusedQQuantize) {
  ExecOptions o;
  EXPECT_FALSE(o.fused_q_quantize);
  ASSERT_TRUE(apply_switches("fused_q_quantize=1", o).ok());
  EXPECT_TRUE(o.fused_q_quantize);
  EXPECT_EQ(describe_switches(o).find("fused_q_quantize"), std::string::npos) << describe_switches(o);
  ASSERT_TRUE(apply_switches("attention=sage2", o).ok());
  EXPECT_NE(describe_switches(o).find("attention=sage2,precision=bf16,fused_q_quantize=1"), std::string::npos)
      << describe_switches(o);
  ASSERT_TRUE(apply_switches("fused_q_quantize=0", o).ok());
  EXPECT_FALSE(o.fused_q_quantize);
  EXPECT_EQ(apply_switches("fused_q_quantize=2", o).code(), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace vortex
