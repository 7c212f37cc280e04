// Helpers shared by the CLI tests (tests/cli/cli_test.cpp, tests/cli/cli_gpu_test.cpp): run the built
// `vortex` binary (VORTEX_CLI_PATH) capturing its output and exit code, scratch directories, file reads,
// SHA-256, and a minimal independent safetensors reader/writer so the tests do not trust src/io.
#pragma once

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#ifndef VORTEX_CLI_PATH
#error "VORTEX_CLI_PATH must name the vortex binary"
#endif

namespace vortex_cli_test {
namespace fs = std::filesystem;

struct RunResult {
  int exit_code = -1;
  std::string output;  // stdout + stderr
};

// The binary under test: VORTEX_CLI overrides the build-tree path (prebuilt binaries copied to another machine).
inline std::string vortex_cli_path() {
  const char* override_path = std::getenv("VORTEX_CLI");
  return override_path ? override_path : VORTEX_CLI_PATH;
}

// Runs a shell command line, capturing stdout + stderr and the exit code.
inline RunResult run_shell(const std::string& cmd) {
  RunResult r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n = 0;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) r.output.append(buf, n);
  const int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

inline RunResult run_vortex(const std::string& args) {
  std::string cmd = "'";  // (appends: GCC 12 warns -Wrestrict on "'" + std::string)
  cmd.append(vortex_cli_path()).append("' ").append(args).append(" 2>&1");
  return run_shell(cmd);
}

// run_vortex with `dir` as the working directory.
inline RunResult run_vortex_in(const fs::path& dir, const std::string& args) {
  std::string cmd = "cd '";
  cmd.append(dir.string()).append("' && '").append(vortex_cli_path()).append("' ").append(args).append(" 2>&1");
  return run_shell(cmd);
}

// A fresh directory per test (unique by pid and a random suffix), removed at the end.
class ScratchDir {
 public:
  ScratchDir() {
    std::random_device rd;
    path_ = fs::temp_directory_path() / ("vortex_cli_test_" + std::to_string(::getpid()) + "_" + std::to_string(rd()));
    fs::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  std::string str(const std::string& child) const { return (path_ / child).string(); }

 private:
  fs::path path_;
};

inline std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

inline std::string sha256_hex_of(const std::string& bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(bytes.data(), bytes.size(), digest, &len, EVP_sha256(), nullptr);
  std::ostringstream os;
  for (unsigned int i = 0; i < len; ++i) {
    char h[3];
    std::snprintf(h, sizeof(h), "%02x", digest[i]);
    os << h;
  }
  return os.str();
}

// One F32 or BF16 [rows, cols] tensor with the given values (bf16: top 16 bits), independent of src/io.
inline void write_tensor_values(const fs::path& p, const std::string& name, int64_t rows, int64_t cols,
                                const std::vector<float>& values, bool bf16) {
  std::string data;
  for (float v : values) {
    uint32_t u;
    std::memcpy(&u, &v, 4);
    if (bf16) {
      uint16_t b = static_cast<uint16_t>(u >> 16);
      data.append(reinterpret_cast<const char*>(&b), 2);
    } else {
      data.append(reinterpret_cast<const char*>(&u), 4);
    }
  }
  nlohmann::json header;
  header[name] = {{"dtype", bf16 ? "BF16" : "F32"}, {"shape", {rows, cols}}, {"data_offsets", {0, data.size()}}};
  std::string h = header.dump();
  while (h.size() % 8 != 0) h.push_back(' ');
  uint64_t n = h.size();
  std::ofstream f(p, std::ios::binary);
  f.write(reinterpret_cast<const char*>(&n), 8);
  f << h << data;
}

// Minimal independent safetensors writer: one tensor of N(0, 1) values, F32 or BF16 (bf16 = top 16 bits,
// truncation is fine for test inputs).
inline void write_one_tensor_safetensors(const fs::path& p, const std::string& name, int64_t rows, int64_t cols,
                                         bool bf16, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> values(static_cast<size_t>(rows * cols));
  for (float& v : values) v = dist(gen);
  write_tensor_values(p, name, rows, cols, values, bf16);
}

// Header JSON and data bytes of a safetensors file (parsed here, independently of src/io).
struct ParsedSafetensors {
  nlohmann::json header;
  std::string data;
};
inline ParsedSafetensors parse_safetensors(const fs::path& p) {
  const std::string bytes = read_file(p);
  ParsedSafetensors out;
  if (bytes.size() < 8) return out;
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  if (8 + n > bytes.size()) return out;
  out.header = nlohmann::json::parse(bytes.substr(8, n));
  out.data = bytes.substr(8 + n);
  return out;
}

}  // namespace vortex_cli_test
