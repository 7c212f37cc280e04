// Staging paths: the temporary files and folders a writing command creates beside its target
// (`<out>.partial-<pid>[-n]` for generate and decode, `<file>.tmp.<pid>` for safetensors writers) before renaming
// them into place. They are registered here so an interrupt handler (apps/vortex/interrupt.cpp) can remove this
// process's own staging, and a later run sweeps the staging of processes that are gone (the pid in the name
// is dead), never any other entry. Tested in tests/io/staging_test.cpp and tests/cli/cli_interrupt_test.cpp.
#pragma once

#include <filesystem>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "vortex/status.h"

namespace vortex {

// Adds / removes a path of this process's staging (a folder or a file). Thread-safe.
void register_staging(const std::filesystem::path& path);
void unregister_staging(const std::filesystem::path& path);

// Removes every registered staging path (the interrupt handler's cleanup); returns the paths removed.
// Holds the registry lock, so a publish under hold_staging() is never cut in half.
std::vector<std::filesystem::path> remove_registered_staging();

// Held while staging is renamed into place: an interrupt waits for the rename to finish or not start.
std::unique_lock<std::recursive_mutex> hold_staging();

// The one remove-on-exit guard of Vortex's own partial outputs (a staging folder or file, a job folder of a refused
// request, a scratch folder): registers `p` on construction, removes it on scope exit (and unregisters it) unless
// released. It removes `p` itself only, never through a symbolic link at `p`. Movable (the moved-from guard is
// released).
class StagingGuard {
 public:
  explicit StagingGuard(std::filesystem::path p);
  ~StagingGuard();
  void release();  // the staging was renamed into place (call under hold_staging())
  StagingGuard(StagingGuard&& other) noexcept;
  StagingGuard& operator=(StagingGuard&&) = delete;
  StagingGuard(const StagingGuard&) = delete;
  StagingGuard& operator=(const StagingGuard&) = delete;

 private:
  std::filesystem::path path_;
};

// The pid in a staging name: `name` is `<stem><marker><pid>` or `<stem><marker><pid>-<n>`; 0 when it is not.
long staging_pid(std::string_view name, std::string_view stem, std::string_view marker);

// True when no process with this pid exists (kill(pid, 0) fails with ESRCH).
bool process_is_gone(long pid);

// Removes the siblings of `target` named `<target filename><marker><pid>[-n]` whose pid is gone: folders when
// `folders`, regular files otherwise (markers: ".partial-" for folders, ".tmp." for files). Returns the paths
// removed. Never follows a symlink, never touches an entry whose pid is alive or that does not match.
std::vector<std::filesystem::path> sweep_stale_staging(const std::filesystem::path& target, std::string_view marker,
                                                       bool folders);

}  // namespace vortex
