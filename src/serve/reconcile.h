// The start-up reconciliation of `vortex serve`: the job store (job_store.h) and <data>/jobs/ made to
// agree before the first request. Jobs the store has as queued or running were interrupted by the last
// stop: they become `failed` ("interrupted") in the store and in their job.json. Job folders the store
// lacks but whose job.json Vortex wrote are imported. What an interrupted run leaves (output.partial/,
// temporary files, the health probe, folders holding only an upload) is removed; anything else, and every
// symbolic link, is left in place and reported. Tested in tests/serve/job_store_test.cpp.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "serve/job_store.h"
#include "vortex/status.h"

namespace vortex::serve {

struct ReconcileReport {
  int interrupted = 0;  // queued or running jobs marked failed
  int imported = 0;     // job folders with a job.json and no store row
  int orphans = 0;      // files and folders removed
  uint64_t orphan_bytes = 0;
  std::vector<std::string> left;  // entries not written by Vortex, left in place (names under jobs/)
};

// `is_job_id` tells a folder name Vortex generates. `now` is the Unix time written as finished_at.
Result<ReconcileReport> reconcile_jobs(JobStore& store, const std::filesystem::path& jobs_dir,
                                       bool (*is_job_id)(const std::string&), double now);

}  // namespace vortex::serve
