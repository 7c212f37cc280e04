// vortex CLI entry point: registers every subcommand (apps/vortex/cmd_*.cpp) and runs one.
#include <cstdio>

#include "commands.h"

int main(int argc, char** argv) {
  CLI::App app{"Vortex: a C++/CUDA runtime for MiniMax H3 (text -> video + stereo audio latents)"};
  app.require_subcommand(1);
  vortex::cli::CommandContext ctx;
  vortex::cli::register_generate(app, ctx);
  vortex::cli::register_inspect(app, ctx);
  vortex::cli::register_synth(app, ctx);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return ctx.exit_code;
}
