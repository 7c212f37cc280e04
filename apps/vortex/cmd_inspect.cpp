// `vortex inspect FILE|DIR [--json] [--layout auto|original|comfy|diffusers]`: tensors (name, dtype, shape, bytes),
// totals, detected key prefix / QKV layout (with the reason) and per-layer quantization of a
// safetensors file or sharded index. Exit 2 on bad arguments or a missing file, 1 on a corrupt file.
// A model folder (the MiniMax-H3 snapshot, its FL2VA/ partition, a transformers Qwen3-VL folder) prints its parts
// instead: each with its path and size, the text layer, and every missing or damaged (truncated, malformed) part
// (engine/model_folder.h); exit 2 when any part is missing or damaged. A `vortex generate` output folder (a
// run.json of schema vortex.run) is summarized from its run.json: the request, the outputs and the timings.
// Tested in tests/cli/cli_test.cpp (built binary) and, for the report itself, tests/io/checkpoint_test.cpp;
// model folders in tests/engine/model_folder_cli_test.cpp.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "engine/model_folder.h"
#include "io/checkpoint.h"
#include "progress.h"

namespace vortex::cli {
namespace {

struct InspectArgs {
  std::string file;
  bool json = false;
  std::string layout = "auto";
};

// A `vortex generate` output folder: "" when `dir` has no run.json of schema vortex.run.
std::optional<nlohmann::json> read_run_json(const std::string& dir) {
  std::error_code ec;
  const std::filesystem::path p = std::filesystem::path(dir) / "run.json";
  if (!std::filesystem::is_regular_file(p, ec)) return std::nullopt;
  std::ifstream f(p, std::ios::binary);
  nlohmann::json j = nlohmann::json::parse(f, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || !j.contains("schema") || !j["schema"].is_string() ||
      j["schema"].get<std::string>().rfind("vortex.run/", 0) != 0)
    return std::nullopt;
  return j;
}

std::string field(const nlohmann::json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || j[key].is_null()) return "-";
  return j[key].is_string() ? j[key].get<std::string>() : j[key].dump();
}

// The run folder's summary; exit 2 when a file run.json lists is missing.
int describe_run(const std::string& dir, const nlohmann::json& run) {
  const nlohmann::json& rq = run.value("request", nlohmann::json::object());
  const nlohmann::json& geo = run.value("geometry", nlohmann::json::object());
  std::cout << "run folder: " << dir << " (" << field(run, "schema") << ", " << field(run, "time_utc") << ")\n";
  std::string text = field(rq, "prompt") != "-" ? "prompt " + field(rq, "prompt")
                     : field(rq, "text_embeddings") != "-"
                         ? "text embeddings " + field(rq, "text_embeddings")
                         : "synthetic text (" + field(rq, "synthetic_text_rows") + " rows)";
  if (text.size() > 200) text = text.substr(0, 200) + "...";
  std::cout << "text: " << text << "\n";
  std::cout << "request: " << field(rq, "width") << "x" << field(rq, "height") << ", " << field(geo, "frames")
            << " frames, " << field(rq, "steps") << " steps (" << field(rq, "sampler") << ", " << field(rq, "schedule")
            << " schedule), seed " << field(rq, "seed") << "\n";
  std::cout << "weights: "
            << (field(rq, "model") != "-"        ? "model folder " + field(rq, "model")
                : field(rq, "checkpoint") != "-" ? field(rq, "checkpoint")
                                                 : "synthetic " + field(rq, "config"))
            << "; backend " << field(rq, "backend") << ", precision " << field(rq, "precision") << "\n";
  const nlohmann::json& timing = run.value("timing", nlohmann::json::object());
  if (timing.contains("total_seconds") && timing["total_seconds"].is_number())
    std::cout << "time: " << format_duration(timing["total_seconds"].get<double>()) << " in all";
  if (timing.contains("sampling_seconds") && timing["sampling_seconds"].is_number())
    std::cout << ", sampling " << format_duration(timing["sampling_seconds"].get<double>());
  std::cout << "\n";
  int missing = 0;
  std::cout << "outputs:\n";
  const nlohmann::json outputs = run.value("outputs", nlohmann::json::object());
  for (const auto& [name, info] : outputs.items()) {
    std::error_code ec;
    const std::filesystem::path f = std::filesystem::path(dir) / name;
    const bool present = std::filesystem::is_regular_file(f, ec);
    missing += present ? 0 : 1;
    std::cout << "  " << name << (present ? "" : "  MISSING") << "\n";
  }
  if (missing > 0) {
    std::cerr << "vortex inspect: error: " << missing << " of the outputs run.json lists are missing from " << dir
              << "\n";
    return 2;
  }
  if (!outputs.contains("video.mp4"))
    std::cout << "decode the latents: vortex decode " << dir << " --vae DIR --audio-vae DIR --out DIR\n";
  return 0;
}

int run_inspect(const InspectArgs& args) {
  if (args.layout == "auto" && !args.json) {
    if (std::optional<nlohmann::json> run = read_run_json(args.file)) return describe_run(args.file, *run);
  }
  if (args.layout == "auto" && !args.json && is_model_folder(args.file)) {
    Result<ModelFolder> folder = open_model_folder(args.file);
    if (!folder.ok()) {
      std::cerr << "vortex inspect: error: " << folder.status().message() << "\n";
      return exit_code_for(folder.status());
    }
    verify_model_folder_files(*folder);
    std::cout << describe_model_folder(*folder);
    for (const ModelPart& p : folder->parts)
      if (!p.present) return 2;  // the summary above names each missing or damaged part
    return 0;
  }
  Result<CheckpointLayout> layout = checkpoint_layout_from_name(args.layout);
  if (!layout.ok()) {
    std::cerr << "vortex inspect: error: " << layout.status().message() << "\n";
    return 2;
  }
  Result<CheckpointInfo> info = inspect_checkpoint(args.file, *layout);
  if (!info.ok()) {
    std::cerr << "vortex inspect: error: " << info.status().to_string() << "\n";
    return exit_code_for(info.status());
  }
  if (args.json) {
    std::cout << checkpoint_report_json(*info) << "\n";
  } else {
    std::cout << checkpoint_report_text(*info);
    if (info->is_h3) {
      Result<ModelConfig> config = config_for_checkpoint(args.file);
      if (config.ok())
        std::cout << "config: " << config->name << " (" << config->num_layers << " blocks, hidden " << config->hidden
                  << ", " << config->num_heads << " x " << config->head_dim << " heads, ffn " << config->ffn << ")\n";
      else std::cout << "config: unknown (" << config.status().message() << ")\n";
    }
  }
  return 0;
}

}  // namespace

void register_inspect(CLI::App& app, CommandContext& ctx) {
  auto args = std::make_shared<InspectArgs>();
  CLI::App* sub = app.add_subcommand(
      "inspect", "List the tensors, layout and quantization of a checkpoint, or the parts of a model folder");
  sub->add_option("file", args->file, "A .safetensors file, a .safetensors.index.json or a checkpoint folder")
      ->required();
  sub->add_flag("--json", args->json, "Print the report as JSON");
  sub->add_option("--layout", args->layout, "Layout override: auto | original | comfy | diffusers (default auto)");
  sub->callback([args, &ctx]() { ctx.exit_code = run_inspect(*args); });
}

}  // namespace vortex::cli
