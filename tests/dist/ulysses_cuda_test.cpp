// Ulysses on one GPU with U ranks as threads (label gpu): each rank has its own CudaBackend (stream,
// cuBLASLt, cuDNN) on device 0 and the in-process world moves bytes with cudaMemcpy, so the whole
// sequence-parallel program runs on the GPU (shard GEMMs on S/U rows, uneven head splits in cuDNN SDPA)
// without NCCL. h3-tiny sampled through Pipeline with U = 2, 4 and 7 must give the plain CUDA path's
// latent bytes on every rank. Skips visibly without a CUDA device.
#include <gtest/gtest.h>

#include <cuda_runtime.h>
#include <unistd.h>

#include <filesystem>
#include <random>

#include "cuda/check.h"
#include "cuda/cuda_backend.h"
#include "dist/in_process.h"
#include "engine/pipeline.h"
#include "engine/run_manifest.h"
#include "synced_communicator.h"

namespace vortex {
namespace {

namespace fs = std::filesystem;

uint64_t fresh_seed() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

struct Digest {
  std::string video, audio;
};

Result<Digest> generate_cuda(Communicator* comm, uint64_t weights_seed, uint64_t seed, const std::string& dir) {
  ProgressSink quiet;
  PipelineOptions o;
  o.config_name = "h3-tiny";
  o.synthetic_weights = true;
  o.weights_seed = weights_seed;
  o.backend = BackendKind::kCuda;
  VORTEX_ASSIGN_OR_RETURN(std::unique_ptr<Pipeline> p, Pipeline::load(o, quiet));
  std::unique_ptr<testing::SyncedCommunicator> synced;
  if (comm) synced = std::make_unique<testing::SyncedCommunicator>(*comm, p->backend());
  p->model().set_communicator(synced.get());
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

TEST(UlyssesCuda, URankThreadsOnOneGpuGiveThePlainCudaBytes) {
  {
    auto probe = CudaBackend::create(0);
    if (!probe.ok()) GTEST_SKIP() << "no usable CUDA device: " << probe.status().message();
  }
  const fs::path root = fs::temp_directory_path() / ("vortex_ulysses_cuda_" + std::to_string(::getpid()));
  const uint64_t weights_seed = fresh_seed(), seed = fresh_seed();
  auto plain = generate_cuda(nullptr, weights_seed, seed, (root / "plain").string());
  ASSERT_TRUE(plain.ok()) << plain.status().to_string();
  InProcessMemory gpu;
  gpu.device = Device::kCuda;
  gpu.copy = [](void* dst, const void* src, size_t bytes) -> Status {
    VORTEX_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice));
    return Status::Ok();
  };
  for (int u : {2, 4, 7}) {
    std::vector<Digest> got(static_cast<size_t>(u));
    CommOptions opts;
    opts.timeout = std::chrono::seconds(120);
    Status st = run_in_process_ranks(
        u, opts,
        [&](Communicator& c) -> Status {
          std::string name = "u";  // (appends: GCC 12 warns -Wrestrict on chained std::string +)
          name.append(std::to_string(u)).append("_r").append(std::to_string(c.rank()));
          VORTEX_ASSIGN_OR_RETURN(got[static_cast<size_t>(c.rank())],
                                  generate_cuda(&c, weights_seed, seed, (root / name).string()));
          return Status::Ok();
        },
        gpu);
    ASSERT_TRUE(st.ok()) << "U=" << u << ": " << st.to_string();
    for (int r = 0; r < u; ++r) {
      EXPECT_EQ(got[r].video, plain->video) << "U=" << u << " rank " << r << " seeds " << weights_seed << "/" << seed;
      EXPECT_EQ(got[r].audio, plain->audio) << "U=" << u << " rank " << r << " seeds " << weights_seed << "/" << seed;
    }
    std::printf(
        "CUDA, U=%d threads on one GPU: latents SHA-256 %s on every rank\n", u,
        got[0].video == plain->video && got[0].audio == plain->audio ? "equal to the plain path's" : "DIFFERENT");
  }
  std::error_code ec;
  fs::remove_all(root, ec);
}

}  // namespace
}  // namespace vortex
