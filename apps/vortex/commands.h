// Subcommand registration. Each subcommand lives in its own file (cmd_<name>.cpp) and registers a
// CLI11 subcommand whose callback stores an exit code in `exit_code`. Commands print one clear
// message on error and return non-zero; they never call exit() themselves.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "engine/workload.h"
#include "vortex/status.h"

namespace vortex::cli {

struct CommandContext {
  int exit_code = 0;
  int device = 0;  // --device N (any command that makes a backend): the CUDA device ordinal
};

// The exit code of a failed command: 2 for bad arguments or bad input (a wrong flag value, a missing or
// malformed file, a request this build or machine refuses up front), 1 for runtime failures (I/O, CUDA,
// out of memory during the run, internal errors).
inline int exit_code_for(const Status& s) {
  switch (s.code()) {
    case ErrorCode::kInvalidArgument:
    case ErrorCode::kNotFound:
    case ErrorCode::kFormat:
    case ErrorCode::kUnsupported:
      return 2;
    default:
      return 1;
  }
}

// Puts the named options of `sub` into help groups, in the order given (grouped help; options not named stay
// in CLI11's default "OPTIONS" group).
inline void group_options(CLI::App* sub, const std::vector<std::pair<std::string, std::vector<std::string>>>& groups) {
  for (const auto& [group, names] : groups)
    for (const std::string& n : names)
      if (CLI::Option* o = sub->get_option_no_throw(n)) o->group(group);
}

struct FlagValues;
// The workload options shared by `bench` and `gate` (config, weights, backend, request, precision, switches): rows of
// the option table (request_flags_cli.h) into `flags`, and --text-rows into `spec`.
void add_workload_options(CLI::App* sub, FlagValues& flags, WorkloadSpec& spec);
// The table's given workload flags, parsed (messages name the flag) into `spec`; the others keep its defaults.
Status read_workload_flags(const CLI::App& sub, const FlagValues& flags, WorkloadSpec& spec);

void register_generate(CLI::App& app, CommandContext& ctx);
void register_inspect(CLI::App& app, CommandContext& ctx);
void register_synth(CLI::App& app, CommandContext& ctx);
void register_quantize(CLI::App& app, CommandContext& ctx);
void register_gemm_tune(CLI::App& app, CommandContext& ctx);
void register_bench(CLI::App& app, CommandContext& ctx);
void register_gate(CLI::App& app, CommandContext& ctx);
void register_tokenize(CLI::App& app, CommandContext& ctx);
void register_decode(CLI::App& app, CommandContext& ctx);
void register_serve(CLI::App& app, CommandContext& ctx);
void register_encode_text(CLI::App& app, CommandContext& ctx);

}  // namespace vortex::cli
