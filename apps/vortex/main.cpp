// vortex CLI entry point (subcommands are added as their components land).
#include <CLI/CLI.hpp>

int main(int argc, char** argv) {
  CLI::App app{"Vortex: MiniMax H3 runtime"};
  app.require_subcommand(1);
  CLI11_PARSE(app, argc, argv);
  return 0;
}
