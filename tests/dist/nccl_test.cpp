// NCCL on one GPU (label gpu): a world of size 1 runs every collective (fresh random bytes, poisoned
// receive buffers), and h3-tiny sampled through Pipeline on --backend cuda with Ulysses over that world
// (the pack -> all-to-all -> unpack path, exchanging with itself) gives the same latent bytes as the
// plain CUDA path. Skips visibly without a CUDA device or without a loadable NCCL.
#include <gtest/gtest.h>

#include <cuda_runtime.h>
#include <unistd.h>

#include <filesystem>
#include <random>

#include "cuda/cuda_backend.h"
#include "dist/nccl.h"
#include "engine/pipeline.h"
#include "engine/run_manifest.h"
#include "gpu_test.h"

namespace vortex {
namespace {

namespace fs = std::filesystem;

uint64_t fresh_seed() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

#define VORTEX_REQUIRE_CUDA_AND_NCCL(backend)   \
  do {                                          \
    auto b_ = CudaBackend::create(0);           \
    VORTEX_SKIP_NO_GPU_OR_FAIL(b_.status());    \
    backend = std::move(b_).value();            \
    Status n_ = nccl_load();                    \
    if (!n_.ok()) GTEST_SKIP() << n_.message(); \
  } while (0)

Tensor random_host(int64_t n, uint64_t seed) {
  Tensor t = Tensor::empty({n}, DType::kU8);
  std::mt19937_64 rng(seed);
  for (int64_t i = 0; i < n; ++i) t.data<uint8_t>()[i] = static_cast<uint8_t>(rng());
  return t;
}

Tensor poisoned(CudaBackend& be, int64_t n) {
  Tensor t = be.alloc({n}, DType::kU8).value();
  EXPECT_EQ(cudaMemset(t.raw_data(), 0xFF, static_cast<size_t>(n)), cudaSuccess);
  return t;
}

bool same_bytes(CudaBackend& be, const Tensor& dev, const Tensor& host) {
  Tensor back = Tensor::empty(host.shape(), host.dtype());
  if (!be.download(dev, back).ok()) return false;
  return std::memcmp(back.raw_data(), host.raw_data(), host.nbytes()) == 0;
}

TEST(Nccl, AWorldOfOneRunsEveryCollective) {
  std::unique_ptr<CudaBackend> be;
  VORTEX_REQUIRE_CUDA_AND_NCCL(be);
  auto version = nccl_version();
  ASSERT_TRUE(version.ok()) << version.status().to_string();
  std::printf("NCCL %s\n", version->c_str());
  auto id = nccl_unique_id();
  ASSERT_TRUE(id.ok()) << id.status().to_string();
  CommOptions opts;
  opts.timeout = std::chrono::seconds(60);
  auto comm = make_nccl_communicator(*id, 0, 1, be->stream(), opts);
  ASSERT_TRUE(comm.ok()) << comm.status().to_string();
  Communicator& c = **comm;
  EXPECT_EQ(c.size(), 1);
  EXPECT_STREQ(std::getenv("NCCL_NVLS_ENABLE"), "0");
  const uint64_t seed = fresh_seed();
  Tensor host = random_host(1 << 20, seed);
  Tensor src = be->upload(host).value();
  Tensor dst = poisoned(*be, host.numel());
  ASSERT_TRUE(c.all_to_all({src}, {dst}).ok());
  EXPECT_TRUE(same_bytes(*be, dst, host)) << "all_to_all, seed " << seed;
  Tensor dst2 = poisoned(*be, host.numel());
  ASSERT_TRUE(c.all_gather(src, {dst2}).ok());
  EXPECT_TRUE(same_bytes(*be, dst2, host)) << "all_gather, seed " << seed;
  ASSERT_TRUE(c.broadcast(src, 0).ok());
  EXPECT_TRUE(same_bytes(*be, src, host)) << "broadcast, seed " << seed;
  ASSERT_TRUE(c.barrier().ok());
  Status bad = c.broadcast(src, 1);
  EXPECT_FALSE(bad.ok());
  Status host_tensor = c.all_gather(host, {dst2});
  ASSERT_FALSE(host_tensor.ok());
  EXPECT_NE(host_tensor.message().find("communicator works on cuda"), std::string::npos) << host_tensor.message();
}

struct Digest {
  std::string video, audio;
};

Result<Digest> tiny_generate(Communicator* comm, uint64_t weights_seed, uint64_t seed, const std::string& dir) {
  ProgressSink quiet;
  PipelineOptions o;
  o.config_name = "h3-tiny";
  o.synthetic_weights = true;
  o.weights_seed = weights_seed;
  o.backend = BackendKind::kCuda;
  VORTEX_ASSIGN_OR_RETURN(std::unique_ptr<Pipeline> p, Pipeline::load(o, quiet));
  p->model().set_communicator(comm);
  RunRequest r;
  r.width = 128;
  r.height = 64;
  r.frames = 22;
  r.steps = 3;
  r.seed = seed;
  VORTEX_ASSIGN_OR_RETURN(RunPlan plan, p->plan(r, quiet, FieldStyle::kFlag));
  fs::create_directories(dir);
  CancelToken never;
  VORTEX_RETURN_IF_ERROR(p->run(plan, quiet, never, dir).status());
  Digest d;
  VORTEX_ASSIGN_OR_RETURN(d.video, sha256_file(dir + "/video_latents.safetensors"));
  VORTEX_ASSIGN_OR_RETURN(d.audio, sha256_file(dir + "/audio_latents.safetensors"));
  return d;
}

TEST(Nccl, UlyssesOverAWorldOfOneGivesThePlainCudaBytes) {
  std::unique_ptr<CudaBackend> probe;
  VORTEX_REQUIRE_CUDA_AND_NCCL(probe);
  const fs::path root = fs::temp_directory_path() / ("vortex_nccl_" + std::to_string(::getpid()));
  const uint64_t weights_seed = fresh_seed(), seed = fresh_seed();
  auto plain = tiny_generate(nullptr, weights_seed, seed, (root / "plain").string());
  ASSERT_TRUE(plain.ok()) << plain.status().to_string();
  // The pipeline's backend owns the stream the communicator must use: build it inside the run.
  ProgressSink quiet;
  PipelineOptions o;
  o.config_name = "h3-tiny";
  o.synthetic_weights = true;
  o.weights_seed = weights_seed;
  o.backend = BackendKind::kCuda;
  auto p = Pipeline::load(o, quiet);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  auto* cuda = dynamic_cast<CudaBackend*>(&(*p)->backend());
  ASSERT_NE(cuda, nullptr);
  auto id = nccl_unique_id();
  ASSERT_TRUE(id.ok());
  auto comm = make_nccl_communicator(*id, 0, 1, cuda->stream(), CommOptions{});
  ASSERT_TRUE(comm.ok()) << comm.status().to_string();
  (*p)->model().set_communicator(comm->get());
  RunRequest r;
  r.width = 128;
  r.height = 64;
  r.frames = 22;
  r.steps = 3;
  r.seed = seed;
  auto plan = (*p)->plan(r, quiet, FieldStyle::kFlag);
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  const std::string dir = (root / "sp1").string();
  fs::create_directories(dir);
  CancelToken never;
  auto ran = (*p)->run(*plan, quiet, never, dir);
  ASSERT_TRUE(ran.ok()) << ran.status().to_string();
  EXPECT_EQ(sha256_file(dir + "/video_latents.safetensors").value(), plain->video)
      << "seeds " << weights_seed << "/" << seed;
  EXPECT_EQ(sha256_file(dir + "/audio_latents.safetensors").value(), plain->audio)
      << "seeds " << weights_seed << "/" << seed;
  std::error_code ec;
  fs::remove_all(root, ec);
}

}  // namespace
}  // namespace vortex
