// Atomic output files: write `<path>.tmp.<pid>`, fsync, rename over `path`; a failed write removes the temp
// file and leaves `path` untouched, so a reader never sees a partial media file.
// Tested through tests/media/media_test.cpp.
#pragma once

#include <string>

#include "vortex/status.h"

namespace vortex {

std::string atomic_temp_path(const std::string& path);
// fsyncs the finished temp file and renames it over `path` (removing the temp on failure).
Status atomic_commit(const std::string& temp_path, const std::string& path);

}  // namespace vortex
