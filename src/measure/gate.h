// `vortex gate`: the seeds' bit-exactness gates for a switch (docs/numerics.md "Levels"). A = baseline
// settings, B = candidate. Checks, each on identical inputs inside one loaded model:
//   blocks: the gate blocks (0, 24, 49 for h3; first/middle/last otherwise) give identical bytes;
//   step1:  one full forward (all blocks + final layer) gives identical velocity bytes;
//   traj2:  a two-step trajectory gives identical video/audio latents;
//   trajN:  the full N-step trajectory (canonical 12) gives identical latents.
// The verdict JSON lists every check with both sides' SHA-256.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "engine/workload.h"

namespace vortex {

struct GateOptions {
  std::string a = "eager";  // baseline switches
  std::string b = "fused";  // candidate switches
  int steps = 12;           // full trajectory length
  bool skip_full_trajectory = false;
};

// Returns the verdict (field "pass": all checks identical). Errors only for failures to run.
Result<nlohmann::json> run_gate(Workload& w, const GateOptions& o);

}  // namespace vortex
