// The tiny random Qwen3-VL of fixtures/ (transformers 5.24 Qwen3VLForConditionalGeneration, BF16, sharded)
// loaded from its folder and run by Vortex against transformers' own hidden_states[k] for every k = 0..4 of
// three random-id sequences (19, 37, 53 tokens): k = 0 is the embedding (exact), k = 4 the final norm's output.
// Tolerance: 2x the BF16 noise floor the fixture measured per (sequence, k), transformers' BF16 model against
// the same weights in FP32. Two BF16 programs that differ only in accumulation order and rounding placement sit
// at or below that floor; a real bug (a missed RoPE axis, a non-causal mask, a wrong kv head) sits far above.
// VORTEX_TE_PARITY_BACKEND selects cpu (CI) or cuda (text_encoder_parity_gpu_test, label gpu; skipped visibly
// without a device).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "gpu_test.h"
#include "io/safetensors.h"
#include "text_encoder/text_encoder.h"
#include "vortex/dtype.h"

#ifndef VORTEX_TE_PARITY_BACKEND
#error "VORTEX_TE_PARITY_BACKEND must be \"cpu\" or \"cuda\""
#endif
#define TE_CAT2(a, b) a##b
#define TE_CAT(a, b) TE_CAT2(a, b)
#define TE_SUITE(name) TE_CAT(VORTEX_TE_PARITY_PREFIX, name)

namespace vortex {
namespace {

const std::string kDir = VORTEX_TE_FIXTURES;
constexpr int kSequences = 3, kLayers = 4;

std::vector<double> values(const Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = t.dtype() == DType::kF32 ? t.data<float>()[i] : f32_from_bf16_bits(t.data<uint16_t>()[i]);
  return v;
}

double rel_l2(const std::vector<double>& got, const std::vector<double>& want) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return std::sqrt(num / den);
}

TEST(TE_SUITE(TextEncoderParity), EveryHiddenStateWithinTwiceTheBf16Floor) {
  Result<std::unique_ptr<Backend>> backend = make_backend(VORTEX_TE_PARITY_BACKEND, 0);
  VORTEX_SKIP_NO_GPU_OR_FAIL(backend.status());
  Result<std::unique_ptr<TextEncoder>> enc = TextEncoder::load(kDir + "/model", **backend, kLayers);
  ASSERT_TRUE(enc.ok()) << enc.status().to_string();
  Result<SafetensorsFile> fx = SafetensorsFile::open(kDir + "/hidden_states.safetensors");
  ASSERT_TRUE(fx.ok()) << fx.status().to_string();
  std::printf("%-4s %-3s %-6s %-12s %-12s %s\n", "seq", "k", "rows", "rel_l2", "floor", "ratio");
  for (int s = 0; s < kSequences; ++s) {
    Tensor ids_t = fx->tensor("ids_" + std::to_string(s)).value();
    std::vector<int32_t> ids(ids_t.data<int32_t>(), ids_t.data<int32_t>() + ids_t.numel());
    for (int k = 0; k <= kLayers; ++k) {
      const std::string tag = std::to_string(s) + "_" + std::to_string(k);
      Result<Tensor> got = (*enc)->encode(ids, k);
      ASSERT_TRUE(got.ok()) << got.status().to_string();
      Tensor want = fx->tensor("bf16_" + tag).value();
      ASSERT_EQ(got->shape(), want.shape()) << tag;
      ASSERT_EQ(got->dtype(), DType::kBF16);
      const double floor = std::stod(fx->metadata().at("floor_" + tag));
      const double err = rel_l2(values(*got), values(want));
      std::printf("%-4d %-3d %-6lld %-12.3e %-12.3e %.2f\n", s, k, static_cast<long long>(ids.size()), err, floor,
                  floor > 0 ? err / floor : 0.0);
      if (floor == 0.0) {
        EXPECT_EQ(err, 0.0) << "hidden_states[" << k << "] (the embedding) must be exact, seq " << s;
      } else {
        EXPECT_LE(err, 2.0 * floor) << "hidden_states[" << k << "], seq " << s;
      }
    }
  }
}

}  // namespace
}  // namespace vortex
