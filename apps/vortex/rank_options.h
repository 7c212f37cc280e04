// The multi-GPU pieces `vortex generate` and `vortex serve` share (docs/multi_gpu.md "Process model"): the
// command line each rank runs, --comm-timeout, and the device of a torchrun-style rank.
#pragma once

#include <string>
#include <vector>

#include "dist/communicator.h"
#include "dist/launcher.h"

namespace vortex::cli {

// This process's own command line (/proc/self/cmdline) without `--gpus N`: what each rank runs.
std::vector<std::string> rank_command_line();
// --comm-timeout S: seconds in (0, 86400] into comm.timeout; false with `error` set otherwise.
bool parse_comm_timeout(const std::string& text, CommOptions& comm, std::string& error);
// torchrun-style: every rank sees all devices and LOCAL_RANK picks one; narrows CUDA_VISIBLE_DEVICES to it
// before CUDA starts. "" on success, else the error.
std::string select_local_rank_device(const RankEnv& rank);

}  // namespace vortex::cli
