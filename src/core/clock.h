// Elapsed wall time for progress reports, run.json timings and stage timers: one helper over the steady clock,
// shared by the engine's run, generate, decode and the streaming muxer. Exercised wherever those report timings
// (tests/cli/cli_test.cpp checks run.json's timing fields).
#pragma once

#include <chrono>

namespace vortex {

// Seconds from `t0` to now on the steady clock.
inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace vortex
