// vortex CLI entry point: registers every subcommand (apps/vortex/cmd_*.cpp) and runs one.
// Exit codes: 0 success, 2 bad arguments or bad input, 1 runtime failure (gate verdicts: 3 = fail; an interrupt:
// 128 + the signal, apps/vortex/interrupt.h). CLI11's parse errors are reworded as "vortex <cmd>: error: ..." with
// "did you mean" suggestions (cli_errors.h); `vortex help [cmd]` prints a command's help.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "cli_errors.h"
#include "commands.h"
#include "core/arch.h"
#include "engine/run_manifest.h"

int main(int argc, char** argv) {
  CLI::App app{"Vortex: a C++/CUDA runtime for MiniMax H3 (text -> video + stereo audio)"};
  app.name("vortex");
  const nlohmann::ordered_json build = vortex::build_info_json();
  app.set_version_flag("-V,--version", "vortex " + build["version"].get<std::string>() + " (git " +
                                           build["git_commit"].get<std::string>() + ")");
  app.require_subcommand(1);
  app.footer(
      "Examples:\n"
      "  vortex generate --config h3-tiny --synthetic --synthetic-vae tiny -o out/demo       # a CPU smoke run\n"
      "  vortex generate -m ~/models/MiniMax-H3 -p \"a cat walks along a wall\" --backend cuda -o out/cat\n"
      "  vortex inspect ~/models/MiniMax-H3                                                 # what the folder holds\n"
      "\n"
      "vortex help COMMAND (or vortex COMMAND --help) lists a command's options.\n"
      "Exit codes: 0 success, 2 bad arguments or input (before any work), 1 runtime failure, 130/143/141 interrupted.");
  vortex::cli::CommandContext ctx;
  // Backend placement for every command (accepted before or after the command name).
  app.fallthrough();
  app.add_option("--device", ctx.device, "CUDA device ordinal (default 0)")
      ->check(CLI::Validator(CLI::NonNegativeNumber).description(""));
  // --policy ARCH: run the policy row of another architecture on this GPU (the portable kernels of sm120 on an
  // H200); the CUDA backend reads it from VORTEX_POLICY, the one route for the CLI and the GPU tests.
  app.add_option_function<std::string>(
         "--policy",
         [](const std::string& v) {
           if (!vortex::parse_gpu_arch(v).ok())
             throw CLI::ValidationError("--policy", "must be sm90, sm100, sm120 or sm121, got '" + v + "'");
           ::setenv("VORTEX_POLICY", v.c_str(), 1);
         },
         "force the CUDA policy of another architecture: sm90 | sm100 | sm120 | sm121 (default: the device's own)")
      ->type_name("ARCH");
  vortex::cli::register_generate(app, ctx);
  vortex::cli::register_inspect(app, ctx);
  vortex::cli::register_synth(app, ctx);
  vortex::cli::register_quantize(app, ctx);
  vortex::cli::register_gemm_tune(app, ctx);
  vortex::cli::register_bench(app, ctx);
  vortex::cli::register_gate(app, ctx);
  vortex::cli::register_tokenize(app, ctx);
  vortex::cli::register_decode(app, ctx);
  vortex::cli::register_serve(app, ctx);
  vortex::cli::register_encode_text(app, ctx);

  std::vector<std::string> names;
  std::string commands;
  for (const CLI::App* sub : app.get_subcommands({})) {
    names.push_back(sub->get_name());
    commands += (commands.empty() ? "" : ", ") + sub->get_name();
  }
  auto known = [&](const std::string& w) { return std::find(names.begin(), names.end(), w) != names.end(); };
  auto unknown_command = [&](const std::string& w) {
    const std::string near = vortex::cli::nearest(w, names);
    std::fprintf(stderr, "vortex: error: unknown command '%s'%s; commands: %s (vortex help lists them)\n", w.c_str(),
                 near.empty() ? "" : (" (did you mean '" + near + "'?)").c_str(), commands.c_str());
    return 2;
  };
  if (argc < 2) {
    std::fprintf(stderr, "%s", app.help().c_str());
    std::fprintf(stderr, "vortex: error: a command is required; commands: %s\n", commands.c_str());
    return 2;
  }
  // `vortex help [COMMAND]`.
  if (std::string(argv[1]) == "help") {
    if (argc == 2) {
      std::printf("%s", app.help().c_str());
      return 0;
    }
    if (argc > 3) {
      std::fprintf(stderr, "vortex help: error: one command at most, got %d words\n", argc - 2);
      return 2;
    }
    if (!known(argv[2])) return unknown_command(argv[2]);
    std::printf("%s", app.get_subcommand(argv[2])->help("vortex").c_str());
    return 0;
  }
  // CLI11 would report an unknown first word as "A subcommand is required".
  if (argv[1][0] != '-' && !known(argv[1])) return unknown_command(argv[1]);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help / --version
    const std::string command = argc >= 2 && known(argv[1]) ? argv[1] : "";
    const CLI::App* sub = command.empty() ? nullptr : app.get_subcommand(command);
    std::fprintf(stderr, "%s", vortex::cli::describe_parse_error(e, app, sub, argc, argv).c_str());
    return 2;
  }
  return ctx.exit_code;
}
