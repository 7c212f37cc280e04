// vortex CLI entry point: registers every subcommand (apps/vortex/cmd_*.cpp) and runs one.
// Exit codes: 0 success, 2 bad arguments or bad input, 1 runtime failure (gate verdicts: 3 = fail).
#include <cstdio>
#include <string>

#include "commands.h"
#include "engine/run_manifest.h"

int main(int argc, char** argv) {
  CLI::App app{"Vortex: a C++/CUDA runtime for MiniMax H3 (text -> video + stereo audio latents)"};
  app.name("vortex");
  const nlohmann::ordered_json build = vortex::build_info_json();
  app.set_version_flag("--version", "vortex " + build["version"].get<std::string>() + " (git " +
                                        build["git_commit"].get<std::string>() + ")");
  app.require_subcommand(1);
  vortex::cli::CommandContext ctx;
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

  std::string commands;
  bool known = false;
  for (const CLI::App* sub : app.get_subcommands({})) {
    commands += (commands.empty() ? "" : ", ") + sub->get_name();
    if (argc >= 2 && sub->get_name() == argv[1]) known = true;
  }
  if (argc < 2) {
    std::fprintf(stderr, "%s", app.help().c_str());
    std::fprintf(stderr, "vortex: error: a command is required; commands: %s\n", commands.c_str());
    return 2;
  }
  // CLI11 would report an unknown first word as "A subcommand is required".
  if (argv[1][0] != '-' && !known) {
    std::fprintf(stderr, "vortex: error: unknown command '%s'; commands: %s (vortex --help lists them)\n", argv[1],
                 commands.c_str());
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help / --version exit 0; every usage error (unknown flag, missing value) exits 2.
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  return ctx.exit_code;
}
