// Start-up reconciliation of the job store with <data>/jobs/ (see reconcile.h). Only names Vortex
// writes are ever removed: output.partial/, *.tmp and *.tmp.<pid>, .vortex-health-probe, and a job folder whose only
// entries are an upload and such leftovers. Symbolic links are never followed or removed.
#include "serve/reconcile.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>

#include <nlohmann/json.hpp>

#include "core/file_no_follow.h"
#include "media/atomic_file.h"

namespace vortex::serve {
namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

namespace {

const char* kInterrupted = "interrupted: the server stopped before this job finished; it was not completed";

uint64_t tree_bytes(const fs::path& p) {
  std::error_code ec;
  uint64_t n = 0;
  if (fs::is_regular_file(fs::symlink_status(p, ec))) return fs::file_size(p, ec);
  for (fs::recursive_directory_iterator it(p, fs::directory_options::skip_permission_denied, ec), end; !ec && it != end;
       it.increment(ec)) {
    if (it->is_regular_file(ec) && !it->is_symlink(ec)) n += it->file_size(ec);
  }
  return n;
}

// Removes `p` (a file or a real folder, never through a link) and counts it.
void collect(const fs::path& p, ReconcileReport& r) {
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(p, ec);
  if (ec || fs::is_symlink(st)) return;
  const uint64_t bytes = tree_bytes(p);
  if (fs::remove_all(p, ec) > 0 && !ec) {
    ++r.orphans;
    r.orphan_bytes += bytes;
  }
}

// The status JSON of an interrupted job: failed, with the reason, at `now`.
std::string interrupted_status(const std::string& status_json, double now) {
  json j = json::parse(status_json, nullptr, false);
  if (!j.is_object()) j = json::object();
  j["status"] = "failed";
  j["phase"] = "failed";
  j["finished_at"] = now;
  j["eta_seconds"] = nullptr;
  j["error"] = {{"type", "interrupted"}, {"message", kInterrupted}};
  j["content"] = nullptr;
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

Status write_job_json(const fs::path& dir, const std::string& status_json) {
  std::error_code ec;
  if (!fs::is_directory(fs::symlink_status(dir, ec))) return Status::Ok();  // gone, or a link: not ours to write
  json j = json::parse(status_json, nullptr, false);
  return write_file_atomic(
      (dir / "job.json").string(),
      (j.is_discarded() ? status_json : j.dump(2, ' ', false, json::error_handler_t::replace)) + "\n");
}

// A temporary file of an atomic write: `<name>.tmp.<pid>` (media/atomic_file.h), or `<name>.tmp`.
bool is_temp_name(const std::string& name) {
  if (name.size() > 4 && name.compare(name.size() - 4, 4, ".tmp") == 0) return true;
  const size_t dot = name.rfind(".tmp.");
  if (dot == std::string::npos || dot == 0 || dot + 5 == name.size()) return false;
  return name.find_first_not_of("0123456789", dot + 5) == std::string::npos;
}

// The leftovers of one job folder: output.partial/ and temporary files.
void collect_leftovers(const fs::path& dir, ReconcileReport& r) {
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::directory_entry& e = *it;
    const std::string name = e.path().filename().string();
    if (name == "output.partial" || is_temp_name(name)) {
      collect(e.path(), r);
    }
  }
}

}  // namespace

Result<ReconcileReport> reconcile_jobs(JobStore& store, const fs::path& jobs_dir, bool (*is_job_id)(const std::string&),
                                       double now) {
  ReconcileReport r;
  Result<std::vector<StoredJob>> rows = store.all();
  if (!rows.ok()) return rows.status();
  std::set<std::string> known;
  for (StoredJob& j : *rows) {
    known.insert(j.id);
    if (terminal_state(j.state)) continue;
    j.state = "failed";
    j.finished_at = now;
    j.status_json = interrupted_status(j.status_json, now);
    VORTEX_RETURN_IF_ERROR(store.put(j));
    if (Status s = write_job_json(jobs_dir / j.id, j.status_json); !s.ok()) return s;
    ++r.interrupted;
  }
  std::error_code dir_ec, ec;
  for (fs::directory_iterator it(jobs_dir, dir_ec), end; !dir_ec && it != end; it.increment(dir_ec)) {
    const fs::directory_entry& e = *it;
    const std::string name = e.path().filename().string();
    const fs::file_status st = fs::symlink_status(e.path(), ec);
    if (name == ".vortex-health-probe" && fs::is_regular_file(st)) {
      collect(e.path(), r);
      continue;
    }
    if (!is_job_id(name) || !fs::is_directory(st) || fs::is_symlink(st)) {
      r.left.push_back(name);
      continue;
    }
    collect_leftovers(e.path(), r);
    if (known.count(name)) continue;
    // A folder the store does not know: a job.json Vortex wrote is imported; a folder with nothing
    // but an upload (a submission interrupted before it was queued) is removed.
    const fs::path job_json = e.path() / "job.json";
    if (fs::is_regular_file(fs::symlink_status(job_json, ec))) {
      const Result<std::string> text = read_file_no_follow(job_json.string(), 64u << 20);
      json j = text.ok() ? json::parse(*text, nullptr, false) : json();
      if (j.is_object() && j.value("id", "") == name && j.contains("status") && j["status"].is_string()) {
        StoredJob row;
        row.id = name;
        row.state = j["status"].get<std::string>();
        row.created_at = j.value("created_at", now);
        row.finished_at = j["finished_at"].is_number() ? j["finished_at"].get<double>() : now;
        row.request_json =
            j.contains("request") ? j["request"].dump(-1, ' ', false, json::error_handler_t::replace) : "{}";
        row.status_json = j.dump(-1, ' ', false, json::error_handler_t::replace);
        if (!terminal_state(row.state)) {
          row.state = "failed";
          row.finished_at = now;
          row.status_json = interrupted_status(row.status_json, now);
          VORTEX_RETURN_IF_ERROR(write_job_json(e.path(), row.status_json));
          ++r.interrupted;
        }
        VORTEX_RETURN_IF_ERROR(store.put(row));
        ++r.imported;
        continue;
      }
    }
    bool only_upload = true;
    std::error_code fec;
    for (fs::directory_iterator f(e.path(), fec), fend; !fec && f != fend; f.increment(fec)) {
      only_upload &=
          f->path().filename() == "text_embeddings.safetensors" && f->is_regular_file(ec) && !f->is_symlink(ec);
    }
    only_upload &= !fec;
    if (only_upload) {
      collect(e.path(), r);
    } else {
      r.left.push_back(name);
    }
  }
  if (dir_ec) return io_error("cannot read " + jobs_dir.string() + ": " + dir_ec.message());
  return r;
}

}  // namespace vortex::serve
