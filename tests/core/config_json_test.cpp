// The shared config reader (src/core/config_json.h): either spelling of one quantity, both spellings agreeing or
// refused when they disagree, typed errors naming the key and the file, and the class-name table that makes every
// loader refuse another component's config with one message. The release's own files are read in
// tests/engine/release_configs_test.cpp.
#include "core/config_json.h"

#include <gtest/gtest.h>

namespace vortex {
namespace {

ConfigJson parse_ok(const std::string& text) {
  Result<ConfigJson> j = ConfigJson::parse(text, "cfg.json");
  EXPECT_TRUE(j.ok()) << j.status().to_string();
  return j.ok() ? *j : ConfigJson();
}

TEST(ConfigJson, EitherSpellingIsReadAndAgreeingSpellingsAreAccepted) {
  EXPECT_EQ(*parse_ok(R"({"ffn_hidden_size": 14336})").get_int({"ffn_hidden_size", "ffn_dim"}, 7), 14336);
  EXPECT_EQ(*parse_ok(R"({"ffn_dim": 14336})").get_int({"ffn_hidden_size", "ffn_dim"}, 7), 14336);
  EXPECT_EQ(*parse_ok(R"({"ffn_dim": 14336, "ffn_hidden_size": 14336})").get_int({"ffn_hidden_size", "ffn_dim"}, 7),
            14336);
  EXPECT_EQ(*parse_ok(R"({"other": 1})").get_int({"ffn_hidden_size", "ffn_dim"}, 7), 7);
  EXPECT_EQ(*parse_ok(R"({"ffn_dim": null})").get_int({"ffn_hidden_size", "ffn_dim"}, 7), 7);
  EXPECT_DOUBLE_EQ(*parse_ok(R"({"eps": 1e-05, "norm_eps": 0.00001})").get_number({"eps", "norm_eps"}, 0.0), 1e-5);
}

TEST(ConfigJson, DisagreeingSpellingsAreRefusedNamingBoth) {
  Result<int> r = parse_ok(R"({"token_refiner_num_layers": 2, "num_refiner_layers": 3})")
                      .get_int({"token_refiner_num_layers", "num_refiner_layers"}, 0);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kFormat);
  for (const char* want : {"cfg.json", "'token_refiner_num_layers' = 2", "'num_refiner_layers' = 3", "disagree"})
    EXPECT_NE(r.status().message().find(want), std::string::npos) << want << ": " << r.status().message();
  Result<double> d = parse_ok(R"({"a": 1.5, "b": 2.5})").get_number({"a", "b"}, 0.0);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("disagree"), std::string::npos) << d.status().message();
}

TEST(ConfigJson, WrongTypesAndRangesNameTheKeyAndTheFile) {
  struct Case {
    const char* text;
    const char* want;
  } cases[] = {{R"({"k": "5"})", "'k' must be an integer, got \"5\""},
               {R"({"k": 1.5})", "'k' must be an integer"},
               {R"({"k": 99999999999})", "'k' out of range (a 32-bit integer)"},
               {R"({"k": true})", "'k' must be an integer"}};
  for (const Case& c : cases) {
    Result<int> r = parse_ok(c.text).get_int({"k"}, 0);
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_EQ(r.status().code(), ErrorCode::kFormat);
    EXPECT_NE(r.status().message().find(c.want), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("cfg.json"), std::string::npos) << r.status().message();
  }
  EXPECT_FALSE(parse_ok(R"({"k": [1, "x"]})").get_ints("k", {}).ok());
  EXPECT_FALSE(parse_ok(R"({"k": [1, 2.5]})").get_ints("k", {}).ok());
  EXPECT_FALSE(parse_ok(R"({"k": [1, "x"]})").get_numbers("k", {}).ok());
  EXPECT_FALSE(parse_ok(R"({"k": 3})").get_string("k", "").ok());
  EXPECT_FALSE(parse_ok(R"({"k": 1})").get_bool("k", true).ok());
  EXPECT_EQ(*parse_ok(R"({"k": [1, 2, 3]})").get_ints("k", {}), (std::vector<int>{1, 2, 3}));
  Result<int> missing = parse_ok("{}").require_int("hidden_size", 1, 10);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("cfg.json: 'hidden_size' is missing"), std::string::npos)
      << missing.status().message();
  Result<int> low = parse_ok(R"({"hidden_size": 0})").require_int("hidden_size", 1, 10);
  ASSERT_FALSE(low.ok());
  EXPECT_NE(low.status().message().find("in [1, 10]"), std::string::npos) << low.status().message();
}

TEST(ConfigJson, NotJsonOrNotAnObjectIsAFormatError) {
  for (const char* text : {"{", "[1, 2]", "3", "", "{\"a\": \"\xff\"}"}) {
    Result<ConfigJson> j = ConfigJson::parse(text, "x/config.json");
    ASSERT_FALSE(j.ok()) << text;
    EXPECT_EQ(j.status().code(), ErrorCode::kFormat) << text;
    EXPECT_NE(j.status().message().find("x/config.json"), std::string::npos) << j.status().message();
  }
  Result<ConfigJson> none = ConfigJson::read_file("/nonexistent/vortex/config.json");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), ErrorCode::kNotFound);
}

TEST(ConfigJson, ClassNamesOfTheReleaseMapToTheirComponent) {
  EXPECT_EQ(config_kind_of_class("MiniMaxH3DiTModel"), ConfigKind::kTransformer);
  EXPECT_EQ(config_kind_of_class("MiniMaxH3Transformer3DModel"), ConfigKind::kTransformer);
  EXPECT_EQ(config_kind_of_class("AutoencoderKLMiniMaxH3"), ConfigKind::kVideoVae);
  EXPECT_EQ(config_kind_of_class("MiniMaxH3VideoVAE"), ConfigKind::kVideoVae);
  EXPECT_EQ(config_kind_of_class("AutoencoderKLMiniMaxH3Audio"), ConfigKind::kAudioVae);
  EXPECT_EQ(config_kind_of_class("MiniMaxH3AudioVAE"), ConfigKind::kAudioVae);
  EXPECT_EQ(config_kind_of_class("Qwen3VLForConditionalGeneration"), ConfigKind::kTextEncoder);
  EXPECT_EQ(config_kind_of_class("MiniMaxH3ModularPipeline"), ConfigKind::kPipeline);
  EXPECT_EQ(config_kind_of_class("MiniMaxH3Pipeline"), ConfigKind::kPipeline);
  EXPECT_EQ(config_kind_of_class("MiniMaxH3Scheduler"), ConfigKind::kScheduler);
  EXPECT_EQ(config_kind_of_class("SomethingElse"), ConfigKind::kUnknown);
  // transformers' spelling of the class
  EXPECT_EQ(parse_ok(R"({"architectures": ["Qwen3VLForConditionalGeneration"]})").kind(), ConfigKind::kTextEncoder);
  EXPECT_EQ(parse_ok(R"({"_minimax_h3": {"partition": "fl2va"}})").kind(), ConfigKind::kPipeline);
}

TEST(ConfigJson, AnotherComponentIsRefusedSayingWhatItHoldsAndWhereTheWantedOneIs) {
  const ConfigJson vae = parse_ok(R"({"_class_name": "AutoencoderKLMiniMaxH3"})");
  Status s = vae.expect_kind(ConfigKind::kTransformer);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), ErrorCode::kFormat);
  for (const char* want : {"cfg.json holds the video VAE (AutoencoderKLMiniMaxH3)", "not the H3 transformer",
                           "transformer/ (diffusers layout) or FL2VA/transformer/ (original layout)"})
    EXPECT_NE(s.message().find(want), std::string::npos) << want << ": " << s.message();
  s = parse_ok(R"({"_class_name": "MiniMaxH3DiTModel"})").expect_kind(ConfigKind::kTextEncoder);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("holds the H3 transformer (MiniMaxH3DiTModel), not the text encoder"), std::string::npos)
      << s.message();
  // The wanted kind, no class name, or a class name the table does not know: accepted (the numbers decide).
  EXPECT_TRUE(parse_ok(R"({"_class_name": "MiniMaxH3DiTModel"})").expect_kind(ConfigKind::kTransformer).ok());
  EXPECT_TRUE(parse_ok(R"({"_class_name": "MiniMaxH3Transformer3DModel"})").expect_kind(ConfigKind::kTransformer).ok());
  EXPECT_TRUE(parse_ok(R"({"hidden_size": 4})").expect_kind(ConfigKind::kTransformer).ok());
  EXPECT_TRUE(parse_ok(R"({"_class_name": "MiniMaxH3DiTModelV2"})").expect_kind(ConfigKind::kTransformer).ok());
}

TEST(ConfigJson, ObjectsAreLabelledByTheirPath) {
  const ConfigJson root = parse_ok(R"({"text_config": {"hidden_size": "x"}, "n": 1})");
  Result<ConfigJson> t = root.object("text_config");
  ASSERT_TRUE(t.ok());
  Result<int> h = t->get_int({"hidden_size"}, 0);
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.status().message().find("cfg.json:text_config: 'hidden_size'"), std::string::npos)
      << h.status().message();
  EXPECT_FALSE(root.object("n").ok());
  EXPECT_FALSE(root.object("absent").ok());
}

}  // namespace
}  // namespace vortex
