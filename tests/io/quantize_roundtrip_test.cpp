// NVFP4 round trip of `vortex quantize` on synthetic h3-tiny checkpoints (both QKV layouts, blocks + refiner):
// the file holds exactly the bytes of the CPU reference quantizer (ref/nvfp4_quantize.h) run on the original
// BF16 weight with g = amax/2688 (E0), loads through read_quantized_linear, dequantizes within the NVFP4 bound
// of every 16-block, agrees with the reference's own dequantization, and every untouched tensor is
// byte-identical. Random weights per run (seed printed). The approximate-instruction encode runs too when
// the measured rcp.approx table (data/approx/rcp_approx_sm90.bin) is present, and says so when it is not.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "io/checkpoint.h"
#include "io/quantize.h"
#include "io/quantized_layers.h"
#include "io/safetensors.h"
#include "io/synth_checkpoint.h"
#include "quantize_test_util.h"
#include "ref/nvfp4_quantize.h"
#include "test_files.h"

namespace vortex {
namespace {

Nvfp4WeightEncoder reference_encoder(ref::Nvfp4Options options, std::shared_ptr<const ref::RcpApproxTable> table) {
  Nvfp4WeightEncoder e;
  e.global_scale = [](const uint16_t* w, int64_t n, int64_t k) {
    return ref::nvfp4_global_scale_from_amax(ref::bf16_abs_max_bits(w, n, k, k));
  };
  e.encode = [options, table](const uint16_t* w, int64_t n, int64_t k, float g, uint8_t* data, uint8_t* scales) {
    return ref::nvfp4_quantize(w, n, k, k, g, options, data, scales);
  };
  e.description = "test encoder";
  return e;
}

void round_trip(CheckpointLayout layout, const ref::Nvfp4Options& options,
                std::shared_ptr<const ref::RcpApproxTable> table) {
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  testing::TempDir dir;
  const std::string in = write_synth(dir.path, seed, layout);
  ASSERT_FALSE(in.empty());
  QuantizeOptions opt;
  opt.in = in;
  opt.out = dir.path + "/nvfp4.safetensors";
  opt.format = QuantFormat::kNvfp4;
  opt.layers = QuantizeLayerSet::kBlocksAndRefiner;
  opt.nvfp4 = reference_encoder(options, table);
  Result<QuantizeSummary> s = quantize_checkpoint(opt);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  ASSERT_EQ(s->layers_quantized, 12u);

  Result<SafetensorsSet> a = SafetensorsSet::open(in);
  Result<SafetensorsSet> b = SafetensorsSet::open(opt.out);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(b->metadata().at(kQkvLayoutMetadataKey),
            layout == CheckpointLayout::kOriginal ? kQkvInterleavedValue : kQkvBlockedValue);
  Result<CheckpointInfo> info = inspect_checkpoint(opt.out);
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  EXPECT_EQ(info->quantized_layers.size(), 12u);
  EXPECT_EQ(info->layout, layout);  // the QKV order is kept and still detected
  const std::string prefix = info->key_prefix;

  size_t layers = 0;
  for (const std::string& name : a->names()) {
    Tensor x = a->tensor(name).value();
    if (!is_quantize_target(name.substr(prefix.size()), opt.layers)) {
      Result<Tensor> y = b->tensor(name);
      ASSERT_TRUE(y.ok()) << name << " missing from the output";
      ASSERT_EQ(y->dtype(), x.dtype()) << name;
      ASSERT_EQ(y->shape(), x.shape()) << name;
      EXPECT_EQ(std::memcmp(x.raw_data(), y->raw_data(), x.nbytes()), 0) << name << " changed";
      continue;
    }
    const int64_t n = x.dim(0), k = x.dim(1);
    const std::string layer = name.substr(0, name.size() - 7);
    Tensor cq = b->tensor(layer + ".comfy_quant").value();
    EXPECT_EQ(std::string(static_cast<const char*>(cq.raw_data()), cq.nbytes()), R"({"format": "nvfp4"})");
    Result<LinearWeight> w = read_quantized_linear(layer, quant_lookup_in(*b), n, k);
    ASSERT_TRUE(w.ok()) << w.status().to_string();
    ASSERT_EQ(w->format, QuantFormat::kNvfp4);
    EXPECT_EQ(w->weight_scale.dtype(), DType::kF8E4M3);
    EXPECT_FALSE(w->input_scale.defined());

    // E0: the file holds the reference quantizer's bytes for g = amax/2688 of the original weight.
    const uint16_t* xb = x.data<uint16_t>();  // [N, K] bf16
    const float g = ref::nvfp4_global_scale_from_amax(ref::bf16_abs_max_bits(xb, n, k, k));
    EXPECT_EQ(w->weight_scale_2.data<float>()[0], g) << layer;
    const ref::Nvfp4Layout l = ref::nvfp4_layout(n, k);
    std::vector<uint8_t> data(l.data_bytes()), scales(l.scale_bytes());
    ASSERT_TRUE(ref::nvfp4_quantize(xb, n, k, k, g, options, data.data(), scales.data()).ok());
    ASSERT_EQ(w->weight.nbytes(), data.size());
    ASSERT_EQ(w->weight_scale.nbytes(), scales.size());
    EXPECT_EQ(std::memcmp(w->weight.raw_data(), data.data(), data.size()), 0) << layer << " data bytes differ";
    EXPECT_EQ(std::memcmp(w->weight_scale.raw_data(), scales.data(), scales.size()), 0) << layer << " scales differ";

    // Dequantized error per 16-block: |x - deq| <= s*g (one E2M1 half-step at the top of the grid, or the
    // saturation overshoot) with s*g <= amax_b/6 * (1 + 2^-4) + 2^-10 g (E4M3 rounding), plus BF16 rounding.
    Result<Tensor> deq = dequantize_linear_bf16(*w);
    ASSERT_TRUE(deq.ok()) << deq.status().to_string();
    int bad = 0;
    for (int64_t r = 0; r < n && bad < 5; ++r) {
      for (int64_t j = 0; j < k / 16 && bad < 5; ++j) {
        float amax_b = 0.0f;
        for (int i = 0; i < 16; ++i) amax_b = std::max(amax_b, std::fabs(f32_from_bf16_bits(xb[r * k + 16 * j + i])));
        for (int i = 0; i < 16; ++i) {
          const int64_t c = 16 * j + i;
          const double v = f32_from_bf16_bits(xb[r * k + c]);
          const double d = f32_from_bf16_bits(deq->data<uint16_t>()[r * k + c]);
          const double bound = 1.07 * (amax_b / 6.0 + std::ldexp(g, -10)) + std::ldexp(std::fabs(v), -8);
          const double ref_value =
              static_cast<double>(ref::nvfp4_dequantized_value(data.data(), scales.data(), l, r, c)) * g;
          if (std::fabs(d - v) > bound || std::fabs(d - ref_value) > std::ldexp(std::fabs(ref_value), -8)) {
            ++bad;
            ADD_FAILURE() << layer << " (" << r << ", " << c << "): " << v << " -> " << d << " (bound " << bound
                          << ", reference dequantization " << ref_value << ")";
            break;
          }
        }
      }
    }
    ++layers;
  }
  EXPECT_EQ(layers, 12u);
}

// Quantizing the per-head-interleaved file and reordering its QKV rows (data rows and tiled scale entries)
// gives exactly the bytes of quantizing the [q|k|v] file of the same weights.
TEST(QuantizeNvfp4RowsTest, QkvRowPermutationCommutesWithQuantization) {
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  testing::TempDir dir;
  ref::Nvfp4Options options;
  options.encode = ref::Nvfp4Encode::kExactDivision;
  QuantizeOptions opt;
  opt.format = QuantFormat::kNvfp4;
  opt.layers = QuantizeLayerSet::kBlocksAndRefiner;
  opt.nvfp4 = reference_encoder(options, nullptr);
  auto sets = quantize_both_layouts(dir.path, seed, opt);
  ASSERT_TRUE(sets.ok()) << sets.status().to_string();
  const SafetensorsSet* a = &sets->first;
  const SafetensorsSet* b = &sets->second;
  const ModelConfig c = ModelConfig::h3_tiny();
  const int64_t n = 3LL * c.num_heads * c.head_dim, k = c.hidden;
  for (const std::string layer :
       {"blocks.0.attn.qkv_proj", "blocks.1.attn.qkv_proj", "token_refiner.blocks.0.attn.qkv_proj"}) {
    Result<LinearWeight> wa = read_quantized_linear(layer, quant_lookup_in(*a), n, k);
    Result<LinearWeight> wb = read_quantized_linear("diffusion_model." + layer, quant_lookup_in(*b), n, k);
    ASSERT_TRUE(wa.ok() && wb.ok());
    Result<LinearWeight> p = permute_quantized_rows(*wa, qkv_interleaved_to_blocked_rows(c.num_heads, c.head_dim));
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    EXPECT_EQ(std::memcmp(p->weight.raw_data(), wb->weight.raw_data(), wb->weight.nbytes()), 0) << layer;
    EXPECT_EQ(std::memcmp(p->weight_scale.raw_data(), wb->weight_scale.raw_data(), wb->weight_scale.nbytes()), 0)
        << layer << " block scales";
    EXPECT_EQ(p->weight_scale_2.data<float>()[0], wb->weight_scale_2.data<float>()[0]) << layer;
  }
}

// Ragged shapes (N = 150: two 128-row slabs, the second ragged; K = 40: padded to 48) encoded on 3 threads
// give exactly the bytes of one whole-tensor reference call, and dequantize within the NVFP4 bound.
TEST(QuantizeNvfp4RowsTest, RaggedShapesAndThreadedSlabsMatchOneCall) {
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  const int64_t n = 150, k = 40;
  Tensor w = Tensor::empty({n, k}, DType::kBF16);  // [150, 40] bf16, one outlier
  for (int64_t i = 0; i < n * k; ++i) w.data<uint16_t>()[i] = bf16_bits_from_f32(normal(rng));
  w.data<uint16_t>()[rng() % (n * k)] = bf16_bits_from_f32(3.0f);
  Tensor other = Tensor::empty({7}, DType::kF32);
  for (int i = 0; i < 7; ++i) other.data<float>()[i] = normal(rng);
  testing::TempDir dir;
  const std::string in = dir.path + "/in.safetensors";
  ASSERT_TRUE(write_safetensors(in, {{"blocks.3.mlp.fc2.weight", w}, {"blocks.3.mlp.fc2.bias", other}}).ok());
  ref::Nvfp4Options options;
  options.encode = ref::Nvfp4Encode::kExactDivision;
  QuantizeOptions opt;
  opt.in = in;
  opt.out = dir.path + "/q.safetensors";
  opt.format = QuantFormat::kNvfp4;
  opt.nvfp4 = reference_encoder(options, nullptr);
  opt.threads = 3;
  Result<QuantizeSummary> s = quantize_checkpoint(opt);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  Result<SafetensorsSet> b = SafetensorsSet::open(opt.out);
  ASSERT_TRUE(b.ok());
  Result<LinearWeight> q = read_quantized_linear("blocks.3.mlp.fc2", quant_lookup_in(*b), n, k);
  ASSERT_TRUE(q.ok()) << q.status().to_string();
  EXPECT_EQ(q->weight.shape(), (Shape{160, 24}));
  EXPECT_EQ(q->weight_scale.shape(), (Shape{256, 4}));
  const ref::Nvfp4Layout l = ref::nvfp4_layout(n, k);
  std::vector<uint8_t> data(l.data_bytes()), scales(l.scale_bytes());
  const float g = ref::nvfp4_global_scale_from_amax(ref::bf16_abs_max_bits(w.data<uint16_t>(), n, k, k));
  ASSERT_TRUE(ref::nvfp4_quantize(w.data<uint16_t>(), n, k, k, g, options, data.data(), scales.data()).ok());
  EXPECT_EQ(std::memcmp(q->weight.raw_data(), data.data(), data.size()), 0);
  EXPECT_EQ(std::memcmp(q->weight_scale.raw_data(), scales.data(), scales.size()), 0);
  Result<Tensor> deq = dequantize_linear_bf16(*q);
  ASSERT_TRUE(deq.ok()) << deq.status().to_string();
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t j = 0; j * 16 < k; ++j) {
      float amax_b = 0.0f;
      for (int64_t c = 16 * j; c < std::min(k, 16 * j + 16); ++c)
        amax_b = std::max(amax_b, std::fabs(f32_from_bf16_bits(w.data<uint16_t>()[r * k + c])));
      for (int64_t c = 16 * j; c < std::min(k, 16 * j + 16); ++c) {
        const double v = f32_from_bf16_bits(w.data<uint16_t>()[r * k + c]);
        const double d = f32_from_bf16_bits(deq->data<uint16_t>()[r * k + c]);
        ASSERT_LE(std::fabs(d - v), 1.07 * (amax_b / 6.0 + std::ldexp(g, -10)) + std::ldexp(std::fabs(v), -8))
            << "(" << r << ", " << c << ")";
      }
    }
  }
  Tensor bias = b->tensor("blocks.3.mlp.fc2.bias").value();
  EXPECT_EQ(std::memcmp(bias.raw_data(), other.raw_data(), other.nbytes()), 0);
}

class QuantizeNvfp4Test : public ::testing::TestWithParam<CheckpointLayout> {};

TEST_P(QuantizeNvfp4Test, ExactDivisionEncodeRoundTrip) {
  ref::Nvfp4Options options;
  options.encode = ref::Nvfp4Encode::kExactDivision;
  round_trip(GetParam(), options, nullptr);
}

TEST_P(QuantizeNvfp4Test, ApproxInstructionEncodeRoundTrip) {
  Result<std::shared_ptr<const ref::RcpApproxTable>> table = ref::RcpApproxTable::default_table();
  if (!table.ok())
    GTEST_SKIP() << "measured rcp.approx table not available (" << table.status().message()
                 << "); the exact-division round trip above covers the file format";
  ref::Nvfp4Options options;
  options.encode = ref::Nvfp4Encode::kApproxInstructions;
  options.rcp = table->get();
  round_trip(GetParam(), options, *table);
}

INSTANTIATE_TEST_SUITE_P(Layouts, QuantizeNvfp4Test,
                         ::testing::Values(CheckpointLayout::kOriginal, CheckpointLayout::kComfy));

}  // namespace
}  // namespace vortex
