// The persistent job store (src/serve/job_store.h), the start-up reconciliation (src/serve/reconcile.h) and
// `vortex serve` across restarts: finished jobs stay reachable with their content, interrupted ones become
// failed with the reason, leftovers of interrupted runs are collected (and nothing Vortex did not write),
// retention covers every stored job; job-folder files are never written or read through a symbolic link.
// Loopback only; bounded in time.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <map>

#include "core/file_no_follow.h"
#include "media/atomic_file.h"
#include "serve/job_store.h"
#include "serve/reconcile.h"
#include "serve_test_util.h"

namespace vortex_serve_test {
namespace {
using vortex::serve::JobStore;
using vortex::serve::StoredJob;

bool generated_id(const std::string& id) { return id.rfind("video_", 0) == 0 && id.size() == 30; }

std::unique_ptr<JobStore> open_store(const fs::path& p) {
  auto s = vortex::serve::open_sqlite_job_store(p.string());
  EXPECT_TRUE(s.ok()) << s.status().to_string();
  return s.ok() ? std::move(*s) : nullptr;
}

StoredJob row(const std::string& id, const std::string& state, double created, double finished) {
  StoredJob j;
  j.id = id;
  j.state = state;
  j.created_at = created;
  j.finished_at = finished;
  j.request_json = "{}";
  j.status_json = json{{"id", id}, {"status", state}, {"created_at", created}}.dump();
  return j;
}

TEST(JobStore, KeepsJobsAcrossReopensAndOrdersRetention) {
  ScratchDir dir;
  const fs::path db = dir.path() / "jobs.sqlite3";
  {
    auto s = open_store(db);
    ASSERT_TRUE(s);
    ASSERT_TRUE(s->put(row("a", "succeeded", 1, 10)).ok());
    ASSERT_TRUE(s->put(row("b", "failed", 2, 30)).ok());
    ASSERT_TRUE(s->put(row("c", "cancelled", 3, 20)).ok());
    ASSERT_TRUE(s->put(row("d", "running", 4, 0)).ok());
    ASSERT_TRUE(s->put(row("a", "succeeded", 1, 11)).ok());  // replaced, not duplicated
  }
  auto s = open_store(db);
  ASSERT_TRUE(s);
  auto all = s->all();
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 4u);
  EXPECT_EQ((*all)[0].id, "a");
  EXPECT_EQ((*all)[0].finished_at, 11);
  EXPECT_EQ((*all)[3].state, "running");
  // Beyond the newest 1 finished: a (11) then c (20); b (30) kept; running d never.
  auto old = s->beyond_retention(1);
  ASSERT_TRUE(old.ok());
  EXPECT_EQ(*old, (std::vector<std::string>{"a", "c"}));
  ASSERT_TRUE(s->remove("a").ok());
  auto a = s->get("a");
  ASSERT_TRUE(a.ok());
  EXPECT_FALSE(a->has_value());
  auto b = s->get("b");
  ASSERT_TRUE(b.ok() && b->has_value());
  EXPECT_EQ((*b)->state, "failed");
  // A link in place of the store is refused, not followed.
  fs::create_symlink(db, dir.path() / "link.sqlite3");
  EXPECT_FALSE(vortex::serve::open_sqlite_job_store((dir.path() / "link.sqlite3").string()).ok());
}

// Files of job folders are written through NAME.tmp.<pid> opened with O_NOFOLLOW (media/atomic_file.h) and read with
// O_NOFOLLOW: a link planted in a job folder is refused and its target neither written nor read.
TEST(JobStore, JobFolderFilesRefuseSymbolicLinks) {
  ScratchDir dir;
  const fs::path victim = dir.path() / "victim.txt";
  std::ofstream(victim) << "not Vortex's";
  const fs::path job = dir.path() / "video_0123456789abcdef01234567";
  fs::create_directories(job);
  const std::string tmp = vortex::atomic_temp_path((job / "job.json").string());
  fs::create_symlink(victim, tmp);
  vortex::Status s = vortex::write_file_atomic((job / "job.json").string(), "{}\n");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("symbolic link"), std::string::npos) << s.message();
  std::ifstream in(victim);
  const std::string kept((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(kept, "not Vortex's");
  EXPECT_FALSE(fs::exists(job / "job.json"));
  // A link at the final name is replaced by the rename (the link itself, never its target).
  fs::remove(tmp);
  fs::create_symlink(victim, job / "job.json");
  ASSERT_TRUE(vortex::write_file_atomic((job / "job.json").string(), "{\"a\": 1}\n").ok());
  EXPECT_FALSE(fs::is_symlink(fs::symlink_status(job / "job.json")));
  std::ifstream again(victim);
  EXPECT_EQ(std::string((std::istreambuf_iterator<char>(again)), std::istreambuf_iterator<char>()), "not Vortex's");
  auto read = vortex::read_file_no_follow((job / "job.json").string(), 1 << 20);
  ASSERT_TRUE(read.ok()) << read.status().to_string();
  EXPECT_EQ(*read, "{\"a\": 1}\n");
  fs::create_symlink(victim, job / "linked.json");
  auto refused = vortex::read_file_no_follow((job / "linked.json").string(), 1 << 20);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("symbolic link"), std::string::npos);
  EXPECT_FALSE(vortex::read_file_no_follow((job / "job.json").string(), 4).ok());  // over the size limit
}

TEST(JobStore, ReconciliationFailsInterruptedJobsAndCollectsOnlyLeftovers) {
  ScratchDir dir;
  const fs::path jobs = dir.path() / "jobs";
  fs::create_directories(jobs);
  auto s = open_store(dir.path() / "jobs.sqlite3");
  ASSERT_TRUE(s);
  const std::string running = "video_000000000000000000000001", done = "video_000000000000000000000002",
                    legacy = "video_000000000000000000000003", upload = "video_000000000000000000000004",
                    foreign = "video_000000000000000000000005", linked = "video_000000000000000000000006";
  ASSERT_TRUE(s->put(row(running, "running", 1, 0)).ok());
  ASSERT_TRUE(s->put(row(done, "succeeded", 2, 5)).ok());
  fs::create_directories(jobs / running / "output.partial");
  std::ofstream(jobs / running / "output.partial" / "video_latents.safetensors") << std::string(1000, 'x');
  std::ofstream(jobs / running / "job.json") << row(running, "running", 1, 0).status_json;
  fs::create_directories(jobs / done / "output");
  std::ofstream(jobs / done / "output" / "run.json") << "{}";
  std::ofstream(jobs / done / "job.json.tmp") << "half";
  std::ofstream(jobs / done / "job.json.tmp.4242") << "half";  // media/atomic_file.h's temp name
  fs::create_directories(jobs / legacy);  // a job.json from a server without the store, stuck at running
  std::ofstream(jobs / legacy / "job.json") << json{{"id", legacy}, {"status", "running"}, {"created_at", 3.0}}.dump();
  fs::create_directories(jobs / upload);  // a submission cut before it was queued
  std::ofstream(jobs / upload / "text_embeddings.safetensors") << std::string(5000, 'e');
  fs::create_directories(jobs / foreign);  // someone else's file in a job-like folder
  std::ofstream(jobs / foreign / "notes.txt") << "mine";
  fs::create_directories(dir.path() / "elsewhere" / "output.partial");
  fs::create_directory_symlink(dir.path() / "elsewhere", jobs / linked);
  std::ofstream(jobs / "README") << "operator notes";

  auto r = vortex::serve::reconcile_jobs(*s, jobs, &generated_id, 100.0);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->interrupted, 2);  // the running row and the legacy running job.json
  EXPECT_EQ(r->imported, 1);
  EXPECT_EQ(r->orphans, 4);  // output.partial/, job.json.tmp, job.json.tmp.4242, the upload-only folder
  EXPECT_GE(r->orphan_bytes, 6004u);
  EXPECT_FALSE(fs::exists(jobs / running / "output.partial"));
  EXPECT_FALSE(fs::exists(jobs / done / "job.json.tmp"));
  EXPECT_FALSE(fs::exists(jobs / done / "job.json.tmp.4242"));
  EXPECT_TRUE(fs::exists(jobs / done / "output" / "run.json"));
  EXPECT_FALSE(fs::exists(jobs / upload));
  EXPECT_TRUE(fs::exists(jobs / foreign / "notes.txt"));
  EXPECT_TRUE(fs::exists(dir.path() / "elsewhere" / "output.partial"));  // never through a link
  EXPECT_TRUE(fs::exists(jobs / "README"));
  EXPECT_EQ(r->left.size(), 3u);  // foreign, the link, README
  auto got = s->get(running);
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->state, "failed");
  const json status = json::parse((*got)->status_json);
  EXPECT_EQ(status["error"]["type"], "interrupted");
  EXPECT_EQ(json::parse(std::ifstream(jobs / running / "job.json"))["status"], "failed");
  auto imported = s->get(legacy);
  ASSERT_TRUE(imported.ok() && imported->has_value());
  EXPECT_EQ((*imported)->state, "failed");
  // A second pass finds nothing left to do: 0 orphans after the reconciliation.
  auto again = vortex::serve::reconcile_jobs(*s, jobs, &generated_id, 200.0);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->interrupted, 0);
  EXPECT_EQ(again->imported, 0);
  EXPECT_EQ(again->orphans, 0);
}

// Issue 26's target: every finished job reachable after a restart, with its content.
TEST(JobStore, FinishedJobsSurviveARestartAndRetentionCoversThem) {
  ScratchDir dir;
  std::vector<std::string> ids;
  std::map<std::string, std::string> previews;
  {
    TestServer s(tiny_options(dir.path() / "data"));
    ASSERT_TRUE(s.server);
    auto c = s.client();
    for (int i = 0; i < 3; ++i) {
      auto r = c->Post("/v1/videos", small_job(2, static_cast<uint64_t>(i)), "application/json");
      ASSERT_TRUE(r && r->status == 201);
      ids.push_back(json::parse(r->body)["id"]);
    }
    for (const std::string& id : ids) {
      ASSERT_EQ(wait_for(*c, id, is_terminal)["status"], "succeeded");
      previews[id] = c->Get("/v1/videos/" + id + "/content?variant=preview")->body;
    }
    s.server->shutdown(vortex::serve::RunningJob::kCancel);
  }
  {
    TestServer s(tiny_options(dir.path() / "data"));
    ASSERT_TRUE(s.server);
    auto c = s.client();
    for (const std::string& id : ids) {
      auto r = c->Get("/v1/videos/" + id);
      ASSERT_TRUE(r);
      ASSERT_EQ(r->status, 200) << r->body;
      EXPECT_EQ(json::parse(r->body)["status"], "succeeded");
      auto content = c->Get("/v1/videos/" + id + "/content?variant=preview");
      ASSERT_TRUE(content);
      EXPECT_EQ(content->status, 200);
      EXPECT_EQ(content->body, previews[id]);
    }
    EXPECT_EQ(body_json(c->Get("/v1/videos"))["data"].size(), 3u);
    // A new job after the restart takes part in retention with the restored ones.
    auto r = c->Post("/v1/videos", small_job(2, 9), "application/json");
    ASSERT_TRUE(r && r->status == 201);
    ASSERT_EQ(wait_for(*c, json::parse(r->body)["id"], is_terminal)["status"], "succeeded");
    s.server->shutdown(vortex::serve::RunningJob::kCancel);
  }
  // Restarted with --keep-jobs 2: the two oldest stored jobs go, folders included.
  vortex::serve::ServeOptions o = tiny_options(dir.path() / "data");
  o.keep_jobs = 2;
  TestServer s(o);
  ASSERT_TRUE(s.server);
  auto c = s.client();
  EXPECT_EQ(c->Get("/v1/videos/" + ids[0])->status, 404);
  EXPECT_EQ(c->Get("/v1/videos/" + ids[1])->status, 404);
  EXPECT_EQ(c->Get("/v1/videos/" + ids[2])->status, 200);
  EXPECT_FALSE(fs::exists(dir.path() / "data" / "jobs" / ids[0]));
  EXPECT_TRUE(fs::exists(dir.path() / "data" / "jobs" / ids[2]));
}

// A job running when the process died is failed with the reason after the restart.
TEST(JobStore, AJobInterruptedByAStopIsFailedAfterTheRestart) {
  ScratchDir dir;
  std::string id;
  {
    TestServer s(tiny_options(dir.path() / "data"));
    ASSERT_TRUE(s.server);
    auto c = s.client();
    auto r = c->Post("/v1/videos", small_job(1000), "application/json");
    ASSERT_TRUE(r && r->status == 201);
    id = json::parse(r->body)["id"];
    wait_for(*c, id, [](const json& j) { return j["step"].get<int>() >= 1; });
    // What a crash leaves: the store and job.json say running, output.partial/ is half written.
    auto store = open_store(dir.path() / "data" / "jobs.sqlite3");
    auto got = store->get(id);
    ASSERT_TRUE(got.ok() && got->has_value());
    StoredJob crashed = **got;
    s.server->shutdown(vortex::serve::RunningJob::kCancel);
    ASSERT_TRUE(store->put(crashed).ok());
    fs::create_directories(dir.path() / "data" / "jobs" / id / "output.partial");
  }
  TestServer s(tiny_options(dir.path() / "data"));
  ASSERT_TRUE(s.server);
  auto c = s.client();
  const json j = body_json(c->Get("/v1/videos/" + id));
  EXPECT_EQ(j["status"], "failed") << j.dump();
  EXPECT_EQ(j["error"]["type"], "interrupted") << j.dump();
  EXPECT_FALSE(fs::exists(dir.path() / "data" / "jobs" / id / "output.partial"));
}

}  // namespace
}  // namespace vortex_serve_test
