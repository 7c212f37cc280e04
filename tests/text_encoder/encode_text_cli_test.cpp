// `vortex encode-text` end to end on the tiny Qwen3-VL fixture: the file it writes is one [L, 128] BF16 tensor
// that `vortex generate --text-embeddings` accepts for h3-tiny (text_dim 128 = the fixture's hidden size);
// the layer index from a pipeline folder's model_index.json (an H3 pipeline asks for 50 of a 4-layer model:
// refused, exit 2); bad ids, a missing layer source and an existing --out are argument errors (exit 2).
#include <gtest/gtest.h>

#include <fstream>

#include "cli/cli_test_util.h"

namespace vortex_cli_test {
namespace {

const std::string kModel = std::string(VORTEX_TE_FIXTURES) + "/model";

TEST(CliEncodeText, WritesEmbeddingsThatGenerateAccepts) {
  ScratchDir dir;
  RunResult r = run_vortex("encode-text --model " + kModel + " --ids \"5 17 300 2,2 499 64\" --text-layer 2 --out " +
                           dir.str("text.safetensors"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ParsedSafetensors st = parse_safetensors(dir.path() / "text.safetensors");
  ASSERT_TRUE(st.header.contains("hidden_states")) << st.header.dump();
  EXPECT_EQ(st.header["hidden_states"]["dtype"], "BF16");
  EXPECT_EQ(st.header["hidden_states"]["shape"], nlohmann::json::array({7, 128}));
  EXPECT_EQ(st.header["__metadata__"]["vortex.text_layer"], "2");
  RunResult g =
      run_vortex("generate --synthetic --width 64 --height 64 --frames 5 --steps 1 --quiet --text-embeddings " +
                 dir.str("text.safetensors") + " --out " + dir.str("run"));
  EXPECT_EQ(g.exit_code, 0) << g.output;
  // An existing output: refused without --overwrite, replaced with it (encode-text wrote it).
  RunResult again = run_vortex("encode-text --model " + kModel + " --ids \"1 2\" --text-layer 1 --out " +
                               dir.str("text.safetensors"));
  EXPECT_EQ(again.exit_code, 2) << again.output;
  RunResult replaced =
      run_vortex("encode-text --model " + kModel + " --ids \"1 2\" --text-layer 4 --overwrite --quiet --out " +
                 dir.str("text.safetensors"));
  EXPECT_EQ(replaced.exit_code, 0) << replaced.output;
  EXPECT_EQ(parse_safetensors(dir.path() / "text.safetensors").header["hidden_states"]["shape"],
            nlohmann::json::array({2, 128}));
  std::ofstream(dir.path() / "user.safetensors") << "not ours";
  RunResult foreign = run_vortex("encode-text --model " + kModel + " --ids 1 --text-layer 1 --overwrite --out " +
                                 dir.str("user.safetensors"));
  EXPECT_EQ(foreign.exit_code, 2) << foreign.output;
  EXPECT_EQ(read_file(dir.path() / "user.safetensors"), "not ours");
}

TEST(CliEncodeText, LayerIndexFromThePipelineFolder) {
  ScratchDir dir;
  fs::create_directories(dir.path() / "pipe");
  fs::create_directory_symlink(fs::absolute(kModel), dir.path() / "pipe" / "text_encoder");
  std::ofstream(dir.path() / "pipe" / "model_index.json") << R"({"_class_name": "MiniMaxH3Pipeline"})";
  RunResult h3 =
      run_vortex("encode-text --model " + dir.str("pipe") + " --ids \"1 2 3\" --out " + dir.str("a.safetensors"));
  EXPECT_EQ(h3.exit_code, 2) << h3.output;  // hidden_states[50] of a 4-layer model
  EXPECT_NE(h3.output.find("--text-layer 50"), std::string::npos) << h3.output;
  std::ofstream(dir.path() / "pipe" / "model_index.json")
      << R"({"_class_name": "MiniMaxH3Pipeline", "text_encoder_layer": 3})";
  std::ofstream(dir.path() / "ids.txt") << "7 8\n9, 10\n";
  RunResult three = run_vortex("encode-text --model " + dir.str("pipe") + " --ids-file " + dir.str("ids.txt") +
                               " --out " + dir.str("b.safetensors"));
  ASSERT_EQ(three.exit_code, 0) << three.output;
  ParsedSafetensors b = parse_safetensors(dir.path() / "b.safetensors");
  EXPECT_EQ(b.header["__metadata__"]["vortex.text_layer"], "3");
  EXPECT_EQ(b.header["hidden_states"]["shape"], nlohmann::json::array({4, 128}));
}

TEST(CliEncodeText, BadInputIsAnArgumentError) {
  ScratchDir dir;
  const std::string out = " --out " + dir.str("o.safetensors");
  for (const std::string& args : {"--model " + kModel + " --text-layer 1" + out,                  // no ids
                                  "--model " + kModel + " --ids \"1 x\" --text-layer 1" + out,    // not an id
                                  "--model " + kModel + " --ids \"1 512\" --text-layer 1" + out,  // outside vocab
                                  "--model " + kModel + " --ids 1" + out,                         // no layer source
                                  "--model " + dir.str("nowhere") + " --ids 1 --text-layer 1" + out}) {
    RunResult r = run_vortex("encode-text " + args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.output;
    EXPECT_FALSE(fs::exists(dir.path() / "o.safetensors")) << args;
  }
}

}  // namespace
}  // namespace vortex_cli_test
