// safetensors I/O: a validating parser (from memory, for the fuzzer), an mmap reader returning Tensor
// views onto the mapping, an atomic writer (temp file + fsync + rename) with a streaming variant for
// checkpoints that never fit in memory, and sharded `*.safetensors.index.json` support.
// Every malformed input is a kFormat Status naming the file and tensor. Tested in
// tests/io/safetensors_test.cpp; parse_safetensors_buffer is fuzzed by fuzz/safetensors_fuzz.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "vortex/status.h"
#include "vortex/tensor.h"

namespace vortex {

// Largest header we accept (the JSON after the 8-byte length).
constexpr uint64_t kMaxSafetensorsHeaderBytes = 100ull << 20;

struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::kU8;
  Shape shape;
  uint64_t begin = 0;  // byte offsets relative to the data section (after the header)
  uint64_t end = 0;
  uint64_t bytes() const { return end - begin; }
};

struct SafetensorsHeader {
  uint64_t header_bytes = 0;                    // N, the JSON length
  uint64_t data_offset = 0;                     // 8 + N: where the data section starts in the file
  uint64_t data_bytes = 0;                      // size of the data section
  std::vector<SafetensorsEntry> entries;        // sorted by begin offset
  std::map<std::string, std::string> metadata;  // __metadata__
  std::vector<std::string> warnings;            // gaps between tensors, trailing bytes
  const SafetensorsEntry* find(std::string_view name) const;
};

// Parses and validates a complete safetensors image in memory. `label` names the source in messages.
Result<SafetensorsHeader> parse_safetensors_buffer(const uint8_t* data, size_t size, std::string_view label);
// Same checks, given only the header bytes (the 8-byte length + JSON) and the total file size.
Result<SafetensorsHeader> parse_safetensors_header(const uint8_t* data, size_t available, uint64_t file_size,
                                                   std::string_view label);

// A read-only mapping of one safetensors file. Tensor views share the mapping (munmap when the last
// view and the file object are gone). Views are read-only memory: never write through them.
class SafetensorsFile {
 public:
  // follow_symlinks false: the last path component is opened with O_NOFOLLOW, and a symbolic link there is
  // refused (kInvalidArgument) however it got there.
  static Result<SafetensorsFile> open(const std::string& path, bool follow_symlinks = true);

  const std::string& path() const { return path_; }
  const SafetensorsHeader& header() const { return header_; }
  const std::vector<SafetensorsEntry>& entries() const { return header_.entries; }
  const std::map<std::string, std::string>& metadata() const { return header_.metadata; }
  uint64_t file_bytes() const { return file_bytes_; }
  bool contains(std::string_view name) const { return header_.find(name) != nullptr; }
  // A host view onto the mapping (no copy); kNotFound names the file if the tensor is absent.
  Result<Tensor> tensor(std::string_view name) const;

 private:
  std::string path_;
  uint64_t file_bytes_ = 0;
  SafetensorsHeader header_;
  std::shared_ptr<Storage> mapping_;
};

// ---- writing ----------------------------------------------------------------------------------

struct SafetensorsTensorInfo {
  std::string name;
  DType dtype = DType::kU8;
  Shape shape;
  uint64_t bytes() const { return static_cast<uint64_t>(shape_numel(shape)) * dtype_size(dtype); }
};

// Streaming writer: the header (all names, shapes, offsets) is written first, then each tensor in
// order via write_next / write_bytes. Data goes to `<path>.tmp.<pid>`; finish() fsyncs and renames it
// over `path`. Destroying an unfinished writer removes the temp file; an existing `path` is untouched.
class SafetensorsStreamWriter {
 public:
  static Result<std::unique_ptr<SafetensorsStreamWriter>> create(const std::string& path,
                                                                 std::vector<SafetensorsTensorInfo> tensors,
                                                                 const std::map<std::string, std::string>& metadata);
  ~SafetensorsStreamWriter();
  SafetensorsStreamWriter(const SafetensorsStreamWriter&) = delete;
  SafetensorsStreamWriter& operator=(const SafetensorsStreamWriter&) = delete;

  // Writes the next tensor; it must match the next declared name/dtype/shape and be a host tensor
  // (strided views are written in row-major order).
  Status write_next(const Tensor& host);
  // Appends raw bytes of the current tensor (for tensors produced in pieces); a tensor is complete
  // when its declared byte count has been written.
  Status write_bytes(const void* data, size_t bytes);
  Status finish();
  size_t next_index() const { return next_; }
  const std::string& temp_path() const { return temp_path_; }

 private:
  SafetensorsStreamWriter() = default;
  Status fail(Status s);
  std::string path_, temp_path_;
  int fd_ = -1;
  std::vector<SafetensorsTensorInfo> tensors_;
  size_t next_ = 0;
  uint64_t written_in_current_ = 0;
  bool finished_ = false;
};

// Writes `text` to `path` atomically (`<path>.tmp.<pid>` + fsync + rename).
Status write_text_atomic(const std::string& path, const std::string& text);

// Writes host tensors atomically (temp + fsync + rename).
Status write_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                         const std::map<std::string, std::string>& metadata = {});

// ---- sharded checkpoints (*.safetensors.index.json) -------------------------------------------

struct SafetensorsIndex {
  std::map<std::string, std::string> weight_map;  // tensor name -> shard file name (relative)
  std::map<std::string, std::string> metadata;    // "metadata" object, values stringified
};
Result<SafetensorsIndex> read_safetensors_index(const std::string& path);
Status write_safetensors_index(const std::string& path, const SafetensorsIndex& index);
bool is_safetensors_index_path(std::string_view path);

// One file or an index with its shards, behind one name -> tensor lookup.
class SafetensorsSet {
 public:
  // `path` is a .safetensors file or a *.safetensors.index.json. For an index every shard is opened
  // and cross-checked (each listed tensor exists in its shard, no shard tensor is unlisted, no
  // tensor appears twice).
  static Result<SafetensorsSet> open(const std::string& path);

  struct Ref {
    size_t file = 0;   // index into files()
    size_t entry = 0;  // index into files()[file].entries()
  };
  const std::string& path() const { return path_; }
  const std::vector<SafetensorsFile>& files() const { return files_; }
  // Names in (file, offset) order.
  const std::vector<std::string>& names() const { return names_; }
  const Ref* find(std::string_view name) const;
  const SafetensorsEntry& entry(const Ref& ref) const { return files_[ref.file].entries()[ref.entry]; }
  Result<Tensor> tensor(std::string_view name) const;
  // __metadata__ of the first file (all shards of our writer carry the same map).
  const std::map<std::string, std::string>& metadata() const;

 private:
  std::string path_;
  std::vector<SafetensorsFile> files_;
  std::vector<std::string> names_;
  std::map<std::string, Ref, std::less<>> refs_;
};

}  // namespace vortex
