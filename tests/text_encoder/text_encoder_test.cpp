// Text encoder pieces other than parity: config.json parsing (transformers 5.x and 4.x spellings, refusals),
// the M-RoPE tables bit for bit against transformers' Qwen3VLTextRotaryEmbedding at distinct (t, h, w)
// positions, the key spec, loading only K layers from the sharded folder, synthetic weights (deterministic,
// independent of K), the layer-index contract (prefix property, errors), the pipeline's layer index, and the
// cancel between layers (encode) and between layer loads (load).
#include <gtest/gtest.h>

#include <unistd.h>
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "io/safetensors.h"
#include "text_encoder/mrope.h"
#include "text_encoder/text_encoder.h"
#include "vortex/dtype.h"

namespace vortex {
namespace {

namespace fs = std::filesystem;
const std::string kDir = VORTEX_TE_FIXTURES;

TEST(TextEncoderConfig, ParsesTheFixtureConfig) {
  Result<TextEncoderConfig> c = TextEncoderConfig::from_file(kDir + "/model/config.json");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->hidden, 128);
  EXPECT_EQ(c->num_layers, 4);
  EXPECT_EQ(c->num_heads, 4);
  EXPECT_EQ(c->num_kv_heads, 2);
  EXPECT_EQ(c->head_dim, 32);
  EXPECT_EQ(c->ffn, 192);
  EXPECT_EQ(c->vocab, 512);
  EXPECT_FLOAT_EQ(c->rms_norm_eps, 1e-6f);
  EXPECT_DOUBLE_EQ(c->rope_theta, 5e6);
  EXPECT_EQ(c->mrope_section, (std::array<int, 3>{6, 5, 5}));
}

TEST(TextEncoderConfig, ParsesTransformers4SpellingOfQwen3Vl32b) {
  const std::string text = R"({"model_type": "qwen3_vl", "text_config": {"hidden_size": 5120, "num_hidden_layers": 64,
    "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 25600,
    "vocab_size": 151936, "rms_norm_eps": 1e-06, "rope_theta": 5000000,
    "rope_scaling": {"mrope_interleaved": true, "mrope_section": [24, 20, 20], "rope_type": "default"}}})";
  Result<TextEncoderConfig> c = TextEncoderConfig::from_json_text(text, "config.json");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  const TextEncoderConfig r = TextEncoderConfig::qwen3_vl_32b();
  EXPECT_EQ(c->hidden, r.hidden);
  EXPECT_EQ(c->num_layers, r.num_layers);
  EXPECT_EQ(c->num_kv_heads, r.num_kv_heads);
  EXPECT_EQ(c->ffn, r.ffn);
  EXPECT_EQ(c->vocab, r.vocab);
  EXPECT_DOUBLE_EQ(c->rope_theta, r.rope_theta);
  EXPECT_EQ(c->mrope_section, r.mrope_section);
}

TEST(TextEncoderConfig, RefusesWhatItCannotRunFaithfully) {
  const std::string base = R"({"hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
    "num_key_value_heads": 2, "head_dim": 32, "intermediate_size": 64, "vocab_size": 16, "rope_parameters": )";
  auto parse = [&](const std::string& rope) { return TextEncoderConfig::from_json_text(base + rope + "}", "c"); };
  EXPECT_TRUE(parse(R"({"rope_theta": 1e6, "mrope_section": [6, 5, 5]})").ok());
  EXPECT_EQ(parse(R"({"rope_theta": 1e6, "mrope_section": [6, 5, 4]})").status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(parse(R"({"rope_theta": 1e6, "mrope_section": [6, 5, 5], "mrope_interleaved": false})").status().code(),
            ErrorCode::kUnsupported);
  EXPECT_EQ(parse(R"({"rope_theta": 1e6, "rope_type": "yarn", "mrope_section": [6, 5, 5]})").status().code(),
            ErrorCode::kUnsupported);
  EXPECT_FALSE(TextEncoderConfig::from_json_text("{\"hidden_size\": 128}", "c").ok());
  EXPECT_FALSE(TextEncoderConfig::from_json_text("not json", "c").ok());
}

TEST(Mrope, TablesEqualTransformersAtDistinctPositions) {
  TextEncoderConfig c = TextEncoderConfig::from_file(kDir + "/model/config.json").value();
  SafetensorsFile fx = SafetensorsFile::open(kDir + "/hidden_states.safetensors").value();
  Tensor pos = fx.tensor("rope_positions").value();                                           // [3, 48] i32
  Tensor want_cos = fx.tensor("rope_cos").value(), want_sin = fx.tensor("rope_sin").value();  // [48, 32] bf16
  Tensor p = Tensor::empty(pos.shape(), DType::kI32);
  std::memcpy(p.raw_data(), pos.raw_data(), pos.nbytes());
  Result<RopeTables> t = make_mrope_tables(c, p);
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  const int64_t rows = pos.dim(1);
  const int half = c.head_dim / 2;
  int64_t differ = 0;
  for (int64_t i = 0; i < rows; ++i)
    for (int d = 0; d < c.head_dim; ++d) {  // transformers' table is cat(freqs, freqs): column d % half
      differ += t->cos.data<uint16_t>()[i * half + d % half] != want_cos.data<uint16_t>()[i * c.head_dim + d];
      differ += t->sin.data<uint16_t>()[i * half + d % half] != want_sin.data<uint16_t>()[i * c.head_dim + d];
    }
  EXPECT_EQ(differ, 0) << "of " << 2 * rows * c.head_dim << " table entries";
  // The interleaved assignment: t h w t h w ... for 3 * 5 columns, then t.
  for (int j = 0; j < half; ++j) EXPECT_EQ(mrope_axis(c, j), j < 15 ? j % 3 : 0) << j;
}

TEST(Mrope, TextPositionsAreEqualOnAllAxes) {
  Tensor p = text_mrope_positions(7);
  ASSERT_EQ(p.shape(), (Shape{3, 7}));
  for (int a = 0; a < 3; ++a)
    for (int i = 0; i < 7; ++i) EXPECT_EQ(p.data<int32_t>()[a * 7 + i], i);
}

TEST(TextEncoderWeights, SpecHasTheCheckpointKeysOfTheFirstKLayers) {
  TextEncoderConfig c = TextEncoderConfig::qwen3_vl_32b();
  std::vector<TextEncoderTensorSpec> s = text_encoder_tensor_specs(c, 50).value();
  ASSERT_EQ(s.size(), 1u + 50u * 11u);  // no final norm for 50 of 64 layers
  EXPECT_EQ(s.front().name, "model.language_model.embed_tokens.weight");
  EXPECT_EQ(s.front().shape, (Shape{151936, 5120}));
  EXPECT_EQ(s.back().name, "model.language_model.layers.49.mlp.down_proj.weight");
  EXPECT_EQ(s.back().shape, (Shape{5120, 25600}));
  EXPECT_EQ(s[3].name, "model.language_model.layers.0.self_attn.k_proj.weight");
  EXPECT_EQ(s[3].shape, (Shape{1024, 5120}));
  EXPECT_EQ(text_encoder_tensor_specs(c, 64).value().back().name, "model.language_model.norm.weight");
  EXPECT_FALSE(text_encoder_tensor_specs(c, 65).ok());
}

TEST(TextEncoder, LoadsOnlyTheFirstKLayersAndKeepsThePrefixProperty) {
  std::unique_ptr<Backend> be = make_backend("cpu", 2).value();
  const std::vector<int32_t> ids = {5, 17, 300, 2, 2, 499, 64, 128};
  std::unique_ptr<TextEncoder> full = TextEncoder::load(kDir + "/model", *be, 4).value();
  std::unique_ptr<TextEncoder> two = TextEncoder::load(kDir + "/model", *be, 2).value();
  EXPECT_EQ(two->layers_loaded(), 2);
  for (int k = 0; k <= 2; ++k) {
    Tensor a = full->encode(ids, k).value(), b = two->encode(ids, k).value();
    EXPECT_EQ(std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()), 0) << "hidden_states[" << k << "]";
  }
  // hidden_states[2] of a 2-layer load is pre-norm (the H3 trap): it never applies the final norm.
  Result<Tensor> three = two->encode(ids, 3);
  EXPECT_EQ(three.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(three.status().message().find("only 2 were loaded"), std::string::npos) << three.status().message();
  EXPECT_EQ(full->encode(ids, 5).status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(full->encode({1, 512}, 1).status().code(), ErrorCode::kInvalidArgument);  // id outside the vocabulary
  EXPECT_EQ(full->encode({}, 1).status().code(), ErrorCode::kInvalidArgument);
}

// A cancel set from the per-layer callback at layer k stops the encode before layer k + 1 with kCancelled; the
// hooks change no byte of a run they do not stop, and the encoder stays usable after a cancel.
TEST(TextEncoder, ACancelStopsTheEncodeAtTheNextLayer) {
  std::unique_ptr<Backend> be = make_backend("cpu", 2).value();
  std::unique_ptr<TextEncoder> enc = TextEncoder::load(kDir + "/model", *be, 4).value();
  std::mt19937 rng(std::random_device{}());
  std::vector<int32_t> ids(12);
  for (int32_t& id : ids) id = static_cast<int32_t>(rng() % 512);
  const Tensor want = enc->encode(ids, 4).value();
  std::atomic<bool> flag{false};
  std::vector<std::pair<int, int>> calls;
  TextEncodeControl control;
  control.cancel = &flag;
  control.on_layer = [&](int done, int total) { calls.emplace_back(done, total); };
  Result<Tensor> followed = enc->encode(ids, 4, control);
  ASSERT_TRUE(followed.ok()) << followed.status().to_string();
  EXPECT_EQ(std::memcmp(want.raw_data(), followed->raw_data(), want.nbytes()), 0);
  EXPECT_EQ(calls, (std::vector<std::pair<int, int>>{{1, 4}, {2, 4}, {3, 4}, {4, 4}}));
  for (int k = 1; k <= 4; ++k) {
    flag = false;
    calls.clear();
    control.on_layer = [&](int done, int total) {
      calls.emplace_back(done, total);
      if (done == k) flag = true;
    };
    Result<Tensor> r = enc->encode(ids, 4, control);
    ASSERT_FALSE(r.ok()) << "layer " << k;
    EXPECT_EQ(r.status().code(), ErrorCode::kCancelled) << r.status().to_string();
    EXPECT_EQ(static_cast<int>(calls.size()), k) << "layers run after the cancel at layer " << k;
    if (k < 4) {
      EXPECT_NE(r.status().message().find("before text encoder layer " + std::to_string(k)), std::string::npos)
          << r.status().message();
    }
  }
  flag = true;  // set before the call: no layer runs
  calls.clear();
  EXPECT_EQ(enc->encode(ids, 2, control).status().code(), ErrorCode::kCancelled);
  EXPECT_TRUE(calls.empty());
  Tensor again = enc->encode(ids, 4).value();
  EXPECT_EQ(std::memcmp(want.raw_data(), again.raw_data(), want.nbytes()), 0);
}

// A cancel set from the load progress once layer k is on the backend ends the load before layer k + 1 is read.
TEST(TextEncoder, ACancelStopsTheLoadBetweenLayerLoads) {
  std::unique_ptr<Backend> be = make_backend("cpu", 1).value();
  for (int k = 1; k <= 3; ++k) {
    std::atomic<bool> flag{false};
    int most = -1;
    TextEncoderLoadProgressFn progress = [&](const TextEncoderLoadProgress& p) {
      most = std::max(most, p.layers_done);
      if (p.layers_done == k) flag = true;
    };
    Result<std::unique_ptr<TextEncoder>> r = TextEncoder::load(kDir + "/model", *be, 4, progress, &flag);
    ASSERT_FALSE(r.ok()) << "layer " << k;
    EXPECT_EQ(r.status().code(), ErrorCode::kCancelled);
    EXPECT_EQ(most, k);
    EXPECT_NE(r.status().message().find(std::to_string(k) + " of 4 layers loaded"), std::string::npos)
        << r.status().message();
  }
  std::atomic<bool> never{false};
  EXPECT_TRUE(TextEncoder::load(kDir + "/model", *be, 4, nullptr, &never).ok());
}

TEST(TextEncoder, LoaderNamesMissingAndMisshapedTensors) {
  const fs::path tmp = fs::temp_directory_path() / ("vortex_te_" + std::to_string(::getpid()));
  fs::create_directories(tmp);
  fs::copy_file(kDir + "/model/config.json", tmp / "config.json", fs::copy_options::overwrite_existing);
  SafetensorsSet set = SafetensorsSet::open(kDir + "/model/model.safetensors.index.json").value();
  std::vector<std::pair<std::string, Tensor>> keep;
  for (const std::string& n : set.names()) {
    if (n == "model.language_model.layers.1.self_attn.k_norm.weight") continue;  // dropped
    Tensor t = set.tensor(n).value();
    if (n == "model.language_model.layers.0.mlp.up_proj.weight") t = t.narrow(0, 0, 100).value();
    keep.emplace_back(n, t);
  }
  ASSERT_TRUE(write_safetensors((tmp / "model.safetensors").string(), keep).ok());
  std::unique_ptr<Backend> be = make_backend("cpu", 1).value();
  Result<std::unique_ptr<TextEncoder>> r = TextEncoder::load(tmp.string(), *be, 4);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kFormat);
  EXPECT_NE(r.status().message().find("missing model.language_model.layers.1.self_attn.k_norm.weight"),
            std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("layers.0.mlp.up_proj.weight is"), std::string::npos) << r.status().message();
  // One layer needs layer 0's mis-shaped up_proj but not layer 1's missing k_norm.
  Result<std::unique_ptr<TextEncoder>> one = TextEncoder::load(tmp.string(), *be, 1);
  ASSERT_FALSE(one.ok());
  EXPECT_EQ(one.status().message().find("k_norm"), std::string::npos) << one.status().message();
  fs::remove_all(tmp);
}

TEST(TextEncoder, SyntheticWeightsAreDeterministicAndIndependentOfK) {
  std::unique_ptr<Backend> be = make_backend("cpu", 2).value();
  TextEncoderConfig c = TextEncoderConfig::from_file(kDir + "/model/config.json").value();
  std::unique_ptr<TextEncoder> a = TextEncoder::synthesize(c, *be, 7, 4).value();
  std::unique_ptr<TextEncoder> b = TextEncoder::synthesize(c, *be, 7, 2).value();
  std::unique_ptr<TextEncoder> other = TextEncoder::synthesize(c, *be, 8, 2).value();
  const std::vector<int32_t> ids = {1, 2, 3, 4, 5, 6};
  Tensor ha = a->encode(ids, 2).value(), hb = b->encode(ids, 2).value(), ho = other->encode(ids, 2).value();
  EXPECT_EQ(std::memcmp(ha.raw_data(), hb.raw_data(), ha.nbytes()), 0);
  EXPECT_NE(std::memcmp(ha.raw_data(), ho.raw_data(), ha.nbytes()), 0);
  Tensor last = a->encode(ids, 4).value();
  for (int64_t i = 0; i < last.numel(); ++i) ASSERT_TRUE(std::isfinite(f32_from_bf16_bits(last.data<uint16_t>()[i])));
}

TEST(TextEncoder, PipelineLayerIndex) {
  const fs::path tmp = fs::temp_directory_path() / ("vortex_te_pipe_" + std::to_string(::getpid()));
  fs::create_directories(tmp / "text_encoder");
  EXPECT_EQ(pipeline_text_layer(tmp.string()).status().code(), ErrorCode::kNotFound);
  std::ofstream(tmp / "model_index.json") << R"({"_class_name": "MiniMaxH3Pipeline"})";
  EXPECT_EQ(pipeline_text_layer(tmp.string()).value(), 50);
  EXPECT_EQ(pipeline_text_layer((tmp / "text_encoder").string()).value(), 50);
  std::ofstream(tmp / "model_index.json") << R"({"_class_name": "Other", "text_encoder_layer": 3})";
  EXPECT_EQ(pipeline_text_layer(tmp.string()).value(), 3);
  fs::copy_file(kDir + "/model/config.json", tmp / "text_encoder" / "config.json");
  EXPECT_EQ(text_encoder_folder(tmp.string()).value(), (tmp / "text_encoder").string());
  EXPECT_EQ(text_encoder_folder((tmp / "text_encoder").string()).value(), (tmp / "text_encoder").string());
  fs::remove_all(tmp);
}

}  // namespace
}  // namespace vortex
