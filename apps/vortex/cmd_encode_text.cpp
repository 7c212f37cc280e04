// `vortex encode-text --model DIR (--prompt TEXT | --ids "1 2 3" | --ids-file F) [--text-layer K] --out F.safetensors`:
// runs the Qwen3-VL conditioner (src/text_encoder) and writes hidden_states[K] as one [L, hidden] BF16 tensor, the
// file `vortex generate --text-embeddings F` reads. A prompt is presented as diffusers' MiniMax-H3 t2va step does
// (engine/prompt_encoder.h) with the folder's tokenizer.json; DIR is the snapshot, its FL2VA/ partition or a
// transformers folder (engine/model_folder.h). K comes from the folder's pipeline config (50 for H3) unless
// --text-layer overrides it; only the first K decoder layers are read.
// An existing --out is kept unless --overwrite, and then only replaced if encode-text wrote it.
// Exit 2 on bad arguments or input, 1 on runtime failures. Tested in tests/text_encoder/encode_text_cli_test.cpp.
#include <charconv>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "commands.h"
#include "engine/model_folder.h"
#include "engine/prompt_encoder.h"
#include "io/safetensors.h"
#include "request_flags_cli.h"
#include "text_encoder/text_encoder.h"

namespace vortex::cli {
namespace {

namespace fs = std::filesystem;

constexpr const char* kWrittenByKey = "vortex.encode_text";

// The command's own flags (--ids, --ids-file); the shared ones (--model, --prompt, --text-layer, --backend,
// --threads, --out, --overwrite, --quiet) come from the option table into `flags`, parsed into `spec`.
struct EncodeTextArgs {
  FlagValues flags;
  std::string ids, ids_file;
  api::RequestSpec spec;
  const std::string& model() const { return spec.model_dir; }
  const std::string& prompt() const { return spec.run.prompt; }
  const std::string& out() const { return spec.out_dir; }
};

// Whitespace- or comma-separated non-negative integers.
Result<std::vector<int32_t>> parse_ids(const std::string& text, const std::string& what) {
  std::vector<int32_t> ids;
  std::string token;
  std::istringstream in(text);
  while (in >> token) {
    std::string_view rest(token);
    while (!rest.empty()) {
      const size_t comma = rest.find(',');
      const std::string_view t = rest.substr(0, comma);
      if (!t.empty()) {
        int32_t v = 0;
        auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
        if (ec != std::errc() || p != t.data() + t.size() || v < 0)
          return invalid_argument(what + ": '" + std::string(t) + "' is not a non-negative token id");
        ids.push_back(v);
      }
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    }
  }
  if (ids.empty()) return invalid_argument(what + " holds no token ids");
  return ids;
}

Result<std::vector<int32_t>> token_ids(const EncodeTextArgs& a) {
  if (a.ids.empty() == a.ids_file.empty())
    return invalid_argument("pass exactly one of --ids \"1 2 3\" and --ids-file F");
  if (!a.ids.empty()) return parse_ids(a.ids, "--ids");
  std::ifstream in(a.ids_file);
  if (!in) return not_found("--ids-file " + a.ids_file + " cannot be opened");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_ids(ss.str(), "--ids-file " + a.ids_file);
}

Status check_out(const EncodeTextArgs& a) {
  if (a.out().empty()) return invalid_argument("--out F.safetensors is required");
  std::error_code ec;
  if (!fs::exists(a.out(), ec)) return Status::Ok();
  if (!a.spec.overwrite) return invalid_argument("--out " + a.out() + " exists; pass --overwrite to replace it");
  Result<SafetensorsFile> f = SafetensorsFile::open(a.out());
  if (!f.ok() || f->metadata().count(kWrittenByKey) == 0)
    return invalid_argument("--out " + a.out() +
                            " exists and was not written by vortex encode-text; it is left untouched");
  return Status::Ok();
}

Status run(const EncodeTextArgs& a, int& exit_code) {
  auto fail = [&](Status s, int code) {
    exit_code = code;
    return s;
  };
  const bool from_prompt = !a.prompt().empty();
  if (from_prompt && (!a.ids.empty() || !a.ids_file.empty()))
    return fail(invalid_argument("--prompt excludes --ids and --ids-file: give one text source"), 2);
  Result<std::vector<int32_t>> ids = std::vector<int32_t>{};
  if (from_prompt) {
    if (Status s = validate_prompt_field(a.prompt(), PromptLimits{}, "--prompt"); !s.ok())
      return fail(s, 2);  // before any file
  } else {
    ids = token_ids(a);
    if (!ids.ok()) return fail(ids.status(), 2);
  }
  if (Status s = check_out(a); !s.ok()) return fail(s, 2);
  if (a.model().empty())
    return fail(invalid_argument("--model DIR is required (a Qwen3-VL folder or an H3 pipeline folder)"), 2);
  int layer = a.spec.text_layer;
  std::string tokenizer_path;
  if (from_prompt) {
    Result<ModelFolder> folder = open_model_folder(a.model());
    if (!folder.ok()) return fail(folder.status(), 2);
    if (Status s = require_parts(*folder, {"text_encoder", "tokenizer"}, "needed to encode a prompt"); !s.ok())
      return fail(s, 2);
    tokenizer_path = folder->path_of("tokenizer");
    if (layer < 0) layer = folder->text_layer;
    if (layer < 0)
      return fail(
          not_found("--model " + a.model() + " has no pipeline config naming the text layer; pass --text-layer K"), 2);
  }
  if (layer < 0) {
    Result<int> l = pipeline_text_layer(a.model());
    if (!l.ok()) return fail(l.status(), 2);
    layer = *l;
  }
  const std::string backend_name = backend_kind_name(a.spec.load.backend);
  Result<std::unique_ptr<Backend>> backend = make_backend(backend_name, a.spec.load.threads);
  if (!backend.ok()) return fail(backend.status(), exit_code_for(backend.status()));
  Result<std::string> folder = text_encoder_folder(a.model());
  if (!folder.ok()) return fail(folder.status(), 2);
  Result<TextEncoderConfig> cfg = TextEncoderConfig::from_file((fs::path(*folder) / "config.json").string());
  if (!cfg.ok()) return fail(cfg.status(), 2);
  if (layer > cfg->num_layers)
    return fail(invalid_argument("--text-layer " + std::to_string(layer) + ": the model has hidden_states[0.." +
                                 std::to_string(cfg->num_layers) + "]"),
                2);
  if (from_prompt) {
    Result<std::shared_ptr<const Tokenizer>> tok = shared_tokenizer(tokenizer_path);
    if (!tok.ok()) return fail(tok.status(), 2);
    ids = present_t2va_prompt(**tok, *cfg, a.prompt(), "--prompt");
    if (!ids.ok()) return fail(ids.status(), 2);
  }
  const bool tty = !a.spec.quiet && ::isatty(::fileno(stderr)) == 1;
  TextEncoderLoadProgressFn on_load = [tty](const TextEncoderLoadProgress& p) {
    if (!tty) return;
    std::fprintf(stderr, "\rloading the text encoder: layer %d/%d  %.2f/%.2f GB  %.2f GB/s   ", p.layers_done,
                 p.layers_total, p.bytes_done * 1e-9, p.bytes_total * 1e-9,
                 p.seconds > 0 ? p.bytes_done * 1e-9 / p.seconds : 0.0);
    if (p.layers_done == p.layers_total) std::fprintf(stderr, "\n");
  };
  const auto t0 = std::chrono::steady_clock::now();
  Result<std::unique_ptr<TextEncoder>> enc = TextEncoder::load(*folder, **backend, layer, on_load);
  if (!enc.ok()) return fail(enc.status(), exit_code_for(enc.status()));
  Result<Tensor> hidden = (*enc)->encode(*ids, layer);
  if (!hidden.ok()) return fail(hidden.status(), exit_code_for(hidden.status()));
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::map<std::string, std::string> meta = {
      {kWrittenByKey, "1"}, {"vortex.text_layer", std::to_string(layer)}, {"vortex.text_encoder", *folder}};
  if (from_prompt) {
    meta["vortex.prompt"] = a.prompt();
    meta["vortex.tokenizer"] = tokenizer_path;
  }
  if (Status s = write_safetensors(a.out(), {{"hidden_states", *hidden}}, meta); !s.ok()) return fail(s, 1);
  if (!a.spec.quiet)
    std::cerr << "vortex encode-text: " << ids->size() << " tokens -> hidden_states[" << layer << "] ["
              << hidden->dim(0) << ", " << hidden->dim(1) << "] bf16 (" << layer << " of " << cfg->num_layers
              << " layers loaded, " << secs << " s on " << backend_name << ")\n";
  std::cout << a.out() << "\n";
  return Status::Ok();
}

}  // namespace

void register_encode_text(CLI::App& app, CommandContext& ctx) {
  auto args = std::make_shared<EncodeTextArgs>();
  CLI::App* sub = app.add_subcommand("encode-text",
                                     "Run the Qwen3-VL conditioner on a prompt or token ids -> --text-embeddings file");
  add_request_flags(
      sub, args->flags,
      {{"--model", "Qwen3-VL folder (config.json + safetensors) or an H3 pipeline folder with text_encoder/"},
       {"--prompt", "The prompt, tokenized with the folder's tokenizer.json as diffusers' MiniMax-H3 t2va step does"}});
  sub->add_option("--ids", args->ids, "Token ids, space or comma separated")->type_name("\"1 2 3\"");
  sub->add_option("--ids-file", args->ids_file, "File of token ids, space, comma or newline separated")
      ->type_name("FILE");
  add_request_flags(sub, args->flags,
                    {{"--text-layer", "hidden_states index (default: the pipeline config's, 50 for H3); 0 = embedding"},
                     {"--backend"},
                     {"--threads", "CPU threads, 0 = all cores; results never depend on it"},
                     {"--out", "Output .safetensors: one [L, hidden] bf16 tensor", "FILE"},
                     {"--overwrite", "Replace --out if vortex encode-text wrote it"},
                     {"--quiet", "No summary on stderr"}});
  sub->callback([args, sub, &ctx]() {
    int code = 2;
    Status s = parse_given_flags(*sub, args->flags, args->spec);
    if (s.ok()) {
      code = 0;
      s = run(*args, code);
    }
    if (!s.ok()) std::cerr << "vortex encode-text: error: " << s.to_string() << "\n";
    ctx.exit_code = s.ok() ? 0 : (code != 0 ? code : 1);
  });
}

}  // namespace vortex::cli
