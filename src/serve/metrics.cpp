// GET /metrics of `vortex serve` (server_impl.h): Prometheus text (version 0.0.4) from the job table and the
// counters of ServeMetrics: the queue, jobs by state, submissions and refusals by reason, step, job and
// cancel timings, device memory and the process's resident set.
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "serve/server_impl.h"

namespace vortex::serve {
namespace {

uint64_t resident_bytes() {
  std::ifstream f("/proc/self/statm");
  uint64_t size = 0, rss = 0;
  f >> size >> rss;
  return rss * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
}

}  // namespace

void Server::Impl::handle_metrics(const http::Request&, http::Response& res) {
  std::ostringstream m;
  std::lock_guard<std::mutex> lock(mu);
  std::map<std::string, int> by_state = {
      {"queued", 0}, {"running", 0}, {"succeeded", 0}, {"failed", 0}, {"cancelled", 0}};
  for (const auto& [id, j] : jobs) ++by_state[state_name(j->state)];
  m << "# HELP vortex_queue_length Jobs waiting to run.\n# TYPE vortex_queue_length gauge\n"
    << "vortex_queue_length " << queue.size() << "\n";
  m << "# HELP vortex_jobs Jobs held (within the retention limit) by state.\n# TYPE vortex_jobs gauge\n";
  for (const auto& [s, n] : by_state) m << "vortex_jobs{state=\"" << s << "\"} " << n << "\n";
  m << "# HELP vortex_jobs_submitted_total Jobs accepted.\n# TYPE vortex_jobs_submitted_total counter\n"
    << "vortex_jobs_submitted_total " << metrics.submitted << "\n";
  m << "# HELP vortex_requests_rejected_total Submissions refused, by reason.\n"
    << "# TYPE vortex_requests_rejected_total counter\n";
  for (const char* r : {"invalid_request", "insufficient_memory", "limit_exceeded", "queue_full"}) {
    m << "vortex_requests_rejected_total{reason=\"" << r << "\"} "
      << (metrics.rejected.count(r) ? metrics.rejected.at(r) : 0) << "\n";
  }
  m << "# HELP vortex_step_seconds Denoising step time.\n# TYPE vortex_step_seconds summary\n"
    << "vortex_step_seconds_sum " << metrics.step_seconds_sum << "\nvortex_step_seconds_count " << metrics.steps_total
    << "\n"
    << "# HELP vortex_step_seconds_last The latest step's time.\n# TYPE vortex_step_seconds_last gauge\n"
    << "vortex_step_seconds_last " << metrics.step_seconds_last << "\n";
  m << "# HELP vortex_job_wall_seconds Run time of jobs that started (start to end).\n"
    << "# TYPE vortex_job_wall_seconds summary\n"
    << "vortex_job_wall_seconds_sum " << metrics.job_wall_sum << "\nvortex_job_wall_seconds_count "
    << metrics.jobs_timed << "\n"
    << "# HELP vortex_job_sampling_seconds Sampling time of jobs that started.\n"
    << "# TYPE vortex_job_sampling_seconds summary\n"
    << "vortex_job_sampling_seconds_sum " << metrics.job_sampling_sum << "\nvortex_job_sampling_seconds_count "
    << metrics.jobs_timed << "\n";
  m << "# HELP vortex_cancel_latency_seconds DELETE to job stop.\n# TYPE vortex_cancel_latency_seconds summary\n"
    << "vortex_cancel_latency_seconds_sum " << metrics.cancel_latency_sum << "\nvortex_cancel_latency_seconds_count "
    << metrics.cancels_timed << "\n# HELP vortex_cancel_latency_seconds_max The longest.\n"
    << "# TYPE vortex_cancel_latency_seconds_max gauge\nvortex_cancel_latency_seconds_max "
    << metrics.cancel_latency_max << "\n";
  m << "# HELP vortex_gpu_memory_bytes Device memory (0 on the cpu backend).\n# TYPE vortex_gpu_memory_bytes gauge\n"
    << "vortex_gpu_memory_bytes{kind=\"in_use\"} " << metrics.gpu_in_use << "\n"
    << "vortex_gpu_memory_bytes{kind=\"peak\"} " << metrics.gpu_peak << "\n"
    << "vortex_gpu_memory_bytes{kind=\"free\"} " << metrics.gpu_free.value_or(0) << "\n";
  m << "# HELP vortex_process_resident_bytes Resident set size.\n# TYPE vortex_process_resident_bytes gauge\n"
    << "vortex_process_resident_bytes " << resident_bytes() << "\n";
  res.set_content(m.str(), "text/plain; version=0.0.4");
}

}  // namespace vortex::serve
