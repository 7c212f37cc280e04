// A fresh 64-bit seed per test run from std::random_device: inputs are new random values every run, and each test
// that draws one prints it (SCOPED_TRACE or the assertion message) so a failure can be replayed. The one seed
// helper of the tests (tests/gpu_test.h, tests/io/test_files.h, the ref, sage2 and cuda test helpers use it).
#pragma once

#include <cstdint>
#include <random>

namespace vortex::testing {

inline uint64_t fresh_seed() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

}  // namespace vortex::testing
