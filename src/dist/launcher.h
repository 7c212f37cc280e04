// Process model of a multi-GPU run (docs/multi_gpu.md): `vortex generate --gpus N` re-executes itself
// once per GPU with the rank in the environment, the way torchrun does, and supervises the ranks.
//   VORTEX_RANK / VORTEX_WORLD_SIZE (or torchrun's RANK / WORLD_SIZE / LOCAL_RANK): who this process is;
//   VORTEX_RENDEZVOUS: the file through which rank 0 hands the NCCL unique id to the others.
// The launcher gives rank r GPU r (CUDA_VISIBLE_DEVICES, the r-th entry of the caller's list if it set
// one), waits for every rank, and when one exits non-zero or dies by a signal it stops the others
// (SIGTERM, then SIGKILL after a grace period) and fails with the rank and its exit status.
// Tested in tests/dist/launcher_test.cpp (children that succeed, fail, crash and hang).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "vortex/status.h"

namespace vortex {

struct RankEnv {
  int rank = 0, world = 1, local_rank = 0;
  std::string rendezvous;  // VORTEX_RENDEZVOUS
};
// The rank environment when this process is one rank of a world, nullopt when none is set; an
// inconsistent environment (rank outside the world, no rendezvous file) is kInvalidArgument.
Result<std::optional<RankEnv>> rank_env_from_environment();

struct LaunchOptions {
  std::vector<std::string> argv;  // the command each rank runs (argv[0] a path)
  int world = 1;
  // The folder the rendezvous file goes into (created private by the launcher when empty).
  std::string rendezvous_dir;
  std::chrono::milliseconds grace{std::chrono::seconds(10)};  // SIGTERM -> SIGKILL
  // A rank that runs longer than this is treated as hung (0: no limit).
  std::chrono::milliseconds deadline{0};
  // SIGINT and SIGTERM sent to the launcher go to rank 0 alone (`vortex serve`: rank 0 stops the others
  // through its own stop message); the launcher blocks both while it runs. Off: they act as usual.
  bool forward_signals_to_rank0 = false;
};
struct LaunchResult {
  int exit_code = 0;  // rank 0's, or the failing rank's
};
// Spawns the world and waits. OK with rank 0's exit code when every rank exited 0; otherwise the first
// rank to fail, with its exit code (so `vortex generate` keeps the 2-vs-1 distinction) and a message
// naming it; the other ranks are stopped.
Result<LaunchResult> launch_ranks(const LaunchOptions& options);

}  // namespace vortex
