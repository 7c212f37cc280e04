// safetensors reader/writer tests: round trip of every dtype (random shapes and bytes, fresh seed per
// run), every malformed-header class giving a kFormat error that names the problem, the atomic writer
// (no temp file left, an existing file survives a failed write), the streaming writer, and sharded
// index files. The parser is also fuzzed (fuzz/safetensors_fuzz.cpp).
#include "io/safetensors.h"

#include <cstring>
#include <random>

#include <gtest/gtest.h>

#include "test_files.h"

namespace vortex {
namespace {

using testing::TempDir;

const DType kAllDTypes[] = {DType::kF64,    DType::kF32,    DType::kF16, DType::kBF16, DType::kF8E4M3,
                            DType::kF8E5M2, DType::kF8E8M0, DType::kI64, DType::kI32,  DType::kI16,
                            DType::kI8,     DType::kU8,     DType::kBool};

Tensor random_tensor(std::mt19937_64& rng, DType dtype, Shape shape) {
  Tensor t = Tensor::empty(std::move(shape), dtype);
  auto* p = static_cast<uint8_t*>(t.raw_data());
  for (size_t i = 0; i < t.nbytes(); ++i) p[i] = static_cast<uint8_t>(rng());
  if (dtype == DType::kBool)
    for (size_t i = 0; i < t.nbytes(); ++i) p[i] &= 1;
  return t;
}

// A raw safetensors image: 8-byte length + header text + data.
std::string image(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>(n >> (8 * i));
  return out + header + data;
}

Status parse(const std::string& img) {
  return parse_safetensors_buffer(reinterpret_cast<const uint8_t*>(img.data()), img.size(), "test.safetensors")
      .status();
}

TEST(SafetensorsTest, RoundTripEveryDtype) {
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  TempDir dir;
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (DType dt : kAllDTypes) {
    Shape shape;
    int nd = static_cast<int>(rng() % 4);
    for (int d = 0; d < nd; ++d) shape.push_back(static_cast<int64_t>(1 + rng() % 7));
    tensors.emplace_back(std::string("t.") + dtype_name(dt), random_tensor(rng, dt, shape));
  }
  tensors.emplace_back("empty", Tensor::empty({0, 3}, DType::kBF16));
  // A strided view is written in row-major order.
  Tensor base = random_tensor(rng, DType::kF32, {4, 6});
  Tensor strided = base.narrow(1, 1, 3).value();
  tensors.emplace_back("strided", strided);
  const std::string path = dir.path + "/rt.safetensors";
  std::map<std::string, std::string> meta = {{"format", "pt"}, {"note", "round trip"}};
  ASSERT_TRUE(write_safetensors(path, tensors, meta).ok());
  Result<SafetensorsFile> f = SafetensorsFile::open(path);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(f->metadata(), meta);
  EXPECT_TRUE(f->header().warnings.empty());
  EXPECT_EQ(f->header().data_offset % 64, 0u);
  EXPECT_EQ(f->entries().size(), tensors.size());
  for (const auto& [name, t] : tensors) {
    Result<Tensor> r = f->tensor(name);
    ASSERT_TRUE(r.ok()) << name;
    EXPECT_EQ(r->dtype(), t.dtype()) << name;
    EXPECT_EQ(r->shape(), t.shape()) << name;
    if (name == "strided") {
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 3; ++j)
          EXPECT_EQ(std::memcmp(&r->data<float>()[i * 3 + j], &base.data<float>()[i * 6 + j + 1], 4), 0)
              << i << "," << j;  // bits, not values: random bytes include NaNs
    } else if (t.nbytes()) {
      EXPECT_EQ(std::memcmp(r->raw_data(), t.raw_data(), t.nbytes()), 0) << name;
    }
  }
  EXPECT_EQ(testing::list_dir(dir.path).size(), 1u) << "temp file left behind";
  EXPECT_EQ(f->tensor("nope").status().code(), ErrorCode::kNotFound);
}

TEST(SafetensorsTest, ViewsOutliveTheFileObject) {
  TempDir dir;
  Tensor t = Tensor::empty({5}, DType::kI32);
  for (int i = 0; i < 5; ++i) t.data<int32_t>()[i] = 7 * i + 1;
  const std::string path = dir.path + "/v.safetensors";
  ASSERT_TRUE(write_safetensors(path, {{"x", t}}).ok());
  Tensor view;
  {
    Result<SafetensorsFile> f = SafetensorsFile::open(path);
    ASSERT_TRUE(f.ok());
    view = f->tensor("x").value();
  }
  for (int i = 0; i < 5; ++i) EXPECT_EQ(view.data<int32_t>()[i], 7 * i + 1);
}

struct BadCase {
  const char* what;
  std::string img;
  const char* expect;  // substring of the message
};

TEST(SafetensorsTest, MalformedFilesGiveFormatErrors) {
  const std::string ok_entry = R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  const std::string data8(8, '\x01');
  std::string huge_len(8, '\0');
  huge_len[4] = 1;  // 2^32 bytes > 100 MB
  std::string past_end(8, '\0');
  past_end[0] = 100;  // 100-byte header in a shorter file
  std::vector<BadCase> cases = {
      {"empty file", "", "too short"},
      {"truncated length", std::string("\x05\x00\x00", 3), "too short"},
      {"header > 100 MB", huge_len + "{}", "100 MB"},
      {"header past end", past_end + "{}", "past the end"},
      {"bad JSON", image("{\"a\":", ""), "not valid JSON"},
      {"non-object", image("[1,2]", ""), "must be a JSON object"},
      {"entry not object", image(R"({"a":3})", ""), "must be an object"},
      {"unknown dtype", image(R"({"a":{"dtype":"F128","shape":[1],"data_offsets":[0,16]}})", std::string(16, 'x')),
       "unknown dtype"},
      {"missing dtype", image(R"({"a":{"shape":[1],"data_offsets":[0,4]}})", "xxxx"), "dtype"},
      {"shape*dtype != bytes", image(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", data8), "needs 12"},
      {"range outside file", image(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", data8),
       "outside the 8-byte data section"},
      {"end before begin", image(R"({"a":{"dtype":"U8","shape":[0],"data_offsets":[5,4]}})", data8), "end before"},
      {"overlap",
       image(
           R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
           data8),
       "overlap"},
      {"duplicate names", image("{" + ok_entry + "," + ok_entry + "}", data8), "more than once"},
      {"duplicate field", image(R"({"a":{"dtype":"F32","dtype":"F32","shape":[2],"data_offsets":[0,8]}})", data8),
       "more than once"},
      {"metadata not object", image(R"({"__metadata__":"x"})", ""), "__metadata__"},
      {"metadata value not string", image(R"({"__metadata__":{"k":1}})", ""), "must be a string"},
      {"negative shape", image(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", data8), "non-negative"},
      {"float shape", image(R"({"a":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}})", data8), "non-negative"},
      {"negative offset", image(R"({"a":{"dtype":"U8","shape":[0],"data_offsets":[-1,0]}})", data8), "data_offsets"},
      {"three offsets", image(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8,8]}})", data8), "data_offsets"},
      {"unknown field", image(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}})", data8),
       "unexpected field"},
      {"overflowing shape",
       image(R"({"a":{"dtype":"F64","shape":[4611686018427387904,4611686018427387904],"data_offsets":[0,8]}})", data8),
       "more than 2^62"},
      {"deep nesting", image(std::string(200, '[') + std::string(200, ']'), ""), "not valid JSON"},
  };
  TempDir dir;
  for (const BadCase& c : cases) {
    Status s = parse(c.img);
    EXPECT_EQ(s.code(), ErrorCode::kFormat) << c.what << ": " << s.to_string();
    EXPECT_NE(s.message().find(c.expect), std::string::npos) << c.what << ": " << s.message();
    EXPECT_NE(s.message().find("test.safetensors"), std::string::npos) << c.what << " does not name the file";
    // Same through the file reader (which also names the path).
    const std::string path = dir.path + "/bad.safetensors";
    testing::write_file_bytes(path, c.img);
    Result<SafetensorsFile> f = SafetensorsFile::open(path);
    EXPECT_FALSE(f.ok()) << c.what;
    EXPECT_EQ(f.status().code(), ErrorCode::kFormat) << c.what << ": " << f.status().to_string();
  }
}

TEST(SafetensorsTest, GapsAndTrailingBytesAreReportedNotRejected) {
  std::string img = image(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[4,6]}})", std::string(10, 'z'));
  Result<SafetensorsHeader> h =
      parse_safetensors_buffer(reinterpret_cast<const uint8_t*>(img.data()), img.size(), "gap.safetensors");
  ASSERT_TRUE(h.ok()) << h.status().to_string();
  ASSERT_EQ(h->warnings.size(), 2u);
  EXPECT_NE(h->warnings[0].find("gap of 4"), std::string::npos);
  EXPECT_NE(h->warnings[1].find("4 trailing"), std::string::npos);
}

TEST(SafetensorsTest, MissingFileIsNotFound) {
  EXPECT_EQ(SafetensorsFile::open("/nonexistent/x.safetensors").status().code(), ErrorCode::kNotFound);
}

TEST(SafetensorsTest, AtomicWriterKeepsExistingFileOnFailure) {
  TempDir dir;
  const std::string path = dir.path + "/keep.safetensors";
  testing::write_file_bytes(path, "original contents");
  // Undefined tensor: rejected before anything is written.
  EXPECT_FALSE(write_safetensors(path, {{"x", Tensor()}}).ok());
  // Declared tensors not all written: the abandoned writer removes its temp file.
  {
    Tensor a = Tensor::zeros({4}, DType::kF32);
    auto w = SafetensorsStreamWriter::create(path, {{"a", DType::kF32, {4}}, {"b", DType::kF32, {4}}}, {});
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->write_next(a).ok());
    EXPECT_EQ(testing::list_dir(dir.path).size(), 2u);  // original + temp
    Status fin = (*w)->finish();
    EXPECT_FALSE(fin.ok());
    EXPECT_NE(fin.message().find("'b'"), std::string::npos) << fin.message();
  }
  // Shape mismatch mid-stream.
  {
    auto w = SafetensorsStreamWriter::create(path, {{"a", DType::kF32, {4}}}, {});
    ASSERT_TRUE(w.ok());
    Status s = (*w)->write_next(Tensor::zeros({5}, DType::kF32));
    EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  }
  EXPECT_EQ(testing::read_file_bytes(path), "original contents");
  EXPECT_EQ(testing::list_dir(dir.path), std::vector<std::string>{"keep.safetensors"});
  // Unwritable directory: an io error, nothing created.
  EXPECT_EQ(write_safetensors(dir.path + "/no/such/dir/x.safetensors", {{"a", Tensor::zeros({1}, DType::kU8)}}).code(),
            ErrorCode::kIo);
  // A successful write replaces the file.
  ASSERT_TRUE(write_safetensors(path, {{"a", Tensor::zeros({1}, DType::kU8)}}).ok());
  EXPECT_TRUE(SafetensorsFile::open(path).ok());
  EXPECT_EQ(testing::list_dir(dir.path), std::vector<std::string>{"keep.safetensors"});
}

TEST(SafetensorsTest, StreamWriterInPieces) {
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  TempDir dir;
  Tensor a = random_tensor(rng, DType::kBF16, {33, 17});
  const std::string path = dir.path + "/s.safetensors";
  auto w = SafetensorsStreamWriter::create(path, {{"a", DType::kBF16, {33, 17}}, {"z", DType::kU8, {0}}}, {});
  ASSERT_TRUE(w.ok());
  const auto* p = static_cast<const uint8_t*>(a.raw_data());
  size_t done = 0;
  while (done < a.nbytes()) {
    size_t n = std::min<size_t>(a.nbytes() - done, 1 + rng() % 100);
    ASSERT_TRUE((*w)->write_bytes(p + done, n).ok());
    done += n;
  }
  ASSERT_TRUE((*w)->write_next(Tensor::empty({0}, DType::kU8)).ok());
  ASSERT_TRUE((*w)->finish().ok());
  Result<SafetensorsFile> f = SafetensorsFile::open(path);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(std::memcmp(f->tensor("a")->raw_data(), a.raw_data(), a.nbytes()), 0);
}

TEST(SafetensorsTest, ShardedIndex) {
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  TempDir dir;
  Tensor a = random_tensor(rng, DType::kF32, {3, 4});
  Tensor b = random_tensor(rng, DType::kBF16, {5});
  Tensor c = random_tensor(rng, DType::kU8, {7});
  ASSERT_TRUE(write_safetensors(dir.path + "/m-1.safetensors", {{"a", a}, {"b", b}}, {{"k", "v"}}).ok());
  ASSERT_TRUE(write_safetensors(dir.path + "/m-2.safetensors", {{"c", c}}, {{"k", "v"}}).ok());
  SafetensorsIndex index;
  index.weight_map = {{"a", "m-1.safetensors"}, {"b", "m-1.safetensors"}, {"c", "m-2.safetensors"}};
  index.metadata["total_size"] = "67";
  const std::string ipath = dir.path + "/m.safetensors.index.json";
  ASSERT_TRUE(write_safetensors_index(ipath, index).ok());
  Result<SafetensorsIndex> back = read_safetensors_index(ipath);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(back->weight_map, index.weight_map);
  EXPECT_EQ(back->metadata.at("total_size"), "67");
  Result<SafetensorsSet> set = SafetensorsSet::open(ipath);
  ASSERT_TRUE(set.ok()) << set.status().to_string();
  EXPECT_EQ(set->files().size(), 2u);
  EXPECT_EQ(set->names().size(), 3u);
  EXPECT_EQ(set->metadata().at("k"), "v");
  EXPECT_EQ(std::memcmp(set->tensor("c")->raw_data(), c.raw_data(), 7), 0);
  EXPECT_EQ(std::memcmp(set->tensor("a")->raw_data(), a.raw_data(), a.nbytes()), 0);

  // Listed in the index but absent from the shard.
  SafetensorsIndex bad = index;
  bad.weight_map["d"] = "m-2.safetensors";
  ASSERT_TRUE(write_safetensors_index(ipath, bad).ok());
  Status s = SafetensorsSet::open(ipath).status();
  EXPECT_EQ(s.code(), ErrorCode::kFormat);
  EXPECT_NE(s.message().find("'d'"), std::string::npos) << s.message();
  // A shard tensor not listed for that shard.
  bad = index;
  bad.weight_map.erase("b");
  ASSERT_TRUE(write_safetensors_index(ipath, bad).ok());
  s = SafetensorsSet::open(ipath).status();
  EXPECT_EQ(s.code(), ErrorCode::kFormat);
  EXPECT_NE(s.message().find("'b'"), std::string::npos) << s.message();
  // Unsafe shard path.
  bad = index;
  bad.weight_map["a"] = "../m-1.safetensors";
  ASSERT_TRUE(write_safetensors_index(ipath, bad).ok());
  EXPECT_EQ(SafetensorsSet::open(ipath).status().code(), ErrorCode::kFormat);
  // Duplicate key in the index JSON.
  testing::write_file_bytes(ipath, R"({"weight_map":{"a":"m-1.safetensors","a":"m-2.safetensors"}})");
  s = SafetensorsSet::open(ipath).status();
  EXPECT_EQ(s.code(), ErrorCode::kFormat);
  EXPECT_NE(s.message().find("more than once"), std::string::npos) << s.message();
  // A tensor in two shards.
  ASSERT_TRUE(write_safetensors(dir.path + "/m-2.safetensors", {{"c", c}, {"a", a}}).ok());
  index.weight_map["a"] = "m-2.safetensors";
  ASSERT_TRUE(write_safetensors_index(ipath, index).ok());
  EXPECT_EQ(SafetensorsSet::open(ipath).status().code(), ErrorCode::kFormat);
}

}  // namespace
}  // namespace vortex
