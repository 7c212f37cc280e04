// Tests of Status, Result<T> and the VORTEX_RETURN_IF_ERROR / VORTEX_ASSIGN_OR_RETURN macros
// (include/vortex/status.h): codes, messages, context prefixes, early returns, move-only values.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "vortex/status.h"

namespace vortex {
namespace {

TEST(Status, OkAndErrors) {
  Status ok = Status::Ok();
  EXPECT_TRUE(ok.ok());
  EXPECT_EQ(ok.code(), ErrorCode::kOk);
  EXPECT_EQ(ok.to_string(), "ok");
  Status bad = invalid_argument("shape [3] does not match [4]");
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ(bad.code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(bad.to_string(), "invalid argument: shape [3] does not match [4]");
  EXPECT_EQ(not_found("x").code(), ErrorCode::kNotFound);
  EXPECT_EQ(io_error("x").code(), ErrorCode::kIo);
  EXPECT_EQ(format_error("x").code(), ErrorCode::kFormat);
  EXPECT_EQ(unsupported("x").code(), ErrorCode::kUnsupported);
  EXPECT_EQ(internal_error("x").code(), ErrorCode::kInternal);
}

TEST(Status, WithContext) {
  Status s = not_found("tensor 'w' missing").with_context("loading block 3");
  EXPECT_EQ(s.code(), ErrorCode::kNotFound);
  EXPECT_EQ(s.message(), "loading block 3: tensor 'w' missing");
  EXPECT_TRUE(Status::Ok().with_context("anything").ok());
  EXPECT_EQ(Status::Ok().with_context("anything").message(), "");
}

TEST(Status, EveryCodeHasAName) {
  for (int c = 0; c <= static_cast<int>(ErrorCode::kCancelled); ++c)
    EXPECT_STRNE(error_code_name(static_cast<ErrorCode>(c)), "unknown") << c;
}

Result<int> parse_positive(int x) {
  if (x <= 0) return invalid_argument("not positive: " + std::to_string(x));
  return x;
}

Status double_positive(int x, int* out) {
  VORTEX_ASSIGN_OR_RETURN(int v, parse_positive(x));
  *out = 2 * v;
  return Status::Ok();
}

Status chain(int x, int* out) {
  VORTEX_RETURN_IF_ERROR(double_positive(x, out));
  *out += 1;
  return Status::Ok();
}

TEST(Result, ValueAndError) {
  Result<int> good = parse_positive(5);
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(*good, 5);
  EXPECT_TRUE(good.status().ok());
  Result<int> bad = parse_positive(-1);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "not positive: -1");
}

TEST(Result, MacrosPropagateAndContinue) {
  int out = -7;
  EXPECT_TRUE(chain(4, &out).ok());
  EXPECT_EQ(out, 9);
  out = -7;
  Status s = chain(0, &out);
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "not positive: 0");
  EXPECT_EQ(out, -7);  // the early return skipped the writes
}

Result<std::unique_ptr<int>> make_box(int v) { return std::make_unique<int>(v); }
Status unbox(int* out) {
  VORTEX_ASSIGN_OR_RETURN(auto box, make_box(11));  // move-only value
  VORTEX_ASSIGN_OR_RETURN(std::unique_ptr<int> box2, make_box(*box + 1));
  *out = *box2;
  return Status::Ok();
}

TEST(Result, MoveOnlyValues) {
  int out = 0;
  ASSERT_TRUE(unbox(&out).ok());
  EXPECT_EQ(out, 12);
  Result<std::unique_ptr<int>> r = make_box(3);
  std::unique_ptr<int> taken = std::move(r).value();
  EXPECT_EQ(*taken, 3);
}

}  // namespace
}  // namespace vortex
