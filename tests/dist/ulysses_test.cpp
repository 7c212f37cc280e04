// Ulysses sequence parallelism on the CPU backend, U simulated ranks as threads (InProcessWorld):
// h3-tiny sampled end to end through Pipeline (noise, sampler, 3 res_multistep steps, outputs) with
// U = 2, 4 and 7 gives video and audio latents whose SHA-256 equals one rank's, on every rank (h3-tiny
// has 4 heads, so U = 7 is an uneven head split with ranks that hold none); one block of the shard path
// equals the full block byte for byte; a rank that throws or hangs inside the model fails the run with
// a message naming it; a world larger than the request's row count is refused up front.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <mutex>
#include <random>
#include <stdexcept>
#include <thread>

#include "dist/in_process.h"
#include "engine/pipeline.h"
#include "engine/run_manifest.h"

namespace vortex {
namespace {

namespace fs = std::filesystem;

uint64_t fresh_seed() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

struct Digest {
  std::string video, audio;
  int64_t rows = 0;
};

PipelineOptions tiny_options(uint64_t weights_seed) {
  PipelineOptions o;
  o.config_name = "h3-tiny";
  o.synthetic_weights = true;
  o.weights_seed = weights_seed;
  o.backend = BackendKind::kCpu;
  o.threads = 1;
  return o;
}

RunRequest tiny_request(uint64_t seed) {
  RunRequest r;
  r.width = 64;
  r.height = 64;
  r.frames = 5;
  r.steps = 3;  // res_multistep: the second and third steps use the sampler's history
  r.seed = seed;
  r.synthetic_text_rows = 6;
  return r;
}

// One rank's whole generate: load, plan, run into a fresh folder; the SHA-256 of the latents files.
Result<Digest> generate_on(Communicator* comm, uint64_t weights_seed, uint64_t seed, const std::string& dir) {
  ProgressSink quiet;
  VORTEX_ASSIGN_OR_RETURN(std::unique_ptr<Pipeline> p, Pipeline::load(tiny_options(weights_seed), quiet));
  p->model().set_communicator(comm);
  VORTEX_ASSIGN_OR_RETURN(RunPlan plan, p->plan(tiny_request(seed), quiet, FieldStyle::kFlag));
  fs::create_directories(dir);
  CancelToken never;
  VORTEX_RETURN_IF_ERROR(p->run(plan, quiet, never, dir).status());
  Digest d;
  d.rows = plan.geo.total_rows();
  VORTEX_ASSIGN_OR_RETURN(d.video, sha256_file(dir + "/video_latents.safetensors"));
  VORTEX_ASSIGN_OR_RETURN(d.audio, sha256_file(dir + "/audio_latents.safetensors"));
  return d;
}

class Ulysses : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("vortex_ulysses_" + std::to_string(::getpid()) + "_" + std::to_string(fresh_seed() % 1000000));
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  std::string dir(const std::string& name) const { return (root_ / name).string(); }
  fs::path root_;
};

TEST_F(Ulysses, URanksGiveOneRanksLatentBytesOnEveryRank) {
  const uint64_t weights_seed = fresh_seed(), seed = fresh_seed();
  auto one = generate_on(nullptr, weights_seed, seed, dir("u1"));
  ASSERT_TRUE(one.ok()) << one.status().to_string();
  std::printf("h3-tiny 64x64x5, %lld packed rows, 1 rank: video %s audio %s\n", static_cast<long long>(one->rows),
              one->video.substr(0, 16).c_str(), one->audio.substr(0, 16).c_str());
  for (int u : {2, 4, 7}) {
    std::vector<Digest> got(static_cast<size_t>(u));
    CommOptions opts;
    opts.timeout = std::chrono::seconds(120);
    Status st = run_in_process_ranks(u, opts, [&](Communicator& c) -> Status {
      VORTEX_ASSIGN_OR_RETURN(
          got[static_cast<size_t>(c.rank())],
          generate_on(&c, weights_seed, seed, dir("u" + std::to_string(u) + "_r" + std::to_string(c.rank()))));
      return Status::Ok();
    });
    ASSERT_TRUE(st.ok()) << "U=" << u << ": " << st.to_string();
    for (int r = 0; r < u; ++r) {
      EXPECT_EQ(got[r].video, one->video) << "U=" << u << " rank " << r << " seeds " << weights_seed << "/" << seed;
      EXPECT_EQ(got[r].audio, one->audio) << "U=" << u << " rank " << r << " seeds " << weights_seed << "/" << seed;
    }
    int equal = 0;
    for (int r = 0; r < u; ++r) equal += got[r].video == one->video && got[r].audio == one->audio;
    std::printf("U=%d: video and audio latents SHA-256 equal to 1 rank's on %d of %d ranks\n", u, equal, u);
  }
}

// Fails the calling rank at its `at`-th all_to_all: by throwing, or by hanging past the timeout.
class FaultyCommunicator final : public Communicator {
 public:
  enum class Mode { kThrow, kHang };
  FaultyCommunicator(Communicator& inner, int at, Mode mode, std::chrono::milliseconds hang)
      : inner_(inner), at_(at), mode_(mode), hang_(hang) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  std::string_view name() const override { return "faulty"; }
  Status all_to_all(const std::vector<Tensor>& send, const std::vector<Tensor>& recv) override {
    if (calls_++ == at_) {
      if (mode_ == Mode::kThrow)
        throw std::runtime_error("injected fault: rank " + std::to_string(rank()) + " crashed");
      std::this_thread::sleep_for(hang_);  // longer than the world's timeout: peers must not wait for it
    }
    return inner_.all_to_all(send, recv);
  }
  Status all_gather(const Tensor& send, const std::vector<Tensor>& recv) override {
    return inner_.all_gather(send, recv);
  }
  Status broadcast(const Tensor& buf, int root) override { return inner_.broadcast(buf, root); }
  Status barrier() override { return inner_.barrier(); }
  void abort(const std::string& reason) override { inner_.abort(reason); }

 private:
  Communicator& inner_;
  int at_, calls_ = 0;
  Mode mode_;
  std::chrono::milliseconds hang_;
};

TEST_F(Ulysses, ARankThatThrowsOrHangsFailsTheRunNamingIt) {
  const uint64_t weights_seed = fresh_seed(), seed = fresh_seed();
  for (auto mode : {FaultyCommunicator::Mode::kThrow, FaultyCommunicator::Mode::kHang}) {
    CommOptions opts;
    opts.timeout = std::chrono::milliseconds(mode == FaultyCommunicator::Mode::kHang ? 1500 : 60000);
    const auto t0 = std::chrono::steady_clock::now();
    std::mutex mu;
    std::vector<std::string> peer_errors;
    Status st = run_in_process_ranks(3, opts, [&](Communicator& c) -> Status {
      FaultyCommunicator faulty(c, /*at=*/5, mode, std::chrono::milliseconds(4000));
      Communicator* comm = c.rank() == 1 ? static_cast<Communicator*>(&faulty) : &c;
      auto r = generate_on(comm, weights_seed, seed, dir("fault_r" + std::to_string(c.rank())));
      if (!r.ok() && c.rank() != 1) {
        std::lock_guard<std::mutex> lock(mu);
        peer_errors.push_back(r.status().message());
      }
      return r.status();
    });
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ASSERT_FALSE(st.ok());
    std::printf("%s: %s (%.1f s)\n", mode == FaultyCommunicator::Mode::kThrow ? "throw" : "hang", st.message().c_str(),
                s);
    if (mode == FaultyCommunicator::Mode::kThrow) {
      EXPECT_NE(st.message().find("rank 1 failed"), std::string::npos) << st.message();
      EXPECT_NE(st.message().find("injected fault: rank 1 crashed"), std::string::npos) << st.message();
    } else {
      EXPECT_NE(st.message().find("rank(s) 1 did not reach all_to_all"), std::string::npos) << st.message();
    }
    ASSERT_EQ(peer_errors.size(), 2u) << "both peers must fail, not hang";
    for (const std::string& e : peer_errors) EXPECT_NE(e.find("all-to-all"), std::string::npos) << e;
    EXPECT_LT(s, 60.0);
  }
}

TEST_F(Ulysses, AWorldLargerThanTheRequestIsRefused) {
  Status too_few_rows = check_sequence_parallel(ModelConfig::h3(), 8, 5);
  ASSERT_FALSE(too_few_rows.ok());
  EXPECT_NE(too_few_rows.message().find("at least one packed row per rank"), std::string::npos);
  EXPECT_TRUE(check_sequence_parallel(ModelConfig::h3(), 3, 37810).ok()) << "56 heads over 3 ranks: uneven 18/19/19";
}

}  // namespace
}  // namespace vortex
