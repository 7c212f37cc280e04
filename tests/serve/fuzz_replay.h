// Replays a libFuzzer target (LLVMFuzzerTestOneInput, compiled into the test) without libFuzzer: over its seed
// corpus, then over deterministic mutations of it (byte flips, truncations, insertions, splices). A violated
// invariant inside the target aborts; a non-zero return fails the test. Used by http_parser_fuzz_replay_test.cpp
// and request_fuzz_replay_test.cpp.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <string_view>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace vortex_fuzz_replay {

inline std::vector<std::string> read_corpus(const char* dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    std::ifstream f(e.path(), std::ios::binary);
    out.emplace_back(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  return out;
}

inline int run_one(const std::string& s) {
  return LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}

// `count` mutated inputs from `seeds` (1-4 edits each, drawn from `bytes`), every one answered 0.
inline void replay_mutations(const std::vector<std::string>& seeds, uint64_t rng_seed, std::string_view bytes,
                             int count) {
  ASSERT_FALSE(seeds.empty());
  std::mt19937_64 rng(rng_seed);
  for (int i = 0; i < count; ++i) {
    std::string s = seeds[rng() % seeds.size()];
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits && !s.empty(); ++e) {
      const size_t at = rng() % s.size();
      switch (rng() % 4) {
        case 0:
          s[at] = bytes[rng() % bytes.size()];
          break;
        case 1:
          s.erase(at, 1 + rng() % 8);
          break;
        case 2:
          s.insert(at, 1, bytes[rng() % bytes.size()]);
          break;
        default: {
          const std::string& other = seeds[rng() % seeds.size()];
          s = s.substr(0, at) + other.substr(rng() % other.size());
        }
      }
    }
    ASSERT_EQ(run_one(s), 0) << s;
  }
}

}  // namespace vortex_fuzz_replay
