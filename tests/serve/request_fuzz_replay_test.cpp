// Replays the serve request fuzzer (fuzz/serve_request_fuzz.cpp, compiled into this test) over its seed
// corpus fuzz/corpus/serve_request and over deterministic mutations of it (tests/serve/fuzz_replay.h), so CI
// exercises the fuzz target's invariants without libFuzzer. A violated invariant aborts.
#include "fuzz_replay.h"

namespace {

using namespace vortex_fuzz_replay;

TEST(ServeRequestFuzzReplay, SeedCorpus) {
  const std::vector<std::string> seeds = read_corpus(VORTEX_SERVE_FUZZ_CORPUS);
  ASSERT_GE(seeds.size(), 10u);
  for (const std::string& s : seeds) EXPECT_EQ(run_one(s), 0);
}

TEST(ServeRequestFuzzReplay, Mutations) {
  static constexpr char kBytes[] =
      "{}[]\":,0123456789-.eE \\u\x00\xff"
      "abcdefghijklmnopqrstuvwxyz";
  replay_mutations(read_corpus(VORTEX_SERVE_FUZZ_CORPUS), 20260101, std::string_view(kBytes, sizeof(kBytes) - 1),
                   20000);
}

}  // namespace
