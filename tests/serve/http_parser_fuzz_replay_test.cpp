// Replays the HTTP request parser fuzzer (fuzz/http_parser_fuzz.cpp, compiled into this test) over its
// seed corpus fuzz/corpus/http_request and over deterministic mutations of it (tests/serve/fuzz_replay.h),
// so CI exercises the fuzz target's invariants without libFuzzer. A violated invariant aborts.
#include "fuzz_replay.h"

namespace {

using namespace vortex_fuzz_replay;

TEST(HttpParserFuzzReplay, SeedCorpus) {
  const std::vector<std::string> seeds = read_corpus(VORTEX_HTTP_FUZZ_CORPUS);
  ASSERT_GE(seeds.size(), 20u);
  for (const std::string& s : seeds) EXPECT_EQ(run_one(s), 0);
}

TEST(HttpParserFuzzReplay, Mutations) {
  static constexpr char kBytes[] =
      "\r\n:; =\"%+-0123456789ABCDEFabcdef/?&\t\x00\x7f\x80\xff"
      "HTTP/1.1GETPOSTContent-LengthTransfer-Encodingchunkedboundary";
  replay_mutations(read_corpus(VORTEX_HTTP_FUZZ_CORPUS), 20261202, std::string_view(kBytes, sizeof(kBytes) - 1), 30000);
}

}  // namespace
