// The engine's outputs are byte-identical to the code path that recorded tests/cli/fixtures/latents_ab.json:
// `vortex generate --synthetic --config h3-tiny` for a few requests (two schedules, both samplers, --seconds,
// --frames snapping, synthetic decoders) at main 767a947, before the request/planner/engine restructure
// (issue 25). The SHA-256 of the latents and the preview come from that binary's run.json; this test runs the
// current binary and recomputes them from the files it wrote.
#include "cli/cli_test_util.h"

#ifndef VORTEX_CLI_FIXTURES
#error "VORTEX_CLI_FIXTURES must name tests/cli/fixtures"
#endif

namespace vortex_cli_test {
namespace {

TEST(CliLatentsAb, LatentsAndPreviewMatchTheRecordedCodePath) {
  const nlohmann::json fx = nlohmann::json::parse(read_file(fs::path(VORTEX_CLI_FIXTURES) / "latents_ab.json"));
  ASSERT_TRUE(fx["cases"].is_array());
  ASSERT_GE(fx["cases"].size(), 3u);
  ScratchDir dir;
  int n = 0;
  for (const nlohmann::json& c : fx["cases"]) {
    const std::string out = dir.str("case" + std::to_string(n++));
    const std::string args = fx["base"].get<std::string>() + " " + c["args"].get<std::string>() + " -o " + out;
    RunResult r = run_vortex(args);
    ASSERT_EQ(r.exit_code, 0) << args << "\n" << r.output;
    ASSERT_EQ(c["sha256"].size(), 3u);
    for (const auto& [file, sha] : c["sha256"].items()) {
      const std::string bytes = read_file(fs::path(out) / file);
      ASSERT_FALSE(bytes.empty()) << file;
      EXPECT_EQ(sha256_hex_of(bytes), sha.get<std::string>()) << args << ": " << file;
    }
  }
}

}  // namespace
}  // namespace vortex_cli_test
