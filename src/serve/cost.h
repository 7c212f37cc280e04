// The price of a `vortex serve` request before it is admitted (docs/serve.md "Cost limits"): its rows,
// steps, memory, floating-point work and estimated seconds, and the server's per-field limits (frames,
// pixels, text rows) and --max-job-seconds. A refusal names the limit and the option that sets it.
// Tested in tests/serve/hostile_test.cpp (the "No cost cap" row of issue 26).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "engine/pipeline.h"

namespace vortex::serve {

struct CostLimits {
  int max_frames = 257;              // pixel frames after snapping (--max-frames; 10.7 s at 24 fps)
  int64_t max_pixels = 1920 * 1088;  // width * height (--max-pixels)
  int64_t max_text_rows = 4096;      // text rows, a prompt's or an upload's (--max-text-rows)
  double max_job_seconds = 3600.0;   // estimated, and enforced while running (--max-job-seconds); 0: none
  // The throughput estimates are made at; 0: measured from the jobs run so far (on the cpu backend the
  // reference's kCpuFlopsPerThread per worker until then; on cuda no estimate before the first job).
  double flops_per_second = 0;
};

struct CostRefusal {
  int status = 400;  // 400, or 413 for an upload too large
  std::string field;
  std::string message;
};

struct Price {
  int64_t rows = 0;  // packed sequence rows (text + audio + video)
  int steps = 0;
  uint64_t memory_bytes = 0;
  double flops = 0;               // every model evaluation
  std::optional<double> seconds;  // flops / the server's throughput, when it has one
};

// The request's own size fields, before any planning: frames (or seconds) and width x height.
std::optional<CostRefusal> check_request_fields(const RunRequest& r, const CostLimits& limits);

// The price of a planned request at `flops_per_second` (nullopt: no estimate of seconds).
Price price_of(const RunPlan& plan, std::optional<double> flops_per_second);

// The planned request against the limits: snapped frames, text rows (413 on an upload), estimated seconds.
std::optional<CostRefusal> check_price(const RunPlan& plan, const Price& price, bool uploaded,
                                       const CostLimits& limits);

}  // namespace vortex::serve
