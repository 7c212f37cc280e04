// split_list: the comma lists of switches, shapes, precisions and indices the CLI and tools accept.
#include <gtest/gtest.h>

#include "core/strings.h"

namespace vortex {
namespace {

TEST(SplitList, DropsEmptyItemsAndKeepsOrder) {
  EXPECT_EQ(split_list("fused,attention=sage2"), (std::vector<std::string>{"fused", "attention=sage2"}));
  EXPECT_EQ(split_list(",a,,b,"), (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(split_list("").empty());
  EXPECT_EQ(split_list("0;24;49", ';'), (std::vector<std::string>{"0", "24", "49"}));
  EXPECT_EQ(split_list(" a ,b"), (std::vector<std::string>{" a ", "b"}));  // no trimming
}

}  // namespace
}  // namespace vortex
