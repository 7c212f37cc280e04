// make_backend (src/engine/backend_registry.cpp): "cpu" works with a thread count, "cuda" is kUnsupported
// with a rebuild hint in a build without CUDA (or works / fails with kUnsupported when no device is present),
// unknown names list the valid ones, thread counts outside [0, max_cpu_threads()] are refused.
#include <gtest/gtest.h>

#include "backend/backend.h"

namespace vortex {
namespace {

TEST(BackendRegistry, NamesAndErrors) {
  auto cpu = make_backend("cpu", 2);
  ASSERT_TRUE(cpu.ok()) << cpu.status().to_string();
  EXPECT_EQ((*cpu)->name(), "cpu");
  EXPECT_EQ((*cpu)->device(), Device::kCpu);
  auto bad = make_backend("tpu", 0);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("cpu, cuda"), std::string::npos) << bad.status().message();
  auto cuda = make_backend("cuda", 0);
#if defined(VORTEX_WITH_CUDA)
  // With a device the backend must come up; without one the error is kUnsupported, never a crash.
  if (!cuda.ok()) {
    EXPECT_EQ(cuda.status().code(), ErrorCode::kUnsupported) << cuda.status().to_string();
  } else {
    EXPECT_EQ((*cuda)->device(), Device::kCuda);
  }
#else
  ASSERT_FALSE(cuda.ok());
  EXPECT_EQ(cuda.status().code(), ErrorCode::kUnsupported);
  EXPECT_NE(cuda.status().message().find("no CUDA backend"), std::string::npos);
#endif
}

// --threads 100000 used to escape as an uncaught std::system_error; now it is a kInvalidArgument Status.
TEST(BackendRegistry, ThreadCountsOutsideTheLimitAreRefused) {
  const int limit = max_cpu_threads();
  EXPECT_GE(limit, kMaxThreadsPerCore);
  auto too_many = make_backend("cpu", limit + 1);
  ASSERT_FALSE(too_many.ok());
  EXPECT_EQ(too_many.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(too_many.status().message().find(std::to_string(limit)), std::string::npos) << too_many.status().message();
  auto huge = make_backend("cpu", 100000);
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().code(), ErrorCode::kInvalidArgument);
  auto negative = make_backend("cpu", -1);
  ASSERT_FALSE(negative.ok());
  EXPECT_EQ(negative.status().code(), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace vortex
