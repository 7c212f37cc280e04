// CLI11's parse errors in Vortex's words: "vortex <cmd>: error: unknown option --step (did you mean --steps?)",
// "--out was given 2 times; give it once", each followed by where the options are listed. Used by main.cpp;
// tested in tests/cli/cli_errors_test.cpp (the table of bad inputs).
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace vortex::cli {

// The candidate closest to `word` (edit distance at most 2, or a candidate that starts with it); "" when none.
std::string nearest(const std::string& word, const std::vector<std::string>& candidates);

// The message for a CLI11 usage error of `sub` (nullptr: the top level), with a trailing newline.
std::string describe_parse_error(const CLI::ParseError& e, const CLI::App& app, const CLI::App* sub, int argc,
                                 char** argv);

}  // namespace vortex::cli
