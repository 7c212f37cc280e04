// `vortex tokenize (--tokenizer FILE.json | --model DIR) (TEXT | --file F) [--json] [--split-special-tokens]`:
// prints the token ids of a prompt, space-separated (or JSON with each token's tokenizer.json spelling).
// The prompt is checked as the conditioner checks it (text/tokenizer.h: valid UTF-8, not empty, the byte
// and token limits). Exit 2 on bad input (invalid UTF-8, empty or too long prompt, missing file), 1 when
// the tokenizer file cannot be used. Tested in tests/text/tokenize_cli_test.cpp.
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "text/tokenizer.h"

namespace vortex::cli {
namespace {

struct TokenizeArgs {
  std::string tokenizer;
  std::string model;
  std::string text;
  std::string file;
  bool text_given = false;
  bool json = false;
  bool split_special = false;
};

int run_tokenize(const TokenizeArgs& args) {
  auto fail = [](int code, const std::string& m) {
    std::cerr << "vortex tokenize: error: " << m << "\n";
    return code;
  };
  if (args.tokenizer.empty() == args.model.empty())
    return fail(2, "give exactly one of --tokenizer FILE.json or --model DIR");
  if (args.text_given == !args.file.empty()) return fail(2, "give the prompt as TEXT or --file F (one of them)");
  std::string path = args.tokenizer;
  if (!args.model.empty()) {
    Result<std::string> found = Tokenizer::find_in_model_dir(args.model);
    if (!found.ok()) return fail(2, found.status().message());
    path = *found;
  }
  Result<Tokenizer> tok = Tokenizer::from_json_file(path);
  if (!tok.ok()) return fail(exit_code_for(tok.status()), tok.status().message());

  std::string prompt = args.text;
  if (!args.file.empty()) {
    std::ifstream f(args.file, std::ios::binary);
    if (!f) return fail(2, "cannot read the prompt file " + args.file);
    prompt.assign(std::istreambuf_iterator<char>(f), {});
  }
  EncodeOptions options;
  options.split_special_tokens = args.split_special;
  Result<std::vector<int32_t>> ids = tok->encode_prompt(prompt, PromptLimits{}, options);
  if (!ids.ok()) return fail(exit_code_for(ids.status()), ids.status().message());

  if (args.json) {
    nlohmann::json tokens = nlohmann::json::array();
    for (int32_t id : *ids) tokens.push_back(tok->token_string(id).value());
    std::cout << nlohmann::json{{"tokenizer", path}, {"count", ids->size()}, {"ids", *ids}, {"tokens", tokens}}.dump()
              << "\n";
  } else {
    for (size_t i = 0; i < ids->size(); ++i) std::cout << (i ? " " : "") << (*ids)[i];
    std::cout << "\n";
  }
  return 0;
}

}  // namespace

void register_tokenize(CLI::App& app, CommandContext& ctx) {
  auto args = std::make_shared<TokenizeArgs>();
  CLI::App* sub =
      app.add_subcommand("tokenize", "Print the token ids of a prompt (Qwen byte-level BPE tokenizer.json)");
  CLI::Option* text = sub->add_option("text", args->text, "The prompt (UTF-8); or use --file");
  sub->add_option("--file", args->file, "Read the prompt from this file (raw bytes, UTF-8 expected)");
  sub->add_option("--tokenizer", args->tokenizer, "A Hugging Face tokenizer.json");
  sub->add_option("--model", args->model,
                  "A model snapshot folder: DIR/tokenizer.json, DIR/tokenizer/ or DIR/text_encoder/");
  sub->add_flag("--json", args->json, "Print {count, ids, tokens} as JSON");
  sub->add_flag("--split-special-tokens", args->split_special,
                "Encode special tokens such as <|im_start|> as plain text");
  sub->callback([args, text, &ctx]() {
    args->text_given = text->count() > 0;
    ctx.exit_code = run_tokenize(*args);
  });
}

}  // namespace vortex::cli
