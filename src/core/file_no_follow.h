// Reading a whole file without following a symbolic link at its last path component (O_NOFOLLOW), through one
// descriptor: for files in folders that someone other than the operator may change (`vortex serve`'s job
// folders, the adapters of --lora-dir), where a check before the open would leave a gap. Tested in
// tests/serve/job_store_test.cpp and tests/lora/lora_test.cpp.
#pragma once

#include <cstddef>
#include <string>

#include "vortex/status.h"

namespace vortex {

// The bytes of the regular file `path`. kInvalidArgument when it is a symbolic link, not a regular file, or
// larger than `max_bytes`; kNotFound when absent; kIo when it cannot be read.
Result<std::string> read_file_no_follow(const std::string& path, size_t max_bytes);

}  // namespace vortex
