// The direct-read loader (io/direct_upload.h) on the CPU reference backend: DirectUploader returns a file's bytes at
// unaligned offsets across its staging chunks and names a short file; load_checkpoint's weights read with direct
// reads equal those read through the mapping byte for byte (h3-tiny, ComfyUI layout, sharded too), it falls back to
// the mapping where O_DIRECT is refused (tmpfs before Linux 6.6) or QKV rows must be reordered and says why, reports
// each tensor in spec order with the bytes placed, stops at a hook's error (a cancel mid-load), and finds a NaN in any
// chunk on the way through host memory, naming the tensor and element.
#include "io/direct_upload.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>
#include <random>

#include "io/checkpoint.h"
#include "io/synth_checkpoint.h"
#include "io/test_files.h"
#include "model/h3_spec.h"
#include "ref/cpu_backend.h"
#include "seed.h"

namespace vortex {
namespace {

using testing::fresh_seed;

bool has_shm() {
  struct stat st {};
  return ::stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) && ::access("/dev/shm", W_OK) == 0;
}

std::string random_bytes(std::mt19937_64& rng, size_t n) {
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

TEST(DirectUploader, UnalignedRangesAcrossChunksEqualTheFile) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const std::string tmp = testing::make_temp_dir();
  const std::string path = tmp + "/bytes.bin";
  const uint64_t chunk = 4 * DirectUploader::kAlignment;  // small chunks: every range crosses several
  const std::string bytes = random_bytes(rng, 10 * chunk + 123);
  testing::write_file_bytes(path, bytes);
  CpuBackend be(1);
  DirectUploader up(be, chunk);
  if (!up.direct(path)) GTEST_SKIP() << "the test's temp dir " << tmp << " refuses O_DIRECT";
  const uint64_t ranges[][2] = {{0, 1},           {1, 4095}, {4095, 2}, {12345, 3 * chunk + 1}, {bytes.size() - 5, 5},
                                {0, bytes.size()}};
  for (const auto& r : ranges) {
    Result<Tensor> t = up.load(FileExtent{path, r[0], r[1]}, {static_cast<int64_t>(r[1])}, DType::kU8);
    ASSERT_TRUE(t.ok()) << t.status().to_string();
    ASSERT_TRUE(up.finish().ok());
    EXPECT_EQ(std::memcmp(t->raw_data(), bytes.data() + r[0], r[1]), 0) << r[0] << "+" << r[1];
  }
  Result<Tensor> past = up.load(FileExtent{path, bytes.size() - 10, 20}, {20}, DType::kU8);
  ASSERT_FALSE(past.ok());
  EXPECT_EQ(past.status().code(), ErrorCode::kIo);
  EXPECT_NE(past.status().message().find(path), std::string::npos) << past.status().message();
  EXPECT_FALSE(up.direct(tmp + "/no_such_file"));
  if (has_shm()) {  // tmpfs: O_DIRECT since Linux 6.6; where it is refused, load() refuses too (the caller maps it)
    const std::string shm = "/dev/shm/vortex_direct_upload_" + std::to_string(::getpid()) + ".bin";
    testing::write_file_bytes(shm, "0123456789");
    Result<Tensor> t = up.load(FileExtent{shm, 3, 4}, {4}, DType::kU8);
    if (up.direct(shm)) {
      ASSERT_TRUE(t.ok()) << t.status().to_string();
      ASSERT_TRUE(up.finish().ok());
      EXPECT_EQ(std::string(static_cast<const char*>(t->raw_data()), 4), "3456");
    } else {
      EXPECT_FALSE(t.ok());
    }
    ::unlink(shm.c_str());
  }
  testing::remove_tree(tmp);
}

TEST(DirectUploader, FindsANonFiniteValueInAnyChunkAndNamesItsElement) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const std::string tmp = testing::make_temp_dir();
  const std::string path = tmp + "/bf16.bin";
  const uint64_t chunk = 2 * DirectUploader::kAlignment;
  const int64_t n = 5 * static_cast<int64_t>(chunk) / 2 + 321;  // BF16 elements: several chunks
  std::string bytes(static_cast<size_t>(2 * n + 6), '\0');      // 6 leading bytes: the tensor starts unaligned
  for (int64_t i = 0; i < n; ++i) {
    const auto v = static_cast<uint16_t>(rng() & 0xBF7F);  // exponent never all ones: finite
    std::memcpy(&bytes[static_cast<size_t>(6 + 2 * i)], &v, 2);
  }
  testing::write_file_bytes(path, bytes);
  CpuBackend be(1);
  DirectUploader up(be, chunk);
  if (!up.direct(path)) GTEST_SKIP() << "the test's temp dir " << tmp << " refuses O_DIRECT";
  const FileExtent e{path, 6, static_cast<uint64_t>(2 * n)};
  bool scanned = false;
  Result<Tensor> clean = up.load(e, {n}, DType::kBF16, "w", &scanned);
  ASSERT_TRUE(clean.ok()) << clean.status().to_string();
  ASSERT_TRUE(up.finish().ok());
  EXPECT_TRUE(scanned);
  EXPECT_EQ(std::memcmp(clean->raw_data(), bytes.data() + 6, bytes.size() - 6), 0);
  const int64_t at = n - 1 - static_cast<int64_t>(rng() % static_cast<uint64_t>(n / 2));  // a later chunk
  const uint16_t nan = 0x7FC1;
  std::memcpy(&bytes[static_cast<size_t>(6 + 2 * at)], &nan, 2);
  testing::write_file_bytes(path, bytes);
  DirectUploader again(be, chunk);
  Result<Tensor> bad = again.load(e, {n}, DType::kBF16, "blocks.3.mlp.fc1.weight", &scanned);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), ErrorCode::kFormat);
  for (const std::string& want : {std::string("tensor 'blocks.3.mlp.fc1.weight'"), path,
                                  "non-finite value (NaN or Inf) at element " + std::to_string(at)})
    EXPECT_NE(bad.status().message().find(want), std::string::npos) << bad.status().message();
  // Unchecked without `scanned`; an odd start (elements across chunk starts) is not checked here and says so.
  DirectUploader plain(be, chunk);
  EXPECT_TRUE(plain.load(e, {n}, DType::kBF16).ok());
  EXPECT_TRUE(plain.load(FileExtent{path, 7, 4}, {2}, DType::kBF16, "odd", &scanned).ok());
  EXPECT_FALSE(scanned);
  testing::remove_tree(tmp);
}

class DirectLoad : public ::testing::Test {
 protected:
  void SetUp() override {
    seed_ = fresh_seed();
    cfg_ = ModelConfig::h3_tiny();
    dir_ = testing::make_temp_dir();
  }
  void TearDown() override { testing::remove_tree(dir_); }
  std::string write(const std::string& dir, CheckpointLayout layout, const std::string& out, double shard_gb = 0) {
    SynthCheckpointOptions opt;
    opt.config = cfg_;
    opt.out = dir + "/" + out;
    opt.seed = seed_;
    opt.layout = layout;
    opt.shard_size_gb = shard_gb;
    Result<std::vector<std::string>> written = write_synthetic_checkpoint(opt);
    EXPECT_TRUE(written.ok()) << written.status().to_string();
    return opt.out;
  }
  // Loads `path` with and without direct reads and compares every tensor's bytes; returns the direct load's hooks.
  CheckpointLoadHooks compare(const std::string& path) {
    CpuBackend be(2);
    CheckpointLoadHooks mapped_hooks;
    mapped_hooks.direct_reads = false;
    Result<H3Weights> mapped =
        load_checkpoint(path, cfg_, be, CheckpointLayout::kAuto, nullptr, nullptr, &mapped_hooks);
    EXPECT_TRUE(mapped.ok()) << mapped.status().to_string();
    CheckpointLoadHooks hooks;
    Result<H3Weights> direct = load_checkpoint(path, cfg_, be, CheckpointLayout::kAuto, nullptr, nullptr, &hooks);
    EXPECT_TRUE(direct.ok()) << direct.status().to_string();
    if (!mapped.ok() || !direct.ok()) return hooks;
    EXPECT_EQ(mapped_hooks.direct_bytes, 0u);
    EXPECT_EQ(mapped_hooks.mapped_reason, "direct reads are off");
    EXPECT_EQ(hooks.direct_bytes + hooks.mapped_bytes, mapped_hooks.mapped_bytes);
    auto a = h3_tensor_slots(*mapped);
    auto b = h3_tensor_slots(*direct);
    EXPECT_EQ(a.size(), b.size());
    size_t compared = 0;
    for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
      const Tensor& x = *a[i].second;
      const Tensor& y = *b[i].second;
      if (!x.defined()) continue;
      EXPECT_TRUE(y.defined()) << a[i].first;
      EXPECT_EQ(x.nbytes(), y.nbytes()) << a[i].first;
      if (!y.defined() || x.nbytes() != y.nbytes()) continue;
      EXPECT_EQ(x.dtype(), y.dtype()) << a[i].first;
      EXPECT_EQ(x.shape(), y.shape()) << a[i].first;
      EXPECT_EQ(std::memcmp(x.raw_data(), y.raw_data(), x.nbytes()), 0) << a[i].first;
      ++compared;
    }
    EXPECT_GT(compared, 10u);
    return hooks;
  }
  uint64_t seed_ = 0;
  ModelConfig cfg_;
  std::string dir_;
};

TEST_F(DirectLoad, DirectReadsEqualTheMappingsBytes) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  const std::string path = write(dir_, CheckpointLayout::kComfy, "model.safetensors");
  CpuBackend probe_backend(1);
  if (!DirectUploader(probe_backend).direct(path)) GTEST_SKIP() << "the test's temp dir refuses O_DIRECT";
  const CheckpointLoadHooks hooks = compare(path);
  EXPECT_GT(hooks.direct_bytes, 0u);
  EXPECT_EQ(hooks.mapped_bytes, 0u) << hooks.mapped_reason;
  // Sharded: each shard is its own file.
  const CheckpointLoadHooks sharded =
      compare(write(dir_, CheckpointLayout::kComfy, "s.safetensors.index.json", 0.0005));
  EXPECT_GT(sharded.direct_bytes, 0u);
  EXPECT_EQ(sharded.mapped_bytes, 0u) << sharded.mapped_reason;
}

TEST_F(DirectLoad, FallsBackToTheMappingAndSaysWhy) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  // Per-head-interleaved QKV rows are reordered on the host: those go through the mapping, the rest is direct.
  const CheckpointLoadHooks original = compare(write(dir_, CheckpointLayout::kOriginal, "original.safetensors"));
  EXPECT_GT(original.mapped_bytes, 0u);
  EXPECT_NE(original.mapped_reason.find("interleaved"), std::string::npos) << original.mapped_reason;
  const std::string line = describe_checkpoint_load(original, 2.0);
  EXPECT_NE(line.find("with direct reads"), std::string::npos) << line;
  EXPECT_NE(line.find("through the file mapping (" + original.mapped_reason + ")"), std::string::npos) << line;
  if (!has_shm()) GTEST_SKIP() << "no writable /dev/shm (tmpfs) here";
  const std::string shm = "/dev/shm/vortex_direct_load_" + std::to_string(::getpid());
  ASSERT_EQ(::mkdir(shm.c_str(), 0700), 0);
  const std::string path = write(shm, CheckpointLayout::kComfy, "model.safetensors");
  CpuBackend probe(1);
  const bool direct = DirectUploader(probe).direct(path);  // tmpfs takes O_DIRECT since Linux 6.6
  const CheckpointLoadHooks tmpfs = compare(path);
  testing::remove_tree(shm);
  if (direct) {
    EXPECT_EQ(tmpfs.mapped_bytes, 0u) << tmpfs.mapped_reason;
  } else {
    EXPECT_EQ(tmpfs.direct_bytes, 0u);
    EXPECT_NE(tmpfs.mapped_reason.find("refuses O_DIRECT"), std::string::npos) << tmpfs.mapped_reason;
  }
}

TEST_F(DirectLoad, ChecksTheWeightsForNaNOnTheWay) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  const std::string path = write(dir_, CheckpointLayout::kComfy, "model.safetensors");
  CpuBackend be(2);
  CheckpointLoadHooks hooks;
  hooks.scan_finite = true;
  ASSERT_TRUE(load_checkpoint(path, cfg_, be, CheckpointLayout::kAuto, nullptr, nullptr, &hooks).ok());
  if (hooks.direct_bytes == 0) GTEST_SKIP() << "the test's temp dir refuses O_DIRECT";
  EXPECT_TRUE(hooks.scanned.count("blocks.1.mlp.fc2.weight"));
  EXPECT_TRUE(hooks.scanned.count("blocks.0.adaln_proj.linear.weight"));
  const std::string name = "blocks.1.mlp.fc2.weight";
  Result<std::map<std::string, FileExtent>> ext =
      checkpoint_extents(path, cfg_, [&](const std::string& n) { return n == name; });
  ASSERT_TRUE(ext.ok()) << ext.status().to_string();
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(ext->at(name).offset + 128));
    const std::string ff(64, '\xff');  // a damaged download
    f.write(ff.data(), 64);
  }
  CheckpointLoadHooks again;
  again.scan_finite = true;
  Result<H3Weights> bad = load_checkpoint(path, cfg_, be, CheckpointLayout::kAuto, nullptr, nullptr, &again);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), ErrorCode::kFormat);
  EXPECT_NE(bad.status().message().find("tensor '" + name + "'"), std::string::npos) << bad.status().message();
  EXPECT_NE(bad.status().message().find("at element 64"), std::string::npos) << bad.status().message();
  CheckpointLoadHooks unchecked;  // scan_finite off: loads (a caller scans on its own)
  EXPECT_TRUE(load_checkpoint(path, cfg_, be, CheckpointLayout::kAuto, nullptr, nullptr, &unchecked).ok());
  EXPECT_TRUE(unchecked.scanned.empty());
}

TEST_F(DirectLoad, ReportsEachTensorInOrderAndStopsAtAHookError) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  const std::string path = write(dir_, CheckpointLayout::kComfy, "model.safetensors");
  CpuBackend be(2);
  std::vector<std::string> names;
  uint64_t last_done = 0, last_total = 0;
  bool monotonic = true;
  CheckpointLoadHooks hooks;
  hooks.loaded = [&](const std::string& name, uint64_t done, uint64_t total) {
    names.push_back(name);
    monotonic = monotonic && done >= last_done && done <= total;
    last_done = done;
    last_total = total;
    return Status::Ok();
  };
  ASSERT_TRUE(load_checkpoint(path, cfg_, be, CheckpointLayout::kAuto, nullptr, nullptr, &hooks).ok());
  EXPECT_TRUE(monotonic);
  EXPECT_EQ(last_done, last_total);
  EXPECT_EQ(last_total, hooks.direct_bytes + hooks.mapped_bytes);
  std::vector<std::string> want;
  for (const TensorSpec& s : h3_tensor_specs(cfg_))
    if (s.init != SynthInit::kRopeInvFreq || std::find(names.begin(), names.end(), s.name) != names.end())
      want.push_back(s.name);
  EXPECT_EQ(names, want);

  // A cancel arriving in block 1 stops the load there: no later tensor is read.
  int calls = 0;
  CheckpointLoadHooks cancel;
  cancel.loaded = [&](const std::string& name, uint64_t, uint64_t) {
    ++calls;
    return name.rfind("blocks.1.", 0) == 0 ? Status(ErrorCode::kCancelled, "cancelled") : Status::Ok();
  };
  Result<H3Weights> stopped = load_checkpoint(path, cfg_, be, CheckpointLayout::kAuto, nullptr, nullptr, &cancel);
  ASSERT_FALSE(stopped.ok());
  EXPECT_EQ(stopped.status().code(), ErrorCode::kCancelled);
  const auto first_of_block1 =
      std::find_if(want.begin(), want.end(), [](const std::string& n) { return n.rfind("blocks.1.", 0) == 0; });
  EXPECT_EQ(calls, static_cast<int>(first_of_block1 - want.begin()) + 1);
}

}  // namespace
}  // namespace vortex
