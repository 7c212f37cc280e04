// `vortex synth --config h3-tiny|h3 --out F [--seed N] [--layout original|comfy|diffusers] [--shard-size-gb X]`:
// writes a deterministic synthetic H3 checkpoint with the real names, shapes and dtypes plus a
// config.json beside it (io/synth_checkpoint.h). h3 (66 GB) is streamed into 5 GiB shards by default.
// Existing outputs are kept unless --overwrite (and then only Vortex's own are replaced).
// `vortex synth --snapshot tiny [--tokenizer FILE] [--vae DIR --audio-vae DIR] --out DIR` writes a tiny synthetic
// model folder in the official snapshot's layout instead (engine/synthetic_snapshot.h; the bundled tiny tokenizer
// by default). The output's size is checked against the free space first.
// Exit 2 on bad arguments or input, 1 on write failures. Tested in tests/cli/cli_test.cpp and tests/io/.
#include <charconv>
#include <iostream>
#include <memory>
#include <string>

#include "commands.h"
#include "engine/synthetic_snapshot.h"
#include "interrupt.h"
#include "io/synth_checkpoint.h"
#include "progress.h"

namespace vortex::cli {
namespace {

struct SynthArgs {
  std::string config = "h3-tiny";
  std::string out;
  std::string seed = "0";
  std::string layout = "original";
  std::string shard_size_gb;
  int layers = 0;  // > 0: the first `layers` main blocks of the config only
  bool overwrite = false;
  bool quiet = false;
  std::string snapshot, tokenizer, vae, audio_vae;
};

int run_snapshot(const SynthArgs& args) {
  SyntheticSnapshotOptions o;
  o.out = args.out;
  o.tokenizer_json = args.tokenizer;
  o.vae_dir = args.vae;
  o.audio_vae_dir = args.audio_vae;
  const char* end = args.seed.data() + args.seed.size();
  auto [ptr, ec] = std::from_chars(args.seed.data(), end, o.seed);
  if (args.snapshot != "tiny" || ec != std::errc() || ptr != end || args.seed.empty() || args.overwrite) {
    std::cerr << "vortex synth: error: "
              << (args.snapshot != "tiny" ? "--snapshot must be tiny (a full-size snapshot would be ~116 GB)"
                  : args.overwrite        ? "--snapshot writes only into a new folder (no --overwrite)"
                                          : "--seed expects a non-negative integer, got '" + args.seed + "'")
              << "\n";
    return 2;
  }
  Result<std::vector<std::string>> written = write_synthetic_snapshot(o);
  if (!written.ok()) {
    if (interrupted()) await_interrupt_exit();
    std::cerr << "vortex synth: error: " << written.status().to_string() << "\n";
    return exit_code_for(written.status());
  }
  for (const std::string& f : *written) std::cout << f << "\n";
  return 0;
}

int run_synth(const SynthArgs& args) {
  auto fail_args = [](const std::string& m) {
    std::cerr << "vortex synth: error: " << m << "\n";
    return 2;
  };
  if (!args.snapshot.empty()) return run_snapshot(args);
  Result<ModelConfig> config = ModelConfig::by_name(args.config);
  if (!config.ok()) return fail_args(config.status().message());
  SynthCheckpointOptions opt;
  opt.config = *config;
  if (args.layers != 0) {
    if (args.layers < 1 || args.layers > config->num_layers)
      return fail_args("--layers must be in [1, " + std::to_string(config->num_layers) + "] for " + config->name +
                       ", got " + std::to_string(args.layers));
    opt.config.num_layers = args.layers;
  }
  opt.out = args.out;
  opt.overwrite = args.overwrite;
  if (opt.out.empty()) return fail_args("--out FILE is required (.safetensors or .safetensors.index.json)");
  {
    const char* end = args.seed.data() + args.seed.size();
    auto [ptr, ec] = std::from_chars(args.seed.data(), end, opt.seed);
    if (ec != std::errc() || ptr != end || args.seed.empty())
      return fail_args("--seed expects a non-negative integer, got '" + args.seed + "'");
  }
  if (args.layout == "original") opt.layout = CheckpointLayout::kOriginal;
  else if (args.layout == "comfy") opt.layout = CheckpointLayout::kComfy;
  else if (args.layout == "diffusers") opt.layout = CheckpointLayout::kDiffusers;
  else return fail_args("--layout must be original, comfy or diffusers, got '" + args.layout + "'");
  if (!args.shard_size_gb.empty()) {
    try {
      size_t used = 0;
      opt.shard_size_gb = std::stod(args.shard_size_gb, &used);
      if (used != args.shard_size_gb.size() || !(opt.shard_size_gb > 0)) throw std::invalid_argument("bad");
    } catch (const std::exception&) {
      return fail_args("--shard-size-gb expects a positive number, got '" + args.shard_size_gb + "'");
    }
  } else if (opt.config.name == "h3") {
    opt.shard_size_gb = 5.0;  // never one 66 GB file by default
  }
  StderrProgress bar("synth", args.quiet);
  auto progress = [&bar](const std::string& line) { bar.line(line); };
  Result<std::vector<std::string>> written = write_synthetic_checkpoint(opt, progress);
  if (!written.ok()) {
    if (interrupted()) await_interrupt_exit();
    std::cerr << "vortex synth: error: " << written.status().to_string() << "\n";
    return exit_code_for(written.status());
  }
  for (const std::string& f : *written) std::cout << f << "\n";
  return 0;
}

}  // namespace

void register_synth(CLI::App& app, CommandContext& ctx) {
  auto args = std::make_shared<SynthArgs>();
  CLI::App* sub = app.add_subcommand("synth", "Write a deterministic synthetic H3 checkpoint (+ config.json)");
  sub->add_option("--config", args->config, "h3-tiny | h3 (default h3-tiny; h3 is ~66 GB)")->type_name("NAME");
  sub->add_option("-o,--out", args->out, "Output .safetensors (or .safetensors.index.json for shards)");
  sub->add_option("--seed", args->seed, "Weights seed (default 0)")->type_name("INT");
  sub->add_option("--layout", args->layout,
                  "original (per-head interleaved QKV) | comfy | diffusers (default original)")
      ->type_name("NAME");
  sub->add_option("--shard-size-gb", args->shard_size_gb, "Shard size in GiB (default: one file; 5 for h3)")
      ->type_name("FLOAT");
  sub->add_option("--layers", args->layers,
                  "Keep only the first N main blocks (config.json says N): a smaller file of the same block shapes, "
                  "for measurements where the whole model does not fit the disk")
      ->type_name("N");
  sub->add_flag("--overwrite", args->overwrite,
                "Replace existing outputs (checkpoint, index, config.json), only if Vortex wrote them");
  sub->add_flag("--quiet", args->quiet, "No progress output");
  sub->add_option("--snapshot", args->snapshot,
                  "tiny: a whole model folder (transformer, text encoder, tokenizer) into --out DIR")
      ->type_name("NAME");
  sub->add_option("--tokenizer", args->tokenizer,
                  "--snapshot: the tokenizer.json to put in it (default: the bundled tiny tokenizer)")
      ->type_name("FILE");
  sub->add_option("--vae", args->vae, "--snapshot: a video VAE folder to copy in as vae/")->type_name("DIR");
  sub->add_option("--audio-vae", args->audio_vae, "--snapshot: an audio VAE folder to copy in as audio_vae/")
      ->type_name("DIR");
  sub->footer(
      "Examples:\n"
      "  vortex synth --config h3-tiny -o ckpt/tiny.safetensors\n"
      "  vortex synth --snapshot tiny -o models/tiny     # a whole model folder: generate -m models/tiny -p \"...\"");
  sub->callback([args, &ctx]() {
    install_interrupt_cleanup("synth");
    ctx.exit_code = run_synth(*args);
  });
}

}  // namespace vortex::cli
