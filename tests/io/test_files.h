// Helpers for the io tests: a fresh temporary directory per test (removed at scope exit), whole-file
// read/write, directory listing, and a per-run random seed from std::random_device (every test that
// uses it prints it through SCOPED_TRACE, so a failure can be replayed). Used by tests/io/*_test.cpp.
#pragma once

#include <dirent.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "seed.h"

#include <gtest/gtest.h>

namespace vortex::testing {

inline std::string make_temp_dir() {
  std::string tmpl = ::testing::TempDir() + "vortex_io_XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  char* d = ::mkdtemp(buf.data());
  EXPECT_NE(d, nullptr) << "mkdtemp failed for " << tmpl;
  return d ? std::string(d) : std::string("/tmp");
}

inline void remove_tree(const std::string& dir) {
  std::string cmd = "rm -rf '" + dir + "'";
  int rc = std::system(cmd.c_str());
  (void)rc;
}

inline std::vector<std::string> list_dir(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n != "." && n != "..") names.push_back(n);
    }
    ::closedir(d);
  }
  return names;
}

inline std::string read_file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void write_file_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Temp dir removed at the end of the test.
struct TempDir {
  std::string path = make_temp_dir();
  ~TempDir() { remove_tree(path); }
};

}  // namespace vortex::testing
