// The multi-GPU pieces `vortex generate` and `vortex serve` share (docs/multi_gpu.md "Process model"): the
// command line each rank runs and the device of a torchrun-style rank (--comm-timeout is a row of the option table).
#pragma once

#include <string>
#include <vector>

#include "dist/communicator.h"
#include "dist/launcher.h"

namespace vortex::cli {

// This process's own command line (/proc/self/cmdline) without `--gpus N`: what each rank runs.
std::vector<std::string> rank_command_line();
// torchrun-style: every rank sees all devices and LOCAL_RANK picks one; narrows CUDA_VISIBLE_DEVICES to it
// before CUDA starts. "" on success, else the error.
std::string select_local_rank_device(const RankEnv& rank);

}  // namespace vortex::cli
