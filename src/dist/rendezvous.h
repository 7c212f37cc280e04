// Rendezvous file: how rank 0 hands the NCCL unique id to the other ranks of one machine. Rank 0 writes
// the bytes to PATH.tmp.<pid> and renames it to PATH (readers never see a partial file); the others poll
// for PATH until a deadline. The launcher (`vortex generate --gpus N`) picks a fresh PATH in a private
// temporary folder and removes it after the run. Tested in tests/dist/communicator_test.cpp.
#pragma once

#include <chrono>
#include <string>

#include "vortex/status.h"

namespace vortex {

// Publishes `bytes` at `path` atomically; kInvalidArgument when `path` already exists (a stale
// rendezvous from another run must not be reused).
Status publish_rendezvous(const std::string& path, const std::string& bytes);
// Waits for `path` (written by publish_rendezvous) and returns exactly `expected_bytes` bytes; fails
// with a clear message after `timeout` (rank 0 died before publishing) or on a size mismatch.
Result<std::string> await_rendezvous(const std::string& path, size_t expected_bytes, std::chrono::milliseconds timeout);

}  // namespace vortex
