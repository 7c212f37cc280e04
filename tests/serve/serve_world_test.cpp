// `vortex serve` over a world of ranks (serve/world.h) on the CPU backend, threads as ranks
// (InProcessWorld): rank 0 is a real Server on 127.0.0.1, ranks 1..U-1 run run_serve_follower. Proves that
// the latents a U = 2 and U = 4 world serves are byte-identical to a one-rank server's for the same
// request (and run.json records the world); that a follower that throws fails the running job with a
// message naming it, fails the queued job, turns the server to 503 and lets it shut down without hanging;
// that a cancel stops every rank at the same step and the world keeps serving; that an idle world
// outlives the communicator timeout (heartbeats) and shutdown stops every rank with OK. With per-request
// LoRA adapters (--lora-dir, synthetic h3-tiny adapters written here): U = 2, 4 worlds serve a one-rank
// server's bytes for jobs that switch adapters, scales and none; a follower whose file differs (other bytes,
// another adapter_config.json beside it), is missing, or that has no --lora-dir fails that job on every rank,
// naming the rank and the file, and the world serves the next jobs.
// Built a second time as serve_world_cuda_test (label gpu, VORTEX_SERVE_WORLD_CUDA): every rank a CUDA
// backend on device 0, the in-process world moving bytes by cudaMemcpy (as tests/dist/ulysses_cuda_test.cpp),
// so the broadcasts and the cancel agreement run through device tensors; skips visibly without a device.
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <stdexcept>
#include <thread>

#if defined(VORTEX_SERVE_WORLD_CUDA)
#include <cuda_runtime.h>

#include "gpu_test.h"
#endif

#include "dist/in_process.h"
#include "engine/run_manifest.h"
#include "io/safetensors.h"
#include "serve/world.h"
#include "serve_test_util.h"
#include "synced_communicator.h"

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
class BorrowedCommunicator final : public vortex::testing::SyncedCommunicator {
 public:
  BorrowedCommunicator(Communicator& inner, vortex::Backend& backend, int throw_at, const std::atomic<bool>* go)
      : SyncedCommunicator(inner, backend), throw_at_(throw_at), go_(go) {}
  Status all_to_all(const std::vector<Tensor>& send, const std::vector<Tensor>& recv) override {
    if (throw_at_ >= 0 && calls_++ == throw_at_) {
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (go_ != nullptr && !go_->load() && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      throw std::runtime_error("injected fault: follower rank " + std::to_string(rank()) + " crashed");
    }
    return SyncedCommunicator::all_to_all(send, recv);
  }

 private:
  int throw_at_, calls_ = 0;
  const std::atomic<bool>* go_;
};

struct Fault {
  int rank = -1;  // the follower that throws (-1: none)
  int at = 0;     // at its at-th all_to_all
  const std::atomic<bool>* go = nullptr;
  std::map<int, std::string> lora_dirs;  // followers whose --lora-dir is not rank 0's ("" : none)
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
  o.pipeline.backend = vortex::BackendKind::kCuda;
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
          if (auto it = fault.lora_dirs.find(c.rank()); it != fault.lora_dirs.end()) fo.pipeline.lora_dir = it->second;
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

std::string post(httplib::Client& c, const std::string& body) {
  auto r = c.Post("/v1/videos", body, "application/json");
  EXPECT_TRUE(r && r->status == 201) << (r ? r->body : "no response");
  return body_json(r).value("id", "");
}

struct Served {
  std::string video_sha, audio_sha;
  json run;
};

// A succeeded job's latents (SHA-256) and run.json.
Served fetch(httplib::Client& c, const json& done) {
  Served out;
  EXPECT_EQ(done.value("status", ""), "succeeded") << done.dump();
  const std::string id = done.value("id", "");
  for (const char* v : {"video_latents", "audio_latents", "run_json"}) {
    auto r = c.Get("/v1/videos/" + id + "/content?variant=" + v);
    EXPECT_TRUE(r && r->status == 200) << id << " " << v;
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

// Submits one job, waits for it and fetches its latents and run.json.
Served serve_one(httplib::Client& c, const std::string& body) {
  const std::string id = post(c, body);
  return fetch(c, wait_for(c, id, is_terminal, 120.0));
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
  const std::string body = small_job(3, seed);
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
        const std::string a = post(*c, small_job(3, fresh_seed()));
        const std::string b = post(*c, small_job(3, fresh_seed()));  // queued behind a: rank 1 waits for `go`
        go = true;
        running = wait_for(*c, a, is_terminal, 30.0);
        queued = wait_for(*c, b, is_terminal, 30.0);
        auto late = c->Post("/v1/videos", small_job(2, 1), "application/json");
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
    const std::string long_job = post(*c, small_job(kLongSteps, fresh_seed()));
    wait_for(
        *c, long_job, [](const json& j) { return j.value("step", 0) >= 1 || is_terminal(j); }, 60.0);
    auto del = c->Delete("/v1/videos/" + long_job);
    EXPECT_TRUE(del && del->status == 202);
    cancelled = wait_for(*c, long_job, is_terminal, 60.0);
    const std::string next = post(*c, small_job(2, fresh_seed()));
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

// ---- per-request LoRA adapters ----

// A synthetic native-key adapter for h3-tiny (no alpha: alpha = rank, scale 1): fresh uniform A [r, in] and
// B [out, r] on each of `layers` (their shapes as src/lora's target table has them).
void write_adapter(const fs::path& file, const std::vector<std::string>& layers, int rank, uint64_t seed) {
  const vortex::ModelConfig c = vortex::ModelConfig::h3_tiny();
  auto dims = [&](const std::string& layer) -> std::pair<int64_t, int64_t> {  // (out, in)
    auto ends = [&](const char* x) {
      return layer.size() >= std::strlen(x) && layer.rfind(x) == layer.size() - std::strlen(x);
    };
    if (ends(".attn.qkv_proj")) return {3LL * c.inner(), c.hidden};
    if (ends(".attn.out_proj")) return {c.hidden, c.inner()};
    if (ends(".mlp.fc1")) return {2LL * c.ffn, c.hidden};
    if (ends(".mlp.fc2")) return {c.hidden, c.ffn};
    if (layer == "final_layer.adaln_proj.linear") return {c.final_adaln_features(), c.time_embed_dim};
    return {c.adaln_features(), c.time_embed_dim};  // blocks.N.adaln_proj.linear
  };
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const std::string& layer : layers) {
    const auto [out, in] = dims(layer);
    Tensor a = Tensor::empty({rank, in}, vortex::DType::kF32);   // [r, in]
    Tensor b = Tensor::empty({out, rank}, vortex::DType::kF32);  // [out, r]
    for (int64_t i = 0; i < a.numel(); ++i) a.data<float>()[i] = uni(rng) / std::sqrt(static_cast<float>(in));
    for (int64_t i = 0; i < b.numel(); ++i) b.data<float>()[i] = 0.1f * uni(rng);
    tensors.emplace_back(layer + ".lora_A.weight", std::move(a));
    tensors.emplace_back(layer + ".lora_B.weight", std::move(b));
  }
  const Status st = vortex::write_safetensors(file.string(), tensors);
  ASSERT_TRUE(st.ok()) << st.to_string();
}

const std::vector<std::string> kStyleLayers = {"token_refiner.blocks.0.attn.qkv_proj",
                                               "blocks.0.attn.qkv_proj",
                                               "blocks.0.attn.out_proj",
                                               "blocks.0.mlp.fc1",
                                               "blocks.1.mlp.fc2",
                                               "blocks.0.adaln_proj.linear",
                                               "final_layer.adaln_proj.linear"};
const std::vector<std::string> kDetailLayers = {"blocks.1.attn.qkv_proj", "blocks.1.mlp.fc1", "blocks.1.attn.out_proj"};

std::string lora_job(uint64_t seed, const json& lora) {
  json j = json::parse(small_job(3, seed));
  if (!lora.is_null()) j["lora"] = lora;
  return j.dump();
}

// Submits every body at once (the worker switches adapters between consecutive jobs), waits for each.
std::vector<json> run_all(httplib::Client& c, const std::vector<std::string>& bodies) {
  std::vector<std::string> ids;
  for (const std::string& b : bodies) ids.push_back(post(c, b));
  std::vector<json> done;
  for (const std::string& id : ids) done.push_back(wait_for(c, id, is_terminal, 120.0));
  return done;
}

TEST(ServeWorld, URankWorldWithAdaptersServesOneRanksBytes) {
  SKIP_WITHOUT_BACKEND();
  ScratchDir dir;
  const uint64_t seed = fresh_seed(), lora_seed = fresh_seed();
  fs::create_directories(dir.path() / "loras");
  write_adapter(dir.path() / "loras" / "style.safetensors", kStyleLayers, 4, lora_seed);
  write_adapter(dir.path() / "loras" / "detail.safetensors", kDetailLayers, 8, lora_seed + 1);
  // Adapter, two with a scale, none, the first again: every switch the worker makes.
  const std::vector<json> loras = {json::array({"style.safetensors"}),
                                   json::array({"style.safetensors:0.5", "detail.safetensors"}), json(),
                                   json::array({"style.safetensors"})};
  std::vector<std::string> bodies;
  for (const json& l : loras) bodies.push_back(lora_job(seed, l));
  auto options = [&](const std::string& data) {
    ServeOptions o = world_options(dir.path() / data);
    o.pipeline.lora_dir = (dir.path() / "loras").string();
    return o;
  };
  std::vector<Served> one;
  {
    TestServer ts(options("u1"));
    ASSERT_TRUE(ts.server);
    auto c = ts.client();
    for (const json& d : run_all(*c, bodies)) one.push_back(fetch(*c, d));
  }
  ASSERT_EQ(one.size(), loras.size());
  for (size_t i = 0; i < one.size(); ++i) {
    ASSERT_FALSE(one[i].video_sha.empty()) << "job " << i;
    EXPECT_EQ(one[i].run["lora"].size(), loras[i].is_null() ? 0u : loras[i].size()) << one[i].run["lora"].dump();
  }
  // The adapters move the latents (else equal bytes below would prove nothing about them).
  EXPECT_NE(one[0].video_sha, one[2].video_sha);
  EXPECT_NE(one[0].audio_sha, one[2].audio_sha);
  EXPECT_NE(one[0].video_sha, one[1].video_sha);
  EXPECT_EQ(one[0].video_sha, one[3].video_sha);  // switching back restores the adapter exactly
  std::printf("1 rank: style %s, style:0.5+detail %s, none %s (seed %llu, adapters %llu)\n",
              one[0].video_sha.substr(0, 16).c_str(), one[1].video_sha.substr(0, 16).c_str(),
              one[2].video_sha.substr(0, 16).c_str(), static_cast<unsigned long long>(seed),
              static_cast<unsigned long long>(lora_seed));
  for (int u : {2, 4, 7}) {  // 7: uneven rows, ranks without heads
    std::vector<Served> got;
    int missing_status = 0;
    json missing_error;
    Status st = run_world(u, comm_timeout(std::chrono::seconds(120)), options("u" + std::to_string(u)), [&](Server& s) {
      auto c = client_of(s);
      // Rank 0 validates the names before anything runs, as one rank does.
      auto r = c->Post("/v1/videos", lora_job(seed, json::array({"missing.safetensors"})), "application/json");
      missing_status = r ? r->status : -1;
      missing_error = body_json(r)["error"];
      for (const json& d : run_all(*c, bodies)) got.push_back(fetch(*c, d));
    });
    ASSERT_TRUE(st.ok()) << "U=" << u << ": " << st.to_string();
    EXPECT_EQ(missing_status, 400);
    EXPECT_EQ(missing_error.value("field", ""), "lora") << missing_error.dump();
    ASSERT_EQ(got.size(), one.size());
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].video_sha, one[i].video_sha) << "U=" << u << " job " << i << " lora " << loras[i].dump();
      EXPECT_EQ(got[i].audio_sha, one[i].audio_sha) << "U=" << u << " job " << i << " lora " << loras[i].dump();
      EXPECT_EQ(got[i].run["lora"], one[i].run["lora"]) << "U=" << u << " job " << i;
      EXPECT_EQ(got[i].run["world"]["world_size"], u);
    }
    std::printf("U=%d: style %s, style:0.5+detail %s, none %s\n", u, got[0].video_sha.substr(0, 16).c_str(),
                got[1].video_sha.substr(0, 16).c_str(), got[2].video_sha.substr(0, 16).c_str());
  }
}

TEST(ServeWorld, RanksWhoseAdaptersDifferFailThatJobNamingThemAndTheWorldServesOn) {
  SKIP_WITHOUT_BACKEND();
  ScratchDir dir;
  const uint64_t seed = fresh_seed(), lora_seed = fresh_seed();
  const fs::path mine = dir.path() / "loras", other = dir.path() / "loras_rank1", partial = dir.path() / "loras_rank2",
                 with_config = dir.path() / "loras_config";
  for (const fs::path& p : {mine, other, partial, with_config}) fs::create_directories(p);
  write_adapter(mine / "style.safetensors", kStyleLayers, 4, lora_seed);
  write_adapter(mine / "detail.safetensors", kDetailLayers, 8, lora_seed + 1);
  // Rank 1: the same file name, shapes and size, other values. Rank 2: no style.safetensors.
  write_adapter(other / "style.safetensors", kStyleLayers, 4, lora_seed + 2);
  ASSERT_EQ(fs::file_size(other / "style.safetensors"), fs::file_size(mine / "style.safetensors"));
  for (const fs::path& p : {other, partial, with_config})
    fs::copy_file(mine / "detail.safetensors", p / "detail.safetensors");
  // The same files plus an adapter_config.json, which load_lora may read for alpha.
  fs::copy_file(mine / "style.safetensors", with_config / "style.safetensors");
  std::ofstream(with_config / "adapter_config.json") << R"({"r": 8, "lora_alpha": 4})";

  ServeOptions o = world_options(dir.path() / "data");
  o.pipeline.lora_dir = mine.string();
  Served expect_detail, expect_none;
  {
    TestServer ts(o);
    ASSERT_TRUE(ts.server);
    auto c = ts.client();
    const std::vector<json> done =
        run_all(*c, {lora_job(seed, json::array({"detail.safetensors"})), lora_job(seed, json())});
    expect_detail = fetch(*c, done[0]);
    expect_none = fetch(*c, done[1]);
  }
  ASSERT_NE(expect_detail.video_sha, expect_none.video_sha);

  Fault fault;
  fault.lora_dirs = {{1, other.string()}, {2, partial.string()}};
  o.data_dir = (dir.path() / "data3").string();
  std::vector<json> done;
  Served detail, none;
  json health;
  const auto t0 = std::chrono::steady_clock::now();
  Status st = run_world(
      3, comm_timeout(std::chrono::seconds(60)), o,
      [&](Server& s) {
        auto c = client_of(s);
        done = run_all(*c, {lora_job(seed, json::array({"style.safetensors"})),
                            lora_job(seed, json::array({"detail.safetensors"})), lora_job(seed, json())});
        if (done.size() == 3) {
          detail = fetch(*c, done[1]);
          none = fetch(*c, done[2]);
        }
        health = body_json(c->Get("/health"));
      },
      fault);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(done.size(), 3u);
  const std::string why = done[0]["error"].value("message", "");
  std::printf("mismatched job: %s (%.1f s)\n", done[0]["error"].dump().c_str(), seconds);
  EXPECT_EQ(done[0].value("status", ""), "failed") << done[0].dump();
  EXPECT_EQ(done[0]["error"].value("type", ""), "internal") << done[0].dump();  // the deployment's fault
  // Each rank's folder is named by its last component only: clients never see the server's absolute paths.
  EXPECT_NE(why.find("rank 1 has another style.safetensors in its --lora-dir <path>/" + other.filename().string()),
            std::string::npos)
      << why;
  EXPECT_NE(why.find("rank 2: no adapter style.safetensors in its --lora-dir <path>/" + partial.filename().string()),
            std::string::npos)
      << why;
  EXPECT_EQ(why.find(other.parent_path().string()), std::string::npos) << why;
  EXPECT_EQ(why.find("rank 0"), why.find("rank 0's")) << why;  // rank 0 itself attached
  EXPECT_EQ(why.find("has stopped"), std::string::npos) << why;
  // The world goes on: the next jobs run on every rank and give one rank's bytes.
  EXPECT_EQ(detail.video_sha, expect_detail.video_sha);
  EXPECT_EQ(detail.audio_sha, expect_detail.audio_sha);
  EXPECT_EQ(none.video_sha, expect_none.video_sha);
  EXPECT_EQ(health.value("status", ""), "ok") << health.dump();
  EXPECT_TRUE(st.ok()) << st.to_string();  // every follower received the stop message
  EXPECT_LT(seconds, 60.0);

  // An adapter that does not fit the model on rank 0 (every rank has it): the job fails with rank 0's load
  // error, as on one rank. Then another adapter_config.json beside the file on rank 1 and no --lora-dir at
  // all on rank 2.
  {
    Tensor a = Tensor::empty({4, 7}, vortex::DType::kF32);  // [r, in]: in is not the layer's
    Tensor b = Tensor::empty({3 * vortex::ModelConfig::h3_tiny().inner(), 4}, vortex::DType::kF32);
    for (Tensor* t : {&a, &b})
      for (int64_t i = 0; i < t->numel(); ++i) t->data<float>()[i] = 0.01f * static_cast<float>(i % 13 + 1);
    ASSERT_TRUE(vortex::write_safetensors(
                    (mine / "broken.safetensors").string(),
                    {{"blocks.0.attn.qkv_proj.lora_A.weight", a}, {"blocks.0.attn.qkv_proj.lora_B.weight", b}})
                    .ok());
  }
  fault.lora_dirs = {{1, with_config.string()}, {2, ""}};
  o.data_dir = (dir.path() / "data3b").string();
  done.clear();
  st = run_world(
      3, comm_timeout(std::chrono::seconds(60)), o,
      [&](Server& s) {
        auto c = client_of(s);
        done = run_all(*c, {lora_job(seed, json::array({"broken.safetensors"})),
                            lora_job(seed, json::array({"detail.safetensors:0.5"})), lora_job(seed, json())});
        if (done.size() == 3) none = fetch(*c, done[2]);
      },
      fault);
  ASSERT_EQ(done.size(), 3u);
  const std::string broken = done[0]["error"].value("message", "");
  std::printf("broken job: %s\n", done[0]["error"].dump().c_str());
  EXPECT_EQ(done[0].value("status", ""), "failed") << done[0].dump();
  EXPECT_EQ(done[0]["error"].value("type", ""), "invalid_request") << done[0].dump();
  EXPECT_NE(broken.find("rank 0 could not attach the adapters"), std::string::npos) << broken;
  EXPECT_NE(broken.find("blocks.0.attn.qkv_proj"), std::string::npos) << broken;
  const std::string why2 = done[1]["error"].value("message", "");
  std::printf("mismatched job: %s\n", done[1]["error"].dump().c_str());
  EXPECT_EQ(done[1].value("status", ""), "failed") << done[1].dump();
  EXPECT_NE(why2.find("rank 1 has another adapter_config.json beside detail.safetensors"), std::string::npos) << why2;
  EXPECT_NE(why2.find("rank 2 was started without --lora-dir"), std::string::npos) << why2;
  EXPECT_EQ(none.video_sha, expect_none.video_sha);
  EXPECT_TRUE(st.ok()) << st.to_string();

  // Other bytes on the only follower, and nothing else wrong: still no sampling with other weights.
  fault.lora_dirs = {{1, other.string()}};
  o.data_dir = (dir.path() / "data2").string();
  done.clear();
  st = run_world(
      2, comm_timeout(std::chrono::seconds(60)), o,
      [&](Server& s) {
        auto c = client_of(s);
        done = run_all(*c, {lora_job(seed, json::array({"style.safetensors"})),
                            lora_job(seed, json::array({"detail.safetensors"}))});
        if (done.size() == 2) detail = fetch(*c, done[1]);
      },
      fault);
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(done[0].value("status", ""), "failed") << done[0].dump();
  EXPECT_NE(done[0]["error"].value("message", "").find("rank 1 has another style.safetensors"), std::string::npos)
      << done[0].dump();
  EXPECT_EQ(detail.video_sha, expect_detail.video_sha);
  EXPECT_TRUE(st.ok()) << st.to_string();
}

}  // namespace
}  // namespace vortex_serve_test
