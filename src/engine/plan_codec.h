// A RunPlan as bytes, for the followers of a multi-GPU world (src/serve/world.cpp): rank 0 plans a job once and
// broadcasts the plan; a follower decodes it instead of planning again. The bytes: an 8-byte header length, a JSON
// header (the request's fields with choices by name, the resolved geometry, the sampler spec, the schedule's
// sigmas, the memory estimate) and the text rows' raw bytes. The packed layout is rebuilt from the geometry
// (pack_request is a pure function of it) and checked against rank 0's row count.
// Tested in tests/engine/request_contract_test.cpp (round trip, truncated and inconsistent input).
#pragma once

#include <string>
#include <string_view>

#include "engine/planner.h"
#include "vortex/config.h"
#include "vortex/status.h"

namespace vortex {

// kInternal when the plan's text is not resolved yet (a prompt not encoded).
Result<std::string> encode_plan(const RunPlan& plan);
// The plan `bytes` hold, on `cfg` (the follower's config, the same model as rank 0's). Adapter paths come back as
// the file names rank 0 sent; the caller resolves them in its own folder.
Result<RunPlan> decode_plan(std::string_view bytes, const ModelConfig& cfg);

}  // namespace vortex
