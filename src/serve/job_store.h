// The persistent job store of `vortex serve`: every job's state, request (its inputs), status JSON
// (outputs, timings, error) and times, so finished jobs stay reachable across restarts and retention
// covers every job ever stored. The interface is the seam for a shared database: SQLite (Debian's
// libsqlite3, a file under --data) is the one built; a PostgreSQL store would implement the same calls
// over one table keyed by id, with `owner` naming the host that runs a job (docs/serve.md "Job store").
// Tested in tests/serve/job_store_test.cpp and, through restarts, tests/serve/hostile_test.cpp.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "vortex/status.h"

namespace vortex::serve {

struct StoredJob {
  std::string id;
  std::string state;                       // queued | running | succeeded | failed | cancelled
  double created_at = 0, finished_at = 0;  // Unix seconds; finished_at 0 until terminal
  std::string request_json;                // the admitted request (after defaults and snapping)
  std::string status_json;                 // the job's status JSON at its latest change (docs/serve.md "Jobs")
  std::string owner;                       // the server that runs it ("host:port")
};

class JobStore {
 public:
  virtual ~JobStore() = default;
  // Inserts or replaces the job with this id.
  virtual Status put(const StoredJob& job) = 0;
  virtual Result<std::optional<StoredJob>> get(const std::string& id) = 0;
  // Every stored job, oldest first.
  virtual Result<std::vector<StoredJob>> all() = 0;
  virtual Status remove(const std::string& id) = 0;
  // The terminal jobs beyond the newest `keep` (by finish time), oldest first: what retention deletes.
  virtual Result<std::vector<std::string>> beyond_retention(size_t keep) = 0;
};

// Opens (creating if needed) the SQLite store at `path` (WAL journal, one table `jobs`).
Result<std::unique_ptr<JobStore>> open_sqlite_job_store(const std::string& path);

bool terminal_state(const std::string& state);

}  // namespace vortex::serve
