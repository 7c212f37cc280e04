// The SQLite job store (see job_store.h): one table, prepared statements, WAL journal with
// synchronous=NORMAL (a committed state survives a process crash; the last one may be lost on power
// loss, and reconciliation at start then treats the job as interrupted). One connection guarded by a
// mutex: the server writes a few rows per job, never per step.
#include "serve/job_store.h"

#include <sqlite3.h>

#include <mutex>

namespace vortex::serve {
namespace {

constexpr const char* kSchema =
    "CREATE TABLE IF NOT EXISTS jobs ("
    " id TEXT PRIMARY KEY NOT NULL,"
    " state TEXT NOT NULL,"
    " created_at REAL NOT NULL,"
    " finished_at REAL NOT NULL DEFAULT 0,"
    " request_json TEXT NOT NULL,"
    " status_json TEXT NOT NULL,"
    " owner TEXT NOT NULL DEFAULT '');"
    "CREATE INDEX IF NOT EXISTS jobs_created ON jobs(created_at);";

class Statement {
 public:
  Statement(sqlite3* db, const char* sql) { rc_ = sqlite3_prepare_v2(db, sql, -1, &s_, nullptr); }
  ~Statement() { sqlite3_finalize(s_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  bool ok() const { return rc_ == SQLITE_OK; }
  sqlite3_stmt* get() const { return s_; }
  void text(int i, const std::string& v) {
    sqlite3_bind_text(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  }
  void real(int i, double v) { sqlite3_bind_double(s_, i, v); }
  std::string column_text(int i) const {
    const unsigned char* p = sqlite3_column_text(s_, i);
    return p ? std::string(reinterpret_cast<const char*>(p), static_cast<size_t>(sqlite3_column_bytes(s_, i))) : "";
  }

 private:
  sqlite3_stmt* s_ = nullptr;
  int rc_ = SQLITE_ERROR;
};

class SqliteJobStore : public JobStore {
 public:
  explicit SqliteJobStore(sqlite3* db) : db_(db) {}
  ~SqliteJobStore() override { sqlite3_close(db_); }

  Status put(const StoredJob& j) override {
    std::lock_guard<std::mutex> lock(mu_);
    Statement s(db_,
                "INSERT INTO jobs (id, state, created_at, finished_at, request_json, status_json, owner) "
                "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT(id) DO UPDATE SET state = ?2, created_at = ?3, "
                "finished_at = ?4, request_json = ?5, status_json = ?6, owner = ?7");
    if (!s.ok()) return error("prepare put");
    s.text(1, j.id);
    s.text(2, j.state);
    s.real(3, j.created_at);
    s.real(4, j.finished_at);
    s.text(5, j.request_json);
    s.text(6, j.status_json);
    s.text(7, j.owner);
    return sqlite3_step(s.get()) == SQLITE_DONE ? Status::Ok() : error("write job " + j.id);
  }

  Result<std::optional<StoredJob>> get(const std::string& id) override {
    std::lock_guard<std::mutex> lock(mu_);
    Statement s(db_,
                "SELECT id, state, created_at, finished_at, request_json, status_json, owner FROM jobs WHERE id = ?1");
    if (!s.ok()) return error("prepare get");
    s.text(1, id);
    const int rc = sqlite3_step(s.get());
    if (rc == SQLITE_DONE) return std::optional<StoredJob>();
    if (rc != SQLITE_ROW) return error("read job " + id);
    return std::optional<StoredJob>(row(s));
  }

  Result<std::vector<StoredJob>> all() override {
    std::lock_guard<std::mutex> lock(mu_);
    Statement s(db_,
                "SELECT id, state, created_at, finished_at, request_json, status_json, owner FROM jobs "
                "ORDER BY created_at, id");
    if (!s.ok()) return error("prepare list");
    std::vector<StoredJob> out;
    int rc;
    while ((rc = sqlite3_step(s.get())) == SQLITE_ROW) out.push_back(row(s));
    if (rc != SQLITE_DONE) return error("list jobs");
    return out;
  }

  Status remove(const std::string& id) override {
    std::lock_guard<std::mutex> lock(mu_);
    Statement s(db_, "DELETE FROM jobs WHERE id = ?1");
    if (!s.ok()) return error("prepare remove");
    s.text(1, id);
    return sqlite3_step(s.get()) == SQLITE_DONE ? Status::Ok() : error("remove job " + id);
  }

  Result<std::vector<std::string>> beyond_retention(size_t keep) override {
    std::lock_guard<std::mutex> lock(mu_);
    Statement s(db_,
                "SELECT id FROM jobs WHERE state IN ('succeeded', 'failed', 'cancelled') "
                "ORDER BY finished_at DESC, id DESC LIMIT -1 OFFSET ?1");
    if (!s.ok()) return error("prepare retention");
    sqlite3_bind_int64(s.get(), 1, static_cast<sqlite3_int64>(keep));
    std::vector<std::string> out;
    int rc;
    while ((rc = sqlite3_step(s.get())) == SQLITE_ROW) out.push_back(s.column_text(0));
    if (rc != SQLITE_DONE) return error("retention query");
    return std::vector<std::string>(out.rbegin(), out.rend());  // oldest first
  }

 private:
  static StoredJob row(const Statement& s) {
    StoredJob j;
    j.id = s.column_text(0);
    j.state = s.column_text(1);
    j.created_at = sqlite3_column_double(s.get(), 2);
    j.finished_at = sqlite3_column_double(s.get(), 3);
    j.request_json = s.column_text(4);
    j.status_json = s.column_text(5);
    j.owner = s.column_text(6);
    return j;
  }
  Status error(const std::string& what) const {
    return io_error("job store: cannot " + what + ": " + sqlite3_errmsg(db_));
  }

  std::mutex mu_;
  sqlite3* db_;
};

}  // namespace

bool terminal_state(const std::string& state) {
  return state == "succeeded" || state == "failed" || state == "cancelled";
}

Result<std::unique_ptr<JobStore>> open_sqlite_job_store(const std::string& path) {
  sqlite3* db = nullptr;
  const int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOFOLLOW | SQLITE_OPEN_FULLMUTEX;
  if (sqlite3_open_v2(path.c_str(), &db, flags, nullptr) != SQLITE_OK) {
    const std::string why = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    return io_error("cannot open the job store " + path + ": " + why);
  }
  sqlite3_busy_timeout(db, 5000);
  char* err = nullptr;
  const std::string setup = std::string("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; ") + kSchema;
  if (sqlite3_exec(db, setup.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    const std::string why = err ? err : "unknown error";
    sqlite3_free(err);
    sqlite3_close(db);
    return io_error("cannot set up the job store " + path + ": " + why);
  }
  return std::unique_ptr<JobStore>(new SqliteJobStore(db));
}

}  // namespace vortex::serve
