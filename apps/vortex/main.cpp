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
  vortex::cli::register_quantize(app, ctx);
  vortex::cli::register_gemm_tune(app, ctx);
  vortex::cli::register_bench(app, ctx);
  vortex::cli::register_gate(app, ctx);
  vortex::cli::register_decode(app, ctx);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help / --version exit 0; every usage error (unknown flag, missing value) exits 2.
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  return ctx.exit_code;
}
