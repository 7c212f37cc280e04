// Replays the HTTP request parser fuzzer (fuzz/http_parser_fuzz.cpp, compiled into this test) over its
// seed corpus fuzz/corpus/http_request and over deterministic mutations of it (byte flips, truncations,
// insertions, splices), so CI exercises the fuzz target's invariants without libFuzzer. A violated
// invariant aborts.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {
namespace fs = std::filesystem;

std::vector<std::string> corpus() {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(VORTEX_HTTP_FUZZ_CORPUS)) {
    std::ifstream f(e.path(), std::ios::binary);
    out.emplace_back(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  return out;
}

int run(const std::string& s) { return LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(s.data()), s.size()); }

TEST(HttpParserFuzzReplay, SeedCorpus) {
  const std::vector<std::string> seeds = corpus();
  ASSERT_GE(seeds.size(), 20u);
  for (const std::string& s : seeds) EXPECT_EQ(run(s), 0);
}

TEST(HttpParserFuzzReplay, Mutations) {
  const std::vector<std::string> seeds = corpus();
  std::mt19937_64 rng(20261202);
  static const char kBytes[] =
      "\r\n:; =\"%+-0123456789ABCDEFabcdef/?&\t\x00\x7f\x80\xff"
      "HTTP/1.1GETPOSTContent-LengthTransfer-Encodingchunkedboundary";
  for (int i = 0; i < 30000; ++i) {
    std::string s = seeds[rng() % seeds.size()];
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits && !s.empty(); ++e) {
      const size_t at = rng() % s.size();
      switch (rng() % 4) {
        case 0:
          s[at] = kBytes[rng() % (sizeof(kBytes) - 1)];
          break;
        case 1:
          s.erase(at, 1 + rng() % 8);
          break;
        case 2:
          s.insert(at, 1, kBytes[rng() % (sizeof(kBytes) - 1)]);
          break;
        default: {
          const std::string& other = seeds[rng() % seeds.size()];
          s = s.substr(0, at) + other.substr(rng() % other.size());
        }
      }
    }
    ASSERT_EQ(run(s), 0);
  }
}

}  // namespace
