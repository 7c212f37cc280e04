// Request pricing and per-field limits of `vortex serve` (see cost.h).
#include "serve/cost.h"

#include <cmath>
#include <cstdio>

#include "engine/memory_estimate.h"

namespace vortex::serve {
namespace {

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f", v);
  return buf;
}

}  // namespace

std::optional<CostRefusal> check_request_fields(const RunRequest& r, const CostLimits& l) {
  const double frames = r.seconds > 0 ? std::ceil(24.0 * r.seconds) : static_cast<double>(r.frames);
  if (frames > l.max_frames) {
    return CostRefusal{
        400, r.seconds > 0 ? "seconds" : "frames",
        (r.seconds > 0 ? "seconds " + fmt(r.seconds) + " is " + fmt(frames) + " frames" : "frames " + fmt(frames)) +
            ", above this server's limit of " + std::to_string(l.max_frames) + " frames (--max-frames)"};
  }
  const double pixels = static_cast<double>(r.width) * static_cast<double>(r.height);
  if (pixels > static_cast<double>(l.max_pixels)) {
    return CostRefusal{400, "width",
                       std::to_string(r.width) + "x" + std::to_string(r.height) + " is " + fmt(pixels) +
                           " pixels, above this server's limit of " + std::to_string(l.max_pixels) + " (--max-pixels)"};
  }
  return std::nullopt;
}

Price price_of(const RunPlan& plan, std::optional<double> flops_per_second) {
  Price p;
  p.rows = plan.geo.total_rows();
  p.steps = plan.request.steps;
  p.memory_bytes = plan.memory.total();
  p.flops = forward_flops(plan.cfg, plan.geo) * plan.request.steps;
  if (flops_per_second && *flops_per_second > 0) p.seconds = p.flops / *flops_per_second;
  return p;
}

std::optional<CostRefusal> check_price(const RunPlan& plan, const Price& price, bool uploaded, const CostLimits& l) {
  if (plan.geo.frames > l.max_frames) {
    return CostRefusal{400, "frames",
                       "frames snap up to " + std::to_string(plan.geo.frames) + ", above this server's limit of " +
                           std::to_string(l.max_frames) + " frames (--max-frames)"};
  }
  if (plan.geo.text_rows > l.max_text_rows) {
    return CostRefusal{uploaded ? 413 : 400, uploaded ? "text_embeddings" : "prompt",
                       "the text is " + std::to_string(plan.geo.text_rows) + " rows, above this server's limit of " +
                           std::to_string(l.max_text_rows) + " (--max-text-rows)"};
  }
  if (l.max_job_seconds > 0 && price.seconds && *price.seconds > l.max_job_seconds) {
    return CostRefusal{400, "",
                       "this request is estimated at " + fmt(*price.seconds) + " s (" + std::to_string(price.rows) +
                           " rows x " + std::to_string(price.steps) + " steps), above this server's limit of " +
                           fmt(l.max_job_seconds) + " s (--max-job-seconds); reduce the size, frames or steps"};
  }
  return std::nullopt;
}

}  // namespace vortex::serve
