// Bounded soak of `vortex serve` in process on 127.0.0.1: 8 concurrent clients for VORTEX_SOAK_SECONDS
// (default 100 s; a hard stop at twice that) mixing submissions, polling, SSE streams, cancel while
// running, downloads and malformed requests, against synthetic h3-tiny on the CPU. Asserts: no crash,
// every job ends in a terminal state, a cancelled running job stops within one step, resident memory
// after warm-up grows by at most kRssGrowthBound, no file outside --data and nothing staged left inside
// it. Prints the figures (jobs, cancels, RSS before/after, answers by kind).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "serve_test_util.h"

namespace vortex_serve_test {
namespace {

constexpr int kClients = 8;
// Growth allowed between the end of warm-up and the end: allocator caches and httplib's buffers settle
// within it; a per-job leak of even a few KiB over hundreds of jobs would not.
constexpr uint64_t kRssGrowthBound = 48ull << 20;

uint64_t rss_bytes() {
  std::ifstream f("/proc/self/statm");
  uint64_t size = 0, rss = 0;
  f >> size >> rss;
  return rss * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
}

struct Figures {
  std::mutex mu;
  std::set<std::string> jobs;
  std::map<std::string, int> answers;  // "POST 201", "GET 404", "transport error", ...
  int cancels_running = 0, cancels_queued = 0, sse_streams = 0, downloads = 0, malformed = 0;
  int late_stops = 0;
  std::map<std::string, std::string> ended;  // id -> terminal state, from the server's log
  void answer(const std::string& what) {
    std::lock_guard<std::mutex> lock(mu);
    ++answers[what];
  }
};

std::string mode_of(std::mt19937_64& rng) {
  static const char* const kBad[] = {"{",
                                     R"({"prompt": 3})",
                                     R"({"prompt": "x", "steps": -1})",
                                     R"({"prompt": "x", "width": 33, "height": 32})",
                                     R"({"nope": 1})",
                                     "[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]",
                                     R"({"prompt": "x", "schedule": "?"})",
                                     ""};
  return kBad[rng() % (sizeof(kBad) / sizeof(kBad[0]))];
}

void client_loop(int index, const TestServer& s, std::atomic<bool>& stop, Figures& fig) {
  std::mt19937_64 rng(1000 + index);
  auto c = s.client();
  std::vector<std::string> mine;
  while (!stop.load()) {
    const int action = static_cast<int>(rng() % 10);
    if (action <= 2) {  // submit a small job
      const int side = 32 * static_cast<int>(1 + rng() % 3);
      json body = {
          {"prompt", "soak " + std::to_string(rng() % 50)}, {"width", side},       {"height", side}, {"frames", 5},
          {"steps", static_cast<int>(2 + rng() % 4)},       {"seed", rng() % 1000}};
      auto r = c->Post("/v1/videos", body.dump(), "application/json");
      if (!r) {
        fig.answer("POST transport error");
        continue;
      }
      fig.answer("POST " + std::to_string(r->status));
      if (r->status == 201) {
        const std::string id = json::parse(r->body)["id"];
        mine.push_back(id);
        std::lock_guard<std::mutex> lock(fig.mu);
        fig.jobs.insert(id);
      }
    } else if (action == 3) {  // malformed
      auto r = c->Post("/v1/videos", mode_of(rng), "application/json");
      fig.answer(r ? "bad POST " + std::to_string(r->status) : "bad POST transport error");
      std::lock_guard<std::mutex> lock(fig.mu);
      ++fig.malformed;
    } else if (action == 4 && index == 0) {  // cancel while running (one client: one long job at a time)
      auto r = c->Post("/v1/videos", small_job(400, rng()), "application/json");
      if (!r || r->status != 201) {
        fig.answer(r ? "POST " + std::to_string(r->status) : "POST transport error");
        continue;
      }
      const std::string id = json::parse(r->body)["id"];
      {
        std::lock_guard<std::mutex> lock(fig.mu);
        fig.jobs.insert(id);
      }
      json j = wait_for(
          *c, id, [](const json& x) { return x["step"].get<int>() >= 1 || is_terminal(x); }, 60.0);
      auto d = c->Delete("/v1/videos/" + id);
      fig.answer(d ? "DELETE " + std::to_string(d->status) : "DELETE transport error");
      const bool was_running = j.value("status", "") == "running";
      // Checked at once: retention forgets finished jobs after a while.
      json end = was_running ? wait_for(*c, id, is_terminal, 60.0) : json();
      std::lock_guard<std::mutex> lock(fig.mu);
      if (was_running && end.value("status", "") == "cancelled") {
        ++fig.cancels_running;
        const int overrun = end["step"].get<int>() - end["timing"]["cancel_at_step"].get<int>();
        if (overrun > 1) {
          ++fig.late_stops;
          ADD_FAILURE() << "job " << id << " ran " << overrun << " steps after its cancel: " << end.dump();
        }
      } else {
        ++fig.cancels_queued;
      }
    } else if (action == 5 && !mine.empty()) {  // SSE to the end of one of mine
      const std::string id = mine[rng() % mine.size()];
      std::string stream;
      auto r = c->Get("/v1/videos/" + id + "/events", [&](const char* d, size_t n) {
        stream.append(d, n);
        return !stop.load();
      });
      fig.answer(r ? "SSE " + std::to_string(r->status) : "SSE ended early");
      std::lock_guard<std::mutex> lock(fig.mu);
      ++fig.sse_streams;
    } else if (action == 6 && !mine.empty()) {  // download
      const std::string id = mine[rng() % mine.size()];
      auto r = c->Get("/v1/videos/" + id + "/content");
      fig.answer(r ? "content " + std::to_string(r->status) : "content transport error");
      std::lock_guard<std::mutex> lock(fig.mu);
      ++fig.downloads;
    } else if (action == 7 && !mine.empty()) {  // cancel one of mine, whatever its state
      auto r = c->Delete("/v1/videos/" + mine[rng() % mine.size()]);
      fig.answer(r ? "DELETE " + std::to_string(r->status) : "DELETE transport error");
    } else {  // poll
      const std::string path = (rng() % 4 == 0 || mine.empty()) ? std::string(rng() % 2 ? "/metrics" : "/v1/videos")
                                                                : "/v1/videos/" + mine[rng() % mine.size()];
      auto r = c->Get(path);
      fig.answer(r ? "GET " + std::to_string(r->status) : "GET transport error");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5 + rng() % 30));
  }
}

TEST(ServeSoak, EightClientsMixingEverything) {
  const char* env = std::getenv("VORTEX_SOAK_SECONDS");
  const double seconds = env ? std::atof(env) : 100.0;
  const double warmup = std::min(15.0, seconds / 4);
  ScratchDir dir;
  auto o = tiny_options(dir.path() / "data");
  o.queue_limit = 8;
  o.keep_jobs = 200;  // retention runs throughout; every job's end is also seen in the log
  o.http_threads = 16;
  Figures fig;
  o.log = [&fig](const std::string& line) {
    // "job <id> <state>[: reason]"; called with the server's job table locked.
    if (line.rfind("job ", 0) != 0) return;
    const size_t sp = line.find(' ', 4);
    const std::string id = line.substr(4, sp - 4);
    const std::string state =
        line.substr(sp + 1, line.find(':', sp) == std::string::npos ? std::string::npos : line.find(':', sp) - sp - 1);
    std::lock_guard<std::mutex> lock(fig.mu);
    fig.ended[id] = state;
    if (state == "failed") ADD_FAILURE() << line;
  };
  auto s = std::make_unique<TestServer>(o);
  ASSERT_TRUE(s->server);

  // Hard stop: whatever happens, the process ends well inside CTest's limit.
  std::atomic<bool> finished{false};
  std::thread watchdog([&] {
    const auto t0 = std::chrono::steady_clock::now();
    while (!finished.load()) {
      if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > 2 * seconds + 60) {
        std::fprintf(stderr, "soak: hard stop after %.0f s\n", 2 * seconds + 60);
        std::_Exit(3);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  });

  std::atomic<bool> stop{false};
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> clients;
  for (int i = 0; i < kClients; ++i) clients.emplace_back(client_loop, i, std::cref(*s), std::ref(stop), std::ref(fig));
  std::this_thread::sleep_for(std::chrono::duration<double>(warmup));
  const uint64_t rss_warm = rss_bytes();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds - warmup));
  stop = true;
  for (auto& t : clients) t.join();

  // Drain: every job reaches a terminal state (its end is logged, whether or not retention forgot it since).
  auto c = s->client();
  const auto drain0 = std::chrono::steady_clock::now();
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(fig.mu);
      if (fig.ended.size() >= fig.jobs.size()) break;
    }
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - drain0).count() > 60) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  int not_terminal = 0, succeeded = 0, failed = 0, cancelled = 0;
  {
    std::lock_guard<std::mutex> lock(fig.mu);
    for (const std::string& id : fig.jobs) {
      auto it = fig.ended.find(id);
      if (it == fig.ended.end()) {
        ++not_terminal;
        ADD_FAILURE() << "job " << id << " did not end: " << body_json(c->Get("/v1/videos/" + id)).dump();
        continue;
      }
      succeeded += it->second == "succeeded";
      failed += it->second == "failed";
      cancelled += it->second == "cancelled";
    }
  }
  const int late_stops = fig.late_stops;
  auto m = c->Get("/metrics");
  ASSERT_TRUE(m);
  const uint64_t rss_end = rss_bytes();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  s.reset();  // shutdown
  finished = true;
  watchdog.join();

  // Files: only --data under the scratch parent; inside it only job directories of known names.
  std::vector<std::string> strays;
  for (const auto& e : fs::directory_iterator(dir.path())) {
    if (e.path().filename() != "data") strays.push_back(e.path().string());
  }
  for (const auto& e : fs::recursive_directory_iterator(dir.path() / "data")) {
    const std::string name = e.path().filename().string();
    const bool staged = name == "output.partial" || name.find(".tmp") != std::string::npos;
    if (staged) strays.push_back(e.path().string());
  }
  EXPECT_TRUE(strays.empty()) << strays.size() << " stray entries, e.g. " << (strays.empty() ? "" : strays[0]);

  std::printf("\n==== soak figures (%.0f s, %d clients, h3-tiny cpu) ====\n", wall, kClients);
  std::printf("jobs: %zu submitted: %d succeeded, %d cancelled, %d failed, %d not terminal\n", fig.jobs.size(),
              succeeded, cancelled, failed, not_terminal);
  std::printf("cancels while running: %d (late stops: %d), of queued jobs: %d\n", fig.cancels_running, late_stops,
              fig.cancels_queued);
  std::printf("SSE streams: %d, downloads: %d, malformed requests: %d\n", fig.sse_streams, fig.downloads,
              fig.malformed);
  std::printf("RSS after warm-up (%.0f s): %.1f MiB, at the end: %.1f MiB, growth %.1f MiB (bound %.0f MiB)\n", warmup,
              rss_warm / 1048576.0, rss_end / 1048576.0,
              (static_cast<double>(rss_end) - static_cast<double>(rss_warm)) / 1048576.0, kRssGrowthBound / 1048576.0);
  std::printf("answers by kind:\n");
  int transport_errors = 0;
  for (const auto& [what, n] : fig.answers) {
    std::printf("  %-28s %d\n", what.c_str(), n);
    if (what.find("transport error") != std::string::npos) transport_errors += n;
  }
  std::fflush(stdout);

  EXPECT_GT(succeeded, 10);
  EXPECT_GT(fig.cancels_running, 0);
  EXPECT_EQ(not_terminal, 0);
  EXPECT_EQ(failed, 0);
  EXPECT_EQ(transport_errors, 0);
  EXPECT_EQ(fig.answers.count("POST 500") + fig.answers.count("bad POST 500"), 0u);
  EXPECT_LE(rss_end, rss_warm + kRssGrowthBound);
}

}  // namespace
}  // namespace vortex_serve_test
