// See rank_options.h.
#include "rank_options.h"

#include <cstdlib>
#include <fstream>
#include <iterator>

namespace vortex::cli {

std::vector<std::string> rank_command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  for (size_t pos = 0; pos < all.size();) {
    size_t end = all.find('\0', pos);
    if (end == std::string::npos) end = all.size();
    args.push_back(all.substr(pos, end - pos));
    pos = end + 1;
  }
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--gpus") {
      ++i;
      continue;
    }
    if (args[i].rfind("--gpus=", 0) == 0) continue;
    out.push_back(args[i]);
  }
  if (!out.empty()) out[0] = "/proc/self/exe";  // the same binary, whatever the caller's PATH
  return out;
}

std::string select_local_rank_device(const RankEnv& e) {
  if (e.local_rank == 0) return "";
  std::string dev = std::to_string(e.local_rank);
  if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES"); v && *v) {
    std::vector<std::string> list;
    std::string item;
    for (const char* c = v;; ++c) {
      if (*c == ',' || *c == '\0') {
        if (!item.empty()) list.push_back(item);
        item.clear();
        if (*c == '\0') break;
      } else {
        item += *c;
      }
    }
    if (e.local_rank >= static_cast<int>(list.size()))
      return "LOCAL_RANK " + std::to_string(e.local_rank) + " but CUDA_VISIBLE_DEVICES lists " +
             std::to_string(list.size()) + " devices";
    dev = list[static_cast<size_t>(e.local_rank)];
  }
  ::setenv("CUDA_VISIBLE_DEVICES", dev.c_str(), 1);
  return "";
}

}  // namespace vortex::cli
