// Percentiles, run environment and JSONL evidence writer. See evidence.h and docs/evidence.md.
#include "profiling/evidence.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <sstream>

#include "vortex/build_info.h"

namespace vortex {

namespace {

double quantile_sorted(const std::vector<double>& s, double q) {
  if (s.empty()) return 0.0;
  double pos = q * static_cast<double>(s.size() - 1);
  size_t lo = static_cast<size_t>(std::floor(pos));
  size_t hi = std::min(lo + 1, s.size() - 1);
  double frac = pos - static_cast<double>(lo);
  return s[lo] + (s[hi] - s[lo]) * frac;
}

// Runs a command and returns its stdout (empty when it cannot run).
std::string capture(const char* cmd) {
  std::string out;
  FILE* p = popen(cmd, "r");
  if (!p) return out;
  std::array<char, 512> buf{};
  while (fgets(buf.data(), static_cast<int>(buf.size()), p)) out += buf.data();
  pclose(p);
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r' || out.back() == ' ')) out.pop_back();
  return out;
}

std::vector<std::string> split_csv(const std::string& line) {
  std::vector<std::string> parts;
  std::stringstream ss(line);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t b = item.find_first_not_of(' ');
    size_t e = item.find_last_not_of(' ');
    parts.push_back(b == std::string::npos ? "" : item.substr(b, e - b + 1));
  }
  return parts;
}

}  // namespace

double quantile(std::vector<double> samples, double q) {
  std::sort(samples.begin(), samples.end());
  return quantile_sorted(samples, q);
}

Percentiles percentiles(std::vector<double> samples) {
  Percentiles p;
  if (samples.empty()) return p;
  std::sort(samples.begin(), samples.end());
  p.n = static_cast<int>(samples.size());
  p.p10 = quantile_sorted(samples, 0.10);
  p.p50 = quantile_sorted(samples, 0.50);
  p.p90 = quantile_sorted(samples, 0.90);
  p.p95 = quantile_sorted(samples, 0.95);
  p.mean = std::accumulate(samples.begin(), samples.end(), 0.0) / static_cast<double>(samples.size());
  p.min = samples.front();
  p.max = samples.back();
  return p;
}

std::string utc_now_iso8601() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

void refresh_clocks(RunEnvironment& env) {
  std::string line = capture("nvidia-smi --query-gpu=clocks.sm,clocks.mem --format=csv,noheader,nounits 2>/dev/null");
  auto parts = split_csv(line.substr(0, line.find('\n')));
  if (parts.size() == 2) {
    env.clock_sm_mhz = std::atoi(parts[0].c_str());
    env.clock_mem_mhz = std::atoi(parts[1].c_str());
  }
}

RunEnvironment collect_environment(const std::string& gpu_name, const std::string& sm, const std::string& cuda) {
  RunEnvironment env;
  env.commit = VORTEX_GIT_COMMIT_STRING;
  env.dirty = VORTEX_GIT_DIRTY != 0;
  env.time_utc = utc_now_iso8601();
  env.gpu = gpu_name;
  env.sm = sm;
  env.cuda = cuda;
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) == 0) env.host = host;
  if (!gpu_name.empty()) {
    std::string line = capture("nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null");
    env.driver = line.substr(0, line.find('\n'));
    refresh_clocks(env);
  }
  return env;
}

nlohmann::json evidence_row(const RunEnvironment& env, const std::string& workload, const std::string& impl,
                            const std::string& config, const Percentiles& ms, const EvidenceBaseline& baseline,
                            const nlohmann::json& extra) {
  nlohmann::json row = {
      {"schema", "vortex-evidence-1"},
      {"commit", env.commit},
      {"dirty", env.dirty},
      {"time_utc", utc_now_iso8601()},
      {"gpu", env.gpu},
      {"sm", env.sm},
      {"driver", env.driver},
      {"cuda", env.cuda},
      {"clocks_mhz", {{"sm", env.clock_sm_mhz}, {"mem", env.clock_mem_mhz}}},
      {"workload", workload},
      {"impl", impl},
      {"config", config},
      {"ms_p10", ms.p10},
      {"ms_p50", ms.p50},
      {"ms_p90", ms.p90},
      {"ms_p95", ms.p95},
      {"n", ms.n},
      {"baseline", nullptr},
      {"baseline_ms_p50", nullptr},
      {"ratio", nullptr},
  };
  if (!baseline.what.empty()) {
    row["baseline"] = baseline.what;
    row["baseline_ms_p50"] = baseline.ms_p50;
    if (baseline.ratio != 0) row["ratio"] = baseline.ratio;
    else if (baseline.ms_p50 > 0) row["ratio"] = ms.p50 / baseline.ms_p50;
  }
  for (auto it = extra.begin(); it != extra.end(); ++it) row[it.key()] = it.value();
  return row;
}

Status append_jsonl(const std::string& path, const std::vector<nlohmann::json>& rows) {
  std::error_code ec;
  auto parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  if (ec) return io_error("cannot create " + parent.string() + ": " + ec.message());
  std::ofstream f(path, std::ios::app);
  if (!f) return io_error("cannot open " + path + " for appending");
  for (const auto& r : rows) f << r.dump() << "\n";
  f.flush();
  if (!f) return io_error("write failed: " + path);
  return Status::Ok();
}

std::string evidence_path(const std::string& dir, const RunEnvironment& env, const std::string& what) {
  std::string slug;
  std::string name = env.gpu.empty() ? std::string("cpu") : env.gpu;
  for (char c : name) {
    if (std::isalnum(static_cast<unsigned char>(c)))
      slug += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    else if (!slug.empty() && slug.back() != '-') slug += '-';
  }
  while (!slug.empty() && slug.back() == '-') slug.pop_back();
  if (slug.rfind("nvidia-", 0) == 0) slug = slug.substr(7);
  return dir + "/" + env.time_utc.substr(0, 10) + "-" + slug + "-" + what + ".jsonl";
}

}  // namespace vortex
