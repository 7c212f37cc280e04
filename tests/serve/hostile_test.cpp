// `vortex serve` (src/serve/server.h) against the hostile and everyday clients of issue 26's table, in
// process on 127.0.0.1 over synthetic h3-tiny: paths that are not UTF-8, clients that never read their
// SSE stream while others cancel, non-JSON and cross-site posts, foreign Host headers, a non-loopback
// bind without a key, a percent-encoded Authorization, /health on a data folder that is gone, symbolic
// links in a job folder, absolute paths in errors, and the drain (503 + Retry-After, SSE `done`).
// The framing and slow-client rows at the HTTP layer are in http_server_test.cpp. Bounded in time.
#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <thread>

#include "hostile_client.h"
#include "serve_test_util.h"

namespace vortex_serve_test {
namespace {

std::string get(int port, const std::string& target, const std::string& extra = "") {
  return raw_exchange(port, "GET " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n" + extra + "\r\n");
}

std::string post(int port, const std::string& body, const std::string& type, const std::string& extra = "") {
  return raw_exchange(port,
                      "POST /v1/videos HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Type: " + type +
                          "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n" + extra + "\r\n" + body);
}

json job_of(const std::string& response) { return json::parse(body_of(response), nullptr, false); }

class Hostile : public ::testing::Test {
 protected:
  void SetUp() override {
    s_ = std::make_unique<TestServer>(options());
    ASSERT_TRUE(s_->server);
    port_ = s_->server->port();
  }
  virtual vortex::serve::ServeOptions options() { return tiny_options(dir_.path() / "data"); }
  ScratchDir dir_;
  std::unique_ptr<TestServer> s_;
  int port_ = 0;
};

TEST_F(Hostile, PathsThatAreNotUtf8AreA404AndTheServerLives) {
  std::string cut = "/";
  for (int i = 0; i < 63; ++i) cut += "%C3%A9";
  cut += "%C3";  // a two-byte character cut at 128 bytes
  for (const std::string& p : {std::string("/%FF"), cut, std::string("/v1/videos/%FF%FE"),
                               std::string("/v1/videos/video_0/content?variant=%FF")}) {
    const std::string r = get(port_, p);
    EXPECT_TRUE(status_of(r) == 404 || status_of(r) == 400) << p << " -> " << r.substr(0, 300);
    EXPECT_TRUE(job_of(r).contains("error")) << r;
  }
  // Raw bytes >= 0x80 in the target are routed like any unknown path, and never quoted back.
  const std::string raw_path = get(port_, std::string("/\xff\xfe"));
  EXPECT_EQ(status_of(raw_path), 404) << raw_path;
  EXPECT_EQ(raw_path.find("\xff"), std::string::npos);
  EXPECT_EQ(status_of(get(port_, "/health")), 200);
}

TEST_F(Hostile, OnlyJsonOrMultipartIsTakenAndCrossSiteFormsAreRefused) {
  const std::string body = small_job();
  EXPECT_EQ(status_of(post(port_, body, "text/plain")), 415);
  EXPECT_EQ(status_of(post(port_, body, "application/x-www-form-urlencoded")), 415);
  EXPECT_EQ(status_of(post(port_, body, "application/json", "Origin: http://evil.example\r\n")), 403);
  EXPECT_EQ(status_of(post(port_, body, "application/json", "Origin: null\r\n")), 403);
  EXPECT_EQ(
      status_of(raw_exchange(port_, "GET /v1/videos HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n")),
      403);
  EXPECT_EQ(status_of(raw_exchange(port_, "GET /health HTTP/1.1\r\nHost: rebind.evil.example:" + std::to_string(port_) +
                                              "\r\nConnection: close\r\n\r\n")),
            403);
  EXPECT_EQ(status_of(raw_exchange(port_, "GET /health HTTP/1.1\r\nHost: localhost:" + std::to_string(port_) +
                                              "\r\nConnection: close\r\n\r\n")),
            200);
  // None made a job; a same-origin JSON post does.
  EXPECT_TRUE(job_of(get(port_, "/v1/videos"))["data"].empty());
  const std::string ok =
      post(port_, body, "application/json", "Origin: http://127.0.0.1:" + std::to_string(port_) + "\r\n");
  EXPECT_EQ(status_of(ok), 201) << ok;
}

TEST(HostileStart, ANonLoopbackBindNeedsAKey) {
  ScratchDir dir;
  vortex::serve::ServeOptions o = tiny_options(dir.path() / "data");
  o.host = "0.0.0.0";
  auto s = vortex::serve::Server::start(o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("--insecure-no-auth"), std::string::npos) << s.status().message();
  EXPECT_TRUE(vortex::serve::is_loopback_host("127.0.0.1"));
  EXPECT_TRUE(vortex::serve::is_loopback_host("localhost"));
  EXPECT_FALSE(vortex::serve::is_loopback_host("10.0.0.1"));
  o.host = "127.0.0.1";
  EXPECT_EQ(vortex::serve::default_allowed_hosts(o), (std::vector<std::string>{"localhost", "127.0.0.1", "::1"}));
}

TEST(HostileStart, AbsolutePathsAreRedactedForClients) {
  using vortex::serve::redact_paths;
  const std::vector<std::pair<std::string, std::string>> known = {{"/srv/data", "<data>"},
                                                                  {"/opt/loras", "<lora-dir>"}};
  EXPECT_EQ(redact_paths("cannot open /srv/data/jobs/x/output/run.json: denied", known),
            "cannot open <data>/jobs/x/output/run.json: denied");
  EXPECT_EQ(redact_paths("rank 1's --lora-dir /opt/loras_rank1 differs from rank 0's (/opt/loras)", known),
            "rank 1's --lora-dir <path>/loras_rank1 differs from rank 0's (<lora-dir>)");
  EXPECT_EQ(redact_paths("'/etc/shadow' is not a safetensors file", known),
            "'<path>/shadow' is not a safetensors file");
  EXPECT_EQ(redact_paths("POST /v1/videos takes JSON; see /health", known), "POST /v1/videos takes JSON; see /health");
  EXPECT_EQ(redact_paths("ratio 16/9 and a/b stay", known), "ratio 16/9 and a/b stay");
}

class HostileWithKey : public Hostile {
 protected:
  vortex::serve::ServeOptions options() override {
    vortex::serve::ServeOptions o = tiny_options(dir_.path() / "data");
    o.api_key = "k y/1";
    return o;
  }
};

TEST_F(HostileWithKey, TheAuthorizationHeaderIsComparedRaw) {
  EXPECT_EQ(status_of(get(port_, "/v1/videos", "Authorization: Bearer k y/1\r\n")), 200);
  EXPECT_EQ(status_of(get(port_, "/v1/videos", "Authorization: Bearer k%20y%2F1\r\n")), 401);
  EXPECT_EQ(status_of(get(port_, "/v1/videos", "Authorization: Bearer k+y/1\r\n")), 401);
  EXPECT_EQ(status_of(get(port_, "/v1/videos", "Authorization: Bearer k y/1\r\nAuthorization: Bearer k y/1\r\n")),
            401);  // repeated: ambiguous
  EXPECT_EQ(status_of(get(port_, "/v1/videos")), 401);
}

TEST_F(HostileWithKey, HealthIsMinimalWithoutCredentialsAndFailsWithoutTheDataFolder) {
  json h = job_of(get(port_, "/health"));
  EXPECT_EQ(h["status"], "ok") << h.dump();
  EXPECT_EQ(h["data_dir"], "writable");
  EXPECT_EQ(h["worker"], "idle");
  EXPECT_FALSE(h.contains("running")) << h.dump();
  EXPECT_FALSE(h.contains("model")) << h.dump();
  json full = job_of(get(port_, "/health", "Authorization: Bearer k y/1\r\n"));
  EXPECT_TRUE(full.contains("running")) << full.dump();
  fs::remove_all(dir_.path() / "data");
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));  // past the probe's one-second cache
  const std::string r = get(port_, "/health");
  EXPECT_EQ(status_of(r), 503) << r;
  EXPECT_EQ(job_of(r)["data_dir"], "not writable") << r;
  EXPECT_EQ(r.find(dir_.path().string()), std::string::npos) << r;
}

TEST_F(Hostile, ErrorsCarryNoAbsolutePaths) {
  // A job whose upload directory cannot be made: a 500 with a request id, no path.
  fs::remove_all(dir_.path() / "data");
  std::ofstream(dir_.path() / "data") << "a file where the data folder was";
  const std::string r = post(port_, small_job(), "application/json");
  EXPECT_EQ(status_of(r), 500) << r;
  EXPECT_EQ(r.find(dir_.path().string()), std::string::npos) << r;
  EXPECT_NE(job_of(r)["error"]["message"].get<std::string>().find("req_"), std::string::npos) << r;
  fs::remove(dir_.path() / "data");
}

TEST_F(Hostile, SymbolicLinksInAJobFolderAreNotFollowed) {
  const std::string created = post(port_, small_job(), "application/json");
  ASSERT_EQ(status_of(created), 201) << created;
  const std::string id = job_of(created)["id"];
  auto c = s_->client();
  ASSERT_EQ(wait_for(*c, id, is_terminal)["status"], "succeeded");
  const std::string target = "/v1/videos/" + id + "/content?variant=run_json";
  ASSERT_EQ(status_of(get(port_, target)), 200);
  const fs::path secret = dir_.path() / "secret.txt";
  std::ofstream(secret) << "not for clients";
  const fs::path out = dir_.path() / "data" / "jobs" / id / "output";
  fs::remove(out / "run.json");
  fs::create_symlink(secret, out / "run.json");
  std::string r = get(port_, target);
  EXPECT_EQ(status_of(r), 404) << r;
  EXPECT_EQ(r.find("not for clients"), std::string::npos);
  // The output folder itself a link.
  fs::rename(out, dir_.path() / "moved");
  fs::create_symlink(dir_.path() / "moved", out);
  r = get(port_, "/v1/videos/" + id + "/content?variant=preview");
  EXPECT_EQ(status_of(r), 404) << r;
}

// 16 SSE clients that never read do not hold up a DELETE, a GET or /health (issue 26: they blocked every
// route until the job ended).
TEST_F(Hostile, UnreadEventStreamsDoNotBlockOtherRoutes) {
  const std::string created = post(port_, small_job(1000), "application/json");
  ASSERT_EQ(status_of(created), 201);
  const std::string id = job_of(created)["id"];
  std::vector<int> streams;
  for (int i = 0; i < 16; ++i) {
    const int fd = connect_loopback(port_);
    const int small = 2048;
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    send_all(fd, "GET /v1/videos/" + id + "/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    streams.push_back(fd);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(status_of(get(port_, "/health")), 200);
  EXPECT_EQ(status_of(get(port_, "/v1/videos/" + id)), 200);
  const std::string d =
      raw_exchange(port_, "DELETE /v1/videos/" + id + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(status_of(d), 202) << d;
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 1.0);
  auto c = s_->client();
  EXPECT_EQ(wait_for(*c, id, is_terminal, 10.0)["status"], "cancelled");
  for (int fd : streams) ::close(fd);
}

// The drain: new work gets 503 + Retry-After while the running job finishes; its SSE stream ends with
// `done` and the final state; then the listener closes.
TEST_F(Hostile, TheDrainAnswers503AndEndsStreamsWithDone) {
  const std::string created = post(port_, small_job(300), "application/json");
  ASSERT_EQ(status_of(created), 201);
  const std::string id = job_of(created)["id"];
  auto c = s_->client();
  wait_for(*c, id, [](const json& j) { return j["step"].get<int>() >= 1; });
  const int sse = connect_loopback(port_);
  send_all(sse, "GET /v1/videos/" + id + "/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  std::thread stopper([&] { s_->server->shutdown(vortex::serve::RunningJob::kFinish); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const std::string late = post(port_, small_job(), "application/json");
  EXPECT_EQ(status_of(late), 503) << late;
  EXPECT_NE(late.find("Retry-After: "), std::string::npos) << late;
  EXPECT_EQ(status_of(get(port_, "/health")), 503);
  const std::string events = read_until_close(sse, 60.0);
  stopper.join();
  ::close(sse);
  const size_t done = events.rfind("event: done\ndata: ");
  ASSERT_NE(done, std::string::npos) << events.substr(0, 500);
  EXPECT_NE(events.find("\"status\":\"succeeded\"", done), std::string::npos) << events.substr(done, 300);
  EXPECT_LT(connect_loopback(port_), 0);
}

// The "No cost cap" row: requests are priced before admission and refused naming the limit; a job that
// runs past --max-job-seconds is stopped and fails with the reason.
TEST_F(Hostile, RequestsArePricedAndRefusedNamingTheLimit) {
  auto refused = [&](const json& body, const std::string& field, const std::string& option) {
    const std::string r = post(port_, body.dump(), "application/json");
    EXPECT_EQ(status_of(r), 400) << r;
    const json e = job_of(r)["error"];
    EXPECT_EQ(e["field"], field) << r;
    EXPECT_EQ(e["type"], "limit_exceeded") << r;
    EXPECT_NE(e["message"].get<std::string>().find(option), std::string::npos) << r;
  };
  refused({{"prompt", "x"}, {"width", 32}, {"height", 32}, {"frames", 100000}}, "frames", "--max-frames");
  refused({{"prompt", "x"}, {"width", 32}, {"height", 32}, {"seconds", 3600}}, "seconds", "--max-frames");
  refused({{"prompt", "x"}, {"width", 8192}, {"height", 8192}, {"frames", 5}}, "width", "--max-pixels");
  // An accepted request carries its price.
  const std::string ok = post(port_, small_job(), "application/json");
  ASSERT_EQ(status_of(ok), 201) << ok;
  const json price = job_of(ok)["request"]["price"];
  EXPECT_GT(price["rows"].get<int64_t>(), 0) << price.dump();
  EXPECT_EQ(price["steps"], 2);
  EXPECT_GT(price["memory_bytes"].get<uint64_t>(), 0u);
  EXPECT_GT(price["flops"].get<double>(), 0);
  EXPECT_GT(price["estimated_seconds"].get<double>(), 0);
  EXPECT_TRUE(job_of(get(port_, "/metrics")).is_discarded());  // text, not JSON
  EXPECT_NE(body_of(get(port_, "/metrics")).find("vortex_requests_rejected_total{reason=\"limit_exceeded\"} 3"),
            std::string::npos);
}

class HostileCost : public Hostile {
 protected:
  vortex::serve::ServeOptions options() override {
    vortex::serve::ServeOptions o = tiny_options(dir_.path() / "data");
    o.cost.max_job_seconds = 1.0;
    o.cost.max_text_rows = 8;
    o.cost.flops_per_second = 1e15;  // every estimate under the limit: the running limit must act
    return o;
  }
};

TEST_F(HostileCost, TheJobSecondsLimitStopsARunningJobAndTextRowsAreLimited) {
  const std::string long_prompt(100, 'a');  // 25 synthetic rows
  const std::string r = post(port_, json{{"prompt", long_prompt}, {"width", 64}, {"height", 64}, {"frames", 5}}.dump(),
                             "application/json");
  EXPECT_EQ(status_of(r), 400) << r;
  EXPECT_EQ(job_of(r)["error"]["field"], "prompt") << r;
  EXPECT_NE(r.find("--max-text-rows"), std::string::npos) << r;
  const std::string created = post(port_, small_job(1000), "application/json");
  ASSERT_EQ(status_of(created), 201) << created;
  const std::string id = job_of(created)["id"];
  auto c = s_->client();
  const json j = wait_for(*c, id, is_terminal, 30.0);
  EXPECT_EQ(j["status"], "failed") << j.dump();
  EXPECT_EQ(j["error"]["type"], "time_limit") << j.dump();
  EXPECT_LT(j["timing"]["wall_seconds"].get<double>(), 15.0) << j.dump();  // stopped, not run to its 1000 steps
}

// A cancel reaches inside a long step on the cpu backend (issue 26: DELETE was ignored for 7 minutes while
// one block ran): a step of this request takes several seconds on CI's cores, the cancel lands within 2 s.
TEST_F(Hostile, ACancelStopsALongStepWithinTwoSeconds) {
  const std::string created =
      post(port_, json{{"prompt", "x"}, {"width", 1024}, {"height", 576}, {"frames", 46}, {"steps", 2}}.dump(),
           "application/json");
  ASSERT_EQ(status_of(created), 201) << created;
  const std::string id = job_of(created)["id"];
  auto c = s_->client();
  wait_for(
      *c, id, [](const json& j) { return j["phase"] == "sampling"; }, 120.0);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(status_of(raw_exchange(
                port_, "DELETE /v1/videos/" + id + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")),
            202);
  const json j = wait_for(*c, id, is_terminal, 60.0);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(j["status"], "cancelled") << j.dump();
  EXPECT_EQ(j["timing"]["cancel_at_step"], 0) << "the first step was still running";
  // Loose bounds against a loaded CI machine; the 2 s target is measured in benchmarks/2026-12-02-cpu-serve/.
  EXPECT_LT(j["timing"]["cancel_latency_seconds"].get<double>(), 10.0) << j.dump();
  EXPECT_LT(seconds, 12.0);
}

}  // namespace
}  // namespace vortex_serve_test
