// Small string helpers shared by the CLI, the engine and the benchmark tools (comma lists of switches,
// shapes, precisions, sequence lengths, block indices). Header-only; tested in tests/core/strings_test.cpp.
#pragma once

#include <sstream>
#include <string>
#include <vector>

namespace vortex {

// "a,b,,c" -> {"a", "b", "c"}: the items of a `sep`-separated list, empty items dropped.
inline std::vector<std::string> split_list(const std::string& s, char sep = ',') {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, sep))
    if (!item.empty()) out.push_back(item);
  return out;
}

}  // namespace vortex
