// The CLI side of the one option table (src/api/request_flags.h): registers a command's request and load flags on
// its CLI11 subcommand from the table's rows (name, help, type), keeps their texts, and hands back the ones given, in
// the table's order, for the public API (vortex::OptionList) or parsed into a RequestSpec. `vortex generate`,
// `serve`, `bench` and `encode-text` declare their shared flags this way. Tested in tests/cli/cli_errors_test.cpp.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "api/request_flags.h"
#include "commands.h"
#include "vortex/vortex.h"

namespace vortex::cli {

// The texts CLI11 fills, by long flag (map nodes stay put, so CLI11 may keep pointers to them).
struct FlagValues {
  std::map<std::string, std::string> text;
  std::map<std::string, std::vector<std::string>> repeated;
  std::map<std::string, bool> switches;
};

// One table flag a command takes; `help` overrides the table's when the command means something narrower.
struct FlagUse {
  const char* flag;
  const char* help = nullptr;
  const char* type_name = nullptr;  // overrides the table's ("FILE" where the table says "DIR")
};

// Registers each flag of `uses` (long names from the table) on `sub`.
void add_request_flags(CLI::App* sub, FlagValues& values, const std::vector<FlagUse>& uses);
// The flags of `scope` given on the command line, in the table's order, as the public API takes them.
OptionList given_flags(const CLI::App& sub, const FlagValues& values, api::FlagScope scope);
// Parses every given flag into `spec` (messages name flags); the first error in the table's order wins.
Status parse_given_flags(const CLI::App& sub, const FlagValues& values, api::RequestSpec& spec);
// Parses the given flag `flag` alone (no-op when it was not given).
Status parse_given_flag(const CLI::App& sub, const FlagValues& values, const char* flag, api::RequestSpec& spec);

}  // namespace vortex::cli
