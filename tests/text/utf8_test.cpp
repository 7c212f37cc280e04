// validate_utf8 / first_invalid_utf8: every ill-formed class of RFC 3629 is rejected at the right byte
// offset, with a message that says what is wrong; all well-formed boundaries are accepted.
#include <gtest/gtest.h>

#include <string>

#include "text/utf8.h"

namespace vortex {
namespace {

TEST(Utf8Test, AcceptsWellFormedBoundaries) {
  for (const std::string& s :
       {std::string(""), std::string("ascii only, longer than eight bytes"), std::string("\x00", 1),
        std::string("\x7f"), std::string("\xc2\x80"), std::string("\xdf\xbf"), std::string("\xe0\xa0\x80"),
        std::string("\xed\x9f\xbf"), std::string("\xee\x80\x80"), std::string("\xef\xbf\xbf"),
        std::string("\xf0\x90\x80\x80"), std::string("\xf4\x8f\xbf\xbf"),
        std::string("caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80")}) {
    EXPECT_EQ(first_invalid_utf8(s), s.size()) << s;
    EXPECT_TRUE(validate_utf8(s).ok()) << s;
  }
}

struct Bad {
  std::string bytes;
  size_t offset;
  const char* why;  // a phrase the message must contain
};

TEST(Utf8Test, RejectsIllFormedAtTheirOffset) {
  const Bad cases[] = {
      {"\x80", 0, "continuation byte"},
      {"abcdefghij\xbf", 10, "continuation byte"},  // after the 8-byte ASCII fast path
      {"\xc0\xaf", 0, "overlong"},
      {"\xc1\xbf", 0, "overlong"},
      {"a\xe0\x9f\xbf", 1, "overlong"},
      {"\xf0\x8f\xbf\xbf", 0, "overlong"},
      {"\xed\xa0\x80", 0, "surrogate"},
      {"\xed\xbf\xbf", 0, "surrogate"},
      {"\xf4\x90\x80\x80", 0, "beyond U+10FFFF"},
      {"\xf5\x80\x80\x80", 0, "never valid"},
      {"\xff", 0, "never valid"},
      {"ab\xc3", 2, "truncated"},
      {"\xe2\x82", 0, "truncated"},
      {"\xe2\x82x", 0, "truncated"},
      {"\xf0\x9f\x98", 0, "truncated"},
      {"\xf0\x9f\x98z", 0, "truncated"},
  };
  for (const Bad& c : cases) {
    EXPECT_EQ(first_invalid_utf8(c.bytes), c.offset);
    const Status s = validate_utf8(c.bytes);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(s.message().find("at byte " + std::to_string(c.offset)), std::string::npos) << s.message();
    EXPECT_NE(s.message().find(c.why), std::string::npos) << s.message();
  }
}

}  // namespace
}  // namespace vortex
