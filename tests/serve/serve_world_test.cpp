// `vortex serve` over a world of ranks (serve/world.h) on the CPU backend, threads as ranks
// (InProcessWorld): rank 0 is a real Server on 127.0.0.1, ranks 1..U-1 run run_serve_follower. Proves that
// the latents a U = 2 and U = 4 world serves are byte-identical to a one-rank server's for the same
// request (and run.json records the world); that a follower that throws fails the running job with a
// message naming it, fails the queued job, turns the server to 503 and lets it shut down without hanging;
// that a cancel stops every rank at the same step and the world keeps serving; that an idle world
// outlives the communicator timeout (heartbeats) and shutdown stops every rank with OK.
// Built a second time as serve_world_cuda_test (label gpu, VORTEX_SERVE_WORLD_CUDA): every rank a CUDA
// backend on device 0, the in-process world moving bytes by cudaMemcpy (as tests/dist/ulysses_cuda_test.cpp),
// so the broadcasts and the cancel agreement run through device tensors; skips visibly without a device.
#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>

#if defined(VORTEX_SERVE_WORLD_CUDA)
#include <cuda_runtime.h>

#include "gpu_test.h"
#endif

#include "dist/in_process.h"
#include "engine/run_manifest.h"
#include "serve/world.h"
#include "serve_test_util.h"

namespace vortex_serve_test {
namespace {

using vortex::CommOptions;
using vortex::Communicator;
using vortex::Result;
using vortex::Status;
using vortex::Tensor;
using vortex::serve::ServeOptions;
using vortex::serve::Server;

uint64_t fresh_seed() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

// A rank's communicator handed to the server or follower (which own what `join` returns) without giving
// up the world's; optionally throws at its `throw_at`-th all_to_all once `go` is set (so the test decides
// which jobs are queued when the rank dies).
// Each collective first completes the rank's pending device work (the bytes it sends).
class BorrowedCommunicator final : public Communicator {
 public:
  BorrowedCommunicator(Communicator& inner, vortex::Backend& backend, int throw_at, const std::atomic<bool>* go)
      : inner_(inner), backend_(backend), throw_at_(throw_at), go_(go) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  std::string_view name() const override { return inner_.name(); }
  Status all_to_all(const std::vector<Tensor>& send, const std::vector<Tensor>& recv) override {
    if (throw_at_ >= 0 && calls_++ == throw_at_) {
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (go_ != nullptr && !go_->load() && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      throw std::runtime_error("injected fault: follower rank " + std::to_string(rank()) + " crashed");
    }
    VORTEX_RETURN_IF_ERROR(backend_.synchronize());
    return inner_.all_to_all(send, recv);
  }
  Status all_gather(const Tensor& send, const std::vector<Tensor>& recv) override {
    VORTEX_RETURN_IF_ERROR(backend_.synchronize());
    return inner_.all_gather(send, recv);
  }
  Status broadcast(const Tensor& buf, int root) override {
    VORTEX_RETURN_IF_ERROR(backend_.synchronize());
    return inner_.broadcast(buf, root);
  }
  Status barrier() override {
    VORTEX_RETURN_IF_ERROR(backend_.synchronize());
    return inner_.barrier();
  }
  void abort(const std::string& reason) override { inner_.abort(reason); }

 private:
  Communicator& inner_;
  vortex::Backend& backend_;
  int throw_at_, calls_ = 0;
  const std::atomic<bool>* go_;
};

struct Fault {
  int rank = -1;  // the follower that throws (-1: none)
  int at = 0;     // at its at-th all_to_all
  const std::atomic<bool>* go = nullptr;
};

// A serve world of `u` ranks: rank 0 starts a Server over `o` and runs `body` on it, then shuts it down
// (finishing the running job) and returns its world status; the others follow. The first failure of any
// rank, as run_in_process_ranks reports it.
// The in-process world's memory: host memcpy, or device copies for the CUDA build.
vortex::InProcessMemory world_memory() {
  vortex::InProcessMemory m;
#if defined(VORTEX_SERVE_WORLD_CUDA)
  m.device = vortex::Device::kCuda;
  m.copy = [](void* dst, const void* src, size_t bytes) -> Status {
    const cudaError_t e = cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice);
    return e == cudaSuccess ? Status::Ok() : Status(vortex::ErrorCode::kCuda, cudaGetErrorString(e));
  };
#endif
  return m;
}

ServeOptions world_options(const fs::path& data) {
  ServeOptions o = tiny_options(data);
#if defined(VORTEX_SERVE_WORLD_CUDA)
  o.pipeline.backend = "cuda";
#endif
  return o;
}

// The CUDA build skips (through tests/gpu_test.h) only when there is no device; the CPU build never does.
#if defined(VORTEX_SERVE_WORLD_CUDA)
#define SKIP_WITHOUT_BACKEND() VORTEX_REQUIRE_GPU()
#else
#define SKIP_WITHOUT_BACKEND() (void)0
#endif

Status run_world(int u, CommOptions comm, ServeOptions o, const std::function<void(Server&)>& body, Fault fault = {}) {
  return vortex::run_in_process_ranks(
      u, comm,
      [&](Communicator& c) -> Status {
        const int throw_at = c.rank() == fault.rank ? fault.at : -1;
        vortex::serve::WorldJoin join = [&c, throw_at,
                                         &fault](vortex::Backend& backend) -> Result<std::unique_ptr<Communicator>> {
          return std::unique_ptr<Communicator>(std::make_unique<BorrowedCommunicator>(c, backend, throw_at, fault.go));
        };
        if (c.rank() != 0) {
          vortex::serve::FollowerOptions fo;
          fo.pipeline = o.pipeline;
          fo.join = join;
          return vortex::serve::run_serve_follower(fo);
        }
        ServeOptions mine = o;
        mine.join = join;
        Result<std::unique_ptr<Server>> s = Server::start(mine);
        if (!s.ok()) return s.status();
        body(**s);
        (*s)->shutdown(vortex::serve::RunningJob::kFinish);
        return (*s)->world_status();
      },
      world_memory());
}

std::unique_ptr<httplib::Client> client_of(const Server& s) {
  auto c = std::make_unique<httplib::Client>("127.0.0.1", s.port());
  c->set_read_timeout(30, 0);
  c->set_connection_timeout(5, 0);
  return c;
}

std::string job_body(uint64_t seed, int steps) {
  return json{{"prompt", "a lighthouse at dusk"},
              {"width", 64},
              {"height", 64},
              {"frames", 5},
              {"steps", steps},
              {"seed", seed}}
      .dump();
}

std::string post(httplib::Client& c, const std::string& body) {
  auto r = c.Post("/v1/videos", body, "application/json");
  EXPECT_TRUE(r && r->status == 201) << (r ? r->body : "no response");
  return body_json(r).value("id", "");
}

struct Served {
  std::string video_sha, audio_sha;
  json run;
};

// Submits one job, waits for it and fetches its latents and run.json.
Served serve_one(httplib::Client& c, const std::string& body) {
  Served out;
  const std::string id = post(c, body);
  const json done = wait_for(c, id, is_terminal, 120.0);
  EXPECT_EQ(done.value("status", ""), "succeeded") << done.dump();
  for (const char* v : {"video_latents", "audio_latents", "run_json"}) {
    auto r = c.Get("/v1/videos/" + id + "/content?variant=" + v);
    EXPECT_TRUE(r && r->status == 200) << v;
    if (!r || r->status != 200) continue;
    if (std::string(v) == "run_json") {
      out.run = json::parse(r->body, nullptr, false);
    } else {
      (std::string(v) == "video_latents" ? out.video_sha : out.audio_sha) =
          vortex::sha256_hex(r->body.data(), r->body.size());
    }
  }
  return out;
}

CommOptions comm_timeout(std::chrono::milliseconds t) {
  CommOptions c;
  c.timeout = t;
  return c;
}

TEST(ServeWorld, URankWorldServesOneRanksLatentBytes) {
  SKIP_WITHOUT_BACKEND();
  ScratchDir dir;
  const uint64_t seed = fresh_seed();
  const std::string body = job_body(seed, 3);
  Served one;
  {
    TestServer ts(world_options(dir.path() / "u1"));
    ASSERT_TRUE(ts.server);
    one = serve_one(*ts.client(), body);
  }
  ASSERT_FALSE(one.video_sha.empty());
  EXPECT_EQ(one.run["world"]["world_size"], 1);
  EXPECT_EQ(one.run["world"]["parallelism"], "none");
  EXPECT_TRUE(one.run["world"]["communicator"].is_null());
  std::printf("1 rank: video %s audio %s (seed %llu)\n", one.video_sha.substr(0, 16).c_str(),
              one.audio_sha.substr(0, 16).c_str(), static_cast<unsigned long long>(seed));
  for (int u : {2, 4}) {
    Served got;
    json health;
    Status st = run_world(u, comm_timeout(std::chrono::seconds(120)),
                          world_options(dir.path() / ("u" + std::to_string(u))), [&](Server& s) {
                            auto c = client_of(s);
                            health = body_json(c->Get("/health"));
                            got = serve_one(*c, body);
                          });
    ASSERT_TRUE(st.ok()) << "U=" << u << ": " << st.to_string();
    EXPECT_EQ(health.value("world_size", 0), u);
    EXPECT_EQ(got.video_sha, one.video_sha) << "U=" << u << " seed " << seed;
    EXPECT_EQ(got.audio_sha, one.audio_sha) << "U=" << u << " seed " << seed;
    EXPECT_EQ(got.run["world"]["world_size"], u);
    EXPECT_EQ(got.run["world"]["parallelism"], "ulysses");
    EXPECT_EQ(got.run["world"]["communicator"], "in-process");
    std::printf("U=%d: video %s audio %s\n", u, got.video_sha.substr(0, 16).c_str(),
                got.audio_sha.substr(0, 16).c_str());
  }
}

TEST(ServeWorld, AFollowerThatThrowsFailsTheJobNamingItAndTheServerStops) {
  SKIP_WITHOUT_BACKEND();
  ScratchDir dir;
  std::atomic<bool> go{false};
  json running, queued, health;
  int late_status = 0;
  std::string late_error;
  const auto t0 = std::chrono::steady_clock::now();
  Fault fault;
  fault.rank = 1;
  fault.at = 2;  // inside the first job's first step
  fault.go = &go;
  Status st = run_world(
      3, comm_timeout(std::chrono::seconds(60)), world_options(dir.path()),
      [&](Server& s) {
        auto c = client_of(s);
        const std::string a = post(*c, job_body(fresh_seed(), 3));
        const std::string b = post(*c, job_body(fresh_seed(), 3));  // queued behind a: rank 1 waits for `go`
        go = true;
        running = wait_for(*c, a, is_terminal, 30.0);
        queued = wait_for(*c, b, is_terminal, 30.0);
        auto late = c->Post("/v1/videos", job_body(1, 2), "application/json");
        late_status = late ? late->status : -1;
        const json late_body = body_json(late);
        late_error = late_body.contains("error") && late_body["error"].is_object()
                         ? late_body["error"].value("message", "")
                         : late_body.dump();
        health = body_json(c->Get("/health"));
      },
      fault);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("running job: %s\nqueued job: %s\nworld: %s (%.1f s)\n", running["error"].dump().c_str(),
              queued["error"].dump().c_str(), st.message().c_str(), seconds);
  EXPECT_EQ(running.value("status", ""), "failed") << running.dump();
  const std::string why = running["error"].value("message", "");
  EXPECT_NE(why.find("rank 1"), std::string::npos) << why;
  EXPECT_NE(why.find("injected fault: follower rank 1 crashed"), std::string::npos) << why;
  EXPECT_EQ(queued.value("status", ""), "failed") << queued.dump();
  EXPECT_NE(queued["error"].value("message", "").find("not run: the world of 3 ranks failed"), std::string::npos);
  EXPECT_EQ(late_status, 503);
  EXPECT_NE(late_error.find("the world of ranks failed"), std::string::npos) << late_error;
  EXPECT_EQ(health.value("status", ""), "failed");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("rank 1"), std::string::npos) << st.message();
  EXPECT_LT(seconds, 60.0);  // nobody waited for the communicator timeout
}

// Long enough that the DELETE lands while it runs (a few seconds of h3-tiny steps on either backend).
#if defined(VORTEX_SERVE_WORLD_CUDA)
constexpr int kLongSteps = 1000;
#else
constexpr int kLongSteps = 40;
#endif

TEST(ServeWorld, CancelStopsEveryRankAndAnIdleWorldOutlivesTheTimeoutUntilShutdown) {
  SKIP_WITHOUT_BACKEND();
  ScratchDir dir;
  ServeOptions o = world_options(dir.path());
  o.heartbeat = std::chrono::milliseconds(50);
  json cancelled, after, health;
  // 1.5 s: an idle follower with no heartbeat would time out well inside the 3 s idle below.
  Status st = run_world(2, comm_timeout(std::chrono::milliseconds(1500)), o, [&](Server& s) {
    auto c = client_of(s);
    const std::string long_job = post(*c, job_body(fresh_seed(), kLongSteps));
    wait_for(
        *c, long_job, [](const json& j) { return j.value("step", 0) >= 1 || is_terminal(j); }, 60.0);
    auto del = c->Delete("/v1/videos/" + long_job);
    EXPECT_TRUE(del && del->status == 202);
    cancelled = wait_for(*c, long_job, is_terminal, 60.0);
    const std::string next = post(*c, job_body(fresh_seed(), 2));
    after = wait_for(*c, next, is_terminal, 60.0);
    std::this_thread::sleep_for(std::chrono::seconds(3));
    health = body_json(c->Get("/health"));
  });
  EXPECT_TRUE(st.ok()) << st.to_string();  // every follower returned OK: it received the stop message
  EXPECT_EQ(cancelled.value("status", ""), "cancelled") << cancelled.dump();
  EXPECT_LT(cancelled.value("step", kLongSteps), kLongSteps);
  EXPECT_EQ(after.value("status", ""), "succeeded") << after.dump();
  EXPECT_EQ(health.value("status", ""), "ok") << health.dump();
  EXPECT_EQ(health.value("world_size", 0), 2);
}

TEST(ServeWorld, OptionsTheWorldCannotServeAreRefusedBeforeLoading) {
  vortex::PipelineOptions p;
  p.lora_dir = "/nonexistent";
  Status s = vortex::serve::check_world_serve_options(p);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("--lora-dir"), std::string::npos) << s.message();
  ScratchDir dir;
  ServeOptions o = tiny_options(dir.path());
  o.pipeline.lora_dir = dir.path().string();
  bool joined = false;
  o.join = [&joined](vortex::Backend&) -> Result<std::unique_ptr<Communicator>> {
    joined = true;
    return vortex::internal_error("must not be reached");
  };
  auto started = Server::start(o);
  ASSERT_FALSE(started.ok());
  EXPECT_NE(started.status().message().find("--lora-dir"), std::string::npos) << started.status().message();
  EXPECT_FALSE(joined);
}

}  // namespace
}  // namespace vortex_serve_test
