// Atomic output files, the file half of the publish policy (io/publish.h): write `<path>.tmp.<pid>`, fsync, rename
// over `path`; a failed write removes the temp file and leaves `path` untouched, so a reader never sees a partial
// file. The media writers stream into the temp file (atomic_temp_path + atomic_commit); whole buffers (serve's
// job.json and uploads, config.json files) go through write_file_atomic. Tested in tests/io/publish_test.cpp,
// tests/serve/job_store_test.cpp and through tests/media/media_test.cpp.
#pragma once

#include <string>
#include <string_view>

#include "vortex/status.h"

namespace vortex {

std::string atomic_temp_path(const std::string& path);
// fsyncs the finished temp file and renames it over `path` (removing the temp on failure).
Status atomic_commit(const std::string& temp_path, const std::string& path);
// Writes `bytes` to `path` through atomic_temp_path(path) and one rename. The temporary file is opened with
// O_NOFOLLOW (a symbolic link planted at that name is refused, never written through); the rename replaces a link
// at `path` itself, not its target. On failure the temp file is removed and `path` is untouched.
Status write_file_atomic(const std::string& path, std::string_view bytes);

}  // namespace vortex
