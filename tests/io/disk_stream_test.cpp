// Streaming from disk (docs/memory.md "Streaming from disk") on the CPU reference backend, h3-tiny with five blocks
// in a ComfyUI-layout checkpoint: DirectFileReader returns a file's bytes at unaligned offsets (direct reads where the
// filesystem allows them, buffered on tmpfs) and names what is wrong; load_checkpoint leaves the wanted weights in
// the file and refuses what it must convert; a model whose streamed blocks and AdaLN projections are read from the
// file gives the resident model's trajectory bytes, reads them from the file at every step (rewriting the file
// changes the next step), and holds two staging blocks, not all of them.
#include "io/direct_reader.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <random>

#include "engine/host_weight_fill.h"
#include "io/checkpoint.h"
#include "io/synth_checkpoint.h"
#include "io/test_files.h"
#include "model/h3_model.h"
#include "model/h3_spec.h"
#include "model/random_inputs.h"
#include "ref/cpu_backend.h"
#include "sampler/sampler.h"

namespace vortex {
namespace {

using testing::fresh_seed;

std::string random_bytes(std::mt19937_64& rng, size_t n) {
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

// Directories for test files: the test's temp dir (a disk here, O_DIRECT), and /dev/shm (tmpfs: buffered) if any.
std::vector<std::string> test_dirs(const std::string& tmp) {
  std::vector<std::string> dirs{tmp};
  struct stat st {};
  if (::stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) && ::access("/dev/shm", W_OK) == 0)
    dirs.push_back("/dev/shm");
  return dirs;
}

std::string range_name(size_t i) {
  std::string name = std::to_string(i);
  name.insert(name.begin(), 't');
  return name;
}

TEST(DirectFileReader, ReadsUnalignedRangesAndNamesErrors) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const std::string tmp = testing::make_temp_dir();
  for (const std::string& dir : test_dirs(tmp)) {
    SCOPED_TRACE(dir);
    const std::string path = dir + "/vortex_direct_" + std::to_string(::getpid()) + ".bin";
    // Larger than one read chunk, so ranges cross chunk boundaries.
    const std::string bytes = random_bytes(rng, DirectFileReader::kChunkBytes + 3 * DirectFileReader::kAlignment + 77);
    testing::write_file_bytes(path, bytes);
    std::map<std::string, FileExtent> extents;
    const uint64_t ranges[][2] = {{0, 1},
                                  {1, 4095},
                                  {4095, 2},
                                  {4096, 4096},
                                  {12345, DirectFileReader::kChunkBytes + 1},
                                  {bytes.size() - 5, 5},
                                  {0, bytes.size()}};
    for (size_t i = 0; i < std::size(ranges); ++i)
      extents[range_name(i)] = FileExtent{path, ranges[i][0], ranges[i][1]};
    extents["past_end"] = FileExtent{path, bytes.size() - 10, 20};
    DirectFileReader reader(extents);
    uint64_t total = 0;
    for (size_t i = 0; i < std::size(ranges); ++i) {
      Tensor dst = Tensor::empty({static_cast<int64_t>(ranges[i][1])}, DType::kU8);
      std::memset(dst.raw_data(), 0xA5, dst.nbytes());  // poison
      ASSERT_TRUE(reader.read(range_name(i), dst).ok()) << i;
      EXPECT_EQ(std::memcmp(dst.raw_data(), bytes.data() + ranges[i][0], ranges[i][1]), 0) << "range " << i;
      total += ranges[i][1];
    }
    EXPECT_EQ(reader.bytes_read(), total);
    Tensor small = Tensor::empty({20}, DType::kU8);
    const Status past = reader.read("past_end", small);
    EXPECT_EQ(past.code(), ErrorCode::kIo);
    EXPECT_NE(past.message().find(path), std::string::npos) << past.message();
    EXPECT_EQ(reader.read("absent", small).code(), ErrorCode::kNotFound);
    Tensor wrong = Tensor::empty({3}, DType::kU8);
    EXPECT_EQ(reader.read("t0", wrong).code(), ErrorCode::kInvalidArgument);
    ::unlink(path.c_str());
  }
  DirectFileReader missing({{"x", FileExtent{tmp + "/no_such_file", 0, 4}}});
  Tensor four = Tensor::empty({4}, DType::kU8);
  EXPECT_EQ(missing.read("x", four).code(), ErrorCode::kIo);
  testing::remove_tree(tmp);
}

struct Request {
  ModelConfig cfg;
  PackedLayout layout;
  Tensor text;  // host [L, text_dim] f32
  AvLatents noise;
  SamplerSpec spec;
};

Request make_request(const ModelConfig& cfg, uint64_t seed, int steps) {
  Request r;
  r.cfg = cfg;
  RequestGeometry g = make_geometry(cfg, 64, 64, 5, 6).value();
  r.layout = pack_request(cfg, g).value();
  testing::random_request_inputs(cfg, g, 6, seed, r.text, r.noise);
  r.spec.steps = steps;
  return r;
}

Result<AvLatents> sample(H3Model& model, const Request& r, int* evaluations = nullptr) {
  DenoiseFn denoise = [&model, evaluations](const AvLatents& x, double sv, double sa, int) {
    if (evaluations != nullptr) ++*evaluations;
    return model.forward(x, sv, sa);
  };
  return sample_av(r.spec, r.noise, denoise);
}

bool same_bytes(const AvLatents& a, const AvLatents& b) {
  return a.video.size() == b.video.size() && a.audio.size() == b.audio.size() &&
         std::memcmp(a.video.data(), b.video.data(), a.video.size() * 4) == 0 &&
         std::memcmp(a.audio.data(), b.audio.data(), a.audio.size() * 4) == 0;
}

bool streamed_gemm(const std::string& name, int first) {
  if (name.rfind("blocks.", 0) != 0 || std::atoi(name.c_str() + 7) < first) return false;
  for (const char* s : {".attn.qkv_proj.weight", ".attn.out_proj.weight", ".mlp.fc1.weight", ".mlp.fc2.weight"})
    if (name.size() > std::strlen(s) && name.compare(name.size() - std::strlen(s), std::strlen(s), s) == 0) return true;
  return false;
}

bool block_adaln(const std::string& name) {
  return name.rfind("blocks.", 0) == 0 && name.find(".adaln_proj.linear.weight") != std::string::npos;
}

uint64_t rss_bytes() {
  std::ifstream in("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  in >> size >> resident;
  return resident * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
}

class DiskStream : public ::testing::Test {
 protected:
  void SetUp() override {
    seed_ = fresh_seed();
    cfg_ = ModelConfig::h3_tiny();
    cfg_.num_layers = 5;  // three streamed blocks rotate through the two slots and staging sets
    dir_ = testing::make_temp_dir();
    path_ = write_file(CheckpointLayout::kComfy, "model");  // [q|k|v] rows: the stored bytes are the loaded bytes
    ASSERT_FALSE(path_.empty());
  }
  void TearDown() override { testing::remove_tree(dir_); }
  // The seed's weights in `layout` as dir_/<name>.safetensors; "" on failure.
  std::string write_file(CheckpointLayout layout, const std::string& name) const {
    SynthCheckpointOptions opt;
    opt.config = cfg_;
    opt.out = dir_ + "/" + name + ".safetensors";
    opt.seed = seed_;
    opt.layout = layout;
    Result<std::vector<std::string>> written = write_synthetic_checkpoint(opt);
    EXPECT_TRUE(written.ok()) << written.status().to_string();
    return written.ok() ? opt.out : "";
  }
  // The same weights in the original layout (per-head-interleaved QKV rows).
  std::string write_original() const { return write_file(CheckpointLayout::kOriginal, "original"); }

  uint64_t seed_ = 0;
  ModelConfig cfg_;
  std::string dir_, path_;
};

TEST_F(DiskStream, TrajectoryBytesEqualTheResidentModelAndComeFromTheFile) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  const Request r = make_request(cfg_, seed_ ^ 0x5eed, 3);
  CpuBackend be(2);
  const int first = 2;

  Result<H3Weights> resident_w = load_checkpoint(path_, cfg_, be);
  ASSERT_TRUE(resident_w.ok()) << resident_w.status().to_string();
  H3Model resident(cfg_, be, std::move(*resident_w), ExecOptions{});
  ASSERT_TRUE(resident.prepare(r.layout, r.text).ok());
  Result<AvLatents> want = sample(resident, r);
  ASSERT_TRUE(want.ok()) << want.status().to_string();

  DeferredWeights deferred;
  deferred.wanted = [&](const std::string& n) { return streamed_gemm(n, first) || block_adaln(n); };
  Result<H3Weights> w = load_checkpoint(path_, cfg_, be, CheckpointLayout::kAuto, nullptr, &deferred);
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  EXPECT_TRUE(deferred.refused.empty());
  ASSERT_EQ(deferred.extents.size(), static_cast<size_t>(4 * (cfg_.num_layers - first) + cfg_.num_layers));
  uint64_t streamed_bytes = 0, adaln_bytes = 0;
  for (const auto& [name, e] : deferred.extents) {
    EXPECT_EQ(e.path, path_);
    (block_adaln(name) ? adaln_bytes : streamed_bytes) += e.bytes;
  }
  auto reader = std::make_shared<DirectFileReader>(deferred.extents);
  H3Model model(cfg_, be, std::move(*w), ExecOptions{});
  ASSERT_TRUE(model.stream_blocks(first, reader).ok());
  ASSERT_TRUE(model.place_adaln_weights(AdalnWeightPlace::kDisk, reader).ok());
  EXPECT_TRUE(model.streams_from_disk());
  EXPECT_EQ(model.adaln_weight_place(), AdalnWeightPlace::kDisk);  // run.json's request.adaln_weights: "disk"
  EXPECT_STREQ(adaln_weight_place_name(model.adaln_weight_place()), "disk");
  EXPECT_EQ(resident.adaln_weight_place(), AdalnWeightPlace::kDevice);
  // Host memory holds two staging sets: blocks two apart share one.
  const auto& b = model.weights().blocks;
  EXPECT_EQ(b[2].mlp_fc1.weight.raw_data(), b[4].mlp_fc1.weight.raw_data());
  EXPECT_NE(b[2].mlp_fc1.weight.raw_data(), b[3].mlp_fc1.weight.raw_data());
  EXPECT_EQ(b[0].adaln_proj_linear_weight.raw_data(), b[2].adaln_proj_linear_weight.raw_data());
  EXPECT_NE(b[0].mlp_fc1.weight.raw_data(), b[2].mlp_fc1.weight.raw_data());  // resident

  ASSERT_TRUE(model.prepare(r.layout, r.text).ok());
  const uint64_t rss_before = rss_bytes();
  int evals = 0;
  Result<AvLatents> got = sample(model, r, &evals);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_TRUE(same_bytes(*want, *got));
  // The tables: one pass over the projections per evaluation (no precomputed entries here: each step computes its
  // own from the file). Blocks 2, 3, 4 rotate through two slots: the first evaluation reads all three, each later one
  // blocks 2 and 4 (block 3 is still in its slot).
  ASSERT_GE(evals, 2);
  const uint64_t block = streamed_bytes / 3;
  EXPECT_EQ(reader->bytes_read(),
            static_cast<uint64_t>(evals) * adaln_bytes + 3 * block + static_cast<uint64_t>(evals - 1) * 2 * block);
  // Loose: sampling from disk grows the process by far less than the model (it holds two staging blocks).
  const uint64_t rss_after = rss_bytes();
  EXPECT_LT(rss_after, rss_before + static_cast<uint64_t>(h3_total_bytes(cfg_)) + (64ull << 20));

  // Tables ahead of sampling (precompute_adaln): each projection is read once for the whole schedule.
  (void)model.mutable_weights();  // drops the entries the first trajectory computed
  const AvSchedule schedule = make_av_schedule(r.spec).value();
  std::vector<std::pair<double, double>> pairs;
  for (int i = 0; i < r.spec.steps; ++i) pairs.emplace_back(schedule.sigma_video[i], schedule.sigma_audio[i]);
  const uint64_t before_tables = reader->bytes_read();
  ASSERT_TRUE(model.precompute_adaln(pairs).ok());
  EXPECT_EQ(reader->bytes_read() - before_tables, adaln_bytes);
  // Reads go to the file every step: rewriting block 4's fc2 in the file changes the next evaluation.
  Result<AvLatents> again = sample(model, r);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(same_bytes(*want, *again));
  {
    const FileExtent& e = deferred.extents.at("blocks.4.mlp.fc2.weight");
    std::fstream f(path_, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(e.offset));
    const std::string junk(e.bytes, '\x3c');  // bf16 0x3c3c: a finite, different weight
    f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  }
  Result<AvLatents> changed = sample(model, r);
  ASSERT_TRUE(changed.ok());
  EXPECT_FALSE(same_bytes(*want, *changed));
}

TEST_F(DiskStream, ConvertedWeightsAreRefusedAndPlacementsChecked) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  CpuBackend be(1);
  // A per-head-interleaved (original layout) file stores QKV otherwise than the model reads it.
  const std::string original = write_original();
  ASSERT_FALSE(original.empty());
  DeferredWeights deferred;
  deferred.wanted = [](const std::string& n) { return streamed_gemm(n, 3); };
  Result<H3Weights> w = load_checkpoint(original, cfg_, be, CheckpointLayout::kAuto, nullptr, &deferred);
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  ASSERT_EQ(deferred.refused.size(), 2u);  // blocks 3 and 4's qkv_proj
  EXPECT_NE(deferred.refused[0].find("qkv_proj"), std::string::npos) << deferred.refused[0];
  EXPECT_EQ(deferred.extents.size(), 6u);  // out_proj, fc1, fc2 of blocks 3 and 4

  Result<H3Weights> plain = load_checkpoint(path_, cfg_, be);
  ASSERT_TRUE(plain.ok());
  H3Model model(cfg_, be, std::move(*plain), ExecOptions{});
  EXPECT_EQ(model.place_adaln_weights(AdalnWeightPlace::kDisk, nullptr).code(), ErrorCode::kInvalidArgument);
}

// HostWeightFill (the AdaLN projections read straight into host memory beside the load): the loaded bytes, on a
// thread or not; checkpoint_extents refuses weights a file stores otherwise than the model reads them.
TEST_F(DiskStream, HostWeightFillReadsTheLoadedBytes) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  CpuBackend be(1);
  Result<H3Weights> plain = load_checkpoint(path_, cfg_, be);
  ASSERT_TRUE(plain.ok()) << plain.status().to_string();
  for (bool threaded : {false, true}) {
    Result<std::unique_ptr<HostWeightFill>> fill = HostWeightFill::start(be, path_, cfg_, block_adaln, threaded);
    ASSERT_TRUE(fill.ok()) << fill.status().to_string();
    Result<std::map<std::string, Tensor>> host = (*fill)->finish();
    ASSERT_TRUE(host.ok()) << host.status().to_string();
    ASSERT_EQ(host->size(), static_cast<size_t>(cfg_.num_layers));
    for (int i = 0; i < cfg_.num_layers; ++i) {
      const Tensor& want = plain->blocks[static_cast<size_t>(i)].adaln_proj_linear_weight;
      const Tensor& got = host->at("blocks." + std::to_string(i) + ".adaln_proj.linear.weight");
      ASSERT_EQ(got.shape(), want.shape());
      EXPECT_EQ(std::memcmp(got.raw_data(), want.raw_data(), want.nbytes()), 0) << "block " << i << " " << threaded;
    }
    EXPECT_EQ((*fill)->finish().status().code(), ErrorCode::kInternal);  // once
  }
  const std::string original = write_original();
  ASSERT_FALSE(original.empty());
  auto qkv = [](const std::string& n) { return n == "blocks.1.attn.qkv_proj.weight"; };
  const Status refused = checkpoint_extents(original, cfg_, qkv).status();
  EXPECT_EQ(refused.code(), ErrorCode::kUnsupported);
  EXPECT_NE(refused.message().find("interleaved"), std::string::npos) << refused.message();
  EXPECT_TRUE(checkpoint_extents(original, cfg_, block_adaln).ok());  // stored as read
}

}  // namespace
}  // namespace vortex
