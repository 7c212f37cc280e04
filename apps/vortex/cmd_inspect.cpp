// `vortex inspect FILE|DIR [--json] [--layout auto|original|comfy|diffusers]`: tensors (name, dtype, shape, bytes),
// totals, detected key prefix / QKV layout (with the reason) and per-layer quantization of a
// safetensors file or sharded index. Exit 2 on bad arguments or a missing file, 1 on a corrupt file.
// A model folder (the MiniMax-H3 snapshot, its FL2VA/ partition, a transformers Qwen3-VL folder) prints its parts
// instead: each with its path and size, the text layer, and every missing part (engine/model_folder.h); exit 0
// whatever is missing (inspect reports, generate refuses).
// Tested in tests/cli/cli_test.cpp (built binary) and, for the report itself, tests/io/checkpoint_test.cpp;
// model folders in tests/engine/model_folder_cli_test.cpp.
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include "commands.h"
#include "engine/model_folder.h"
#include "io/checkpoint.h"

namespace vortex::cli {
namespace {

struct InspectArgs {
  std::string file;
  bool json = false;
  std::string layout = "auto";
};

int run_inspect(const InspectArgs& args) {
  if (args.layout == "auto" && !args.json && is_model_folder(args.file)) {
    Result<ModelFolder> folder = open_model_folder(args.file);
    if (!folder.ok()) {
      std::cerr << "vortex inspect: error: " << folder.status().message() << "\n";
      return exit_code_for(folder.status());
    }
    std::cout << describe_model_folder(*folder);
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
