// The staging registry and the sweep of dead processes' staging (see staging.h).
#include "io/staging.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <system_error>

namespace vortex {
namespace fs = std::filesystem;
namespace {

std::recursive_mutex& registry_mutex() {
  static std::recursive_mutex m;
  return m;
}
std::vector<fs::path>& registry() {
  static std::vector<fs::path> paths;
  return paths;
}

}  // namespace

void register_staging(const fs::path& path) {
  std::lock_guard<std::recursive_mutex> lock(registry_mutex());
  registry().push_back(path);
}

void unregister_staging(const fs::path& path) {
  std::lock_guard<std::recursive_mutex> lock(registry_mutex());
  auto& r = registry();
  r.erase(std::remove(r.begin(), r.end(), path), r.end());
}

std::vector<fs::path> remove_registered_staging() {
  std::lock_guard<std::recursive_mutex> lock(registry_mutex());
  std::vector<fs::path> removed;
  for (const fs::path& p : registry()) {
    std::error_code ec;
    if (!fs::exists(fs::symlink_status(p, ec))) continue;
    // The run may still be writing into a staging folder: retry until nothing is left.
    for (int attempt = 0; attempt < 20 && fs::exists(fs::symlink_status(p, ec)); ++attempt) fs::remove_all(p, ec);
    removed.push_back(p);
  }
  registry().clear();
  return removed;
}

std::unique_lock<std::recursive_mutex> hold_staging() {
  return std::unique_lock<std::recursive_mutex>(registry_mutex());
}

StagingGuard::StagingGuard(fs::path p) : path_(std::move(p)) { register_staging(path_); }

StagingGuard::StagingGuard(StagingGuard&& other) noexcept : path_(std::move(other.path_)) { other.path_.clear(); }

StagingGuard::~StagingGuard() {
  if (path_.empty()) return;
  std::error_code ec;
  fs::remove_all(path_, ec);  // a link at path_ is removed itself, its target kept
  unregister_staging(path_);
}

void StagingGuard::release() {
  unregister_staging(path_);
  path_.clear();
}

long staging_pid(std::string_view name, std::string_view stem, std::string_view marker) {
  if (name.size() <= stem.size() + marker.size() || name.substr(0, stem.size()) != stem ||
      name.substr(stem.size(), marker.size()) != marker)
    return 0;
  std::string_view rest = name.substr(stem.size() + marker.size());
  long pid = 0;
  auto [ptr, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), pid);
  if (ec != std::errc() || pid <= 0) return 0;
  std::string_view tail(ptr, static_cast<size_t>(rest.data() + rest.size() - ptr));
  if (tail.empty()) return pid;
  if (tail.size() < 2 || tail[0] != '-') return 0;  // "-<n>": a second staging folder of the same pid
  for (char c : tail.substr(1))
    if (c < '0' || c > '9') return 0;
  return pid;
}

bool process_is_gone(long pid) { return pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH; }

std::vector<fs::path> sweep_stale_staging(const fs::path& target, std::string_view marker, bool folders) {
  std::vector<fs::path> removed;
  const fs::path parent = target.parent_path().empty() ? fs::path(".") : target.parent_path();
  const std::string stem = target.filename().string();
  if (stem.empty()) return removed;
  std::error_code ec;
  fs::directory_iterator it(parent, ec);
  if (ec) return removed;
  for (const fs::directory_entry& e : it) {
    const std::string name = e.path().filename().string();
    const long pid = staging_pid(name, stem, marker);
    if (pid == 0 || pid == static_cast<long>(::getpid()) || !process_is_gone(pid)) continue;
    const fs::file_status st = e.symlink_status(ec);
    if (ec || (folders ? !fs::is_directory(st) : !fs::is_regular_file(st))) continue;
    fs::remove_all(e.path(), ec);
    if (!ec) removed.push_back(e.path());
  }
  return removed;
}

}  // namespace vortex
