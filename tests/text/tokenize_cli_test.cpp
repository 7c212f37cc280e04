// `vortex tokenize` end to end (the built binary): ids equal the fixture's HF/tiktoken ids for TEXT and
// --file input, --json, --model folder lookup, and the exit codes (2 bad input, 1 unusable tokenizer).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/cli_test_util.h"

namespace {

using vortex_cli_test::run_vortex;
using vortex_cli_test::ScratchDir;
using json = nlohmann::json;
namespace fs = std::filesystem;

const std::string kQwen = std::string(VORTEX_TEXT_QWEN_DIR) + "/qwen_tokenizer.json";
const std::string kTiny = std::string(VORTEX_TEXT_FIXTURES) + "/tiny_tokenizer.json";

json corpus_row(const std::string& name) {
  const json c = json::parse(vortex_cli_test::read_file(std::string(VORTEX_TEXT_FIXTURES) + "/qwen_corpus.json"));
  for (const json& row : c["valid"])
    if (row["name"] == name) return row;
  ADD_FAILURE() << "no corpus row " << name;
  return json::object();
}

std::string joined(const std::vector<int32_t>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) s.append(i ? " " : "").append(std::to_string(ids[i]));
  return s.append("\n");
}

void write(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f << bytes;
}

TEST(TokenizeCliTest, TextPrintsTheOracleIds) {
  const json row = corpus_row("ascii_sentence");
  const auto r =
      run_vortex(std::string("tokenize --tokenizer '") + kQwen + "' '" + row["text"].get<std::string>() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, joined(row["hf_ids"].get<std::vector<int32_t>>()));
}

TEST(TokenizeCliTest, FileKeepsCrLfAndSpecialTokens) {
  ScratchDir dir;
  for (const char* name : {"crlf", "special_chat", "emoji_zwj", "combining_decomposed"}) {
    const json row = corpus_row(name);
    write(dir.str("prompt.txt"), row["text"].get<std::string>());
    const auto r =
        run_vortex(std::string("tokenize --tokenizer '") + kQwen + "' --file '" + dir.str("prompt.txt") + "'");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(r.output, joined(row["tiktoken_ids"].get<std::vector<int32_t>>())) << name;
  }
}

TEST(TokenizeCliTest, JsonListsIdsAndSpellings) {
  const auto r = run_vortex(std::string("tokenize --json --tokenizer '") + kQwen + "' 'A cat<|im_end|>'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json j = json::parse(r.output);
  EXPECT_EQ(j["count"], 3);
  EXPECT_EQ(j["ids"].size(), 3u);
  EXPECT_EQ(j["ids"][2], 151645);
  EXPECT_EQ(j["tokens"], json::array({"A",
                                      "\xc4\xa0"
                                      "cat",
                                      "<|im_end|>"}));
}

TEST(TokenizeCliTest, ModelFolderFindsTokenizerJson) {
  ScratchDir dir;
  fs::create_directories(dir.path() / "tokenizer");
  fs::copy_file(kTiny, dir.path() / "tokenizer" / "tokenizer.json");
  const auto ok = run_vortex(std::string("tokenize --model '") + dir.path().string() + "' hello");
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_FALSE(ok.output.empty());
  const auto none = run_vortex(std::string("tokenize --model '") + dir.str("tokenizer") + "/missing' hello");
  EXPECT_EQ(none.exit_code, 2) << none.output;
}

TEST(TokenizeCliTest, ExitCodes) {
  ScratchDir dir;
  write(dir.str("bad.txt"), std::string("ok \xe2\x82", 5));
  const auto bad = run_vortex(std::string("tokenize --tokenizer '") + kTiny + "' --file '" + dir.str("bad.txt") + "'");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.output.find("invalid UTF-8 at byte 3"), std::string::npos) << bad.output;

  const auto empty = run_vortex(std::string("tokenize --tokenizer '") + kTiny + "' ''");
  EXPECT_EQ(empty.exit_code, 2);
  EXPECT_NE(empty.output.find("empty"), std::string::npos) << empty.output;

  EXPECT_EQ(run_vortex(std::string("tokenize --tokenizer /nonexistent.json hi")).exit_code, 2);
  EXPECT_EQ(run_vortex(std::string("tokenize --tokenizer '") + kTiny + "' --file /nonexistent.txt").exit_code, 2);
  EXPECT_EQ(run_vortex(std::string("tokenize --tokenizer '") + kTiny + "'").exit_code, 2);  // no prompt
  EXPECT_EQ(run_vortex(std::string("tokenize hi")).exit_code, 2);                           // no tokenizer
  EXPECT_EQ(
      run_vortex(std::string("tokenize --tokenizer '") + kTiny + "' --file '" + dir.str("bad.txt") + "' hi").exit_code,
      2);

  write(dir.str("broken.json"), "{\"model\": {\"type\": \"Unigram\"}}");
  const auto broken = run_vortex(std::string("tokenize --tokenizer '") + dir.str("broken.json") + "' hi");
  EXPECT_EQ(broken.exit_code, 2);  // a tokenizer.json Vortex cannot read is bad input, like a malformed one
  EXPECT_NE(broken.output.find("not supported"), std::string::npos) << broken.output;
}

}  // namespace
