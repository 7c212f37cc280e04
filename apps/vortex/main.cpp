// vortex CLI entry point: registers every subcommand (apps/vortex/cmd_*.cpp) and runs one.
// Exit codes: 0 success, 2 bad arguments or bad input, 1 runtime failure (gate verdicts: 3 = fail).
#include <cstdio>
#include <cstdlib>
#include <string>

#include "commands.h"
#include "core/arch.h"
#include "engine/run_manifest.h"

int main(int argc, char** argv) {
  CLI::App app{"Vortex: a C++/CUDA runtime for MiniMax H3 (text -> video + stereo audio latents)"};
  app.name("vortex");
  const nlohmann::ordered_json build = vortex::build_info_json();
  app.set_version_flag("--version", "vortex " + build["version"].get<std::string>() + " (git " +
                                        build["git_commit"].get<std::string>() + ")");
  app.require_subcommand(1);
  vortex::cli::CommandContext ctx;
  // Backend placement for every command (accepted before or after the command name).
  app.fallthrough();
  app.add_option("--device", ctx.device, "CUDA device ordinal (default 0)")->check(CLI::NonNegativeNumber);
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
